"""The write checks hold on every Spark path, as in Python: the data source writer, the fast path ``write_table``
and the streaming sink share one conform step (struct fields never dropped, names DuckDB refuses refused on
auto-create, far dates written exactly), and dotted or quoted table names work in
``load()``/``save()`` and the sink."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

import pyspark_ducklake as pdl
from pyspark_ducklake import ducklake_sink
from tests.support.bad_inputs import expect_bad_input
from tests.support.duck import open_duckdb

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

STRUCT = T.StructType([T.StructField("a", T.LongType()), T.StructField("b", T.StringType())])


@pytest.fixture
def lake(sqlite_catalog: Any, spark: SparkSession) -> pdl.Lake:
    pdl.register(spark)
    lake = pdl.connect(sqlite_catalog.url, sqlite_catalog.data_path)
    lake.create_table(
        "main.t", pa.schema([("id", pa.int64()), ("s", pa.struct([("a", pa.int64()), ("b", pa.string())]))])
    )
    lake.append("main.t", pa.table({"id": [0], "s": [{"a": 0, "b": "x"}]}))
    return lake


def frame(spark: SparkSession, struct: T.StructType, row: tuple[Any, ...]) -> Any:
    return spark.createDataFrame(
        [(1, row)], T.StructType([T.StructField("id", T.LongType()), T.StructField("s", struct)])
    )


def writes(df: Any, url: str, table: str) -> list[Any]:
    """The three Spark write paths, each as a callable."""
    return [
        lambda: df.write.format("ducklake").option("catalog", url).mode("append").save(table),
        lambda: pdl.write_table(df, table, catalog=url),
        lambda: ducklake_sink(table, catalog=url, app_id="spark-test")(df, 7),
    ]


def test_struct_fields_on_every_spark_write_path(spark: SparkSession, lake: pdl.Lake, sqlite_catalog: Any) -> None:
    url = lake.location.url
    extra = T.StructType([*STRUCT.fields, T.StructField("c", T.StringType())])
    upper = T.StructType([T.StructField("a", T.LongType()), T.StructField("B", T.StringType())])
    for write in writes(frame(spark, extra, (1, "y", "lost?")), url, "main.t"):
        with expect_bad_input("struct-field-unknown", lake):
            write()
    for write in writes(frame(spark, upper, (1, "kept?")), url, "main.t"):
        with expect_bad_input("name-case-only", lake):
            write()
    # the sink with merge_schema adds the field as DuckDB's ADD COLUMN s.c does, in the batch's snapshot
    ducklake_sink("main.t", catalog=url, app_id="spark-test", merge_schema=True)(
        frame(spark, extra, (1, "y", "kept")), 0
    )
    assert {r["id"]: r["s"] for r in lake.scan("main.t").to_pylist()} == {
        0: {"a": 0, "b": "x", "c": None},
        1: {"a": 1, "b": "y", "c": "kept"},
    }
    con = open_duckdb(sqlite_catalog)
    try:
        assert con.execute("SELECT s.c FROM lake.main.t WHERE id = 1").fetchone() == ("kept",)
    finally:
        con.close()


def test_auto_create_refuses_what_duckdb_refuses(spark: SparkSession, lake: pdl.Lake) -> None:
    url = lake.location.url
    df = spark.createDataFrame([(1,)], "x long")
    for write in writes(df, url, "main.T"):
        with expect_bad_input("create-case-only", lake):
            write()
    dup = spark.createDataFrame([(1, 2)], "a long, b long").toDF("a", "A")
    for write in writes(dup, url, "main.new"):
        with expect_bad_input("duplicate-names", lake):
            write()
    assert lake.tables() == ["main.t"]


def test_spark_writes_refuse_a_new_table_with_a_reserved_column_name_while_inlining_is_on(
    spark: SparkSession, lake: pdl.Lake, sqlite_catalog: Any
) -> None:
    """DuckDB refuses CREATE TABLE with row_id, begin_snapshot... while inlining is on; so does every Spark path (the
    sink also refuses adding one with merge_schema), and with inlining off the table is created and DuckDB reads it."""
    url = lake.location.url
    # Each name (a reserved one, one in another case, the internal prefix) through one of the three write paths in
    # turn, and through the sink's merge_schema: the paths share the one conform step that checks the name (module
    # docstring), so the diagonal covers each path and each kind of name without the 3 x 3 Spark writes.
    for i, name in enumerate(["row_id", "Begin_Snapshot", "_ducklake_internal_row_id"]):
        df = spark.createDataFrame([(1, 2)], "id long, x long").toDF("id", name)
        with expect_bad_input("reserved-column-name", lake):
            writes(df, url, "main.r")[i]()
        with expect_bad_input("reserved-column-name", lake):
            ducklake_sink("main.t", catalog=url, app_id="merge", merge_schema=True)(
                spark.createDataFrame([(1, 2)], "id long, x long").toDF("id", name), 0
            )
    assert lake.tables() == ["main.t"]
    df = spark.createDataFrame([(1, 2)], "id long, end_snapshot long")
    write = df.write.format("ducklake").mode("append").option("catalog", url)
    write.option("data_inlining_row_limit", "0").save("main.w")
    ducklake_sink("main.k", catalog=url, app_id="off", data_inlining_row_limit=0)(df, 0)
    con = open_duckdb(sqlite_catalog)
    try:
        for table in ("w", "k"):
            assert con.execute(f"SELECT id, end_snapshot FROM lake.main.{table}").fetchall() == [(1, 2)]
    finally:
        con.close()


def test_far_dates_through_spark_writes(spark: SparkSession, lake: pdl.Lake, sqlite_catalog: Any) -> None:
    url = lake.location.url
    days = [3_000_000, -800_000, 0]
    offsets = F.array(*[F.lit(d) for d in days])
    df = spark.range(3).select(
        F.col("id"),
        F.date_add(F.lit(dt.date(1970, 1, 1)), F.element_at(offsets, F.col("id").cast("int") + 1)).alias("d"),
    )
    for i in range(3):
        writes(df, url, f"main.far{i}")[i]()  # data source, fast path, sink: one table each
        got = lake.scan(f"main.far{i}").sort_by("id").column("d").cast(pa.int32()).to_pylist()
        assert got == days
        con = open_duckdb(sqlite_catalog)
        try:
            texts = [r[0] for r in con.execute(f"SELECT d::VARCHAR FROM lake.main.far{i} ORDER BY id").fetchall()]
            assert texts == ["10183-09-21", "0222-09-04 (BC)", "1970-01-01"]
        finally:
            con.close()


def test_dotted_and_quoted_names_through_spark(spark: SparkSession, lake: pdl.Lake) -> None:
    url = lake.location.url
    lake.create_schema("we.ird")
    name = '"we.ird"."t.x"'
    df = spark.createDataFrame([(1, "a"), (2, "b")], "id long, v string")
    for write in writes(df, url, name):
        write()
    assert lake.scan(("we.ird", "t.x")).num_rows == 6
    got = spark.read.format("ducklake").option("catalog", url).load(name)
    assert got.count() == 6
    assert pdl.read_table(spark, name, catalog=url).count() == 6
