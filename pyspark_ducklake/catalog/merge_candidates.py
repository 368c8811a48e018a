"""Which data files ``merge_adjacent_files`` may take, chosen in the catalog database.

DuckDB 1.5.5 never merges a file that ever had deletes (a delete file, live or ended, or a deletion in
``ducklake_inlined_delete_<table_id>``). A stream's table keeps every delete file it ever had until expiry, so that
set is asked of the database, one file at a time through the index on ``ducklake_delete_file.data_file_id``
(:mod:`.indexes`), and only the candidates come back, however long the history.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import CompoundSelect, Connection, Select, exists, func, select

from pyspark_ducklake.catalog import reader
from pyspark_ducklake.catalog import tables as T


def merge_candidates(conn: Connection, table_id: int, snapshot_id: int, minimum: int, below: int) -> CompoundSelect:
    """The ids of the table's data files visible at the snapshot that a merge may take, as a subquery: of
    ``minimum`` bytes or more and fewer than ``below`` (no size counts as 0), never deleted from, not registered
    with a name mapping."""
    d, x = T.ducklake_data_file, T.ducklake_delete_file.alias("ever_deleted")  # never correlated to a caller's
    size = func.coalesce(d.c.file_size_bytes, 0)
    query = select(d.c.data_file_id).where(
        d.c.table_id == table_id,
        size >= minimum,
        size < below,
        d.c.mapping_id.is_(None),
        ~exists().where(x.c.data_file_id == d.c.data_file_id),
    )
    inlined = _inlined_deletes(conn, table_id, snapshot_id)
    if inlined is not None:
        query = query.where(d.c.data_file_id.not_in(inlined))
    return reader.visible_parts(query, d, snapshot_id)


def any_deleted_from(conn: Connection, table_id: int, snapshot_id: int, data_file_ids: Sequence[int]) -> bool:
    """Whether one of these data files ever had a delete file, or an inlined deletion begun by the snapshot."""
    x = T.ducklake_delete_file
    ids = list(data_file_ids)
    if not ids:
        return False
    if conn.execute(select(x.c.data_file_id).where(x.c.data_file_id.in_(ids)).limit(1)).first() is not None:
        return True
    inlined = _inlined_deletes(conn, table_id, snapshot_id)
    if inlined is None:
        return False
    return conn.execute(inlined.where(inlined.selected_columns[0].in_(ids)).limit(1)).first() is not None


def _inlined_deletes(conn: Connection, table_id: int, snapshot_id: int) -> Select[Any] | None:
    """The data files with a deletion in ``ducklake_inlined_delete_<table_id>`` begun by the snapshot (a table
    a flush empties), or None when the table has no such catalog table."""
    if not reader.has_table(conn, T.inlined_delete_table_name(table_id)):
        return None
    t = T.inlined_delete_table(table_id)
    return select(t.c.file_id).where(t.c.begin_snapshot <= snapshot_id, t.c.file_id.is_not(None))


__all__ = ["any_deleted_from", "merge_candidates"]
