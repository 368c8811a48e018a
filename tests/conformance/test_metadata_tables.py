"""``Lake.snapshots_table`` / ``table_info`` / ``list_files`` (table/metadata.py) against DuckDB's
``ducklake_snapshots()`` / ``ducklake_table_info()`` / ``ducklake_list_files()``: the same column names, types that
map one to one, and the same rows, on lakes DuckDB wrote and on lakes we wrote, on both catalogs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pytest

import pyspark_ducklake as pdl
from pyspark_ducklake.table.metadata import FILES_SCHEMA, SNAPSHOTS_SCHEMA, TABLE_INFO_SCHEMA

# DuckDB's type -> ours (Spark has no unsigned type: UBIGINT is int64; UUID is text)
TYPES = {
    "BIGINT": pa.int64(),
    "UBIGINT": pa.int64(),
    "VARCHAR": pa.string(),
    "UUID": pa.string(),
    "BLOB": pa.binary(),
    "TIMESTAMP WITH TIME ZONE": pa.timestamp("us", tz="UTC"),
    "MAP(VARCHAR, VARCHAR[])": pa.map_(pa.string(), pa.list_(pa.string())),
}


def canonical(value: Any) -> Any:
    if isinstance(value, dict):  # a DuckDB MAP
        return sorted((k, sorted(v)) for k, v in value.items())
    if isinstance(value, list) and value and isinstance(value[0], tuple):  # an Arrow map in to_pylist
        return sorted((k, sorted(v)) for k, v in value)
    if value is not None and type(value).__name__ == "UUID":
        return str(value)
    return value


def duck_table(con: Any, query: str) -> tuple[list[tuple[str, pa.DataType]], list[tuple[Any, ...]]]:
    columns = [(r[0], TYPES[r[1]]) for r in con.execute(f"DESCRIBE {query}").fetchall()]
    rows = [tuple(canonical(v) for v in r) for r in con.execute(query).fetchall()]
    return columns, sorted(rows, key=repr)


def ours(table: pa.Table) -> tuple[list[tuple[str, pa.DataType]], list[tuple[Any, ...]]]:
    rows = [tuple(canonical(v) for v in r.values()) for r in table.to_pylist()]
    return [(f.name, f.type) for f in table.schema], sorted(rows, key=repr)


def check_all(con: Any, lake: pdl.Lake, tables: list[str]) -> None:
    assert ours(lake.snapshots_table()) == duck_table(con, "SELECT * FROM ducklake_snapshots('lake')")
    assert ours(lake.table_info()) == duck_table(con, "SELECT * FROM ducklake_table_info('lake')")
    for name in tables:
        schema, table = name.split(".")
        assert ours(lake.list_files(f"{schema}.{table}")) == duck_table(
            con, f"SELECT * FROM ducklake_list_files('lake', '{table}', schema => '{schema}')"
        )


def test_schemas_are_duckdbs(duckdb_lake: Callable[..., Any], catalog: Any) -> None:
    con = duckdb_lake(catalog)
    for query, schema in (
        ("SELECT * FROM ducklake_snapshots('lake')", SNAPSHOTS_SCHEMA),
        ("SELECT * FROM ducklake_table_info('lake')", TABLE_INFO_SCHEMA),
        ("SELECT * FROM ducklake_list_files('lake', 'nope')", FILES_SCHEMA),
    ):
        con.execute("CREATE TABLE IF NOT EXISTS lake.main.nope (i INTEGER)")
        assert [(r[0], TYPES[r[1]]) for r in con.execute(f"DESCRIBE {query}").fetchall()] == [
            (f.name, f.type) for f in schema
        ]


@pytest.mark.parametrize("inlining", [None, 0], ids=["inlined", "files"])
def test_duckdb_written_lake(duckdb_lake: Callable[..., Any], catalog: Any, inlining: int | None) -> None:
    con = duckdb_lake(catalog, inlining_row_limit=inlining)
    con.execute('CREATE SCHEMA lake."My S"')
    con.execute("CREATE TABLE lake.main.t (id BIGINT, s VARCHAR)")
    con.execute("INSERT INTO lake.main.t SELECT range, 'x' || range FROM range(1000)")
    con.execute("INSERT INTO lake.main.t SELECT range, 'y' FROM range(5)")
    con.execute("DELETE FROM lake.main.t WHERE id % 7 = 0")
    con.execute('CREATE TABLE lake."My S"."T x" (a INTEGER)')
    con.execute('INSERT INTO lake."My S"."T x" VALUES (1), (2)')
    con.execute("ALTER TABLE lake.main.t ADD COLUMN k INTEGER")
    con.execute("CREATE TABLE lake.main.gone (a INTEGER)")
    con.execute("DROP TABLE lake.main.gone")
    con.execute("BEGIN")
    con.execute("CALL lake.set_commit_message('me', 'a message', extra_info => '{\"k\": 1}')")
    con.execute("INSERT INTO lake.main.t VALUES (-1, 'z', 3)")
    con.execute("COMMIT")
    lake = pdl.connect(catalog.url)
    assert lake.snapshots_table().column("commit_message").to_pylist()[-1] == "a message"
    check_all(con, lake, ["main.t", "My S.T x"])


def test_lake_we_wrote(duckdb_lake: Callable[..., Any], catalog: Any) -> None:
    lake = pdl.connect(catalog.url, catalog.data_path, data_inlining_row_limit=0, author="writer")
    lake.create_table("main.t", pa.schema([("id", pa.int64())]))
    lake.append("main.t", pa.table({"id": list(range(100))}))
    lake.delete("main.t", pa.compute.field("id") < 10)
    lake.append("main.t", pa.table({"id": [500]}))
    con = duckdb_lake(catalog)
    check_all(con, lake, ["main.t"])
    assert lake.table_info().column("delete_file_count").to_pylist() == [1]
