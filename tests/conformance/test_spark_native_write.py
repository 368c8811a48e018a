"""``pdl.write_table``: Spark's own Parquet writer, committed to DuckLake, read back exactly by DuckDB.

The same DataFrame is written natively and through the ``ducklake`` data source; DuckDB must read both as the
source rows, and the catalog must hold the same statistics for both (file and table level), since DuckDB trusts
them (wrong table min/max silently corrupt ``ORDER BY`` results).
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from sqlalchemy import create_engine, text

import pyspark_ducklake as pdl
from pyspark_ducklake.spark_parquet_write import write_table
from tests.support.compare import canonical_rows
from tests.support.duck import open_duckdb

STATS_SQL = """
SELECT c.column_id, c.value_count, c.null_count, c.min_value, c.max_value, c.contains_nan
FROM ducklake_file_column_stats c
JOIN ducklake_data_file f ON f.data_file_id = c.data_file_id
JOIN ducklake_table t ON t.table_id = f.table_id
WHERE t.table_name = :name AND f.end_snapshot IS NULL
ORDER BY f.record_count, c.column_id
"""
TABLE_STATS_SQL = """
SELECT s.column_id, s.contains_null, s.contains_nan, s.min_value, s.max_value
FROM ducklake_table_column_stats s JOIN ducklake_table t ON t.table_id = s.table_id
WHERE t.table_name = :name ORDER BY s.column_id
"""


def mixed(spark: SparkSession, n: int) -> DataFrame:
    """Every type the native path writes: integers, floats with NaN, decimals, dates and timestamps (also before
    1582), strings (one over parquet-mr's 4 KiB statistics limit), binary, and nested types."""
    i = F.col("id")
    return spark.range(0, n, 1, 2).select(
        i.alias("id"),
        (i % 100).cast("tinyint").alias("i8"),
        (i * 3).cast("smallint").alias("i16"),
        F.when(i % 9 == 0, None).otherwise(i.cast("int")).alias("i32"),
        F.when(i == 7, F.lit(float("nan"))).otherwise(i / 3).alias("dbl"),
        (i / 7).cast("float").alias("flt"),
        (i * 1001).cast("decimal(9,2)").alias("d9"),
        (i * -7).cast("decimal(18,3)").alias("d18"),
        (i * 1_000_003).cast("decimal(38,10)").alias("d38"),
        F.when(i % 5 == 0, None).otherwise(F.concat(F.lit("s-ü-"), i.cast("string"))).alias("s"),
        F.when(i == 3, F.expr("repeat('z', 5000)")).otherwise(F.lit("a")).alias("long"),
        F.expr("cast(cast(id as string) as binary)").alias("bin"),
        F.expr("date_add(date'1500-02-28', cast(id as int))").alias("d"),
        F.timestamp_micros(i * 86_400_000_003 - 12_000_000_000_000_000).alias("ts"),
        F.expr("cast(timestamp_micros(id * 1000001) as timestamp_ntz)").alias("ntz"),
        (i % 2 == 0).alias("flag"),
        F.when(i % 4 == 0, None).otherwise(F.array(i.cast("int"), F.lit(None).cast("int"))).alias("arr"),
        F.struct(i.alias("a"), F.array(F.lit("x"), i.cast("string")).alias("inner")).alias("st"),
        F.create_map(F.lit("k"), i.cast("double"), F.lit("nan"), F.lit(float("nan"))).alias("mp"),
        F.array(F.struct(i.alias("x"), F.lit("y").alias("y"))).alias("arrst"),
    )


def catalog_rows(catalog: Any, sql: str, name: str) -> list[tuple[Any, ...]]:
    engine = create_engine(catalog.url)
    try:
        with engine.connect() as conn:
            return [tuple(r) for r in conn.execute(text(sql), {"name": name}).all()]
    finally:
        engine.dispose()


def test_native_write_reads_back_exactly_in_duckdb(spark: SparkSession, catalog: Any) -> None:
    pdl.register(spark)
    source = mixed(spark, 400).cache()
    outcome = write_table(source, "main.nat", catalog=catalog.url, data_path=catalog.data_path)
    assert outcome.native and outcome.rows == 400 and outcome.files == 2, outcome
    source.write.format("ducklake").mode("append").option("catalog", catalog.url).option(
        "dataPath", catalog.data_path
    ).save("main.ds")
    want = canonical_rows(source.toArrow())
    con = open_duckdb(catalog)
    try:
        assert canonical_rows(con.execute("SELECT * FROM lake.main.nat").to_arrow_table()) == want
        assert canonical_rows(con.execute("SELECT * FROM lake.main.ds").to_arrow_table()) == want
        # ORDER BY materialises values through the table's min/max statistics.
        ordered = "SELECT id, i8, i16, i32, d9, d18, d, ts FROM lake.main.{} ORDER BY i16 DESC, id"
        assert con.execute(ordered.format("nat")).fetchall() == con.execute(ordered.format("ds")).fetchall()
        # NaN sorts above every number in DuckDB: 99 values over 100, and the NaN. Spark's footers say so too.
        assert con.execute("SELECT count(*) FROM lake.main.nat WHERE dbl > 100").fetchone() == (100,)
    finally:
        con.close()
    assert catalog_rows(catalog, STATS_SQL, "nat") == catalog_rows(catalog, STATS_SQL, "ds")
    assert catalog_rows(catalog, TABLE_STATS_SQL, "nat") == catalog_rows(catalog, TABLE_STATS_SQL, "ds")
    # Spark's checksum files and markers are gone; the native files read back through Spark too.
    leftovers = [p.name for p in Path(catalog.data_path).rglob("*") if p.name.startswith((".", "_"))]
    assert leftovers == []
    assert canonical_rows(pdl.read_table(spark, "main.nat", catalog=catalog.url).toArrow()) == want
    source.unpersist()


def test_native_appends_overwrite_and_time_travel(spark: SparkSession, catalog: Any) -> None:
    lake = pdl.connect(catalog.url, catalog.data_path)
    try:
        schema = pa.schema(
            [("id", pa.int64()), ("v", pa.float64()), ("amount", pa.decimal128(12, 2)), ("s", pa.string())]
        )
        lake.create_table("main.t", schema)
        lake.append(
            "main.t",
            pa.table(
                {"id": [1, 2], "v": [0.5, 1.5], "amount": pa.array([1, 2], pa.decimal128(12, 2)), "s": ["a", "b"]}
            ),
        )
        lake.add_column("main.t", "extra", pa.int32(), default=5)
    finally:
        lake.close()
    df = spark.range(10, 310, 1, 3).select(
        F.col("id"),
        F.col("id").cast("float").alias("v"),  # float -> double: a promotion, cast by Spark
        F.col("id").cast("decimal(9,2)").alias("amount"),  # decimal(9,2) -> decimal(12,2)
    )  # s and extra missing: NULL and the column's default
    first = write_table(df, "main.t", catalog=catalog.url)
    assert first.native and first.rows == 300, first
    second = write_table(df.limit(7), "main.t", mode="overwrite", catalog=catalog.url)
    assert second.native
    partitioned = write_table(
        df,
        "main.parts",
        partition_by="id",
        catalog=catalog.url,
        data_path=catalog.data_path,
        options={"targetFileRows": "100"},
    )
    assert not partitioned.native and partitioned.reason == "the table is partitioned"
    con = open_duckdb(catalog)
    try:
        rows = con.execute(
            f"SELECT count(*), sum(id), min(extra), max(extra), count(s) FROM lake.main.t AT (VERSION => {first.snapshot_id})"
        ).fetchone()
        assert rows == (302, 3 + sum(range(10, 310)), 5, 5, 2)
        assert con.execute("SELECT count(*), sum(v), count(s) FROM lake.main.t").fetchone() == (
            7,
            float(sum(range(10, 17))),
            0,
        )
        assert con.execute("SELECT count(*) FROM lake.main.parts").fetchone() == (300,)
    finally:
        con.close()


def test_native_write_falls_back_for_types_spark_cannot_write(spark: SparkSession, sqlite_catalog: Any) -> None:
    catalog = sqlite_catalog
    lake = pdl.connect(catalog.url, catalog.data_path)
    try:
        lake.create_table("main.u", pa.schema([("id", pa.int64()), ("u", pa.uint32()), ("at", pa.timestamp("ms"))]))
    finally:
        lake.close()
    df = spark.range(5).select(
        "id", F.col("id").alias("u"), F.timestamp_seconds(F.col("id")).cast("timestamp_ntz").alias("at")
    )
    outcome = write_table(df, "main.u", catalog=catalog.url)
    assert not outcome.native and outcome.reason is not None and "type uint32" in outcome.reason
    con = open_duckdb(catalog)
    try:
        assert con.execute('SELECT sum(u), max("at") FROM lake.main.u').fetchone() == (
            10,
            dt.datetime(1970, 1, 1, 0, 0, 4),
        )
    finally:
        con.close()
