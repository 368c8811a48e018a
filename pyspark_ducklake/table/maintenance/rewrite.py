"""Rewriting data files that have deletes, as the reference's ``ducklake_rewrite_data_files`` (DuckDB 1.5.5) does.

Candidates are a table's live data files whose deleted rows (the live delete file's ``delete_count`` plus their
positions in ``ducklake_inlined_delete_<tid>``) are at least ``delete_threshold`` of their ``record_count`` (default:
the ``rewrite_delete_threshold`` option of the table, its schema or the lake, else 0.95). They are grouped by the
table's schema version at the file's ``begin_snapshot`` and by partition, in ``(begin_snapshot, row_id_start,
data_file_id)`` order, and each group becomes one file of its live rows (none when every row was deleted), in the
table's sort order when it has one. That file begins at the rewrite's snapshot and keeps every row's id in
``_ducklake_internal_row_id`` (``row_id_start`` is NULL); it carries no ``_ducklake_internal_snapshot_id``.

In the same ``rewrite_delete:<table_id>`` snapshot the sources and their live delete files are ended, not removed:
time travel before the rewrite still reads them, and the change feed sees no change (``table.change_feed``).
Expiring the older snapshots later schedules them for deletion. When no delete remains in the table its
statistics are recomputed from the live files (``catalog.rewrite_stats``), as DuckDB recomputes them.

Planning reads the catalog; :func:`rewrite_deletes` needs only its group (frozen, picklable), so Spark executors
can rewrite groups in parallel (:mod:`pyspark_ducklake.batch.compaction_job`); :func:`apply_rewrite` commits them
after checking that no source was deleted from, rewritten or removed meanwhile.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import pyarrow as pa

from pyspark_ducklake import options
from pyspark_ducklake.catalog import commit_rows as W
from pyspark_ducklake.catalog import reader
from pyspark_ducklake.catalog.db import Connection
from pyspark_ducklake.catalog.entries import DataFileEntry, TableEntry
from pyspark_ducklake.catalog.format_version import FormatVersion
from pyspark_ducklake.catalog.inlined_tables import inlined_file_deletes
from pyspark_ducklake.catalog.rewrite_stats import recompute_after_rewrite
from pyspark_ducklake.catalog.transaction import CommitContext
from pyspark_ducklake.exceptions import InvalidOptionError, StalePlanError
from pyspark_ducklake.table.maintenance.compaction import (
    FileGrouping,
    FileGroupsReport,
    MergedFile,
    MergeGroup,
    auto_compact,
    file_order,
    scoped_option,
    write_group_file,
)
from pyspark_ducklake.table.scan import ROWID, FileTask, execute_file_task, internal_column
from pyspark_ducklake.table.sort_rows import sort_table

DEFAULT_DELETE_THRESHOLD = 0.95  # ducklake_compaction_functions.cpp GetDeleteThreshold
THRESHOLD_OPTION = "rewrite_delete_threshold"


def parse_threshold(value: object, name: str = "delete_threshold") -> float:
    """A delete ratio between 0 and 1.

    Raises:
        InvalidOptionError: not a number, or outside [0, 1] (DuckDB's "must be between 0 and 1").
    """
    try:
        threshold = options.parse_float(value, name)
    except InvalidOptionError:
        threshold = math.nan
    if not 0 <= threshold <= 1:
        raise InvalidOptionError(f"option {name} must be between 0 and 1 (a share of a file's rows), got {value!r}")
    return threshold


@dataclass(frozen=True)
class RewriteGroup:
    """Files of one table, schema version and partition whose live rows become one file; pickles to executors."""

    group: MergeGroup  # the sources (each with its live delete file), their schema, folder, partition, sort order
    snapshot_id: int  # the live rows are those of this snapshot
    inlined_deleted: tuple[tuple[int, ...], ...]  # per source: its positions in ducklake_inlined_delete_<tid>

    @property
    def deleted(self) -> int:
        return sum(_deleted(f, len(p)) for f, p in zip(self.group.sources, self.inlined_deleted, strict=True))

    @property
    def rows(self) -> int:
        """Live rows: what the new file holds."""
        return self.group.rows - self.deleted


def _deleted(f: DataFileEntry, inlined: int) -> int:
    return (f.delete_file.delete_count if f.delete_file is not None else 0) + inlined


@dataclass(frozen=True)
class RewrittenGroupReport:
    table: str
    sources: tuple[str, ...]
    rows_before: int  # the sources' records, deleted rows included
    rows_deleted: int
    bytes_before: int
    target: str | None = None  # None: every row was deleted, or a dry run
    bytes_after: int | None = None


@dataclass(frozen=True)
class RewriteReport(FileGroupsReport):
    """What ``rewrite_data_files`` rewrote (or, in a dry run, would rewrite)."""

    operation: ClassVar[str] = "rewrite_data_files"
    groups: tuple[RewrittenGroupReport, ...] = ()
    delete_threshold: float | None = None  # the value given, None when each table's option (or 0.95) applied

    @property
    def files_created(self) -> int:
        return sum(1 for g in self.groups if g.target is not None or (self.dry_run and g.rows_before > g.rows_deleted))

    @property
    def rows_removed(self) -> int:
        return sum(g.rows_deleted for g in self.groups)

    def summary(self) -> str:
        if not self.groups:
            return "rewrite_data_files: nothing to rewrite"
        what = f"{self.files_processed} files ({self.bytes_before} bytes, {self.rows_removed} deleted rows)"
        if self.dry_run:
            return f"rewrite_data_files (dry run): would rewrite {what} into {self.files_created}"
        return (
            f"rewrite_data_files: rewrote {what} into {self.files_created} ({self.bytes_after} bytes) in snapshot "
            f"{self.snapshot_id}"
        )

    def extra_dict(self) -> dict[str, Any]:
        return {**super().extra_dict(), "rows_removed": self.rows_removed}


def group_report(rg: RewriteGroup, written: MergedFile | None = None) -> RewrittenGroupReport:
    g = rg.group
    return RewrittenGroupReport(
        table=g.table_name,
        sources=tuple(f.path for f in g.sources),
        rows_before=g.rows,
        rows_deleted=rg.deleted,
        bytes_before=g.source_bytes,
        target=None if written is None else written.written.path,
        bytes_after=None if written is None else written.written.file_size_bytes,
    )


def plan_table(
    conn: Connection, table: TableEntry, snapshot_id: int, data_path: str, fmt: FormatVersion, threshold: float | None
) -> list[RewriteGroup]:
    """The groups ``ducklake_rewrite_data_files`` would rewrite for one table at the snapshot.

    Raises:
        InvalidOptionError: the table's ``rewrite_delete_threshold`` option is not a ratio.
        UnsupportedSortOrderError: the table's sort order has a key this library cannot evaluate.
    """
    if not auto_compact(conn, table):
        return []
    if threshold is None:
        configured = scoped_option(conn, THRESHOLD_OPTION, table)
        threshold = DEFAULT_DELETE_THRESHOLD if configured is None else parse_threshold(configured, THRESHOLD_OPTION)
    inlined = inlined_file_deletes(conn, table.table_id, snapshot_id)
    files = []
    for f in sorted(reader.data_files(conn, table, snapshot_id, data_path, fmt), key=file_order):
        deleted = _deleted(f, len(inlined.get(f.data_file_id, ())))
        ratio = deleted / f.record_count if f.record_count > 0 else 0.0
        if deleted > 0 and ratio >= threshold:
            files.append(f)
    if not files:
        return []
    grouping = FileGrouping.read(conn, table, data_path, "rewrite_data_files")
    if grouping is None:
        return []
    groups: dict[tuple[Any, ...], list[DataFileEntry]] = {}
    for f in files:
        groups.setdefault(grouping.key(f), []).append(f)
    return [
        RewriteGroup(
            grouping.group(conn, tuple(sources), snapshot_id),
            snapshot_id,
            tuple(tuple(sorted(p for p, _ in inlined.get(f.data_file_id, ()))) for f in sources),
        )
        for sources in groups.values()
    ]


def rewrite_deletes(rg: RewriteGroup, storage_options: dict[str, Any] | None = None) -> MergedFile | None:
    """Read the group's live rows and write them as one Parquet file in the group's folder (no catalog access);
    None when no row is left."""
    group = rg.group
    parts = [
        execute_file_task(FileTask(source, rg.snapshot_id, deleted), group.schema, storage_options=storage_options)
        for source, deleted in zip(group.sources, rg.inlined_deleted, strict=True)
    ]
    data = sort_table(pa.concat_tables(parts), group.sort, group.schema)
    if data.num_rows == 0:
        return None
    # every row keeps its id: the deleted rows leave gaps, so the ids are always written (and no snapshot ids)
    row_ids = internal_column(data, group.schema, ROWID).combine_chunks().cast(pa.int64())
    return write_group_file(group, data, storage_options, row_ids=row_ids, snapshot_ids=None, row_id_start=None)


def apply_rewrite(
    ctx: CommitContext,
    tables: dict[int, TableEntry],
    groups: Sequence[tuple[RewriteGroup, MergedFile | None]],
    skipped: list[int] | None = None,
) -> None:
    """Commit rewritten groups: the sources and their live delete files end, the new file (if any) begins.

    With ``skipped`` (a list this fills on every attempt), a group whose sources another writer deleted from,
    rewrote or removed since it was planned is left out (its index recorded; its file is the caller's to remove)
    and the others commit; without it, such a group fails the commit.

    Raises:
        StalePlanError: a source changed since it was planned (without ``skipped``, or every group changed).
    """
    if skipped is not None:
        skipped.clear()
    recomputed: set[int] = set()
    for index, (rg, written) in enumerate(groups):
        group = rg.group
        try:
            for f in group.sources:
                planned = None if f.delete_file is None else f.delete_file.delete_file_id
                W.check_data_file(ctx, group.table_id, f.data_file_id, planned, deletes_seen=rg.snapshot_id)
        except StalePlanError as e:
            if skipped is None or len(skipped) + 1 == len(groups):
                raise StalePlanError(
                    f"transaction conflict: files of {group.table_name} being rewritten were deleted from, rewritten "
                    f"or removed by another writer ({e}); run rewrite_data_files again"
                ) from e
            skipped.append(index)
            continue
        W.end_rewritten_files(
            ctx,
            [(f.data_file_id, None if f.delete_file is None else f.delete_file.delete_file_id) for f in group.sources],
        )
        if written is not None:
            W.add_data_file(
                ctx,
                tables[group.table_id],
                group.schema,
                written.written,
                relative_path=written.relative_path,
                row_id_start=None,
                count_rows=False,
                partition_id=group.partition_id,
                partition_values=group.partition_values,
                table_stats=False,
            )
        ctx.changes.rewrite_delete.add(group.table_id)
        if group.table_id not in recomputed:
            recomputed.add(group.table_id)
            W.recompute_table_stats(ctx, functools.partial(recompute_after_rewrite, table_id=group.table_id))


__all__ = [
    "DEFAULT_DELETE_THRESHOLD",
    "THRESHOLD_OPTION",
    "RewriteGroup",
    "RewriteReport",
    "RewrittenGroupReport",
    "apply_rewrite",
    "group_report",
    "parse_threshold",
    "plan_table",
    "rewrite_deletes",
]
