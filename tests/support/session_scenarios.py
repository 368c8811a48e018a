"""What a Spark user does with DuckLake, as checks any SparkSession must pass exactly against DuckDB: batch writes and
reads through ``format("ducklake")``, the sink (``foreachBatch`` and ``writeStream.format("ducklake")``) and the
change feed, batch and stream. The Spark Connect tests and the standalone-cluster tests run them on their sessions.

Only what a Connect client can do is used here: no SparkContext, no Python-side state shared with ``foreachBatch``
(the server runs that function in a process of its own), a Parquet file sink to collect a stream's rows.
"""

from __future__ import annotations

import datetime as dt
import json
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
from pyspark.sql import functions as F

import pyspark_ducklake as pdl
from tests.support.compare import canonical_rows
from tests.support.duck import open_duckdb

FEED_COLUMNS = ["_snapshot_id", "_rowid", "_change_type", "id", "s"]


def events(spark: Any, start: int, n: int, partitions: int = 1) -> Any:
    """Rows of mixed types: bigint, int, text with a quote, timestamp, decimal, array with a null, struct, map."""
    return spark.range(start, start + n, 1, partitions).select(
        F.col("id"),
        (F.col("id") % 7).cast("int").alias("k"),
        F.concat(F.lit("it's #"), F.col("id").cast("string")).alias("s"),
        (F.lit(dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc)) + F.make_interval(secs=F.col("id").cast("int"))).alias(
            "ts"
        ),
        F.col("id").cast("decimal(18,3)").alias("amount"),
        F.array(F.col("id"), F.lit(None).cast("long")).alias("arr"),
        F.struct(F.col("id").alias("a"), F.lit("x,y").alias("b")).alias("st"),
        F.create_map(F.lit("k"), F.col("id")).alias("mp"),
    )


def duck_rows(catalog: Any, sql: str) -> list[tuple[Any, ...]]:
    con = open_duckdb(catalog)
    try:
        return canonical_rows(con.execute(sql).to_arrow_table())
    finally:
        con.close()


def reader(spark: Any, catalog: Any, **options: str) -> Any:
    r = spark.read.format("ducklake").option("catalog", catalog.url).option("dataPath", catalog.data_path)
    for key, value in options.items():
        r = r.option(key, value)
    return r


def writer(df: Any, catalog: Any, mode: str = "append") -> Any:
    return df.write.format("ducklake").mode(mode).option("catalog", catalog.url).option("dataPath", catalog.data_path)


def batch_write_and_read(spark: Any, catalog: Any) -> None:
    """Create, append and overwrite through the data source (DuckDB reads exactly those rows), then read what DuckDB
    changed (insert, delete, update), now and at an older snapshot: exactly DuckDB's rows."""
    pdl.register(spark)
    first, second = events(spark, 0, 1000, partitions=3), events(spark, 1000, 7)
    writer(first, catalog).save("main.events")
    writer(second, catalog).save("main.events")
    expected = canonical_rows(first.toArrow()) + canonical_rows(second.toArrow())
    assert duck_rows(catalog, "SELECT * FROM lake.main.events") == sorted(expected, key=lambda r: r[0])
    assert canonical_rows(reader(spark, catalog).load("main.events").toArrow()) == duck_rows(
        catalog, "SELECT * FROM lake.main.events"
    )

    con = open_duckdb(catalog)
    try:
        before = con.execute("SELECT max(snapshot_id) FROM lake.snapshots()").fetchone()[0]
        con.execute(
            "INSERT INTO lake.main.events SELECT id + 10000, k, s, ts, amount, arr, st, mp FROM lake.main.events "
            "WHERE id < 20"
        )
        con.execute("DELETE FROM lake.main.events WHERE id % 10 = 3")
        con.execute("UPDATE lake.main.events SET s = 'upd', amount = 1.5 WHERE id IN (1, 999, 10001)")
    finally:
        con.close()
    ours = reader(spark, catalog).load("main.events")
    assert canonical_rows(ours.toArrow()) == duck_rows(catalog, "SELECT * FROM lake.main.events")
    old = reader(spark, catalog, snapshot=str(before)).load("main.events")
    assert canonical_rows(old.toArrow()) == duck_rows(
        catalog, f"SELECT * FROM lake.main.events AT (VERSION => {before})"
    )

    writer(events(spark, 50, 5), catalog, "overwrite").save("main.events")
    assert duck_rows(catalog, "SELECT id FROM lake.main.events") == [(i,) for i in range(50, 55)]


def fast_paths(spark: Any, catalog: Any, *, native: bool) -> str | None:
    """``pdl.write_table`` then ``pdl.read_table``: DuckDB reads exactly the written rows, and ``read_table`` gives
    exactly DuckDB's; ``native`` says whether Spark's own Parquet writer and reader must have done it (else the data
    source did). Returns the reason the write gave for falling back."""
    from pyspark_ducklake.spark_parquet_read import plan_read

    df = events(spark, 0, 500, partitions=2)
    outcome: Any = pdl.write_table(df, "main.fast", catalog=catalog.url, data_path=catalog.data_path)
    assert outcome.native is native, outcome.reason
    duck = duck_rows(catalog, "SELECT * FROM lake.main.fast")
    assert duck == canonical_rows(df.toArrow())
    con = open_duckdb(catalog)
    try:
        con.execute("DELETE FROM lake.main.fast WHERE id % 7 = 1")
        con.execute("UPDATE lake.main.fast SET s = 'upd' WHERE id = 10")
    finally:
        con.close()
    plan = plan_read(spark, "main.fast", catalog=catalog.url, data_path=catalog.data_path)
    assert plan.native is native, plan.reason
    read: Any = pdl.read_table(spark, "main.fast", catalog=catalog.url, data_path=catalog.data_path)
    assert canonical_rows(read.toArrow()) == duck_rows(catalog, "SELECT * FROM lake.main.fast")
    return None if native else str(outcome.reason) + " / " + str(plan.reason)


def write_json_batches(folder: Path, batches: int, rows: int) -> list[tuple[Any, ...]]:
    """``batches`` JSON files of ``rows`` rows each (id, s, x) in ``folder``; returns the rows."""
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for b in range(batches):
        lines = []
        for i in range(rows):
            row = (b * rows + i, f"b{b} 'r{i}'", None if i % 5 == 0 else i * 0.5)
            written.append(row)
            lines.append(json.dumps({"id": row[0], "s": row[1], "x": row[2]}))
        (folder / f"part-{b:03d}.json").write_text("\n".join(lines) + "\n")
    return sorted(written)


def _json_stream(spark: Any, folder: Path) -> Any:
    return spark.readStream.schema("id bigint, s string, x double").option("maxFilesPerTrigger", 1).json(str(folder))


def _run(query: Any) -> None:
    query.awaitTermination(300)
    assert query.exception() is None, query.exception()
    assert not query.isActive


def sink_streams(spark: Any, catalog: Any, tmp_path: Path, *, write_stream: bool = True) -> None:
    """``foreachBatch(ducklake_sink(..., app_id=...))``: one snapshot per micro-batch, DuckDB reads exactly the
    stream's rows; a second run under the same ``app_id`` from a new checkpoint (batch ids again from 0) adds
    nothing. ``writeStream.format("ducklake")`` (unless ``write_stream`` is false): exactly the stream's rows."""
    rows = write_json_batches(tmp_path / "in", batches=2, rows=40)  # two micro-batches show one snapshot per batch
    app_id = f"connect-{uuid.uuid4().hex}"
    sink = pdl.ducklake_sink("main.sunk", catalog=catalog.url, data_path=catalog.data_path, app_id=app_id)

    def run(checkpoint: str) -> None:
        _run(
            _json_stream(spark, tmp_path / "in")
            .writeStream.foreachBatch(sink)
            .option("checkpointLocation", str(tmp_path / checkpoint))
            .trigger(availableNow=True)
            .start()
        )

    run("ck-sink")
    assert duck_rows(catalog, "SELECT id, s, x FROM lake.main.sunk") == rows
    lake = pdl.connect(catalog.url, catalog.data_path)
    after_first = lake.current_snapshot_id()
    assert len(lake.snapshots()) == 3  # the lake's first snapshot and one per micro-batch
    run("ck-sink-again")
    assert pdl.connect(catalog.url, catalog.data_path).current_snapshot_id() == after_first  # replayed: skipped
    assert duck_rows(catalog, "SELECT id, s, x FROM lake.main.sunk") == rows
    if not write_stream:
        return

    pdl.register(spark)
    _run(
        _json_stream(spark, tmp_path / "in")
        .writeStream.format("ducklake")
        .option("catalog", catalog.url)
        .option("dataPath", catalog.data_path)
        .option("checkpointLocation", str(tmp_path / "ck-format"))
        .trigger(availableNow=True)
        .start("main.streamed")
    )
    assert duck_rows(catalog, "SELECT id, s, x FROM lake.main.streamed") == rows


def feed_history(catalog: Any) -> pdl.Lake:
    """A table with inlined and Parquet inserts, deletes of both, and an update and an insert by DuckDB."""
    lake = pdl.connect(catalog.url, catalog.data_path, data_inlining_row_limit=10)
    lake.create_table("main.a", pa.schema([("id", pa.int64()), ("s", pa.string())]))
    lake.append("main.a", pa.table({"id": [1, 2, 3], "s": ["a", "b", "c"]}))
    lake.append("main.a", pa.table({"id": list(range(100, 160)), "s": [f"p{i}" for i in range(60)]}))
    lake.delete("main.a", [("id", "=", 2)])
    lake.delete("main.a", [("id", ">=", 150)])
    con = open_duckdb(catalog, inlining_row_limit=10)
    try:
        con.execute("UPDATE lake.main.a SET s = 'upd' WHERE id IN (1, 100)")
        con.execute("INSERT INTO lake.main.a VALUES (7, 'duck')")
    finally:
        con.close()
    return lake


def duck_feed(catalog: Any, start: int, end: int) -> list[tuple[Any, ...]]:
    con = open_duckdb(catalog)
    try:
        return sorted(
            con.execute(
                "SELECT snapshot_id, rowid, change_type, id, s FROM "
                f"ducklake_table_changes('lake', 'main', 'a', {start}, {end})"
            ).fetchall()
        )
    finally:
        con.close()


def change_feed(spark: Any, catalog: Any, tmp_path: Path, *, into: Any = None) -> None:
    """The change feed as a batch read and as a stream (three snapshots per micro-batch: two micro-batches over the
    history, then one more resumed from its checkpoint after more changes): exactly DuckDB's ``table_changes``, no
    row twice. The stream writes Parquet files, or with ``into`` (another catalog) ``writeStream.format("ducklake")``
    into that lake's ``main.feed``, read back by DuckDB."""
    pdl.register(spark)
    lake = feed_history(catalog)
    last = lake.current_snapshot_id()
    batch = reader(spark, catalog, readChangeFeed="true", startingSnapshot="2", endingSnapshot=str(last)).load("main.a")
    assert sorted(tuple(r) for r in batch.select(*FEED_COLUMNS).collect()) == duck_feed(catalog, 2, last)

    out = tmp_path / "feed-out"

    def run() -> None:
        stream = (
            spark.readStream.format("ducklake")
            .option("catalog", catalog.url)
            .option("startingSnapshot", "2")
            .option("maxSnapshotsPerTrigger", "3")
            .load("main.a")
            .select(*FEED_COLUMNS)
        )
        if into is None:
            writer = stream.writeStream.format("parquet").option("path", str(out))  # a memory sink cannot resume
        else:
            writer = stream.writeStream.format("ducklake").option("catalog", into.url)
            writer = writer.option("dataPath", into.data_path)
        writer = writer.option("checkpointLocation", str(tmp_path / "ck-feed")).trigger(availableNow=True)
        _run(writer.start() if into is None else writer.start("main.feed"))

    run()
    lake.append("main.a", pa.table({"id": [500, 501], "s": ["x", "y"]}))
    lake.delete("main.a", [("id", "=", 3)])
    run()
    if into is None:
        seen = [tuple(r) for r in spark.read.parquet(str(out)).select(*FEED_COLUMNS).collect()]
    else:
        seen = duck_rows(into, f"SELECT {', '.join(FEED_COLUMNS)} FROM lake.main.feed")
    assert sorted(seen) == duck_feed(catalog, 2, lake.current_snapshot_id())
    assert len(seen) == len(set(seen))


__all__ = ["batch_write_and_read", "change_feed", "events", "fast_paths", "sink_streams"]
