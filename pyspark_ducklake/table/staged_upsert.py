"""Large upsert micro-batches of ``writeStream.format("ducklake")``: the rows stay on the executors.

PySpark's Python stream writer runs one stage: ``write()`` per task on the executors, then ``commit()`` on the
driver, with no SparkSession there (no shuffle, no second job). So a task whose rows are more than the inlining limit
pairs them with the table itself, against the snapshot the writer was planned at (:class:`KeyScan`: the key
columns of the live files, the files pruned by the task's keys), writes the replaced rows with the row ids they keep
and the new rows as plain files (:func:`stage_task`), and hands the driver only its keys (with the ``orderBy``
values and delete flags), the row id each kept and the positions it ends (:class:`StagedTask`).

The driver (:func:`commit_staged`) holds keys, never rows:

- a key that several tasks hold keeps the last by ``orderBy`` (ties: the later task), as ``ducklake_sink`` and the
  small-batch path keep it; without ``orderBy`` it is a :class:`DuplicateKeyError`, with nothing written;
- the ended positions of every task are one delete plan;
- a file holding a row that lost to a later task is rewritten without it, one file at a time;
- one snapshot is committed with the batch's (app_id, batch_id). When another writer changed the table after the
  tasks' snapshot, the driver pairs the keys with the newest snapshot itself and rewrites the files whose rows'
  row ids changed, so no key is doubled and no update is lost.

Tasks with at most the inlining limit of rows hand their rows back as now; in a batch that also has staged tasks the
driver stages those few rows itself, through the same :func:`stage_task`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, cast

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pyspark_ducklake.catalog import reader as R
from pyspark_ducklake.catalog.db import Connection
from pyspark_ducklake.catalog.entries import DataFileEntry, TableEntry
from pyspark_ducklake.catalog.format_version import FormatVersion
from pyspark_ducklake.catalog.transaction import Plan
from pyspark_ducklake.catalog.types import Column
from pyspark_ducklake.exceptions import CommitConflictError, DuplicateKeyError, NullKeyError
from pyspark_ducklake.io.fileio import delete_files
from pyspark_ducklake.table import upsert as U
from pyspark_ducklake.table.data_files import PendingFile, conform_to_table, write_data_files
from pyspark_ducklake.table.delete import DeletePlan, FileDeletes
from pyspark_ducklake.table.microbatch import (
    BatchMetrics,
    BatchPlan,
    TablePlan,
    TaskOutput,
    UpsertSpec,
    from_ipc,
    to_ipc,
)
from pyspark_ducklake.table.microbatch_upsert import DELETE_FLAG, UpsertCommitter
from pyspark_ducklake.table.pruning import may_match
from pyspark_ducklake.table.scan import FileTask, ScanPlan, execute_file_task, plan_scan

ROW_ID = "__ducklake_kept_row_id"  # in a task's report: the row id a kept row carries (-1: a new row or a delete)
_TASK = "__ducklake_task"
_INDEX = "__ducklake_index"
_FILE = "__ducklake_file"  # in a task's ended rows: the data file id (-1: an inlined row, its row id in _POS)
_POS = "__ducklake_pos"


@dataclass(frozen=True)
class KeyBounds:
    """One file's statistics of the first key column (what :func:`may_match` reads)."""

    min_value: str | None
    max_value: str | None
    contains_nan: bool | None


@dataclass(frozen=True)
class KeyScan:
    """The key columns of a table's live rows at one snapshot, and what prunes its files by a task's keys (pickled
    into the tasks with the writer)."""

    scan: ScanPlan
    key: Column
    bounds: tuple[KeyBounds | None, ...]  # per file of ``scan``
    types: frozenset[str]  # the types the key column has had

    def for_rows(self, rows: pa.Table) -> ScanPlan:
        """The plan of only the files whose statistics may hold one of ``rows``' keys."""
        branches = U.prune_filter(rows, self.key.name)
        if branches is None or not self.scan.files:
            return self.scan
        keep = np.zeros(len(self.scan.files), dtype=bool)
        for branch in branches:
            passing = np.ones(len(self.scan.files), dtype=bool)
            for _, op, value in branch:
                passing &= may_match(self.key, op, value, self.bounds, set(self.types))
            keep |= passing
        files = [f for f, k in zip(self.scan.files, keep, strict=True) if k]
        return replace(self.scan, files=files, pruned_files=len(self.scan.files) - len(files))


def plan_key_scan(
    conn: Connection, entry: TableEntry, snapshot: int, data_path: str, fmt: FormatVersion, keys: Sequence[str]
) -> KeyScan:
    """What the tasks of one batch pair their keys with: the table at ``snapshot``, key columns only."""
    scan = plan_scan(conn, entry, snapshot, data_path, fmt=fmt, columns=list(keys))
    key = scan.schema.by_name(keys[0])
    assert key is not None
    ids = [f.file.data_file_id for f in scan.files]
    stats = R.file_column_stats(conn, entry.table_id, [key.column_id], ids) if ids else {}
    types = set(R.column_types_ever(conn, entry.table_id, [key.column_id]).get(key.column_id, set()))
    if any(f.file.mapping_id is not None for f in scan.files):
        types.add("float32")  # added files keep statistics in their own types (see table.pruning)
    bounds = []
    for i in ids:
        row = stats.get(i, {}).get(key.column_id)
        bounds.append(None if row is None else KeyBounds(row.min_value, row.max_value, row.contains_nan))
    return KeyScan(scan, key, tuple(bounds), frozenset(types))


@dataclass(frozen=True)
class StagedTask:
    """What one task of a large upsert batch wrote and reports (pickled to the driver's commit)."""

    files: tuple[PendingFile, ...]
    report: bytes  # Arrow IPC: the keys (table types), the orderBy columns, DELETE_FLAG, ROW_ID; one row per key
    ended: bytes  # Arrow IPC: _FILE, _POS of every existing row its keys end
    rows: int  # rows read (before deduplication)


def stage_task(
    plan: BatchPlan, spec: UpsertSpec, keys: KeyScan | None, rows: pa.Table, stored: Sequence[str]
) -> StagedTask:
    """Pair a task's rows (one per key when ``orderBy`` is set: the task kept the last) with the table and write
    them: the replaced rows with the row ids they keep, the new rows plainly, ``target_file_rows`` per file. Rows
    with a NULL key or (without ``orderBy``) a key twice are only reported: the commit refuses the batch.

    Raises:
        SchemaMismatchError: a value that does not fit its column (nothing is left written).
    """
    flags = np.zeros(rows.num_rows, dtype=bool)
    if DELETE_FLAG in rows.column_names:
        flags = np.asarray(pc.fill_null(rows.column(DELETE_FLAG), False).to_numpy(zero_copy_only=False), dtype=bool)
    data = conform_to_table(rows.select([c for c in stored if c in rows.column_names]), plan.schema, plan.table_name)
    order = rows.select(list(spec.order_by)) if spec.order_by else None
    report = data.select(list(spec.keys))
    if order is not None:
        report = pa.Table.from_arrays(
            [*report.columns, *order.columns],
            names=[*report.column_names, *(f"__o{i}" for i in range(len(spec.order_by)))],
        )
    report = report.append_column(DELETE_FLAG, pa.array(flags))
    row_ids = np.full(data.num_rows, -1, dtype=np.int64)
    try:
        batch = U.prepare_rows(data, flags, None, spec.keys)
    except (NullKeyError, DuplicateKeyError):  # reported, never written: the commit raises it for the whole batch
        return StagedTask((), to_ipc(report.append_column(ROW_ID, pa.array(row_ids))), _ended([], []), rows.num_rows)
    indexed = batch.rows.append_column(_INDEX, pa.array(np.arange(data.num_rows, dtype=np.int64)))
    numbered = U.UpsertRows(indexed, batch.deletes, spec.keys)
    if keys is None:
        kept = np.flatnonzero(~flags)
        changes = U.RowChanges(
            DeletePlan(cast(TableEntry, None), 0), indexed.slice(0, 0), (), indexed.take(pa.array(kept, pa.int64()))
        )
    else:
        changes = U.plan_upsert(keys.for_rows(batch.rows), numbered, plan.storage_options)
    if changes.replaced.num_rows:
        row_ids[changes.replaced.column(_INDEX).to_numpy()] = np.asarray(changes.replaced_row_ids, dtype=np.int64)
    files = write_rows(plan, changes.replaced.drop_columns([_INDEX]), changes.replaced_row_ids)
    try:
        files += write_rows(plan, changes.inserted.drop_columns([_INDEX]), None)
    except BaseException:
        delete_files([f.written.path for f in files], plan.storage_options)
        raise
    ended_files = [np.full(len(f.positions), f.file.data_file_id, dtype=np.int64) for f in changes.deletes.files]
    ended_pos = [np.asarray(f.positions, dtype=np.int64) for f in changes.deletes.files]
    inlined = np.asarray(changes.deletes.inlined_row_ids, dtype=np.int64)
    ended = _ended(
        np.concatenate([*ended_files, np.full(len(inlined), -1, dtype=np.int64)]),
        np.concatenate([*ended_pos, inlined]),
    )
    return StagedTask(tuple(files), to_ipc(report.append_column(ROW_ID, pa.array(row_ids))), ended, rows.num_rows)


def _ended(files: Sequence[int] | np.ndarray, positions: Sequence[int] | np.ndarray) -> bytes:
    return to_ipc(pa.table({_FILE: pa.array(files, pa.int64()), _POS: pa.array(positions, pa.int64())}))


def write_rows(plan: BatchPlan, rows: pa.Table, row_ids: Sequence[int] | np.ndarray | None) -> list[PendingFile]:
    """``rows`` as files of ``target_file_rows`` rows, with the row ids they keep when ``row_ids`` is given."""
    files: list[PendingFile] = []
    step = max(plan.target_file_rows, 1)
    try:
        for start in range(0, rows.num_rows, step):
            part = rows.slice(start, step)
            if row_ids is not None:
                part = U.with_row_ids(part, np.asarray(row_ids[start : start + step], dtype=np.int64).tolist())
            files += write_data_files(
                part,
                plan.table_dir,
                plan.schema,
                plan.keys,
                storage_options=plan.storage_options,
                job=plan.job,
                encrypt=plan.encrypted,
                table_name=plan.table_name,
            )
    except BaseException:
        delete_files([f.written.path for f in files], plan.storage_options)
        raise
    return files


# --- the driver ---------------------------------------------------------------------------------------------------


@dataclass
class _Batch:
    """The batch as the driver holds it: every task's files and its winning keys."""

    files: list[list[PendingFile]]  # per task, the files that hold its kept rows now
    winners: pa.Table  # one row per key: the keys, _TASK, ROW_ID (as the task wrote it)
    deletes: np.ndarray  # per winner: the key is deleted
    ended: pa.Table  # _FILE, _POS: what the tasks' pairing ends (at the tasks' snapshot)
    losers: set[int]  # tasks whose files hold a row another task's row of the same key replaces
    paths: list[str] = field(default_factory=list)  # every file the batch has written and not yet removed

    def current_files(self) -> list[PendingFile]:
        return [f for task in self.files for f in task]


def resolve(spec: UpsertSpec, tasks: Sequence[StagedTask]) -> _Batch:
    """The tasks' reports as one row per key: the last by ``orderBy`` (ties: the later task).

    Raises:
        NullKeyError, DuplicateKeyError: as :meth:`Lake.upsert`; the caller removes the files.
    """
    parts = []
    for t, task in enumerate(tasks):
        report = from_ipc(task.report)
        parts.append(report.append_column(_TASK, pa.array(np.full(report.num_rows, t, dtype=np.int64))))
    everything = pa.concat_tables(parts) if parts else pa.table({})
    flags = np.asarray(everything.column(DELETE_FLAG).to_numpy(zero_copy_only=False), dtype=bool)
    orders = [c for c in everything.column_names if c.startswith("__o")]
    order = everything.select(orders) if orders else None
    rows = everything.select([*spec.keys, _TASK, ROW_ID])
    batch = U.prepare_rows(rows, flags, order, spec.keys)
    tasks_of = everything.column(_TASK).to_numpy()
    written = np.bincount(tasks_of[~flags], minlength=len(tasks))
    won = batch.rows.column(_TASK).to_numpy()
    kept = np.bincount(won[~batch.deletes], minlength=len(tasks))
    losers = {int(t) for t in np.flatnonzero(written != kept)}
    ended = pa.concat_tables([from_ipc(t.ended) for t in tasks]) if tasks else from_ipc(_ended([], []))
    files = [list(t.files) for t in tasks]
    paths = [f.written.path for t in tasks for f in t.files]
    return _Batch(files, batch.rows, batch.deletes, ended, losers, paths)


def delete_plan(entry: TableEntry, snapshot: int, files: Sequence[FileTask], ended: pa.Table) -> DeletePlan:
    """The tasks' ended rows as one delete plan (a row two tasks end is ended once)."""
    if ended.num_rows == 0:
        return DeletePlan(entry, snapshot)
    file_ids, positions = ended.column(_FILE).to_numpy(), ended.column(_POS).to_numpy()
    order = np.lexsort((positions, file_ids))  # numpy, not a hash aggregation: a tenth of the memory per row
    file_ids, positions = file_ids[order], positions[order]
    first = np.ones(len(order), dtype=bool)
    first[1:] = (np.diff(file_ids) != 0) | (np.diff(positions) != 0)
    file_ids, positions = file_ids[first], positions[first]
    entries = {t.file.data_file_id: t.file for t in files}
    out = []
    for file_id in np.unique(file_ids[file_ids >= 0]):
        mine = positions[file_ids == file_id]
        # positions stay a numpy array: a tuple of Python ints costs 36 bytes a row
        out.append(FileDeletes(entries[int(file_id)], cast(tuple[int, ...], mine)))
    inlined = tuple(int(x) for x in positions[file_ids == -1])
    return DeletePlan(entry, snapshot, tuple(out), inlined)


def rewrite(plan: BatchPlan, spec: UpsertSpec, batch: _Batch, tasks: set[int], row_ids: np.ndarray) -> None:
    """Rewrite the files of ``tasks`` keeping only their winning rows, each with its row id in ``row_ids`` (per
    winner; -1: a new row), one file in memory at a time; the files they replace are removed."""
    names = [f"k{i}" for i in range(len(spec.keys))]
    task_of = batch.winners.column(_TASK).to_numpy()
    for t in sorted(tasks):
        mine = np.flatnonzero((task_of == t) & ~batch.deletes)
        wanted = U.key_table(batch.winners.take(pa.array(mine, pa.int64())), spec.keys)
        wanted = wanted.append_column(ROW_ID, pa.array(row_ids[mine], pa.int64()))
        new_files: list[PendingFile] = []
        try:
            for f in batch.files[t]:
                rows = read_staged(f, plan)
                at = U.key_table(rows, spec.keys)
                at = at.cast(wanted.select(names).schema).append_column(
                    "__i", pa.array(np.arange(rows.num_rows, dtype=np.int64))
                )
                joined = at.join(wanted, keys=names, join_type="inner", use_threads=False)
                index = joined.column("__i").to_numpy()
                kept_ids = joined.column(ROW_ID).to_numpy()
                replaced, inserted = index[kept_ids >= 0], index[kept_ids < 0]
                new_files += write_rows(plan, rows.take(pa.array(replaced, pa.int64())), kept_ids[kept_ids >= 0])
                new_files += write_rows(plan, rows.take(pa.array(inserted, pa.int64())), None)
        except BaseException:
            delete_files([f.written.path for f in new_files], plan.storage_options)
            raise
        old = {f.written.path for f in batch.files[t]}
        batch.files[t] = new_files
        batch.paths[:] = [p for p in batch.paths if p not in old] + [f.written.path for f in new_files]
        delete_files(sorted(old), plan.storage_options)


def read_staged(f: PendingFile, plan: BatchPlan) -> pa.Table:
    """A file a task wrote and the commit has not registered, in the table's Arrow types."""
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
    return rows.select(plan.schema.names())


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
    """Driver side: resolve the keys the tasks report and commit their files and ended rows as one snapshot.

    Raises:
        NullKeyError, DuplicateKeyError: nothing is written (the tasks' files are removed).
    """
    tasks: list[StagedTask] = []
    try:
        for o in outputs:
            if isinstance(o, StagedTask):
                tasks.append(o)
            elif o.ipc:  # a task of few rows: staged here, as a task would
                tasks.append(stage_task(plan, upserts.spec, keys, from_ipc(o.ipc), stored))
        batch = resolve(upserts.spec, tasks)
    except BaseException:
        delete_files([f.written.path for t in tasks for f in t.files], plan.storage_options)
        raise
    rows = sum(t.rows for t in tasks)
    try:
        return _commit(upserts, plan, tplan, keys, batch, rows, app_id=app_id, batch_id=batch_id, started=started)
    except BaseException:
        delete_files(batch.paths, plan.storage_options)  # a commit of unknown outcome never reaches here
        raise


def _commit(
    upserts: UpsertCommitter,
    plan: BatchPlan,
    tplan: TablePlan,
    keys: KeyScan | None,
    batch: _Batch,
    rows: int,
    *,
    app_id: str,
    batch_id: int,
    started: float,
) -> BatchMetrics:
    spec = upserts.spec
    if tplan.entry is None:  # the batch creates the table: every kept row is new
        if batch.losers:
            rewrite(plan, spec, batch, batch.losers, np.full(batch.winners.num_rows, -1, dtype=np.int64))
        outputs = [TaskOutput(f.written.record_count, None, (f,)) for f in batch.current_files()]
        return upserts.committer.commit(plan, tplan, outputs, app_id=app_id, batch_id=batch_id, started=started)
    entry = tplan.entry
    state: dict[str, Any] = {"inline": False}

    def plan_with(deletes: DeletePlan) -> Plan | None:
        files = batch.current_files()
        if deletes.rows == 0 and not files:
            return None
        state["files"] = len(files)
        changes = U.RowChanges(deletes, batch.winners.slice(0, 0), (), batch.winners.slice(0, 0))
        apply = upserts._apply(plan, tplan, changes, False, ([], files), app_id, batch_id, None, state)
        return Plan(apply, deletes.snapshot_id)

    def first() -> Plan | None:
        if keys is None or keys.scan.table.table_id != entry.table_id:
            return replan()  # the table the tasks paired with is not this one (created or replaced since)
        if batch.losers:
            rewrite(plan, spec, batch, batch.losers, batch.winners.column(ROW_ID).to_numpy())
            batch.losers = set()
        return plan_with(delete_plan(entry, keys.scan.snapshot_id, keys.scan.files, batch.ended))

    def replan() -> Plan | None:
        """Another writer changed the table since the tasks paired their keys: pair them again here, at the
        newest snapshot, and rewrite the files whose rows' row ids are no longer right."""
        with upserts.lake.engine.connect() as conn:
            head = R.latest_snapshot(conn).snapshot_id
            current = R.table_by_name(conn, upserts.committer.schema_name, upserts.committer.table_name, head)
        if current.table_id != entry.table_id:
            raise CommitConflictError(f"table {plan.table_name} was dropped and created again by another writer")
        indexed = batch.winners.append_column(_INDEX, pa.array(np.arange(batch.winners.num_rows, dtype=np.int64)))
        changes = upserts._plan(current, head, U.UpsertRows(indexed, batch.deletes, spec.keys))
        right = np.full(batch.winners.num_rows, -1, dtype=np.int64)
        right[changes.replaced.column(_INDEX).to_numpy()] = np.asarray(changes.replaced_row_ids, dtype=np.int64)
        had = batch.winners.column(ROW_ID).to_numpy()
        wrong = (had != right) & ~batch.deletes
        stale = {int(t) for t in np.unique(batch.winners.column(_TASK).to_numpy()[wrong])} | batch.losers
        if stale:
            rewrite(plan, spec, batch, stale, right)
        batch.losers = set()
        batch.winners = batch.winners.set_column(batch.winners.column_names.index(ROW_ID), ROW_ID, pa.array(right))
        return plan_with(changes.deletes)

    initial = first()
    if initial is None:
        return upserts.record_unchanged(tplan, app_id, batch_id, rows, started)
    return upserts._commit(initial, replan, [batch.paths], app_id, batch_id, rows, started, state, entry.table_id)
