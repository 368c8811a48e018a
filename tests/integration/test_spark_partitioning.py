"""bucket(N, col) partitions written from Spark (the data source, ``write_table``, the sink, ``writeStream``): every file
holds rows of one bucket, the bucket DuckDB 1.5.5's own ``murmur3_32`` gives them, in DuckDB's folders."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import duckdb
import pyarrow.parquet as pq
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

import pyspark_ducklake as pdl
from tests.support.duck import open_duckdb


def rows(spark: SparkSession, start: int, n: int) -> Any:
    return spark.range(start, start + n).select(
        (F.col("id") - 50).alias("id"),
        F.when(F.col("id") % 5 == 0, None).otherwise(F.concat(F.lit("a/b "), F.col("id").cast("string"))).alias("s"),
    )


def check_buckets(con: duckdb.DuckDBPyConnection, lake: pdl.Lake, table: str, keys: list[tuple[str, int]]) -> int:
    """Each file's partition values are the buckets DuckDB computes for each of its rows; returns how many files."""
    files = lake.list_files(table).to_pylist()
    for f in files:
        path = f["data_file"]
        data = pq.read_table(path)
        folders = path.split("/")[-1 - len(keys) : -1]
        for (column, n), folder in zip(keys, folders, strict=True):
            con.register("f", data)
            buckets = con.execute(f"SELECT DISTINCT (murmur3_32({column}) & 2147483647) % {n} FROM f").fetchall()
            con.unregister("f")
            assert len(buckets) == 1, path
            assert folder.split("=", 1)[1] == (
                "__HIVE_DEFAULT_PARTITION__" if buckets[0][0] is None else str(buckets[0][0])
            )
    return len(files)


def test_spark_writes_bucket_partitions(spark: SparkSession, sqlite_catalog: Any, tmp_path: Path) -> None:
    catalog = sqlite_catalog
    pdl.register(spark)
    options = {"catalog": catalog.url, "dataPath": catalog.data_path}
    # the data source creates the table with the keys, then appends with the table's own
    df = rows(spark, 0, 400).repartition(3)
    df.write.format("ducklake").mode("append").options(**options).option(
        "partitionBy", "bucket(4, id), bucket(3, s)"
    ).save("main.ds")
    rows(spark, 400, 100).write.format("ducklake").mode("append").options(**options).save("main.ds")
    # write_table falls back to the data source for a partitioned table
    pdl.write_table(rows(spark, 500, 100), "main.ds", mode="append", catalog=catalog.url, data_path=catalog.data_path)
    # the sink creates its table partitioned; a large batch goes to Parquet from the executors, small ones inline
    # and its threshold flush writes them partitioned
    sink = pdl.ducklake_sink("main.sk", catalog=catalog.url, data_path=catalog.data_path, app_id="b",
                             partition_by="bucket(5, id)", data_inlining_row_limit=50)  # fmt: skip
    sink(rows(spark, 0, 300).repartition(2), 0)
    sink(rows(spark, 300, 20), 1)
    # writeStream with the same option
    source = tmp_path / "in"
    source.mkdir()
    (source / "f.json").write_text("\n".join(json.dumps({"id": i - 7, "s": f"x{i}"}) for i in range(200)))
    query = (
        spark.readStream.schema("id BIGINT, s STRING").json(str(source))
        .writeStream.format("ducklake").options(**options).option("partitionBy", "bucket(2, s)")
        .option("data_inlining_row_limit", "0").option("checkpointLocation", str(tmp_path / "ck"))
        .trigger(availableNow=True).start("main.ws")
    )  # fmt: skip
    query.awaitTermination(120)
    assert query.exception() is None
    lake = pdl.connect(catalog.url)
    lake.flush_inlined_data("main.sk")
    con = open_duckdb(catalog)
    try:
        assert check_buckets(con, lake, "main.ds", [("id", 4), ("s", 3)]) > 12
        assert check_buckets(con, lake, "main.sk", [("id", 5)]) >= 10
        assert check_buckets(con, lake, "main.ws", [("s", 2)]) == 2
        for table, n in (("ds", 600), ("sk", 320), ("ws", 200)):
            assert con.execute(f"SELECT count(*) FROM lake.main.{table}").fetchone()[0] == n
        assert con.execute("SELECT count(*) FROM lake.main.ds WHERE id = 7").fetchone()[0] == 1
    finally:
        con.close()
    assert lake.table("main.ds").partition_by == ["bucket(4, id)", "bucket(3, s)"]
    assert lake.scan("main.ds", filter=[("id", "=", 7)]).num_rows == 1
