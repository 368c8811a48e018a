"""Schema changes as SQL on ``ducklake_column`` and ``ducklake_schema_versions``: the next column id, adding column
rows, ending them, re-versioning one (an ALTER keeps its id), and recording a table's new schema version. What a
change means (which columns, the checks) is ``table.evolution``'s."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection, func, insert, select, update

from pyspark_ducklake.catalog import tables as T


def max_column_id(conn: Connection, table_id: int) -> int:
    """The largest column id the table ever used (dropped columns included: ids are never reused)."""
    c = T.ducklake_column
    row = conn.execute(select(func.max(c.c.column_id)).where(c.c.table_id == table_id)).first()
    return int(row[0]) if row and row[0] is not None else 0


def insert_column_rows(conn: Connection, rows: list[dict[str, Any]]) -> None:
    """Add ``ducklake_column`` rows (as :func:`~pyspark_ducklake.catalog.commit_rows.column_rows` makes them)."""
    conn.execute(insert(T.ducklake_column), rows)


def end_columns(conn: Connection, table_id: int, column_ids: Sequence[int], snapshot_id: int) -> None:
    """End the live rows of these columns at ``snapshot_id``."""
    c = T.ducklake_column
    conn.execute(
        update(c)
        .where(c.c.table_id == table_id, c.c.column_id.in_(list(column_ids)), c.c.end_snapshot.is_(None))
        .values(end_snapshot=snapshot_id)
    )


def end_column(conn: Connection, table_id: int, column_id: int, snapshot_id: int) -> None:
    """End the live row of one column at ``snapshot_id``."""
    c = T.ducklake_column
    conn.execute(
        update(c)
        .where(c.c.table_id == table_id, c.c.column_id == column_id, c.c.end_snapshot.is_(None))
        .values(end_snapshot=snapshot_id)
    )


def reversion_column(conn: Connection, table_id: int, column_id: int, snapshot_id: int, **changes: Any) -> None:
    """End the column's live row and start a copy with ``changes`` (same column id), as an ALTER does."""
    c = T.ducklake_column
    row = conn.execute(
        select(c).where(c.c.table_id == table_id, c.c.column_id == column_id, c.c.end_snapshot.is_(None))
    ).one()
    end_column(conn, table_id, column_id, snapshot_id)
    values = dict(row._mapping)
    values.update(begin_snapshot=snapshot_id, end_snapshot=None, **changes)
    conn.execute(insert(c).values(**values))


def record_schema_version(conn: Connection, table_id: int, snapshot_id: int, schema_version: int) -> None:
    """The table's columns changed at ``snapshot_id``, which starts ``schema_version``."""
    conn.execute(
        insert(T.ducklake_schema_versions).values(
            begin_snapshot=snapshot_id, schema_version=schema_version, table_id=table_id
        )
    )
