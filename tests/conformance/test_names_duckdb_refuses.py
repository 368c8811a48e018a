"""Names and definitions DuckDB refuses are refused on create, by the same rule, so DuckDB can always attach the lake.

DuckDB compares identifiers case-insensitively for ASCII letters only (``T`` is ``t``, ``Ü`` is not ``ü``): schemas
across the lake, tables and views within a schema, columns within a table, fields within a struct. It refuses a
table without columns and a struct without fields. A lake holding ``T`` and ``t`` cannot be attached at all.
"""

from __future__ import annotations

from typing import Any

import duckdb
import pyarrow as pa
import pytest

import pyspark_ducklake as pdl
from pyspark_ducklake.exceptions import DuckLakeError, SchemaAlreadyExistsError, SchemaMismatchError
from tests.support.bad_inputs import expect_bad_input
from tests.support.duck import open_duckdb


def duck_refuses(con: duckdb.DuckDBPyConnection, sql: str) -> bool:
    try:
        con.execute(sql)
    except duckdb.Error:
        return True
    return False


def test_names_differing_only_in_case_are_refused_as_duckdb_refuses_them(catalog: Any) -> None:
    lake = pdl.connect(catalog.url, catalog.data_path)
    lake.create_schema("s1")
    lake.create_table("main.t", pa.schema([("id", pa.int64()), ("s", pa.struct([("a", pa.int64())]))]))
    con = open_duckdb(catalog)
    try:
        con.execute("CREATE VIEW lake.main.v AS SELECT 1 AS x")
        # DuckDB's own answers for the same definitions: the rule we follow
        assert duck_refuses(con, "CREATE SCHEMA lake.S1")
        assert duck_refuses(con, "CREATE TABLE lake.main.T (x INT)")
        assert duck_refuses(con, "CREATE TABLE lake.main.V (x INT)")
        assert duck_refuses(con, "CREATE TABLE lake.main.d (a INT, A INT)")
        assert duck_refuses(con, "CREATE TABLE lake.main.d (s STRUCT(a INT, A INT))")
        assert duck_refuses(con, "ALTER TABLE lake.main.t ADD COLUMN ID INT")
        assert duck_refuses(con, "ALTER TABLE lake.main.t ADD COLUMN s.A INT")
        assert not duck_refuses(con, 'CREATE TABLE lake.main."Ü" (x INT)')
        assert not duck_refuses(con, 'CREATE TABLE lake.main."ü" ("é" INT, "É" INT)')
    finally:
        con.close()
    with pytest.raises(SchemaAlreadyExistsError, match="DuckDB's names are case-insensitive: use 's1'"):
        lake.create_schema("S1")
    with pytest.raises(SchemaAlreadyExistsError):
        lake.create_schema("S1", exist_ok=True)
    with expect_bad_input("create-case-only", lake):
        lake.create_table("main.T", pa.schema([("x", pa.int32())]))
    with expect_bad_input("create-case-only", lake):
        lake.create_table("main.T", pa.schema([("x", pa.int32())]), exist_ok=True)
    with expect_bad_input("create-case-only", lake):
        lake.create_table("main.V", pa.schema([("x", pa.int32())]))
    with expect_bad_input("duplicate-names", lake):
        lake.create_table("main.d", pa.schema([("a", pa.int32()), ("A", pa.int32())]))
    with expect_bad_input("duplicate-names", lake):
        lake.create_table("main.d", pa.schema([("s", pa.struct([("a", pa.int32()), ("A", pa.int32())]))]))
    with expect_bad_input("duplicate-names", lake):
        lake.create_table("main.d", pa.schema([("l", pa.list_(pa.struct([("a", pa.int32()), ("a", pa.int32())])))]))
    for change in (
        lambda: lake.add_column("main.t", "ID", pa.int32()),
        lambda: lake.add_column("main.t", ("s", "A"), pa.int32()),
        lambda: lake.rename_column("main.t", "s", "Id"),
    ):
        with pytest.raises(SchemaMismatchError, match="already exists"):
            change()
    lake.rename_column("main.t", "id", "ID")  # its own name in another case: allowed, as in DuckDB
    # names differing beyond ASCII case are different names, as in DuckDB
    lake.create_table(("main", "Ö"), pa.schema([("é", pa.int32()), ("É", pa.int32())]))
    lake.create_table(("main", "ö"), pa.schema([("x", pa.int32())]))
    con = open_duckdb(catalog)
    try:  # DuckDB still attaches the lake and sees every table
        names = {
            r[0] for r in con.execute("SELECT table_name FROM duckdb_tables() WHERE database_name = 'lake'").fetchall()
        }
        assert names == {"t", "Ü", "ü", "Ö", "ö"}
        assert [r[0] for r in con.execute("SELECT column_name FROM (DESCRIBE lake.main.t)").fetchall()] == ["ID", "s"]
    finally:
        con.close()


def test_tables_without_columns_and_empty_structs_are_refused(catalog: Any) -> None:
    lake = pdl.connect(catalog.url, catalog.data_path)
    con = open_duckdb(catalog)
    try:
        assert duck_refuses(con, "CREATE TABLE lake.main.z ()")
        assert duck_refuses(con, "CREATE TABLE lake.main.z (s STRUCT())")
    finally:
        con.close()
    with expect_bad_input("no-columns", lake):
        lake.create_table("main.z", pa.schema([]))
    with expect_bad_input("no-columns", lake):
        lake.create_table("main.z", pa.schema([("s", pa.struct([]))]))
    with expect_bad_input("no-columns", lake):
        lake.create_table("main.z", pa.schema([("m", pa.map_(pa.string(), pa.struct([])))]))
    lake.create_table("main.t", pa.schema([("id", pa.int64())]))
    with pytest.raises(DuckLakeError, match="give it a field"):
        lake.add_column("main.t", "s", pa.struct([]))
    assert lake.tables() == ["main.t"]


def test_create_table_over_a_view_name_raises_the_view_error(catalog: Any) -> None:
    """It said 'already exists; pass exist_ok=True to use it', and exist_ok=True gave the same: a view cannot be used
    as a table. A name differing only in case from the view stays a TableAlreadyExistsError, as before."""
    lake = pdl.connect(catalog.url, catalog.data_path)
    lake.create_table("main.t", pa.schema([("id", pa.int64())]))
    con = open_duckdb(catalog)
    try:
        con.execute("CREATE VIEW lake.main.v AS SELECT id FROM lake.main.t")
    finally:
        con.close()
    for exist_ok in (False, True):
        with expect_bad_input("create-over-view", lake) as err:
            lake.create_table("main.v", pa.schema([("id", pa.int64())]), exist_ok=exist_ok)
        assert "is a view" in str(err.value) and "exist_ok" not in str(err.value)
    with expect_bad_input("create-case-only", lake):
        lake.create_table("main.V", pa.schema([("id", pa.int64())]))
