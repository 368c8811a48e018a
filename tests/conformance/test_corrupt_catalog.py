"""A hand-edited or corrupt catalog: where DuckDB 1.5.5 fails we raise a typed error naming the value. A data file's
statistics only prune: one that does not parse is ignored (the file is read), as DuckDB ignores a minimum; DuckDB
skips the file for a maximum it cannot parse and misses its rows, which we do not copy."""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest

import pyspark_ducklake as pdl
from pyspark_ducklake.exceptions import CorruptCatalogError, InlinedDataError
from tests.support.catalogs import CatalogLocation, sqlite_location
from tests.support.duck import open_duckdb


def corrupted(folder: Path, sql: str) -> tuple[CatalogLocation, pdl.Lake]:
    """A lake (a Parquet file of ids 0-19, an inlined row of id 100) with ``sql`` run on its catalog. A new lake for
    each check: DuckDB's extension caches what it parsed per catalog and snapshot, across connections."""
    folder.mkdir()
    location = sqlite_location(folder)
    lake = pdl.connect(location.url, location.data_path)
    lake.create_table("main.t", pa.schema([("id", pa.int64()), ("d", pa.float64())]))
    lake.append("main.t", pa.table({"id": list(range(20)), "d": [float(i) for i in range(20)]}))
    lake.append("main.t", pa.table({"id": [100], "d": [1.0]}))
    with contextlib.closing(sqlite3.connect(location.url.removeprefix("sqlite:///"), isolation_level=None)) as db:
        db.execute(sql)
    return location, lake


def test_duckdb_and_we_fail_on_the_same_corrupt_values_and_we_read_past_corrupt_file_statistics(tmp_path: Path) -> None:
    # a data file's min/max that do not parse: DuckDB compares them anyway, skips the file and misses its rows
    # (pinned); we ignore them and read the file (statistics only ever prune)
    sql = "UPDATE ducklake_file_column_stats SET min_value = 'abc', max_value = 'x1' WHERE column_id = 1"
    location, lake = corrupted(tmp_path / "file-stats", sql)
    with contextlib.closing(open_duckdb(location)) as con:
        assert con.execute("SELECT count(*) FROM lake.t WHERE id > 5").fetchone() == (1,)
        assert con.execute("SELECT count(*) FROM lake.t WHERE id < 3").fetchone() == (0,)
    assert lake.scan("main.t", filter=[("id", ">", 5)]).num_rows == 15
    assert lake.scan("main.t", filter=[("id", "<", 3)]).num_rows == 3

    # the table's min/max: DuckDB's commit fails on them, our append is refused
    sql = "UPDATE ducklake_table_column_stats SET min_value = 'abc' WHERE column_id = 1"
    location, lake = corrupted(tmp_path / "table-stats", sql)
    with contextlib.closing(open_duckdb(location)) as con, pytest.raises(duckdb.Error, match="abc"):
        con.execute("INSERT INTO lake.t SELECT range, 0 FROM range(30)")
    with pytest.raises(CorruptCatalogError, match=r"ducklake_table_column_stats\.min_value"):
        lake.append("main.t", pa.table({"id": list(range(30)), "d": [0.0] * 30}))

    # an inlined BIGINT holding text: DuckDB's read fails, ours names the row
    location, lake = corrupted(tmp_path / "inlined", "UPDATE ducklake_inlined_data_1_1 SET id = 'abc'")
    with contextlib.closing(open_duckdb(location)) as con, pytest.raises(duckdb.Error, match="abc"):
        con.execute("SELECT * FROM lake.t").fetchall()
    with pytest.raises(InlinedDataError, match=r"column 'id', row_id 20 \(inserted by snapshot 3\) holds 'abc'"):
        lake.scan("main.t")
