"""The change feed's initial load: the rows a table holds at one snapshot, as inserts, in windows of row ids.

A change-feed stream started without a start option first emits what the table holds at the snapshot that was the
newest when the query started (DuckDB's read of the table at that snapshot, each row an ``insert`` tagged with that
snapshot and its commit time), then the changes after it. A big table is not one giant micro-batch: the load is cut
into windows ``[low, high)`` of row ids, each about a bounded number of rows and files.

Windows are of row ids, not of files or positions: a flush or a merge between two micro-batches rewrites files but
keeps every row's id (and time travel to the snapshot reads the same rows), so a window planned again (a replayed
micro-batch, a restart from the checkpoint) emits exactly the rows it emitted before, and the windows together emit
every row once. Where a window begins and ends only decides how big it is and what it reads: each data file's row
groups' row ids come from its footer (``row_id_start + position``, or the min/max statistics of the internal row-id
column of a flush or merge output), so a window reads only the row groups that may hold its row ids. An encrypted
file (its footer needs the whole file) or a row group without statistics is taken to span the table's whole row-id
range: every window reads it and keeps its own rows.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pyspark_ducklake.catalog import reader
from pyspark_ducklake.catalog.db import Connection
from pyspark_ducklake.catalog.entries import DataFileEntry, TableEntry
from pyspark_ducklake.catalog.format_version import FormatVersion
from pyspark_ducklake.catalog.types import TableSchema
from pyspark_ducklake.io.parquet import row_group_ranges
from pyspark_ducklake.table.change_feed import INSERT, change_column_names
from pyspark_ducklake.table.scan import (
    ROWID,
    FileTask,
    empty_result,
    execute_file_task,
    internal_column,
    plan_scan,
    table_columns,
)

# The bounds of one initial-load micro-batch when the stream's options give none (Delta's initial snapshot takes
# 1000 files per micro-batch; rows bound it too here, as a file may hold millions).
DEFAULT_MAX_ROWS = 1_000_000
DEFAULT_MAX_FILES = 1000


# A row group of a data file: (index, its first row's position in the file, rows, lowest row id, highest + 1).
Group = tuple[int, int, int, int, int]
INTERNAL_ROW_ID = "_ducklake_internal_row_id"


@dataclass(frozen=True)
class InitialPiece:
    """A data file of the load, or its inlined rows (``task`` None), with the row ids it may hold: ``[low, high)``;
    ``groups``: its row groups' row ids, from the footer (None: not known, the file is read whole)."""

    task: FileTask | None
    low: int
    high: int
    rows: int
    groups: tuple[Group, ...] | None = None


@dataclass
class InitialLoad:
    """The table's rows at ``snapshot_id`` (in the columns of ``schema``) as pieces ordered by row id."""

    table: TableEntry
    schema: TableSchema
    snapshot_id: int
    commit_time: dt.datetime | None
    pieces: list[InitialPiece]
    inlined: pa.Table  # live inlined rows with ``rowid`` (small by design: fetched with the plan)

    @property
    def end(self) -> int:
        """One past the highest row id any piece may hold."""
        return max((p.high for p in self.pieces), default=0)


def plan_initial(
    conn: Connection,
    table: TableEntry,
    snapshot_id: int,
    data_path: str,
    *,
    fmt: FormatVersion,
    columns: Collection[str] | None = None,
) -> InitialLoad:
    """The initial load of ``table`` at ``snapshot_id`` (a catalog of format ``fmt``), reading only ``columns`` (names
    at that snapshot) if given."""
    scan = plan_scan(conn, table, snapshot_id, data_path, fmt=fmt, columns=columns)
    stats = reader.table_stats(conn, table.table_id)
    next_row_id = int(stats.next_row_id) if stats is not None and stats.next_row_id is not None else 0
    # Until the footers are read (with_row_groups), a file may hold any row id the table gave out.
    whole = max([next_row_id, *(f.file.record_count + (f.file.row_id_start or 0) for f in scan.files)])
    pieces = [InitialPiece(task, 0, whole, task.file.record_count) for task in scan.files]
    inlined = scan.inlined.data if scan.inlined is not None else empty_result(scan.schema, with_virtual=True)
    if inlined.num_rows:
        ids = internal_column(inlined, scan.schema, ROWID)
        pieces.append(InitialPiece(None, int(pc.min(ids).as_py()), int(pc.max(ids).as_py()) + 1, inlined.num_rows))
    pieces.sort(key=lambda p: (p.low, p.high))
    times = reader.commit_times(conn, snapshot_id, snapshot_id)
    return InitialLoad(table, scan.schema, snapshot_id, times.get(snapshot_id), pieces, inlined)


def with_row_groups(
    load: InitialLoad,
    *,
    storage_options: dict[str, Any] | None = None,
    cache: dict[int, tuple[Group, ...] | None] | None = None,
) -> InitialLoad:
    """The load with each data file's row ids per row group, from its footer: ``row_id_start + position`` in a file
    without the internal row-id column, that column's min/max statistics in a flush or merge output (a row group
    without them may hold any row id). An encrypted file keeps the whole range (its footer needs the whole file).
    ``cache`` keeps footers by data file id across calls (a data file never changes)."""
    cache = {} if cache is None else cache
    pieces = []
    for piece in load.pieces:
        f = piece.task.file if piece.task is not None else None
        if f is None or f.encryption_key is not None:
            pieces.append(piece)
            continue
        if f.data_file_id not in cache:
            cache[f.data_file_id] = _groups(f, piece.high, storage_options)
        groups = cache[f.data_file_id]
        if not groups:
            pieces.append(piece)
            continue
        low, high = min(g[3] for g in groups), max(g[4] for g in groups)
        pieces.append(InitialPiece(piece.task, low, high, piece.rows, groups))
    pieces.sort(key=lambda p: (p.low, p.high))
    return replace(load, pieces=pieces)


def _groups(f: DataFileEntry, whole: int, storage_options: dict[str, Any] | None) -> tuple[Group, ...] | None:
    has_ids, layout = row_group_ranges(
        f.path, INTERNAL_ROW_ID, storage_options=storage_options, recorded_row_groups=f.recorded_row_groups
    )
    out = []
    first = 0
    for index, (rows, low, high) in enumerate(layout):
        if not has_ids:  # row ids by position, as scan.row_versions gives them
            start = (f.row_id_start or 0) + first
            out.append((index, first, rows, start, start + rows))
        elif low is None or high is None:
            out.append((index, first, rows, 0, whole))
        else:
            out.append((index, first, rows, low, high + 1))
        first += rows
    return tuple(out)


def next_window(load: InitialLoad, low: int, *, max_rows: int, max_files: int) -> int | None:
    """Where the window that begins at row id ``low`` ends (exclusive): about ``max_rows`` rows (taken as spread
    evenly over each piece's row ids) from at most ``max_files`` pieces starting in it, at least one row id; None
    when the rest of the load fits in one window."""
    pieces = [p for p in load.pieces if p.high > low]
    if not pieces:
        return None
    starts = np.array([p.low for p in pieces], dtype=np.float64)
    # rows are estimated per row group where the footer gave them (a merged file's groups are narrow ranges)
    parts = [(g[3], g[4], g[2]) for p in pieces for g in (p.groups or [(0, 0, p.rows, p.low, p.high)])]
    part_starts = np.array([x[0] for x in parts], dtype=np.float64)
    lows = np.maximum(part_starts, low)
    highs = np.array([x[1] for x in parts], dtype=np.float64)
    density = np.array([x[2] for x in parts], dtype=np.float64) / np.maximum(highs - part_starts, 1.0)

    def fits(high: int) -> bool:
        # A piece counts against max_files in the window it starts in: one that began before ``low`` (the inlined
        # rows, a merged file) is read by every window it spans whatever the window's size.
        spans = np.clip(np.minimum(highs, high) - lows, 0.0, None)
        opened = ((starts >= low) & (starts < high)).sum()
        return bool((spans * density).sum() <= max_rows and opened <= max_files)

    end = load.end
    if fits(end):
        return None
    lo, hi = low + 1, end  # fits(lo) may be false (one row id over the bounds): a window is at least one row id
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid - 1
    return lo


def window_pieces(load: InitialLoad, low: int, high: int | None) -> list[InitialPiece]:
    """The pieces that may hold row ids in ``[low, high)`` (``high`` None: no end)."""

    def overlaps(a: int, b: int) -> bool:
        return b > low and (high is None or a < high)

    return [
        p
        for p in load.pieces
        if overlaps(p.low, p.high) and (p.groups is None or any(overlaps(g[3], g[4]) for g in p.groups))
    ]


def read_window(
    load: InitialLoad,
    piece: InitialPiece,
    low: int,
    high: int | None,
    *,
    storage_options: dict[str, Any] | None = None,
) -> pa.Table:
    """A piece's live rows at the load's snapshot with row ids in ``[low, high)``: the load's columns, then the
    change columns (``insert``, the snapshot, the row id, its commit time)."""
    if piece.task is None:
        rows = load.inlined
    else:
        groups = None
        if piece.groups is not None:
            wanted = [g for g in piece.groups if g[4] > low and (high is None or g[3] < high)]
            if len(wanted) < len(piece.groups):  # only the row groups that may hold the window's row ids
                groups = [(g[0], g[1], g[2]) for g in wanted]
        rows = execute_file_task(piece.task, load.schema, storage_options=storage_options, row_groups=groups)
    ids = internal_column(rows, load.schema, ROWID)
    keep = pc.greater_equal(ids, low)
    if high is not None:
        keep = pc.and_(keep, pc.less(ids, high))
    rows = rows.filter(keep)
    return as_inserts(rows, load)


def as_inserts(rows: pa.Table, load: InitialLoad) -> pa.Table:
    """Scanned rows (with ``rowid``) as the change feed's inserts at the load's snapshot."""
    kind, snapshot, rowid, committed = change_column_names(load.schema)
    n = rows.num_rows
    data = table_columns(rows, load.schema)
    when = pa.array([load.commit_time] * n, pa.timestamp("us", tz="UTC"))
    extra = {
        kind: pa.array(np.full(n, INSERT, dtype=object), pa.string()),
        snapshot: pa.array(np.full(n, load.snapshot_id, dtype=np.int64)),
        rowid: internal_column(rows, load.schema, ROWID).cast(pa.int64()),
        committed: when,
    }
    for name, values in extra.items():
        data = data.append_column(name, values)
    return data
