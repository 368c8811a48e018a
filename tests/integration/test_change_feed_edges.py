"""The change feed's start options and checkpoints at their edges, on a real SparkSession, DuckDB as the oracle.

A checkpoint of one table reused for another table of the same lake, a start time equal to a commit time or before
the first snapshot, a start beyond the newest snapshot, ``earliest`` after expiry, and the table dropped, renamed or
replaced by DuckDB under a running stream.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql import SparkSession

import pyspark_ducklake as pdl
from tests.support.bad_inputs import expect_bad_input
from tests.support.duck import open_duckdb

SCHEMA = pa.schema([("id", pa.int64())])


def two_tables(catalog: Any) -> pdl.Lake:
    """Tables a and b in one lake; b's first rows come before a's last, so one snapshot id means both."""
    lake = pdl.connect(catalog.url, catalog.data_path)
    lake.create_table("main.a", SCHEMA)
    lake.create_table("main.b", SCHEMA)
    lake.append("main.a", pa.table({"id": [1]}))
    lake.append("main.b", pa.table({"id": [100]}))
    lake.append("main.a", pa.table({"id": [2]}))
    return lake


def stream_ids(spark: SparkSession, catalog: Any, table: str, checkpoint: Path, **options: str) -> list[int]:
    """Run the feed of ``table`` to the end (``Trigger.AvailableNow``) and return the inserted ids it emitted."""
    seen: list[int] = []
    reader = spark.readStream.format("ducklake").option("catalog", catalog.url)
    if "startingTimestamp" not in options:
        options.setdefault("startingSnapshot", "earliest")  # a stream needs one; its checkpoint then decides
    for k, v in options.items():
        reader = reader.option(k, v)
    q = (
        reader.load(table)
        .writeStream.foreachBatch(lambda df, _: seen.extend(r["id"] for r in df.collect()))
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    q.awaitTermination(120)
    if q.exception() is not None:
        raise q.exception()  # type: ignore[misc]
    return sorted(seen)


def duck_changes(catalog: Any, table: str, start: str, end: str) -> list[int]:
    con = open_duckdb(catalog)
    try:
        return sorted(
            r[0]
            for r in con.execute(
                f"SELECT id FROM ducklake_table_changes('lake', 'main', '{table}', {start}, {end})"
            ).fetchall()
        )
    finally:
        con.close()


def test_checkpoint_of_another_table_in_the_same_lake_is_refused(
    spark: SparkSession, sqlite_catalog: Any, tmp_path: Path
) -> None:
    """Offsets are the lake's snapshot ids: a's checkpoint used for b silently skipped b's row 100 before."""
    pdl.register(spark)
    lake = two_tables(sqlite_catalog)
    checkpoint = tmp_path / "ck"
    assert stream_ids(spark, sqlite_catalog, "main.a", checkpoint, startingSnapshot="earliest") == [1, 2]
    lake.append("main.b", pa.table({"id": [101]}))
    with expect_bad_input("checkpoint-foreign", lake, watch=[checkpoint / "offsets", checkpoint / "commits"]):
        stream_ids(spark, sqlite_catalog, "main.b", checkpoint, startingSnapshot="earliest")
    # b's own checkpoint gets every row; a's checkpoint still works for a
    assert stream_ids(spark, sqlite_catalog, "main.b", tmp_path / "ck-b", startingSnapshot="earliest") == [100, 101]
    lake.append("main.a", pa.table({"id": [3]}))
    assert stream_ids(spark, sqlite_catalog, "main.a", checkpoint) == [3]


def test_starting_timestamp_of_a_commit_includes_that_commit_as_duckdb(
    spark: SparkSession, catalog: Any, tmp_path: Path
) -> None:
    """DuckDB's table_changes starts at the first snapshot committed at or after the time; the feed skipped it."""
    pdl.register(spark)
    lake = two_tables(catalog)
    lake.append("main.a", pa.table({"id": [3]}))
    snaps = {s.snapshot_id: s.snapshot.snapshot_time for s in lake.snapshots()}
    latest = lake.current_snapshot_id()
    second_insert = latest - 1  # the snapshot that inserted id 2
    for when, expected in [
        (snaps[second_insert], [2, 3]),  # exactly a commit's time: that commit is included
        (snaps[0].replace(year=2000), [1, 2, 3]),  # before the first snapshot: everything (was NoSuchSnapshotError)
        (snaps[latest].replace(year=2999), []),  # after the newest: nothing yet
    ]:
        batch = (
            spark.read.format("ducklake")
            .option("catalog", catalog.url)
            .option("startingTimestamp", when.isoformat())
            .load("main.a")
        )
        got = sorted(r["id"] for r in batch.collect())
        assert got == expected, when
        if expected:
            assert got == duck_changes(
                catalog, "a", f"TIMESTAMPTZ '{when.isoformat()}'", f"TIMESTAMPTZ '{snaps[latest]}'"
            )
        # the stream takes its start from the same resolve_start (the catalog's SQL) as the batch read above, which
        # runs on both backends and for every edge: one stream (each costs a Spark query), on SQLite, shows that the
        # stream passes a naive time (UTC) to it and starts at the commit of exactly that time (a time after the newest
        # resolves to the next snapshot, streamed as startingSnapshot=<next> below and as 'latest' in
        # test_change_feed_start.py; one before the first to the oldest, streamed as 'earliest' below)
        if catalog.backend == "sqlite" and when == snaps[second_insert]:
            naive = when.replace(tzinfo=None).isoformat()  # naive means UTC
            ids = stream_ids(spark, catalog, "main.a", tmp_path / f"ck-{when.year}", startingTimestamp=naive)
            assert ids == expected


def test_starting_snapshot_beyond_the_newest_is_refused(
    spark: SparkSession, sqlite_catalog: Any, tmp_path: Path
) -> None:
    """It was read as the offset of a foreign checkpoint ('belongs to another lake or table')."""
    pdl.register(spark)
    lake = two_tables(sqlite_catalog)
    beyond = lake.current_snapshot_id() + 2
    with expect_bad_input("feed-start-beyond", lake) as err:
        stream_ids(spark, sqlite_catalog, "main.a", tmp_path / "ck-beyond", startingSnapshot=str(beyond))
    assert f"startingSnapshot {beyond} is beyond the newest snapshot" in str(err.value)
    # a number past 64 bits, as a batch read: the stream takes its start from the same resolve_start
    huge = "99999999999999999999"
    with expect_bad_input("feed-start-beyond", lake) as err:
        spark.read.format("ducklake").option("catalog", sqlite_catalog.url).option("startingSnapshot", huge).load(
            "main.a"
        ).collect()
    assert f"startingSnapshot {huge} is beyond the newest snapshot" in str(err.value)
    for start in ("3_0", "\uff11"):  # Python's int() takes both (an underscore, a full-width digit)
        with pytest.raises(Exception, match="could not parse option startingSnapshot"):
            spark.read.format("ducklake").option("catalog", sqlite_catalog.url).option("startingSnapshot", start).load(
                "main.a"
            ).collect()
    # the next snapshot, not yet committed, is a valid start: only what comes after
    ids = stream_ids(spark, sqlite_catalog, "main.a", tmp_path / "ck", startingSnapshot=str(beyond - 1))
    assert ids == []


def test_earliest_after_expiry_starts_at_the_oldest_snapshot_left(
    spark: SparkSession, sqlite_catalog: Any, tmp_path: Path
) -> None:
    """'earliest' meant snapshot 0, which expiry removes: every new stream failed with DataLossError."""
    pdl.register(spark)
    lake = two_tables(sqlite_catalog)
    lake.append("main.a", pa.table({"id": [3]}))
    lake.expire_snapshots(versions=[0, 1, 2, 3])
    oldest = lake.snapshots()[0].snapshot_id
    expected = duck_changes(sqlite_catalog, "a", str(oldest), str(lake.current_snapshot_id()))
    assert expected == [2, 3]
    assert stream_ids(spark, sqlite_catalog, "main.a", tmp_path / "ck", startingSnapshot="earliest") == expected
    batch = spark.read.format("ducklake").option("catalog", sqlite_catalog.url).option("startingSnapshot", "earliest")
    assert sorted(r["id"] for r in batch.load("main.a").collect()) == expected


def running(spark: SparkSession, catalog: Any, table: str, checkpoint: Path, seen: list[int]) -> Any:
    q = (
        spark.readStream.format("ducklake")
        .option("catalog", catalog.url)
        .option("startingSnapshot", "earliest")
        .load(table)
        .writeStream.foreachBatch(lambda df, _: seen.extend(r["id"] for r in df.collect()))
        .option("checkpointLocation", str(checkpoint))
        .trigger(processingTime="100 milliseconds")
        .start()
    )
    q.processAllAvailable()
    return q


def duckdb_runs(catalog: Any, *statements: str) -> None:
    con = open_duckdb(catalog)
    try:
        for statement in statements:
            con.execute(statement)
    finally:
        con.close()


def failure(q: Any) -> str:
    with pytest.raises(Exception) as err:
        q.awaitTermination(60)
    q.stop()
    return str(err.value)


def test_table_renamed_under_a_running_stream_names_what_to_do(
    spark: SparkSession, sqlite_catalog: Any, tmp_path: Path
) -> None:
    """It said "table main.a does not exist ...; create it with lake.create_table()"."""
    pdl.register(spark)
    lake = two_tables(sqlite_catalog)
    seen: list[int] = []
    checkpoint = tmp_path / "ck"
    q = running(spark, sqlite_catalog, "main.a", checkpoint, seen)
    assert sorted(seen) == [1, 2]
    duckdb_runs(sqlite_catalog, "ALTER TABLE lake.main.a RENAME TO a2", "INSERT INTO lake.main.a2 VALUES (3)")
    with expect_bad_input("feed-table-gone", lake, watch=[checkpoint / "commits"]) as err:
        q.awaitTermination(60)
    q.stop()
    assert "table main.a was dropped or renamed" in str(err.value)
    q = running(spark, sqlite_catalog, "main.a2", checkpoint, seen)  # the checkpoint follows it
    q.stop()
    assert sorted(seen) == [1, 2, 3]


def test_table_replaced_under_a_running_stream_is_refused(
    spark: SparkSession, sqlite_catalog: Any, tmp_path: Path
) -> None:
    """A table dropped and created again under the same name was streamed on from the old table's offset: its
    column ids matched, so its rows before that offset were skipped without a word."""
    pdl.register(spark)
    lake = two_tables(sqlite_catalog)
    seen: list[int] = []
    checkpoint = tmp_path / "ck"
    q = running(spark, sqlite_catalog, "main.a", checkpoint, seen)
    # one snapshot, so that the running stream never sees the table missing
    duckdb_runs(sqlite_catalog, "BEGIN", "DROP TABLE lake.main.a", "CREATE TABLE lake.main.a (id BIGINT)", "COMMIT")
    duckdb_runs(sqlite_catalog, *[f"INSERT INTO lake.main.a VALUES ({i})" for i in (4, 5)])
    text = failure(q)
    assert "CheckpointMismatchError" in text and "dropped and created again" in text, text
    before = lake.current_snapshot_id()
    with expect_bad_input("checkpoint-foreign", lake, watch=[checkpoint / "offsets", checkpoint / "commits"]):
        stream_ids(spark, sqlite_catalog, "main.a", checkpoint)  # a restart on the old checkpoint
    assert lake.current_snapshot_id() == before
    assert stream_ids(spark, sqlite_catalog, "main.a", tmp_path / "ck2", startingSnapshot="earliest") == [4, 5]
