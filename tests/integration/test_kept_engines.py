"""Spark plans every read with a new Lake in a Python worker it keeps between queries; those Lakes use the engine the
process keeps for their catalog (catalog/kept_engines.py), so each catalog statement is compiled once per process.
Kept engines must change nothing else: a Lake closed on one does not disturb another using it, a closed Lake holds
no PostgreSQL connection, a SQLite catalog replaced at its path is read anew, and the least recently used engine
beyond the limit is disposed. DuckDB writes the tables and reads what we read."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, text

from pyspark_ducklake.batch.reader import DuckLakeBatchReader, read_schema
from pyspark_ducklake.catalog.kept_engines import MAX_KEPT_ENGINES, kept_catalog_engine
from pyspark_ducklake.catalog.location import parse_location
from pyspark_ducklake.lake import Lake
from pyspark_ducklake.spark.lake_config import LakeConfig
from tests.support.catalogs import CatalogLocation, sqlite_location

pytestmark = pytest.mark.timeout(300)


def _duckdb_rows(duckdb_lake: Any, catalog: Any, values: str) -> list[tuple[Any, ...]]:
    """main.t written by DuckDB: a data file, and inlined rows ``values``; its rows as DuckDB reads them."""
    con = duckdb_lake(catalog, inlining_row_limit=10)
    con.execute("CREATE TABLE lake.t (id BIGINT, s VARCHAR)")
    con.execute("INSERT INTO lake.t SELECT i, 's' || i FROM range(0, 500) r(i)")
    con.execute(f"INSERT INTO lake.t VALUES {values}")
    rows = con.execute("SELECT id, s FROM lake.t ORDER BY id").fetchall()
    con.close()
    return rows


def _spark_read(catalog: Any) -> list[tuple[Any, ...]]:
    """A read as the data source plans and runs it: load, then partitions, then each partition's batches."""
    config = LakeConfig.resolve({"catalog": catalog.url, "dataPath": catalog.data_path})
    schema, snapshot, _ = read_schema(config, "main.t", {})
    reader = DuckLakeBatchReader(config, "main.t", {}, schema, snapshot=snapshot)  # partitions() plans again
    rows = [r for p in reader.partitions() for b in reader.read(p) for r in zip(*b.to_pydict().values(), strict=True)]
    return sorted(rows)


def _compiled(catalog: Any) -> int:
    return len(kept_catalog_engine(parse_location(catalog.url))._compiled_cache or {})


def test_a_second_read_compiles_no_statement_and_both_read_what_duckdb_reads(catalog: Any, duckdb_lake: Any) -> None:
    expected = _duckdb_rows(duckdb_lake, catalog, "(900, 'inlined'), (901, NULL)")
    assert _spark_read(catalog) == expected
    compiled = _compiled(catalog)
    assert compiled > 0
    assert _spark_read(catalog) == expected
    assert _compiled(catalog) == compiled  # every statement of the second read came from the kept engine's cache


def test_closing_one_lake_leaves_another_on_the_same_kept_engine_working(catalog: Any, duckdb_lake: Any) -> None:
    expected = _duckdb_rows(duckdb_lake, catalog, "(900, 'x')")
    a = Lake(catalog.url, keep_engine=True)
    b = Lake(catalog.url, keep_engine=True)
    assert a.engine is b.engine
    with a.engine.connect() as conn:  # checked out while the other Lake closes and disposes the pool
        b.close()
        assert conn.execute(text("SELECT count(*) FROM ducklake_snapshot")).scalar_one() > 0
    assert sorted(a.scan("main.t").to_pylist(), key=lambda r: r["id"]) == [{"id": i, "s": s} for i, s in expected]
    a.close()
    c = Lake(catalog.url)  # without keep_engine: an engine of its own, as before
    assert c.engine is not a.engine
    c.close()


def test_a_closed_lake_on_a_kept_engine_holds_no_postgres_connection(
    pg_catalog: CatalogLocation, pg_admin: Engine, duckdb_lake: Any
) -> None:
    expected = _duckdb_rows(duckdb_lake, pg_catalog, "(900, 'x')")
    database = pg_catalog.url.rsplit("/", 1)[1]

    def connections() -> int:
        with pg_admin.connect() as conn:
            query = text("SELECT count(*) FROM pg_stat_activity WHERE datname = :d AND pid <> pg_backend_pid()")
            return int(conn.execute(query, {"d": database}).scalar_one())

    assert _spark_read(pg_catalog) == expected
    assert connections() == 0
    lake = Lake(pg_catalog.url, keep_engine=True)
    assert lake.current_snapshot_id() > 0
    assert connections() == 1
    lake.close()
    assert connections() == 0


def test_a_sqlite_catalog_replaced_at_its_path_is_read_anew(tmp_path: Path, duckdb_lake: Any) -> None:
    catalog = sqlite_location(tmp_path)
    first = _duckdb_rows(duckdb_lake, catalog, "(900, 'first')")
    assert _spark_read(catalog) == first
    engine = kept_catalog_engine(parse_location(catalog.url))
    Path(catalog.url.removeprefix("sqlite:///")).unlink()
    shutil.rmtree(catalog.data_path)
    Path(catalog.data_path).mkdir()
    expected = _duckdb_rows(duckdb_lake, catalog, "(901, 'second'), (902, 'third')")
    assert expected != first
    assert _spark_read(catalog) == expected
    assert kept_catalog_engine(parse_location(catalog.url)) is engine


def test_the_least_recently_used_engine_beyond_the_limit_is_disposed(tmp_path: Path, duckdb_lake: Any) -> None:
    catalogs = [sqlite_location(tmp_path / str(i)) for i in range(MAX_KEPT_ENGINES + 1)]
    expected = {}
    for i, catalog in enumerate(catalogs):  # sqlite_location made each folder
        expected[i] = _duckdb_rows(duckdb_lake, catalog, f"({1000 + i}, 'lake {i}')")
    first = kept_catalog_engine(parse_location(catalogs[0].url))
    for catalog in catalogs[1:]:
        kept_catalog_engine(parse_location(catalog.url))
    again = kept_catalog_engine(parse_location(catalogs[0].url))
    assert again is not first  # evicted by the ninth catalog, then made anew
    for i, catalog in enumerate(catalogs):
        assert _spark_read(catalog) == expected[i]
