"""The change feed cut into parts that run apart (Spark tasks), each data file read by one part only.

:func:`~pyspark_ducklake.table.change_feed.table_changes` reads every changed row, then pairs updates and drops row
versions recorded twice (:func:`~pyspark_ducklake.table.change_feed.pair_changes`). Parts that run in different
processes cannot see each other's rows, so here those decisions come first, from the changes' keys alone
(snapshot, rowid, insert or delete), and every part then reads its own files, applies the decisions to its rows
and hands them on file by file.

The keys are cheap: deletes come from the delete files, and inserts from the internal ``rowid`` and
``snapshot_id`` columns of the data files that have them. Of files that have neither (most files of most tables)
only the footer is read: their inserts are a run of rowids ``row_id_start + position`` in one snapshot, which can
only meet another change where another key falls inside the run, and only those rows take part in the pairing.
"""

from __future__ import annotations

import functools
import heapq
import itertools
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pyspark_ducklake.exceptions import DataFileError, InvalidOptionError
from pyspark_ducklake.table.change_feed import (
    CHANGE_KINDS,
    INSERT,
    ROWID_AT,
    SNAPSHOT_AT,
    TYPE_AT,
    ChangePlan,
    FileChangeTask,
    change_column_at,
    commit_times_of,
    deleted_positions,
    execute_change_task,
    feed_schema,
    file_changes,
    in_threads,
    inlined_changes,
    pair_changes,
    read_internal_columns,
    versions,
)

_DROP = -1  # a code: the row is a second copy of a change another row already reports
_INSERT, _DELETE = 0, 1  # codes: indices into CHANGE_KINDS
_LOOKAHEAD = 2  # pieces a part reads ahead of the one it hands on


@dataclass(frozen=True)
class ChangePiece:
    """One data file's changes (``task``), or the plan's inlined ones, with the fate of some of its rows decided.

    Its changes, in the order :func:`~pyspark_ducklake.table.change_feed.execute_change_task` gives them, are
    ``inserts`` inserts then ``rows - inserts`` deletes; the rows at ``at`` become ``codes`` instead (an index into
    ``CHANGE_KINDS``, or :data:`_DROP`).
    """

    task: FileChangeTask | None
    rows: int
    inserts: int
    at: np.ndarray
    codes: np.ndarray
    read_rows: int  # data file rows it decodes: a cost estimate

    @property
    def out_rows(self) -> int:
        return self.rows - int(np.count_nonzero(self.codes == _DROP))


@dataclass(frozen=True)
class ChangePart:
    """Pieces of one feed that run together; enough to read them without the catalog."""

    plan: ChangePlan  # schema, range, commit times and inlined rows; ``files`` is left empty
    pieces: tuple[ChangePiece, ...]

    @property
    def rows(self) -> int:
        return sum(p.out_rows for p in self.pieces)


# --- keys ---------------------------------------------------------------------------------------------------------


@dataclass
class _Keys:
    """A piece's changes as keys: explicit ``(snapshot, rowid)`` per row, except that with ``run_snapshot`` set the
    inserts are the rowids ``run_lo, run_lo + 1, ...`` of that snapshot and only the deletes are listed."""

    rows: int
    inserts: int
    snaps: np.ndarray
    rowids: np.ndarray
    run_snapshot: int | None = None
    run_lo: int = 0
    read_rows: int = 0


def _file_keys(task: FileChangeTask, storage_options: dict[str, Any] | None) -> _Keys | None:
    positions, snapshots = deleted_positions(task, storage_options=storage_options)
    if not task.inserts and len(positions) == 0:
        return None
    f = task.file
    internal = read_internal_columns(f, storage_options)
    if internal.num_columns:
        rows = file_changes(task, versions(f, internal), positions, snapshots, 0)
        if rows is None:
            return _Keys(0, 0, np.empty(0, np.int64), np.empty(0, np.int64), read_rows=f.record_count)
        inserts = int(pc.sum(pc.equal(change_column_at(rows, TYPE_AT), INSERT)).as_py() or 0)
        snaps = change_column_at(rows, SNAPSHOT_AT).to_numpy()
        rowids = change_column_at(rows, ROWID_AT).to_numpy()
        return _Keys(rows.num_rows, inserts, snaps, rowids, read_rows=f.record_count)
    # Every row has rowid row_id_start + position and snapshot begin_snapshot, as in execute_file_task.
    n, lo, begin = f.record_count, f.row_id_start or 0, f.begin_snapshot
    began = task.inserts and task.start <= begin <= task.end and begin not in task.rewrite_snapshots
    inserts = n if began else 0
    inside = positions < n
    positions, snapshots = positions[inside], snapshots[inside]
    return _Keys(inserts + len(positions), inserts, snapshots, positions + lo, begin, lo, read_rows=n)


def _inlined_keys(plan: ChangePlan) -> _Keys | None:
    rows = inlined_changes(plan, columns=False)
    if rows is None:
        return None
    inserts = int(pc.sum(pc.equal(change_column_at(rows, TYPE_AT), INSERT)).as_py() or 0)
    snaps, rowids = change_column_at(rows, SNAPSHOT_AT).to_numpy(), change_column_at(rows, ROWID_AT).to_numpy()
    return _Keys(rows.num_rows, inserts, snaps, rowids)


# --- deciding the fate of rows that meet others -------------------------------------------------------------------


@dataclass
class _Entries:
    """Changes by their index in the concatenation of every piece's rows (``where``)."""

    where: list[np.ndarray] = field(default_factory=list)
    snaps: list[np.ndarray] = field(default_factory=list)
    rowids: list[np.ndarray] = field(default_factory=list)
    inserts: list[np.ndarray] = field(default_factory=list)

    def add(self, where: np.ndarray, snaps: np.ndarray, rowids: np.ndarray, insert: np.ndarray | bool) -> None:
        self.where.append(where.astype(np.int64))
        self.snaps.append(snaps.astype(np.int64))
        self.rowids.append(rowids.astype(np.int64))
        self.inserts.append(np.broadcast_to(np.int64(insert), len(where)) if isinstance(insert, bool) else insert)

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        def joined(parts: list[np.ndarray]) -> np.ndarray:
            return np.concatenate(parts).astype(np.int64, copy=False) if parts else np.empty(0, np.int64)

        return joined(self.where), joined(self.snaps), joined(self.rowids), joined(self.inserts)


def _decide(keys: list[_Keys | None]) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Per piece, the rows whose fate differs from their kind, and that fate: the same as
    :func:`~pyspark_ducklake.table.change_feed.finish_changes` decides over the concatenation of all pieces' rows."""
    offsets = np.cumsum([0] + [k.rows if k is not None else 0 for k in keys])
    listed = _Entries()
    runs: list[tuple[int, int, int, int]] = []  # (snapshot, first rowid, rows, where the run starts)
    for k, base in zip(keys, offsets[:-1], strict=True):
        if k is None or k.rows == 0:
            continue
        base = int(base)
        if k.run_snapshot is None:
            insert = np.zeros(k.rows, dtype=np.int64)
            insert[: k.inserts] = 1
            listed.add(np.arange(base, base + k.rows), k.snaps, k.rowids, insert)
            continue
        if k.inserts:
            runs.append((k.run_snapshot, k.run_lo, k.inserts, base))
        if k.rows > k.inserts:
            listed.add(np.arange(base + k.inserts, base + k.rows), k.snaps, k.rowids, False)
    runs = _list_overlapping_runs(runs, listed)
    where, snaps, rowids, is_insert = listed.arrays()
    where, snaps, rowids, is_insert = _with_run_rows_met(runs, where, snaps, rowids, is_insert)
    # Ties keep the order of the concatenation, as finish_changes does (only rows met in runs come out of order).
    if len(where) > 1 and not bool(np.all(where[1:] > where[:-1])):
        first = np.argsort(where, kind="stable")
        where, snaps, rowids, is_insert = where[first], snaps[first], rowids[first], is_insert[first]
    order, codes = pair_changes(snaps, rowids, is_insert)
    fate = np.full(len(where), _DROP, dtype=np.int8)
    fate[order] = codes
    own = np.where(is_insert == 1, _INSERT, _DELETE).astype(np.int8)
    differs = fate != own
    where, fate = where[differs], fate[differs]
    piece = np.searchsorted(offsets, where, side="right") - 1
    at, codes_out = [], []
    for i in range(len(keys)):
        lo, hi = np.searchsorted(piece, [i, i + 1])
        positions = where[lo:hi] - offsets[i]
        at.append(positions.astype(np.int32) if offsets[i + 1] - offsets[i] < 2**31 else positions)  # pickled small
        codes_out.append(fate[lo:hi])
    return at, codes_out


def _list_overlapping_runs(runs: list[tuple[int, int, int, int]], listed: _Entries) -> list[tuple[int, int, int, int]]:
    """The runs that share no rowid with another run of their snapshot; the rows of the others are listed."""
    runs = sorted(runs)
    clash: set[int] = set()
    for (s1, lo1, n1, _), (s2, lo2, _, _) in itertools.pairwise(runs):
        if s1 == s2 and lo2 < lo1 + n1:
            clash.add(s1)
    for s, lo, n, base in runs:
        if s in clash:
            listed.add(np.arange(base, base + n), np.full(n, s), np.arange(lo, lo + n), True)
    return [r for r in runs if r[0] not in clash]


def _with_run_rows_met(
    runs: list[tuple[int, int, int, int]],
    where: np.ndarray,
    snaps: np.ndarray,
    rowids: np.ndarray,
    is_insert: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The listed changes plus every run row that has a listed change's key (the only run rows that can pair)."""
    if not runs or not len(where):
        return where, snaps, rowids, is_insert
    run_snaps = np.array([r[0] for r in runs], dtype=np.int64)
    run_lo = np.array([r[1] for r in runs], dtype=np.int64)
    run_n = np.array([r[2] for r in runs], dtype=np.int64)
    run_base = np.array([r[3] for r in runs], dtype=np.int64)
    # Only keys of a snapshot that has runs can meet one (most deletes are in snapshots that insert nothing).
    candidates = np.flatnonzero(np.isin(snaps, np.unique(run_snaps)))
    if not len(candidates):
        return where, snaps, rowids, is_insert
    c_snaps, c_rowids = snaps[candidates], rowids[candidates]
    # Runs are sorted by (snapshot, first rowid) and disjoint within a snapshot: the last run starting at or
    # before a key is the only one that can hold it.
    i = np.maximum(_search_pairs(run_snaps, run_lo, c_snaps, c_rowids) - 1, 0)
    hit = (run_snaps[i] == c_snaps) & (run_lo[i] <= c_rowids) & (c_rowids < run_lo[i] + run_n[i])
    if not hit.any():
        return where, snaps, rowids, is_insert
    runs_hit, met_snaps, met_rowids = i[hit], c_snaps[hit], c_rowids[hit]
    met, first = np.unique(run_base[runs_hit] + met_rowids - run_lo[runs_hit], return_index=True)
    return (
        np.concatenate([where, met]),
        np.concatenate([snaps, met_snaps[first]]),
        np.concatenate([rowids, met_rowids[first]]),
        np.concatenate([is_insert, np.ones(len(met), dtype=np.int64)]),
    )


def _search_pairs(keys_a: np.ndarray, keys_b: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``searchsorted(..., side="right")`` of the pairs ``(a, b)`` in the sorted pairs ``(keys_a, keys_b)``."""
    lo_b = min(int(keys_b.min()), int(b.min()))
    b_bits = (max(int(keys_b.max()), int(b.max())) - lo_b).bit_length() + 1
    lo_a = min(int(keys_a.min()), int(a.min()))
    if (max(int(keys_a.max()), int(a.max())) - lo_a).bit_length() + b_bits <= 62:
        packed = ((keys_a - lo_a) << b_bits) | (keys_b - lo_b)
        return np.searchsorted(packed, ((a - lo_a) << b_bits) | (b - lo_b), "right")
    # Keys too wide for one int64: by snapshot, then by rowid within it.
    out = np.empty(len(a), dtype=np.int64)
    for value in np.unique(a):
        lo, hi = int(np.searchsorted(keys_a, value, "left")), int(np.searchsorted(keys_a, value, "right"))
        mine = a == value
        out[mine] = lo + np.searchsorted(keys_b[lo:hi], b[mine], "right")
    return out


# --- planning and running the parts -------------------------------------------------------------------------------


def split_plan(
    plan: ChangePlan, *, target_rows: int, storage_options: dict[str, Any] | None = None
) -> list[ChangePart]:
    """The plan's feed as parts of about ``target_rows`` changes each (none for an empty feed), balanced by the work
    of their pieces; together their rows are :func:`~pyspark_ducklake.table.change_feed.table_changes`' feed.

    Raises:
        InvalidOptionError: ``target_rows`` < 1.
        DataFileError: a data or delete file cannot be read.
    """
    if target_rows < 1:
        raise InvalidOptionError(f"target_rows must be >= 1, got {target_rows}")
    keys = in_threads([functools.partial(_file_keys, t, storage_options) for t in plan.files])
    keys.append(_inlined_keys(plan))
    at, codes = _decide(keys)
    tasks: list[FileChangeTask | None] = [*plan.files, None]
    pieces = [
        ChangePiece(task, k.rows, k.inserts, a, c, k.read_rows)
        for task, k, a, c in zip(tasks, keys, at, codes, strict=True)
        if k is not None and k.rows
    ]
    n = max(1, min(len(pieces), round(sum(p.out_rows for p in pieces) / target_rows)))
    bins: list[tuple[float, int, list[ChangePiece]]] = [(0.0, i, []) for i in range(n)]
    for piece in sorted(pieces, key=_cost, reverse=True):  # largest first, each to the lightest part
        load, i, members = heapq.heappop(bins)
        members.append(piece)
        heapq.heappush(bins, (load + _cost(piece), i, members))
    parts = []
    for _, _, members in sorted(bins, key=lambda b: b[1]):
        if members:
            inlined = plan.inlined if any(p.task is None for p in members) else None  # only where it is read
            shared = ChangePlan(plan.table, plan.schema, plan.start, plan.end, [], inlined, plan.commit_times)
            parts.append(ChangePart(shared, tuple(members)))
    return parts


def _cost(piece: ChangePiece) -> float:
    """Work of a piece in row units: its rows leaving the process, plus the data file rows it decodes."""
    return piece.out_rows + 0.5 * piece.read_rows


def execute_piece(
    piece: ChangePiece, plan: ChangePlan, *, storage_options: dict[str, Any] | None = None
) -> pa.Table | None:
    """The piece's rows of the feed, in :func:`~pyspark_ducklake.table.change_feed.feed_schema` of the plan.

    Raises:
        DataFileError: a file cannot be read, or holds other rows than it did when the part was planned.
    """
    if piece.task is not None:
        rows = execute_change_task(piece.task, plan.schema, storage_options=storage_options)
        what = piece.task.file.path
    else:
        rows = inlined_changes(plan)
        what = "the inlined rows"
    got = 0 if rows is None else rows.num_rows
    if got != piece.rows:
        raise DataFileError(
            f"{what} gave {got} changes in snapshots {plan.start}..{plan.end}, planned {piece.rows}: the file or "
            "catalog changed while the change feed was read; read it again"
        )
    if rows is None or piece.out_rows == 0:
        return None
    arrays = [rows.column(i) for i in range(rows.num_columns)]
    if len(piece.at):  # else every row is what execute_change_task tagged it
        fates = np.full(piece.rows, _DELETE, dtype=np.int8)
        fates[: piece.inserts] = _INSERT
        fates[piece.at] = piece.codes
        keep = fates != _DROP
        if not keep.all():
            rows, fates = rows.filter(pa.array(keep)), fates[keep]
            arrays = [rows.column(i) for i in range(rows.num_columns)]
        arrays[rows.num_columns + TYPE_AT] = pa.chunked_array([CHANGE_KINDS.take(pa.array(fates))])
    snaps = change_column_at(rows, SNAPSHOT_AT).to_numpy()
    arrays.append(pa.chunked_array([commit_times_of(snaps, plan.commit_times)]))
    target = feed_schema(plan.schema)
    out = pa.Table.from_arrays(arrays, names=target.names)
    return out if out.schema == target else out.cast(target)


def execute_part(
    part: ChangePart, *, storage_options: dict[str, Any] | None = None, threads: int = _LOOKAHEAD
) -> Iterator[pa.Table]:
    """The part's rows, piece by piece, reading up to ``threads`` pieces ahead of the one handed on."""
    pieces = list(part.pieces)
    if threads <= 1 or len(pieces) <= 1:
        for piece in pieces:
            out = execute_piece(piece, part.plan, storage_options=storage_options)
            if out is not None:
                yield out
        return
    with ThreadPoolExecutor(threads, thread_name_prefix="ducklake-feed") as pool:
        pending: list[Future[pa.Table | None]] = []
        upcoming = iter(pieces)
        for piece in upcoming:
            pending.append(pool.submit(execute_piece, piece, part.plan, storage_options=storage_options))
            if len(pending) >= threads:
                break
        while pending:
            out = pending.pop(0).result()
            nxt = next(upcoming, None)
            if nxt is not None:
                pending.append(pool.submit(execute_piece, nxt, part.plan, storage_options=storage_options))
            if out is not None:
                yield out


__all__ = ["ChangePart", "ChangePiece", "execute_part", "execute_piece", "split_plan"]
