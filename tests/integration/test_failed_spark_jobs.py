"""A Spark write whose task fails on its data leaves nothing behind: no snapshot and no file, whichever tasks had
finished, were still running or were cancelled when the job failed, on every Spark write path (the data source,
``write_table``, the ``foreachBatch`` sink and ``writeStream.format("ducklake")``)."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

import pyspark_ducklake as pdl
from pyspark_ducklake import ducklake_sink

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

ROWS = 4000  # 4 tasks of 1000 rows: more than the sink inlines per task (its limit is set to 10 below)


def files_under(root: str) -> set[str]:
    return {os.path.join(d, f) for d, _, names in os.walk(root) for f in names}


def tasks_stopped(spark: SparkSession) -> None:
    """Wait until no Spark task runs: a task Spark kills after the job failed may still write its file. Polled on
    the executors' running-task counts (the stage is gone before its killed tasks have stopped), instead of a fixed
    wait after every failed write."""
    tracker = spark.sparkContext.statusTracker()
    executors = spark.sparkContext._jsc.sc().statusTracker()  # type: ignore[union-attr]
    deadline = time.monotonic() + 120

    def running() -> bool:
        if tracker.getActiveStageIds():
            return True
        return any(info.numRunningTasks() for info in executors.getExecutorInfos())

    while running() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not running(), "Spark tasks still running 120 s after the job failed"


@pytest.fixture
def lake(sqlite_catalog: Any, spark: SparkSession) -> pdl.Lake:
    pdl.register(spark)
    lake = pdl.connect(sqlite_catalog.url, sqlite_catalog.data_path)
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("v", pa.string())])
    lake.create_table("main.t", schema)
    lake.append("main.t", pa.table({"id": list(range(20)), "v": ["x"] * 20}, schema=schema))  # one file
    return lake


def failing_frame(spark: SparkSession, bad: Any) -> DataFrame:
    """4 partitions of 1000 ids; the last row of the last partition is ``bad``: the tasks before it finish first,
    the one beside it is running when it fails."""
    df = spark.range(0, ROWS, 1, 4)
    return df.select(F.when(F.col("id") == ROWS - 1, bad).otherwise(F.col("id")).alias("id"), F.lit("y").alias("v"))


def paths(spark: SparkSession, url: str) -> list[Any]:
    sink = ducklake_sink("main.t", catalog=url, app_id="failing", data_inlining_row_limit=10)
    return [
        ("data source", lambda df: df.write.format("ducklake").option("catalog", url).mode("append").save("main.t")),
        ("write_table", lambda df: pdl.write_table(df, "main.t", catalog=url)),
        ("sink", lambda df: sink(df, 3)),
    ]


def check_nothing_written(
    spark: SparkSession, lake: pdl.Lake, before_files: set[str], before_snapshot: int, data_path: str
) -> None:
    tasks_stopped(spark)
    assert lake.current_snapshot_id() == before_snapshot
    assert files_under(data_path) == before_files
    assert lake.scan("main.t").num_rows == 20


def test_failed_spark_write_of_a_null_into_not_null_leaves_no_file(
    spark: SparkSession, lake: pdl.Lake, sqlite_catalog: Any
) -> None:
    before, snapshot = files_under(sqlite_catalog.data_path), lake.current_snapshot_id()
    df = failing_frame(spark, F.lit(None).cast("bigint"))
    for name, write in paths(spark, lake.location.url):
        with pytest.raises(Exception, match=r"SchemaMismatchError|NOT NULL"):
            write(df)
        try:
            check_nothing_written(spark, lake, before, snapshot, sqlite_catalog.data_path)
        except AssertionError as e:
            raise AssertionError(f"{name}: {e}") from e


def test_failed_spark_write_of_a_failing_expression_leaves_no_file(
    spark: SparkSession, lake: pdl.Lake, sqlite_catalog: Any
) -> None:
    """The same with a nullable table, so that ``write_table`` takes Spark's own writer (the native path)."""
    lake.create_table("main.n", pa.schema([("id", pa.int64()), ("v", pa.string())]))
    before, snapshot = files_under(sqlite_catalog.data_path), lake.current_snapshot_id()
    df = failing_frame(spark, F.raise_error(F.lit("boom in one task")).cast("bigint"))
    url = lake.location.url
    outcome: list[Any] = []
    for name, write in [
        ("data source", lambda: df.write.format("ducklake").option("catalog", url).mode("append").save("main.n")),
        ("write_table", lambda: outcome.append(pdl.write_table(df, "main.n", catalog=url))),
        ("sink", lambda: ducklake_sink("main.n", catalog=url, app_id="boom", data_inlining_row_limit=10)(df, 0)),
    ]:
        with pytest.raises(Exception, match="boom in one task"):
            write()
        tasks_stopped(spark)
        assert lake.current_snapshot_id() == snapshot, name
        assert files_under(sqlite_catalog.data_path) == before, name


def test_failed_stream_writer_batch_leaves_no_file(
    spark: SparkSession, lake: pdl.Lake, sqlite_catalog: Any, tmp_path: Path
) -> None:
    """``writeStream.format("ducklake")``: the batch fails in one task; its abort removes every file of the batch."""
    before, snapshot = files_under(sqlite_catalog.data_path), lake.current_snapshot_id()
    source = tmp_path / "in"
    failing_frame(spark, F.lit(None).cast("bigint")).write.parquet(str(source))
    stream = spark.readStream.schema("id bigint, v string").parquet(str(source))
    query = (
        stream.writeStream.format("ducklake")
        .option("catalog", lake.location.url)
        .option("data_inlining_row_limit", "10")
        .option("checkpointLocation", str(tmp_path / "cp"))
        .trigger(availableNow=True)
        .start("main.t")
    )
    with pytest.raises(Exception, match=r"SchemaMismatchError|NOT NULL"):
        query.awaitTermination(300)
    check_nothing_written(spark, lake, before, snapshot, sqlite_catalog.data_path)
