"""A DuckDB-file catalog (``ATTACH 'ducklake:my.ducklake'``) from Spark (local[2]): the data source reads (the table,
an old snapshot, the change feed), the fast read path, writes and the ``foreachBatch`` sink, with the catalog as an
option and as Spark conf. Only the driver side opens the file; DuckDB reads everything back once we are done."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

import pyspark_ducklake as pdl
from tests.support.duck import connect_duckdb, sql_string

pytestmark = pytest.mark.timeout(600)


def _duck(path: str, query: str) -> list[tuple]:
    con = connect_duckdb()
    try:
        con.execute(f"ATTACH {sql_string('ducklake:' + path)} AS lake")
        return con.execute(query).fetchall()
    finally:
        con.close()


@pytest.fixture
def duck_lake(tmp_path: Path) -> str:
    path = str(tmp_path / "spark lake.ducklake")
    con = connect_duckdb()
    try:
        con.execute(f"ATTACH {sql_string('ducklake:' + path)} AS lake")
        con.execute("CREATE TABLE lake.t (id BIGINT, v VARCHAR, s STRUCT(a INTEGER, b VARCHAR[]))")
        con.execute("INSERT INTO lake.t VALUES (1, 'x}', {'a': 1, 'b': ['p]', NULL]}), (2, NULL, NULL)")  # inlined
        con.execute("INSERT INTO lake.t SELECT i, 'p' || i, {'a': i, 'b': []} FROM range(10, 60) r(i)")  # Parquet
        con.execute("DELETE FROM lake.t WHERE id IN (2, 11)")
    finally:
        con.close()
    return path


def _rows(df) -> list[tuple]:
    return sorted(
        (r.id, r.v, None if r.s is None else (r.s.a, list(r.s.b) if r.s.b is not None else None)) for r in df.collect()
    )


def _duck_rows(path: str) -> list[tuple]:
    rows = _duck(path, "SELECT id, v, s FROM lake.t")
    return sorted((i, v, None if s is None else (s["a"], s["b"])) for i, v, s in rows)


def test_spark_reads_writes_and_sinks_a_duckdb_file(spark: SparkSession, duck_lake: str) -> None:
    pdl.register(spark)
    catalog = f"ducklake:{duck_lake}"
    expected = _duck_rows(duck_lake)
    first_snapshot = 2  # DuckDB's inlined insert

    def reader():  # a DataFrameReader keeps its options: a fresh one per read
        return spark.read.format("ducklake").option("catalog", catalog)

    assert _rows(reader().load("main.t")) == expected
    assert _rows(pdl.read_table(spark, "main.t", catalog=catalog)) == expected  # type: ignore[attr-defined]
    old = reader().option("snapshot", first_snapshot).load("main.t")
    assert sorted(r.id for r in old.collect()) == [1, 2]
    feed = reader().option("readChangeFeed", "true").option("startingSnapshot", 0).load("main.t")
    theirs = _duck(
        duck_lake, "SELECT id, change_type, snapshot_id FROM ducklake_table_changes('lake', 'main', 't', 0, 4)"
    )
    assert sorted((r.id, r._change_type, r._snapshot_id) for r in feed.collect()) == sorted(theirs)

    # writes: a batch append, a stream sink, with the catalog as Spark conf
    many = spark.range(100, 400).selectExpr("id", "concat('w', id) AS v", "named_struct('a', 7, 'b', array('}')) AS s")
    many.write.format("ducklake").mode("append").option("catalog", catalog).save("main.t")
    spark.conf.set("spark.ducklake.catalog", catalog)
    try:
        pdl.register(spark)
        sink = pdl.ducklake_sink("main.t", app_id="duckdb-file")
        small = spark.createDataFrame([(500, "s'}", None)], "id bigint, v string, s struct<a:int,b:array<string>>")
        sink(small, 0)  # type: ignore[operator]
        sink(small, 0)  # type: ignore[operator]  # a replay: nothing new
        got = _rows(spark.read.format("ducklake").load("main.t"))
    finally:
        spark.conf.unset("spark.ducklake.catalog")
        pdl.register(spark)
    assert len(got) == len(expected) + 300 + 1
    assert _duck_rows(duck_lake) == got
    assert (500, "s'}", None) in got and (101, "w101", (7, ["}"])) in got


def test_fast_write_path_write_stream_and_feed_stream(spark: SparkSession, duck_lake: str, tmp_path: Path) -> None:
    pdl.register(spark)
    catalog = f"ducklake:{duck_lake}"
    before = _duck_rows(duck_lake)
    # the fast write path (Spark's own Parquet writer)
    df = spark.range(600, 700).selectExpr("id", "concat('f', id) AS v", "named_struct('a', 1, 'b', array('x')) AS s")
    pdl.write_table(df, "main.t", catalog=catalog)  # type: ignore[attr-defined]
    # writeStream into the lake, from a folder of JSON files
    source = tmp_path / "in"
    source.mkdir()
    (source / "a.json").write_text("\n".join(f'{{"id": {800 + i}, "v": "ws{i}"}}' for i in range(5)))
    query = (
        spark.readStream.schema("id bigint, v string")
        .json(str(source))
        .writeStream.format("ducklake")
        .option("catalog", catalog)
        .option("checkpointLocation", str(tmp_path / "ck"))
        .trigger(availableNow=True)
        .start("main.t")
    )
    query.awaitTermination(120)
    assert query.exception() is None
    # the change feed as a stream, from the snapshot after DuckDB's history
    out = tmp_path / "feed"
    feed = (
        spark.readStream.format("ducklake")
        .option("catalog", catalog)
        .option("startingSnapshot", 5)
        .load("main.t")
        .writeStream.format("parquet")
        .option("path", str(out))
        .option("checkpointLocation", str(tmp_path / "ck2"))
        .trigger(availableNow=True)
        .start()
    )
    feed.awaitTermination(120)
    assert feed.exception() is None
    changes = spark.read.parquet(str(out)).collect()
    assert sorted(r.id for r in changes) == [*range(600, 700), *range(800, 805)]
    assert {r._change_type for r in changes} == {"insert"}
    after = _duck_rows(duck_lake)
    assert len(after) == len(before) + 105
    assert (800, "ws0", None) in after and (650, "f650", (1, ["x"])) in after
