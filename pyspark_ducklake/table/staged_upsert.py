"""Large upsert micro-batches of ``writeStream.format("ducklake")``: the rows stay on the executors, and the driver
holds a bounded part of the keys at a time.

PySpark's Python stream writer runs one stage: ``write()`` per task on the executors, then ``commit()`` on the
driver, with no SparkSession there (no shuffle, no second job). So a task whose rows are more than the inlining
limit pairs them with the table itself (:class:`KeyScan`: the table as the batch's writer was planned), writes the
replaced rows with the row ids they keep and the new rows as plain files, and writes two kinds of scratch files
(``table/scratch.py``): its keys (with the ``orderBy`` values, delete flags and the row id each kept) sorted by
their hash bucket (``table/key_buckets.py``), and the positions it ends, sorted by data file. Its commit message
holds file names and a histogram of its keys' buckets (:class:`StagedTask`).

The driver (:func:`commit_staged`) works a bucket range at a time, at most :data:`RANGE_KEYS` keys:

- a key that several tasks hold keeps the last by ``orderBy`` (ties: the later task), as ``ducklake_sink`` and the
  small-batch path keep it; without ``orderBy`` it is a :class:`DuplicateKeyError`, with nothing left written.
  The losing rows are recorded per task (scratch again) and the files holding them rewritten, one file at a time;
- the deletes are registered one data file at a time, each reading its positions from the tasks' scratch files;
- one snapshot is committed with the batch's (app_id, batch_id). When another writer changed the table after the
  tasks' snapshot, the driver pairs the keys again at the newest snapshot, range by range, and rewrites the files
  whose rows' row ids changed, so no key is doubled and no update is lost.

Tasks with at most the inlining limit of rows hand their rows back in their messages as before; in a batch that
also has staged tasks the driver stages those few rows itself, through the same :func:`stage_task`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pyspark_ducklake.catalog.entries import DataFileEntry
from pyspark_ducklake.catalog.transaction import Plan
from pyspark_ducklake.exceptions import CommitStateUnknownError, DuplicateKeyError, NullKeyError
from pyspark_ducklake.io.fileio import delete_files
from pyspark_ducklake.table import upsert as U
from pyspark_ducklake.table.data_files import PendingFile, conform_to_table, unique_positions
from pyspark_ducklake.table.delete import DeletePlan, FileDeletes
from pyspark_ducklake.table.key_buckets import BUCKETS, bucket_ranges, in_range, key_buckets
from pyspark_ducklake.table.key_scan import KeyScan
from pyspark_ducklake.table.microbatch import BatchMetrics, BatchPlan, TablePlan, TaskOutput, UpsertSpec, from_ipc
from pyspark_ducklake.table.microbatch_upsert import DELETE_FLAG, UpsertCommitter, write_rows
from pyspark_ducklake.table.scan import ROWID, FileTask, execute_file_task
from pyspark_ducklake.table.scratch import Scratch, ScratchBuffer, ScratchPlace

RANGE_KEYS = 262_144  # keys the driver resolves at once
ROW_ID = "__ducklake_kept_row_id"  # the row id a kept row carries (-1: a new row or a delete)
NEW_ID = "__ducklake_new_row_id"  # in a rewrite's fixes: the row id a row must carry (-1 new, DROP: removed)
DROP = -2
_BUCKET = "__ducklake_bucket"
_TASK = "__ducklake_task"
_INDEX = "__ducklake_index"
_KEY = "__ducklake_key{}"  # the report's key columns, by place: a key may be named like any other column
_ORDER = "__ducklake_order{}"
_FILE = "__ducklake_file"  # in the ended rows: the data file id (-1: an inlined row, its row id in _POS)
_POS = "__ducklake_pos"


def scratch_place(plan: BatchPlan) -> ScratchPlace:
    return ScratchPlace(plan.table_dir, plan.job, plan.storage_options, plan.encrypted)


@dataclass(frozen=True)
class StagedTask:
    """What one task of a large upsert batch wrote (pickled to the driver's commit)."""

    files: tuple[PendingFile, ...]
    with_ids: tuple[bool, ...]  # per file: it carries the row ids of replaced rows
    report: tuple[Scratch, ...]  # _KEY<i>, _ORDER<i> (orderBy), DELETE_FLAG, ROW_ID, _BUCKET; sorted by _BUCKET
    buckets: bytes  # int32 per bucket: how many of the task's keys fall in it
    ended: tuple[Scratch, ...]  # _FILE, _POS: the rows its keys end, sorted by _FILE
    ended_files: tuple[int, ...]  # the data files it ends rows of
    rows: int  # rows read (before deduplication)
    null_keys: int = 0  # rows with a NULL key: the commit refuses the batch
    duplicate: str | None = None  # without orderBy, a key the task holds twice: the commit refuses the batch

    @property
    def scratch(self) -> list[Scratch]:
        return [*self.report, *self.ended]


def stage_task(
    plan: BatchPlan, spec: UpsertSpec, keys: KeyScan | None, rows: pa.Table, stored: Sequence[str]
) -> StagedTask:
    """Pair a task's rows (one per key when ``orderBy`` is set: the task kept the last) with the table and write
    them: the replaced rows with the row ids they keep, the new rows plainly, ``target_file_rows`` per file; then
    its scratch files. Rows with a NULL key or (without ``orderBy``) a key twice are only counted.

    Raises:
        SchemaMismatchError: a value that does not fit its column (nothing is left written).
    """
    flags = np.zeros(rows.num_rows, dtype=bool)
    if DELETE_FLAG in rows.column_names:
        flags = np.asarray(pc.fill_null(rows.column(DELETE_FLAG), False).to_numpy(zero_copy_only=False), dtype=bool)
    data = conform_to_table(rows.select([c for c in stored if c in rows.column_names]), plan.schema, plan.table_name)
    none = np.zeros(BUCKETS, dtype=np.int32).tobytes()
    nulls = sum(data.column(k).null_count for k in spec.keys)
    if nulls:
        return StagedTask((), (), (), none, (), (), rows.num_rows, null_keys=nulls)
    try:
        batch = U.prepare_rows(data, flags, None, spec.keys)
    except DuplicateKeyError as e:  # counted, never written: the commit refuses the whole batch
        return StagedTask((), (), (), none, (), (), rows.num_rows, duplicate=str(e))
    indexed = batch.rows.append_column(_INDEX, pa.array(np.arange(data.num_rows, dtype=np.int64)))
    row_ids = np.full(data.num_rows, -1, dtype=np.int64)
    if keys is None:  # the batch creates the table: every kept row is new, nothing ends
        replaced_rows, replaced_ids = indexed.slice(0, 0), tuple[int, ...]()
        inserted_rows = indexed.take(pa.array(np.flatnonzero(~flags), pa.int64()))
        ends, ended_ids = _ended([], ())
    else:
        changes = U.plan_upsert(
            keys.for_rows(batch.rows), U.UpsertRows(indexed, flags, spec.keys), plan.storage_options
        )
        replaced_rows, replaced_ids, inserted_rows = changes.replaced, changes.replaced_row_ids, changes.inserted
        ends, ended_ids = _ended(changes.deletes.files, changes.deletes.inlined_row_ids)
        if replaced_rows.num_rows:
            row_ids[replaced_rows.column(_INDEX).to_numpy()] = np.asarray(replaced_ids, dtype=np.int64)
    place = scratch_place(plan)
    written: list[PendingFile] = []
    report_files: list[Scratch] = []
    ended_files: list[Scratch] = []
    try:
        replaced = write_rows(plan, replaced_rows.drop_columns([_INDEX]), replaced_ids)
        written += replaced
        written += write_rows(plan, inserted_rows.drop_columns([_INDEX]), None)
        report = _report(data, rows, flags, row_ids, spec)
        buckets = report.column(_BUCKET).to_numpy()
        report_files += place.write(report, _BUCKET)
        ended_files += place.write(ends, _FILE)
    except BaseException:
        delete_files([f.written.path for f in written], plan.storage_options)
        place.remove(report_files + ended_files)
        raise
    return StagedTask(
        tuple(written),
        tuple(i < len(replaced) for i in range(len(written))),
        tuple(report_files),
        np.bincount(buckets, minlength=BUCKETS).astype(np.int32).tobytes(),
        tuple(ended_files),
        ended_ids,
        rows.num_rows,
    )


def key_names(spec: UpsertSpec) -> list[str]:
    return [_KEY.format(i) for i in range(len(spec.keys))]


def _report(data: pa.Table, rows: pa.Table, flags: np.ndarray, row_ids: np.ndarray, spec: UpsertSpec) -> pa.Table:
    """The task's keys as the commit resolves them, sorted by bucket."""
    names = key_names(spec)
    columns = [data.column(k) for k in spec.keys]
    for i, c in enumerate(spec.order_by):
        names.append(_ORDER.format(i))
        columns.append(rows.column(c))
    report = pa.Table.from_arrays(columns, names=names)
    report = report.append_column(DELETE_FLAG, pa.array(flags)).append_column(ROW_ID, pa.array(row_ids))
    buckets = key_buckets(U.key_table(data, spec.keys))
    report = report.append_column(_BUCKET, pa.array(buckets))
    return report.take(pa.array(np.argsort(buckets, kind="stable")))


def _ended(files: Sequence[FileDeletes], inlined_row_ids: Sequence[int]) -> tuple[pa.Table, tuple[int, ...]]:
    """The rows a delete plan ends, sorted by data file (inlined rows: -1 and their row id), and the data files."""
    file_ids = [np.full(len(f.positions), f.file.data_file_id, dtype=np.int64) for f in files]
    positions = [np.asarray(f.positions, dtype=np.int64) for f in files]
    inlined = np.asarray(inlined_row_ids, dtype=np.int64)
    table = pa.table(
        {
            _FILE: np.concatenate([np.full(len(inlined), -1, dtype=np.int64), *file_ids]),
            _POS: np.concatenate([inlined, *positions]),
        }
    )
    return table, tuple(f.file.data_file_id for f in files if len(f.positions))


def read_staged(f: PendingFile, plan: BatchPlan) -> tuple[pa.Table, np.ndarray]:
    """A file a task wrote and the commit has not registered, in the table's Arrow types, and its rows' row ids
    (those it carries; position-based for a file without them)."""
    entry = DataFileEntry(
        -1,
        f.written.path,
        f.written.record_count,
        f.written.file_size_bytes,
        f.written.footer_size,
        0,
        0,
        None,
        None,
        None,
        encryption_key=f.written.encryption_key,
    )
    rows = execute_file_task(FileTask(entry, 0), plan.schema, storage_options=plan.storage_options)
    return rows.select(plan.schema.names()), rows.column(ROWID).to_numpy()


# --- the driver ---------------------------------------------------------------------------------------------------


class _FileEnds:
    """One data file's ended positions, read from scratch files when the commit registers its deletes (duck-types
    :class:`FileDeletes`, so only one file's positions are held at a time)."""

    def __init__(self, file: DataFileEntry, sources: Sequence[Scratch], place: ScratchPlace) -> None:
        self.file = file
        self._sources = [s for s in sources if s.lo <= file.data_file_id <= s.hi]
        self._place = place

    @property
    def positions(self) -> np.ndarray:
        parts = []
        for s in self._sources:
            ended = self._place.read(s)
            mine = ended.filter(pc.equal(ended.column(_FILE), self.file.data_file_id))
            parts.append(mine.column(_POS).to_numpy())
        return unique_positions(np.concatenate(parts)) if parts else np.zeros(0, dtype=np.int64)


@dataclass
class _Task:
    """The driver's view of one task: its current files and the fixes its files still need."""

    staged: StagedTask
    files: list[PendingFile]
    with_ids: list[bool]
    fixes: ScratchBuffer


@dataclass
class _Batch:
    """The batch as the driver holds it: every task's files and scratch files, never all its keys."""

    plan: BatchPlan
    spec: UpsertSpec
    tasks: list[_Task]
    place: ScratchPlace
    ranges: list[tuple[int, int]]
    paths: list[str] = field(default_factory=list)  # the data files written and not yet removed
    scratch: list[Scratch] = field(default_factory=list)  # every scratch file, removed at the end
    replans: int = 0
    losers_dropped: bool = False

    def current_files(self) -> list[PendingFile]:
        return [f for t in self.tasks for f in t.files]

    def reports(self, first: int, last: int) -> pa.Table | None:
        """Every task's keys in buckets ``first .. last``, with their task index."""
        parts = []
        for i, task in enumerate(self.tasks):
            for s in task.staged.report:
                if s.hi < first or s.lo > last:
                    continue
                rows = self.place.read(s)
                rows = rows.filter(in_range(rows.column(_BUCKET), first, last))
                parts.append(rows.append_column(_TASK, pa.array(np.full(rows.num_rows, i, dtype=np.int64))))
        parts = [p for p in parts if p.num_rows]
        return pa.concat_tables(parts) if parts else None

    def resolve(self, first: int, last: int) -> tuple[pa.Table, np.ndarray, pa.Table] | None:
        """One bucket range's keys: the winners (keys, _TASK, ROW_ID), their delete flags, and the losing rows the
        tasks wrote (keys, _TASK).

        Raises:
            DuplicateKeyError: a key twice without ``orderBy``.
        """
        every = self.reports(first, last)
        if every is None:
            return None
        n = every.num_rows
        every = every.append_column(_INDEX, pa.array(np.arange(n, dtype=np.int64)))
        flags = np.asarray(every.column(DELETE_FLAG).to_numpy(zero_copy_only=False), dtype=bool)
        keys = key_names(self.spec)
        order = every.select([_ORDER.format(i) for i in range(len(self.spec.order_by))]) if self.spec.order_by else None
        # the keys by their own names for prepare_rows' errors (a key named like _TASK would clash: none is)
        rows = every.select([*keys, _TASK, ROW_ID, _INDEX]).rename_columns([*self.spec.keys, _TASK, ROW_ID, _INDEX])
        batch = U.prepare_rows(rows, flags, order, self.spec.keys)
        won = np.zeros(n, dtype=bool)
        won[batch.rows.column(_INDEX).to_numpy()] = True
        losers = every.filter(pa.array(~flags & ~won)).select([*keys, _TASK])
        winners = batch.rows.drop_columns([_INDEX]).rename_columns([*keys, _TASK, ROW_ID])
        return winners, batch.deletes, losers

    def add_fixes(self, rows: pa.Table, new_ids: np.ndarray) -> None:
        """Record that the rows (keys, _TASK) must carry ``new_ids`` (DROP: be removed) in their task's files."""
        if rows.num_rows == 0:
            return
        task_of = rows.column(_TASK).to_numpy()
        for t in np.unique(task_of):
            mine = np.flatnonzero(task_of == t)
            fixes = rows.take(pa.array(mine, pa.int64())).select(key_names(self.spec))
            self.tasks[int(t)].fixes.add(fixes.append_column(NEW_ID, pa.array(new_ids[mine], pa.int64())))

    def rewrite(self) -> None:
        """Rewrite the files of every task with fixes, one file and one scratch file of fixes in memory at a time;
        a file none of whose rows is fixed stays as it is."""
        names = [f"k{i}" for i in range(len(self.spec.keys))]
        for task in self.tasks:
            fixes = list(task.fixes.flush())
            task.fixes.files = []
            self.scratch += fixes
            if not fixes:
                continue
            files: list[PendingFile] = []
            with_ids: list[bool] = []
            for f, has_ids in zip(task.files, task.with_ids, strict=True):
                rows, current = read_staged(f, self.plan)
                at = U.key_table(rows, self.spec.keys)
                at = at.append_column("__i", pa.array(np.arange(rows.num_rows, dtype=np.int64)))
                new = np.full(rows.num_rows, np.iinfo(np.int64).min, dtype=np.int64)
                for s in fixes:
                    fix = self.place.read(s)
                    wanted = U.key_table(fix, key_names(self.spec))
                    wanted = wanted.cast(at.select(names).schema).append_column(NEW_ID, fix.column(NEW_ID))
                    joined = at.join(wanted, keys=names, join_type="inner", use_threads=False)
                    new[joined.column("__i").to_numpy()] = joined.column(NEW_ID).to_numpy()
                touched = new != np.iinfo(np.int64).min
                if not touched.any():
                    files.append(f)
                    with_ids.append(has_ids)
                    continue
                ids = np.where(touched, new, current if has_ids else -1)
                replaced, inserted = np.flatnonzero(ids >= 0), np.flatnonzero(ids == -1)
                out = write_rows(self.plan, rows.take(pa.array(replaced, pa.int64())), ids[replaced])
                self.paths += [p.written.path for p in out]
                files += out
                with_ids += [True] * len(out)
                plain = write_rows(self.plan, rows.take(pa.array(inserted, pa.int64())), None)
                self.paths += [p.written.path for p in plain]
                files += plain
                with_ids += [False] * len(plain)
                self.paths.remove(f.written.path)
                delete_files([f.written.path], self.plan.storage_options)
            task.files, task.with_ids = files, with_ids


def commit_staged(
    upserts: UpsertCommitter,
    plan: BatchPlan,
    tplan: TablePlan,
    keys: KeyScan | None,
    outputs: Sequence[StagedTask | TaskOutput],
    stored: Sequence[str],
    *,
    app_id: str,
    batch_id: int,
    started: float,
) -> BatchMetrics:
    """Driver side: resolve the tasks' keys range by range and commit their files and ended rows as one snapshot.

    Raises:
        NullKeyError, DuplicateKeyError: nothing is written (the tasks' files are removed).
    """
    staged: list[StagedTask] = []
    place = scratch_place(plan)
    try:
        for o in outputs:
            if isinstance(o, StagedTask):
                staged.append(o)
            elif o.ipc:  # a task of few rows: staged here, as a task would
                staged.append(stage_task(plan, upserts.spec, keys, from_ipc(o.ipc), stored))
    except BaseException:
        _remove(place, staged, [f.written.path for t in staged for f in t.files])
        raise
    counts = np.zeros(BUCKETS, dtype=np.int64)
    for t in staged:
        counts += np.frombuffer(t.buckets, dtype=np.int32)
    tasks = [_Task(t, list(t.files), list(t.with_ids), ScratchBuffer(place)) for t in staged]
    batch = _Batch(plan, upserts.spec, tasks, place, bucket_ranges(counts, RANGE_KEYS))
    batch.paths = [f.written.path for t in staged for f in t.files]
    rows = sum(t.rows for t in staged)
    try:
        _refuse_bad_keys(upserts.spec, staged)
        return _commit(upserts, tplan, keys, batch, rows, app_id=app_id, batch_id=batch_id, started=started)
    except CommitStateUnknownError:
        raise  # the snapshot may hold the files: they stay (the replay check finds out)
    except BaseException:
        delete_files(batch.paths, plan.storage_options)
        raise
    finally:
        _remove(place, staged, [], batch.scratch + [s for t in tasks for s in t.fixes.files])


def _remove(place: ScratchPlace, staged: Sequence[StagedTask], paths: list[str], more: Sequence[Scratch] = ()) -> None:
    delete_files(paths, place.storage_options)
    place.remove([s for t in staged for s in t.scratch] + list(more))


def _refuse_bad_keys(spec: UpsertSpec, staged: Sequence[StagedTask]) -> None:
    """Raises: NullKeyError, DuplicateKeyError: a task found a NULL key, or a key twice without ``orderBy``."""
    nulls = sum(t.null_keys for t in staged)
    if nulls:
        raise NullKeyError(
            f"a key column ({', '.join(spec.keys)}) holds NULL in {nulls} of the upsert's rows: fill or drop those "
            "rows; nothing was written"
        )
    duplicate = next((t.duplicate for t in staged if t.duplicate), None)
    if duplicate:
        raise DuplicateKeyError(duplicate)


def _commit(
    upserts: UpsertCommitter,
    tplan: TablePlan,
    keys: KeyScan | None,
    batch: _Batch,
    rows: int,
    *,
    app_id: str,
    batch_id: int,
    started: float,
) -> BatchMetrics:
    spec, plan = upserts.spec, batch.plan
    if tplan.entry is None:  # the batch creates the table: every kept row is new, losers are removed
        _drop_losers(batch)
        batch.rewrite()
        outputs = [TaskOutput(f.written.record_count, None, (f,)) for f in batch.current_files()]
        return upserts.committer.commit(plan, tplan, outputs, app_id=app_id, batch_id=batch_id, started=started)
    entry = tplan.entry
    state: dict[str, Any] = {"inline": False}

    def plan_with(snapshot: int, deletes: Sequence[FileDeletes], inlined: tuple[int, ...]) -> Plan | None:
        files = batch.current_files()
        if not deletes and not inlined and not files:
            return None
        state["files"] = len(files)
        changes = U.RowChanges(DeletePlan(entry, snapshot, tuple(deletes), inlined), pa.table({}), (), pa.table({}))
        apply = upserts.apply_change(plan, tplan, changes, False, ([], files), app_id, batch_id, None, state)
        return Plan(apply, snapshot)

    def first() -> Plan | None:
        if keys is None or keys.scan.table.table_id != entry.table_id:
            return replan()  # the table the tasks paired with is not this one (created or replaced since)
        _drop_losers(batch)
        batch.rewrite()
        sources = [s for t in batch.tasks for s in t.staged.ended]
        by_id = {t.file.data_file_id: t.file for t in keys.scan.files}
        ended = sorted({i for t in batch.tasks for i in t.staged.ended_files})
        deletes = [cast(FileDeletes, _FileEnds(by_id[i], sources, batch.place)) for i in ended]
        inlined = _inlined(batch.place, sources)
        return plan_with(keys.scan.snapshot_id, deletes, inlined)

    def replan() -> Plan | None:
        """Another writer changed the table since the tasks paired their keys: pair them again here, at the newest
        snapshot, a bucket range at a time, and rewrite the files whose rows' row ids are no longer right."""
        head, current = upserts.table_at_head(entry, plan.table_name)
        batch.replans += 1
        everything = batch.replans > 1  # files may carry an earlier re-plan's row ids: set every row's
        ended = ScratchBuffer(batch.place, _FILE)
        by_id: dict[int, DataFileEntry] = {}
        inlined: list[int] = []
        for first_bucket, last_bucket in batch.ranges:
            resolved = batch.resolve(first_bucket, last_bucket)
            if resolved is None:
                continue
            winners, deletes, losers = resolved
            if not batch.losers_dropped:  # the tasks' pairing was never used: their losing rows go here
                batch.add_fixes(losers, np.full(losers.num_rows, DROP, dtype=np.int64))
            indexed = winners.select(key_names(spec)).rename_columns(list(spec.keys))
            indexed = indexed.append_column(_INDEX, pa.array(np.arange(winners.num_rows, dtype=np.int64)))
            changes = upserts.pair(current, head, U.UpsertRows(indexed, deletes, spec.keys))
            right = np.full(winners.num_rows, -1, dtype=np.int64)
            right[changes.replaced.column(_INDEX).to_numpy()] = np.asarray(changes.replaced_row_ids, dtype=np.int64)
            wrong = ~deletes & ((winners.column(ROW_ID).to_numpy() != right) | everything)
            batch.add_fixes(winners.filter(pa.array(wrong)), right[wrong])
            part, _ = _ended(changes.deletes.files, changes.deletes.inlined_row_ids)
            ended.add(part.filter(pc.greater_equal(part.column(_FILE), 0)))
            inlined += changes.deletes.inlined_row_ids
            by_id |= {f.file.data_file_id: f.file for f in changes.deletes.files}
        batch.losers_dropped = True
        batch.rewrite()
        sources = ended.flush()
        batch.scratch += sources
        ends = [cast(FileDeletes, _FileEnds(by_id[i], sources, batch.place)) for i in sorted(by_id)]
        return plan_with(head, ends, tuple(sorted(set(inlined))))

    initial = first()
    if initial is None:
        return upserts.record_unchanged(tplan, app_id, batch_id, rows, started)
    return upserts.commit_planned(
        initial, replan, [batch.paths], app_id, batch_id, rows, started, state, entry.table_id
    )


def _drop_losers(batch: _Batch) -> None:
    """Resolve every bucket range and record the losing rows for removal from their tasks' files."""
    for first, last in batch.ranges:
        resolved = batch.resolve(first, last)
        if resolved is not None:
            losers = resolved[2]
            batch.add_fixes(losers, np.full(losers.num_rows, DROP, dtype=np.int64))
    batch.losers_dropped = True


def _inlined(place: ScratchPlace, sources: Sequence[Scratch]) -> tuple[int, ...]:
    """The inlined rows the tasks end (their row ids; as many as the table has inlined rows at most)."""
    out: set[int] = set()
    for s in sources:
        if s.lo <= -1:
            ended = place.read(s)
            out.update(ended.filter(pc.equal(ended.column(_FILE), -1)).column(_POS).to_pylist())
    return tuple(sorted(out))
