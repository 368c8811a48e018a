"""The test infrastructure itself: catalogs on both backends, DuckDB's ducklake extension, and Spark."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import duckdb
import pytest
from sqlalchemy import create_engine, inspect, text

from tests.support.catalogs import CatalogLocation, PgServer

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def test_catalog_is_fresh_and_reachable(catalog: CatalogLocation) -> None:
    assert catalog.backend in ("sqlite", "postgres")
    assert catalog.data_path.startswith("/") and catalog.data_path.endswith("/")
    assert Path(catalog.data_path).is_dir() and not any(Path(catalog.data_path).iterdir())
    engine = create_engine(catalog.url)
    try:
        with engine.connect() as conn:
            assert conn.execute(text("SELECT 1")).scalar() == 1
        assert inspect(engine).get_table_names() == []
    finally:
        engine.dispose()


def test_duckdb_creates_and_reads_a_lake(
    catalog: CatalogLocation, duckdb_lake: Callable[..., duckdb.DuckDBPyConnection]
) -> None:
    con = duckdb_lake(catalog)
    con.execute("CREATE TABLE lake.t(i INTEGER)")
    con.execute("INSERT INTO lake.t VALUES (1)")
    assert con.execute("SELECT i FROM lake.t").fetchall() == [(1,)]
    con.close()

    # DuckDB wrote the DuckLake tables into our catalog database, with our data path.
    engine = create_engine(catalog.url)
    try:
        with engine.connect() as conn:
            version = conn.execute(text("SELECT value FROM ducklake_metadata WHERE key = 'version'")).scalar()
            data_path = conn.execute(text("SELECT value FROM ducklake_metadata WHERE key = 'data_path'")).scalar()
    finally:
        engine.dispose()
    assert version == "1.0"
    assert data_path == catalog.data_path

    # A second connection (inlining on) sees the same table.
    con = duckdb_lake(catalog, alias="again", inlining_row_limit=10)
    con.execute("INSERT INTO again.t VALUES (2)")
    assert con.execute("SELECT i FROM again.t ORDER BY i").fetchall() == [(1,), (2,)]


def test_postgres_catalogs_are_separate_databases(pg_server: PgServer, pg_catalog: CatalogLocation) -> None:
    assert (pg_server.host, pg_server.user) == ("127.0.0.1", "postgres")
    assert pg_catalog.url.startswith(f"postgresql+psycopg2://postgres@127.0.0.1:{pg_server.port}/ducklake_test_")
    database = pg_catalog.url.rsplit("/", 1)[1]
    conninfo = f"dbname={database} host=127.0.0.1 port={pg_server.port} user=postgres"
    assert pg_catalog.duckdb == f"ducklake:postgres:{conninfo}"


def test_sqlite_catalog_spelling(sqlite_catalog: CatalogLocation) -> None:
    path = sqlite_catalog.url.removeprefix("sqlite:///")
    assert path.startswith("/") and path.endswith("/lake.sqlite")
    assert sqlite_catalog.duckdb == f"ducklake:sqlite:{path}"


@pytest.mark.slow
def test_spark_session(spark: SparkSession) -> None:
    assert spark.range(3).count() == 3
    assert spark.conf.get("spark.sql.session.timeZone") == "UTC"
    # Python workers run this interpreter (the venv's, with pyarrow and this package).
    assert spark.sparkContext.parallelize([0], 1).map(lambda _: sys.executable).collect() == [sys.executable]
