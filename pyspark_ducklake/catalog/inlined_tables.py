"""The catalog's inlined tables, as SQL: the rows of ``ducklake_inlined_data_<table_id>_<schema_version>`` (values
still encoded; :mod:`~pyspark_ducklake.catalog.inlined_codec` decodes them), moving them out when flushed, and the
deletions of ``ducklake_inlined_delete_<table_id>``. Their names are spelled in :mod:`~pyspark_ducklake.catalog.tables`.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from sqlalchemy import Column as SAColumn
from sqlalchemy import Connection, MetaData, Table, and_, delete, or_, select
from sqlalchemy.schema import DropTable

from pyspark_ducklake.catalog import dialects, reader
from pyspark_ducklake.catalog import tables as T
from pyspark_ducklake.catalog.corrupt import corrupt, is_parse_error
from pyspark_ducklake.catalog.format_version import V1_0, V1_1
from pyspark_ducklake.catalog.inlined_codec import decode_values, inlined_select_expression
from pyspark_ducklake.catalog.sqltypes import name_columns
from pyspark_ducklake.catalog.types import Column, TableSchema
from pyspark_ducklake.exceptions import CorruptCatalogError, InlinedDataError


def columns_at_schema_version(
    conn: Connection, table_id: int, schema_version: int, current: TableSchema
) -> TableSchema:
    """The table's columns when ``schema_version`` began (those of an inlined table of that version); ``current``
    when the catalog has no record of it."""
    snap = reader.table_schema_version_snapshot(conn, table_id, schema_version)
    if snap is None:
        return current
    return reader.table_schema(conn, table_id, snap)


@dataclass(frozen=True)
class InlinedLayout:
    """An inlined-data table as stored: its name, its three system columns (``row_id``, ``begin_snapshot``,
    ``end_snapshot`` on 1.0, ``_ducklake_``-prefixed on 1.1) and those of the table's columns it holds."""

    name: str
    system: tuple[str, str, str]
    columns: tuple[Column, ...]


def inlined_layout(conn: Connection, name: str, columns: Sequence[Column]) -> InlinedLayout:
    """The layout of the inlined table ``name``: those of ``columns`` it has (it may predate a column's addition)
    and the spelling of its system columns (DuckDB's migration to 1.1 renames them in place)."""
    present = reader.column_names(conn, name)
    names = set(present)
    system = V1_1.inlined_system_columns if V1_1.inlined_system_columns[0] in names else V1_0.inlined_system_columns
    return InlinedLayout(name, system, tuple(c for c in columns if c.name in names))


def _table(layout: InlinedLayout) -> Table:
    return _table_of(layout.name, layout.system, tuple((c.name, c.column_id) for c in layout.columns))


@functools.lru_cache(maxsize=256)
def _table_of(name: str, system: tuple[str, str, str], columns: tuple[tuple[str, int], ...]) -> Table:
    # one Table per shape: a statement's cache key holds the Table itself, so a new one each read would make
    # SQLAlchemy compile the read's inlined-row queries again every time
    return name_columns(
        Table(
            name,
            MetaData(),
            *T.inlined_system_columns(system),
            *[SAColumn(column_name, key=f"c{column_id}") for column_name, column_id in columns],
        )
    )


def inlined_rows(
    conn: Connection,
    layout: InlinedLayout,
    *,
    snapshot_id: int | None = None,
    include_ended: bool = False,
    changed_since: int | None = None,
) -> Sequence[Any]:
    """Rows of an inlined table (``row_id``, ``begin_snapshot``, ``end_snapshot`` and each column's encoded value
    under ``c<column_id>``): those begun by ``snapshot_id`` and, unless ``include_ended``, not ended by it, in row
    id order; with no snapshot, every row, in (row id, begin snapshot) order. ``changed_since`` (with
    ``snapshot_id`` and ``include_ended``) keeps only the rows begun or ended in ``[changed_since, snapshot_id]``."""
    t = _table(layout)
    backend = conn.dialect.name
    values = [
        inlined_select_expression(c, backend, t.c[f"c{c.column_id}"]).label(f"c{c.column_id}") for c in layout.columns
    ]
    query = select(
        t.c.row_id.label("row_id"), t.c.begin_snapshot.label("begin_snapshot"), t.c.end_snapshot.label("end_snapshot")
    ).add_columns(*values)
    if snapshot_id is None:
        return conn.execute(query.order_by(t.c.row_id, t.c.begin_snapshot)).all()
    cond = t.c.begin_snapshot <= snapshot_id
    if not include_ended:
        cond = and_(cond, or_(t.c.end_snapshot.is_(None), t.c.end_snapshot > snapshot_id))
    elif changed_since is not None:
        ended = and_(t.c.end_snapshot >= changed_since, t.c.end_snapshot <= snapshot_id)
        cond = and_(cond, or_(t.c.begin_snapshot >= changed_since, ended))
    return conn.execute(query.where(cond).order_by(t.c.row_id)).all()


def decoded_values(
    rows: Sequence[Any], column: Column, backend: str, *, table: str, timetz_utc: bool = False
) -> pa.Array:
    """One column of :func:`inlined_rows` of the inlined table ``table`` decoded to Arrow (``timetz`` as UTC times
    with ``timetz_utc``).

    Raises:
        InlinedDataError: a stored value is not a value of the column's type (a hand-edited or corrupt catalog),
            naming the inlined table, the column, the row and the snapshot that inserted it.
        UnsupportedTypeError: a value does not fit the Arrow type (e.g. an INT128 beyond 38 digits).
    """
    key = f"c{column.column_id}"
    try:
        return decode_values(column, [r._mapping[key] for r in rows], backend, timetz_utc=timetz_utc)
    except Exception as e:
        if not is_parse_error(e):
            raise
        raise _bad_row(rows, column, backend, table, timetz_utc) or e from e


def _bad_row(
    rows: Sequence[Any], column: Column, backend: str, table: str, timetz_utc: bool
) -> CorruptCatalogError | None:
    """The error naming the first of ``rows`` whose value of ``column`` does not decode (on the error path only)."""
    key = f"c{column.column_id}"
    for r in rows:
        try:
            decode_values(column, [r._mapping[key]], backend, timetz_utc=timetz_utc)
        except Exception as e:
            if not is_parse_error(e):
                raise
            if isinstance(e, InlinedDataError):  # its message names the column and the value
                error = InlinedDataError(
                    f"inlined-data table {table}, row_id {r.row_id} (inserted by snapshot {r.begin_snapshot}): {e}"
                )
                error.snapshot_id = r.begin_snapshot
                return error
            where = f"inlined-data table {table}, column {column.name!r}, row_id {r.row_id}"
            return corrupt(where, r._mapping[key], f"a value of type {column.type}", inserted_by=r.begin_snapshot)
    return None


def empty_inlined_table(conn: Connection, layout: InlinedLayout) -> int | None:
    """Delete every row of the inlined table; the number of rows deleted."""
    return dialects.changed_rows(conn, delete(_table(layout)))


def drop_inlined_table(conn: Connection, table_id: int, layout: InlinedLayout) -> None:
    """Drop an inlined table of an older schema version and unregister it."""
    conn.execute(DropTable(_table(layout), if_exists=True))
    i = T.ducklake_inlined_data_tables
    conn.execute(delete(i).where(i.c.table_id == table_id, i.c.table_name == layout.name))


def inlined_file_deletes(
    conn: Connection, table_id: int, snapshot_id: int, file_ids: Sequence[int] | None = None
) -> dict[int, list[tuple[int, int]]]:
    """``{data_file_id: [(position, begin_snapshot)]}`` from ``ducklake_inlined_delete_<table_id>``: deletions of
    rows of Parquet files (of ``file_ids`` only, when given) begun by ``snapshot_id``."""
    if not reader.has_table(conn, T.inlined_delete_table_name(table_id)):
        return {}
    t = T.inlined_delete_table(table_id)
    out: dict[int, list[tuple[int, int]]] = {}
    query = select(t).where(t.c.begin_snapshot <= snapshot_id)
    chunks = (
        [query]
        if file_ids is None
        else [query.where(t.c.file_id.in_(list(file_ids[i : i + 500]))) for i in range(0, len(file_ids), 500)]
    )
    for chunk in chunks:
        for r in conn.execute(chunk):
            out.setdefault(int(r.file_id), []).append((int(r.row_id), int(r.begin_snapshot)))
    return out
