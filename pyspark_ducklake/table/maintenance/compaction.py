"""Merging adjacent small Parquet files, as the reference's ``ducklake_merge_adjacent_files`` does.

Candidates are a table's live data files smaller than the target size (and within ``min_file_size`` /
``max_file_size``) that never had a delete file or an inlined file delete; files added with a name mapping are left
alone too. They are grouped by the table's schema version at the file's ``begin_snapshot`` and by partition, in
``(begin_snapshot, row_id_start, data_file_id)`` order, and runs of at least two files whose sizes add up to the
target become one file. The merged file keeps every row's snapshot in ``_ducklake_internal_snapshot_id`` and its
row id (in ``_ducklake_internal_row_id`` unless the ids are one contiguous range from ``row_id_start``); it begins at
the first source's ``begin_snapshot`` with ``partial_max`` the newest source snapshot, so time travel and the change
feed read the same as before. A sorted table's merged file holds its rows in the table's current sort order, as
DuckDB's merge sorts them (their row ids then go to ``_ducklake_internal_row_id``, which DuckDB leaves out when the
sources were adjacent, renumbering the rows). The sources' rows are removed from the catalog and their files
scheduled for deletion (``ducklake_files_scheduled_for_deletion``), all in one ``merge_adjacent:<table_id>``
snapshot.

Planning reads the catalog; :func:`rewrite_group` needs only its group (frozen, picklable), so Spark executors can
rewrite groups in parallel (:mod:`pyspark_ducklake.batch.compaction_job`); :func:`apply_merge` commits them.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import pyarrow as pa

from pyspark_ducklake import options
from pyspark_ducklake.catalog import commit_rows as W
from pyspark_ducklake.catalog import reader
from pyspark_ducklake.catalog.db import Connection
from pyspark_ducklake.catalog.entries import DataFileEntry, TableEntry
from pyspark_ducklake.catalog.file_stats import stats_function
from pyspark_ducklake.catalog.format_version import FormatVersion
from pyspark_ducklake.catalog.merge_candidates import any_deleted_from, merge_candidates
from pyspark_ducklake.catalog.paths import is_inside
from pyspark_ducklake.catalog.sort_order import sort_order
from pyspark_ducklake.catalog.time_types import check_parquet_writable, utc_time_field_ids
from pyspark_ducklake.catalog.transaction import CommitContext
from pyspark_ducklake.catalog.types import TableSchema
from pyspark_ducklake.exceptions import InvalidOptionError, StalePlanError
from pyspark_ducklake.io.parquet import WrittenFile, write_table
from pyspark_ducklake.table.data_files import new_data_file_name
from pyspark_ducklake.table.flush import INTERNAL_ROW_ID, INTERNAL_SNAPSHOT_ID, internal_field
from pyspark_ducklake.table.maintenance.orphans import MaintenanceReport
from pyspark_ducklake.table.scan import (
    ROW_ID_FIELD_ID,
    ROWID,
    SNAPSHOT_ID,
    SNAPSHOT_ID_FIELD_ID,
    FileTask,
    execute_file_task,
    internal_column,
)
from pyspark_ducklake.table.sort_rows import SortKey, sort_keys, sort_table

log = logging.getLogger("pyspark_ducklake.maintenance")

DEFAULT_TARGET_FILE_SIZE = 1 << 29  # DuckLakeCatalog::DEFAULT_TARGET_FILE_SIZE (512 MiB)
_ALL_ROWS = 2**62  # a snapshot newer than any: read every row of a file


def parse_size(value: int | str, *, name: str) -> int:
    """Bytes from ``536870912``, ``"512MB"`` or ``"512MiB"`` (DuckDB's memory-size spelling).

    Raises:
        InvalidOptionError: not a size, or not positive.
    """
    return options.parse_size(value, name, minimum=1)


@dataclass(frozen=True)
class MergeGroup:
    """Files of one table, schema version and partition that become one file; pickles to executors."""

    table_id: int
    table_name: str
    schema: TableSchema  # the table's columns at the first file's snapshot, which every source was written in
    folder: str  # absolute folder of the merged file (the sources' partition folder)
    relative_folder: str  # the same, relative to the table folder
    sources: tuple[DataFileEntry, ...]
    partition_id: int | None = None
    partition_values: tuple[str | None, ...] = ()
    sort: tuple[SortKey, ...] = ()  # the table's current sort order: the rewritten file's row order

    @property
    def source_bytes(self) -> int:
        return sum(f.file_size_bytes or 0 for f in self.sources)

    @property
    def rows(self) -> int:
        return sum(f.record_count for f in self.sources)


@dataclass(frozen=True)
class MergedFile:
    """The file a group was rewritten into (not yet committed)."""

    relative_path: str
    written: WrittenFile
    row_id_start: int | None  # None: the row ids are in ``_ducklake_internal_row_id``


@dataclass(frozen=True)
class MergeOptions:
    """``ducklake_merge_adjacent_files`` parameters; None means the catalog's option or DuckLake's default."""

    target_file_size: int | None = None
    min_file_size: int | None = None
    max_file_size: int | None = None
    max_compacted_files: int | None = None

    def __post_init__(self) -> None:
        if self.max_compacted_files is not None and self.max_compacted_files <= 0:
            raise InvalidOptionError(
                f"option max_compacted_files must be greater than zero, got {self.max_compacted_files}"
            )
        if self.max_file_size is not None and self.max_file_size <= 0:
            raise InvalidOptionError(f"option max_file_size must be greater than zero, got {self.max_file_size}")
        if self.min_file_size is not None and self.max_file_size is not None:
            if self.min_file_size >= self.max_file_size:
                raise InvalidOptionError(
                    f"min_file_size ({self.min_file_size}) must be less than max_file_size ({self.max_file_size})"
                )


@dataclass(frozen=True)
class MergedGroupReport:
    table: str
    sources: tuple[str, ...]
    rows: int
    bytes_before: int
    target: str | None = None
    bytes_after: int | None = None


@dataclass(frozen=True)
class FileGroupsReport(MaintenanceReport):
    """What a compaction rewrote: groups of source files, each into (at most) one new file, in one snapshot."""

    groups: tuple[Any, ...] = ()  # each with .sources, .bytes_before and .bytes_after
    snapshot_id: int | None = None

    @property
    def files_processed(self) -> int:
        return sum(len(g.sources) for g in self.groups)

    @property
    def bytes_before(self) -> int:
        return sum(int(g.bytes_before) for g in self.groups)

    @property
    def bytes_after(self) -> int:
        return sum(int(g.bytes_after or 0) for g in self.groups)

    @property
    def files_created(self) -> int:
        return len(self.groups)

    def extra_dict(self) -> dict[str, Any]:
        return {
            "files_processed": self.files_processed,
            "files_created": self.files_created,
            "bytes_before": self.bytes_before,
            "bytes_after": self.bytes_after,
        }


@dataclass(frozen=True)
class CompactionReport(FileGroupsReport):
    """What ``merge_adjacent_files`` merged (or, in a dry run, would merge)."""

    operation: ClassVar[str] = "merge_adjacent_files"
    groups: tuple[MergedGroupReport, ...] = ()

    def summary(self) -> str:
        if not self.groups:
            return "merge_adjacent_files: nothing to merge"
        if self.dry_run:
            return (
                f"merge_adjacent_files (dry run): would merge {self.files_processed} files "
                f"({self.bytes_before} bytes) into {self.files_created}"
            )
        return (
            f"merge_adjacent_files: merged {self.files_processed} files ({self.bytes_before} bytes) into "
            f"{self.files_created} ({self.bytes_after} bytes) in snapshot {self.snapshot_id}"
        )


def group_report(group: MergeGroup, merged: MergedFile | None = None) -> MergedGroupReport:
    return MergedGroupReport(
        table=group.table_name,
        sources=tuple(f.path for f in group.sources),
        rows=group.rows,
        bytes_before=group.source_bytes,
        target=None if merged is None else merged.written.path,
        bytes_after=None if merged is None else merged.written.file_size_bytes,
    )


def scoped_option(conn: Connection, key: str, table: TableEntry) -> str | None:
    """A ``ducklake_metadata`` option for the table: table scope, then schema scope, then global."""
    return reader.scoped_metadata_value(conn, key, table)


def auto_compact(conn: Connection, table: TableEntry) -> bool:
    """Whether maintenance may rewrite the table's files (its ``auto_compact`` option is not false)."""
    return (scoped_option(conn, "auto_compact", table) or "true").lower() == "true"


def file_order(f: DataFileEntry) -> tuple[int, bool, int, int]:
    """The order the reference lists a table's files for compaction: begin snapshot, row_id_start, id."""
    return (f.begin_snapshot, f.row_id_start is None, f.row_id_start or 0, f.data_file_id)


@dataclass(frozen=True)
class FileGrouping:
    """How compaction groups a table's files: by the schema version at a file's ``begin_snapshot`` and by its
    partition (id and values); a group's output goes to its first file's folder under the table's."""

    table: TableEntry
    base: str  # the table's folder
    versions: list[tuple[int, int]]
    partitions: dict[int, tuple[str | None, ...]]

    @classmethod
    def read(cls, conn: Connection, table: TableEntry, data_path: str, operation: str) -> FileGrouping | None:
        """None when the table's folder lies outside the data path (its files are left alone, with a warning)."""
        base = reader.table_path(table, data_path)
        if not is_inside(base, data_path):
            log.warning(
                "%s: skipping %s, whose folder %s lies outside the data path", operation, table.table_name, base
            )
            return None
        return cls(
            table,
            base,
            reader.schema_version_starts(conn, table.table_id),
            reader.file_partition_values(conn, table.table_id),
        )

    def key(self, f: DataFileEntry) -> tuple[Any, ...]:
        return (_version_at(self.versions, f.begin_snapshot), f.partition_id, self.partitions.get(f.data_file_id, ()))

    def group(self, conn: Connection, sources: tuple[DataFileEntry, ...], snapshot_id: int) -> MergeGroup:
        """One group of ``sources`` to rewrite into one file, sorted by the table's sort order at ``snapshot_id``
        (the order now, not when the files were written, as DuckDB's compaction sorts).

        Raises:
            UnsupportedSortOrderError: the table's sort order has a key this library cannot evaluate.
        """
        table, base, first = self.table, self.base, sources[0]
        # The merged file goes where the first source lives (its partition folder), as the reference does.
        relative_folder = ""
        if first.path.startswith(base) and "/" in first.path[len(base) :]:
            relative_folder = first.path[len(base) :].rsplit("/", 1)[0] + "/"
            if not is_inside(base + relative_folder + "x", base):
                relative_folder = ""  # a catalog path with ../ segments: the merged file stays in the table folder
        schema = reader.table_schema(conn, table.table_id, first.begin_snapshot)
        name = f"{table.schema.schema_name}.{table.table_name}"
        check_parquet_writable(schema.columns, name)
        order = sort_order(conn, table.table_id, snapshot_id)
        keys = () if order is None else sort_keys(order, reader.table_schema(conn, table.table_id, snapshot_id), name)
        return MergeGroup(
            table.table_id,
            name,
            schema,
            base + relative_folder,
            relative_folder,
            sources,
            first.partition_id,
            self.partitions.get(first.data_file_id, ()),
            keys,
        )


def plan_table(
    conn: Connection, table: TableEntry, snapshot_id: int, data_path: str, fmt: FormatVersion, options: MergeOptions
) -> list[MergeGroup]:
    """The groups ``ducklake_merge_adjacent_files`` would merge for one table at the snapshot."""
    if not auto_compact(conn, table):
        return []
    if options.target_file_size is not None:
        target = options.target_file_size
    else:
        configured = scoped_option(conn, "target_file_size", table)
        target = parse_size(configured, name="target_file_size") if configured else DEFAULT_TARGET_FILE_SIZE
    limit = options.max_file_size if options.max_file_size is not None else target
    minimum = options.min_file_size or 0
    # the candidates are chosen in SQL: the table's files that ever had deletes stay in the database
    mergeable = merge_candidates(conn, table.table_id, snapshot_id, minimum, limit)
    files = reader.data_files(conn, table, snapshot_id, data_path, fmt, among=mergeable)
    if len(files) < 2:
        return []
    files.sort(key=file_order)
    grouping = FileGrouping.read(conn, table, data_path, "merge_adjacent_files")
    if grouping is None:
        return []
    groups: dict[tuple[Any, ...], list[DataFileEntry]] = {}
    for f in files:
        if (f.file_size_bytes or 0) >= target:
            continue
        groups.setdefault(grouping.key(f), []).append(f)
    out: list[MergeGroup] = []
    processed = 0
    max_files = options.max_compacted_files
    for candidates in groups.values():
        if len(candidates) <= 1:
            continue
        start = 0
        while start < len(candidates):
            size, end = 0, start
            while end < len(candidates) and size < target:
                file_size = candidates[end].file_size_bytes or 0
                if file_size >= target:
                    break
                size += file_size
                end += 1
            if end - start >= 2:
                out.append(grouping.group(conn, tuple(candidates[start:end]), snapshot_id))
                start = end - 1
            processed += 1
            start += 1
            if max_files is not None and processed >= max_files:
                return out
    return out


def _version_at(ranges: list[tuple[int, int]], snapshot_id: int) -> int | None:
    found = None
    for begin, version in ranges:
        if begin > snapshot_id:
            break
        found = version
    return found


def rewrite_group(group: MergeGroup, storage_options: dict[str, Any] | None = None) -> MergedFile:
    """Read the group's files and write them as one Parquet file in the group's folder (no catalog access)."""
    parts = [
        execute_file_task(FileTask(source, _ALL_ROWS), group.schema, storage_options=storage_options)
        for source in group.sources
    ]
    data = sort_table(pa.concat_tables(parts), group.sort, group.schema)
    row_ids = internal_column(data, group.schema, ROWID).combine_chunks().cast(pa.int64())
    first = group.sources[0].row_id_start
    contiguous = first is not None and np.array_equal(
        row_ids.to_numpy(zero_copy_only=False), np.arange(first, first + data.num_rows, dtype=np.int64)
    )
    snapshots = internal_column(data, group.schema, SNAPSHOT_ID).combine_chunks().cast(pa.int64())
    return write_group_file(
        group,
        data,
        storage_options,
        row_ids=None if contiguous else row_ids,
        snapshot_ids=snapshots,
        row_id_start=first if contiguous else None,
    )


def write_group_file(
    group: MergeGroup,
    data: pa.Table,
    storage_options: dict[str, Any] | None,
    *,
    row_ids: pa.Array | None,
    snapshot_ids: pa.Array | None,
    row_id_start: int | None,
) -> MergedFile:
    """Write ``data``'s columns of the group's schema, with ``_ducklake_internal_row_id`` / ``_snapshot_id`` where
    given, as one file in the group's folder (encrypted in an encrypted lake)."""
    n = len(group.schema.columns)
    columns = [data.column(i) for i in range(n)]
    fields = [data.schema.field(i) for i in range(n)]
    for values, name, field_id in (
        (row_ids, INTERNAL_ROW_ID, ROW_ID_FIELD_ID),
        (snapshot_ids, INTERNAL_SNAPSHOT_ID, SNAPSHOT_ID_FIELD_ID),
    ):
        if values is not None:
            columns.append(values)
            fields.append(internal_field(name, field_id))
    file_name = new_data_file_name()
    written = write_table(
        pa.Table.from_arrays(columns, schema=pa.schema(fields)),
        group.folder + file_name,
        stats=stats_function(group.schema),
        storage_options=storage_options,
        encrypt=any(s.encryption_key for s in group.sources),  # sources have keys in encrypted lakes only
        utc_time_ids=utc_time_field_ids(group.schema.columns),
    )
    return MergedFile(group.relative_folder + file_name, written, row_id_start)


def apply_merge(
    ctx: CommitContext,
    tables: dict[int, TableEntry],
    groups: Sequence[tuple[MergeGroup, MergedFile]],
    skipped: list[int] | None = None,
) -> None:
    """Commit merged files: the sources leave the catalog (files scheduled for deletion), the merged file enters.

    With ``skipped`` (a list this fills on every attempt), a group whose sources another writer deleted from,
    compacted or removed since it was planned is left out (its index recorded; its merged file is the caller's to
    remove) and the others commit; without it, such a group fails the commit.

    Raises:
        StalePlanError: a source file changed since it was planned (without ``skipped``, or every group changed).
    """
    if skipped is not None:
        skipped.clear()
    for index, (group, merged) in enumerate(groups):
        try:
            _check_unchanged(ctx, group)
        except StalePlanError:
            if skipped is None or len(skipped) + 1 == len(groups):
                raise
            skipped.append(index)
            continue
        table = tables[group.table_id]
        W.remove_data_files(ctx, [(f.data_file_id, f.path) for f in group.sources])
        W.add_compacted_file(
            ctx,
            table,
            group.schema,
            merged.written,
            relative_path=merged.relative_path,
            begin_snapshot=group.sources[0].begin_snapshot,
            row_id_start=merged.row_id_start,
            partial_max=max(f.partial_max or f.begin_snapshot for f in group.sources),
            partition_id=group.partition_id,
            partition_values=group.partition_values,
        )
        ctx.changes.merge_adjacent.add(group.table_id)


def _check_unchanged(ctx: CommitContext, group: MergeGroup) -> None:
    ids = [f.data_file_id for f in group.sources]
    live = reader.count_live_files(ctx.conn, ids)
    changed = live != len(ids) or any_deleted_from(ctx.conn, group.table_id, ctx.snapshot_id, ids)
    if changed:
        raise StalePlanError(
            f"transaction conflict: files of {group.table_name} being merged were deleted from or compacted by "
            "another writer; run merge_adjacent_files again"
        )


__all__ = [
    "DEFAULT_TARGET_FILE_SIZE",
    "CompactionReport",
    "FileGrouping",
    "FileGroupsReport",
    "MergeGroup",
    "MergeOptions",
    "MergedFile",
    "apply_merge",
    "auto_compact",
    "file_order",
    "group_report",
    "parse_size",
    "plan_table",
    "rewrite_group",
    "write_group_file",
]
