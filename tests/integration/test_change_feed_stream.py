"""The change-feed source on a real SparkSession: batches and streams agree with DuckDB's table_changes.

One backend (SQLite): the feed's catalog SQL on PostgreSQL is tests/conformance/test_table_changes.py's subject
(DuckDB's table_changes as oracle on both backends); here Spark's batch and streaming paths are."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql import SparkSession

import pyspark_ducklake as pdl
from pyspark_ducklake.streaming.sink import ducklake_sink
from tests.support.duck import open_duckdb
from tests.support.session_scenarios import duck_feed
from tests.support.session_scenarios import feed_history as history

FEED_COLUMNS = ["_snapshot_id", "_rowid", "_change_type", "id", "s"]


def rows(df: Any) -> list[tuple[Any, ...]]:
    return sorted(tuple(r) for r in df.select(*FEED_COLUMNS).collect())


def source(spark: SparkSession, catalog: Any, **options: str) -> Any:
    r = spark.readStream.format("ducklake").option("catalog", catalog.url)
    for k, v in options.items():
        r = r.option(k, v)
    return r.load("main.a")


def test_batch_change_feed_matches_duckdb(spark: SparkSession, sqlite_catalog: Any) -> None:
    """Batch reads of ranges agree with DuckDB's table_changes; then (same history: one set-up, one DuckDB load
    fewer) a batch read takes the columns of its end snapshot, even when one was dropped or retyped since."""
    catalog = sqlite_catalog  # one backend: the catalog is not under test here (module docstring)
    pdl.register(spark)
    lake = history(catalog)
    last = lake.current_snapshot_id()

    def read(start: int, end: int) -> Any:
        return (
            spark.read.format("ducklake")
            .option("catalog", catalog.url)
            .option("readChangeFeed", "true")
            .option("startingSnapshot", start)
            .option("endingSnapshot", end)
            .load("main.a")
        )

    con = open_duckdb(catalog)
    try:
        for start, end in [(2, last), (3, 5), (5, 5), (6, last)]:
            df = read(start, end)
            theirs = con.execute(
                "SELECT snapshot_id, rowid, change_type, id, s FROM "
                f"ducklake_table_changes('lake', 'main', 'a', {start}, {end})"
            ).fetchall()
            assert rows(df) == sorted(theirs), (start, end)
    finally:
        con.close()
    assert df.schema["_commit_timestamp"].dataType.simpleString() == "timestamp"
    # Declared not null (Spark then skips a null check per value, so a null would read as "" or 0): the values
    # compared with DuckDB's above are the proof that none is null.
    assert [f.nullable for f in df.schema.fields[-4:]] == [False, False, False, True]

    lake.drop_column("main.a", "s")
    lake.add_column("main.a", "s", pa.int32())  # a new column with the old name: not the one read
    df = read(2, last)
    assert df.schema["s"].dataType.simpleString() == "string"
    assert rows(df) == duck_feed(catalog, 2, last)


def test_stream_restarts_without_gaps_or_duplicates_and_expired_history_is_data_loss(
    spark: SparkSession, sqlite_catalog: Any, tmp_path: Path
) -> None:
    """A restarted stream resumes from its checkpoint without gaps or duplicates; then, on the same checkpoint (one
    history, one stream: the restart and the data-loss check were two tests with the same set-up), snapshots it
    still needs are expired: that is data loss, or skipped with a warning under failOnDataLoss=false."""
    catalog = sqlite_catalog  # one backend: the catalog is not under test here (module docstring)
    pdl.register(spark)
    lake = history(catalog)
    seen: list[tuple[Any, ...]] = []
    batches: list[int] = []

    def collect(df: Any, batch_id: int) -> None:
        batches.append(batch_id)
        seen.extend(tuple(r) for r in df.select(*FEED_COLUMNS).collect())

    def run(**options: str) -> Any:
        q = (
            source(spark, catalog, startingSnapshot="2", maxSnapshotsPerTrigger="2", **options)
            .writeStream.foreachBatch(collect)
            .option("checkpointLocation", str(tmp_path / "ck"))
            .trigger(availableNow=True)
            .start()
        )
        try:
            q.awaitTermination(120)
        except Exception:
            pass  # the failed run's error is read from q.exception()
        return q

    assert run().exception() is None
    first_run = len(batches)
    assert first_run >= 3  # two snapshots per micro-batch
    lake.append("main.a", pa.table({"id": [500, 501], "s": ["x", "y"]}))
    lake.delete("main.a", [("id", "=", 3)])
    assert run().exception() is None  # resumes from the checkpoint
    assert len(batches) > first_run
    assert sorted(seen) == duck_feed(catalog, 2, lake.current_snapshot_id())
    assert len(seen) == len(set(seen))

    done = lake.current_snapshot_id()
    for i in range(3):
        lake.append("main.a", pa.table({"id": [1000 + i], "s": ["late"]}))
    con = open_duckdb(catalog)
    try:
        con.execute(f"CALL ducklake_expire_snapshots('lake', versions => [{done + 1}, {done + 2}])")
    finally:
        con.close()
    failed = run()
    assert failed.exception() is not None
    assert f"needs snapshots {done + 1}..{done + 2}" in str(failed.exception())
    assert run(failOnDataLoss="false").exception() is None
    ids = [r[3] for r in seen]
    assert 1002 in ids and 1000 not in ids and 1001 not in ids  # skipped with a warning, then continued


def test_change_feed_into_another_table(spark: SparkSession, sqlite_catalog: Any, tmp_path: Path) -> None:
    catalog = sqlite_catalog
    pdl.register(spark)
    lake = history(catalog)
    q = (
        source(spark, catalog, startingSnapshot="earliest")
        .writeStream.foreachBatch(ducklake_sink("main.b", catalog=catalog.url))
        .option("checkpointLocation", str(tmp_path / "ck"))
        .trigger(availableNow=True)
        .start()
    )
    q.awaitTermination(120)
    assert q.exception() is None
    b = lake.scan("main.b")
    feed = duck_feed(catalog, 0, lake.current_snapshot_id() - 1)  # b's own creation is later
    got = sorted(zip(*(b.column(c).to_pylist() for c in FEED_COLUMNS), strict=True))
    assert got == feed
    # Replaying the inserts and deletes of B reproduces A's rows.
    live: dict[int, tuple[Any, ...]] = {}
    for _snap, rowid, kind, id_, s in sorted(got, key=lambda r: (r[0], r[2] != "delete" and r[2] != "update_preimage")):
        if kind in ("delete", "update_preimage"):
            live.pop(rowid, None)
        else:
            live[rowid] = (id_, s)
    assert sorted(live.values()) == sorted((r["id"], r["s"]) for r in lake.scan("main.a").to_pylist())


def test_schema_changes_under_a_running_stream(spark: SparkSession, sqlite_catalog: Any, tmp_path: Path) -> None:
    catalog = sqlite_catalog
    pdl.register(spark)
    lake = history(catalog)
    collected: list[Any] = []

    def run() -> Any:
        q = (
            source(spark, catalog, startingSnapshot="2")
            .writeStream.foreachBatch(lambda df, _: collected.extend(df.collect()))
            .option("checkpointLocation", str(tmp_path / "ck"))
            .trigger(availableNow=True)
            .start()
        )
        q.awaitTermination(120)
        return q

    assert run().exception() is None
    lake.add_column("main.a", "extra", pa.int32())  # added nullable column: the running schema ignores it
    lake.append("main.a", pa.table({"id": [900], "s": ["after add"], "extra": [1]}))
    assert run().exception() is None
    assert any(r["id"] == 900 for r in collected)
    lake.drop_column("main.a", "s")
    lake.append("main.a", pa.table({"id": [901]}))
    failed = run()  # the restarted query picks the new schema, so this run works ...
    assert failed.exception() is None
    assert any(r["id"] == 901 for r in collected)


def test_bad_options(spark: SparkSession, sqlite_catalog: Any) -> None:
    catalog = sqlite_catalog
    pdl.register(spark)
    history(catalog)
    with pytest.raises(Exception, match="startingSnapshot"):
        source(spark, catalog, startingSnapshot="soon").writeStream.format("console").start().awaitTermination(30)
