"""Test helpers: a DuckDB connection with the DuckLake extensions, and DuckDB SQL names for DuckLake columns.

The extension wheels only ship the ``.duckdb_extension`` files; they are not registered in ``~/.duckdb``, so
they are loaded by path (see the format doc, section 1).
"""

from __future__ import annotations

import duckdb

from pyspark_ducklake.catalog.types import Column, decimal_params
from tests.support.duck import connect_duckdb

_SIMPLE_TYPES: dict[str, str] = {
    "boolean": "BOOLEAN",
    "int8": "TINYINT",
    "int16": "SMALLINT",
    "int32": "INTEGER",
    "int64": "BIGINT",
    "int128": "HUGEINT",
    "uint8": "UTINYINT",
    "uint16": "USMALLINT",
    "uint32": "UINTEGER",
    "uint64": "UBIGINT",
    "uint128": "UHUGEINT",
    "float32": "FLOAT",
    "float64": "DOUBLE",
    "date": "DATE",
    "time": "TIME",
    "timestamp": "TIMESTAMP",
    "timestamp_s": "TIMESTAMP_S",
    "timestamp_ms": "TIMESTAMP_MS",
    "timestamp_ns": "TIMESTAMP_NS",
    "timestamptz": "TIMESTAMPTZ",
    "interval": "INTERVAL",
    "varchar": "VARCHAR",
    "blob": "BLOB",
    "uuid": "UUID",
    "json": "JSON",
}


def connect() -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB with ducklake, postgres_scanner and sqlite_scanner loaded (no downloads), in UTC."""
    return connect_duckdb()


def quote_identifier(name: str) -> str:
    """A double-quoted DuckDB identifier."""
    return '"' + name.replace('"', '""') + '"'


def duckdb_type_sql(column: Column) -> str:
    """The DuckDB SQL type of a DuckLake column, e.g. ``INTEGER``, ``DECIMAL(18,3)``, ``INTEGER[]``,
    ``STRUCT("a" INTEGER, "b" VARCHAR)``, ``MAP(VARCHAR, INTEGER)``.
    """
    t = column.type
    if t in _SIMPLE_TYPES:
        return _SIMPLE_TYPES[t]
    dec = decimal_params(t)
    if dec is not None:
        return f"DECIMAL({dec[0]},{dec[1]})"
    if t == "list":
        return duckdb_type_sql(column.children[0]) + "[]"
    if t == "struct":
        fields = ", ".join(f"{quote_identifier(c.name)} {duckdb_type_sql(c)}" for c in column.children)
        return f"STRUCT({fields})"
    if t == "map":
        key, value = column.children
        return f"MAP({duckdb_type_sql(key)}, {duckdb_type_sql(value)})"
    raise ValueError(f"no DuckDB type for DuckLake type {t!r}")
