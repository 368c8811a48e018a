"""The lake's metadata as Spark DataFrames (option ``metadata``) and SQL tables, equal to DuckDB's
``ducklake_snapshots()`` / ``ducklake_table_info()`` / ``ducklake_list_files()`` on the same lake, both catalogs."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from pyspark.sql import SparkSession

import pyspark_ducklake as pdl
from tests.support.duck import open_duckdb


def canonical(value: Any) -> Any:
    if isinstance(value, dict):
        return sorted((k, sorted(v)) for k, v in value.items())
    if isinstance(value, list) and value and isinstance(value[0], tuple):  # an Arrow map in to_pylist
        return sorted((k, sorted(v)) for k, v in value)
    if value is not None and type(value).__name__ == "UUID":
        return str(value)
    return value


def table_rows(table: Any) -> tuple[list[str], list[tuple[Any, ...]]]:
    rows = [tuple(canonical(v) for v in r.values()) for r in table.to_pylist()]
    return table.column_names, sorted(rows, key=repr)


def duck(catalog: Any, query: str) -> tuple[list[str], list[tuple[Any, ...]]]:
    con = open_duckdb(catalog)
    try:
        result = con.execute(query)
        names = [d[0] for d in result.description]
        return names, sorted((tuple(canonical(v) for v in r) for r in result.fetchall()), key=repr)
    finally:
        con.close()


def test_metadata_dataframes_and_sql(spark: SparkSession, catalog: Any) -> None:
    con = open_duckdb(catalog, inlining_row_limit=0)
    try:
        con.execute("CREATE TABLE lake.main.t (id BIGINT, s VARCHAR)")
        con.execute("INSERT INTO lake.main.t SELECT range, 'x' FROM range(50)")
        con.execute("DELETE FROM lake.main.t WHERE id < 5")
        con.execute("CREATE TABLE lake.main.u (a INTEGER)")
    finally:
        con.close()
    pdl.register(spark)

    def read(kind: str, table: str | None = None) -> Any:
        r = spark.read.format("ducklake").option("catalog", catalog.url).option("metadata", kind)
        return (r.load(table) if table else r.load()).toArrow()

    assert table_rows(read("snapshots")) == duck(catalog, "SELECT * FROM ducklake_snapshots('lake')")
    listing = spark.read.format("ducklake").option("catalog", catalog.url).option("metadata", "snapshots")
    newest = duck(catalog, "SELECT * FROM ducklake_snapshots('lake') ORDER BY snapshot_id DESC LIMIT 2")
    assert table_rows(listing.option("limit", 2).load().toArrow()) == newest
    paged = duck(catalog, "SELECT * FROM ducklake_snapshots('lake') WHERE snapshot_id >= 1 ORDER BY 1 LIMIT 2")
    assert table_rows(listing.option("since", 1).option("limit", 2).load().toArrow()) == paged
    assert listing.option("since", 10**6).load().count() == 0
    assert table_rows(read("table_info")) == duck(catalog, "SELECT * FROM ducklake_table_info('lake')")
    files = duck(catalog, "SELECT * FROM ducklake_list_files('lake', 't')")
    assert table_rows(read("files", "main.t")) == files
    assert len(files[1]) == 1 and files[1][0][4] is not None  # a data file with its delete file

    name = f"snaps_{uuid.uuid4().hex[:8]}"
    try:
        spark.sql(f"CREATE TABLE {name} USING ducklake OPTIONS (metadata 'snapshots', catalog '{catalog.url}')")
        got = spark.sql(f"SELECT snapshot_id, changes FROM {name}").collect()
        expected = duck(catalog, "SELECT snapshot_id, changes FROM ducklake_snapshots('lake')")[1]
        assert sorted(((r.snapshot_id, canonical(r.changes)) for r in got), key=repr) == expected
    finally:
        spark.sql(f"DROP TABLE IF EXISTS {name}")


def test_metadata_option_errors(spark: SparkSession, sqlite_catalog: Any) -> None:
    pdl.register(spark)
    r = spark.read.format("ducklake").option("catalog", sqlite_catalog.url)
    with pytest.raises(Exception, match="option metadata must be one of snapshots, table_info, files"):
        r.option("metadata", "snapshot").load().collect()
    with pytest.raises(Exception, match="lists one table's files"):
        r.option("metadata", "files").load().collect()
    with pytest.raises(Exception, match="about the whole lake"):
        r.option("metadata", "snapshots").load("main.t").collect()

    def fresh() -> Any:  # a DataFrameReader keeps the options given to it
        return spark.read.format("ducklake").option("catalog", sqlite_catalog.url)

    with pytest.raises(Exception, match="option limit must be >= 1, got 0"):
        fresh().option("metadata", "snapshots").option("limit", 0).load().collect()
    with pytest.raises(Exception, match="option since bounds the listing of snapshots"):
        fresh().option("metadata", "table_info").option("since", 3).load().collect()
    with pytest.raises(Exception, match="option limit bounds the listing of snapshots"):
        fresh().option("limit", 3).load("main.t").collect()
