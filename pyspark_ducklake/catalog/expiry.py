"""The catalog side of snapshot expiry and file cleanup (``DuckLakeMetadataManager::DeleteSnapshots`` and the
``ducklake_files_scheduled_for_deletion`` bookkeeping); :mod:`pyspark_ducklake.table.maintenance.expire` decides
what to expire and deletes the files.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, MetaData, Table, and_, delete, insert, or_, select, update
from sqlalchemy.schema import DropTable
from sqlalchemy.sql.elements import ColumnElement

from pyspark_ducklake.catalog import dialects, reader
from pyspark_ducklake.catalog import tables as T
from pyspark_ducklake.catalog.transaction import now_utc

_CHUNK = 500


@dataclass(frozen=True)
class RemovedEntries:
    """What :func:`remove_snapshots` took out of the catalog."""

    files_scheduled: tuple[str, ...]
    bytes_scheduled: int
    tables_removed: tuple[int, ...]


def snapshots_before(conn: Connection, cutoff: dt.datetime, *, after: int, limit: int) -> list[Any]:
    """Up to ``limit`` snapshots after id ``after`` that may have been committed before ``cutoff``, oldest first:
    ``(snapshot_id, snapshot_time)``. The database compares the times (on SQLite roughly, through its own time
    parser: the caller compares them exactly)."""
    s = T.ducklake_snapshot
    query = (
        select(s.c.snapshot_id, s.c.snapshot_time)
        .where(s.c.snapshot_id > after, dialects.time_at_most(conn, s.c.snapshot_time, cutoff))
        .order_by(s.c.snapshot_id)
        .limit(limit)
    )
    return list(conn.execute(query).all())


def existing_snapshots(conn: Connection, ids: Sequence[int]) -> set[int]:
    """Which of these snapshot ids exist."""
    s = T.ducklake_snapshot
    out: set[int] = set()
    for i in range(0, len(ids), _CHUNK):
        out.update(
            int(r[0]) for r in conn.execute(select(s.c.snapshot_id).where(s.c.snapshot_id.in_(ids[i : i + _CHUNK])))
        )
    return out


def _unreferenced(table: Table, lo: int | None = None, hi: int | None = None) -> ColumnElement[bool]:
    """Rows ended before every remaining snapshot could see them: no snapshot in ``[begin, end)``; with ``lo`` and
    ``hi``, only rows that some snapshot in ``[lo, hi]`` could see (the ones expiring those can leave unseen)."""
    s = T.ducklake_snapshot
    visible_somewhere = (
        select(s.c.snapshot_id)
        .where(s.c.snapshot_id >= table.c.begin_snapshot, s.c.snapshot_id < table.c.end_snapshot)
        .exists()
    )
    cond = and_(table.c.end_snapshot.is_not(None), ~visible_somewhere)
    if lo is not None and hi is not None:
        cond = and_(table.c.begin_snapshot <= hi, table.c.end_snapshot > lo, cond)
    return cond


def remove_snapshots(conn: Connection, data_path: str, chosen: Sequence[int]) -> RemovedEntries:
    """Delete the ``chosen`` snapshots' rows and the metadata only they referenced; schedule unreachable files.

    Only file rows that a chosen snapshot could see are examined (no other row's visibility changes), so a batch
    costs what it expires, not the history.
    """
    chosen = list(chosen)
    lo, hi = min(chosen), max(chosen)
    for table in (T.ducklake_snapshot, T.ducklake_snapshot_changes):
        for i in range(0, len(chosen), _CHUNK):
            conn.execute(delete(table).where(table.c.snapshot_id.in_(chosen[i : i + _CHUNK])))
    dirs = _table_dirs(conn, data_path)
    gone_tables = _unreachable_tables(conn)
    scheduled: list[str] = []
    size = 0

    d = T.ducklake_data_file
    cond = _unreferenced(d, lo, hi)
    if gone_tables:
        cond = or_(d.c.table_id.in_(gone_tables), cond)
    files = conn.execute(
        select(d.c.data_file_id, d.c.table_id, d.c.path, d.c.path_is_relative, d.c.file_size_bytes).where(cond)
    ).all()
    file_ids = [int(r.data_file_id) for r in files]
    for table in (
        T.ducklake_data_file,
        T.ducklake_file_column_stats,
        T.ducklake_file_variant_stats,
        T.ducklake_file_partition_value,
    ):
        for i in range(0, len(file_ids), _CHUNK):
            conn.execute(delete(table).where(table.c.data_file_id.in_(file_ids[i : i + _CHUNK])))

    x = T.ducklake_delete_file
    cond = _unreferenced(x, lo, hi)
    if gone_tables:
        cond = or_(x.c.table_id.in_(gone_tables), cond)
    deletes = {r.delete_file_id: r for r in conn.execute(select(x).where(cond))}
    for i in range(0, len(file_ids), _CHUNK):
        for r in conn.execute(select(x).where(x.c.data_file_id.in_(file_ids[i : i + _CHUNK]))):
            deletes[r.delete_file_id] = r
    delete_ids = sorted(deletes)
    for i in range(0, len(delete_ids), _CHUNK):
        conn.execute(delete(x).where(x.c.delete_file_id.in_(delete_ids[i : i + _CHUNK])))

    to_schedule = [(r.data_file_id, r.table_id, r.path, r.path_is_relative, r.file_size_bytes) for r in files]
    to_schedule += [
        (r.delete_file_id, r.table_id, r.path, r.path_is_relative, r.file_size_bytes) for r in deletes.values()
    ]
    rows_out = []
    for file_id, table_id, path, relative, nbytes in to_schedule:
        full = reader.resolve(dirs.get(table_id, data_path), path, relative)
        inside = full.startswith(data_path)
        scheduled.append(full)
        size += nbytes or 0
        rows_out.append(
            {
                "data_file_id": file_id,
                "path": full[len(data_path) :] if inside else full,
                "path_is_relative": inside,
                "schedule_start": now_utc(),
            }
        )
    if rows_out:
        conn.execute(insert(T.ducklake_files_scheduled_for_deletion), rows_out)
    if gone_tables:
        _drop_tables(conn, gone_tables)
    _drop_unreachable_entries(conn)
    return RemovedEntries(tuple(scheduled), size, tuple(gone_tables))


def _table_dirs(conn: Connection, data_path: str) -> dict[int, str]:
    """Every table's folder (dropped ones too), for resolving relative file paths."""
    schemas = {
        r.schema_id: reader.resolve(data_path, r.path or "", r.path_is_relative is not False)
        for r in conn.execute(select(T.ducklake_schema))
    }
    out: dict[int, str] = {}
    for r in conn.execute(select(T.ducklake_table)):
        base = schemas.get(r.schema_id, data_path)
        path = reader.resolve(base, r.path or "", r.path_is_relative is not False)
        out[int(r.table_id)] = path if path.endswith("/") else path + "/"
    return out


def _unreachable_tables(conn: Connection) -> list[int]:
    """Dropped tables that no remaining snapshot can see (every row of the table id ended and unreferenced)."""
    t = T.ducklake_table
    all_ids = {int(r[0]) for r in conn.execute(select(t.c.table_id).distinct())}
    reachable = {int(r[0]) for r in conn.execute(select(t.c.table_id).where(~_unreferenced(t)).distinct())}
    return sorted(all_ids - reachable)


def _drop_tables(conn: Connection, table_ids: list[int]) -> None:
    i = T.ducklake_inlined_data_tables
    names = [r[0] for r in conn.execute(select(i.c.table_name).where(i.c.table_id.in_(table_ids)))]
    names += [T.inlined_delete_table_name(tid) for tid in table_ids]
    for table in (
        T.ducklake_table,
        T.ducklake_table_stats,
        T.ducklake_table_column_stats,
        T.ducklake_partition_info,
        T.ducklake_partition_column,
        T.ducklake_column,
        T.ducklake_column_tag,
        T.ducklake_sort_info,
        T.ducklake_sort_expression,
        T.ducklake_schema_versions,
        T.ducklake_inlined_data_tables,
        T.ducklake_column_mapping,
    ):
        conn.execute(delete(table).where(table.c.table_id.in_(table_ids)))
    for name in names:
        conn.execute(DropTable(Table(name, MetaData()), if_exists=True))


def _drop_unreachable_entries(conn: Connection) -> None:
    # the reference's order; view column tags exist on 1.1 catalogs only
    tables = [T.ducklake_schema, T.ducklake_view, T.ducklake_tag, T.ducklake_macro]
    if reader.format_version(conn).view_column_tags:
        tables.insert(2, T.ducklake_view_column_tag)
    for table in tables:
        conn.execute(delete(table).where(_unreferenced(table)))
    m = T.ducklake_macro
    for table in (T.ducklake_macro_impl, T.ducklake_macro_parameters):
        conn.execute(
            delete(table).where(table.c.macro_id.not_in(select(m.c.macro_id).where(m.c.macro_id.is_not(None))))
        )
    c, n = T.ducklake_column_mapping, T.ducklake_name_mapping
    conn.execute(delete(n).where(n.c.mapping_id.not_in(select(c.c.mapping_id).where(c.c.mapping_id.is_not(None)))))


def scheduled_files(conn: Connection, *, after: int | None = None, limit: int | None = None) -> list[Any]:
    """Rows of ``ducklake_files_scheduled_for_deletion`` by file id: those after id ``after``, at most ``limit``;
    with no ``after`` (the first page) the rows without a file id too."""
    f = T.ducklake_files_scheduled_for_deletion
    query = select(f.c.data_file_id, f.c.path, f.c.path_is_relative, f.c.schedule_start)
    paged = query.where(f.c.data_file_id > (-1 if after is None else after)).order_by(f.c.data_file_id)
    if limit is not None:
        paged = paged.limit(limit)
    rows = list(conn.execute(paged).all())
    if after is None:
        rows = list(conn.execute(query.where(f.c.data_file_id.is_(None))).all()) + rows
    return rows


def set_global_option(conn: Connection, key: str, value: str) -> None:
    """Set a lake-wide ``ducklake_metadata`` option (scope NULL), as DuckDB's ``set_option`` writes it."""
    m = T.ducklake_metadata
    where = and_(m.c.key == key, m.c.scope.is_(None))
    if conn.execute(select(m.c.key).where(where).limit(1)).first() is None:
        conn.execute(insert(m).values(key=key, value=value, scope=None, scope_id=None))
    else:
        conn.execute(update(m).where(where).values(value=value))


def unschedule(conn: Connection, rows: Sequence[Any]) -> None:
    """Remove these rows (from :func:`scheduled_files`) once their files are deleted."""
    f = T.ducklake_files_scheduled_for_deletion
    ids = [int(r.data_file_id) for r in rows if r.data_file_id is not None]
    for i in range(0, len(ids), _CHUNK):
        conn.execute(delete(f).where(f.c.data_file_id.in_(ids[i : i + _CHUNK])))
    for r in rows:
        if r.data_file_id is None:
            conn.execute(delete(f).where(f.c.data_file_id.is_(None), f.c.path == r.path))
