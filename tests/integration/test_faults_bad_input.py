"""Bad input that needs Spark or a PostgreSQL server (the rest is in ``tests/unit/test_bad_input.py``).

Each case is one of ``tests.support.bad_inputs.CASES``: the error (arriving wrapped by Spark) names its class and
says what to do, and the lake is untouched: same snapshot count, same files under the data path.
"""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

import pyspark_ducklake as pdl
from pyspark_ducklake import ducklake_sink
from tests.support.bad_inputs import expect_bad_input
from tests.support.catalogs import PgServer
from tests.support.faults import SOURCE_SCHEMA, file_stream, start_available_now, write_source

pytestmark = pytest.mark.timeout(300)


@pytest.fixture
def lake(sqlite_catalog: Any, spark: SparkSession) -> pdl.Lake:
    pdl.register(spark)
    lake = pdl.connect(sqlite_catalog.url, sqlite_catalog.data_path)
    lake.create_table("main.t", pa.schema([("id", pa.int64()), ("kind", pa.string()), ("amount", pa.float64())]))
    lake.append("main.t", pa.table({"id": list(range(50)), "kind": ["a"] * 50, "amount": [0.5] * 50}))
    return lake


def test_wrong_credentials_or_database(pg_server: PgServer, tmp_path: Path) -> None:
    for url in (
        f"postgresql+psycopg2://nobody:pw@{pg_server.host}:{pg_server.port}/postgres",
        pg_server.url("no_such_database_here"),
    ):
        with expect_bad_input("catalog-credentials", watch=[tmp_path]) as err:
            pdl.connect(url, str(tmp_path / "data"))
        assert ":pw@" not in str(err.value)


def test_spark_writes(spark: SparkSession, lake: pdl.Lake) -> None:
    url = lake.location.url
    df = spark.range(5).select(F.col("id"), F.lit("x").alias("kind"), F.lit(1.0).alias("amount"))
    with expect_bad_input("unsupported-spark-type", lake):
        df.withColumn("gap", F.expr("INTERVAL 1 DAY")).write.format("ducklake").option("catalog", url).mode(
            "append"
        ).save("main.new")
    with expect_bad_input("schema-mismatch-column", lake):
        df.withColumn("other", F.lit(1)).write.format("ducklake").option("catalog", url).mode("append").save("main.t")
    with expect_bad_input("option-unparseable", lake):
        df.write.format("ducklake").option("catalog", url).option("max_retry_count", "ten").mode("append").save(
            "main.t"
        )
    with expect_bad_input("spark-partition-by-differs", lake):
        df.write.format("ducklake").option("catalog", url).option("partitionBy", "kind").mode("append").save("main.t")
    with expect_bad_input("spark-no-table", lake):
        spark.read.format("ducklake").option("catalog", url).load().collect()
    assert "main.new" not in lake.tables()


def test_spark_snapshot_options_that_are_not_integers(spark: SparkSession, lake: pdl.Lake) -> None:
    read = spark.read.format("ducklake").option("catalog", lake.location.url)
    assert read.option("versionAsOf", "1").load("main.t").count() == 0  # text is how Spark passes every option
    for key, value in (("versionAsOf", "2.7"), ("snapshot", "true"), ("endingSnapshot", "2.0")):
        options = {key: value, "startingSnapshot": "0"} if key == "endingSnapshot" else {key: value}
        with expect_bad_input("snapshot-not-integer", lake):
            read.options(**options).load("main.t").collect()
    with expect_bad_input("snapshot-not-integer", lake):
        read.option("startingSnapshot", "1.5").load("main.t").collect()
    with expect_bad_input("snapshot-not-integer", lake):
        pdl.read_table(spark, "main.t", catalog=lake.location.url, snapshot=2.7)


def test_spark_reads_of_a_corrupt_catalog_value(spark: SparkSession, lake: pdl.Lake, tmp_path: Path) -> None:
    url = lake.location.url
    with sqlite3.connect(url.removeprefix("sqlite:///")) as db:
        db.execute("UPDATE ducklake_data_file SET record_count = 'x'")
    with expect_bad_input("catalog-value-corrupt", lake) as err:
        spark.read.format("ducklake").option("catalog", url).load("main.t").collect()
    assert "ducklake_data_file.record_count" in str(err.value)
    with expect_bad_input("catalog-value-corrupt", lake):
        pdl.read_table(spark, "main.t", catalog=url).collect()
    with expect_bad_input("catalog-value-corrupt", lake):
        spark.read.format("ducklake").option("catalog", url).option("startingSnapshot", "0").load("main.t").collect()


def run_until_done(df: Any, sink: Any, checkpoint: Path) -> None:
    query = start_available_now(df, sink, checkpoint)
    try:
        query.awaitTermination(timeout=120)
    finally:
        query.stop()


def test_stream_with_a_column_the_table_lacks(spark: SparkSession, lake: pdl.Lake, tmp_path: Path) -> None:
    write_source(tmp_path / "in", [20, 500])
    sink = ducklake_sink("main.t", catalog=lake.location.url)
    with expect_bad_input("schema-mismatch-stream", lake, watch=[tmp_path / "in"]):
        run_until_done(file_stream(spark, tmp_path / "in", SOURCE_SCHEMA + ", extra STRING"), sink, tmp_path / "cp")


def test_stream_into_a_data_path_it_cannot_write(spark: SparkSession, tmp_path: Path) -> None:
    (tmp_path / "blocker").write_text("not a folder")
    lake = pdl.connect(f"sqlite:///{tmp_path}/c.sqlite", str(tmp_path / "blocker" / "data"))
    lake.create_table("main.t", pa.schema([("id", pa.int64()), ("kind", pa.string()), ("amount", pa.float64())]))
    write_source(tmp_path / "in", [3000])  # above the inlining limit: executors write Parquet
    sink = ducklake_sink("main.t", catalog=lake.location.url)
    with expect_bad_input("data-path-unwritable", lake, watch=[tmp_path / "blocker"]):
        run_until_done(file_stream(spark, tmp_path / "in"), sink, tmp_path / "cp")
    assert lake.scan("main.t").num_rows == 0


def change_feed_to_sink(spark: SparkSession, lake: pdl.Lake, checkpoint: Path) -> None:
    """The change feed of main.t copied into main.copy through the sink, until it is caught up."""
    sink = ducklake_sink("main.copy", catalog=lake.location.url, app_id="copy")
    feed = (
        spark.readStream.format("ducklake")
        .option("catalog", lake.location.url)
        .option("startingSnapshot", "earliest")
        .load("main.t")
        .select("id", "kind", "amount")
    )
    run_until_done(feed, sink, checkpoint)


OFFSETS = [
    ("checkpoint-corrupt", '{"snapshot_id":"twelve"}'),
    ("checkpoint-corrupt", '{"topic":{"0":42}}'),  # another source's offset (Kafka's shape)
    ("checkpoint-foreign", '{"snapshot_id":9999}'),  # a checkpoint of a longer history: another lake or table
]


def test_corrupt_or_foreign_change_feed_checkpoint(spark: SparkSession, lake: pdl.Lake, tmp_path: Path) -> None:
    good = tmp_path / "cp"
    change_feed_to_sink(spark, lake, good)
    assert lake.scan("main.copy").num_rows == 50
    lake.append("main.t", pa.table({"id": [50], "kind": ["b"], "amount": [1.0]}))
    for i, (case, offset) in enumerate(OFFSETS):
        # A copy of the checkpoint whose newest offset points somewhere this lake never was; its commit is dropped
        # so that Spark resumes from it.
        checkpoint = tmp_path / f"cp-{i}"
        shutil.copytree(good, checkpoint)
        offsets = [p for p in (checkpoint / "offsets").iterdir() if p.name.isdigit()]
        newest = max(offsets, key=lambda p: int(p.name))
        lines = newest.read_text().splitlines()
        newest.write_text("\n".join([*lines[:2], offset]) + "\n")
        (checkpoint / "commits" / newest.name).unlink()
        for crc in (checkpoint / "offsets" / f".{newest.name}.crc", checkpoint / "commits" / f".{newest.name}.crc"):
            crc.unlink(missing_ok=True)  # Hadoop's checksums of the files changed above
        with expect_bad_input(case, lake, watch=[lake.data_path]):
            change_feed_to_sink(spark, lake, checkpoint)
    assert lake.scan("main.copy").num_rows == 50
