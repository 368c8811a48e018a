"""Where the catalog backends differ in what SQLAlchemy does for us: reflection, counts of changed rows and the
length of identifiers.

SQLAlchemy's inspector reflects SQLite and PostgreSQL; duckdb-engine's inspector queries ``pg_catalog`` functions
DuckDB does not serve, so DuckDB files are read through ``information_schema`` of the ``main`` schema. DuckDB's
driver reports no row count for UPDATE and DELETE (-1): there the changed rows are counted through ``RETURNING``.
PostgreSQL cuts identifiers (table and column names) longer than 63 bytes, silently; SQLite and DuckDB keep any.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy import Connection, Delete, String, Update, case, cast, func, inspect, literal_column, or_, text
from sqlalchemy.sql.elements import ColumnElement

# DuckLake's PostgresMetadataManager::MaxIdentifierLength (NAMEDATALEN - 1), in UTF-8 bytes; others: no limit
_MAX_IDENTIFIER_BYTES = {"postgresql": 63}


def max_identifier_bytes(dialect: str) -> int | None:
    """The longest identifier, in UTF-8 bytes, that the catalog database ``dialect`` keeps whole; None: any."""
    return _MAX_IDENTIFIER_BYTES.get(dialect)


def _duckdb(conn: Connection) -> bool:
    return conn.dialect.name == "duckdb"


def table_names(conn: Connection) -> list[str]:
    """The tables of the catalog's schema."""
    if _duckdb(conn):
        rows = conn.execute(
            text(
                "SELECT table_name FROM information_schema.tables WHERE table_catalog = current_database() "
                "AND table_schema = 'main' AND table_type = 'BASE TABLE'"
            )
        )
        return [r[0] for r in rows]
    return list(inspect(conn).get_table_names())


def has_table(conn: Connection, name: str) -> bool:
    if _duckdb(conn):
        row = conn.execute(
            text(
                "SELECT 1 FROM information_schema.tables WHERE table_catalog = current_database() "
                "AND table_schema = 'main' AND table_name = :name"
            ),
            {"name": name},
        ).first()
        return row is not None
    return inspect(conn).has_table(name)


def column_names(conn: Connection, name: str) -> list[str]:
    """The columns of table ``name``, in order."""
    if _duckdb(conn):
        rows = conn.execute(
            text(
                "SELECT column_name FROM information_schema.columns WHERE table_catalog = current_database() "
                "AND table_schema = 'main' AND table_name = :name ORDER BY ordinal_position"
            ),
            {"name": name},
        )
        return [r[0] for r in rows]
    return [c["name"] for c in inspect(conn).get_columns(name)]


def changed_rows(conn: Connection, statement: Update | Delete) -> int:
    """Run an UPDATE or DELETE; the number of rows it changed."""
    if _duckdb(conn):
        return len(conn.execute(statement.returning(literal_column("1"))).all())
    return max(conn.execute(statement).rowcount or 0, 0)


def native_timestamps(conn: Connection) -> bool:
    """Whether the database stores TIMESTAMPTZ as a timestamp it compares (PostgreSQL, DuckDB), not text (SQLite)."""
    return conn.dialect.name in ("postgresql", "duckdb")


def time_at_least(conn: Connection, column: ColumnElement[Any], when: dt.datetime) -> ColumnElement[bool]:
    """``column >= when`` for a stored TIMESTAMPTZ, where the database can tell; on SQLite, whose times are text in
    several spellings (``+00``, ISO ``T...+00:00``, naive, other offsets), a second wider, through SQLite's own time
    parser (``julianday``, millisecond precision; a spelling it cannot read passes): the caller compares exactly."""
    if native_timestamps(conn):
        return column >= when
    parsed = _julianday(column)
    return or_(parsed.is_(None), parsed >= func.julianday(_utc_text(when - dt.timedelta(seconds=1))))


def time_at_most(conn: Connection, column: ColumnElement[Any], when: dt.datetime) -> ColumnElement[bool]:
    """``column <= when``, as :func:`time_at_least` compares."""
    if native_timestamps(conn):
        return column <= when
    parsed = _julianday(column)
    return or_(parsed.is_(None), parsed <= func.julianday(_utc_text(when + dt.timedelta(seconds=1))))


def _julianday(column: ColumnElement[Any]) -> ColumnElement[Any]:
    # SQLite reads '+HH:MM' offsets, not DuckDB's bare '+00': give it the minutes
    text_value = cast(column, String)
    short_offset = func.substr(text_value, -3, 1).in_(["+", "-"])
    return func.julianday(case((short_offset, text_value + ":00"), else_=text_value))


def _utc_text(when: dt.datetime) -> str:
    utc = when.astimezone(dt.timezone.utc) if when.tzinfo else when
    return utc.strftime("%Y-%m-%d %H:%M:%S.%f") + "+00:00"
