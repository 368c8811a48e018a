"""Encrypted lakes through Spark: the data source, ``read_table`` (its documented fallback to the data source) and
the change feed read DuckDB's encrypted files exactly; every Spark write (the data source writer, ``write_table``'s
fallback, the foreachBatch sink, whose write path writeStream shares) writes files encrypted with their own keys that DuckDB reads; the
``encrypted`` option creates an encrypted lake. Real SparkSession, real catalogs, DuckDB as the oracle."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

import pyspark_ducklake as pdl
from pyspark_ducklake.spark_parquet_read import plan_read
from pyspark_ducklake.streaming.sink import ducklake_sink
from tests.conformance.test_encrypted_lake import assert_every_file_encrypted, catalog_rows, duck_encrypted
from tests.support.bad_inputs import expect_bad_input
from tests.support.compare import canonical, canonical_rows

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]


def duck_table(catalog: Any, sql: str) -> list[tuple[Any, ...]]:
    con = duck_encrypted(catalog, encrypted="")
    try:
        return canonical_rows(con.execute(sql).to_arrow_table())
    finally:
        con.close()


def spark_rows(df: Any) -> list[tuple[Any, ...]]:
    import pyarrow as pa

    return canonical_rows(pa.Table.from_pylist([r.asDict(recursive=True) for r in df.collect()]))


def test_spark_reads_duckdbs_encrypted_lake_exactly(spark: SparkSession, catalog: Any) -> None:
    con = duck_encrypted(catalog)
    try:
        con.execute("CREATE TABLE lake.main.t (id BIGINT, s VARCHAR, l INTEGER[], st STRUCT(a INT, b VARCHAR))")
        con.execute(
            "INSERT INTO lake.main.t SELECT i, CASE WHEN i % 4 = 0 THEN NULL ELSE 'v' || (i % 9) END, [i::INT, NULL], "
            "{'a': i::INT, 'b': 'b' || i} FROM range(5000) r(i)"
        )
        con.execute("DELETE FROM lake.main.t WHERE id % 10 = 0")
        con.execute("UPDATE lake.main.t SET s = 'upd' WHERE id BETWEEN 100 AND 120")
        con.execute("INSERT INTO lake.main.t VALUES (9000, 'inlined', [1], {'a': 1, 'b': 'x'})")
        expected = canonical_rows(con.execute("SELECT * FROM lake.main.t").to_arrow_table())
        last = con.execute("SELECT max(snapshot_id) FROM lake.snapshots()").fetchone()[0]
        feed = con.execute(
            f"SELECT snapshot_id, rowid, change_type, id, s FROM ducklake_table_changes('lake', 'main', 't', 0, {last})"
        ).fetchall()
    finally:
        con.close()
    url = catalog.url
    plan = plan_read(spark, "main.t", catalog=url)
    assert plan.reason == "the lake is encrypted"  # Spark's own reader cannot decrypt: the documented fallback
    assert spark_rows(pdl.read_table(spark, "main.t", catalog=url)) == expected
    assert spark_rows(spark.read.format("ducklake").option("catalog", url).load("main.t")) == expected
    changes = (
        spark.read.format("ducklake")
        .option("catalog", url)
        .option("startingSnapshot", 0)
        .load("main.t")
        .select("_snapshot_id", "_rowid", "_change_type", "id", "s")
        .collect()
    )
    assert Counter(tuple(canonical(v) for v in r) for r in changes) == Counter(
        tuple(canonical(v) for v in r) for r in feed
    )


def test_every_spark_write_into_an_encrypted_lake_is_encrypted_and_duckdb_reads_it(
    spark: SparkSession, catalog: Any
) -> None:
    con = duck_encrypted(catalog)
    try:
        con.execute("CREATE TABLE lake.main.t (id BIGINT, s VARCHAR, l INTEGER[])")
        con.execute("INSERT INTO lake.main.t SELECT i, 'duck' || i, [i::INT] FROM range(100) r(i)")
    finally:
        con.close()
    pdl.register(spark)
    url = catalog.url

    def frame(start: int, n: int) -> Any:
        return spark.range(start, start + n).select(
            F.col("id"),
            F.when(F.col("id") % 3 == 0, F.lit(None)).otherwise(F.concat(F.lit("s"), F.col("id"))).alias("s"),
            F.array(F.col("id").cast("int"), F.lit(None).cast("int")).alias("l"),
        )

    frame(1000, 2000).write.format("ducklake").option("catalog", url).mode("append").save("main.t")
    outcome = pdl.write_table(frame(4000, 2000), "main.t", catalog=url)
    assert not outcome.native and outcome.reason == "the lake is encrypted"
    sink = ducklake_sink("main.t", catalog=url, app_id="enc", data_inlining_row_limit=10)
    sink(frame(7000, 3000), 0)  # written by executor tasks
    sink(frame(11000, 5), 1)  # inlined
    frame(20000, 500).write.format("ducklake").option("catalog", url).mode("append").save("main.created")
    lake = pdl.connect(url)
    lake.flush_inlined_data("main.t")
    ours = canonical_rows(lake.scan("main.t"))
    created = canonical_rows(lake.scan("main.created"))
    lake.close()
    assert len(ours) == 100 + 2000 + 2000 + 3000 + 5
    assert_every_file_encrypted(catalog)
    assert duck_table(catalog, "SELECT * FROM lake.main.t") == ours
    assert duck_table(catalog, "SELECT * FROM lake.main.created") == created
    assert spark_rows(spark.read.format("ducklake").option("catalog", url).load("main.t")) == ours


def test_the_encrypted_option_creates_an_encrypted_lake_from_spark(spark: SparkSession, catalog: Any) -> None:
    df = spark.range(0, 50).select(F.col("id"), F.concat(F.lit("v"), F.col("id")).alias("s"))
    (
        df.write.format("ducklake")
        .option("catalog", catalog.url)
        .option("dataPath", catalog.data_path)
        .option("encrypted", "true")
        .mode("append")
        .save("main.t")
    )
    assert catalog_rows(catalog, "SELECT value FROM ducklake_metadata WHERE key = 'encrypted'") == [("true",)]
    assert_every_file_encrypted(catalog)
    assert duck_table(catalog, "SELECT * FROM lake.main.t") == [(i, f"v{i}") for i in range(50)]
    lake = pdl.connect(catalog.url)
    with expect_bad_input("encrypted-option-mismatch", lake):
        df.write.format("ducklake").option("catalog", catalog.url).option("encrypted", "false").mode("append").save(
            "main.t"
        )
    with expect_bad_input("encrypted-option-mismatch", lake):
        ducklake_sink("main.t", catalog=catalog.url, app_id="x", encrypted="false")(df, 0)
    lake.close()
