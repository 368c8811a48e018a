"""NOT NULL columns in the change feed (ducklake-format-2.md §6.4): the feed's columns are nullable, and the feed
equals DuckDB's ``table_changes`` through the Python API, the Spark batch change feed and the streaming source.

A range that spans ``ALTER ... SET NOT NULL`` holds NULLs in the NOT NULL column (rows deleted before it); a feed
that took the column's current nullability failed ("Casting field with null values to non-nullable") or, through
Spark, could read those NULLs as 0.
"""

from __future__ import annotations

from functools import reduce
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

import pyspark_ducklake as pdl
from tests.support.duck import open_duckdb

SET_NOT_NULL = [
    "CREATE TABLE lake.t(id INTEGER, i INTEGER)",
    "INSERT INTO lake.t VALUES (1, NULL), (2, 20)",
    "DELETE FROM lake.t WHERE id = 1",
    "ALTER TABLE lake.t ALTER i SET NOT NULL",
    "INSERT INTO lake.t VALUES (3, 30)",
]
NOT_NULL_WITH_UPDATES = [  # §6.4's history: delete rows carry the full old row, a later column its initial default
    "CREATE TABLE lake.t(id INTEGER NOT NULL, s VARCHAR NOT NULL, o VARCHAR)",
    "INSERT INTO lake.t VALUES (1,'a','x'),(2,'b',NULL),(3,'c','z')",
    "INSERT INTO lake.t VALUES (4,'d','w')",
    "DELETE FROM lake.t WHERE id = 2",
    "UPDATE lake.t SET s = 'cc' WHERE id = 3",
    "DELETE FROM lake.t WHERE id = 4",
    "ALTER TABLE lake.t ADD COLUMN e INTEGER DEFAULT 5",
]
CHANGE = ["_snapshot_id", "_rowid", "_change_type"]


def duckdb_history(catalog: Any, statements: list[str], limit: int) -> list[str]:
    con = open_duckdb(catalog, inlining_row_limit=limit)
    try:
        for sql in statements:
            con.execute(sql)
        return [r[0] for r in con.execute("SELECT column_name FROM (DESCRIBE lake.t)").fetchall()]
    finally:
        con.close()


def duck_feed(con: Any, columns: list[str], start: int, end: int) -> list[tuple[Any, ...]]:
    select = ", ".join(["snapshot_id", "rowid", "change_type", *columns])
    return sorted(
        con.execute(f"SELECT {select} FROM ducklake_table_changes('lake', 'main', 't', {start}, {end})").fetchall()
    )


def ranges(last: int) -> list[tuple[int, int]]:
    return [(s, e) for s in range(last + 1) for e in range(max(s, 1), last + 1)]  # t exists from 1


@pytest.mark.parametrize("limit", [0, 10], ids=["parquet", "inlined"])
@pytest.mark.parametrize("history", [SET_NOT_NULL, NOT_NULL_WITH_UPDATES], ids=["set-not-null", "updates"])
def test_feed_of_not_null_columns_is_nullable_and_equals_duckdb(
    catalog: Any, duckdb_lake: Any, limit: int, history: list[str]
) -> None:
    duckdb_history(catalog, history, limit)
    lake = pdl.connect(catalog.url, catalog.data_path)
    con = duckdb_lake(catalog)
    last = lake.current_snapshot_id()
    for start, end in ranges(last):
        feed = lake.table_changes("main.t", start, end)
        columns = feed.column_names[:-4]
        assert all(feed.schema.field(c).nullable for c in columns), (start, end, feed.schema)
        got = sorted(zip(*(feed.column(c).to_pylist() for c in [*CHANGE, *columns]), strict=True))
        assert got == duck_feed(con, columns, start, end), (start, end)


def test_spark_change_feed_of_not_null_columns_equals_duckdb(
    spark: Any, sqlite_catalog: Any, duckdb_lake: Any, tmp_path: Path
) -> None:
    # one backend: Spark's feed of the rows the Python feed reads (both backends, the test above)
    catalog = sqlite_catalog
    pdl.register(spark)
    columns = duckdb_history(catalog, SET_NOT_NULL, 0)
    last = pdl.connect(catalog.url, catalog.data_path).current_snapshot_id()
    con = duckdb_lake(catalog)
    ranges_read = [(0, last), (2, 3), (3, last)]
    frames = []
    for start, end in ranges_read:
        df = (
            spark.read.format("ducklake")
            .option("catalog", catalog.url)
            .option("readChangeFeed", "true")
            .option("startingSnapshot", start)
            .option("endingSnapshot", end)
            .load("main.t")
        )
        assert all(df.schema[c].nullable for c in columns)
        frames.append(df.select(*CHANGE, *columns, F.lit(f"{start}-{end}").alias("_range")))
    got: dict[str, list[tuple[Any, ...]]] = {f"{s}-{e}": [] for s, e in ranges_read}
    for r in reduce(DataFrame.union, frames).collect():  # the three ranges in one Spark job
        got[r["_range"]].append(tuple(r)[:-1])
    for start, end in ranges_read:
        assert sorted(got[f"{start}-{end}"]) == duck_feed(con, columns, start, end), (start, end)
    seen: list[tuple[Any, ...]] = []
    query = (
        spark.readStream.format("ducklake")
        .option("catalog", catalog.url)
        .option("startingSnapshot", "0")
        .load("main.t")
        .writeStream.foreachBatch(lambda df, _: seen.extend(tuple(r) for r in df.select(*CHANGE, *columns).collect()))
        .option("checkpointLocation", str(tmp_path / "ck"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    assert query.exception() is None
    assert sorted(seen) == duck_feed(con, columns, 0, last)


def test_set_not_null_under_a_running_stream_does_not_stop_it(spark: Any, sqlite_catalog: Any, tmp_path: Path) -> None:
    """The stream's columns are nullable, so NOT NULL set on a column while it runs changes nothing it emits."""
    catalog = sqlite_catalog
    pdl.register(spark)
    duckdb_history(catalog, SET_NOT_NULL[:3], 0)  # snapshots 1-3, i still nullable
    seen: list[tuple[Any, ...]] = []

    def collect(df: Any, batch_id: int) -> None:
        if batch_id == 0:  # while the query runs: SET NOT NULL lands before the next micro-batch reads
            duckdb_history(catalog, SET_NOT_NULL[3:], 0)
        seen.extend(tuple(r) for r in df.select(*CHANGE, "id", "i").collect())

    query = (
        spark.readStream.format("ducklake")
        .option("catalog", catalog.url)
        .option("startingSnapshot", "0")
        .option("maxSnapshotsPerTrigger", "1")
        .load("main.t")
        .writeStream.foreachBatch(collect)
        .option("checkpointLocation", str(tmp_path / "ck"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    assert query.exception() is None
    con = open_duckdb(catalog)
    try:
        assert sorted(seen) == duck_feed(con, ["id", "i"], 0, 3)
    finally:
        con.close()
