"""Spark entry points with inputs nobody listed (the attacker's pass, #14): column names with dots through the sink and
``write_table``, Spark's save modes on ``write_table``, DuckDB views and column types this library cannot read yet.
Real SparkSession, real catalogs; DuckDB reads what was written."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest
import sqlalchemy as sa
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

import pyspark_ducklake as pdl
from pyspark_ducklake.exceptions import TableAlreadyExistsError
from pyspark_ducklake.spark_parquet_read import column_named, plan_read
from pyspark_ducklake.streaming.sink import ducklake_sink
from tests.support.bad_inputs import expect_bad_input
from tests.support.duck import open_duckdb


def duck_rows(catalog: Any, sql: str) -> list[tuple[Any, ...]]:
    con = open_duckdb(catalog)
    try:
        return sorted(con.execute(sql).fetchall())
    finally:
        con.close()


def test_sink_and_write_table_take_a_column_named_with_a_dot(spark: SparkSession, sqlite_catalog: Any) -> None:
    """mapInArrow resolved 'a.b' as field b of a column a: the sink's first batch (and write_table) failed with
    Spark's UNRESOLVED_COLUMN."""
    pdl.register(spark)
    lake = pdl.connect(sqlite_catalog.url, sqlite_catalog.data_path)
    df = spark.range(3).select(F.col("id").alias("a.b"), (F.col("id") * 10).alias("c"))
    sink = ducklake_sink("main.s", catalog=sqlite_catalog.url, app_id="dots")
    sink(df, 0)  # the first batch is written by executor tasks
    sink(spark.range(3, 2003).select(F.col("id").alias("a.b"), (F.col("id") * 10).alias("c")), 1)
    expected = [(i, i * 10) for i in range(2003)]
    assert sorted((r["a.b"], r["c"]) for r in lake.scan("main.s").to_pylist()) == expected
    assert duck_rows(sqlite_catalog, 'SELECT "a.b", c FROM lake.main.s') == expected
    outcome = pdl.write_table(df, "main.w", catalog=sqlite_catalog.url)
    assert outcome.native and outcome.rows == 3
    assert duck_rows(sqlite_catalog, 'SELECT "a.b", c FROM lake.main.w') == expected[:3]


HOSTILE_COLUMNS = ["a.b", "`x`", "sp ace", "q`.`r", "_metadata"]


def test_read_table_and_spark_writes_take_columns_named_with_dots_backticks_and_spaces(
    spark: SparkSession, sqlite_catalog: Any
) -> None:
    """read_table selected its columns with F.col(name), which failed with UNRESOLVED_COLUMN on 'a.b'; every path
    that names a column (plain, promoted and defaulted columns, deletes, the data source and write_table) takes names
    with dots, backticks and spaces, and one named like Spark's _metadata."""
    pdl.register(spark)
    url = sqlite_catalog.url
    lake = pdl.connect(url, sqlite_catalog.data_path, data_inlining_row_limit=0)
    schema = pa.schema([("id", pa.int64()), *[(n, pa.int32()) for n in HOSTILE_COLUMNS]])
    lake.create_table("main.h", schema)
    lake.append("main.h", pa.table({"id": range(20), **{n: range(100, 120) for n in HOSTILE_COLUMNS}}, schema=schema))
    lake.set_column_type("main.h", "a.b", pa.int64())  # the file's int32 is cast in Spark
    lake.add_column("main.h", "new.col", pa.int64(), default=7)  # older files read the default
    lake.delete("main.h", [("sp ace", "=", 103)])  # deleted positions removed by _metadata
    expected = sorted((i, *[100 + i] * len(HOSTILE_COLUMNS), 7) for i in range(20) if i != 3)
    columns = ["id", *HOSTILE_COLUMNS, "new.col"]

    def rows(df: Any) -> list[tuple[Any, ...]]:
        assert df.columns == columns
        return sorted(tuple(r) for r in df.collect())

    read = pdl.read_table(spark, "main.h", catalog=url)
    assert plan_read(spark, "main.h", catalog=url).reason is None  # the native path itself
    source = spark.read.format("ducklake").option("catalog", url).load("main.h")
    feed = spark.read.format("ducklake").option("catalog", url).option("readChangeFeed", "true")
    changes = feed.option("startingSnapshot", "earliest").load("main.h").select(*[column_named(c) for c in columns])
    # the three reads in one Spark job (a union tagged by path; union matches columns by position, names untouched)
    assert read.columns == columns and source.columns == columns and changes.columns == columns
    tagged = [df.withColumn("_path", F.lit(path)) for path, df in enumerate((read, source, changes))]
    got: dict[int, list[tuple[Any, ...]]] = {0: [], 1: [], 2: []}
    for r in tagged[0].union(tagged[1]).union(tagged[2]).collect():
        got[r[-1]].append(tuple(r)[:-1])
    row3 = (3, *[103] * len(HOSTILE_COLUMNS), 7)
    assert sorted(got[0]) == expected
    assert sorted(got[1]) == expected
    assert sorted(got[2]) == sorted([*expected, row3, row3])  # its insert and delete
    for name, write in [
        ("data source", lambda df: df.write.format("ducklake").option("catalog", url).mode("append").save("main.w")),
        ("write_table", lambda df: pdl.write_table(df, "main.w", catalog=url)),
    ]:
        write(read)
        assert rows(pdl.read_table(spark, "main.w", catalog=url)) == sorted(expected * (1 + (name != "data source")))
    quoted = ", ".join('"' + c.replace('"', '""') + '"' for c in columns)
    assert duck_rows(sqlite_catalog, f"SELECT {quoted} FROM lake.main.w") == sorted(expected * 2)


def test_write_table_save_modes_error_and_ignore(spark: SparkSession, sqlite_catalog: Any) -> None:
    """They were refused ("use 'append' or 'overwrite'"); the data source cannot take them (Spark refuses)."""
    pdl.register(spark)
    lake = pdl.connect(sqlite_catalog.url, sqlite_catalog.data_path)
    df = spark.range(3).select("id")
    for mode in ("error", "errorifexists", "ignore"):
        outcome = pdl.write_table(df, f"main.t_{mode}", mode=mode, catalog=sqlite_catalog.url)
        assert outcome.snapshot_id is not None and outcome.rows == 3  # a new table: created and written
        assert sorted(lake.scan(f"main.t_{mode}").column("id").to_pylist()) == [0, 1, 2]
    before = (len(lake.snapshots()), sorted(p.name for p in _files(sqlite_catalog)))
    for mode in ("error", "errorifexists"):
        with pytest.raises(TableAlreadyExistsError, match=f"already exists \\(mode '{mode}'\\)"):
            pdl.write_table(df, "main.t_ignore", mode=mode, catalog=sqlite_catalog.url)
    outcome = pdl.write_table(spark.range(7).select("id"), "main.t_ignore", mode="ignore", catalog=sqlite_catalog.url)
    assert outcome.snapshot_id is None and "nothing written" in (outcome.reason or "")
    assert (len(lake.snapshots()), sorted(p.name for p in _files(sqlite_catalog))) == before
    assert duck_rows(sqlite_catalog, "SELECT id FROM lake.main.t_ignore") == [(0,), (1,), (2,)]


def _files(catalog: Any) -> list[Any]:
    from pathlib import Path

    return [p for p in Path(catalog.data_path).rglob("*") if p.is_file()]


def test_a_duckdb_view_is_named_as_a_view_on_every_entry_point(spark: SparkSession, sqlite_catalog: Any) -> None:
    """Reads said "does not exist; create it with lake.create_table()", writes "already exists; pass exist_ok"."""
    pdl.register(spark)
    lake = pdl.connect(sqlite_catalog.url, sqlite_catalog.data_path)
    lake.create_table("main.t", pa.schema([("id", pa.int64())]))
    lake.append("main.t", pa.table({"id": [1]}))
    con = open_duckdb(sqlite_catalog)
    try:
        con.execute("CREATE VIEW lake.main.v AS SELECT id * 2 AS id FROM lake.main.t")
    finally:
        con.close()
    url = sqlite_catalog.url
    df = spark.range(2).select("id")
    for attempt in (
        lambda: lake.scan("main.v"),
        lambda: lake.append("main.v", pa.table({"id": [5]})),
        lambda: spark.read.format("ducklake").option("catalog", url).load("main.v").collect(),
        lambda: pdl.read_table(spark, "main.v", catalog=url).collect(),
        lambda: df.write.format("ducklake").mode("append").option("catalog", url).save("main.v"),
        lambda: pdl.write_table(df, "main.v", catalog=url),
        lambda: ducklake_sink("main.v", catalog=url, app_id="v")(df, 0),
        lambda: spark.read.format("ducklake").option("catalog", url).option("startingSnapshot", 0).load("main.v"),
    ):
        with expect_bad_input("view-not-table", lake):
            attempt()
    assert duck_rows(sqlite_catalog, "SELECT id FROM lake.main.v") == [(2,)]


def test_a_column_type_we_cannot_read_names_the_column_and_what_to_do(spark: SparkSession, sqlite_catalog: Any) -> None:
    """A type this library cannot read (here one no DuckLake has yet, as a newer DuckLake's would be): the errors
    were typed but said only "has no Arrow equivalent" or "no single-value text"; the other columns stay readable
    (tests/conformance/test_all_types.py)."""
    pdl.register(spark)
    con = open_duckdb(sqlite_catalog)
    try:
        con.execute("CREATE TABLE lake.main.t (id INTEGER, odd VARCHAR)")
        con.execute("INSERT INTO lake.main.t SELECT i, 'x' FROM range(20) r(i)")
    finally:
        con.close()
    engine = sa.create_engine(sqlite_catalog.url)
    with engine.begin() as conn:
        conn.execute(sa.text("UPDATE ducklake_column SET column_type = 'future_type' WHERE column_name = 'odd'"))
    engine.dispose()
    lake = pdl.connect(sqlite_catalog.url)
    url = sqlite_catalog.url
    assert lake.scan("main.t", columns=["id"]).num_rows == 20
    for attempt in (
        lambda: lake.scan("main.t"),
        lambda: spark.read.format("ducklake").option("catalog", url).load("main.t").collect(),
        lambda: pdl.read_table(spark, "main.t", catalog=url).collect(),
        lambda: spark.read.format("ducklake").option("catalog", url).option("startingSnapshot", 0).load("main.t"),
    ):
        with expect_bad_input("unreadable-type", lake) as err:
            attempt()
        assert "column 'odd' has DuckLake type 'future_type'" in str(err.value)
