"""``drop_table``, ``drop_schema`` and ``rename_table``: the catalog rows equal DuckDB 1.5.5's for the same DDL.

One history is written twice, by DuckDB's SQL into one SQLite catalog and by this library into another (PostgreSQL
too for the reads); the catalog tables the DDL touches are compared row for row, with uuids, file names and times
left out; then DuckDB reads our lake (time travel across the rename and the drop included).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import pyspark_ducklake as pdl
from pyspark_ducklake.exceptions import InvalidIdentifierError, NoSuchTableError, TableAlreadyExistsError
from tests.support.duck import connect_duckdb, open_duckdb

COMPARED = {
    "ducklake_snapshot": "snapshot_id, schema_version, next_catalog_id, next_file_id",
    "ducklake_snapshot_changes": "snapshot_id, changes_made",
    "ducklake_schema": "schema_id, begin_snapshot, end_snapshot, schema_name, path",
    "ducklake_table": "table_id, begin_snapshot, end_snapshot, schema_id, table_name, path",
    "ducklake_column": "column_id, begin_snapshot, end_snapshot, table_id, column_name",
    "ducklake_schema_versions": "begin_snapshot, schema_version, table_id",
    "ducklake_data_file": "data_file_id, table_id, begin_snapshot, end_snapshot, record_count",
    "ducklake_delete_file": "delete_file_id, table_id, begin_snapshot, end_snapshot, data_file_id, delete_count",
}


def catalog_rows(path: Path) -> dict[str, list[tuple[Any, ...]]]:
    db = sqlite3.connect(path)
    try:
        return {t: sorted(db.execute(f"SELECT {cols} FROM {t}").fetchall(), key=repr) for t, cols in COMPARED.items()}
    finally:
        db.close()


def test_ddl_catalog_rows_equal_duckdbs(tmp_path: Path) -> None:
    theirs = tmp_path / "duck.sqlite"
    con = connect_duckdb()
    con.execute(f"ATTACH 'ducklake:sqlite:{theirs}' AS lake (DATA_PATH '{tmp_path / 'd'}/', DATA_INLINING_ROW_LIMIT 0)")
    for sql in [
        "CREATE SCHEMA s2",
        "CREATE TABLE lake.s2.x(a BIGINT, b VARCHAR)",
        "INSERT INTO lake.s2.x VALUES (1, 'a'), (2, 'b')",
        "DELETE FROM lake.s2.x WHERE a = 1",
        "CREATE TABLE lake.s2.y(a BIGINT)",
        "ALTER TABLE lake.s2.x RENAME TO x2",
        "DROP TABLE lake.s2.x2",
        "CREATE TABLE lake.s2.z(a BIGINT)",
        "DROP SCHEMA lake.s2 CASCADE",
    ]:
        con.execute(sql.replace("CREATE SCHEMA s2", "CREATE SCHEMA lake.s2"))
    con.close()

    ours = tmp_path / "ours.sqlite"
    lake = pdl.connect(f"sqlite:///{ours}", f"{tmp_path / 'o'}/", data_inlining_row_limit=0)
    schema = pa.schema([("a", pa.int64()), ("b", pa.string())])
    lake.create_schema("s2")
    lake.create_table("s2.x", schema)
    lake.append("s2.x", pa.table({"a": [1, 2], "b": ["a", "b"]}))
    lake.delete("s2.x", [("a", "=", 1)])
    lake.create_table("s2.y", pa.schema([("a", pa.int64())]))
    lake.rename_table("s2.x", "x2")
    lake.drop_table("s2.x2")
    lake.create_table("s2.z", pa.schema([("a", pa.int64())]))
    lake.drop_schema("s2", cascade=True)
    lake.close()
    want, got = catalog_rows(theirs), catalog_rows(ours)
    for table in COMPARED:
        assert got[table] == want[table], table


def test_ddl_reads_in_duckdb_and_time_travel(catalog: Any) -> None:
    lake = pdl.connect(catalog.url, catalog.data_path, data_inlining_row_limit=10)
    lake.create_schema("s2")
    lake.create_table("s2.x", pa.schema([("a", pa.int64())]))
    lake.append("s2.x", pa.table({"a": [1, 2]}))  # inlined
    lake.append("s2.x", pa.table({"a": list(range(100, 120))}))  # a file
    before = lake.current_snapshot_id()
    lake.rename_table("s2.x", "x2")
    lake.append("s2.x2", pa.table({"a": [3]}))
    assert sorted(lake.scan("s2.x2").column("a").to_pylist()) == [1, 2, 3, *range(100, 120)]
    with pytest.raises(NoSuchTableError):
        lake.table("s2.x")
    con = open_duckdb(catalog)
    try:
        assert sorted(r[0] for r in con.execute("SELECT a FROM lake.s2.x2").fetchall()) == [1, 2, 3, *range(100, 120)]
        assert con.execute(f"SELECT count(*) FROM lake.s2.x AT (VERSION => {before})").fetchone() == (22,)
    finally:
        con.close()
    lake.create_table("s2.y", pa.schema([("a", pa.int64())]))
    with pytest.raises(TableAlreadyExistsError):
        lake.rename_table("s2.y", "X2")
    with pytest.raises(InvalidIdentifierError, match="cascade"):
        lake.drop_schema("s2")
    dropped = lake.drop_table("s2.x2")
    assert lake.tables("s2") == ["s2.y"]
    assert lake.scan("s2.x2", snapshot=dropped - 1).num_rows == 23  # time travel before the drop
    lake.drop_schema("s2", cascade=True)
    assert "s2" not in lake.schemas()
    con = open_duckdb(catalog)
    try:
        assert con.execute("SELECT count(*) FROM duckdb_tables() WHERE database_name = 'lake'").fetchone() == (0,)
        assert con.execute(f"SELECT count(*) FROM lake.s2.x2 AT (VERSION => {dropped - 1})").fetchone() == (23,)
    finally:
        con.close()


TAGGED = {
    "ducklake_tag": "object_id, begin_snapshot, end_snapshot, key, value",
    "ducklake_column_tag": "table_id, column_id, begin_snapshot, end_snapshot, key, value",
    "ducklake_sort_info": "sort_id, table_id, begin_snapshot, end_snapshot",
    "ducklake_view": "view_id, begin_snapshot, end_snapshot, view_name",
}


def test_dropping_ends_comments_and_sort_orders_as_duckdb_does(tmp_path: Path) -> None:
    """A table DuckDB commented and sorted, and a view it commented: our DROP SCHEMA ... CASCADE ends their tags,
    column tags and sort order as DuckDB's own drop does (left live, they would outlive the table for ever)."""
    setup = [
        "CREATE SCHEMA lake.s",
        "CREATE TABLE lake.s.t(id INT, v INT)",
        "COMMENT ON TABLE lake.s.t IS 'tbl'",
        "COMMENT ON COLUMN lake.s.t.id IS 'col'",
        "ALTER TABLE lake.s.t SET SORTED BY (id)",
        "CREATE VIEW lake.s.v AS SELECT 1 AS a",
        "COMMENT ON VIEW lake.s.v IS 'view'",
    ]
    rows = {}
    for who in ("duckdb", "ours"):
        path = tmp_path / f"{who}.sqlite"
        con = connect_duckdb()
        con.execute(f"ATTACH 'ducklake:sqlite:{path}' AS lake (DATA_PATH '{tmp_path / who}/')")
        for sql in setup + (["DROP SCHEMA lake.s CASCADE"] if who == "duckdb" else []):
            con.execute(sql)
        con.close()
        if who == "ours":
            lake = pdl.connect(f"sqlite:///{path}")
            lake.drop_schema("s", cascade=True)
            lake.close()
        db = sqlite3.connect(path)
        rows[who] = {
            t: sorted(db.execute(f"SELECT {cols} FROM {t}").fetchall(), key=repr) for t, cols in TAGGED.items()
        }
        db.close()
    assert rows["ours"] == rows["duckdb"]
    assert all(r[2] is not None for r in rows["ours"]["ducklake_tag"])  # every one ended
