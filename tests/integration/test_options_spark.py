"""Spark entry points check their options against the registry: misspelt names fail, naming the closest valid one,
and nothing is read from the wrong snapshot or written (the read used to return the latest snapshot for
``versionAsOff`` and every change for a misspelt ``endingTimestamp``)."""

from __future__ import annotations

import datetime as dt
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

import pyspark_ducklake as pdl
from pyspark_ducklake.exceptions import InvalidOptionError
from tests.support.bad_inputs import expect_bad_input
from tests.support.faults import SOURCE_SCHEMA, file_stream, write_source

pytestmark = pytest.mark.timeout(300)


@pytest.fixture
def lake(sqlite_catalog: Any, spark: SparkSession) -> pdl.Lake:
    pdl.register(spark)
    lake = pdl.connect(sqlite_catalog.url, sqlite_catalog.data_path)
    lake.create_table("main.t", pa.schema([("id", pa.int64())]))
    lake.append("main.t", pa.table({"id": [1, 2]}))
    time.sleep(0.01)
    lake.append("main.t", pa.table({"id": [3]}))
    return lake


def test_misspelt_read_options_fail_instead_of_reading_the_wrong_snapshot(spark: SparkSession, lake: pdl.Lake) -> None:
    def read() -> Any:  # a DataFrameReader keeps its options: a fresh one per read
        return spark.read.format("ducklake").option("catalog", lake.location.url)

    with expect_bad_input("option-unknown", lake) as err:
        read().option("versionAsOff", 2).load("main.t").collect()
    assert "did you mean 'versionAsOf'" in str(err.value)
    with expect_bad_input("option-unknown", lake) as err:
        read().option("readChangeFeed", "true").option("startingSnapshot", 0).option(
            "endingTimestmp", "2000-01-01"
        ).load("main.t").collect()
    assert "did you mean 'endingTimestamp'" in str(err.value)
    with expect_bad_input("option-wrong-entry", lake):
        read().option("maxSnapshotsPerTrigger", 1).load("main.t").collect()
    with expect_bad_input("option-twice", lake):
        read().option("snapshot", 2).option("versionAsOf", 3).load("main.t").collect()
    # the right spellings, in any case, read the right snapshot
    assert sorted(r.id for r in read().option("VERSIONASOF", 2).load("main.t").collect()) == [1, 2]


def test_ending_timestamp_bounds_the_change_feed(spark: SparkSession, lake: pdl.Lake) -> None:
    snaps = {s.snapshot_id: s.snapshot.snapshot_time for s in lake.snapshots()}
    head = lake.current_snapshot_id()
    at = snaps[head - 1]
    assert at is not None

    def feed() -> Any:
        return (
            spark.read.format("ducklake")
            .option("catalog", lake.location.url)
            .option("readChangeFeed", "true")
            .option("startingSnapshot", 0)
        )

    by_time = feed().option("endingTimestamp", (at + dt.timedelta(microseconds=1)).isoformat()).load("main.t")
    by_id = feed().option("endingSnapshot", head - 1).load("main.t")
    assert sorted(r.id for r in by_time.collect()) == sorted(r.id for r in by_id.collect()) == [1, 2]
    with pytest.raises(Exception, match="belongs to the change feed"):
        spark.read.format("ducklake").option("catalog", lake.location.url).option("endingSnapshot", 1).load(
            "main.t"
        ).collect()


def test_misspelt_write_options_write_nothing(spark: SparkSession, lake: pdl.Lake) -> None:
    df = spark.range(5).select(F.col("id"))
    with expect_bad_input("option-unknown", lake) as err:
        df.write.format("ducklake").option("catalog", lake.location.url).option("targetFileRow", 2).mode("append").save(
            "main.t"
        )
    assert "did you mean 'targetFileRows'" in str(err.value)
    with expect_bad_input("option-wrong-entry", lake):
        df.write.format("ducklake").option("catalog", lake.location.url).option("versionAsOf", 1).mode("append").save(
            "main.t"
        )
    with expect_bad_input("option-unknown", lake):
        pdl.write_table(df, "main.t", catalog=lake.location.url, options={"max_retry_cont": "3"})
    with expect_bad_input("option-unknown", lake):
        pdl.read_table(spark, "main.t", catalog=lake.location.url, options={"versionAsOff": "1"})


def test_misspelt_stream_writer_option_fails_the_query(spark: SparkSession, lake: pdl.Lake, tmp_path: Path) -> None:
    write_source(tmp_path / "in", [5])
    df = file_stream(spark, tmp_path / "in", SOURCE_SCHEMA).select("id")
    with expect_bad_input("option-unknown", lake, watch=[tmp_path / "in"]) as err:
        query = (
            df.writeStream.format("ducklake")
            .option("catalog", lake.location.url)
            .option("checkpointLocation", str(tmp_path / "cp"))
            .option("flush_row", 10)
            .trigger(availableNow=True)
            .start("main.t")
        )
        try:
            query.awaitTermination(120)
        finally:
            query.stop()
    assert "did you mean 'flush_rows'" in str(err.value)


def test_misspelt_spark_conf_key_fails_register(spark: SparkSession) -> None:
    spark.conf.set("spark.ducklake.datapth", "/tmp/nowhere")
    try:
        with expect_bad_input("option-unknown") as err:
            pdl.register(spark)
        assert "did you mean 'spark.ducklake.dataPath'" in str(err.value)
    finally:
        spark.conf.unset("spark.ducklake.datapth")
    pdl.register(spark)


def test_sink_takes_false_as_a_string(spark: SparkSession, lake: pdl.Lake) -> None:
    sink = pdl.ducklake_sink("main.missing", catalog=lake.location.url, app_id="a", create_table="false")
    with pytest.raises(Exception, match=r"main\.missing") as err:
        sink(spark.range(3), 0)  # type: ignore[operator]
    assert not isinstance(err.value, InvalidOptionError)
    assert "main.missing" not in lake.tables()
