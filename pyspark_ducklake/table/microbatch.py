"""One micro-batch into a DuckLake table: executors write or hand back rows, the driver commits one snapshot.

Shared by the ``foreachBatch`` sink and the ``writeStream.format("ducklake")`` writer. A task whose rows fit the
inlining limit returns them (Arrow IPC) instead of writing a file; the driver inlines a small batch into the
catalog, writes the few leftover rows of a large batch itself, and commits everything with the batch's
(app_id, batch_id) in the same database transaction, so a replayed batch is recognised and skipped.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, cast

import pyarrow as pa

from pyspark_ducklake._faults import AFTER_CATALOG_COMMIT, AFTER_FILES_WRITTEN, DURING_FLUSH, crash_point
from pyspark_ducklake.catalog import app_progress
from pyspark_ducklake.catalog import commit_rows as W
from pyspark_ducklake.catalog import reader as R
from pyspark_ducklake.catalog.db import Connection
from pyspark_ducklake.catalog.entries import TableEntry
from pyspark_ducklake.catalog.indexes import create_indexes
from pyspark_ducklake.catalog.inlined_codec import table_inline_obstacle
from pyspark_ducklake.catalog.partitioning import (
    PartitionSpec,
    partition_spec,
)
from pyspark_ducklake.catalog.paths import checked_table_dir
from pyspark_ducklake.catalog.reserved import check_column_names, name_obstacle
from pyspark_ducklake.catalog.sort_order import sort_order
from pyspark_ducklake.catalog.transaction import CommitContext, RetryConfig, SkipCommit
from pyspark_ducklake.catalog.types import Column, TableSchema, empty_table, find_folded, validate_columns
from pyspark_ducklake.exceptions import (
    CommitConflictError,
    InvalidOptionError,
    NoSuchTableError,
    NotATableError,
    SchemaMismatchError,
)
from pyspark_ducklake.table import evolution
from pyspark_ducklake.table.commit import LakeHandle, add_pending_files, commit
from pyspark_ducklake.table.data_files import PendingFile, conform_to_table, write_data_files, write_rolling
from pyspark_ducklake.table.flush import flush_inlined
from pyspark_ducklake.table.identifiers import parse_identifier
from pyspark_ducklake.table.job_files import JobToken, remove_job_files
from pyspark_ducklake.table.maintenance.retention import RetentionSchedule, RetentionSpec
from pyspark_ducklake.table.partition_values import PartitionKey, resolve_keys
from pyspark_ducklake.table.sort_rows import InsertOrder, insert_order
from pyspark_ducklake.table.target import create_target, new_partition_keys, plan_new_table

log = logging.getLogger("pyspark_ducklake.sink")

SINK_INLINING_ROW_LIMIT_DEFAULT = 1_000
FLUSH_ROWS_DEFAULT = 100_000
FLUSH_BYTES_DEFAULT = 64 * 1024 * 1024
FLUSH_INTERVAL_DEFAULT = 300.0
TARGET_FILE_ROWS_DEFAULT = 1_000_000


@dataclass(frozen=True)
class UpsertSpec:
    """How the sink applies a micro-batch by key (``upsert_on``, ``delete_when``, ``order_by``)."""

    keys: tuple[str, ...]
    delete_when: str | None = None  # a Spark SQL expression, evaluated by Spark before rows reach this package
    order_by: tuple[str, ...] = ()


def upsert_spec(parsed: dict[str, object], *, spark: bool = False) -> UpsertSpec | None:
    """The upsert settings among parsed sink options (``spark``: named as Spark options), or None (append).

    Raises:
        InvalidOptionError: ``delete_when`` or ``order_by`` without ``upsert_on``.
    """
    keys = cast("tuple[str, ...] | None", parsed.get("upsert_on"))
    delete_when = cast("str | None", parsed.get("delete_when"))
    order_by = cast("tuple[str, ...]", parsed.get("order_by") or ())
    if keys is None:
        if delete_when is not None or order_by:
            given = "delete_when" if delete_when is not None else "order_by"
            if spark:
                given = {"delete_when": "deleteWhen", "order_by": "orderBy"}[given]
            keys_name = "upsertOn" if spark else "upsert_on"
            raise InvalidOptionError(f"option {given} applies only to upserts: give {keys_name} (the key columns) too")
        return None
    return UpsertSpec(keys, delete_when, order_by)


@dataclass(frozen=True)
class SinkSettings:
    """Everything the sink decides by; parsed once when the sink is made."""

    data_inlining_row_limit: int = SINK_INLINING_ROW_LIMIT_DEFAULT
    flush_rows: int = FLUSH_ROWS_DEFAULT
    flush_bytes: int = FLUSH_BYTES_DEFAULT
    flush_interval: float = FLUSH_INTERVAL_DEFAULT
    create_table: bool = True
    merge_schema: bool = False
    partition_by: tuple[str, ...] = ()
    target_file_rows: int = TARGET_FILE_ROWS_DEFAULT
    retry: RetryConfig = field(default_factory=RetryConfig)
    upsert: UpsertSpec | None = None  # None: append
    retention: RetentionSpec | None = None  # None: the sink leaves history alone


@dataclass(frozen=True)
class BatchPlan:
    """What executors need to write one micro-batch (pickled into the tasks)."""

    table_name: str
    table_dir: str
    schema: TableSchema
    keys: tuple[PartitionKey, ...]
    inline_limit: int
    target_file_rows: int
    storage_options: dict[str, Any] | None = field(default=None, repr=False, compare=False)
    # names the files of one attempt at the batch, so a failed attempt's files are found (see table.job_files)
    job: JobToken = field(default_factory=JobToken.new, compare=False)
    encrypted: bool = False  # the lake is encrypted: every file gets its own key
    order: InsertOrder = field(default_factory=InsertOrder)  # the table's sort order (SET SORTED BY)


@dataclass(frozen=True)
class TaskOutput:
    """What one task produced: its rows as Arrow IPC when few, else the files it wrote."""

    rows: int
    ipc: bytes | None = None
    files: tuple[PendingFile, ...] = ()


@dataclass(frozen=True)
class BatchMetrics:
    """One line of the sink's progress, also logged."""

    batch_id: int
    app_id: str
    rows: int
    mode: str  # "inlined", "parquet", "skipped" (a replay) or "empty"
    files: int = 0
    flushed_rows: int = 0
    snapshot_id: int | None = None
    commit_latency_s: float = 0.0
    duration_s: float = 0.0
    attempts: int = 0

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def to_ipc(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as w:
        w.write_table(table)
    return bytes(sink.getvalue().to_pybytes())


def from_ipc(data: bytes) -> pa.Table:
    return pa.ipc.open_stream(data).read_all()


def write_task(plan: BatchPlan, batches: Iterable[pa.RecordBatch]) -> TaskOutput:
    """Executor side: hand back up to ``inline_limit`` rows, or write Parquet files for more."""
    held: list[pa.RecordBatch] = []
    rows = 0
    iterator = iter(batches)
    for batch in iterator:
        if batch.num_rows == 0:
            continue
        held.append(batch)
        rows += batch.num_rows
        if rows > plan.inline_limit:
            files = write_rolling(
                _chain(held, iterator),
                plan.table_dir,
                plan.schema,
                plan.keys,
                table_name=plan.table_name,
                target_file_rows=plan.target_file_rows,
                storage_options=plan.storage_options,
                job=plan.job,
                encrypt=plan.encrypted,
                sort_by=plan.order.keys,
            )
            return TaskOutput(sum(f.written.record_count for f in files), None, tuple(files))
    if rows == 0:
        return TaskOutput(0)
    data = conform_to_table(pa.Table.from_batches(held), plan.schema, plan.table_name)
    return TaskOutput(rows, to_ipc(data))


def _chain(first: list[pa.RecordBatch], rest: Iterable[pa.RecordBatch]) -> Iterable[pa.RecordBatch]:
    yield from first
    yield from rest


class MicroBatchCommitter:
    """Driver side of the sink for one table: plans each batch and commits it exactly once.

    It remembers what its last commit left in the catalog (the table's entry, columns, partitioning, inlined-data
    table, statistics, inlined row count and the last batch per app id). While that commit's snapshot is still the
    newest, nobody else has changed any of it (every DuckLake writer changes the catalog only in a commit that adds
    a snapshot, and the snapshot row's primary key serialises commits), so the next batch reads none of it again;
    as soon as another snapshot appears, everything is read afresh.
    """

    def __init__(self, lake: LakeHandle, identifier: str, settings: SinkSettings) -> None:
        self.lake = lake
        self.schema_name, self.table_name = parse_identifier(identifier)
        self.settings = settings
        self._progress_ready = False
        self._known: _Known | None = None
        self._plan_memo: tuple[tuple[Any, ...], BatchPlan, TablePlan] | None = None
        self.retention = None if settings.retention is None else RetentionSchedule(settings.retention)

    @property
    def qualified_name(self) -> str:
        return f"{self.schema_name}.{self.table_name}"

    def _ensure_progress(self) -> None:
        if not self._progress_ready:
            app_progress.ensure_progress_table(self.lake.engine)
            # a stream makes long histories: its commits and its readers' plans must not scan them
            create_indexes(self.lake.engine)
            self._progress_ready = True

    def _known_at(self, snapshot_id: int) -> _Known | None:
        known = self._known
        return known if known is not None and known.snapshot_id == snapshot_id else None

    def forget_state(self) -> None:
        """Drop what the last commit left known: a commit made outside :meth:`commit` (an upsert) changed it."""
        self._known = None

    def table_columns(self) -> list[str] | None:
        """The table's column names now, or None when it does not exist (yet)."""
        with self.lake.engine.connect() as conn:
            head = R.latest_snapshot(conn).snapshot_id
            known = self._known_at(head)
            if known is not None:
                return known.schema.names()
            try:
                entry = R.table_by_name(conn, self.schema_name, self.table_name, head)
            except NoSuchTableError:
                return None
            return R.table_schema(conn, entry.table_id, head).names()

    def committed_snapshot(self, app_id: str, batch_id: int) -> int | None:
        """The snapshot that already holds this batch (a replay), or None."""
        self._ensure_progress()
        with self.lake.engine.connect() as conn:
            return self._committed(conn, R.latest_snapshot(conn).snapshot_id, app_id, batch_id)

    def plan(self, incoming: TableSchema) -> tuple[BatchPlan, TablePlan]:
        """Resolve the target table for a batch whose columns are ``incoming`` (numbered as a new table's).

        Raises:
            NoSuchTableError: the table is missing and ``create_table`` is off.
            SchemaMismatchError: new columns without ``merge_schema``, or incompatible types (names the column).
        """
        with self.lake.engine.connect() as conn:
            return self._plan(conn, R.latest_snapshot(conn).snapshot_id, incoming)

    def prepare(
        self, app_id: str, batch_id: int, incoming: TableSchema
    ) -> tuple[int | None, tuple[BatchPlan, TablePlan] | None]:
        """:meth:`committed_snapshot` and, unless the batch is a replay, :meth:`plan`, on one read of the head.

        Returns:
            ``(snapshot, None)`` for a batch already committed, else ``(None, (plan, table_plan))``.
        """
        self._ensure_progress()
        with self.lake.engine.connect() as conn:
            head = R.latest_snapshot(conn).snapshot_id
            done = self._committed(conn, head, app_id, batch_id)
            if done is not None:
                return done, None
            return None, self._plan(conn, head, incoming)

    def _committed(self, conn: Connection, head: int, app_id: str, batch_id: int) -> int | None:
        known = self._known_at(head)
        if known is not None and app_id in known.batches:
            last: tuple[int, int] | None = known.batches[app_id]
        else:
            try:
                entry = R.table_by_name(conn, self.schema_name, self.table_name, head)
            except NoSuchTableError:
                return None
            last = app_progress.last_batch(conn, app_id, entry.table_id)
        if last is not None and batch_id <= last[0]:
            return last[1]
        return None

    def _plan(self, conn: Connection, snapshot: int, incoming: TableSchema) -> tuple[BatchPlan, TablePlan]:
        lake = self.lake
        known = self._known_at(snapshot)
        if (
            known is not None
            and all(known.schema.by_name(c.name) is not None for c in incoming.columns)
            and not (self.settings.merge_schema and self._new_fields(known.schema, incoming))
        ):
            key = (known.entry, known.schema, known.spec, known.order, incoming)
            memo = self._plan_memo
            if memo is not None and memo[0] == key:
                return memo[1], replace(memo[2], snapshot_id=snapshot)
            entry, current, spec, order, max_id = known.entry, known.schema, known.spec, known.order, 0
        else:
            key = None
            try:
                entry = R.table_by_name(conn, self.schema_name, self.table_name, snapshot)
            except NotATableError:
                raise  # a view: never created over
            except NoSuchTableError:
                if not self.settings.create_table:
                    raise NoSuchTableError(
                        f"table {self.qualified_name} does not exist and create_table=False; create it first"
                    ) from None
                new = plan_new_table(
                    conn,
                    lake.data_path,
                    self.schema_name,
                    self.table_name,
                    incoming,
                    inlining_limit=self.settings.data_inlining_row_limit,
                    snapshot=snapshot,
                    partition_by=list(self.settings.partition_by),
                )
                tplan = TablePlan(snapshot, None, incoming, (), None, new.partition_keys)
                return self._batch_plan(new.table_dir, incoming, tplan.keys_for(incoming)), tplan
            current = R.table_schema(conn, entry.table_id, snapshot)
            spec = partition_spec(conn, entry.table_id, snapshot, current)
            # a sort order this library cannot follow fails here, before any task writes a file
            order = insert_order(conn, entry, sort_order(conn, entry.table_id, snapshot), current)
            max_id = evolution.max_column_id_conn(conn, entry.table_id)
        new_columns = [c for c in incoming.columns if current.by_name(c.name) is None]
        if new_columns and not self.settings.merge_schema:
            clash = find_folded(current.names(), new_columns[0].name)
            if clash is None:
                raise SchemaMismatchError(
                    f"column {new_columns[0].name!r} is not in table {self.qualified_name} (columns: "
                    f"{current.names()}); pass merge_schema=True to add new columns, or select only the table's columns"
                )
        added: tuple[tuple[int | None, Column], ...] = ()
        target = current
        if self.settings.merge_schema:
            # as lake.add_column: DuckDB refuses adding a name it reserves for inlined data while inlining is on
            check_column_names(
                [c.name for c in new_columns], self.settings.data_inlining_row_limit, self.lake.info.format
            )
            # New columns and new struct fields (inside lists and maps too), as DuckDB's ADD COLUMN s.c records them.
            target, added = evolution.merge_new_fields(current, incoming, max_id + 1, self.qualified_name)
            validate_columns(target.columns, f"table {self.qualified_name}")
        # Type check against the table now, before any task writes a file.
        conform_to_table(empty_table(incoming.arrow_schema()), target, self.qualified_name)
        tplan = TablePlan(snapshot, entry, target, added, spec, ())
        table_dir = checked_table_dir(R.table_path(entry, lake.data_path), lake.data_path, self.qualified_name)
        bplan = self._batch_plan(table_dir, target, resolve_keys(spec, target), order)
        if key is not None:
            self._plan_memo = (key, bplan, tplan)
        return bplan, tplan

    def _new_fields(self, current: TableSchema, incoming: TableSchema) -> bool:
        """Whether ``incoming`` has struct fields ``current`` lacks (those need the table's largest column id)."""
        return bool(evolution.merge_new_fields(current, incoming, 1, self.qualified_name)[1])

    def _batch_plan(
        self,
        table_dir: str,
        schema: TableSchema,
        keys: tuple[PartitionKey, ...],
        order: InsertOrder | None = None,
    ) -> BatchPlan:
        return BatchPlan(
            self.qualified_name,
            table_dir,
            schema,
            keys,
            # a table with a reserved column name (row_id, end_snapshot...) or one too long for the catalog
            # database's identifiers cannot take inlined rows
            -1
            if name_obstacle(schema.names(), self.lake.engine.dialect.name, self.lake.info.format) is not None
            else self.settings.data_inlining_row_limit,
            self.settings.target_file_rows,
            self.lake.storage_options,
            encrypted=self.lake.info.encrypted,
            order=order or InsertOrder(),
        )

    def commit(
        self,
        plan: BatchPlan,
        tplan: TablePlan,
        outputs: Sequence[TaskOutput],
        *,
        app_id: str,
        batch_id: int,
        started: float,
    ) -> BatchMetrics:
        """Commit the batch's rows and files as one snapshot (or skip it when it was already committed)."""
        rows = sum(o.rows for o in outputs)
        files = [f for o in outputs for f in o.files]
        small = [from_ipc(o.ipc) for o in outputs if o.ipc]
        if rows == 0:
            return BatchMetrics(batch_id, app_id, 0, "empty", duration_s=time.monotonic() - started)
        inline_rows: pa.Table | None = None
        if small:
            leftovers = pa.concat_tables(small)
            if not files and leftovers.num_rows <= plan.inline_limit and self.inlinable(plan, leftovers):
                inline_rows = plan.order.inlined_rows(leftovers, plan.schema)
            else:
                files += write_data_files(
                    leftovers,
                    plan.table_dir,
                    plan.schema,
                    plan.keys,
                    storage_options=self.lake.storage_options,
                    job=plan.job,
                    encrypt=plan.encrypted,
                    table_name=plan.table_name,
                    sort_by=plan.order.keys,
                )
        flushed = [0]
        skipped = [False]
        staged: list[Any] = [None, None]  # the last attempt's context and what it leaves behind

        previous = self._known

        def apply(ctx: CommitContext) -> None:
            known = previous if previous is not None and previous.snapshot_id == ctx.base.snapshot_id else None
            if known is not None and (tplan.entry is None or tplan.entry.table_id != known.entry.table_id):
                known = None
            if known is not None and not tplan.added:
                entry, spec, schema, order = known.entry, known.spec, known.schema, known.order
                last = known.batches.get(app_id)
                if last is None:
                    last = app_progress.last_batch(ctx.conn, app_id, entry.table_id)
                if known.stats is not None:
                    W.seed_table_stats(ctx, entry.table_id, known.stats)
            else:
                known = None
                entry, spec = self.target_in_commit(ctx, tplan)
                last = app_progress.last_batch(ctx.conn, app_id, entry.table_id)
                schema = R.table_schema(ctx.conn, entry.table_id, ctx.snapshot_id)
                order = insert_order(ctx.conn, entry, sort_order(ctx.conn, entry.table_id, ctx.snapshot_id), schema)
            if last is not None and batch_id <= last[0]:
                skipped[0] = True
                raise SkipCommit()
            if schema.shape() != plan.schema.shape():
                raise CommitConflictError(f"table {self.qualified_name} was altered while the batch was written; retry")
            if known is not None:
                count, oldest = known.inlined_rows, known.oldest_inlined
            else:
                count, oldest = R.inlined_rows_waiting(ctx.conn, entry.table_id, ctx.format)
            inlined = known.inlined if known is not None else None
            if inline_rows is not None:
                if inlined is None:
                    inlined = W.latest_inlined_table(ctx, entry, schema)
                W.inlined_insert(ctx, entry, schema, inline_rows, target=inlined)
            if files:
                add_pending_files(ctx, entry, schema, spec, files)
            if inline_rows is not None and inline_rows.num_rows:
                count += inline_rows.num_rows
                oldest = oldest or ctx.snapshot_time
            flushed[0] = 0
            if self.should_flush(count, oldest, inline_rows):
                result = flush_inlined(ctx, entry)
                flushed[0] = result.rows
                if result.kept is None:
                    count, oldest = 0, None
                crash_point(DURING_FLUSH, batch_id)
            app_progress.record_batch(ctx.conn, app_id, entry.table_id, batch_id, ctx.snapshot_id)
            batches = dict(known.batches) if known is not None else {}
            batches[app_id] = (batch_id, ctx.snapshot_id)
            staged[0] = ctx
            staged[1] = _Known(ctx.snapshot_id, entry, schema, spec, inlined, None, count, oldest, batches, order)

        crash_point(AFTER_FILES_WRITTEN, batch_id)
        commit_started = time.monotonic()
        self._known = None  # only a successful commit is known
        result = commit(
            self.lake,
            apply,
            base=None,
            files=[f.written.path for f in files],
            extra_info={"app_id": app_id, "batch_id": batch_id},
        )
        if not (result.skipped or skipped[0]) and staged[1] is not None and result.snapshot_id is not None:
            ctx, after = staged
            self._known = replace(after, stats=W.written_table_stats(ctx).get(after.entry.table_id))
        crash_point(AFTER_CATALOG_COMMIT, batch_id)
        now = time.monotonic()
        if result.skipped or skipped[0]:
            self._discard(files)
            return BatchMetrics(batch_id, app_id, rows, "skipped", duration_s=now - started, attempts=result.attempts)
        self.after_commit()
        return BatchMetrics(
            batch_id,
            app_id,
            rows,
            "inlined" if inline_rows is not None and not files else "parquet",
            len(files),
            flushed[0],
            result.snapshot_id,
            now - commit_started,
            now - started,
            result.attempts,
        )

    def after_commit(self) -> None:
        """After a batch committed a snapshot: the sink's retention run, when one is due."""
        if self.retention is not None:
            self.retention.after_commit(self.lake.engine, self.lake.data_path, self.lake.storage_options)

    def inlinable(self, plan: BatchPlan, rows: pa.Table) -> bool:
        """Whether DuckDB reads every one of ``rows`` back exactly from the catalog (else they go to Parquet)."""
        why = table_inline_obstacle(plan.schema.columns, rows, self.lake.engine.dialect.name, self.lake.info.format)
        if why is not None:
            log.info(
                "ducklake sink %s: %d rows written to Parquet, not inlined: %s", plan.table_name, rows.num_rows, why
            )
        return why is None

    def remove_attempt_files(self, plan: BatchPlan) -> list[str]:
        """Delete every file of the failed attempt ``plan.job`` that no snapshot references: its tasks' files,
        whether they reported them or not, and the driver's own."""
        return remove_job_files(
            self.lake.engine, self.lake.data_path, plan.table_dir, plan.job, storage_options=self.lake.storage_options
        )

    def _discard(self, files: list[PendingFile]) -> None:
        from pyspark_ducklake.io.fileio import delete_files

        delete_files([f.written.path for f in files], self.lake.storage_options)

    def target_in_commit(self, ctx: CommitContext, tplan: TablePlan) -> tuple[TableEntry, PartitionSpec | None]:
        try:
            entry = R.table_by_name(ctx.conn, self.schema_name, self.table_name, ctx.snapshot_id)
        except NoSuchTableError:
            if tplan.entry is not None:
                raise CommitConflictError(
                    f"table {self.qualified_name} was dropped while the batch was written"
                ) from None
            return create_target(
                ctx, self.schema_name, self.table_name, tplan.schema, tplan.new_partition_keys, at=ctx.snapshot_id
            )
        if tplan.entry is None or entry.table_id != tplan.entry.table_id:
            raise CommitConflictError(f"table {self.qualified_name} was created by another writer meanwhile; retry")
        for parent, column in tplan.added:
            evolution.add_column_with_ids(ctx, entry, column, parent)
        return entry, partition_spec(ctx.conn, entry.table_id, ctx.snapshot_id, tplan.schema)

    def should_flush(self, count: int, oldest: dt.datetime | None, inline_rows: pa.Table | None) -> bool:
        """Whether the table's ``count`` inlined rows, the oldest from ``oldest``, cross a flush threshold."""
        s = self.settings
        if count == 0:
            return False
        if count >= s.flush_rows:
            return True
        if inline_rows is not None and inline_rows.num_rows:
            estimated = count * inline_rows.nbytes / inline_rows.num_rows
            if estimated >= s.flush_bytes:
                return True
        return oldest is not None and (dt.datetime.now(dt.timezone.utc) - oldest).total_seconds() >= s.flush_interval


@dataclass(frozen=True)
class _Known:
    """What the committer's last commit left in the catalog, valid while its snapshot is the newest."""

    snapshot_id: int
    entry: TableEntry
    schema: TableSchema
    spec: PartitionSpec | None
    inlined: Any  # the sqlalchemy Table of the latest inlined-data table, None until the first inlined insert
    stats: W.TableStats | None
    inlined_rows: int
    oldest_inlined: dt.datetime | None
    batches: dict[str, tuple[int, int]]  # app_id -> (batch_id, snapshot_id) of its last batch
    order: InsertOrder = field(default_factory=InsertOrder)  # the table's sort order


@dataclass(frozen=True)
class TablePlan:
    """The table as the batch was planned against it."""

    snapshot_id: int
    entry: TableEntry | None
    schema: TableSchema
    added: tuple[tuple[int | None, Column], ...]  # (parent struct id or None, new column), in id order
    spec: PartitionSpec | None
    new_partition_keys: tuple[tuple[int, str], ...]

    def keys_for(self, schema: TableSchema) -> tuple[PartitionKey, ...]:
        return new_partition_keys(self.new_partition_keys, schema)
