"""The Spark batch data source on a real local SparkSession, checked against DuckDB.

One backend (SQLite): the Spark read/write paths are the subject, not the catalog SQL, which is the same call
whichever Spark path makes it; tests/conformance (test_all_types.py, test_we_write_duckdb_reads.py,
test_table_changes.py) covers reads, writes, time travel and inlined DuckDB data on PostgreSQL, and
test_spark_connect.py / test_kafka_to_lake.py run Spark writes into a PostgreSQL catalog."""

from __future__ import annotations

import datetime as dt
import os
from functools import reduce
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.datasource import DataSourceReader

import pyspark_ducklake as pdl
from pyspark_ducklake.batch.reader import DuckLakeBatchReader
from pyspark_ducklake.spark.lake_config import LakeConfig
from tests.support.compare import canonical_rows
from tests.support.duck import open_duckdb


def reader(spark: SparkSession, catalog: Any, table: str, **options: str) -> Any:
    pdl.register(spark)
    r = spark.read.format("ducklake").option("catalog", catalog.url).option("dataPath", catalog.data_path)
    for k, v in options.items():
        r = r.option(k, v)
    return r.load(table)


def writer(df: Any, catalog: Any, mode: str = "append") -> Any:
    return df.write.format("ducklake").mode(mode).option("catalog", catalog.url).option("dataPath", catalog.data_path)


def events(spark: SparkSession, start: int, n: int) -> Any:
    return spark.range(start, start + n).select(
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


def test_write_creates_table_and_duckdb_reads_it(spark: SparkSession, sqlite_catalog: Any) -> None:
    catalog = sqlite_catalog  # one backend: the catalog is not under test here (module docstring)
    pdl.register(spark)
    writer(events(spark, 0, 5000).repartition(3), catalog).save("main.events")
    writer(events(spark, 5000, 7), catalog).save("main.events")
    lake = pdl.connect(catalog.url)
    snaps = lake.snapshots()
    assert [s.changes_made for s in snaps[1:]] == [
        'created_table:"main"."events",inserted_into_table:1',
        "inserted_into_table:1",
    ]
    assert len(lake.snapshots()) == 3  # one snapshot per write
    ours = lake.scan("main.events")
    assert ours.num_rows == 5007
    via_spark = reader(spark, catalog, "main.events").toArrow()
    assert via_spark.num_rows == 5007
    con = open_duckdb(catalog)
    try:
        duck = con.execute("SELECT * FROM lake.main.events").to_arrow_table()
        assert canonical_rows(duck) == canonical_rows(ours)
        assert con.execute("SELECT count(*), sum(id), max(s) FROM lake.main.events").fetchone() == (
            5007,
            sum(range(5007)),
            "it's #999",
        )
    finally:
        con.close()


def test_overwrite_and_time_travel(spark: SparkSession, sqlite_catalog: Any) -> None:
    catalog = sqlite_catalog  # one backend: the catalog is not under test here (module docstring)
    pdl.register(spark)
    writer(events(spark, 0, 100), catalog).save("main.tt")
    first = pdl.connect(catalog.url).current_snapshot_id()
    moment = dt.datetime.now(dt.timezone.utc)
    writer(events(spark, 100, 50), catalog, "overwrite").save("main.tt")
    reads = {
        "latest": reader(spark, catalog, "main.tt"),
        "snapshot": reader(spark, catalog, "main.tt", snapshot=str(first)),
        "versionAsOf": reader(spark, catalog, "main.tt", versionAsOf=str(first)),
        "timestampAsOf": reader(spark, catalog, "main.tt", timestampAsOf=moment.isoformat()),
    }
    tagged = [df.select("id", F.lit(name).alias("_read")) for name, df in reads.items()]
    counts = dict(reduce(DataFrame.union, tagged).groupBy("_read").count().collect())  # the four reads in one job
    assert counts == {"latest": 50, "snapshot": 100, "versionAsOf": 100, "timestampAsOf": 100}
    con = open_duckdb(catalog)
    try:
        assert con.execute(f"SELECT count(*) FROM lake.main.tt AT (VERSION => {first})").fetchone()[0] == 100
        assert con.execute("SELECT min(id) FROM lake.main.tt").fetchone()[0] == 100
    finally:
        con.close()


def test_reads_what_duckdb_wrote_at_every_snapshot(spark: SparkSession, sqlite_catalog: Any) -> None:
    catalog = sqlite_catalog  # one backend: the catalog is not under test here (module docstring)
    con = open_duckdb(catalog, inlining_row_limit=10)
    try:
        con.execute(
            "CREATE TABLE lake.main.d (id BIGINT, s VARCHAR, u UUID, j JSON, h HUGEINT, ub UBIGINT, iv INTERVAL, "
            "l INTEGER[], m MAP(VARCHAR, INTEGER), t TIMESTAMP_NS, tz TIMESTAMPTZ)"
        )
        con.execute(
            "INSERT INTO lake.main.d SELECT i, 'row ' || i, md5(i::VARCHAR)::UUID, '{\"a\": 1}', i::HUGEINT * 10, "
            "i::UBIGINT * 1000000000000, INTERVAL (i) DAY, [i::INTEGER], MAP {'k': i::INTEGER}, "
            "TIMESTAMP_NS '2024-01-01 00:00:00.123456789', TIMESTAMPTZ '2024-01-01 00:00:00+00' FROM range(300) r(i)"
        )
        con.execute("INSERT INTO lake.main.d (id, s) VALUES (1000, 'inl')")
        con.execute("DELETE FROM lake.main.d WHERE id % 10 = 0")
        con.execute("UPDATE lake.main.d SET s = 'upd' WHERE id IN (1, 1000)")
        con.execute("ALTER TABLE lake.main.d ADD COLUMN extra INTEGER DEFAULT 5")
        snaps = [
            r[0] for r in con.execute("SELECT snapshot_id FROM lake.snapshots() WHERE snapshot_id >= 2").fetchall()
        ]
        expected = {
            s: con.execute(
                f"SELECT id, s, CAST(u AS VARCHAR), CAST(j AS VARCHAR), h, ub, l, t FROM lake.main.d "
                f"AT (VERSION => {s}) ORDER BY id"
            ).fetchall()
            for s in snaps
        }
    finally:
        con.close()
    # every snapshot in one Spark job: a union of the reads, tagged by snapshot
    frames = [
        reader(spark, catalog, "main.d", snapshot=str(s)).select("id", "s", "u", "j", "h", "ub", "l", "t", F.lit(s))
        for s in snaps
    ]
    by_snapshot: dict[int, list[tuple[Any, ...]]] = {s: [] for s in snaps}
    for r in reduce(DataFrame.union, frames).collect():
        by_snapshot[r[-1]].append(tuple(r)[:-1])
    for s in snaps:
        rows = sorted(by_snapshot[s], key=lambda r: r[0])
        want = [
            (i, st, u, j, h, ub, lst, t.replace(microsecond=t.microsecond) if t else t)
            for i, st, u, j, h, ub, lst, t in expected[s]
        ]
        assert [r[:7] for r in rows] == [w[:7] for w in want], f"snapshot {s}"
    latest = reader(spark, catalog, "main.d")
    assert dict(latest.dtypes)["iv"] == "string" and dict(latest.dtypes)["ub"] == "decimal(20,0)"
    assert latest.filter("id = 1").select("extra").first()[0] == 5


def test_filters_are_applied_by_spark_to_every_file(spark: SparkSession, sqlite_catalog: Any) -> None:
    catalog = sqlite_catalog
    pdl.register(spark)
    for i in range(4):
        writer(events(spark, i * 1000, 1000).coalesce(1), catalog).save("main.p")
    config = LakeConfig.resolve({"catalog": catalog.url})
    plain = DuckLakeBatchReader(config, "main.p", {}, None)  # type: ignore[arg-type]
    with pdl.connect(catalog.url) as lake:
        files = lake.list_files("main.p").column("data_file").to_pylist()
    assert len(files) == 4
    assert sorted(s.task.file.path for p in plain.partitions() for s in p.slices) == sorted(set(files))  # each once
    # no pushdown: a pruned plan would be reused for the DataFrame's next query (test_spark_read_state.py)
    assert DuckLakeBatchReader.pushFilters is DataSourceReader.pushFilters
    df = reader(spark, catalog, "main.p").filter("id >= 2500 AND id < 2700")
    assert df.count() == 200


def test_unsupported_spark_type_fails_before_writing(spark: SparkSession, sqlite_catalog: Any) -> None:
    catalog = sqlite_catalog
    pdl.register(spark)
    df = spark.range(3).select(F.col("id"), F.expr("INTERVAL '1' DAY").alias("gap"))
    with pytest.raises(Exception, match=r"column 'gap'.*cannot be stored in DuckLake"):
        writer(df, catalog).save("main.bad")
    lake = pdl.connect(catalog.url, catalog.data_path)
    assert lake.tables() == []
    assert not [f for _, _, fs in os.walk(catalog.data_path) for f in fs if f.endswith(".parquet")]


def test_schema_mismatch_and_missing_config(spark: SparkSession, sqlite_catalog: Any) -> None:
    catalog = sqlite_catalog
    pdl.register(spark)
    writer(spark.range(3), catalog).save("main.m")
    with pytest.raises(Exception, match=r"column 'extra' is not in table main\.m"):
        writer(spark.range(3).withColumn("extra", F.lit(1)), catalog).save("main.m")
    with pytest.raises(Exception, match=r"column 'id' of main\.m has type int64, the data has varchar"):
        writer(spark.range(3).select(F.col("id").cast("string").alias("id")), catalog).save("main.m")
    with pytest.raises(Exception, match="no DuckLake catalog configured"):
        spark.read.format("ducklake").load("main.m").count()
    with pytest.raises(Exception, match=r"UNSUPPORTED_DATA_SOURCE_SAVE_MODE|ErrorIfExists|errorifexists"):
        spark.range(3).write.format("ducklake").mode("error").option("catalog", catalog.url).save("main.m")
    assert pdl.connect(catalog.url).scan("main.m").num_rows == 3


def test_spark_conf_configures_the_lake(spark: SparkSession, sqlite_catalog: Any) -> None:
    catalog = sqlite_catalog
    spark.conf.set("spark.ducklake.catalog", catalog.url)
    spark.conf.set("spark.ducklake.dataPath", catalog.data_path)
    try:
        pdl.register(spark)
        spark.range(10).write.format("ducklake").mode("append").save("main.conf")
        assert spark.read.format("ducklake").load("main.conf").count() == 10
    finally:
        spark.conf.unset("spark.ducklake.catalog")
        spark.conf.unset("spark.ducklake.dataPath")
        pdl.register(spark)
    assert pa.Table is not None


def test_partitioned_write_matches_duckdb(spark: SparkSession, sqlite_catalog: Any) -> None:
    catalog = sqlite_catalog  # one backend: the catalog is not under test here (module docstring)
    pdl.register(spark)
    df = events(spark, 0, 2000).withColumn("day", F.to_date("ts"))
    writer(df.repartition(2), catalog).option("partitionBy", "k, month(ts)").save("main.parts")
    lake = pdl.connect(catalog.url)
    table = lake.table("main.parts")
    assert table.partition_by == ["k", "month(ts)"]
    con = open_duckdb(catalog)
    try:
        duck = con.execute("SELECT * FROM lake.main.parts").to_arrow_table()
        folders = {
            p.split("/ducklake-")[0]
            for (p,) in con.execute("SELECT path FROM __ducklake_metadata_lake.ducklake_data_file").fetchall()
        }
        assert con.execute("SELECT count(*) FROM lake.main.parts WHERE k = 3").fetchone()[0] == len(
            [i for i in range(2000) if i % 7 == 3]
        )
    finally:
        con.close()
    assert canonical_rows(duck) == canonical_rows(lake.scan("main.parts"))
    assert {f.split("/")[0] for f in folders} == {f"k={i}" for i in range(7)}
    # Appending with the table's own spec needs no option; a different spec is refused before writing.
    more = events(spark, 2000, 10).withColumn("day", F.to_date("ts"))
    writer(more, catalog).save("main.parts")
    with pytest.raises(Exception, match="differs from the partitioning"):
        writer(more, catalog).option("partitionBy", "k").save("main.parts")
    assert reader(spark, catalog, "main.parts").count() == 2010
