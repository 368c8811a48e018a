"""Column types of the DuckLake catalog tables, rendered as the reference implementation declares them.

DuckDB declares BOOLEAN, UUID and TIMESTAMPTZ columns; its SQLite backend stores them as BIGINT (0/1), VARCHAR
and VARCHAR text, its PostgreSQL backend and a DuckDB file natively. These decorators give one Python value type on
every backend. A DuckDB file's TIMESTAMPTZ travels as UTC text both ways (DuckDB's Python driver needs pytz to
return it as a datetime).

They also check what they read: SQLite keeps any value in any column, so a hand-edited catalog may hold ``'abc'``
in a BIGINT column. Such a value is a ``CorruptCatalogError`` naming ``table.column`` (``where``, set by
:func:`name_columns`), not a Python exception wherever the value is first used.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy import BigInteger, Boolean, String, Table
from sqlalchemy.dialects import postgresql
from sqlalchemy.engine import Dialect
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.elements import ColumnElement
from sqlalchemy.sql.visitors import InternalTraversal
from sqlalchemy.types import TIMESTAMP, TypeDecorator, TypeEngine

from pyspark_ducklake.catalog.corrupt import corrupt

NATIVE = ("postgresql", "duckdb")  # dialects with native BOOLEAN, UUID and TIMESTAMPTZ


class _Checked:
    """A catalog column type that knows its ``table.column``, to name it when a value read does not parse."""

    where = "a catalog column"


class CatalogInteger(_Checked, TypeDecorator[int]):
    """BIGINT; a value read that is not an integer (SQLite keeps text in any column) is a ``CorruptCatalogError``."""

    impl = BigInteger
    cache_ok = True

    def process_result_value(self, value: Any, dialect: Dialect) -> int | None:
        if value is None or type(value) is int:
            return value
        raise corrupt(self.where, value, "an integer")


class DuckLakeBoolean(_Checked, TypeDecorator[bool]):
    """BOOLEAN on PostgreSQL, BIGINT 0/1 on SQLite."""

    impl = BigInteger
    cache_ok = True

    def load_dialect_impl(self, dialect: Dialect) -> TypeEngine[Any]:
        if dialect.name in NATIVE:
            return dialect.type_descriptor(Boolean(create_constraint=False))
        return dialect.type_descriptor(BigInteger())

    def process_bind_param(self, value: Any, dialect: Dialect) -> Any:
        if value is None:
            return None
        if dialect.name in NATIVE:
            return bool(value)
        return 1 if value else 0

    def process_result_value(self, value: Any, dialect: Dialect) -> bool | None:
        if value is None or isinstance(value, bool):
            return value
        if type(value) is int and value in (0, 1):
            return bool(value)
        raise corrupt(self.where, value, "a boolean (0 or 1)")


class DuckLakeUUID(TypeDecorator[str]):
    """UUID on PostgreSQL, VARCHAR on SQLite; Python sees the canonical string."""

    impl = String
    cache_ok = True

    def load_dialect_impl(self, dialect: Dialect) -> TypeEngine[Any]:
        if dialect.name in NATIVE:
            return dialect.type_descriptor(postgresql.UUID(as_uuid=False))
        return dialect.type_descriptor(String())

    def process_result_value(self, value: Any, dialect: Dialect) -> str | None:
        return None if value is None else str(value)


def format_timestamptz(value: dt.datetime) -> str:
    """The text DuckDB writes for a TIMESTAMPTZ in a SQLite catalog: UTC with a '+00' suffix."""
    utc = value.astimezone(dt.timezone.utc) if value.tzinfo else value
    text = utc.strftime("%Y-%m-%d %H:%M:%S")
    if utc.microsecond:
        text += f".{utc.microsecond:06d}"
    return text + "+00"


def parse_timestamptz(text: str) -> dt.datetime:
    """Parse the TIMESTAMPTZ text forms found in SQLite catalogs ('…+00', ISO 'T…+00:00', or naive UTC)."""
    s = text.strip().replace("T", " ")
    if s.endswith("Z"):
        s = s[:-1] + "+00:00"
    # '+00' / '-05' offsets without minutes are not understood by fromisoformat before 3.11 in all forms.
    if len(s) >= 3 and s[-3] in "+-" and s[-2:].isdigit():
        s = s + ":00"
    value = dt.datetime.fromisoformat(s)
    if value.tzinfo is None:
        value = value.replace(tzinfo=dt.timezone.utc)
    return value.astimezone(dt.timezone.utc)


class DuckLakeTimestampTZ(_Checked, TypeDecorator[dt.datetime]):
    """TIMESTAMP WITH TIME ZONE on PostgreSQL, UTC text on SQLite; Python sees an aware UTC datetime."""

    impl = String
    cache_ok = True

    def load_dialect_impl(self, dialect: Dialect) -> TypeEngine[Any]:
        if dialect.name in NATIVE:
            return dialect.type_descriptor(TIMESTAMP(timezone=True))
        return dialect.type_descriptor(String())

    def process_bind_param(self, value: Any, dialect: Dialect) -> Any:
        if value is None or dialect.name == "postgresql":
            return value
        if isinstance(value, dt.datetime):
            return format_timestamptz(value)
        return value

    def column_expression(self, colexpr: ColumnElement[Any]) -> ColumnElement[Any]:
        return _TimestampText(colexpr)

    def process_result_value(self, value: Any, dialect: Dialect) -> dt.datetime | None:
        if value is None:
            return None
        if isinstance(value, dt.datetime):
            return value if value.tzinfo else value.replace(tzinfo=dt.timezone.utc)
        try:
            return parse_timestamptz(str(value))
        except ValueError:
            raise corrupt(self.where, value, "a timestamp with time zone") from None


class _TimestampText(ColumnElement[Any]):
    """A selected TIMESTAMPTZ: as it is, except on DuckDB, where it is read as text."""

    inherit_cache = True
    _traverse_internals = [("column", InternalTraversal.dp_clauseelement)]  # noqa: RUF012 - SQLAlchemy's own form

    def __init__(self, column: ColumnElement[Any]) -> None:
        self.column = column
        self.type = column.type


@compiles(_TimestampText)
def _compile_timestamp(element: _TimestampText, compiler: Any, **kw: Any) -> str:
    text: str = compiler.process(element.column, **kw)
    return f"CAST({text} AS VARCHAR)" if compiler.dialect.name == "duckdb" else text


def name_columns(table: Table) -> Table:
    """``table`` with each checked column type told its ``table.column`` (for the message of a value that does not
    parse); every Table of catalog rows goes through here once."""
    for column in table.columns:
        if isinstance(column.type, _Checked):
            column.type.where = f"{table.name}.{column.name}"
    return table
