"""Batch writes: executors write Parquet files in parallel; the driver commits them as one snapshot."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage
from pyspark.sql.types import StructType

from pyspark_ducklake.batch.spark_types import columns_from_spark
from pyspark_ducklake.catalog import reader as R
from pyspark_ducklake.catalog import writer as W
from pyspark_ducklake.catalog.entries import TableEntry
from pyspark_ducklake.catalog.paths import path_component
from pyspark_ducklake.catalog.transaction import CommitContext
from pyspark_ducklake.catalog.types import TableSchema
from pyspark_ducklake.exceptions import CommitStateUnknownError, NoSuchTableError
from pyspark_ducklake.io.fileio import delete_files
from pyspark_ducklake.io.parquet import WrittenFile
from pyspark_ducklake.lake import LakeTable, _delete_everything, parse_identifier
from pyspark_ducklake.options import LakeConfig, option_as_int
from pyspark_ducklake.table.write import conform_to_table, write_data_file

log = logging.getLogger(__name__)

TARGET_FILE_ROWS = "targetFileRows"
TARGET_FILE_ROWS_DEFAULT = 1_000_000


@dataclass(frozen=True)
class FilesWritten(WriterCommitMessage):
    """What one task wrote: file names (relative to the table folder) and their descriptions."""

    files: tuple[tuple[str, WrittenFile], ...]


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


def plan_write(config: LakeConfig, identifier: str, options: dict[str, str], spark_schema: StructType) -> WritePlan:
    """Resolve the target on the driver: the existing table, or the schema of the table the commit will create.

    Raises:
        UnsupportedTypeError: a Spark type DuckLake cannot hold (before anything is written).
        SchemaMismatchError: data columns that the existing table does not have.
    """
    schema_name, table_name = parse_identifier(identifier)
    target_rows = option_as_int(options, TARGET_FILE_ROWS, TARGET_FILE_ROWS_DEFAULT, minimum=1) or TARGET_FILE_ROWS_DEFAULT
    new_schema = columns_from_spark(spark_schema)
    lake = config.connect()
    try:
        snapshot = lake.current_snapshot_id()
        try:
            table = lake.table((schema_name, table_name), snapshot=snapshot)
        except NoSuchTableError:
            with lake.engine.connect() as conn:
                schema = R.schema_by_name(conn, schema_name, snapshot)
            table_dir = R.resolve(R.resolve(lake.data_path, schema.path, schema.path_is_relative), path_component(table_name), True)
            return WritePlan(config, schema_name, table_name, table_dir, new_schema, snapshot, False, target_rows)
        # Validate the incoming columns against the table now, so a mismatch fails before any task runs.
        conform_to_table(new_schema.arrow_schema().empty_table(), table.table_schema, table.name)
        return WritePlan(config, schema_name, table_name, lake._table_dir(table), table.table_schema, snapshot, True,
                         target_rows)
    finally:
        lake.close()


def write_batches(plan: WritePlan, batches: Iterator[pa.RecordBatch]) -> list[tuple[str, WrittenFile]]:
    """Executor side: conform batches to the table and roll Parquet files at ``target_file_rows``."""
    written: list[tuple[str, WrittenFile]] = []
    pending: list[pa.RecordBatch] = []
    rows = 0
    name = f"{plan.schema_name}.{plan.table_name}"

    def flush() -> None:
        nonlocal pending, rows
        if rows:
            data = conform_to_table(pa.Table.from_batches(pending), plan.table_schema, name)
            written.append(write_data_file(data, plan.table_dir, plan.table_schema))
        pending, rows = [], 0

    try:
        for batch in batches:
            if batch.num_rows == 0:
                continue
            pending.append(batch)
            rows += batch.num_rows
            if rows >= plan.target_file_rows:
                flush()
        flush()
    except BaseException:
        delete_files([w.path for _, w in written])
        raise
    return written


def commit_files(
    plan: WritePlan, files: list[tuple[str, WrittenFile]], *, overwrite: bool, extra_info: dict[str, Any] | None = None,
) -> int | None:
    """Driver side: one snapshot that (creates the table,) optionally empties it, and adds the files."""
    lake = plan.config.connect()
    try:
        def apply(ctx: CommitContext) -> None:
            entry = _target_entry(ctx, plan)
            schema = R.table_schema(ctx.conn, entry.table_id, ctx.snapshot_id)
            if overwrite and plan.table_exists:
                _delete_everything(ctx, LakeTable(entry, schema, ctx.base.snapshot_id), lake.data_path)
            for name, written in files:
                W.add_data_file(ctx, entry, schema, written, relative_path=name)

        if not files and not overwrite and plan.table_exists:
            return None
        result = lake._commit(apply, base=plan.base_snapshot, files=[w.path for _, w in files], extra_info=extra_info)
        return result.snapshot_id
    finally:
        lake.close()


def _target_entry(ctx: CommitContext, plan: WritePlan) -> TableEntry:
    try:
        return R.table_by_name(ctx.conn, plan.schema_name, plan.table_name, ctx.base.snapshot_id)
    except NoSuchTableError:
        schema = R.schema_by_name(ctx.conn, plan.schema_name, ctx.base.snapshot_id)
        return W.create_table(ctx, schema, plan.table_name, plan.table_schema.columns)


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
            "ducklake write to %s.%s: %d files, %d rows, snapshot %s", self.plan.schema_name, self.plan.table_name,
            len(files), sum(w.record_count for _, w in files), snapshot,
        )

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        paths = [w.path for m in messages if isinstance(m, FilesWritten) for _, w in m.files]
        remove_unreferenced(self.plan, paths)


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
    except Exception as e:  # noqa: BLE001 - with the catalog unreachable, keeping files is the only safe choice
        log.warning("keeping %d written files: cannot check the catalog (%s)", len(paths), e)
        return
    delete_files([p for p in paths if p not in referenced])


__all__ = ["CommitStateUnknownError", "DuckLakeBatchWriter", "FilesWritten", "WritePlan"]
