"""``read_table`` drops deleted rows exactly whichever way it removes them (``spark/deleted_rows.py``): a filter of
positions and ranges, a filter on a bitmap of positions, an anti join on one bigint key (file ordinal and position, or the position alone for one
file), on two columns where they do not fit one, broadcast or not. DuckDB writes the history: many files, some with
deletion vectors (puffin), some with Parquet delete files, some with none, inlined deletes, clustered and scattered
deletes, an update; every state of each table (``_states``) read the default way, and the last two every forced way,
equals DuckDB's ``AT (VERSION => s)``. One backend (SQLite): the
subject is how Spark removes deleted rows from the files the catalog lists; the catalog SQL reading these delete files
is compared with DuckDB on both backends in test_deletion_vectors.py and the Python read tests."""

from __future__ import annotations

import dataclasses
import os
from functools import reduce
from itertools import groupby
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

import pyspark_ducklake as pdl
from pyspark_ducklake.spark import deleted_rows
from tests.support.duck import attach_sql, connect_duckdb

# constants of deleted_rows per way of removing deleted rows
BITMAP = {"DELETE_FILTER_MAX": 0, "DELETE_RANGES_MAX": 0}
JOIN = {**BITMAP, "BITMAP_MAX_BYTES": 0}
WAYS: dict[str, dict[str, int]] = {
    "default": {},
    "no-ranges": {"RUN_MIN": 10**9},
    "bitmap": BITMAP,
    "join": JOIN,
    "join-two-columns": {**JOIN, "KEY_BITS": 1},
}


def _history(catalog: Any) -> None:
    """Table ``t`` (six files and inlined rows) and table ``one`` (one file), with every kind of delete."""
    steps = [
        (True, "CREATE TABLE lake.t(id INTEGER, s VARCHAR)"),
        *[
            (True, f"INSERT INTO lake.t SELECT i, 's' || i FROM range({k * 3000}, {(k + 1) * 3000}) r(i)")
            for k in range(6)
        ],
        (True, "DELETE FROM lake.t WHERE id BETWEEN 9100 AND 11900"),  # clustered: a range (a filter)
        (True, "DELETE FROM lake.t WHERE id IN (1, 2, 3)"),  # few: inlined deletes (a filter)
        (True, "DELETE FROM lake.t WHERE id % 5 = 0 AND id < 9000"),  # scattered: DVs on three files (a bitmap)
        (False, "DELETE FROM lake.t WHERE id % 7 = 1 AND id >= 12000"),  # Parquet delete files on two files
        (True, "INSERT INTO lake.t VALUES (-1, 'x'), (-2, 'y')"),  # inlined rows
        (True, "DELETE FROM lake.t WHERE id = -1"),
        (True, "UPDATE lake.t SET s = 'u' || id WHERE id % 1000 = 7"),
        (True, "DELETE FROM lake.t WHERE id BETWEEN 3000 AND 5990"),  # most of a file that has a DV
        (True, "CREATE TABLE lake.one(id INTEGER, s VARCHAR)"),
        (True, "INSERT INTO lake.one SELECT i, 'o' || i FROM range(20000) r(i)"),
        (True, "DELETE FROM lake.one WHERE id % 3 = 1"),
        (True, "DELETE FROM lake.one WHERE id BETWEEN 100 AND 900"),
    ]
    for dv, group in groupby(steps, key=lambda step: step[0]):
        con = connect_duckdb()
        attach = attach_sql(catalog, "lake", 10)
        try:
            con.execute(attach[:-1] + f", WRITE_DELETION_VECTORS {str(dv).lower()})")
            for _, sql in group:
                con.execute(sql)
        finally:
            con.close()


def _duckdb(catalog: Any, table: str) -> dict[int, pa.Table]:
    con = connect_duckdb()
    con.execute(attach_sql(catalog, "lake", 10))
    try:
        out = {}
        for (s,) in con.execute("SELECT snapshot_id FROM lake.snapshots() ORDER BY 1").fetchall():
            try:
                sql = f"SELECT id, s FROM lake.{table} AT (VERSION => {s}) ORDER BY id, s"
                out[s] = con.execute(sql).to_arrow_table()
            except duckdb.CatalogException:  # the table does not exist yet
                continue
        formats = con.execute(
            "SELECT DISTINCT format FROM __ducklake_metadata_lake.ducklake_delete_file ORDER BY 1"
        ).fetchall()
    finally:
        con.close()
    assert formats == [("parquet",), ("puffin",)]  # the history holds both kinds of delete file
    return out


def _states(by_snapshot: dict[int, pa.Table]) -> list[int]:
    """The snapshots at which the table's rows differ, less those whose next state only appends rows (the inserts
    before the first delete read as their last one does: files without deletes). Snapshots where another table changed
    hold the same catalog rows for this table as the one before, so they are read once."""
    snaps = sorted(by_snapshot)
    distinct = [s for i, s in enumerate(snaps) if i == 0 or not by_snapshot[s].equals(by_snapshot[snaps[i - 1]])]
    kept = []
    for s, after in zip(distinct, [*distinct[1:], None], strict=True):
        rows, later = by_snapshot[s], None if after is None else by_snapshot[after]
        if later is not None and later.num_rows > rows.num_rows and later.slice(0, rows.num_rows).equals(rows):
            continue  # ``after`` appended rows (ids ascending) and deleted nothing
        kept.append(s)
    return kept


def _frames(spark: SparkSession, catalog: Any, table: str, snaps: list[int], way: dict[str, int]) -> list[DataFrame]:
    mp = pytest.MonkeyPatch()
    try:
        for name, value in way.items():
            mp.setattr(deleted_rows, name, value)
        return [pdl.read_table(spark, f"main.{table}", snapshot=s, catalog=catalog.url) for s in snaps]
    finally:
        mp.undo()


def _plan(df: DataFrame) -> str:
    return str(df._jdf.queryExecution().optimizedPlan().toString())


def test_every_way_of_removing_deleted_rows_reads_as_duckdb(spark: SparkSession, sqlite_catalog: Any) -> None:
    catalog = sqlite_catalog
    _history(catalog)
    expected = {table: _duckdb(catalog, table) for table in ("t", "one")}
    plans: dict[tuple[str, str], list[str]] = {}
    tagged = []
    read: dict[tuple[str, str], list[int]] = {}
    for table, by_snapshot in expected.items():
        states = _states(by_snapshot)
        for name, way in WAYS.items():
            # every state the default way; the forced ways on the last two, which hold every kind of delete (each
            # read is planned on the driver and adds a scan to the one job: reading every snapshot, identical ones
            # included, took 47 reads and over a minute)
            snaps = read[table, name] = states if name == "default" else states[-2:]
            frames = _frames(spark, catalog, table, snaps, way)
            plans[table, name] = [_plan(df) for df in frames]
            tagged += [
                df.withColumn("_t", F.lit(table)).withColumn("_way", F.lit(name)).withColumn("_snap", F.lit(s))
                for df, s in zip(frames, snaps, strict=True)
            ]
    # the history's states: t's first 18000 rows and eight changes; one's insert and its last delete (DuckDB reads
    # one's first delete, snapshot 18, with all 20000 rows: its second deletion vector on the file replaces the first
    # in the catalog; we read the catalog the same way, so snapshot 18 reads as 17)
    assert len(read["t", "default"]) == 9 and len(read["one", "default"]) == 2, read
    rows = reduce(DataFrame.unionByName, tagged).toArrow()  # one Spark job
    for table, by_snapshot in expected.items():
        for name in WAYS:
            for s in read[table, name]:
                want = by_snapshot[s]
                mask = pc.and_(
                    pc.and_(pc.equal(rows["_t"], table), pc.equal(rows["_way"], name)), pc.equal(rows["_snap"], s)
                )
                got = rows.filter(mask).select(["id", "s"]).sort_by([("id", "ascending"), ("s", "ascending")])
                assert got.cast(want.schema).equals(want), (table, name, s)
    # each way was taken where the history has deletes
    filtered = [p for p in plans["t", "default"] if "LeftAnti" not in p and "row_index" in p]
    # ids 9100-11900 are positions 100-2900 of the fourth file; Spark negates the range
    assert any("row_index < 100" in p and "row_index > 2900" in p for p in filtered), filtered
    assert not any("row_index > 2900" in p for p in plans["t", "no-ranges"])
    for table in expected:
        bitmaps = [p for p in plans[table, "bitmap"] if "ascii(" in p]
        assert bitmaps and not any("LeftAnti" in p for p in plans[table, "bitmap"])
        if table == "one":  # one file: no path is compared
            assert all("file_path" not in p for p in bitmaps)
        else:
            assert any("CASE WHEN" in p and "file_path" in p for p in bitmaps)
    for table in expected:
        joined = [p for p in plans[table, "join"] if "LeftAnti" in p]
        assert joined and all("__ducklake_key" in p for p in joined)
        if table == "one":  # one file: the position is the key, no path is read
            assert all("__ducklake_file" not in p for p in joined)
        else:
            assert any("__ducklake_ordinal" in p for p in joined)
            two = [p for p in plans[table, "join-two-columns"] if "LeftAnti" in p]
            # files with deletes joined on (ordinal, position); a group of one such file keeps the position key
            assert any("__ducklake_ordinal" in p and "__ducklake_key" not in p for p in two)


def _listing(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


def test_bitmap_filter_reads_scattered_deletes_in_an_odd_data_path_as_duckdb_and_leaves_nothing(
    spark: SparkSession, sqlite_catalog: Any
) -> None:
    """The bitmap filter (the default for thousands to hundreds of thousands of scattered positions) over files with
    deletion vectors, a Parquet delete file and none, in a data path with a space, ``%41`` and non-ASCII letters,
    every bit of the bytes used: every snapshot equals DuckDB's read (time travel across the deletes), the plans
    do not join and print no bitmap, and nothing is written in the lake's folder by the reads."""
    catalog = sqlite_catalog
    lake = dataclasses.replace(catalog, data_path=os.path.join(catalog.data_path, "d ata %41 é/"))
    Path(lake.data_path).mkdir()
    steps = [
        (True, "CREATE TABLE lake.b(id INTEGER, s VARCHAR)"),
        *[
            (True, f"INSERT INTO lake.b SELECT i, 'b' || i FROM range({k * 5000}, {(k + 1) * 5000}) r(i)")
            for k in range(5)
        ],
        (True, "DELETE FROM lake.b WHERE hash(id) % 3 = 0 AND id < 15000"),  # random: DVs on three files
        (False, "DELETE FROM lake.b WHERE hash(id) % 4 = 1 AND id >= 20000"),  # a Parquet delete file
        (True, "DELETE FROM lake.b WHERE id % 7 = 2 AND id < 5000"),  # a second DV on the first file
    ]
    for dv, sql in steps:
        con = connect_duckdb()
        try:
            con.execute(attach_sql(lake, "lake", 0)[:-1] + f", WRITE_DELETION_VECTORS {str(dv).lower()})")
            con.execute(sql)
        finally:
            con.close()
    con = connect_duckdb()
    con.execute(attach_sql(lake, "lake", 0))
    try:
        snaps = [s for (s,) in con.execute("SELECT snapshot_id FROM lake.snapshots() ORDER BY 1").fetchall()][1:]
        expected = {
            s: con.execute(f"SELECT id, s FROM lake.b AT (VERSION => {s}) ORDER BY id").to_arrow_table() for s in snaps
        }
    finally:
        con.close()
    folder = Path(catalog.data_path)
    before = _listing(folder)
    frames = [pdl.read_table(spark, "main.b", snapshot=s, catalog=lake.url, data_path=lake.data_path) for s in snaps]
    tagged = [df.withColumn("_snap", F.lit(s)) for df, s in zip(frames, snaps, strict=True)]
    rows = reduce(DataFrame.unionByName, tagged).toArrow()
    for s in snaps:
        got = rows.filter(pc.equal(rows["_snap"], s)).select(["id", "s"]).sort_by("id")
        assert got.cast(expected[s].schema).equals(expected[s]), s
    assert expected[snaps[-1]].num_rows < 25000 - 5000  # deletes were read
    plans = [_plan(df) for df in frames]
    assert sum("ascii(" in p for p in plans) >= 3  # the three snapshots with scattered deletes
    assert not any("LeftAnti" in p for p in plans)
    # the bitmap is a scalar subquery's value, not a literal printed in hex in every plan string
    assert all("scalar-subquery" in p and "0x" not in p for p in plans if "ascii(" in p)
    assert _listing(folder) == before
