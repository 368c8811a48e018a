"""Batch writes: executors write Parquet files in parallel; the driver commits them as one snapshot."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage
from pyspark.sql.types import StructType

from pyspark_ducklake.catalog import app_progress
from pyspark_ducklake.catalog import reader as R
from pyspark_ducklake.catalog.entries import TableEntry
from pyspark_ducklake.catalog.partitioning import (
    PartitionSpec,
    parse_partition_keys,
)
from pyspark_ducklake.catalog.transaction import CommitContext, SkipCommit
from pyspark_ducklake.catalog.types import TableSchema, empty_table
from pyspark_ducklake.exceptions import (
    CommitConflictError,
    CommitStateUnknownError,
    InvalidOptionError,
    NoSuchTableError,
    NotATableError,
)
from pyspark_ducklake.io.fileio import delete_files
from pyspark_ducklake.options import option_as_int, option_txn, option_value
from pyspark_ducklake.spark.job_tasks import LATE_TASK_GRACE_S
from pyspark_ducklake.spark.lake_config import LakeConfig
from pyspark_ducklake.spark.type_mapping import columns_from_spark
from pyspark_ducklake.table.commit import add_pending_files, commit, delete_everything, table_folder
from pyspark_ducklake.table.data_files import PendingFile, conform_to_table, write_rolling
from pyspark_ducklake.table.identifiers import parse_identifier
from pyspark_ducklake.table.job_files import JobToken, remove_job_files, remove_job_files_late
from pyspark_ducklake.table.lake_table import LakeTable
from pyspark_ducklake.table.partition_values import PartitionKey, resolve_keys
from pyspark_ducklake.table.sort_rows import SortKey
from pyspark_ducklake.table.target import create_target, new_partition_keys, plan_new_table

log = logging.getLogger(__name__)

PARTITION_BY = "partitionBy"
TARGET_FILE_ROWS = "targetFileRows"
TARGET_FILE_ROWS_DEFAULT = 1_000_000


@dataclass(frozen=True)
class FilesWritten(WriterCommitMessage):
    """What one task wrote: files (relative to the table folder) with their descriptions and partitions."""

    files: tuple[PendingFile, ...]


@dataclass(frozen=True)
class WritePlan:
    """Everything an executor needs to write files for the table; pickles with the writer."""

    config: LakeConfig
    schema_name: str
    table_name: str
    table_dir: str
    table_schema: TableSchema
    base_snapshot: int
    table_exists: bool
    target_file_rows: int
    partition: PartitionSpec | None = None
    new_partition_keys: tuple[tuple[int, str], ...] = ()
    # names every file of this job, so a failed job's files are found without its tasks (see table.job_files)
    job: JobToken = field(default_factory=JobToken.new)
    encrypted: bool = False  # the lake is encrypted: every file gets its own key
    # Delta's idempotent writes: (txnAppId, txnVersion), recorded with the snapshot; see catalog/app_progress.py
    txn: tuple[str, int] | None = None
    # the snapshot that already committed this txn version (or a later one): the write is a no-op
    txn_done: int | None = None
    sort: tuple[SortKey, ...] = ()  # the table's sort order (SET SORTED BY): each file's rows in it

    @property
    def partition_keys(self) -> tuple[PartitionKey, ...]:
        if self.partition is not None:
            return resolve_keys(self.partition, self.table_schema)
        return new_partition_keys(self.new_partition_keys, self.table_schema)


def plan_write(config: LakeConfig, identifier: str, options: dict[str, str], spark_schema: StructType) -> WritePlan:
    """Resolve the target on the driver: the existing table, or the schema of the table the commit will create.

    Raises:
        UnsupportedTypeError: a Spark type DuckLake cannot hold (before anything is written).
        SchemaMismatchError: data columns that the existing table does not have.
    """
    schema_name, table_name = parse_identifier(identifier)
    target_rows = (
        option_as_int(options, TARGET_FILE_ROWS, TARGET_FILE_ROWS_DEFAULT, minimum=1) or TARGET_FILE_ROWS_DEFAULT
    )
    new_schema = columns_from_spark(spark_schema)
    partition_option = option_value(options, PARTITION_BY)
    txn = option_txn(options)
    lake = config.connect()
    try:
        if txn is not None:
            app_progress.ensure_progress_table(lake.engine)
        snapshot = lake.current_snapshot_id()
        try:
            table = lake.table((schema_name, table_name), snapshot=snapshot)
        except NotATableError:
            raise  # a view: never created over
        except NoSuchTableError:
            with lake.engine.connect() as conn:
                new = plan_new_table(
                    conn,
                    lake.data_path,
                    schema_name,
                    table_name,
                    new_schema,
                    inlining_limit=lake.data_inlining_row_limit(),
                    snapshot=snapshot,
                    partition_by=partition_option,
                )
            return WritePlan(
                config,
                schema_name,
                table_name,
                new.table_dir,
                new_schema,
                snapshot,
                False,
                target_rows,
                None,
                new.partition_keys,
                encrypted=lake.info.encrypted,
                txn=txn,
            )
        # Validate the incoming columns against the table now, so a mismatch fails before any task runs.
        conform_to_table(empty_table(new_schema.arrow_schema()), table.table_schema, table.name)
        if partition_option:
            wanted = parse_partition_keys(partition_option, table.table_schema)
            current = [(k.column.column_id, k.transform) for k in table.partition_keys]
            if wanted != current:
                raise InvalidOptionError(
                    f"option partitionBy={partition_option!r} differs from the partitioning of {table.name} "
                    f"({table.partition_by or 'none'}); change it with lake.set_partitioning() first"
                )
        return WritePlan(
            config,
            schema_name,
            table_name,
            table_folder(table, lake.data_path),
            table.table_schema,
            snapshot,
            True,
            target_rows,
            table.partition,
            encrypted=lake.info.encrypted,
            txn=txn,
            txn_done=_txn_done(lake, table.table_id, txn),
            sort=table.sort_keys,  # a sort order this library cannot follow fails before any task runs
        )
    finally:
        lake.close()


def _txn_done(lake: Any, table_id: int, txn: tuple[str, int] | None) -> int | None:
    """The snapshot that committed ``txn``'s version or a later one of its app into the table, else None."""
    if txn is None:
        return None
    with lake.engine.connect() as conn:
        last = app_progress.last_batch(conn, txn[0], table_id)
    return last[1] if last is not None and txn[1] <= last[0] else None


def write_batches(plan: WritePlan, batches: Iterator[pa.RecordBatch]) -> list[PendingFile]:
    """Executor side: conform batches to the table and roll Parquet files at ``target_file_rows`` (nothing for a
    txn version already committed)."""
    if plan.txn_done is not None:
        for _ in batches:
            pass
        return []
    return write_rolling(
        batches,
        plan.table_dir,
        plan.table_schema,
        plan.partition_keys,
        table_name=f"{plan.schema_name}.{plan.table_name}",
        target_file_rows=plan.target_file_rows,
        storage_options=plan.config.storage_options,
        job=plan.job,
        encrypt=plan.encrypted,
        sort_by=plan.sort,
    )


def commit_files(
    plan: WritePlan,
    files: list[PendingFile],
    *,
    overwrite: bool,
    extra_info: dict[str, Any] | None = None,
) -> int | None:
    """Driver side: one snapshot that (creates the table,) optionally empties it, and adds the files; with a txn,
    none when its app committed that version (or a later one) meanwhile (the files are then removed)."""
    if plan.txn_done is not None:
        delete_files([f.written.path for f in files], plan.config.storage_options)
        log.info(
            "write to %s.%s: txn %s already committed; nothing written", plan.schema_name, plan.table_name, plan.txn
        )
        return None
    lake = plan.config.connect()
    try:
        txn = plan.txn

        def apply(ctx: CommitContext) -> None:
            entry, partition = _target_entry(ctx, plan)
            if txn is not None:
                last = app_progress.last_batch(ctx.conn, txn[0], entry.table_id)
                if last is not None and txn[1] <= last[0]:
                    raise SkipCommit()
                app_progress.record_batch(ctx.conn, txn[0], entry.table_id, txn[1], ctx.snapshot_id)
            schema = R.table_schema(ctx.conn, entry.table_id, ctx.snapshot_id)
            if overwrite and plan.table_exists:
                delete_everything(ctx, LakeTable(entry, schema, ctx.base.snapshot_id), lake.data_path)
            add_pending_files(ctx, entry, schema, partition, files)
            if ctx.changes.is_empty():
                raise SkipCommit()  # an empty table overwritten with no rows

        if not files and not overwrite and plan.table_exists:
            return None
        if txn is not None:
            extra_info = {**(extra_info or {}), "txn_app_id": txn[0], "txn_version": txn[1]}
        result = commit(
            lake, apply, base=plan.base_snapshot, files=[f.written.path for f in files], extra_info=extra_info
        )
        if result.snapshot_id is None:
            delete_files([f.written.path for f in files], plan.config.storage_options)
        return result.snapshot_id
    finally:
        lake.close()


def _target_entry(ctx: CommitContext, plan: WritePlan) -> tuple[TableEntry, PartitionSpec | None]:
    """The table (created in this commit when it does not exist yet) and the partition spec the files follow."""
    try:
        entry = R.table_by_name(ctx.conn, plan.schema_name, plan.table_name, ctx.base.snapshot_id)
    except NoSuchTableError:
        return create_target(
            ctx, plan.schema_name, plan.table_name, plan.table_schema, plan.new_partition_keys, at=ctx.base.snapshot_id
        )
    if not plan.table_exists:
        raise CommitConflictError(f"table {plan.schema_name}.{plan.table_name} was created by another writer; retry")
    return entry, plan.partition


class DuckLakeBatchWriter(DataSourceArrowWriter):
    """``df.write.format("ducklake").mode("append"|"overwrite").save("main.t")``."""

    def __init__(self, plan: WritePlan, overwrite: bool) -> None:
        self.plan = plan
        self.overwrite = overwrite

    @classmethod
    def create(
        cls, config: LakeConfig, identifier: str, options: dict[str, str], schema: StructType, overwrite: bool
    ) -> DuckLakeBatchWriter:
        return cls(plan_write(config, identifier, options, schema), overwrite)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> FilesWritten:
        return FilesWritten(tuple(write_batches(self.plan, iterator)))

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        files = [f for m in messages if isinstance(m, FilesWritten) for f in m.files]
        snapshot = commit_files(self.plan, files, overwrite=self.overwrite)
        log.info(
            "ducklake write to %s.%s: %d files, %d rows, snapshot %s",
            self.plan.schema_name,
            self.plan.table_name,
            len(files),
            sum(f.written.record_count for f in files),
            snapshot,
        )

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        if any(m is None for m in messages):
            # A task failed (or never reported): the commit never ran. Tasks Spark is still killing, or that
            # finished after the failure, reported nothing: find every file of the job by its name instead.
            remove_failed_job_files(self.plan, grace_s=LATE_TASK_GRACE_S)
            return
        # Every task succeeded and the commit failed: it may have published them, so only unreferenced ones go.
        paths = [f.written.path for m in messages if isinstance(m, FilesWritten) for f in m.files]
        remove_unreferenced(self.plan, paths)


def remove_failed_job_files(plan: WritePlan, *, grace_s: float = 0.0) -> None:
    """Delete every file the plan's job wrote that no snapshot references, now and for ``grace_s`` seconds more."""
    try:
        lake = plan.config.connect()
    except Exception as e:
        log.warning("keeping the files of a failed write to %s: cannot open the lake (%s)", plan.table_name, e)
        return
    try:

        def remove() -> list[str]:
            return remove_job_files(
                lake.engine, lake.data_path, plan.table_dir, plan.job, storage_options=plan.config.storage_options
            )

        remove_job_files_late(remove, grace_s=grace_s)
    finally:
        lake.close()


def remove_unreferenced(plan: WritePlan, paths: list[str]) -> None:
    """Delete written files unless a commit already references them (abort can follow a commit that raised)."""
    if not paths:
        return
    try:
        lake = plan.config.connect()
        try:
            referenced = lake.referenced_files(paths)
        finally:
            lake.close()
    except Exception as e:
        log.warning("keeping %d written files: cannot check the catalog (%s)", len(paths), e)
        return
    delete_files([p for p in paths if p not in referenced], plan.config.storage_options)


__all__ = ["CommitStateUnknownError", "DuckLakeBatchWriter", "FilesWritten", "WritePlan"]
