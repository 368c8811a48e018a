"""Reader state that outlives one Spark plan: pushed filters and the snapshot a DataFrame reads.

PySpark 4.x keeps the partitions and read function of the last plan on the relation a DataFrame shares with every
DataFrame derived from it, and reuses them for a later plan that pushes no filter (or for the other scans of one
plan). Whatever the reader decides for one query therefore reaches the others.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
from pyspark.sql import SparkSession

import pyspark_ducklake as pdl


def _four_files(catalog: Any) -> pdl.Lake:
    lake = pdl.connect(catalog.url, data_path=catalog.data_path, data_inlining_row_limit=0)
    lake.create_table("main.t", pa.schema([("f", pa.float64())]))
    for i in range(4):
        lake.append("main.t", pa.table({"f": [float(i * 10 + j) for j in range(10)]}))
    return lake


def _load(spark: SparkSession, catalog: Any, table: str = "main.t", **options: str) -> Any:
    pdl.register(spark)
    r = spark.read.format("ducklake").option("catalog", catalog.url).option("dataPath", catalog.data_path)
    for k, v in options.items():
        r = r.option(k, v)
    return r.load(table)


def test_a_filter_pushed_for_one_query_never_reaches_another_query_of_the_dataframe(
    spark: SparkSession, sqlite_catalog: Any
) -> None:
    _four_files(sqlite_catalog).close()
    df = _load(spark, sqlite_catalog)
    assert df.filter("f < 5").count() == 5
    assert df.count() == 40
    assert df.filter("f > 25").count() == 14
    assert len(df.collect()) == 40
    low, high = df.filter("f < 5"), df.filter("f >= 35")
    assert low.union(high).count() == 10  # two scans of one relation in one plan
    assert low.crossJoin(high.withColumnRenamed("f", "g")).count() == 25
    assert df.select("f").distinct().count() == 40
    old = _load(spark, sqlite_catalog, versionAsOf="3")
    assert old.filter("f >= 15").count() == 5
    assert old.count() == 20


def test_read_table_frames_do_not_share_filters(spark: SparkSession, sqlite_catalog: Any) -> None:
    _four_files(sqlite_catalog).close()
    df = pdl.read_table(spark, "main.t", catalog=sqlite_catalog.url)
    assert df.filter("f < 5").count() == 5
    assert df.count() == 40
    old = pdl.read_table(spark, "main.t", catalog=sqlite_catalog.url, snapshot=3)
    assert old.filter("f >= 15").count() == 5
    assert old.count() == 20


def test_a_dataframe_reads_the_snapshot_newest_when_it_was_loaded(spark: SparkSession, sqlite_catalog: Any) -> None:
    lake = _four_files(sqlite_catalog)
    df = _load(spark, sqlite_catalog)
    assert df.count() == 40
    lake.append("main.t", pa.table({"f": [100.0] * 10}))
    # every query of the DataFrame sees one snapshot, whether a filter is pushed or not
    assert df.filter("f >= 0").count() == 40
    assert df.count() == 40
    assert _load(spark, sqlite_catalog).count() == 50
    lake.close()


def test_a_change_feed_dataframe_keeps_the_range_it_was_loaded_with(spark: SparkSession, sqlite_catalog: Any) -> None:
    lake = _four_files(sqlite_catalog)
    feed = _load(spark, sqlite_catalog, readChangeFeed="true", startingSnapshot="earliest")
    assert feed.count() == 40
    lake.append("main.t", pa.table({"f": [100.0] * 10}))
    assert feed.filter("f >= 0").count() == 40
    assert feed.count() == 40
    lake.close()
