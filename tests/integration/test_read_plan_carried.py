"""A batch read asks the catalog once: the scan ``schema()`` plans when the DataFrame is loaded travels with the data
source to ``partitions()`` (batch/reader.py), when it is small and of the pinned snapshot; it is never pickled into
the read's tasks. DuckDB writes the table (files, a delete file, inlined rows) and is the oracle for what a read
returns."""

from __future__ import annotations

import pickle
import shutil
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

import pyspark_ducklake as pdl
from pyspark_ducklake.batch import reader as batch_reader
from pyspark_ducklake.batch.reader import DuckLakeBatchReader, FilesPartition, InlinedPartition, read_schema
from pyspark_ducklake.datasource import DuckLakeDataSource
from pyspark_ducklake.spark.lake_config import LakeConfig


def _duckdb_table(duckdb_lake: Any, catalog: Any) -> tuple[Any, list[tuple[Any, ...]]]:
    """main.t in DuckDB: two data files, rows deleted from the first, a few inlined rows; its rows as DuckDB reads
    them."""
    con = duckdb_lake(catalog, inlining_row_limit=10)
    con.execute("CREATE TABLE lake.t (id BIGINT, s VARCHAR, l INTEGER[])")
    con.execute("INSERT INTO lake.t SELECT i, 's' || i, [i, NULL] FROM range(0, 2000) r(i)")
    con.execute("INSERT INTO lake.t SELECT i, NULL, [] FROM range(2000, 3000) r(i)")
    con.execute("DELETE FROM lake.t WHERE id % 7 = 0 AND id < 2000")
    con.execute("INSERT INTO lake.t VALUES (5000, 'inlined', NULL), (5001, NULL, [1])")
    rows = con.execute("SELECT id, s, l FROM lake.t ORDER BY id").fetchall()
    return con, rows


def _source(catalog: Any, **options: str) -> DuckLakeDataSource:
    return DuckLakeDataSource({"catalog": catalog.url, "dataPath": catalog.data_path, "path": "main.t", **options})


def _partition_files(parts: list[Any]) -> list[str]:
    return sorted(s.task.file.path for p in parts if isinstance(p, FilesPartition) for s in p.slices)


def test_load_plans_once_and_the_reader_keeps_the_plan_out_of_its_tasks(catalog: Any, duckdb_lake: Any) -> None:
    con, _ = _duckdb_table(duckdb_lake, catalog)
    files = sorted(r[0] for r in con.execute("SELECT data_file FROM ducklake_list_files('lake', 't')").fetchall())
    assert len(files) == 2
    source = _source(catalog)
    schema = source.schema()
    assert source._plan is not None  # planned with the schema, pickled with the data source to partitions()
    source = pickle.loads(pickle.dumps(source))  # as Spark ships it to the planning worker
    reader = source.reader(schema)
    assert source._plan is None and reader._plan is not None
    shipped = pickle.loads(pickle.dumps(reader))  # as Spark ships the reader into every task
    assert shipped._plan is None and shipped.snapshot == reader.snapshot
    parts = reader.partitions()
    assert reader._plan is None
    assert _partition_files(parts) == files
    assert sum(isinstance(p, InlinedPartition) for p in parts) == 1
    # the same partitions as a reader planning from the catalog itself
    assert _partition_files(shipped.partitions()) == files


def test_a_plan_of_another_snapshot_or_options_is_planned_again(catalog: Any, duckdb_lake: Any) -> None:
    con, _ = _duckdb_table(duckdb_lake, catalog)
    config = LakeConfig.resolve({"catalog": catalog.url, "dataPath": catalog.data_path})
    schema, old, plan = read_schema(config, "main.t", {})
    assert plan is not None and plan.snapshot_id == old
    con.execute("INSERT INTO lake.t SELECT i, 'new', [] FROM range(9000, 9500) r(i)")
    schema_now, now, _ = read_schema(config, "main.t", {})
    assert now > old and schema_now == schema
    stale = DuckLakeBatchReader(config, "main.t", {}, schema, snapshot=now, plan=plan)
    files_now = sorted(r[0] for r in con.execute("SELECT data_file FROM ducklake_list_files('lake', 't')").fetchall())
    assert len(files_now) == 3
    assert _partition_files(stale.partitions()) == files_now
    # options changed after schema() (a SQL table's stored options merged in reader()): the plan is not used
    source = _source(catalog)
    source.schema()
    source.options["columns"] = "id"
    assert source.reader(schema)._plan is None


def test_a_large_plan_is_not_carried(catalog: Any, duckdb_lake: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    _duckdb_table(duckdb_lake, catalog)
    config = LakeConfig.resolve({"catalog": catalog.url, "dataPath": catalog.data_path})
    assert read_schema(config, "main.t", {})[2] is not None
    monkeypatch.setattr(batch_reader, "CARRIED_PLAN_FILES", 1)
    assert read_schema(config, "main.t", {})[2] is None
    monkeypatch.undo()
    monkeypatch.setattr(batch_reader, "CARRIED_PLAN_INLINED_BYTES", 0)
    assert read_schema(config, "main.t", {})[2] is None


def test_spark_reads_the_loaded_snapshot_without_asking_the_catalog_again(
    spark: SparkSession, sqlite_catalog: Any, duckdb_lake: Any, tmp_path: Path
) -> None:
    con, rows = _duckdb_table(duckdb_lake, sqlite_catalog)
    con.close()
    pdl.register(spark)
    df = (
        spark.read.format("ducklake")
        .option("catalog", sqlite_catalog.url)
        .option("dataPath", sqlite_catalog.data_path)
        .load("main.t")
    )
    catalog_file = Path(sqlite_catalog.url.removeprefix("sqlite:///"))
    assert catalog_file.is_file()
    moved = tmp_path / "away.sqlite"
    shutil.move(catalog_file, moved)
    try:
        got = sorted((r["id"], r["s"], r["l"]) for r in df.collect())
        again = df.filter("id >= 2000").count()  # a second query of the DataFrame: the same carried plan
    finally:
        if catalog_file.exists():  # an empty SQLite file the read created would hide the moved catalog
            catalog_file.unlink()
        shutil.move(moved, catalog_file)
    assert got == sorted((i, s, list(v) if v is not None else None) for i, s, v in rows)
    assert again == sum(1 for r in rows if r[0] >= 2000)
    # a DataFrame loaded after the catalog is back reads from it as always
    fresh = spark.read.format("ducklake").option("catalog", sqlite_catalog.url).load("main.t")
    assert fresh.count() == len(rows)
