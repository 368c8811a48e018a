"""Committing a change to tables: one snapshot through the commit protocol with a lake's settings, and the table
operations every writer's apply function shares (registering written files, ending every row, the table's folder).

The Python API, the Spark batch writer and the sink commit through here; none of them reaches into another.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from pyspark_ducklake.catalog import commit_rows as W
from pyspark_ducklake.catalog import reader
from pyspark_ducklake.catalog.catalog import CatalogInfo
from pyspark_ducklake.catalog.db import Engine
from pyspark_ducklake.catalog.entries import TableEntry
from pyspark_ducklake.catalog.partitioning import PartitionSpec, partition_spec
from pyspark_ducklake.catalog.paths import checked_table_dir
from pyspark_ducklake.catalog.transaction import CommitContext, CommitResult, Plan, RetryConfig, run_commit
from pyspark_ducklake.catalog.types import TableSchema
from pyspark_ducklake.exceptions import CommitConflictError, CommitStateUnknownError, DuckLakeError
from pyspark_ducklake.io.fileio import delete_files
from pyspark_ducklake.table.data_files import PendingFile
from pyspark_ducklake.table.lake_table import LakeTable


class LakeHandle(Protocol):
    """What table operations need of a lake (:class:`pyspark_ducklake.Lake` is one): its catalog, data path and
    commit settings."""

    engine: Engine
    info: CatalogInfo  # what the catalog says of the lake (its data path, whether it is encrypted)
    data_path: str
    retry: RetryConfig
    author: str | None
    storage_options: dict[str, Any] | None


def commit(
    lake: LakeHandle,
    apply: Any,
    *,
    base: int | None,
    files: list[str] | None = None,
    extra_info: dict[str, Any] | str | None = None,
    message: str | None = None,
    replan: Callable[[], Plan | None] | None = None,
) -> CommitResult:
    """Commit one snapshot whose changes ``apply(ctx)`` makes, with the table statistics brought up to date.

    Raises:
        CommitFailedError, CommitConflictError: the commit failed; ``files`` (written for it) were deleted.
        CommitStateUnknownError: the snapshot may have landed; ``files`` are kept.
    """

    def finalize(ctx: CommitContext) -> None:
        W.write_table_stats(ctx)

    try:
        return run_commit(
            lake.engine,
            apply,
            base_snapshot_id=base,
            data_path=lake.data_path,
            retry=lake.retry,
            author=lake.author,
            commit_message=message,
            commit_extra_info=extra_info,
            finalize=finalize,
            storage_options=lake.storage_options,
            replan=replan,
        )
    except CommitStateUnknownError:
        raise  # the snapshot may have landed: its files must stay
    except DuckLakeError:
        if files:
            delete_files(files, lake.storage_options)
        raise


def commit_replanned(
    lake: LakeHandle,
    first: Plan,
    replan: Callable[[], Plan | None] | None,
    written: list[list[str]],
    *,
    extra_info: dict[str, Any] | str | None = None,
) -> CommitResult:
    """Commit ``first``, planned again by ``replan`` whenever another writer changed the table; ``written`` holds the
    files each plan wrote (one list per plan, appended by the planner). Afterwards the files of every plan that did not
    land are deleted; the last plan's files stay when the commit landed or may have landed."""
    committed = False
    try:
        result = commit(lake, first.apply, base=first.base_snapshot_id, replan=replan, extra_info=extra_info)
        committed = result.snapshot_id is not None
    except CommitStateUnknownError:
        written = written[:-1]  # the last plan's files may be in the snapshot
        raise
    finally:
        stale = written if not committed else written[:-1]
        paths = [p for group in stale for p in group]
        if paths:
            delete_files(paths, lake.storage_options)
    return result


def table_folder(table: LakeTable, data_path: str) -> str:
    """The table's folder, for writing into it.

    Raises:
        DataFileError: the catalog places it outside the data path.
    """
    return checked_table_dir(reader.table_path(table.entry, data_path), data_path, table.name)


def add_pending_files(
    ctx: CommitContext,
    entry: TableEntry,
    schema: TableSchema,
    partition: PartitionSpec | None,
    files: list[PendingFile],
) -> None:
    """Register written files, checking the partition spec they were written for is still the table's."""
    if any(f.partition_values for f in files) or partition is not None:
        current = partition_spec(ctx.conn, entry.table_id, ctx.snapshot_id, schema)
        if (current.partition_id if current else None) != (partition.partition_id if partition else None):
            raise CommitConflictError(
                f"table {entry.schema.schema_name}.{entry.table_name} was re-partitioned by another writer; retry"
            )
    for f in files:
        W.add_data_file(
            ctx,
            entry,
            schema,
            f.written,
            relative_path=f.relative_path,
            partition_id=partition.partition_id if partition else None,
            partition_values=f.partition_values,
        )


def current_schema(ctx: CommitContext, table: LakeTable) -> TableSchema:
    """The table's columns as of the attempt's base snapshot, which must be those ``table`` was planned with.

    Raises:
        CommitConflictError: another writer altered the table since.
    """
    schema = reader.table_schema(ctx.conn, table.table_id, ctx.base.snapshot_id)
    if schema != table.table_schema:
        raise CommitConflictError(f"table {table.name} was altered by another writer; re-read it and retry")
    return schema


def delete_everything(ctx: CommitContext, table: LakeTable, data_path: str) -> None:
    """End every live data file and inlined row of the table, as of the newest snapshot (read in this attempt)."""
    for f in reader.data_files(ctx.conn, table.entry, ctx.base.snapshot_id, data_path, ctx.format):
        W.end_data_file(ctx, table.entry, f.data_file_id)
    W.end_all_inlined_rows(ctx, table.table_id)
