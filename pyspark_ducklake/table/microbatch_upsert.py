"""One upsert micro-batch into a DuckLake table: matched keys keep their row ids, one snapshot, exactly once.

The sink's upsert mode (``ducklake_sink(upsert_on=...)``). Spark has already evaluated ``delete_when`` into a boolean
column (:data:`DELETE_FLAG`); everything here is Arrow and the catalog, as :meth:`Lake.upsert` does it
(``table/upsert.py``), plus the sink's (app_id, batch_id) record in the same database transaction.

- A small batch arrives whole on the driver (:meth:`UpsertCommitter.commit_rows`): one row per key (the last by
  ``order_by``), the key columns of the files that may hold its keys read, and the new versions inlined into the
  catalog with the row ids they replace (or written by the driver when DuckDB could not read them back inlined);
  re-planned when another writer changed the table before the commit.
- A large batch never comes to the driver whole: Spark deduplicates it, the driver gets only its keys and delete
  flags, plans the matches (:meth:`UpsertCommitter.plan_keys`) and hands the executors the row id of every replaced
  key; each task writes its replaced rows with DuckDB's ``_ducklake_internal_row_id`` column and its new rows as
  plain files (:func:`write_upsert_task`), and the driver commits the delete files and all new files in one snapshot
  (:meth:`UpsertCommitter.commit_files`). When another writer changed the table meanwhile the planned row ids may
  be stale: :class:`StalePlanError`, and the sink runs the batch again.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pyspark_ducklake._faults import AFTER_CATALOG_COMMIT, AFTER_FILES_WRITTEN, DURING_FLUSH, crash_point
from pyspark_ducklake.catalog import app_progress
from pyspark_ducklake.catalog import reader as R
from pyspark_ducklake.catalog.entries import TableEntry
from pyspark_ducklake.catalog.transaction import CommitContext, Plan, SkipCommit
from pyspark_ducklake.exceptions import CommitConflictError
from pyspark_ducklake.io.fileio import delete_files
from pyspark_ducklake.table import upsert as U
from pyspark_ducklake.table.commit import add_pending_files, commit_replanned
from pyspark_ducklake.table.data_files import PendingFile, conform_to_table, write_data_files
from pyspark_ducklake.table.flush import flush_inlined
from pyspark_ducklake.table.microbatch import (
    BatchMetrics,
    BatchPlan,
    MicroBatchCommitter,
    TablePlan,
    TaskOutput,
    UpsertSpec,
    from_ipc,
    to_ipc,
)
from pyspark_ducklake.table.scan import plan_scan

DELETE_FLAG = "__ducklake_delete"  # the batch column Spark computes from delete_when (true: delete the key)
ROW_ID = "__ducklake_row_id"  # in the matches executors get: the row id a key's new version keeps


@dataclass(frozen=True)
class UpsertTaskPlan:
    """What the executors need to write a large upsert batch (pickled into the tasks)."""

    batch: BatchPlan
    keys: tuple[str, ...]
    matches: bytes  # Arrow IPC: the replaced keys (k0, k1... as :func:`U.key_table` makes them) and ROW_ID


@dataclass(frozen=True)
class KeyChanges:
    """A large batch's change planned on its keys: what it ends, and the row id each replaced key keeps."""

    changes: U.RowChanges | None  # replaced/inserted hold key columns only; None: the commit creates the table
    task_plan: UpsertTaskPlan
    rows: int  # rows the batch keeps (replaced + inserted)


def split_batch(data: pa.Table, plan: BatchPlan, spec: UpsertSpec) -> U.UpsertRows:
    """A small batch (table columns, ``order_by`` columns and :data:`DELETE_FLAG`) as one row per key.

    Raises:
        NullKeyError, DuplicateKeyError: as :meth:`Lake.upsert`; nothing is written.
    """
    flag = DELETE_FLAG if DELETE_FLAG in data.column_names else None
    if flag is not None:
        data = data.set_column(
            data.column_names.index(flag), flag, pc.fill_null(data.column(flag), False).cast(pa.bool_())
        )
    order = list(spec.order_by) or None
    rows, deletes, ordering = U.split_control_columns(data, plan.schema, flag, order, plan.table_name)
    rows = rows.drop_columns([c for c in rows.column_names if plan.schema.by_name(c) is None])
    rows = conform_to_table(rows, plan.schema, plan.table_name)
    return U.prepare_rows(rows, deletes, ordering, spec.keys)


def _key_types(keys: pa.Table, plan: BatchPlan, spec: UpsertSpec) -> pa.Table:
    """The key columns cast to the table's Arrow types (as executors see them after conforming)."""
    schema = plan.schema.arrow_schema()
    return pa.table({k: keys.column(k).cast(schema.field(k).type) for k in spec.keys})


def write_upsert_task(task: UpsertTaskPlan, batches: Iterable[pa.RecordBatch]) -> TaskOutput:
    """Executor side of a large upsert batch: drop the deleted keys' rows, write the replaced rows with the row ids
    they keep (``_ducklake_internal_row_id``) and the new rows as plain files, ``target_file_rows`` per file."""
    plan = task.batch
    parts = [b for b in batches if b.num_rows]
    if not parts:
        return TaskOutput(0)
    data = pa.Table.from_batches(parts)
    if DELETE_FLAG in data.column_names:
        keep = pc.invert(pc.fill_null(data.column(DELETE_FLAG), False))
        data = data.filter(keep).drop_columns([DELETE_FLAG])
    if data.num_rows == 0:
        return TaskOutput(0)
    data = conform_to_table(data, plan.schema, plan.table_name)
    matches = from_ipc(task.matches)
    names = [f"k{i}" for i in range(len(task.keys))]
    here = U.key_table(data, task.keys)
    here = here.append_column("__i", pa.array(np.arange(data.num_rows, dtype=np.int64)))
    row_ids = np.full(data.num_rows, -1, dtype=np.int64)
    if matches.num_rows:
        wanted = pa.schema([*here.select(names).schema, matches.schema.field(ROW_ID)])
        joined = here.join(matches.cast(wanted), keys=names, join_type="inner", use_threads=False)
        row_ids[joined.column("__i").to_numpy()] = joined.column(ROW_ID).to_numpy()
    replaced = np.flatnonzero(row_ids >= 0)
    inserted = np.flatnonzero(row_ids < 0)
    files = write_rows(plan, data.take(pa.array(replaced, pa.int64())), row_ids[replaced])
    try:
        files += write_rows(plan, data.take(pa.array(inserted, pa.int64())), None)
    except BaseException:
        delete_files([f.written.path for f in files], plan.storage_options)
        raise
    return TaskOutput(data.num_rows, None, tuple(files))


def write_rows(plan: BatchPlan, rows: pa.Table, row_ids: Sequence[int] | np.ndarray | None) -> list[PendingFile]:
    """``rows`` as files of ``target_file_rows`` rows named for the batch's job, with the row ids they keep
    (DuckDB's ``_ducklake_internal_row_id``) when ``row_ids`` is given; none left behind on failure."""
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


class UpsertCommitter:
    """Driver side of the sink's upsert mode for one table; shares the append committer's lake and records."""

    def __init__(self, committer: MicroBatchCommitter, spec: UpsertSpec) -> None:
        self.committer = committer
        self.spec = spec

    @property
    def lake(self) -> Any:
        return self.committer.lake

    def check_keys(self, plan: BatchPlan, data_names: list[str]) -> None:
        """The key columns are the table's (and the batch's), of primitive types.

        Raises:
            NoSuchColumnError, UnsupportedTypeError: naming the column; nothing is written.
        """
        U.check_key_names(list(self.spec.keys), plan.schema, data_names, plan.table_name)

    # --- a small batch: rows on the driver -----------------------------------------------------------------------

    def commit_rows(
        self, plan: BatchPlan, tplan: TablePlan, data: pa.Table, *, app_id: str, batch_id: int, started: float
    ) -> BatchMetrics:
        """Commit a batch that came to the driver whole (inlined when small enough and DuckDB reads it back)."""
        batch = split_batch(data, plan, self.spec)
        if tplan.entry is None:  # a new table: every kept row is an insert, as the append sink commits them
            kept = batch.rows.filter(pa.array(~batch.deletes))
            outputs = [TaskOutput(kept.num_rows, to_ipc(kept))] if kept.num_rows else []
            return self.committer.commit(plan, tplan, outputs, app_id=app_id, batch_id=batch_id, started=started)
        entry = tplan.entry
        written: list[list[str]] = []
        state: dict[str, Any] = {}

        def plan_at(snapshot: int, current: TableEntry) -> Plan | None:
            changes = self.pair(current, snapshot, batch)
            state["changes"] = changes
            if changes.is_empty():
                return None
            rows = pa.concat_tables([changes.replaced, changes.inserted])
            inline = rows.num_rows == 0 or (rows.num_rows <= plan.inline_limit and self.committer.inlinable(plan, rows))
            files = None
            if not inline:
                files = U.write_change_files(
                    changes,
                    plan.table_dir,
                    plan.schema,
                    plan.keys,
                    storage_options=self.lake.storage_options,
                    encrypt=plan.encrypted,
                )
                written.append([f.written.path for f in files[0] + files[1]])
            state["inline"] = inline
            state["files"] = 0 if files is None else len(files[0]) + len(files[1])
            apply = self.apply_change(plan, tplan, changes, inline, files, app_id, batch_id, rows, state)
            return Plan(apply, snapshot)

        def replan() -> Plan | None:
            return plan_at(*self.table_at_head(entry, plan.table_name))

        first = plan_at(tplan.snapshot_id, entry)
        if first is None:
            return self.record_unchanged(tplan, app_id, batch_id, data.num_rows, started)
        return self.commit_planned(
            first, replan, written, app_id, batch_id, data.num_rows, started, state, entry.table_id
        )

    # --- a large batch: keys on the driver, rows on the executors -------------------------------------------------

    def plan_keys(self, plan: BatchPlan, tplan: TablePlan, keys: pa.Table) -> KeyChanges:
        """Plan a large batch from its keys (one row per key, Spark deduplicated them) and delete flags.

        Raises:
            NullKeyError, DuplicateKeyError: nothing is written.
        """
        deletes = np.zeros(keys.num_rows, dtype=bool)
        if DELETE_FLAG in keys.column_names:
            flags = pc.fill_null(keys.column(DELETE_FLAG), False)
            deletes = np.asarray(flags.to_numpy(zero_copy_only=False), dtype=bool)
        key_rows = _key_types(keys, plan, self.spec)
        batch = U.prepare_rows(key_rows, deletes, None, self.spec.keys)
        kept = int((~batch.deletes).sum())
        changes = None if tplan.entry is None else self.pair(tplan.entry, tplan.snapshot_id, batch)
        replaced = key_rows.slice(0, 0) if changes is None else changes.replaced
        row_ids = () if changes is None else changes.replaced_row_ids
        matches = U.key_table(replaced, self.spec.keys).append_column(ROW_ID, pa.array(list(row_ids), pa.int64()))
        return KeyChanges(changes, UpsertTaskPlan(plan, self.spec.keys, to_ipc(matches)), kept)

    def commit_files(
        self,
        plan: BatchPlan,
        tplan: TablePlan,
        planned: KeyChanges,
        outputs: list[TaskOutput],
        *,
        app_id: str,
        batch_id: int,
        rows: int,
        started: float,
    ) -> BatchMetrics:
        """Commit the executors' files and the planned deletes as one snapshot.

        Raises:
            StalePlanError: another writer changed the table since the keys were planned; nothing was committed
                and the files are gone: run the batch again.
        """
        if tplan.entry is None or planned.changes is None:
            return self.committer.commit(plan, tplan, outputs, app_id=app_id, batch_id=batch_id, started=started)
        files = [f for o in outputs for f in o.files]
        if planned.changes.deletes.rows == 0 and not files:
            return self.record_unchanged(tplan, app_id, batch_id, rows, started)
        state: dict[str, Any] = {"changes": planned.changes, "inline": False, "files": len(files)}
        apply = self.apply_change(plan, tplan, planned.changes, False, ([], files), app_id, batch_id, None, state)
        written = [[f.written.path for f in files]]
        first = Plan(apply, tplan.snapshot_id)
        return self.commit_planned(first, None, written, app_id, batch_id, rows, started, state, tplan.entry.table_id)

    def record_unchanged(self, tplan: TablePlan, app_id: str, batch_id: int, rows: int, started: float) -> BatchMetrics:
        """A batch that changes nothing: no snapshot, but its batch id is recorded (when the table exists), so a
        replay is skipped without reading its rows or planning it again."""
        snapshot = None
        if tplan.entry is not None:
            self.committer.forget_state()  # its record of the app's last batch is now behind
            snapshot = app_progress.record_unchanged(self.lake.engine, app_id, tplan.entry.table_id, batch_id)
        elapsed = time.monotonic() - started
        return BatchMetrics(batch_id, app_id, rows, "empty", snapshot_id=snapshot, duration_s=elapsed)

    # --- shared ---------------------------------------------------------------------------------------------------

    def table_at_head(self, entry: TableEntry, table_name: str) -> tuple[int, TableEntry]:
        """The newest snapshot and the table in it, for a re-plan after another writer's change.

        Raises:
            CommitConflictError: the table was dropped and created again meanwhile.
        """
        with self.lake.engine.connect() as conn:
            head = R.latest_snapshot(conn).snapshot_id
            current = R.table_by_name(conn, self.committer.schema_name, self.committer.table_name, head)
        if current.table_id != entry.table_id:
            raise CommitConflictError(f"table {table_name} was dropped and created again by another writer")
        return head, current

    def pair(self, entry: TableEntry, snapshot: int, batch: U.UpsertRows) -> U.RowChanges:
        """Pair the batch's keys with the table's live rows at ``snapshot``, reading only the key columns of the
        files whose statistics may hold them."""
        if batch.rows.num_rows == 0:
            return U.RowChanges(U.DeletePlan(entry, snapshot, (), ()), batch.rows, (), batch.rows)
        prune = U.prune_filter(batch.rows, self.spec.keys[0])
        with self.lake.engine.connect() as conn:
            scan = plan_scan(
                conn,
                entry,
                snapshot,
                self.lake.data_path,
                fmt=self.lake.info.format,
                filters=prune,
                columns=list(self.spec.keys),
            )
        return U.plan_upsert(scan, batch, self.lake.storage_options)

    def apply_change(
        self,
        plan: BatchPlan,
        tplan: TablePlan,
        changes: U.RowChanges,
        inline: bool,
        files: tuple[list[PendingFile], list[PendingFile]] | None,
        app_id: str,
        batch_id: int,
        inline_rows: pa.Table | None,
        state: dict[str, Any],
    ) -> Callable[[CommitContext], None]:
        committer = self.committer

        def apply(ctx: CommitContext) -> None:
            entry, spec = committer.target_in_commit(ctx, tplan)
            last = app_progress.last_batch(ctx.conn, app_id, entry.table_id)
            if last is not None and batch_id <= last[0]:
                state["skipped"] = last[1]
                raise SkipCommit()
            schema = R.table_schema(ctx.conn, entry.table_id, ctx.snapshot_id)
            if schema.shape() != plan.schema.shape():
                raise CommitConflictError(f"table {plan.table_name} was altered while the batch was written; retry")
            U.stage_changes(
                ctx,
                changes,
                plan.table_dir,
                schema,
                inline=inline,
                files=files,
                add_files=lambda c, pending: add_pending_files(c, entry, schema, spec, pending),
            )
            state["flushed"] = 0
            count, oldest = R.inlined_rows_waiting(ctx.conn, entry.table_id, ctx.format)
            if committer.should_flush(count, oldest, inline_rows if inline else None):
                state["flushed"] = flush_inlined(ctx, entry).rows
                crash_point(DURING_FLUSH, batch_id)
            app_progress.record_batch(ctx.conn, app_id, entry.table_id, batch_id, ctx.snapshot_id)

        return apply

    def commit_planned(
        self,
        first: Plan,
        replan: Callable[[], Plan | None] | None,
        written: list[list[str]],
        app_id: str,
        batch_id: int,
        rows: int,
        started: float,
        state: dict[str, Any],
        table_id: int,
    ) -> BatchMetrics:
        crash_point(AFTER_FILES_WRITTEN, batch_id)
        self.committer.forget_state()
        commit_started = time.monotonic()
        extra = {"app_id": app_id, "batch_id": batch_id}
        result = commit_replanned(self.lake, first, replan, written, extra_info=extra)
        crash_point(AFTER_CATALOG_COMMIT, batch_id)
        now = time.monotonic()
        if result.snapshot_id is None:
            if "skipped" in state:
                elapsed = now - started
                return BatchMetrics(batch_id, app_id, rows, "skipped", duration_s=elapsed, attempts=result.attempts)
            # re-planned after another writer's change, the batch changes nothing now: recorded all the same
            snapshot = app_progress.record_unchanged(self.lake.engine, app_id, table_id, batch_id)
            elapsed = time.monotonic() - started
            return BatchMetrics(
                batch_id, app_id, rows, "empty", snapshot_id=snapshot, duration_s=elapsed, attempts=result.attempts
            )
        self.committer.after_commit()
        return BatchMetrics(
            batch_id,
            app_id,
            rows,
            "inlined" if state.get("inline") else "parquet",
            state.get("files", 0),
            state.get("flushed", 0),
            result.snapshot_id,
            now - commit_started,
            now - started,
            result.attempts,
        )
