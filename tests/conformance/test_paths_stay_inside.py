"""Files never leave the data path: hostile partition names and values, and catalog rows pointing elsewhere.

Partition folders are URL-encoded exactly as DuckDB encodes them (key name and value), so each side reads the
other's partitioned files; maintenance never deletes a file outside the data path, whatever the catalog lists.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import sqlite3
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute
import pytest
from sqlalchemy import create_engine, text

import pyspark_ducklake as pdl
from pyspark_ducklake.exceptions import DataFileError
from tests.support.bad_inputs import expect_bad_input
from tests.support.compare import canonical_rows
from tests.support.duck import open_duckdb

HOSTILE_KEY = "../../x"
HOSTILE_VALUES = ["../..", "a/b", "%2F", "..", ".", "", "a\\b", "ünï 😀", " sp ", "=", "a\x00b", "q'\"", "#?&*"]


def files_under(root: str | Path) -> set[str]:
    return {os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs}


def data_file_paths(url: str, table_id: int) -> list[str]:
    engine = create_engine(url)
    with engine.connect() as conn:
        rows = conn.execute(text("SELECT path FROM ducklake_data_file WHERE table_id = :t"), {"t": table_id}).all()
    engine.dispose()
    return sorted(r[0] for r in rows)


def test_hostile_partition_key_and_values_stay_in_the_table_folder_as_duckdb_names_them(catalog: Any) -> None:
    lake = pdl.connect(catalog.url, catalog.data_path, data_inlining_row_limit=0)
    values = [v for v in HOSTILE_VALUES if "\x00" not in v or catalog.backend == "sqlite"]  # PG text holds no NUL
    schema = pa.schema([("id", pa.int32()), (HOSTILE_KEY, pa.string())])
    ours = lake.create_table("main.ours", schema, partition_by=[HOSTILE_KEY])
    data = pa.table({"id": pa.array(range(len(values)), pa.int32()), HOSTILE_KEY: values}, schema=schema)
    outside = Path(catalog.data_path).parent
    outside_before = files_under(outside)
    lake.append("main.ours", data)
    table_dir = os.path.realpath(os.path.join(lake.data_path, "main", "ours"))
    written = files_under(lake.data_path)
    assert len(written) == len(values)
    assert all(os.path.realpath(p).startswith(table_dir + os.sep) for p in written)
    assert files_under(outside) - files_under(lake.data_path) == outside_before - files_under(lake.data_path)
    assert canonical_rows(lake.scan("main.ours")) == canonical_rows(data)
    con = open_duckdb(catalog, inlining_row_limit=0)
    try:
        assert canonical_rows(con.execute("SELECT * FROM lake.main.ours").to_arrow_table()) == canonical_rows(data)
        con.execute(f'CREATE TABLE lake.main.theirs (id INT, "{HOSTILE_KEY}" VARCHAR)')
        con.execute(f'ALTER TABLE lake.main.theirs SET PARTITIONED BY ("{HOSTILE_KEY}")')
        # DuckDB cannot commit a partition value holding NUL (its own catalog SQL breaks); we can
        con.register("src", data.filter(pa.compute.invert(pa.compute.match_substring(data[HOSTILE_KEY], "\x00"))))
        con.execute("INSERT INTO lake.main.theirs SELECT * FROM src")
        theirs_id = con.execute(
            "SELECT table_id FROM __ducklake_metadata_lake.ducklake_table WHERE table_name = 'theirs'"
        ).fetchone()[0]
    finally:
        con.close()
    # the same folder names as DuckDB's (file names differ: uuids)
    theirs = {p.rsplit("/", 1)[0] for p in data_file_paths(catalog.url, theirs_id)}
    folders = {p.rsplit("/", 1)[0] for p in data_file_paths(catalog.url, ours.table_id)}
    assert folders - {"..%2F..%2Fx=a%00b"} == theirs
    duck_written = canonical_rows(lake.scan("main.theirs"))
    assert len(duck_written) == len(theirs)
    lake.append("main.theirs", data)
    con = open_duckdb(catalog, inlining_row_limit=0)
    try:
        got = con.execute("SELECT * FROM lake.main.theirs").to_arrow_table()
        assert sorted(canonical_rows(got)) == sorted(duck_written + canonical_rows(data))
    finally:
        con.close()


def test_a_partition_value_too_long_for_a_folder_name_is_refused_before_any_file(sqlite_catalog: Any) -> None:
    lake = pdl.connect(sqlite_catalog.url, sqlite_catalog.data_path, data_inlining_row_limit=0)
    lake.create_table("main.p", pa.schema([("id", pa.int32()), ("k", pa.string())]), partition_by=["k"])
    with expect_bad_input("partition-value-too-long", lake):
        lake.append("main.p", pa.table({"id": pa.array([1, 2], pa.int32()), "k": ["short", "ü" * 100]}))


# --- maintenance never deletes outside the data path ---------------------------------------------------------------


def make_victim(data_path: str) -> Path:
    """A Parquet file next to (not inside) the lake's data path, old enough for any safety age."""
    path = Path(data_path).parent / "victim.parquet"
    path.write_bytes(b"PAR1 precious PAR1")
    old = (dt.datetime.now() - dt.timedelta(days=10)).timestamp()
    os.utime(path, (old, old))
    return path


def schedule(url: str, rows: list[tuple[int, str, bool]]) -> None:
    engine = create_engine(url)
    with engine.begin() as conn:
        for file_id, path, relative in rows:
            conn.execute(
                text(
                    "INSERT INTO ducklake_files_scheduled_for_deletion (data_file_id, path, path_is_relative, "
                    "schedule_start) VALUES (:i, :p, :r, :t)"
                ),
                {"i": file_id, "p": path, "r": relative, "t": dt.datetime(2000, 1, 1, tzinfo=dt.timezone.utc)},
            )
    engine.dispose()


def test_cleanup_never_deletes_scheduled_files_outside_the_data_path(
    catalog: Any, caplog: pytest.LogCaptureFixture
) -> None:
    victim = make_victim(catalog.data_path)
    lake = pdl.connect(catalog.url, catalog.data_path, data_inlining_row_limit=0)
    lake.create_table("main.t", pa.schema([("id", pa.int64())]))
    lake.append("main.t", pa.table({"id": [1, 2, 3]}))
    inside = Path(lake.data_path) / "main" / "t" / "ducklake-old.parquet"
    inside.write_bytes(b"old")
    schedule(
        catalog.url,
        [
            (900, "../victim.parquet", True),
            (901, str(victim), False),
            (902, "main/t/../../../victim.parquet", True),
            (903, "main/t/ducklake-old.parquet", True),
        ],
    )
    with caplog.at_level(logging.WARNING, logger="pyspark_ducklake.maintenance"):
        dry = lake.cleanup_old_files(cleanup_all=True, dry_run=True)
        report = lake.cleanup_old_files(cleanup_all=True)
    assert victim.exists() and victim.read_bytes() == b"PAR1 precious PAR1"
    assert not inside.exists()
    assert dry.files == report.files == (str(inside),)
    assert len(report.outside_data_path) == 3 and all("victim.parquet" in p for p in report.outside_data_path)
    assert "outside the data path" in report.summary() and "outside the data path" in caplog.text
    # their rows stay (never deleted, reported again); the inside one is gone
    engine = create_engine(catalog.url)
    with engine.connect() as conn:
        left = {r[0] for r in conn.execute(text("SELECT data_file_id FROM ducklake_files_scheduled_for_deletion"))}
    engine.dispose()
    assert left == {900, 901, 902}


def test_orphan_deletion_never_deletes_outside_the_data_path(catalog: Any, tmp_path: Path) -> None:
    victim = make_victim(catalog.data_path)
    lake = pdl.connect(catalog.url, catalog.data_path, data_inlining_row_limit=0)
    lake.create_table("main.t", pa.schema([("id", pa.int64())]))
    lake.append("main.t", pa.table({"id": [1, 2, 3]}))
    kept = files_under(lake.data_path)
    # a catalog row spelled with ../ that points at a real file must keep it (it is referenced, not an orphan)
    engine = create_engine(catalog.url)
    with engine.begin() as conn:
        conn.execute(text("UPDATE ducklake_data_file SET path = '../t/' || path"))
        conn.execute(
            text(
                "INSERT INTO ducklake_files_scheduled_for_deletion (data_file_id, path, path_is_relative) "
                "VALUES (77, '../victim.parquet', :r)"
            ),
            {"r": True},
        )
    engine.dispose()
    # a symlink inside the data path to a folder outside it
    outside_dir = tmp_path / "outside"
    outside_dir.mkdir()
    (outside_dir / "other.parquet").write_bytes(b"other")
    old = (dt.datetime.now() - dt.timedelta(days=10)).timestamp()
    os.utime(outside_dir / "other.parquet", (old, old))
    os.symlink(outside_dir, Path(lake.data_path) / "link")
    report = lake.delete_orphan_files(older_than=dt.timedelta(0))
    assert victim.exists() and (outside_dir / "other.parquet").exists()
    assert all(Path(p).exists() for p in kept)
    assert list(report) == []
    assert lake.scan("main.t").num_rows == 3


def test_reads_of_files_registered_outside_the_data_path_keep_working(
    sqlite_catalog: Any, tmp_path: Path, duckdb_lake: Any
) -> None:
    """``ducklake_add_data_files`` registers absolute paths elsewhere (``path_is_relative=0``): legitimate for reads."""
    import pyarrow.parquet as pq

    lake = pdl.connect(sqlite_catalog.url, sqlite_catalog.data_path, data_inlining_row_limit=0)
    lake.create_table("main.t", pa.schema([("id", pa.int64())]))
    external = tmp_path / "external" / "e.parquet"
    external.parent.mkdir()
    pq.write_table(pa.table({"id": pa.array([7, 8], pa.int64())}), external)
    con = duckdb_lake(sqlite_catalog, inlining_row_limit=0)
    con.execute(f"CALL ducklake_add_data_files('lake', 't', '{external}')")
    con.close()
    assert sorted(lake.scan("main.t").column("id").to_pylist()) == [7, 8]
    lake.expire_snapshots(older_than=dt.timedelta(0))
    report = lake.delete_orphan_files(older_than=dt.timedelta(0))
    assert external.exists() and list(report) == []


def test_a_table_folder_outside_the_data_path_is_refused_for_writes(sqlite_catalog: Any) -> None:
    lake = pdl.connect(sqlite_catalog.url, sqlite_catalog.data_path, data_inlining_row_limit=0)
    lake.create_table("main.t", pa.schema([("id", pa.int64())]))
    with sqlite3.connect(sqlite_catalog.url.removeprefix("sqlite:///")) as c:
        c.execute("UPDATE ducklake_table SET path = '../../escaped/' WHERE table_name = 't'")
    outside = Path(sqlite_catalog.data_path).parent
    with expect_bad_input("table-path-outside", lake, watch=[outside]):
        lake.append("main.t", pa.table({"id": list(range(20))}))
    pdl.connect(sqlite_catalog.url, data_inlining_row_limit=10).append("main.t", pa.table({"id": [1]}))  # no file
    with pytest.raises(DataFileError, match="outside the data path"):
        lake.flush_inlined_data("main.t")
    assert not (outside.parent / "escaped").exists() and not (outside / "escaped").exists()
