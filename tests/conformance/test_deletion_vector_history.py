"""Delete files of several snapshots: the history of a data file's deletes in one file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, text

import pyspark_ducklake as pdl
from tests.conformance.test_deletion_vectors import new_table
from tests.support.catalogs import CatalogLocation, sqlite_location
from tests.support.duck import open_duckdb


def catalog_rows(url: str, sql: str, **params: Any) -> list[Any]:
    """The rows of ``sql`` run on the catalog (none for a statement that returns none)."""
    engine = create_engine(url)
    try:
        with engine.begin() as conn:
            result = conn.execute(text(sql), params)
            return list(result.all()) if result.returns_rows else []
    finally:
        engine.dispose()


def test_parquet_delete_files_of_several_snapshots_record_partial_max_as_duckdb_1_5_does(
    sqlite_catalog: CatalogLocation, tmp_path: Path
) -> None:
    """A second delete of a file replaces its delete file by one with per-row snapshots: DuckDB 1.5.5 records the
    newest of them as the row's ``partial_max`` (DuckLake 1.1 too, for puffin histories)."""
    theirs = sqlite_location(tmp_path / "theirs")
    con = open_duckdb(theirs, inlining_row_limit=0)
    try:
        for sql in [
            "CREATE TABLE lake.t(id INTEGER, s VARCHAR)",
            "INSERT INTO lake.t SELECT i, 's' || i FROM range(1000) r(i)",
            "DELETE FROM lake.t WHERE id < 10",
            "DELETE FROM lake.t WHERE id > 990",
            "DELETE FROM lake.t WHERE id = 500",
        ]:
            con.execute(sql)
    finally:
        con.close()
    ours = sqlite_catalog
    lake = pdl.connect(ours.url, ours.data_path, data_inlining_row_limit=0)
    new_table(lake, "t", files=1, rows=1000)
    for f in ([("id", "<", 10)], [("id", ">", 990)], [("id", "=", 500)]):
        lake.delete("main.t", f)
    sql = "SELECT begin_snapshot, end_snapshot, format, delete_count, partial_max FROM ducklake_delete_file"
    assert catalog_rows(ours.url, sql) == catalog_rows(theirs.url, sql) == [(3, None, "parquet", 20, 5)]
