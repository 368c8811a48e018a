"""Encrypted lakes (DuckDB's ``ATTACH ... (ENCRYPTED)``), both ways: what DuckDB writes we read exactly at every
snapshot and in the change feed; what we write (append, overwrite, delete, flush, compaction) is encrypted, each file
with its own key in the catalog, and DuckDB reads it exactly. Plus the attacker's cases: wrong, malformed and missing
keys, corrupt and truncated files, a 32-byte key, encrypted files in a plain lake and the reverse.

DuckDB 1.5.5 writes AES-GCM modules without AAD, which pyarrow cannot decrypt; io.encryption seals them again in
memory (ducklake-format-2.md §3).

Backends: the tests whose subject is what the catalog holds (keys per file, the encrypted flag, inlined rows, the
history and the feed) run on SQLite and PostgreSQL; the ones about the bytes of the files (row groups, pages,
dictionaries, deletion vectors, the attacker's damaged files and keys) on SQLite only.
"""

from __future__ import annotations

import base64
import hashlib
import logging
import os
import re
import sqlite3
import traceback
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pyarrow.parquet.encryption as pe
import pytest
from sqlalchemy import create_engine, text

import pyspark_ducklake as pdl
from pyspark_ducklake.duckdb_attach import extension_path, sql_string
from pyspark_ducklake.exceptions import DataFileError, EncryptedLakeError
from pyspark_ducklake.table.change_feed import table_changes
from tests.conformance.test_duckdb_writes_we_read import BROAD_DDL, broad_insert, duck_snapshots
from tests.support.bad_inputs import expect_bad_input
from tests.support.compare import canonical, canonical_rows, same_rows
from tests.support.duck import attach_sql, connect_duckdb


def duck_encrypted(catalog: Any, *, inlining_row_limit: int = 5, encrypted: str = ", ENCRYPTED") -> Any:
    """DuckDB with httpfs loaded (OpenSSL: DuckDB's own crypto module is read-only) and the lake attached."""
    con = connect_duckdb()
    con.execute(f"LOAD {sql_string(extension_path('duckdb_extension_httpfs', 'httpfs'))}")
    con.execute(attach_sql(catalog, inlining_row_limit=inlining_row_limit)[:-1] + encrypted + ")")
    return con


def catalog_rows(catalog: Any, sql: str) -> list[Any]:
    engine = create_engine(catalog.url)
    try:
        with engine.connect() as conn:
            return list(conn.execute(text(sql)).all())
    finally:
        engine.dispose()


def catalog_execute(catalog: Any, sql: str, **params: Any) -> None:
    engine = create_engine(catalog.url)
    try:
        with engine.begin() as conn:
            conn.execute(text(sql), params)
    finally:
        engine.dispose()


def file_rows(catalog: Any) -> list[tuple[str, str | None, int, int, str]]:
    """``(absolute path, key, size, footer_size, kind)`` of every data and delete file the catalog has."""
    rows = catalog_rows(
        catalog,
        "SELECT path, encryption_key, file_size_bytes, footer_size, 'data' FROM ducklake_data_file UNION ALL "
        "SELECT path, encryption_key, file_size_bytes, footer_size, format FROM ducklake_delete_file",
    )
    root = Path(catalog.data_path)
    out = []
    for path, key, size, footer, kind in rows:
        found = list(root.rglob(path))
        assert len(found) == 1, path
        out.append((str(found[0]), key, size, footer, kind))
    return out


def assert_every_file_encrypted(catalog: Any) -> None:
    """Every Parquet file is encrypted with its catalog key, sizes recorded as DuckDB records them, and unreadable
    without the key."""
    rows = file_rows(catalog)
    assert rows
    for path, key, size, footer, kind in rows:
        if kind == "puffin":
            continue
        data = Path(path).read_bytes()
        assert data[:4] == b"PARE" and data[-4:] == b"PARE", path
        assert size == len(data), path
        assert footer == int.from_bytes(data[-8:-4], "little"), path
        assert key is not None and len(base64.b64decode(key, validate=True)) in (16, 32), path
        with pytest.raises(OSError):
            pq.read_table(path)
    keys = [k for _, k, _, _, kind in rows if kind != "puffin"]
    assert len(set(keys)) >= len(keys) - sum(1 for r in rows if r[4] != "data"), "keys are reused"


def page_types(data: bytes, key: bytes, row_group: int, column: int) -> list[int]:
    """The page types (0 data, 2 dictionary) of one column chunk of DuckDB's encrypted file, walking its modules."""
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    from pyspark_ducklake.io import thrift_compact as tc

    def module(pos: int) -> tuple[bytes, int]:
        n = int.from_bytes(data[pos : pos + 4], "little")
        return AESGCM(key).decrypt(data[pos + 4 : pos + 16], data[pos + 16 : pos + 4 + n], None), pos + 4 + n

    footer_len = int.from_bytes(data[-8:-4], "little")
    _, start = tc.decode_struct(data, len(data) - 8 - footer_len)
    meta, _ = tc.decode_struct(module(start)[0])
    md = meta.get(4).value.items[row_group].get(1).value.items[column].get(3).value
    pos = md.get(11).value if md.get(11) is not None else md.get(9).value
    stop = pos + md.get(7).value
    kinds = []
    while pos < stop:
        head, pos = module(pos)
        kinds.append(tc.decode_struct(head)[0].get(1).value)
        _, pos = module(pos)
    return kinds


def duck_feed(con: Any, table: str, start: int, end: int) -> Counter[tuple[Any, ...]]:
    t = con.execute(f"SELECT * FROM ducklake_table_changes('lake', 'main', '{table}', {start}, {end})").to_arrow_table()
    return Counter(tuple(canonical(v) for v in r.values()) for r in t.to_pylist())


def our_feed(lake: pdl.Lake, table: str, start: int, end: int) -> Counter[tuple[Any, ...]]:
    t = table_changes(lake.engine, lake.data_path, "main", table, start, end, fmt=lake.info.format)
    cols = [c for c in t.column_names if c not in ("_snapshot_id", "_rowid", "_change_type", "_commit_timestamp")]
    t = t.select(["_snapshot_id", "_rowid", "_change_type", *cols])
    return Counter(tuple(canonical(v) for v in r.values()) for r in t.to_pylist())


def test_duckdb_encrypted_history_reads_exactly_at_every_snapshot_and_in_the_feed(catalog: Any) -> None:
    con = duck_encrypted(catalog)
    try:
        con.execute("SET threads = 1")  # deterministic delete-file snapshots in DuckDB's feed (test_table_changes)
        con.execute(BROAD_DDL)
        con.execute(broad_insert(0, 3))  # inlined
        con.execute(broad_insert(3, 300))  # Parquet
        con.execute("DELETE FROM lake.main.t WHERE id BETWEEN 100 AND 150")  # a delete file
        con.execute("UPDATE lake.main.t SET s = 'updated', i32 = -1 WHERE id IN (1, 20, 200)")
        con.execute("CALL ducklake_flush_inlined_data('lake')")  # a flushed data file and its delete file
        con.execute("DELETE FROM lake.main.t WHERE id IN (3, 4)")
        # several row groups and pages, dictionary pages (few distinct strings), NULLs
        con.execute("CREATE TABLE lake.main.big (id BIGINT, k VARCHAR, v DOUBLE, l INTEGER[], s STRUCT(a INT))")
        con.execute(
            "INSERT INTO lake.main.big SELECT i, CASE WHEN i % 13 = 0 THEN NULL ELSE 'k' || (i % 7) END, "
            "CASE WHEN i % 17 = 0 THEN NULL ELSE i / 4 END, CASE WHEN i % 19 = 0 THEN NULL ELSE [i, NULL] END, "
            "{'a': i::INT} FROM range(300000) r(i)"
        )
        con.execute("DELETE FROM lake.main.big WHERE id % 1000 = 0")
        snapshots = duck_snapshots(con)
        expected = {
            s: canonical_rows(con.execute(f"SELECT * FROM lake.main.t AT (VERSION => {s})").to_arrow_table())
            for s in snapshots
            if s >= 2
        }
        big = {
            s: con.execute(f"SELECT * FROM lake.main.big AT (VERSION => {s})").to_arrow_table() for s in snapshots[-2:]
        }
        last = snapshots[-1]
        feed = duck_feed(con, "t", 0, last)
        big_feed = con.execute(
            f"SELECT snapshot_id, rowid, change_type, * EXCLUDE (snapshot_id, rowid, change_type) "
            f"FROM ducklake_table_changes('lake', 'main', 'big', 0, {last})"
        ).to_arrow_table()
        per_step = {(s - 1, s): duck_feed(con, "t", s, s) for s in range(3, snapshots[-3] + 1)}
    finally:
        con.close()
    assert_every_file_encrypted(catalog)
    lake = pdl.connect(catalog.url)
    assert lake.catalog_info.encrypted
    for s, rows in expected.items():
        assert canonical_rows(lake.scan("main.t", snapshot=s)) == rows, f"t at snapshot {s}"
    assert our_feed(lake, "t", 0, last) == feed
    for s, table in big.items():  # 300,000 rows: compared in Arrow
        assert same_rows(lake.scan("main.big", snapshot=s), table, ["id"]), f"big at snapshot {s}"
    ours = table_changes(lake.engine, lake.data_path, "main", "big", 0, last, fmt=lake.info.format)
    ours = ours.select(["_snapshot_id", "_rowid", "_change_type", "id", "k", "v", "l", "s"])
    assert same_rows(ours, big_feed, ["_snapshot_id", "_rowid", "_change_type"])
    for (_, s), feed in per_step.items():
        assert our_feed(lake, "t", s, s) == feed, f"feed of snapshot {s}"
    lake.close()


def test_duckdbs_files_with_row_groups_pages_and_dictionaries_read_exactly(sqlite_catalog: Any) -> None:
    """DuckDB's encrypted files with several row groups, several data pages in one chunk and dictionary pages: the
    decryption walks every module of every chunk (shapes checked on the files themselves)."""
    from pyspark_ducklake.io import encryption as enc

    catalog = sqlite_catalog

    con = duck_encrypted(catalog, inlining_row_limit=0)
    try:
        con.execute("CREATE TABLE lake.main.big (id BIGINT, k VARCHAR)")
        con.execute("INSERT INTO lake.main.big SELECT i, 'k' || (i % 7) FROM range(300000) r(i)")
        expected = canonical_rows(con.execute("SELECT * FROM lake.main.big").to_arrow_table())
        # DuckDB starts a new page past 100 MB of values: 1100 values of 100 kB make two pages
        con.execute("CREATE TABLE lake.main.wide (id BIGINT, s VARCHAR)")
        con.execute("INSERT INTO lake.main.wide SELECT i, i::VARCHAR || repeat('x', 100000) FROM range(1100) r(i)")
        wide = con.execute("SELECT id, md5(s), length(s) FROM lake.main.wide ORDER BY id").fetchall()
    finally:
        con.close()
    (path, key, *_), (wide_path, wide_key, *_) = file_rows(catalog)
    data = Path(wide_path).read_bytes()
    assert page_types(data, enc.decode_key(wide_key, wide_path), 0, 1).count(0) >= 2  # several data pages
    lake = pdl.connect(catalog.url)
    got = lake.scan("main.wide").sort_by("id")
    assert [
        (i, hashlib.md5(s.encode()).hexdigest(), len(s)) for i, s in zip(*got.to_pydict().values(), strict=True)
    ] == wide
    lake.close()
    data = Path(path).read_bytes()
    pf = enc.open_encrypted(data, enc.decode_key(key, path), path)
    assert pf.metadata.num_row_groups >= 2
    assert pf.metadata.row_group(0).column(1).has_dictionary_page
    assert page_types(data, enc.decode_key(key, path), 0, 1)[0] == 2  # a dictionary page first
    assert canonical_rows(pf.read()) == expected
    lake = pdl.connect(catalog.url)
    assert canonical_rows(lake.scan("main.big")) == expected
    lake.close()


def test_every_python_write_into_an_encrypted_lake_is_encrypted_and_duckdb_reads_it_exactly(catalog: Any) -> None:
    con = duck_encrypted(catalog)
    try:
        con.execute("CREATE TABLE lake.main.t (id INT, s VARCHAR, l INT[], iv INTERVAL)")
        con.execute("INSERT INTO lake.main.t SELECT i, 's' || i, [i], INTERVAL (i) DAY FROM range(100) r(i)")
    finally:
        con.close()
    lake = pdl.connect(catalog.url, data_inlining_row_limit=5)

    def rows(ids: range, tag: str) -> pa.Table:
        return pa.table(
            {
                "id": pa.array(list(ids), pa.int32()),
                "s": [None if i % 3 == 0 else f"{tag}{i}" for i in ids],
                "l": [[i, None] for i in ids],
                "iv": pa.array([pa.MonthDayNano([1, i, 1_000_000]) for i in ids], pa.month_day_nano_interval()),
            }
        )

    lake.append("main.t", rows(range(1000, 1050), "file"))  # a data file (with INTERVAL: footer edited)
    lake.append("main.t", rows(range(2000, 2003), "inl"))  # inlined rows
    lake.delete("main.t", [("id", "<", 10)])  # a delete file on DuckDB's file
    lake.delete("main.t", [("id", "in", [1001, 1002, 2000])])  # a delete file on ours, an inlined delete
    lake.delete("main.t", [("id", "=", 1003)])  # DuckDB's delete file replaced by a cumulative one
    lake.flush_inlined_data("main.t")  # a data file and a delete file from the catalog's rows
    lake.append("main.t", rows(range(3000, 3040), "more"))
    lake.merge_adjacent_files("main.t")  # compaction reads every encrypted file and writes one
    lake.overwrite("main.t", rows(range(4000, 4030), "over"), filter=[("id", ">=", 3030)])
    ours = {s.snapshot_id: canonical_rows(lake.scan("main.t", snapshot=s.snapshot_id)) for s in lake.snapshots()[2:]}
    lake.close()
    assert_every_file_encrypted(catalog)
    con = duck_encrypted(catalog, encrypted="")  # the catalog's setting: DuckDB needs no ENCRYPTED to decrypt
    try:
        for s, expected in ours.items():
            got = canonical_rows(con.execute(f"SELECT * FROM lake.main.t AT (VERSION => {s})").to_arrow_table())
            assert got == expected, f"snapshot {s}"
        con.execute("INSERT INTO lake.main.t SELECT i, 'duck', [i], INTERVAL 1 DAY FROM range(5000, 5100) r(i)")
        con.execute("DELETE FROM lake.main.t WHERE id BETWEEN 4000 AND 4010")
        final = canonical_rows(con.execute("SELECT * FROM lake.main.t").to_arrow_table())
    finally:
        con.close()
    lake = pdl.connect(catalog.url)
    assert canonical_rows(lake.scan("main.t")) == final
    lake.close()


def test_connect_encrypted_creates_an_encrypted_lake_that_duckdb_reads(catalog: Any) -> None:
    lake = pdl.connect(catalog.url, catalog.data_path, encrypted="true", data_inlining_row_limit=0)
    assert lake.catalog_info.encrypted
    lake.create_table("main.t", pa.schema([("id", pa.int64()), ("s", pa.string())]))
    lake.append("main.t", pa.table({"id": list(range(10)), "s": [f"v{i}" for i in range(10)]}))
    lake.close()
    assert catalog_rows(catalog, "SELECT value FROM ducklake_metadata WHERE key = 'encrypted'") == [("true",)]
    assert_every_file_encrypted(catalog)
    con = duck_encrypted(catalog, encrypted="")
    try:
        assert sorted(con.execute("SELECT * FROM lake.main.t").fetchall()) == [(i, f"v{i}") for i in range(10)]
        con.execute("INSERT INTO lake.main.t VALUES (10, 'duck')")
    finally:
        con.close()
    lake = pdl.connect(catalog.url, encrypted=True)  # matching the lake's setting: accepted
    assert lake.scan("main.t").num_rows == 11
    with expect_bad_input("encrypted-option-mismatch", lake):
        pdl.connect(catalog.url, encrypted="false")
    lake.close()


def test_encrypted_true_on_a_plain_lake_is_refused_as_duckdb_refuses_it(catalog: Any) -> None:
    lake = pdl.connect(catalog.url, catalog.data_path)
    assert not lake.catalog_info.encrypted
    with expect_bad_input("encrypted-option-mismatch", lake):
        pdl.connect(catalog.url, encrypted=True)
    lake.close()


# --- the attacker's cases ---------------------------------------------------------------------------------------


@pytest.fixture
def duck_lake(sqlite_catalog: Any) -> Any:
    """An encrypted lake DuckDB wrote: one data file (ids 0..99) and its delete file (ids < 5). SQLite only: the
    attacker's cases damage files and keys, not the catalog SQL (keys are stored on both backends above)."""
    catalog = sqlite_catalog
    con = duck_encrypted(catalog, inlining_row_limit=0)
    try:
        con.execute("CREATE TABLE lake.main.t (id INT, s VARCHAR)")
        con.execute("INSERT INTO lake.main.t SELECT i, 's' || i FROM range(100) r(i)")
        con.execute("DELETE FROM lake.main.t WHERE id < 5")
    finally:
        con.close()
    return catalog


def _data_file(catalog: Any) -> tuple[str, str]:
    path, key, *_ = next(r for r in file_rows(catalog) if r[4] == "data")
    assert key is not None
    return path, key


def test_a_wrong_key_is_a_typed_error_naming_the_file_without_key_bytes(
    duck_lake: Any, caplog: pytest.LogCaptureFixture
) -> None:
    path, key = _data_file(duck_lake)
    wrong = base64.b64encode(os.urandom(16)).decode()
    catalog_execute(duck_lake, "UPDATE ducklake_data_file SET encryption_key = :k", k=wrong)
    lake = pdl.connect(duck_lake.url)
    caplog.set_level(logging.DEBUG)
    with expect_bad_input("encrypted-key-wrong", lake) as err:
        lake.scan("main.t")
    message = str(err.value)
    assert os.path.basename(path) in message
    for secret in (wrong, key, base64.b64decode(wrong).hex(), base64.b64decode(key).hex()):
        assert secret not in message and secret not in caplog.text
    shown = "".join(traceback.format_exception(err.value))
    assert wrong not in shown and key not in shown
    lake.close()


@pytest.mark.parametrize("bad_key", ["not base64!", base64.b64encode(b"short").decode(), ""])
def test_a_malformed_or_empty_key_is_a_typed_error(duck_lake: Any, bad_key: str) -> None:
    catalog_execute(duck_lake, "UPDATE ducklake_data_file SET encryption_key = :k", k=bad_key)
    lake = pdl.connect(duck_lake.url)
    case = "encrypted-key-missing" if bad_key == "" else "encrypted-key-wrong"
    with expect_bad_input(case, lake):
        lake.scan("main.t")
    lake.close()


def test_a_missing_key_in_an_encrypted_lake_is_refused_as_duckdb_refuses_it(duck_lake: Any) -> None:
    catalog_execute(duck_lake, "UPDATE ducklake_delete_file SET encryption_key = NULL")
    lake = pdl.connect(duck_lake.url)
    with expect_bad_input("encrypted-key-missing", lake) as err:
        lake.scan("main.t")
    assert "-delete.parquet" in str(err.value)
    with expect_bad_input("encrypted-key-missing", lake):
        lake.table_changes("main.t", 0, lake.current_snapshot_id())
    lake.close()
    con = duck_encrypted(duck_lake, encrypted="")
    try:
        with pytest.raises(Exception, match="does not have an encryption key"):
            con.execute("SELECT * FROM lake.main.t").fetchall()
    finally:
        con.close()


@pytest.mark.parametrize("damage", ["flip-page-byte", "flip-footer-byte", "truncate-tail", "truncate-half"])
def test_a_corrupt_or_truncated_encrypted_file_is_a_typed_error(duck_lake: Any, damage: str) -> None:
    path, _ = _data_file(duck_lake)
    data = bytearray(Path(path).read_bytes())
    if damage == "flip-page-byte":
        data[40] ^= 0x01  # inside the first page header or page
    elif damage == "flip-footer-byte":
        data[-20] ^= 0x01  # inside the encrypted footer's tag
    elif damage == "truncate-tail":
        data = data[:-3]
    else:
        data = data[: len(data) // 2]
    Path(path).write_bytes(bytes(data))
    lake = pdl.connect(duck_lake.url)
    with expect_bad_input("encrypted-key-wrong", lake) as err:
        lake.scan("main.t")
    assert os.path.basename(path) in str(err.value)
    lake.close()


def test_a_file_pyarrow_encrypted_with_a_32_byte_key_reads(duck_lake: Any) -> None:
    """AES-256: DuckDB reads pyarrow's files with 32-byte keys (§3.4), and so do we."""
    path, _ = _data_file(duck_lake)
    lake = pdl.connect(duck_lake.url)
    before = canonical_rows(lake.scan("main.t"))
    from pyspark_ducklake.io import encryption as enc

    old_key = catalog_rows(duck_lake, "SELECT encryption_key FROM ducklake_data_file")[0][0]
    table = enc.open_encrypted(Path(path).read_bytes(), enc.decode_key(old_key, path), path).read()
    key = os.urandom(32)
    with pq.ParquetWriter(
        path, table.schema, encryption_properties=pe.create_encryption_properties(footer_key=key)
    ) as w:
        w.write_table(table)
    data = Path(path).read_bytes()
    catalog_execute(
        duck_lake,
        "UPDATE ducklake_data_file SET encryption_key = :k, file_size_bytes = :n, footer_size = :f",
        k=base64.b64encode(key).decode(),
        n=len(data),
        f=int.from_bytes(data[-8:-4], "little"),
    )
    assert canonical_rows(lake.scan("main.t")) == before
    lake.close()
    con = duck_encrypted(duck_lake, encrypted="")
    try:
        assert canonical_rows(con.execute("SELECT * FROM lake.main.t").to_arrow_table()) == before
    finally:
        con.close()


def test_an_encrypted_file_in_a_lake_marked_unencrypted_is_refused_as_duckdb_refuses_it(duck_lake: Any) -> None:
    catalog_execute(duck_lake, "UPDATE ducklake_metadata SET value = 'false' WHERE key = 'encrypted'")
    lake = pdl.connect(duck_lake.url)
    assert not lake.catalog_info.encrypted
    with expect_bad_input("encrypted-file-plain-lake", lake) as err:
        lake.scan("main.t")
    assert ".parquet is encrypted" in str(err.value)
    lake.close()
    con = duck_encrypted(duck_lake, encrypted="")
    try:
        with pytest.raises(Exception, match="is encrypted, but 'encryption_config' was not set"):
            con.execute("SELECT * FROM lake.main.t").fetchall()
    finally:
        con.close()


def test_a_plaintext_file_in_an_encrypted_lake_is_refused_as_duckdb_refuses_it(duck_lake: Any) -> None:
    path, key = _data_file(duck_lake)
    from pyspark_ducklake.io import encryption as enc

    table = enc.open_encrypted(Path(path).read_bytes(), enc.decode_key(key, path), path).read()
    pq.write_table(table, path)
    lake = pdl.connect(duck_lake.url)
    with expect_bad_input("plain-file-encrypted-lake", lake):
        lake.scan("main.t")
    lake.close()


def test_inlined_rows_and_deletes_stay_plaintext_in_an_encrypted_lake(catalog: Any) -> None:
    """As DuckDB keeps them: the catalog holds inlined rows in clear, only files are encrypted."""
    lake = pdl.connect(catalog.url, catalog.data_path, encrypted=True, data_inlining_row_limit=10)
    lake.create_table("main.t", pa.schema([("id", pa.int64()), ("s", pa.string())]))
    lake.append("main.t", pa.table({"id": [1, 2, 3], "s": ["clear", "text", "gone"]}))
    lake.delete("main.t", [("id", "=", 3)])  # an inlined row ends in the catalog: no delete file
    lake.close()
    assert not file_rows(catalog)
    if catalog.url.startswith("sqlite"):
        db = sqlite3.connect(catalog.url.split("///", 1)[1])
        names = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE name LIKE 'ducklake_inlined_data%'")]
        assert any("clear" in str(r) for n in names for r in db.execute(f'SELECT * FROM "{n}"'))
        db.close()
    con = duck_encrypted(catalog, encrypted="")
    try:
        assert sorted(con.execute("SELECT * FROM lake.main.t").fetchall()) == [(1, "clear"), (2, "text")]
    finally:
        con.close()


def test_a_large_python_write_with_row_groups_pages_and_dictionaries_reads_in_duckdb(sqlite_catalog: Any) -> None:
    """Our encrypted file with two row groups, several pages per chunk, dictionary pages, lists, structs and NULLs:
    DuckDB reads it exactly (pyarrow's own encryption would fail there: DuckDB checks its AADs only for flat
    columns' first pages)."""
    catalog = sqlite_catalog
    n = 150_000
    lake = pdl.connect(catalog.url, catalog.data_path, encrypted=True, data_inlining_row_limit=0)
    table = pa.table(
        {
            "id": pa.array(range(n), pa.int64()),
            "k": [None if i % 11 == 0 else f"k{i % 7}" for i in range(n)],
            "l": [None if i % 13 == 0 else [i, None] for i in range(n)],
            "st": [{"a": i, "b": None if i % 3 else f"b{i}"} for i in range(n)],
        }
    )
    lake.create_table("main.t", table.schema)
    lake.append("main.t", table)
    ours = canonical_rows(lake.scan("main.t"))
    lake.close()
    assert_every_file_encrypted(catalog)
    (path, key, *_), *_ = file_rows(catalog)
    assert len(page_types(Path(path).read_bytes(), base64.b64decode(key), 0, 0)) >= 2
    assert page_types(Path(path).read_bytes(), base64.b64decode(key), 0, 1)[0] == 2
    con = duck_encrypted(catalog, encrypted="")
    try:
        assert canonical_rows(con.execute("SELECT * FROM lake.main.t").to_arrow_table()) == ours
        assert con.execute("SELECT count(*) FROM lake.main.t").fetchone() == (n,)
    finally:
        con.close()


def test_a_commit_failing_in_an_encrypted_lake_shows_no_key(
    sqlite_catalog: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """The catalog refuses the file's row: the error (and its chain, and the logs) must not quote the statement's
    parameters, which hold the new file's key."""
    lake = pdl.connect(sqlite_catalog.url, sqlite_catalog.data_path, encrypted=True, data_inlining_row_limit=0)
    lake.create_table("main.t", pa.schema([("id", pa.int64())]))
    db = sqlite3.connect(sqlite_catalog.url.split("///", 1)[1])
    db.execute(
        "CREATE TRIGGER refuse BEFORE INSERT ON ducklake_data_file BEGIN SELECT RAISE(ABORT, 'refused here'); END"
    )
    db.commit()
    db.close()
    caplog.set_level(logging.DEBUG)
    with pytest.raises(Exception, match="refused here") as err:
        lake.append("main.t", pa.table({"id": list(range(100))}))
    shown = "".join(traceback.format_exception(err.value)) + caplog.text
    assert not re.search(r"[A-Za-z0-9+/]{22}==", shown), shown[-3000:]
    assert not list(Path(sqlite_catalog.data_path).rglob("*.parquet"))  # the attempt's file was removed
    lake.close()


def test_a_key_on_a_plain_lakes_file_is_ignored_as_duckdb_ignores_it(catalog: Any) -> None:
    """DuckDB reads encryption_key only when the lake says encrypted: a key on a plaintext file changes nothing."""
    lake = pdl.connect(catalog.url, catalog.data_path, data_inlining_row_limit=0)
    lake.create_table("main.t", pa.schema([("id", pa.int64())]))
    lake.append("main.t", pa.table({"id": [1, 2, 3]}))
    catalog_execute(
        catalog, "UPDATE ducklake_data_file SET encryption_key = :k", k=base64.b64encode(b"k" * 16).decode()
    )
    assert sorted(lake.scan("main.t").column("id").to_pylist()) == [1, 2, 3]
    lake.close()
    con = duck_encrypted(catalog, encrypted="")
    try:
        assert sorted(con.execute("SELECT id FROM lake.main.t").fetchall()) == [(1,), (2,), (3,)]
    finally:
        con.close()


def test_a_missing_encrypted_file_is_a_missing_file_not_a_decryption_error(duck_lake: Any) -> None:
    path, _ = _data_file(duck_lake)
    os.remove(path)
    lake = pdl.connect(duck_lake.url)
    with pytest.raises(DataFileError, match="is missing") as err:
        lake.scan("main.t")
    assert not isinstance(err.value, EncryptedLakeError)
    lake.close()


def test_deletion_vectors_in_an_encrypted_lake_stay_plaintext_both_ways(sqlite_catalog: Any) -> None:
    """DuckDB's DVs in an encrypted lake are plaintext blobs whose rows carry a key it never uses; we read them, and
    ours (with ``write_deletion_vectors`` on) are written the same way, which DuckDB reads."""
    catalog = sqlite_catalog
    con = duck_encrypted(catalog, inlining_row_limit=0, encrypted=", ENCRYPTED, WRITE_DELETION_VECTORS true")
    try:
        con.execute("CREATE TABLE lake.main.t (id INT, s VARCHAR)")
        con.execute("INSERT INTO lake.main.t SELECT i, 's' || i FROM range(1000) r(i)")
        con.execute("DELETE FROM lake.main.t WHERE id % 7 = 0")
        con.execute("CALL lake.set_option('write_deletion_vectors', true)")
        duck = canonical_rows(con.execute("SELECT * FROM lake.main.t").to_arrow_table())
    finally:
        con.close()
    lake = pdl.connect(catalog.url, data_inlining_row_limit=0)
    assert canonical_rows(lake.scan("main.t")) == duck
    lake.delete("main.t", [("id", "<", 100)])  # merges DuckDB's DV into one of ours
    lake.append("main.t", pa.table({"id": pa.array(range(2000, 2050), pa.int32()), "s": ["x"] * 50}))
    lake.delete("main.t", [("id", ">=", 2040)])  # a first DV of our own encrypted file
    ours = canonical_rows(lake.scan("main.t"))
    lake.close()
    puffins = [r for r in file_rows(catalog) if r[4] == "puffin"]
    assert len(puffins) == 2
    for path, key, *_ in puffins:
        assert not Path(path).read_bytes().startswith(b"PARE") and key is not None, path
    assert_every_file_encrypted(catalog)
    con = duck_encrypted(catalog, inlining_row_limit=0, encrypted="")
    try:
        assert canonical_rows(con.execute("SELECT * FROM lake.main.t").to_arrow_table()) == ours
    finally:
        con.close()
