"""``spark.readStream.format("ducklake").load(t)`` with no change-feed option: as Delta's table stream, the table's
rows, then the rows later snapshots append, in the table's own columns; a snapshot that deletes or updates rows stops
the query with ``RowsChangedError`` naming it and the options, unless ``ignoreDeletes`` (deletes only) or
``skipChangeCommits`` (any) skip it. Exact against DuckDB's read of the table and its ``table_changes``. One lake
(SQLite): the catalog reads under it are the change feed's, run on both backends by test_change_feed_start.py and
tests/conformance/test_row_stream.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql import SparkSession

import pyspark_ducklake as pdl
from tests.support.duck import open_duckdb


def duck(catalog: Any, sql: str) -> list[tuple[Any, ...]]:
    con = open_duckdb(catalog, inlining_row_limit=10)
    try:
        return sorted(con.execute(sql).fetchall())
    finally:
        con.close()


def inserted(catalog: Any, start: int, end: int) -> list[tuple[Any, ...]]:
    """DuckDB's inserts of snapshots ``start..end``, as (id, s)."""
    return duck(
        catalog,
        f"SELECT id, s FROM ducklake_table_changes('lake', 'main', 'events', {start}, {end}) "
        "WHERE change_type = 'insert'",
    )


class Collector:
    def __init__(self) -> None:
        self.rows: list[tuple[Any, ...]] = []
        self.columns: list[str] = []

    def __call__(self, df: Any, batch_id: int) -> None:
        self.columns = df.columns
        self.rows += [tuple(r) for r in df.select("id", "s").collect()]

    def take(self) -> list[tuple[Any, ...]]:
        out, self.rows = sorted(self.rows), []
        return out


def run(spark: SparkSession, catalog: Any, checkpoint: Path, sink: Collector, **options: str) -> Any:
    reader = spark.readStream.format("ducklake").option("catalog", catalog.url).options(**options)
    query = (
        reader.load("main.events")
        .writeStream.foreachBatch(sink)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    try:
        query.awaitTermination(180)
    except Exception:
        pass
    assert not query.isActive, "the stream did not finish within 180 s"
    return query.exception()


def test_a_bare_stream_emits_rows_then_appends_and_stops_at_a_delete(
    spark: SparkSession, sqlite_catalog: Any, tmp_path: Path
) -> None:
    catalog, ck, sink = sqlite_catalog, tmp_path / "ck", Collector()
    pdl.register(spark)
    lake = pdl.connect(catalog.url, catalog.data_path, data_inlining_row_limit=10)
    lake.create_table("main.events", pa.schema([("id", pa.int64()), ("s", pa.string())]))
    lake.append("main.events", pa.table({"id": [1, 2, 3], "s": ["a", "b", "c"]}))  # inlined
    lake.append("main.events", pa.table({"id": list(range(100, 160)), "s": ["p"] * 60}))  # Parquet
    lake.delete("main.events", [("id", "=", 2)])  # before the start: the rows are read after it

    # the table's rows, in its own columns
    assert run(spark, catalog, ck, sink) is None
    assert sink.columns == ["id", "s"]
    assert sink.take() == duck(catalog, "SELECT id, s FROM lake.main.events")

    # appends by both writers pass, and so do a flush and an added column (which a restart takes up); a delete
    # stops the stream after the rows appended before it, naming the snapshot and the options
    start = lake.current_snapshot_id() + 1
    lake.append("main.events", pa.table({"id": [4], "s": ["d"]}))
    duck(catalog, "INSERT INTO lake.main.events VALUES (5, 'duck')")
    duck(catalog, "CALL ducklake_flush_inlined_data('lake')")
    lake.add_column("main.events", "x", pa.int32())
    lake.append("main.events", pa.table({"id": [6], "s": ["e"], "x": [1]}))
    deleted = lake.delete("main.events", [("id", "=", 6)])
    lake.append("main.events", pa.table({"id": [7], "s": ["f"], "x": [1]}))
    error = run(spark, catalog, ck, sink)
    assert error is not None and "RowsChangedError" in str(error)
    message = str(error)
    assert f"snapshot {deleted} deleted 1 row(s) of main.events" in message
    assert "skipChangeCommits=true" in message and "ignoreDeletes=true" in message and "readChangeFeed" in message
    assert sink.take() == inserted(catalog, start, deleted - 1) == [(4, "d"), (5, "duck"), (6, "e")]
    assert sink.columns == ["id", "s", "x"]
    # ignoreDeletes skips it and goes on from the checkpoint
    assert run(spark, catalog, ck, sink, ignoreDeletes="true") is None
    assert sink.take() == [(7, "f")]

    # an UPDATE: ignoreDeletes does not cover it; skipChangeCommits skips it (its new rows too)
    duck(catalog, "UPDATE lake.main.events SET s = 'upd' WHERE id IN (1, 100)")
    updated = lake.current_snapshot_id()
    lake.append("main.events", pa.table({"id": [8], "s": ["g"], "x": [1]}))
    error = run(spark, catalog, ck, sink, ignoreDeletes="true")
    assert error is not None and f"snapshot {updated} updated 2 row(s) of main.events" in str(error)
    assert "ignoreDeletes=true" not in str(error)
    assert sink.take() == []
    assert run(spark, catalog, ck, sink, skipChangeCommits="true") is None
    assert sink.take() == [(8, "g")] == inserted(catalog, updated + 1, lake.current_snapshot_id())
    lake.close()


def test_skip_options_are_for_the_table_stream_only(spark: SparkSession, sqlite_catalog: Any, tmp_path: Path) -> None:
    catalog = sqlite_catalog
    pdl.register(spark)
    lake = pdl.connect(catalog.url, catalog.data_path)
    lake.create_table("main.events", pa.schema([("id", pa.int64()), ("s", pa.string())]))
    lake.close()
    error = run(spark, catalog, tmp_path / "ck", Collector(), readChangeFeed="true", skipChangeCommits="true")
    assert error is not None and "option skipChangeCommits applies to a stream of the table's rows" in str(error)
    with pytest.raises(Exception, match="did you mean 'skipChangeCommits'"):
        run(spark, catalog, tmp_path / "ck2", Collector(), skipChangeCommit="true")
