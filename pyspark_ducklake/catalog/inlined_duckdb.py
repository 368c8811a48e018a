"""Inlined-data columns of a DuckDB-file catalog: DuckDB declares them with the column's own DuckDB type
(``INTEGER``, ``VARCHAR``, ``STRUCT(...)``, ``DECIMAL(p,s)``...), not the text encodings of SQLite and PostgreSQL.

Values travel as DuckDB's own text both ways, so the exactness of the SQLite encoding carries over:

* writing binds the SQLite encoding (DuckDB's VARCHAR text, integers, blobs) inside ``CAST(? AS <type>)``, the same
  VARCHAR-to-type cast DuckDB applies when it reads a SQLite catalog's inlined text;
* reading selects each leaf as VARCHAR (``CAST(col AS VARCHAR)``; nested columns cast to the same shape with VARCHAR
  leaves, so brackets and quotes inside strings never need parsing) and decodes the text as on SQLite. DuckDB's
  Python driver turns the nested shape into lists, dicts by field name and dicts for maps.

A top-level VARIANT, which DuckDB inlines natively here, is read as its Parquet encoding (DuckDB's
``variant_to_parquet_variant``: the ``metadata`` and ``value`` bytes). A VARIANT inside a nested column has no exact
text and raises :class:`~pyspark_ducklake.exceptions.UnsupportedTypeError`; DuckDB never inlines GEOMETRY. We never
inline VARIANT ourselves (a batch with one goes to Parquet).
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.sql.elements import ColumnElement
from sqlalchemy.types import UserDefinedType

from pyspark_ducklake.catalog.types import Column, decimal_params
from pyspark_ducklake.exceptions import UnsupportedTypeError

_DUCKDB_TYPES = {
    "boolean": "BOOLEAN",
    "int8": "TINYINT",
    "int16": "SMALLINT",
    "int32": "INTEGER",
    "int64": "BIGINT",
    "uint8": "UTINYINT",
    "uint16": "USMALLINT",
    "uint32": "UINTEGER",
    "uint64": "UBIGINT",
    "int128": "HUGEINT",
    "uint128": "UHUGEINT",
    "float32": "FLOAT",
    "float64": "DOUBLE",
    "date": "DATE",
    "time": "TIME",
    "timetz": "TIMETZ",
    "time_ns": "TIME_NS",
    "timestamp": "TIMESTAMP",
    "timestamp_s": "TIMESTAMP_S",
    "timestamp_ms": "TIMESTAMP_MS",
    "timestamp_ns": "TIMESTAMP_NS",
    "timestamptz": "TIMESTAMPTZ",
    "interval": "INTERVAL",
    "varchar": "VARCHAR",
    "json": "JSON",
    "blob": "BLOB",
    "uuid": "UUID",
    "variant": "VARIANT",
    "geometry": "GEOMETRY",
}
_NO_TEXT = frozenset({"variant", "geometry"})


def _identifier(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def duckdb_type(column: Column, *, text_leaves: bool = False) -> str:
    """DuckDB's SQL type of ``column``; with ``text_leaves`` the same shape with VARCHAR leaves (BLOB stays)."""
    t = column.type
    if t == "list":
        return duckdb_type(column.children[0], text_leaves=text_leaves) + "[]"
    if t == "struct":
        fields = (f"{_identifier(c.name)} {duckdb_type(c, text_leaves=text_leaves)}" for c in column.children)
        return "STRUCT(" + ", ".join(fields) + ")"
    if t == "map":
        key, value = (duckdb_type(c, text_leaves=text_leaves) for c in column.children)
        return f"MAP({key}, {value})"
    if text_leaves:
        return "BLOB" if t == "blob" else "VARCHAR"
    dec = decimal_params(t)
    if dec is not None:
        return f"DECIMAL({dec[0]}, {dec[1]})"
    if t not in _DUCKDB_TYPES:
        raise UnsupportedTypeError(f"column {column.name!r}: DuckLake type {t!r} has no DuckDB type here")
    return _DUCKDB_TYPES[t]


class InlinedColumnType(UserDefinedType[Any]):
    """An inlined column's DuckDB type; a bound value (DuckDB's text, an integer or bytes) is cast to it."""

    cache_ok = True

    def __init__(self, sql: str) -> None:
        self.sql = sql

    def get_col_spec(self, **_kw: Any) -> str:
        return self.sql

    def bind_expression(self, bindvalue: Any) -> ColumnElement[Any]:
        return sa.cast(bindvalue, self)


def select_expression(column: Column, expression: ColumnElement[Any]) -> ColumnElement[Any]:
    """``expression`` read as text leaves (blobs as bytes, integers and booleans as they are, a VARIANT as its Parquet
    encoding)."""
    if column.type == "variant":
        # SQL NULL stays NULL (variant_to_parquet_variant would make it a variant null)
        return sa.case((expression.is_(None), sa.null()), else_=sa.func.variant_to_parquet_variant(expression))
    if any(c.type in _NO_TEXT for c in column.walk()):
        raise UnsupportedTypeError(
            f"column {column.name!r} holds inlined {column.type.upper()} rows in a DuckDB-file catalog, which "
            "pyspark-ducklake cannot read exactly; flush them to Parquet with DuckDB "
            "(CALL ducklake_flush_inlined_data('<alias>')), or leave the column out of the read"
        )
    if column.type in ("boolean", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "blob"):
        return expression
    return sa.cast(expression, _TextLeaves(duckdb_type(column, text_leaves=True)))


class _TextLeaves(UserDefinedType[Any]):
    """The type a column is read as (VARCHAR leaves); nothing is bound with it."""

    cache_ok = True

    def __init__(self, sql: str) -> None:
        self.sql = sql

    def get_col_spec(self, **_kw: Any) -> str:
        return self.sql


def variant_storage(value: Any) -> dict[str, bytes]:
    """A VARIANT selected by :func:`select_expression` (a dict of ``metadata`` and ``value`` bytes) as stored."""
    return {"value": bytes(value["value"]), "metadata": bytes(value["metadata"])}


def nested_storage(column: Column, value: Any, leaf: Any) -> Any:
    """A nested value as DuckDB's driver returns it (lists, dicts by field name, dicts for maps; text leaves) in
    the storage form of the SQLite decoder: ``leaf(column, text)`` parses each leaf."""
    if value is None:
        return None
    if column.type == "list":
        return [nested_storage(column.children[0], v, leaf) for v in value]
    if column.type == "struct":
        return {c.name: nested_storage(c, value.get(c.name), leaf) for c in column.children}
    if column.type == "map":
        key, val = column.children
        pairs = value.items() if isinstance(value, dict) else zip(value["key"], value["value"], strict=True)
        return [(nested_storage(key, k, leaf), nested_storage(val, v, leaf)) for k, v in pairs]
    if isinstance(value, (bytes, bytearray, memoryview)) and column.type == "blob":
        return bytes(value)
    return leaf(column, value)
