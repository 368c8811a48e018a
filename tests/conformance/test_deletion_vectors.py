"""Deletion vectors (``format='puffin'`` delete files, ducklake-format-2.md §2) written by DuckDB are read exactly.

DuckDB 1.5.5 writes them when ``write_deletion_vectors`` is on (attach option, or the persisted option, global or per
table): deletes, a second delete of the same file (one merged DV replaces the old one, §2.4), updates, and a flush
of inlined deletes that writes Parquet delete files beside DVs. We read every snapshot as DuckDB does through scan,
the change feed, ``read_table`` (Spark's Parquet reader) and the ``ducklake`` data source. A DV merge loses history in
DuckDB (time travel to before it shows the merged rows back); reading the catalog rows as they are reproduces what
DuckDB shows, so every snapshot is compared, the ones across a merge included.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from functools import reduce
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from sqlalchemy import create_engine, text

import pyspark_ducklake as pdl
from pyspark_ducklake.io.deletion_vector import decode, encode
from tests.support.bad_inputs import expect_bad_input
from tests.support.catalogs import CatalogLocation, sqlite_location
from tests.support.compare import canonical_rows, same_rows
from tests.support.duck import attach_sql, attached, connect_duckdb

LIMIT = 10


def dv_attach(catalog: Any, *, deletion_vectors: bool) -> duckdb.DuckDBPyConnection:
    con = connect_duckdb()
    sql = attach_sql(catalog, "lake", LIMIT)
    if deletion_vectors:
        sql = sql[:-1] + ", WRITE_DELETION_VECTORS true)"
    con.execute(sql)
    return con


def duckdb_dv_history(catalog: Any) -> None:
    """Table ``t``: every kind of delete DuckDB writes with deletion vectors on."""
    con = dv_attach(catalog, deletion_vectors=True)
    try:
        for sql in [
            "CREATE TABLE lake.t(id INTEGER, s VARCHAR)",
            "INSERT INTO lake.t SELECT i, 's' || i FROM range(70000) r(i)",  # two Roaring containers
            "INSERT INTO lake.t SELECT i, 'b' || i FROM range(70000, 73000) r(i)",
            "DELETE FROM lake.t WHERE id % 7 = 0",  # a DV on each file
            "DELETE FROM lake.t WHERE id IN (1, 69999, 70001)",  # a second delete: merged DVs replace the first
            "UPDATE lake.t SET s = 'u' || id WHERE id % 1000 = 3",
            "DELETE FROM lake.t WHERE id = 2",  # small: an inlined delete
            "CALL ducklake_flush_inlined_data('lake')",  # writes a Parquet delete file, beside DVs
            "INSERT INTO lake.t VALUES (-1, 'x'), (-2, 'y')",
            "DELETE FROM lake.t WHERE id = -1",
            "DELETE FROM lake.t WHERE id BETWEEN 10 AND 5000",  # a third delete of a file that had a merged DV
        ]:
            con.execute(sql)
    finally:
        con.close()


def delete_formats(catalog: Any, table: str = "t") -> list[str]:
    engine = create_engine(catalog.url)
    with engine.connect() as conn:
        rows = conn.execute(
            text(
                "SELECT d.format FROM ducklake_delete_file d JOIN ducklake_table t ON t.table_id = d.table_id "
                "WHERE t.table_name = :t AND t.end_snapshot IS NULL ORDER BY d.delete_file_id"
            ),
            {"t": table},
        ).all()
    engine.dispose()
    return [r[0] for r in rows]


def snapshots_of(con: duckdb.DuckDBPyConnection, table: str) -> list[int]:
    out = []
    for (s,) in con.execute("SELECT snapshot_id FROM lake.snapshots() ORDER BY 1").fetchall():
        try:
            con.execute(f"SELECT 1 FROM lake.{table} AT (VERSION => {s}) LIMIT 0")
        except duckdb.Error:
            continue
        out.append(s)
    return out


def duck_rows(con: duckdb.DuckDBPyConnection, table: str, snapshot: int) -> list[Any]:
    return canonical_rows(con.execute(f"SELECT * FROM lake.{table} AT (VERSION => {snapshot})").to_arrow_table())


def reads_as_duckdb(lake: pdl.Lake, con: duckdb.DuckDBPyConnection, table: str, snapshot: int) -> bool:
    """Our scan of ``id, s`` at ``snapshot`` equals DuckDB's, compared in Arrow (``canonical_rows`` of these tables
    of 70,000 rows cost most of this module's time; INTEGER and VARCHAR compare exactly in Arrow)."""
    theirs = con.execute(f"SELECT id, s FROM lake.{table} AT (VERSION => {snapshot})").to_arrow_table()
    ours = lake.scan(f"main.{table}", snapshot=snapshot)
    return ours.column_names == ["id", "s"] and same_rows(ours, theirs, ["id", "s"])


def duck_arrow(con: duckdb.DuckDBPyConnection, table: str, snapshot: int) -> pa.Table:
    """``id, s`` at ``snapshot`` as DuckDB reads them, ordered, as Arrow (large tables compare fast)."""
    return con.execute(f"SELECT id, s FROM lake.{table} AT (VERSION => {snapshot}) ORDER BY id, s").to_arrow_table()


def duck_feed(con: duckdb.DuckDBPyConnection, start: int, end: int, table: str = "t") -> list[tuple[Any, ...]]:
    return sorted(
        con.execute(
            f"SELECT snapshot_id, rowid, change_type, id, s FROM ducklake_table_changes('lake', 'main', '{table}', "
            f"{start}, {end})"
        ).fetchall()
    )


def our_feed(lake: pdl.Lake, start: int, end: int, table: str = "t") -> list[tuple[Any, ...]]:
    feed = lake.table_changes(f"main.{table}", start, end)
    cols = ["_snapshot_id", "_rowid", "_change_type", "id", "s"]
    return sorted(zip(*(feed.column(c).to_pylist() for c in cols), strict=True))


@pytest.fixture(scope="module")
def sqlite_dv_history(tmp_path_factory: pytest.TempPathFactory) -> CatalogLocation:
    """DuckDB's DV history in a SQLite catalog, written once for the module: the tests only read it."""
    catalog = sqlite_location(tmp_path_factory.mktemp("dv_history"))
    duckdb_dv_history(catalog)
    return catalog


def feed_ranges(snaps: list[int]) -> list[tuple[int, int]]:
    """Every single snapshot's changes, every start up to the last snapshot (across the merge, from everywhere) and
    the whole history before it: each snapshot is a start and an end, alone and inside a longer range. (All pairs
    read the 70,000 inserted rows again in a third of the ranges, for no case these lack: the feed lists each
    snapshot's own changes, and the columns do not change here.)"""
    pairs = {(s, s) for s in snaps} | {(s, snaps[-1]) for s in [0, *snaps]} | {(0, snaps[-2])}
    return sorted(pairs)


def feed_as_duckdb(lake: pdl.Lake, con: duckdb.DuckDBPyConnection, start: int, end: int, table: str = "t") -> bool:
    """Our feed equals DuckDB's, compared in Arrow (Python tuples of 70,000 rows cost seconds a range)."""
    cols = ["_snapshot_id", "_rowid", "_change_type", "id", "s"]
    ours = lake.table_changes(f"main.{table}", start, end).select(cols)
    theirs = con.execute(
        f"SELECT snapshot_id, rowid, change_type, id, s FROM ducklake_table_changes('lake', 'main', '{table}', "
        f"{start}, {end})"
    ).to_arrow_table()
    return same_rows(ours, theirs, cols)


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_duckdb_deletion_vectors_read_at_every_snapshot_and_in_the_feed(
    backend: str, request: pytest.FixtureRequest, duckdb_lake: Any
) -> None:
    """Both backends: the delete files of each snapshot come from the catalog's SQL. The SQLite history is the one
    the Spark test below reads (written once)."""
    if backend == "sqlite":
        catalog = request.getfixturevalue("sqlite_dv_history")
    else:
        catalog = request.getfixturevalue("pg_catalog")
        duckdb_dv_history(catalog)
    formats = delete_formats(catalog)
    assert "puffin" in formats and "parquet" in formats, formats  # the history holds both kinds
    lake = pdl.connect(catalog.url, catalog.data_path)
    con = duckdb_lake(catalog)
    snaps = snapshots_of(con, "t")
    for s in snaps:
        assert reads_as_duckdb(lake, con, "t", s), s
    last = snaps[-1]  # its delete merges into a DV positions that the UPDATE at snapshot 6 deleted (§2.4)
    for start, end in feed_ranges(snaps):
        if end < last:
            assert feed_as_duckdb(lake, con, start, end), (start, end)
            continue
        ours, duck = our_feed(lake, start, end), duck_feed(con, start, end)
        # Across the merge DuckDB reports those rows' old versions deleted again at `last`, beside the delete
        # of their updated versions (two deletes of one rowid in one snapshot); the feed reports one per rowid.
        extra = sorted(set(duck) - set(ours))
        assert set(ours) <= set(duck) and len(extra) == 3, (start, end, extra)
        assert all((s, r, "delete") in {o[:3] for o in ours} and s == last for s, r, *_ in extra), extra


def test_per_table_deletion_vector_option_of_duckdb_is_read(catalog: Any, duckdb_lake: Any) -> None:
    con = dv_attach(catalog, deletion_vectors=False)
    try:
        for table in ("dv", "plain"):
            con.execute(f"CREATE TABLE lake.{table}(id INTEGER, s VARCHAR)")
            con.execute(f"INSERT INTO lake.{table} SELECT i, 's' || i FROM range(1000) r(i)")
        con.execute("CALL lake.set_option('write_deletion_vectors', true, table_name => 'dv')")
        for table in ("dv", "plain"):
            con.execute(f"DELETE FROM lake.{table} WHERE id % 3 = 0")
            con.execute(f"DELETE FROM lake.{table} WHERE id > 900")
    finally:
        con.close()
    assert delete_formats(catalog, "dv") == ["puffin"]
    assert delete_formats(catalog, "plain") == ["parquet"]
    lake = pdl.connect(catalog.url, catalog.data_path)
    con = duckdb_lake(catalog)
    for table in ("dv", "plain"):
        for s in snapshots_of(con, table):
            assert canonical_rows(lake.scan(f"main.{table}", snapshot=s)) == duck_rows(con, table, s), (table, s)
        last = lake.current_snapshot_id()
        assert our_feed(lake, 0, last, table) == duck_feed(con, 0, last, table)


def test_spark_reads_duckdb_deletion_vectors_through_both_read_paths(
    spark: Any, sqlite_dv_history: Any, duckdb_lake: Any
) -> None:
    """One backend: Spark reads the puffin files the catalog lists; the catalog SQL of the same history (and its
    feed) is compared with DuckDB on both backends by ``test_duckdb_deletion_vectors_read_at_every_snapshot_...``."""
    from pyspark.sql import functions as F

    from pyspark_ducklake.spark_parquet_read import plan_read

    catalog = sqlite_dv_history
    pdl.register(spark)
    con = duckdb_lake(catalog)
    snaps = snapshots_of(con, "t")
    for s in snaps:
        assert plan_read(spark, "main.t", snapshot=s, catalog=catalog.url).reason is None, s  # the fast path
    # Spark's Parquet reader with our DV positions at every snapshot; the data source (which runs the scan's own
    # reads, compared with DuckDB at every snapshot above) at the first DVs, the flush that puts a Parquet delete
    # file beside them, and the last merge (one Spark job per path; every snapshot through the data source cost
    # a Python pass over 800,000 rows for no case the three do not have)
    assert len(snaps) == 11, snaps  # the indexes below are those of duckdb_dv_history
    source_snaps = [snaps[3], snaps[7], snaps[-1]]
    native = [pdl.read_table(spark, "main.t", snapshot=s, catalog=catalog.url) for s in snaps]
    source = [
        spark.read.format("ducklake").option("catalog", catalog.url).option("snapshot", s).load("main.t")
        for s in source_snaps
    ]
    expected = {s: duck_arrow(con, "t", s) for s in snaps}
    for frames, at in ((native, snaps), (source, source_snaps)):
        tagged = [df.withColumn("_snap", F.lit(s)) for df, s in zip(frames, at, strict=True)]
        rows = reduce(lambda a, b: a.unionByName(b), tagged).toArrow()  # Arrow: Row objects cost ~40 s here
        for s in at:
            got = (
                rows.filter(pc.equal(rows["_snap"], s))
                .select(["id", "s"])
                .sort_by([("id", "ascending"), ("s", "ascending")])
            )
            assert got.cast(expected[s].schema).equals(expected[s]), s
    lake = pdl.connect(catalog.url, catalog.data_path)
    # up to the merge that loses history, DuckDB's feed; with it, the Python feed (compared with DuckDB above)
    for end, expected in [(snaps[-2], duck_feed(con, 0, snaps[-2])), (snaps[-1], our_feed(lake, 0, snaps[-1]))]:
        feed = (
            spark.read.format("ducklake")
            .option("catalog", catalog.url)
            .option("readChangeFeed", "true")
            .option("startingSnapshot", 0)
            .option("endingSnapshot", end)
            .load("main.t")
        )
        table = feed.select("_snapshot_id", "_rowid", "_change_type", "id", "s").toArrow()  # not Row objects
        got = sorted(zip(*(c.to_pylist() for c in table.columns), strict=True))
        assert got == expected, end


CODEC_CASES = {  # DuckDB predicate on ids 0..139999 (id = position) -> the positions it deletes
    "one": ("id = 0", [0]),
    "few": ("id IN (5, 6, 7, 65536, 139999)", [5, 6, 7, 65536, 139999]),
    "array-and-bitmap": (
        "id % 3 = 0 OR id BETWEEN 70000 AND 70100",
        sorted({*range(0, 140000, 3), *range(70000, 70101)}),
    ),
    "full-container": ("id < 65536", list(range(65536))),
}


@pytest.mark.parametrize("case", CODEC_CASES, ids=list(CODEC_CASES))
def test_our_codec_decodes_duckdb_blobs_and_encodes_the_same_bytes(sqlite_catalog: Any, case: str) -> None:
    predicate, positions = CODEC_CASES[case]
    con = connect_duckdb()
    con.execute(attach_sql(sqlite_catalog, "lake", 0)[:-1] + ", WRITE_DELETION_VECTORS true)")
    try:
        con.execute("CREATE TABLE lake.t(id INTEGER)")
        con.execute("INSERT INTO lake.t SELECT i FROM range(140000) r(i)")
        con.execute(f"DELETE FROM lake.t WHERE {predicate}")
    finally:
        con.close()
    (blob_path,) = Path(sqlite_catalog.data_path).rglob("*-delete.puffin")
    blob = blob_path.read_bytes()
    assert decode(blob, str(blob_path), row_count=140000).tolist() == positions
    assert encode(positions) == blob


# --- we write deletion vectors when the lake or table asks for them -------------------------------------------------


_SHARED: list[duckdb.DuckDBPyConnection] = []  # the module's DuckDB for set_option (see ``shared_duckdb``)


@pytest.fixture(scope="module", autouse=True)
def shared_duckdb() -> Iterator[None]:
    """One DuckDB for ``set_option``: loading the extensions into a new connection costs about ten times attaching a
    lake, and a test here sets the option up to six times."""
    con = connect_duckdb()
    _SHARED.append(con)
    yield
    _SHARED.remove(con)
    con.close()


def set_option(catalog: Any, value: str, table: str | None = None, schema: str | None = None) -> None:
    """DuckDB's ``set_option``, the lake attached afresh and detached after."""
    scope = "" if table is None else f", table_name => '{table}'"
    scope += "" if schema is None else f", schema => '{schema}'"
    with attached(_SHARED[0], catalog) as con:
        con.execute(f"CALL lake.set_option('write_deletion_vectors', {value}{scope})")


def delete_rows(catalog: Any, table: str) -> list[Any]:
    engine = create_engine(catalog.url)
    with engine.connect() as conn:
        rows = conn.execute(
            text(
                "SELECT d.* FROM ducklake_delete_file d JOIN ducklake_table t ON t.table_id = d.table_id "
                "WHERE t.table_name = :t AND t.end_snapshot IS NULL ORDER BY d.delete_file_id"
            ),
            {"t": table},
        ).all()
    engine.dispose()
    return list(rows)


def new_table(lake: pdl.Lake, name: str, files: int = 2, rows: int = 70000) -> None:
    import pyarrow as pa

    lake.create_table(f"main.{name}", pa.schema([("id", pa.int32()), ("s", pa.string())]))
    for f in range(files):
        ids = list(range(f * rows, (f + 1) * rows))
        lake.append(f"main.{name}", pa.table({"id": pa.array(ids, pa.int32()), "s": [f"s{i}" for i in ids]}))


def test_we_write_deletion_vectors_that_duckdb_reads_exactly(catalog: Any, duckdb_lake: Any) -> None:
    lake = pdl.connect(catalog.url, catalog.data_path, data_inlining_row_limit=0)
    new_table(lake, "t")
    set_option(catalog, "true")
    lake.delete("main.t", [("id", "in", list(range(0, 140000, 7)))])  # a DV on each file
    lake.delete("main.t", [("id", "<", 100)])  # a second delete of file 1: one merged DV, as DuckDB
    con = dv_attach(catalog, deletion_vectors=False)  # the persisted option turns DuckDB's DVs on too
    con.execute("DELETE FROM lake.t WHERE id BETWEEN 69000 AND 70500")
    con.close()
    lake.delete("main.t", [("id", ">=", 139000)])  # ours after DuckDB's DV
    rows = delete_rows(catalog, "t")
    assert [r.format for r in rows] == ["puffin", "puffin"]
    last = lake.current_snapshot_id()
    for r in rows:
        assert r.path.endswith("-delete.puffin") and r.path_is_relative
        assert r.footer_size == 0 and r.partial_max is None and r.encryption_key is None
        assert r.begin_snapshot in (last, last - 1)  # every merge begins anew (DuckDB's §2.4)
        blob = (Path(catalog.data_path) / "main" / "t" / r.path).read_bytes()
        assert r.file_size_bytes == len(blob)
        assert r.delete_count == len(decode(blob, r.path))
    con = duckdb_lake(catalog)
    snaps = snapshots_of(con, "t")
    for s in snaps:
        assert reads_as_duckdb(lake, con, "t", s), s
    for start, end in feed_ranges(snaps):
        assert feed_as_duckdb(lake, con, start, end), (start, end)


def test_deletion_vector_option_per_table_and_its_spellings(catalog: Any, duckdb_lake: Any) -> None:
    import pyarrow as pa

    lake = pdl.connect(catalog.url, catalog.data_path, data_inlining_row_limit=0)
    for name in ("dv", "plain", "off"):
        new_table(lake, name, files=1, rows=1000)
    lake.create_schema("s2")
    for name in ("s2.by_schema", "s2.table_off"):
        lake.create_table(name, pa.schema([("id", pa.int32()), ("s", pa.string())]))
        lake.append(name, pa.table({"id": pa.array(range(1000), pa.int32()), "s": ["x"] * 1000}))
    set_option(catalog, "true", schema="s2")  # the schema's setting wins over the lake's, the table's over both
    set_option(catalog, "false")
    set_option(catalog, "false", "table_off", schema="s2")
    for name in ("s2.by_schema", "s2.table_off"):
        lake.delete(name, [("id", "<", 10)])
    assert [r.format for r in delete_rows(catalog, "by_schema")] == ["puffin"]
    assert [r.format for r in delete_rows(catalog, "table_off")] == ["parquet"]
    set_option(catalog, "true", "dv")
    set_option(catalog, "true")
    set_option(catalog, "false", "off")  # the table's own setting wins over the lake's
    set_option(catalog, "false", "plain")
    engine = create_engine(catalog.url)
    with engine.begin() as conn:  # as another writer might spell it
        conn.execute(
            text(
                "UPDATE ducklake_metadata SET value = 'FALSE' WHERE key = 'write_deletion_vectors' AND scope_id IS NOT NULL AND value = 'false'"
            )
        )
    engine.dispose()
    for name in ("dv", "plain", "off"):
        lake.delete(f"main.{name}", [("id", "<", 10)])
        lake.delete(f"main.{name}", [("id", ">", 990)])
    assert [r.format for r in delete_rows(catalog, "dv")] == ["puffin"]
    assert [r.format for r in delete_rows(catalog, "plain")] == ["parquet"]
    assert [r.format for r in delete_rows(catalog, "off")] == ["parquet"]
    con = duckdb_lake(catalog)
    for name in ("dv", "plain", "off"):
        expected = con.execute(f"SELECT * FROM lake.{name}").to_arrow_table()
        assert canonical_rows(lake.scan(f"main.{name}")) == canonical_rows(expected)
        assert lake.scan(f"main.{name}").num_rows == 1000 - 10 - 9


def test_deletion_vector_option_that_is_not_a_boolean_writes_nothing(sqlite_catalog: Any) -> None:
    lake = pdl.connect(sqlite_catalog.url, sqlite_catalog.data_path, data_inlining_row_limit=0)
    new_table(lake, "t", files=1, rows=100)
    set_option(sqlite_catalog, "true")
    engine = create_engine(sqlite_catalog.url)
    with engine.begin() as conn:
        conn.execute(text("UPDATE ducklake_metadata SET value = 'maybe' WHERE key = 'write_deletion_vectors'"))
    engine.dispose()
    with expect_bad_input("dv-option-not-bool", lake):
        lake.delete("main.t", [("id", "<", 10)])


# --- the attacker's pass: corrupt blobs and catalog rows ------------------------------------------------------------


def one_dv(catalog: Any) -> tuple[pdl.Lake, Path]:
    """Table ``t`` of 1000 rows (one file) with a DuckDB DV deleting ids 0..99; returns the DV's path."""
    con = connect_duckdb()
    con.execute(attach_sql(catalog, "lake", 0)[:-1] + ", WRITE_DELETION_VECTORS true)")
    try:
        con.execute("CREATE TABLE lake.t(id INTEGER, s VARCHAR)")
        con.execute("INSERT INTO lake.t SELECT i, 's' || i FROM range(1000) r(i)")
        con.execute("DELETE FROM lake.t WHERE id < 100")
    finally:
        con.close()
    (blob,) = Path(catalog.data_path).rglob("*-delete.puffin")
    return pdl.connect(catalog.url, catalog.data_path, data_inlining_row_limit=0), blob


def crc_framed(body: bytes) -> bytes:
    """magic + bitmap ``body`` framed with a correct length and CRC (so only the bitmap is wrong)."""
    import struct
    import zlib

    data = b"\xd1\xd3\x39\x64" + body
    return struct.pack(">I", len(data)) + data + struct.pack(">I", zlib.crc32(data))


def _flip(b: bytes, at: int) -> bytes:
    return b[:at] + bytes([b[at] ^ 0x01]) + b[at + 1 :]


CORRUPTIONS = {
    "truncated": lambda b: b[:-7],
    "empty": lambda b: b"",
    "length": lambda b: b"\x00\x00\x00\x01" + b[4:],
    "magic": lambda b: b[:4] + b"PFA1" + b[8:],
    "crc": lambda b: _flip(b, 30),
    "beyond-rows": lambda b: encode([5, 1000]),  # valid blob, but the file has rows 0..999
    "far-beyond-rows": lambda b: encode([2**33]),
    "cardinality": lambda b: crc_framed(
        b"\x01"
        + b"\x00" * 7
        + b"\x00" * 4
        + b"\x3a\x30\x00\x00"
        + b"\x01\x00\x00\x00"
        + b"\x00\x00\x05\x00"
        + b"\x10\x00\x00\x00"
        + b"\x01\x00"
    ),  # header says 6 values, the bitmap ends after 1
    "cookie": lambda b: crc_framed(b"\x01" + b"\x00" * 7 + b"\x00" * 4 + b"\x39\x30\x00\x00"),
    "unsorted": lambda b: crc_framed(
        b"\x01"
        + b"\x00" * 7
        + b"\x00" * 4
        + b"\x3a\x30\x00\x00"
        + b"\x01\x00\x00\x00"
        + b"\x00\x00\x01\x00"
        + b"\x10\x00\x00\x00"
        + b"\x07\x00\x03\x00"
    ),
    "trailing": lambda b: crc_framed(b[8:-4] + b"\x00"),
}


@pytest.mark.parametrize(
    ("catalog", "corruption"),
    [pytest.param("sqlite", c, id=f"sqlite-{c}") for c in CORRUPTIONS]
    + [pytest.param("postgres", "crc", id="postgres-crc")],
    indirect=["catalog"],
)
def test_a_corrupt_deletion_vector_is_a_typed_error_naming_the_file_on_every_read(
    catalog: Any, corruption: str
) -> None:
    """Every corruption on SQLite: the subject is decoding the blob, whichever catalog listed it; one on PostgreSQL,
    for the refused delete's nothing-written check on that catalog's SQL."""
    from pyspark_ducklake.exceptions import DeletionVectorError

    lake, blob = one_dv(catalog)
    assert lake.scan("main.t").num_rows == 900
    blob.write_bytes(CORRUPTIONS[corruption](blob.read_bytes()))
    with expect_bad_input("dv-corrupt", lake) as info:
        lake.scan("main.t")
    assert blob.name in str(info.value)
    with pytest.raises(DeletionVectorError, match=blob.name):
        lake.table_changes("main.t", 0)
    with expect_bad_input("dv-corrupt", lake):
        lake.delete("main.t", [("id", "=", 500)])  # reading the DV to merge it fails before anything is written


def test_an_unknown_delete_file_format_is_a_typed_error_and_any_case_of_puffin_reads(catalog: Any) -> None:
    lake, _ = one_dv(catalog)
    engine = create_engine(catalog.url)
    with engine.begin() as conn:
        conn.execute(text("UPDATE ducklake_delete_file SET format = 'PuFFin'"))
    assert lake.scan("main.t").num_rows == 900
    with engine.begin() as conn:
        conn.execute(text("UPDATE ducklake_delete_file SET format = 'orc'"))
    engine.dispose()
    with expect_bad_input("delete-format-unknown", lake):
        lake.scan("main.t")
    with expect_bad_input("delete-format-unknown", lake):
        lake.table_changes("main.t", 0)


@pytest.mark.parametrize(
    ("catalog", "where"),
    [("sqlite", "dotdot"), ("postgres", "absolute")],
    ids=["sqlite-dotdot", "postgres-absolute"],
    indirect=["catalog"],
)
def test_a_delete_file_row_pointing_outside_the_lake_is_never_read(catalog: Any, tmp_path: Path, where: str) -> None:
    """A valid DV outside the data path that would delete every row: refused, whatever the row's format. Each
    spelling of the path on one backend (the check is of the path the row holds, not of the catalog's SQL; each
    backend still serves one)."""
    lake, blob = one_dv(catalog)
    outside = tmp_path / "outside" / "x-delete.puffin"
    outside.parent.mkdir()
    outside.write_bytes(encode(range(1000)))
    data = Path(catalog.data_path).resolve()
    relative = os.path.relpath(outside, data / "main" / "t")
    path, is_relative = (relative, True) if where == "dotdot" else (str(outside), False)
    assert ".." in relative
    engine = create_engine(catalog.url)
    for file_format in ("puffin", "parquet"):
        with engine.begin() as conn:
            conn.execute(
                text("UPDATE ducklake_delete_file SET path = :p, path_is_relative = :r, format = :f"),
                {"p": path, "r": is_relative, "f": file_format},
            )
        with expect_bad_input("delete-file-outside", lake, watch=[outside.parent]):
            lake.scan("main.t")
        with expect_bad_input("delete-file-outside", lake, watch=[outside.parent]):
            lake.table_changes("main.t", 0)
        with expect_bad_input("delete-file-outside", lake, watch=[outside.parent]):
            lake.delete("main.t", [("id", "=", 500)])
    engine.dispose()
    assert outside.exists() and blob.exists()


def test_an_unreferenced_deletion_vector_is_an_orphan_and_a_live_one_is_not(catalog: Any) -> None:
    import datetime as dt

    lake, blob = one_dv(catalog)
    stray = blob.with_name("ducklake-01a20e8a-0000-7000-8000-000000000000-delete.puffin")
    stray.write_bytes(encode([1]))
    assert lake.orphan_files(older_than=dt.timedelta(0)) == [str(stray)]
    lake.delete_orphan_files(older_than=dt.timedelta(0))
    assert not stray.exists() and blob.exists()
    assert lake.scan("main.t").num_rows == 900


def test_replaced_deletion_vectors_are_cleaned_up_and_expiry_drops_ended_ones(catalog: Any, duckdb_lake: Any) -> None:
    """The DV a merge replaces (DuckDB's or ours) is scheduled and cleanup deletes it; a data file overwritten away
    takes its DV with it at expiry; DuckDB reads what is left."""
    lake, first = one_dv(catalog)
    set_option(catalog, "true")
    lake.delete("main.t", [("id", "=", 500)])  # our merge replaces DuckDB's DV
    assert first.exists()  # scheduled for deletion, kept for readers of older snapshots
    lake.cleanup_old_files(cleanup_all=True)
    assert not first.exists()
    (live,) = Path(catalog.data_path).rglob("*-delete.puffin")
    import pyarrow as pa

    lake.overwrite("main.t", pa.table({"id": pa.array([1], pa.int32()), "s": ["new"]}))
    lake.expire_snapshots(versions=list(range(1, lake.current_snapshot_id())))
    lake.cleanup_old_files(cleanup_all=True)
    assert not live.exists()
    con = duckdb_lake(catalog)
    assert (
        con.execute("SELECT * FROM lake.t").fetchall()
        == [(1, "new")]
        == [tuple(r.values()) for r in lake.scan("main.t").to_pylist()]
    )


@pytest.mark.parametrize("other", ["duckdb", "ours"])
def test_a_deletion_vector_merged_by_another_writer_between_plan_and_commit_loses_no_delete(
    catalog: Any, other: str
) -> None:
    """DuckDB (or another of our writers) merges a DV of the file between our plan and our commit: ours merges its
    positions into the DV it finds then, and every deleted row stays deleted in both readers."""
    from pyspark_ducklake._faults import before_next_commit

    lake, _ = one_dv(catalog)  # ids 0..99 deleted by DuckDB's DV
    set_option(catalog, "true")

    def other_writer() -> None:
        if other == "ours":
            pdl.connect(catalog.url, catalog.data_path, data_inlining_row_limit=0).delete("main.t", [("id", ">=", 900)])
            return
        con = dv_attach(catalog, deletion_vectors=True)
        try:
            con.execute("DELETE FROM lake.t WHERE id >= 900")
        finally:
            con.close()

    with before_next_commit(other_writer):
        lake.delete("main.t", [("id", "in", [500, 501, 950])])  # 950: deleted meanwhile by the other writer
    expected = [i for i in range(100, 900) if i not in (500, 501)]
    assert sorted(lake.scan("main.t").column("id").to_pylist()) == expected
    con = connect_duckdb()
    con.execute(attach_sql(catalog, "lake"))
    try:
        assert sorted(r[0] for r in con.execute("SELECT id FROM lake.t").fetchall()) == expected
    finally:
        con.close()
    assert [r.format for r in delete_rows(catalog, "t")] == ["puffin"]


def test_duckdb_rewrite_and_merge_of_files_with_deletion_vectors_read_as_duckdb(catalog: Any, duckdb_lake: Any) -> None:
    """DuckDB's ``ducklake_rewrite_data_files`` drops the rows its DVs delete, and ``merge_adjacent_files`` joins the
    results; every snapshot reads as in DuckDB, and so does our own merge over what is left."""
    con = dv_attach(catalog, deletion_vectors=True)
    try:
        for sql in [
            "CREATE TABLE lake.t(id INTEGER, s VARCHAR)",
            "INSERT INTO lake.t SELECT i, 's' || i FROM range(3000) r(i)",
            "INSERT INTO lake.t SELECT i, 's' || i FROM range(3000, 6000) r(i)",
            "DELETE FROM lake.t WHERE id % 3 = 0",
            "DELETE FROM lake.t WHERE id % 5 = 0",
            "CALL ducklake_rewrite_data_files('lake', 't', delete_threshold => 0)",
            "CALL ducklake_merge_adjacent_files('lake')",
        ]:
            con.execute(sql)
    finally:
        con.close()
    assert [r.end_snapshot is None for r in delete_rows(catalog, "t")] == [False, False]  # rewritten away
    lake = pdl.connect(catalog.url, catalog.data_path, data_inlining_row_limit=0)
    lake.merge_adjacent_files("main.t")
    con = duckdb_lake(catalog)
    for s in snapshots_of(con, "t"):
        assert canonical_rows(lake.scan("main.t", snapshot=s)) == duck_rows(con, "t", s), s
    assert lake.scan("main.t").num_rows == 6000 - 2000 - 1200 + 400
