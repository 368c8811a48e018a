"""Plain records read from the catalog: snapshots, schemas, tables, files."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pyspark_ducklake.catalog.snapshot_changes import ChangeSet
from pyspark_ducklake.io.row_group_count import RecordedRowGroups

if TYPE_CHECKING:
    from pyspark_ducklake.catalog.name_mapping import NameMapping


@dataclass(frozen=True)
class Snapshot:
    """A row of ``ducklake_snapshot``: the catalog state after one commit."""

    snapshot_id: int
    snapshot_time: dt.datetime | None
    schema_version: int
    next_catalog_id: int
    next_file_id: int


@dataclass(frozen=True)
class SnapshotInfo:
    """A snapshot with what it changed (``ducklake_snapshot_changes``)."""

    snapshot: Snapshot
    changes_made: str | None
    author: str | None
    commit_message: str | None
    commit_extra_info: str | None

    @property
    def snapshot_id(self) -> int:
        return self.snapshot.snapshot_id

    @property
    def changes(self) -> ChangeSet:
        return ChangeSet.parse(self.changes_made)


@dataclass(frozen=True)
class SchemaEntry:
    schema_id: int
    schema_name: str
    path: str
    path_is_relative: bool


@dataclass(frozen=True)
class TableEntry:
    table_id: int
    table_uuid: str
    schema: SchemaEntry
    table_name: str
    path: str
    path_is_relative: bool
    begin_snapshot: int


@dataclass(frozen=True)
class DeleteFileEntry:
    delete_file_id: int
    data_file_id: int
    path: str
    delete_count: int
    file_size_bytes: int | None
    footer_size: int | None
    begin_snapshot: int
    partial_max: int | None
    format: str = "parquet"  # or "puffin": a deletion vector
    encryption_key: str | None = field(default=None, repr=False)  # encrypted lakes only (base64; io.encryption)
    row_group_count: int | None = None  # DuckLake 1.1's column (None: a 1.0 catalog, or NULL)
    # The data file's other delete files visible at the same snapshot, older first. Normally none: each delete file
    # holds every earlier delete of its data file and ends the previous one. DuckDB's flush of inlined deletes of a
    # data file that was rewritten meanwhile writes one more, begun at the deletes' snapshot and holding only them,
    # beside the file's delete file of that time: the rows at those snapshots are the union of both.
    earlier: tuple[DeleteFileEntry, ...] = field(default=(), repr=False)

    @property
    def recorded_row_groups(self) -> RecordedRowGroups | None:
        """What a read checks the footer of a Parquet delete file against (nothing for a deletion vector)."""
        if self.row_group_count is None or self.format != "parquet":
            return None
        return RecordedRowGroups(self.row_group_count, "ducklake_delete_file", self.delete_file_id)


@dataclass(frozen=True)
class DataFileEntry:
    """A data file visible at a snapshot, with its absolute path and its live delete file (if any)."""

    data_file_id: int
    path: str
    record_count: int
    file_size_bytes: int
    footer_size: int | None
    row_id_start: int | None
    begin_snapshot: int
    partial_max: int | None
    mapping_id: int | None
    delete_file: DeleteFileEntry | None
    partition_id: int | None = None
    encryption_key: str | None = field(default=None, repr=False)  # encrypted lakes only (base64; io.encryption)
    # Files registered by ducklake_add_data_files: their columns by name (catalog.name_mapping).
    name_mapping: NameMapping | None = field(default=None, repr=False)
    row_group_count: int | None = None  # DuckLake 1.1's column (None: a 1.0 catalog, or NULL)

    @property
    def recorded_row_groups(self) -> RecordedRowGroups | None:
        """What a read checks the file's footer against."""
        if self.row_group_count is None:
            return None
        return RecordedRowGroups(self.row_group_count, "ducklake_data_file", self.data_file_id)


@dataclass(frozen=True)
class FileTotals:
    """A table's live data files and live delete files, counted and summed in the catalog."""

    file_count: int = 0
    file_size_bytes: int = 0
    delete_file_count: int = 0
    delete_file_size_bytes: int = 0
