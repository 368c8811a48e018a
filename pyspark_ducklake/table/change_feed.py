"""The change feed of a table between two snapshots, as DuckDB's ``ducklake_table_changes`` defines it.

Over the inclusive range ``[start, end]``:

* an **insert** is a row version that began in the range: rows of Parquet files (per row through
  ``_ducklake_internal_snapshot_id`` in flushed and merged files) and rows of the inlined-data tables;
* a **delete** is a row version that ended in the range: a position first deleted in the range by any delete
  file of its data file (a plain file deletes at its ``begin_snapshot``; files DuckDB writes when it adds to an
  existing delete file or flushes carry per-row ``_ducklake_internal_snapshot_id``), a
  ``ducklake_inlined_delete_<tid>`` row, an inlined row's ``end_snapshot``, or a data file ended by a logical
  change (an overwrite);
* a delete and an insert of the same ``rowid`` in the same snapshot is an update: ``update_preimage`` and
  ``update_postimage``.

Maintenance changes nothing logically. Files written by ``merge_adjacent`` and flushes keep each row's snapshot
id. Files ended at a ``rewrite_delete``, ``merge_adjacent``, ``compacted_table`` or ``inline_flush`` snapshot (told
apart by ``changes_made``) are no deletes, and rows tagged with such a snapshot (a rewrite's output, and files
later merged from it) are no inserts: their versions began in the files they were rewritten from. The same row
version found twice counts once. Deleted rows carry the values of the version that was deleted; all rows are
read in the end snapshot's schema (by column id).

Where DuckDB 1.5.5 reports something else, it is a bug on its side, and this module does not copy it:

* a plain delete file on a data file with ``_ducklake_internal_snapshot_id`` (flushed or merged) is reported at
  each row's *insert* snapshot;
* several delete-file rows for one data file (a writer that ends the previous delete file, as this library does)
  report the earlier deletions again at every later delete file's snapshot;
* a data file ended by an overwrite loses its full-file delete when it also had inlined deletes in the range,
  and reports already (inline-)deleted rows again otherwise;
* ``ducklake_rewrite_data_files`` shows up as an update of every surviving row;
* a data file holding two versions of one row (an inlined row updated, then flushed) reports both deletions at
  one snapshot when both are in the range (DuckDB maps deleted rows to snapshots by rowid).

The plan (:func:`plan_changes`) reads the catalog only; each :class:`FileChangeTask` reads its own files. Only
:func:`finish_changes` (update pairing) needs all rows together; ``table.change_feed_split`` decides the pairing from
the changes' keys first, so that Spark tasks can read the files apart.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import os
import re
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pyspark_ducklake.catalog import reader
from pyspark_ducklake.catalog.corrupt import reading
from pyspark_ducklake.catalog.db import Connection, Engine
from pyspark_ducklake.catalog.entries import DataFileEntry, TableEntry
from pyspark_ducklake.catalog.format_version import FormatVersion
from pyspark_ducklake.catalog.inlined_tables import inlined_file_deletes
from pyspark_ducklake.catalog.name_mapping import with_mappings
from pyspark_ducklake.catalog.snapshot_changes import ChangeSet
from pyspark_ducklake.catalog.types import TableSchema, arrow_field, empty_table
from pyspark_ducklake.exceptions import InvalidOptionError, NoSuchColumnError, NoSuchSnapshotError
from pyspark_ducklake.io.deletion_vector import PARQUET, delete_file_format
from pyspark_ducklake.io.parquet import field_id, read_columns
from pyspark_ducklake.io.row_group_count import RecordedRowGroups
from pyspark_ducklake.options import parse_snapshot_id
from pyspark_ducklake.table.projection import project
from pyspark_ducklake.table.scan import (
    FILE_POSITION,
    ROW_ID_FIELD_ID,
    ROWID,
    SNAPSHOT_ID,
    SNAPSHOT_ID_FIELD_ID,
    FileTask,
    execute_file_task,
    internal_column,
    read_delete_file,
    read_inlined_rows,
    row_versions,
)

CHANGE_TYPE = "_change_type"
CHANGE_SNAPSHOT = "_snapshot_id"
CHANGE_ROWID = "_rowid"
COMMIT_TIMESTAMP = "_commit_timestamp"
CHANGE_COLUMNS = (CHANGE_TYPE, CHANGE_SNAPSHOT, CHANGE_ROWID, COMMIT_TIMESTAMP)
# Rows on their way through the feed end with these three columns (found by position: the table may have columns
# of the same names); the commit time is added last.
TYPE_AT, SNAPSHOT_AT, ROWID_AT = -3, -2, -1

INSERT = "insert"
DELETE = "delete"
UPDATE_PREIMAGE = "update_preimage"
UPDATE_POSTIMAGE = "update_postimage"

_ALL_ROWS = 2**62  # a snapshot id newer than any: read every row version of a file
_MAX_THREADS = 4  # threads of table_changes (files read at once, columns gathered at once)
_COMPACTED = re.compile(r"(?:^|,)compacted_table:(\d+)")

SnapshotRef = int | dt.datetime
_T = TypeVar("_T")


# --- snapshots and their changes ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class SnapshotChanges:
    """What one snapshot did to one table, as far as the change feed cares."""

    known: bool  # False when the snapshot has no ``ducklake_snapshot_changes`` row
    data: bool  # rows inserted or deleted (inlined or not)
    inserted: bool  # rows inserted (a maintenance snapshot that also inserts still creates insert files)
    maintenance: bool  # flush, merge, rewrite or compaction of this table
    deleted: bool = True  # rows deleted (inlined or not), or it may have: unknown snapshots are assumed to

    @property
    def logical(self) -> bool:
        """Whether the snapshot can change the table's rows (unknown snapshots are assumed to)."""
        return not self.known or (self.data and not self.maintenance)


def classify(changes_made: str | None, table_id: int, *, known: bool = True) -> SnapshotChanges:
    """Classify a ``changes_made`` string for ``table_id``."""
    if not known:
        return SnapshotChanges(False, True, True, False)
    cs = ChangeSet.parse(changes_made)
    inserted = table_id in cs.inserted_into or table_id in cs.inlined_insert
    data = inserted or table_id in cs.deleted_from or table_id in cs.inlined_delete
    compacted = any(int(m) == table_id for m in _COMPACTED.findall(changes_made or ""))
    maintenance = compacted or table_id in (cs.inline_flush | cs.merge_adjacent | cs.rewrite_delete)
    deleted = table_id in cs.deleted_from or table_id in cs.inlined_delete
    return SnapshotChanges(True, data, inserted, maintenance, deleted)


def _snapshot_changes(
    conn: Connection, table_id: int, snapshots: tuple[int, int] | set[int]
) -> dict[int, SnapshotChanges]:
    """Each snapshot in the range ``(first, last)`` (or of the set) with what it did to the table."""
    if isinstance(snapshots, tuple):
        rows = reader.snapshot_changes_between(conn, *snapshots)
    else:
        rows = reader.snapshot_changes_of(conn, sorted(snapshots))
    return {snapshot_id: classify(made, table_id, known=known) for snapshot_id, known, made in rows}


def _snapshot_id(conn: Connection, ref: SnapshotRef, *, lower: bool, what: str) -> int:
    """A snapshot id for an id (which must exist) or a time (``lower``: first at or after; else last at or before).

    Raises:
        InvalidOptionError: not an int (a float, a bool, text) or datetime, or a negative id.
        NoSuchSnapshotError: the snapshot does not exist.
    """
    if isinstance(ref, dt.datetime):
        if not lower:
            return reader.snapshot_at_time(conn, ref).snapshot_id
        first = reader.first_snapshot_from(conn, ref)
        if first is None:
            when = ref if ref.tzinfo is not None else ref.replace(tzinfo=dt.timezone.utc)
            raise NoSuchSnapshotError(f"no snapshot at or after {when.isoformat()}")
        return first.snapshot_id
    try:
        snapshot_id = parse_snapshot_id(ref, what, text=False)
    except InvalidOptionError as e:
        raise InvalidOptionError(f"{e}; or give a datetime") from e
    return reader.snapshot_by_id(conn, snapshot_id).snapshot_id


def resolve_range(conn: Connection, start: SnapshotRef, end: SnapshotRef) -> tuple[int, int]:
    """The snapshot ids of a change-feed range; with times, the snapshots committed within them.

    The result may have ``start > end`` when two times enclose no snapshot (an empty feed).

    Raises:
        InvalidOptionError: ``start`` is after ``end``, or a bound is not an id or a time.
        NoSuchSnapshotError: a bound names no snapshot (never existed or expired).
    """
    if (
        isinstance(start, (int, np.integer))
        and isinstance(end, (int, np.integer))
        and not isinstance(start, bool)
        and not isinstance(end, bool)
        and start > end
    ):
        raise InvalidOptionError(f"change feed start snapshot {start} is after its end snapshot {end}")
    if isinstance(start, dt.datetime) and isinstance(end, dt.datetime):
        a = start if start.tzinfo else start.replace(tzinfo=dt.timezone.utc)
        b = end if end.tzinfo else end.replace(tzinfo=dt.timezone.utc)
        if a > b:
            raise InvalidOptionError(f"change feed start {start.isoformat()} is after its end {end.isoformat()}")
    try:
        first = _snapshot_id(conn, start, lower=True, what="start")
        last = _snapshot_id(conn, end, lower=False, what="end")
    except NoSuchSnapshotError as e:
        raise NoSuchSnapshotError(f"change feed {_show(start)}..{_show(end)}: {e}") from e
    return first, last


def _show(ref: SnapshotRef) -> str:
    return ref.isoformat() if isinstance(ref, dt.datetime) else str(ref)


# --- the plan ----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DeleteFileRef:
    """A delete file of a data file: plain files delete at ``begin_snapshot``; others carry per-row snapshots."""

    path: str
    begin_snapshot: int
    format: str = PARQUET  # or PUFFIN: a deletion vector
    encryption_key: str | None = field(default=None, repr=False)  # encrypted lakes only
    recorded_row_groups: RecordedRowGroups | None = None  # a Parquet file's row_group_count (1.1), checked on read


@dataclass(frozen=True)
class FileChangeTask:
    """One data file's part of the feed: its row versions begun in the range and the rows it lost in the range."""

    file: DataFileEntry  # ``delete_file`` is always None; ``delete_files`` below hold the history
    start: int
    end: int
    inserts: bool  # whether the file may hold row versions that began in the range
    delete_files: tuple[DeleteFileRef, ...] = ()  # every delete file of the data file begun at or before ``end``
    inlined_deletes: tuple[tuple[int, int], ...] = ()  # (position, snapshot) at or before ``end``
    ended_at: int | None = None  # the whole file was deleted at this snapshot (inside the range)
    # Rows tagged with these snapshots were rewritten there, not inserted: a rewrite's files begin at it, and
    # files merged from those carry it as the rows' snapshot id.
    rewrite_snapshots: tuple[int, ...] = ()


@dataclass
class ChangePlan:
    """Everything the feed of ``table`` over ``[start, end]`` reads; the rows come from executing it."""

    table: TableEntry
    schema: TableSchema
    start: int
    end: int
    files: list[FileChangeTask] = field(default_factory=list)
    inlined: pa.Table | None = None  # inlined row versions begun or ended in the range (+ end_snapshot)
    commit_times: dict[int, dt.datetime] = field(default_factory=dict)


def plan_changes(
    conn: Connection,
    table: TableEntry,
    start: int,
    end: int,
    data_path: str,
    columns: Sequence[str] | None = None,
    *,
    fmt: FormatVersion,
) -> ChangePlan:
    """The files and inlined rows holding the changes of ``table`` over the resolved range ``[start, end]`` (of the
    table columns named in ``columns`` only, when given), in a catalog of format ``fmt``.

    Only catalog rows that may hold a change of the range are read (the data files written, ended or deleted from
    in it, their delete files, the inlined rows begun or ended in it, and the snapshots and commit times these
    name), so the plan costs what the range changed, however long the history before it.

    Raises:
        CorruptCatalogError: a catalog value that does not parse, naming where it is and the snapshots read.
    """
    with reading(start, end):
        return _plan_changes(conn, table, start, end, data_path, columns, fmt)


def _plan_changes(
    conn: Connection,
    table: TableEntry,
    start: int,
    end: int,
    data_path: str,
    columns: Sequence[str] | None,
    fmt: FormatVersion,
) -> ChangePlan:
    # Nullable: a range may span ALTER ... SET NOT NULL, and older rows may hold NULL there (DuckDB reports them).
    schema = project(reader.table_schema(conn, table.table_id, end).nullable(), columns)
    plan = ChangePlan(table, schema, start, end)
    if start > end:
        return plan
    files = reader.changed_data_file_rows(conn, table.table_id, start, end, fmt)
    file_ids = [int(r.data_file_id) for r in files]
    named = {int(s) for r in files for s in (r.begin_snapshot, r.end_snapshot) if s is not None and start <= s <= end}
    changes = _snapshot_changes(conn, table.table_id, named)
    base = reader.table_path(table, data_path)
    encrypted = reader.lake_encrypted(conn) if files else False
    delete_files: dict[int, list[DeleteFileRef]] = {}
    deletes_may_be_in_range: set[int] = set()
    # Every delete file of these data files, older ones too: a position's deletion is its earliest over all of them.
    for r in reader.delete_file_rows_of(conn, table.table_id, file_ids, end, fmt):
        path = reader.delete_file_path(base, r, data_path)
        kind = delete_file_format(r.format, r.path)
        counted = reader.row_group_count(r, fmt)
        recorded = None
        if counted is not None and kind == PARQUET:
            recorded = RecordedRowGroups(counted, "ducklake_delete_file", int(r.delete_file_id))
        ref = DeleteFileRef(path, int(r.begin_snapshot), kind, reader.file_key(r, encrypted, path), recorded)
        delete_files.setdefault(int(r.data_file_id), []).append(ref)
        # An ended delete file was replaced before its end: it holds no deletion at or after that end.
        if r.end_snapshot is None or int(r.end_snapshot) > start:
            deletes_may_be_in_range.add(int(r.data_file_id))
    inlined_deletes = inlined_file_deletes(conn, table.table_id, end, file_ids) if file_ids else {}
    rewrites = tuple(sorted(s for s, c in changes.items() if c.maintenance and not c.inserted))
    for r in files:
        task = _file_task(
            r,
            base,
            start,
            end,
            changes,
            delete_files,
            deletes_may_be_in_range,
            inlined_deletes,
            rewrites,
            encrypted,
            fmt,
        )
        if task is not None:
            plan.files.append(task)
    if any(t.file.mapping_id is not None for t in plan.files):
        mapped = with_mappings(conn, [t.file for t in plan.files])
        plan.files = [dataclasses.replace(t, file=f) for t, f in zip(plan.files, mapped, strict=True)]
    plan.inlined = _inlined_versions(conn, table.table_id, schema, start, end)
    span = _snapshot_span(plan, changes)
    if span is not None:
        plan.commit_times = reader.commit_times(conn, *span)
    return plan


def _snapshot_span(plan: ChangePlan, changes: dict[int, SnapshotChanges]) -> tuple[int, int] | None:
    """The first and last snapshot a change of the plan can carry (None: it has none), for the commit times.

    A plain file's rows all carry its ``begin_snapshot`` and its end is a known snapshot; rows of a flushed, merged
    or rewritten file, and deletions from delete files, may carry any snapshot of the range.
    """
    start, end = plan.start, plan.end
    lo, hi = end + 1, start - 1
    for t in plan.files:
        f = t.file
        if t.delete_files or t.inlined_deletes or f.partial_max is not None or f.begin_snapshot in t.rewrite_snapshots:
            return start, end
        known = changes.get(f.begin_snapshot)
        if known is not None and known.maintenance:
            return start, end
        for s in (f.begin_snapshot if t.inserts else None, t.ended_at):
            if s is not None and start <= s <= end:
                lo, hi = min(lo, s), max(hi, s)
    if plan.inlined is not None and plan.inlined.num_rows:
        n = len(plan.schema.columns)
        for name in (SNAPSHOT_ID, "end_snapshot"):
            values = _internal(plan.inlined, n, name)
            inside = pc.and_(pc.greater_equal(values, start), pc.less_equal(values, end))
            bounds = pc.min_max(pc.filter(values, pc.fill_null(inside, False))).as_py()
            if bounds["min"] is not None:
                lo, hi = min(lo, bounds["min"]), max(hi, bounds["max"])
    return (lo, hi) if lo <= hi else None


def _file_task(
    r: Any,
    base: str,
    start: int,
    end: int,
    changes: dict[int, SnapshotChanges],
    delete_files: dict[int, list[DeleteFileRef]],
    deletes_may_be_in_range: set[int],
    inlined_deletes: dict[int, list[tuple[int, int]]],
    rewrite_snapshots: tuple[int, ...],
    encrypted: bool,
    fmt: FormatVersion,
) -> FileChangeTask | None:
    file_id, begin = int(r.data_file_id), int(r.begin_snapshot)
    inserts = begin >= start or (r.partial_max is not None and int(r.partial_max) >= start)
    if begin in rewrite_snapshots and r.partial_max is None:
        inserts = False  # every row was rewritten there (see FileChangeTask.rewrite_snapshots)
    ended_at = None
    if r.end_snapshot is not None and start <= int(r.end_snapshot) <= end:
        ended = changes.get(int(r.end_snapshot))
        if ended is None or not ended.maintenance:
            ended_at = int(r.end_snapshot)
    inlined = inlined_deletes.get(file_id, [])
    has_deletes = ended_at is not None or file_id in deletes_may_be_in_range or any(s >= start for _, s in inlined)
    if not inserts and not has_deletes:
        return None
    path = reader.resolve(base, r.path, r.path_is_relative)
    entry = DataFileEntry(
        file_id,
        path,
        int(r.record_count or 0),
        r.file_size_bytes,
        r.footer_size,
        r.row_id_start,
        begin,
        r.partial_max,
        r.mapping_id,
        None,
        r.partition_id,
        reader.file_key(r, encrypted, path),
        row_group_count=reader.row_group_count(r, fmt),
    )
    return FileChangeTask(
        entry,
        start,
        end,
        inserts,
        tuple(delete_files.get(file_id, ())) if has_deletes else (),
        tuple(inlined) if has_deletes else (),
        ended_at,
        rewrite_snapshots,
    )


def _inlined_versions(conn: Connection, table_id: int, schema: TableSchema, start: int, end: int) -> pa.Table | None:
    rows = read_inlined_rows(conn, table_id, schema, end, include_ended=True, changed_since=start)
    if rows.num_rows == 0 or rows.num_columns != len(schema.columns) + 3:
        return None
    ends = internal_column(rows, schema, "end_snapshot")
    begun = pc.greater_equal(internal_column(rows, schema, SNAPSHOT_ID), start)
    ended = pc.and_(pc.greater_equal(ends, start), pc.less_equal(ends, end))
    keep = pc.or_(begun, pc.fill_null(ended, False))
    rows = rows.filter(keep)
    return rows if rows.num_rows else None


# --- executing a file task ---------------------------------------------------------------------------------------


def deleted_positions(
    task: FileChangeTask, *, storage_options: dict[str, Any] | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """``(positions, snapshots)`` of the file's rows first deleted inside the task's range, by position.

    Each position's deletion is its earliest snapshot over every delete file (plain ones at their
    ``begin_snapshot``, others per row) and inlined delete; so cumulative delete files count each row once.
    """
    pos_parts: list[np.ndarray] = []
    snap_parts: list[np.ndarray] = []
    for ref in task.delete_files:
        pos, snaps = read_delete_file(
            ref.path,
            storage_options,
            ref.encryption_key,
            file_format=ref.format,
            row_count=task.file.record_count,
            recorded_row_groups=ref.recorded_row_groups,
        )
        pos_parts.append(pos)
        snap_parts.append(np.full(len(pos), ref.begin_snapshot, dtype=np.int64) if snaps is None else snaps)
    if task.inlined_deletes:
        arr = np.array(task.inlined_deletes, dtype=np.int64).reshape(-1, 2)
        pos_parts.append(arr[:, 0])
        snap_parts.append(arr[:, 1])
    positions = np.concatenate(pos_parts) if pos_parts else np.empty(0, np.int64)
    snapshots = np.concatenate(snap_parts) if snap_parts else np.empty(0, np.int64)
    # Already sorted and unique (one delete file, as DuckDB writes them): nothing to merge.
    if len(positions) > 1 and not bool(np.all(positions[1:] > positions[:-1])):
        order = np.lexsort((snapshots, positions))
        positions, snapshots = positions[order], snapshots[order]
        first = np.ones(len(positions), dtype=bool)
        first[1:] = positions[1:] != positions[:-1]
        positions, snapshots = positions[first], snapshots[first]
    if task.ended_at is not None:
        # Rows not deleted before the file's end were deleted by it.
        earlier = snapshots < task.ended_at
        alive = np.ones(task.file.record_count, dtype=bool)
        alive[positions[earlier & (positions < len(alive))]] = False
        rest = np.flatnonzero(alive)
        positions = np.concatenate([positions[earlier], rest])
        snapshots = np.concatenate([snapshots[earlier], np.full(len(rest), task.ended_at, dtype=np.int64)])
    in_range = (snapshots >= task.start) & (snapshots <= task.end)
    return positions[in_range], snapshots[in_range]


def execute_change_task(
    task: FileChangeTask, schema: TableSchema, *, storage_options: dict[str, Any] | None = None
) -> pa.Table | None:
    """The file's inserts and deletes in ``schema`` with ``_change_type``, ``_snapshot_id`` and ``_rowid``.

    Returns None when the file has no change in the range (then the data file itself is not read).
    """
    positions, snapshots = deleted_positions(task, storage_options=storage_options)
    if not task.inserts and len(positions) == 0:
        return None
    data = execute_file_task(
        FileTask(task.file, _ALL_ROWS), schema, storage_options=storage_options, with_positions=True
    )
    return file_changes(task, data, positions, snapshots, len(schema.columns))


def count_task_changes(task: FileChangeTask, *, storage_options: dict[str, Any] | None = None) -> pa.Table | None:
    """Like :func:`execute_change_task` but without the table's columns (only the internal columns are read)."""
    positions, snapshots = deleted_positions(task, storage_options=storage_options)
    if not task.inserts and len(positions) == 0:
        return None
    data = read_versions(task.file, storage_options)
    return file_changes(task, data, positions, snapshots, 0)


def read_versions(f: DataFileEntry, storage_options: dict[str, Any] | None) -> pa.Table:
    """``rowid`` and ``snapshot_id`` of every row version of a data file, and its position."""
    return versions(f, read_internal_columns(f, storage_options))


def read_internal_columns(f: DataFileEntry, storage_options: dict[str, Any] | None) -> pa.Table:
    """A data file's ``rowid`` and ``snapshot_id`` columns as stored (none where it has none: flush and merge output
    has them), its ``row_group_count`` checked."""
    return read_columns(
        f.path,
        internal_columns,
        storage_options=storage_options,
        encryption_key=f.encryption_key,
        recorded_row_groups=f.recorded_row_groups,
    )


def versions(f: DataFileEntry, raw: pa.Table) -> pa.Table:
    """:func:`read_versions` from the file's internal columns (``raw``: what :func:`internal_columns` picks)."""
    n = raw.num_rows if raw.num_columns else f.record_count
    row_ids, snaps = row_versions(f, raw, n)
    return pa.table({ROWID: row_ids, SNAPSHOT_ID: snaps, FILE_POSITION: pa.array(np.arange(n, dtype=np.int64))})


def internal_columns(schema: pa.Schema) -> list[str]:
    """The names of a data file's ``rowid`` and ``snapshot_id`` columns, where it has them."""
    return [f.name for f in schema if field_id(f) in (ROW_ID_FIELD_ID, SNAPSHOT_ID_FIELD_ID)]


def file_changes(
    task: FileChangeTask, data: pa.Table, positions: np.ndarray, snapshots: np.ndarray, columns: int
) -> pa.Table | None:
    """``data``'s inserts and deletes; its first ``columns`` columns are the table's, the internal ones follow."""
    parts = []
    if task.inserts:
        snaps = _internal(data, columns, SNAPSHOT_ID)
        began = pc.and_(pc.greater_equal(snaps, task.start), pc.less_equal(snaps, task.end))
        if task.rewrite_snapshots:
            began = pc.and_(began, pc.invert(pc.is_in(snaps, pa.array(task.rewrite_snapshots, pa.int64()))))
        inserted = data if pc.all(began).as_py() else data.filter(began)  # most files: every row, no copy
        if inserted.num_rows:
            parts.append(_tag(inserted, columns, columns, INSERT, _internal(inserted, columns, SNAPSHOT_ID)))
    if len(positions):
        n = data.num_rows
        inside = positions < n  # a delete file pointing past the end: nothing to report for those
        deleted = data.take(pa.array(positions[inside]))
        parts.append(_tag(deleted, columns, columns, DELETE, pa.array(snapshots[inside], pa.int64())))
    if not parts:
        return None
    return pa.concat_tables(parts) if len(parts) > 1 else parts[0]


def _internal(data: pa.Table, columns: int, name: str) -> pa.ChunkedArray:
    """An internal column of ``data``, whose first ``columns`` columns are the table's (they may share its name)."""
    return data.column(columns + data.schema.names[columns:].index(name))


def _tag(data: pa.Table, columns: int, keep: int, kind: str, snapshots: pa.Array | pa.ChunkedArray) -> pa.Table:
    """The first ``keep`` of ``data``'s ``columns`` table columns, then the change columns."""
    out = data.select(list(range(keep)))
    out = out.append_column(CHANGE_TYPE, pa.repeat(pa.scalar(kind, pa.string()), data.num_rows))
    if isinstance(snapshots, pa.Array):
        snapshots = pa.chunked_array([snapshots])
    out = out.append_column(CHANGE_SNAPSHOT, snapshots.cast(pa.int64()))
    return out.append_column(CHANGE_ROWID, _internal(data, columns, ROWID).cast(pa.int64()))


def inlined_changes(plan: ChangePlan, *, columns: bool = True) -> pa.Table | None:
    """The inserts and deletes of the plan's inlined row versions (without the table's columns: ``columns=False``)."""
    rows = plan.inlined
    if rows is None:
        return None
    n = len(plan.schema.columns)
    keep = n if columns else 0
    parts = []
    begun = rows.filter(pc.greater_equal(_internal(rows, n, SNAPSHOT_ID), plan.start))
    if begun.num_rows:
        parts.append(_tag(begun, n, keep, INSERT, _internal(begun, n, SNAPSHOT_ID)))
    ends = _internal(rows, n, "end_snapshot")
    ended = rows.filter(pc.fill_null(pc.and_(pc.greater_equal(ends, plan.start), pc.less_equal(ends, plan.end)), False))
    if ended.num_rows:
        parts.append(_tag(ended, n, keep, DELETE, _internal(ended, n, "end_snapshot")))
    if not parts:
        return None
    return pa.concat_tables(parts) if len(parts) > 1 else parts[0]


# --- putting the rows together -----------------------------------------------------------------------------------


def change_column_names(schema: TableSchema) -> tuple[str, str, str, str]:
    """The names of the change columns after the table's: ``_change_type``, ``_snapshot_id``, ``_rowid``,
    ``_commit_timestamp``, each with ``_1`` (``_2``...) appended where the table has a column of that name (compared
    case-insensitively), as DuckDB's ``table_changes`` names a duplicate."""
    taken = {name.lower() for name in schema.names()}
    out = []
    for base in CHANGE_COLUMNS:
        name, n = base, 0
        while name.lower() in taken:
            n += 1
            name = f"{base}_{n}"
        taken.add(name.lower())
        out.append(name)
    return out[0], out[1], out[2], out[3]


def feed_schema(schema: TableSchema) -> pa.Schema:
    """The feed's columns: the table's (end snapshot), then the change columns."""
    kind, snapshot, rowid, committed = change_column_names(schema)
    return pa.schema(
        [arrow_field(c) for c in schema.nullable().columns]
        + [
            pa.field(kind, pa.string()),
            pa.field(snapshot, pa.int64()),
            pa.field(rowid, pa.int64()),
            pa.field(committed, pa.timestamp("us", tz="UTC")),
        ]
    )


def finish_changes(
    parts: Sequence[pa.Table | None], plan: ChangePlan, *, columns: bool = True, ordered: bool = True
) -> pa.Table:
    """One version per (kind, snapshot, rowid); pairs of a delete and an insert become an update; with each
    snapshot's commit time; ordered by snapshot, rowid and pre-before-post (``ordered=False`` leaves the rows
    where they are, which saves moving every row once)."""
    target = feed_schema(plan.schema if columns else TableSchema(()))
    without_time = pa.schema(list(target)[:-1])
    present = [p for p in parts if p is not None and p.num_rows]
    if not present:
        return empty_table(target)
    rows = pa.concat_tables([_conform(p, without_time) for p in present])
    is_insert = pc.equal(change_column_at(rows, TYPE_AT), INSERT).to_numpy().astype(np.int64)
    snaps = change_column_at(rows, SNAPSHOT_AT).to_numpy()
    order, codes = pair_changes(snaps, change_column_at(rows, ROWID_AT).to_numpy(), is_insert)
    s_snaps = snaps[order]
    if ordered:
        out = _reorder(rows, order)
        out_snaps = s_snaps
    else:
        keep = np.zeros(rows.num_rows, dtype=bool)
        keep[order] = True
        in_place = np.zeros(rows.num_rows, dtype=np.int8)
        in_place[order] = codes
        out = rows if keep.all() else rows.filter(pa.array(keep))
        codes, out_snaps = in_place[keep], snaps[keep]
    arrays = [out.column(i) for i in range(out.num_columns)]
    arrays[out.num_columns + TYPE_AT] = CHANGE_KINDS.take(pa.array(codes))
    arrays.append(commit_times_of(out_snaps, plan.commit_times))
    return pa.Table.from_arrays(arrays, schema=target)


def change_column_at(rows: pa.Table, position: int) -> pa.ChunkedArray:
    """A change column of rows on their way through the feed (``TYPE_AT``...), by position."""
    return rows.column(rows.num_columns + position)


def _conform(rows: pa.Table, target: pa.Schema) -> pa.Table:
    """``rows`` under the target's names (matched by position) and types."""
    if rows.schema.names != target.names:
        rows = rows.rename_columns(target.names)
    return rows if rows.schema == target else rows.cast(target)


def pair_changes(snaps: np.ndarray, rowids: np.ndarray, is_insert: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(order, codes)``: the rows to keep, sorted by snapshot, rowid and delete-before-insert, and each one's
    index into :data:`CHANGE_KINDS`. A row version recorded twice (a rewritten file still in the catalog, say) is one
    change: the first of them in the input is kept. A delete and an insert of one rowid in one snapshot are an
    update's pre and post image."""
    key = _packed_key(snaps, rowids, is_insert)
    if key is not None:
        order = np.argsort(key, kind="stable")
        sorted_key = key[order]
        unique = np.ones(len(order), dtype=bool)
        unique[1:] = sorted_key[1:] != sorted_key[:-1]
        if not unique.all():
            order, sorted_key = order[unique], sorted_key[unique]
        change = sorted_key >> 1  # (snapshot, rowid)
        inserted = sorted_key & 1
    else:
        order = np.lexsort((is_insert, rowids, snaps))
        s_snaps, s_rowids, inserted = snaps[order], rowids[order], is_insert[order]
        unique = np.ones(len(order), dtype=bool)
        unique[1:] = (s_snaps[1:] != s_snaps[:-1]) | (s_rowids[1:] != s_rowids[:-1]) | (inserted[1:] != inserted[:-1])
        if not unique.all():
            order, s_snaps, s_rowids, inserted = order[unique], s_snaps[unique], s_rowids[unique], inserted[unique]
        change = np.zeros(len(order), dtype=np.int64)
        change[1:] = np.cumsum((s_snaps[1:] != s_snaps[:-1]) | (s_rowids[1:] != s_rowids[:-1]))
    same_next = np.zeros(len(order), dtype=bool)
    same_next[:-1] = change[1:] == change[:-1]
    # Sorted, so of a pair the delete comes first.
    codes = (inserted ^ 1).astype(np.int8)
    codes[same_next] = 2
    codes[1:][same_next[:-1]] = 3
    return order, codes


def _packed_key(snaps: np.ndarray, rowids: np.ndarray, is_insert: np.ndarray) -> np.ndarray | None:
    """``(snapshot, rowid, is_insert)`` as one sortable int64, or None when they do not fit side by side."""
    if not len(snaps) or snaps.min() < 0 or rowids.min() < 0:
        return None
    row_bits = int(rowids.max()).bit_length() + 1
    if int(snaps.max()).bit_length() + row_bits > 62:
        return None
    key = snaps.astype(np.int64) << row_bits  # a new array: the in-place steps below leave the input alone
    key |= rowids.astype(np.int64, copy=False) << 1
    key |= is_insert.astype(np.int64, copy=False)
    return key


_MIN_RUN = 4096  # rows already in order that _reorder slices instead of copying


def _reorder(rows: pa.Table, order: np.ndarray) -> pa.Table:
    """``rows.take(order)``, but stretches of ``order`` that step by one (a file's inserts, mostly) are sliced, not
    copied: only the interleaved rest (deletes, update pairs) is gathered, in one take."""
    n = len(order)
    run_starts = np.concatenate([[0], np.flatnonzero(np.diff(order) != 1) + 1]) if n else np.zeros(0, np.int64)
    if len(run_starts) <= 1 and n == rows.num_rows and (n == 0 or order[0] == 0):
        return rows
    run_lengths = np.diff(np.append(run_starts, n))
    long = run_lengths >= _MIN_RUN
    if not long.any():
        return _take(rows, order)
    gathered = _take(rows, order[np.repeat(~long, run_lengths)])
    # Segments: each long run alone, and each stretch of short runs between them.
    new_segment = long.copy()
    new_segment[1:] |= long[:-1]
    new_segment[0] = True
    firsts = np.flatnonzero(new_segment)
    lasts = np.append(firsts[1:], len(run_starts)) - 1
    pieces, taken = [], 0
    for first, last in zip(firsts, lasts, strict=True):
        lo, size = int(run_starts[first]), int(run_starts[last] + run_lengths[last] - run_starts[first])
        if long[first]:
            pieces.append(rows.slice(int(order[lo]), size))
        else:
            pieces.append(gathered.slice(taken, size))
            taken += size
    return pa.concat_tables(pieces)


_PARALLEL_TAKE = 65_536  # rows gathered from which each column is gathered in its own thread


def _take(rows: pa.Table, indices: np.ndarray) -> pa.Table:
    """``rows.take(indices)``; a large gather takes the columns in threads (pyarrow's take is one column after
    another, and releases the GIL), which halves it on two cores."""
    idx = pa.array(indices)
    if len(indices) < _PARALLEL_TAKE or rows.num_columns < 2:
        return rows.take(idx)
    columns = in_threads([functools.partial(pc.take, column, idx) for column in rows.columns])
    return pa.Table.from_arrays(columns, schema=rows.schema)


CHANGE_KINDS = pa.array([INSERT, DELETE, UPDATE_PREIMAGE, UPDATE_POSTIMAGE], pa.string())


def commit_times_of(snaps: np.ndarray, commit_times: dict[int, dt.datetime]) -> pa.Array:
    """Each snapshot's commit time (null where the catalog has none), looked up without a Python loop."""
    known = sorted(commit_times)
    ids = np.array(known, dtype=np.int64)
    times = pa.array([commit_times[s] for s in known], pa.timestamp("us", tz="UTC"))
    if not len(ids):
        return pa.nulls(len(snaps), pa.timestamp("us", tz="UTC"))
    at = np.minimum(np.searchsorted(ids, snaps), len(ids) - 1)
    missing = ids[at] != snaps
    return times.take(pa.array(at, mask=missing if missing.any() else None))


# --- public entry points -----------------------------------------------------------------------------------------


def _plan(
    engine: Engine,
    data_path: str,
    fmt: FormatVersion,
    schema_name: str,
    table_name: str,
    start: SnapshotRef,
    end: SnapshotRef,
    columns: Sequence[str] | None = None,
) -> tuple[ChangePlan, TableSchema]:
    """The plan and the table's full schema at the end (its names decide the change columns' names)."""
    with engine.connect() as conn:
        first, last = resolve_range(conn, start, end)  # first > last: two times with no snapshot between them
        table = reader.table_by_name(conn, schema_name, table_name, last)
        full = reader.table_schema(conn, table.table_id, last)
        if columns is not None:
            missing = [c for c in columns if c not in full.names()]
            if missing:
                raise NoSuchColumnError(
                    f"column {missing[0]!r} is not in {schema_name}.{table_name}: {full.names()}; the change "
                    "columns always come with the feed"
                )
        return plan_changes(conn, table, first, last, data_path, columns, fmt=fmt), full


def table_changes(
    engine: Engine,
    data_path: str,
    schema_name: str,
    table_name: str,
    start_snapshot: SnapshotRef,
    end_snapshot: SnapshotRef,
    *,
    fmt: FormatVersion,
    storage_options: dict[str, Any] | None = None,
    ordered: bool = True,
    columns: Sequence[str] | None = None,
) -> pa.Table:
    """The changes of ``schema_name.table_name`` over ``[start_snapshot, end_snapshot]`` (both inclusive) in a
    catalog of format ``fmt``; with ``columns`` only those table columns (in table order) before the change columns.

    Columns: the table's columns at the end snapshot, then ``_change_type`` (``insert``, ``delete``,
    ``update_preimage``, ``update_postimage``), ``_snapshot_id``, ``_rowid`` and ``_commit_timestamp``; ordered by
    snapshot and rowid (``ordered=False``: in no particular order, which saves moving every row once). Bounds are
    snapshot ids, or datetimes (the first snapshot at or after ``start``, the last at or before ``end``).

    Raises:
        InvalidOptionError: ``start_snapshot`` is after ``end_snapshot`` (or a bound is not an id or time).
        NoSuchSnapshotError: a bound names no snapshot (never existed or expired).
        NoSuchSchemaError, NoSuchTableError: the table does not exist at the end snapshot.
        NoSuchColumnError: ``columns`` names a column the table does not have at the end snapshot.
        DataFileError: a data or delete file cannot be read.
    """
    plan, full = _plan(engine, data_path, fmt, schema_name, table_name, start_snapshot, end_snapshot, columns)
    parts = in_threads(
        [functools.partial(execute_change_task, t, plan.schema, storage_options=storage_options) for t in plan.files]
    )
    parts.append(inlined_changes(plan))
    out = finish_changes(parts, plan, ordered=ordered)
    if columns is None:
        return out
    # The change columns are named after the whole table's columns, as when every column is read.
    return out.rename_columns([*out.column_names[: len(plan.schema.columns)], *change_column_names(full)])


def in_threads(calls: list[functools.partial[_T]]) -> list[_T]:
    """Run calls a few at a time (file tasks, column gathers): pyarrow releases the GIL, so they overlap."""
    workers = min(len(calls), os.cpu_count() or 1, _MAX_THREADS)
    if workers <= 1:
        return [call() for call in calls]
    with ThreadPoolExecutor(workers, thread_name_prefix="ducklake-changes") as pool:
        return list(pool.map(lambda call: call(), calls))


def change_counts(
    engine: Engine,
    data_path: str,
    schema_name: str,
    table_name: str,
    start_snapshot: SnapshotRef,
    end_snapshot: SnapshotRef,
    *,
    fmt: FormatVersion,
    storage_options: dict[str, Any] | None = None,
) -> dict[str, int]:
    """How many rows of each ``_change_type`` :func:`table_changes` returns (kinds with none left out), reading only
    delete files and internal row columns.

    Raises: as :func:`table_changes`.
    """
    plan, _ = _plan(engine, data_path, fmt, schema_name, table_name, start_snapshot, end_snapshot)
    parts = [count_task_changes(t, storage_options=storage_options) for t in plan.files]
    parts.append(inlined_changes(plan, columns=False))
    rows = finish_changes(parts, plan, columns=False, ordered=False)
    counts = pc.value_counts(rows.column(CHANGE_TYPE)).to_pylist()  # no table columns: the names are plain
    return {str(c["values"]): int(c["counts"]) for c in counts}


def changed_snapshots(engine: Engine, table: TableEntry | int, start: int, end: int) -> list[int]:
    """Snapshots in ``[start, end]`` that changed the table's rows, from ``changes_made`` alone (no file reads).

    Maintenance (flush, merge, rewrite, compaction), schema changes and other tables' commits are left out; a
    snapshot without a ``ducklake_snapshot_changes`` row is kept (it may have changed anything). The list may
    hold a snapshot whose feed is empty: DuckDB records a flush of inlined deletes alone (no inlined rows) as
    plain ``deleted_from_table``. Snapshots that do not exist (expired, or ``end`` beyond the latest) are simply
    absent, and ``start > end`` gives ``[]``.

    Raises:
        InvalidOptionError: a negative bound.
    """
    if start < 0 or end < 0:
        raise InvalidOptionError(f"snapshot ids must be >= 0, got {start}..{end}")
    if start > end:
        return []
    table_id = table.table_id if isinstance(table, TableEntry) else int(table)
    with engine.connect() as conn:
        changes = _snapshot_changes(conn, table_id, (start, end))
    return sorted(s for s, c in changes.items() if c.logical)


__all__ = [
    "CHANGE_COLUMNS",
    "CHANGE_ROWID",
    "CHANGE_SNAPSHOT",
    "CHANGE_TYPE",
    "COMMIT_TIMESTAMP",
    "DELETE",
    "INSERT",
    "ROWID_AT",
    "SNAPSHOT_AT",
    "TYPE_AT",
    "UPDATE_POSTIMAGE",
    "UPDATE_PREIMAGE",
    "ChangePlan",
    "DeleteFileRef",
    "FileChangeTask",
    "SnapshotChanges",
    "change_column_at",
    "change_column_names",
    "change_counts",
    "changed_snapshots",
    "classify",
    "deleted_positions",
    "execute_change_task",
    "feed_schema",
    "finish_changes",
    "inlined_changes",
    "pair_changes",
    "plan_changes",
    "resolve_range",
    "table_changes",
]
