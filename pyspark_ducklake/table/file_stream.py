"""One data file's live rows at a snapshot, streamed one row group at a time (the Spark data source's read).

:func:`pyspark_ducklake.table.scan.execute_file_task` reads a whole file into memory and always computes row ids and
begin snapshots (the change feed, deletes and upserts need them); a plain read needs neither. Here a file whose
columns carry field ids (every file this library or DuckDB writes) is decoded row group by row group, only the
schema's columns (and the internal snapshot column when a partial file must be cut at the snapshot), on the calling
thread; deleted positions are dropped from each row group by its place in the file; columns already of the table's
Arrow type (nested ones with the same field ids at every level) pass without a copy, the rest are converted as
``conform_table`` converts them. Files added by name mapping or without field ids take the whole-file path, so
every file reads exactly as ``execute_file_task`` reads it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from pyspark_ducklake.catalog.types import Column, TableSchema, arrow_field, arrow_type, table_of
from pyspark_ducklake.io.parquet import field_id, iter_row_groups
from pyspark_ducklake.table.conform import conform_array, default_array
from pyspark_ducklake.table.scan import (
    SNAPSHOT_ID_FIELD_ID,
    FileTask,
    execute_file_task,
    read_delete_positions,
    table_columns,
)


@dataclass(frozen=True)
class _Layout:
    """How a file's decoded columns become the schema's: per schema column its index in the row group's table
    (None: not in the file, its default) and whether it passes as decoded; the snapshot column's index."""

    sources: tuple[int | None, ...]
    as_is: tuple[bool, ...]
    snapshot_at: int | None


def stream_file_task(
    task: FileTask,
    schema: TableSchema,
    *,
    storage_options: dict[str, Any] | None = None,
    byte_range: tuple[int, int | None] = (0, None),
) -> Iterator[pa.Table]:
    """The file's live rows at the task's snapshot in the columns of ``schema`` (as ``table_columns`` of
    :func:`execute_file_task` gives them), as one table per row group; files read by name or by position come
    whole, as one table. ``byte_range``: only the row groups whose middle byte lies in it (see
    :func:`pyspark_ducklake.io.parquet.iter_row_groups`); a file read whole is read by the range starting at 0.

    Raises:
        DataFileError, EncryptedLakeError, FileDecryptionError: as ``execute_file_task``.
    """
    f = task.file
    first_range = byte_range[0] <= 0
    if f.name_mapping is not None:
        if first_range:
            yield _whole(task, schema, storage_options)
        return
    cut = f.partial_max is not None and f.partial_max > task.snapshot_id
    wanted = {c.column_id for c in schema.columns} | ({SNAPSHOT_ID_FIELD_ID} if cut else set())
    foreign = False

    def pick(file_schema: pa.Schema) -> list[str] | bool | None:
        # as execute_file_task picks: a file without field ids is read by position, whole
        nonlocal foreign
        ids = [field_id(x) for x in file_schema]
        if all(i is None for i in ids):
            foreign = True
            return False
        if len(set(file_schema.names)) != len(file_schema.names):
            return None
        return [x.name for x, i in zip(file_schema, ids, strict=True) if i in wanted]

    out_schema = pa.schema([arrow_field(c) for c in schema.columns])
    layout: _Layout | None = None
    deleted: np.ndarray | None = None
    groups = iter_row_groups(
        f.path,
        pick,
        storage_options=storage_options,
        encryption_key=f.encryption_key,
        byte_range=byte_range,
        recorded_row_groups=f.recorded_row_groups,
    )
    for first, raw in groups:
        if layout is None:
            layout = _layout(raw.schema, schema)
            deleted = _deleted_positions(task, storage_options)
        n = raw.num_rows
        keep = _kept(deleted, first, n)
        if cut and layout.snapshot_at is not None:
            snaps = raw.column(layout.snapshot_at).to_numpy(zero_copy_only=False)
            keep = (snaps <= task.snapshot_id) if keep is None else keep & (snaps <= task.snapshot_id)
        if keep is not None:
            raw = raw.filter(pa.array(keep))
            n = raw.num_rows
        yield table_of(_columns(raw, schema, layout, n), out_schema, n)
    if foreign and first_range:
        yield _whole(task, schema, storage_options)


def _whole(task: FileTask, schema: TableSchema, storage_options: dict[str, Any] | None) -> pa.Table:
    return table_columns(execute_file_task(task, schema, storage_options=storage_options), schema)


def _deleted_positions(task: FileTask, storage_options: dict[str, Any] | None) -> np.ndarray | None:
    """The file's deleted positions at the task's snapshot, sorted and unique, or None when there are none."""
    f = task.file
    parts = []
    if f.delete_file is not None:
        parts.append(read_delete_positions(f.delete_file, task.snapshot_id, storage_options, row_count=f.record_count))
    if task.inlined_deleted_positions:
        parts.append(np.array(task.inlined_deleted_positions, dtype=np.int64))
    if not parts:
        return None
    positions = np.unique(np.concatenate(parts).astype(np.int64, copy=False))
    return positions if positions.size else None


def _kept(deleted: np.ndarray | None, first: int, n: int) -> np.ndarray | None:
    """The mask of a row group's rows that were not deleted (rows ``first`` to ``first + n`` of the file), or None
    when all are kept."""
    if deleted is None:
        return None
    lo, hi = np.searchsorted(deleted, [first, first + n])
    if lo == hi:
        return None
    keep = np.ones(n, dtype=bool)
    keep[deleted[lo:hi] - first] = False
    return keep


def _layout(decoded: pa.Schema, schema: TableSchema) -> _Layout:
    fields = list(decoded)
    by_id: dict[int, int] = {}
    for i, x in enumerate(fields):
        fid = field_id(x)
        if fid is not None:
            by_id.setdefault(fid, i)
    sources: list[int | None] = []
    as_is: list[bool] = []
    for column in schema.columns:
        at = by_id.get(column.column_id)
        if at is None:  # as conform_table matches: a field without an id by the column's name
            at = next((i for i, x in enumerate(fields) if field_id(x) is None and x.name == column.name), None)
        sources.append(at)
        as_is.append(at is not None and _unchanged(fields[at], column))
    return _Layout(tuple(sources), tuple(as_is), by_id.get(SNAPSHOT_ID_FIELD_ID))


def _unchanged(decoded: pa.Field, column: Column) -> bool:
    """Whether ``conform_array`` would give the decoded column back unchanged: the table's Arrow type, and for
    nested columns the same field id at every level (a field dropped and another added under its name have equal
    Arrow types but are different fields)."""
    if column.type == "variant" or decoded.type != arrow_type(column):
        return False
    return _same_ids(decoded.type, column)


def _same_ids(t: pa.DataType, column: Column) -> bool:
    if pa.types.is_struct(t):
        return t.num_fields == len(column.children) and all(
            field_id(t.field(i)) == child.column_id and _same_ids(t.field(i).type, child)
            for i, child in enumerate(column.children)
        )
    if pa.types.is_list(t):
        (child,) = column.children
        return field_id(t.value_field) == child.column_id and _same_ids(t.value_type, child)
    if pa.types.is_map(t):
        key, item = column.children
        return (
            field_id(t.key_field) == key.column_id
            and field_id(t.item_field) == item.column_id
            and _same_ids(t.key_type, key)
            and _same_ids(t.item_type, item)
        )
    return not column.is_nested


def _columns(raw: pa.Table, schema: TableSchema, layout: _Layout, n: int) -> list[pa.Array | pa.ChunkedArray]:
    out: list[pa.Array | pa.ChunkedArray] = []
    for column, at, as_is in zip(schema.columns, layout.sources, layout.as_is, strict=True):
        if at is None:
            out.append(default_array(column, n))
        elif as_is:
            out.append(raw.column(at))
        else:
            out.append(conform_array(raw.column(at).combine_chunks(), column))
    return out


__all__ = ["stream_file_task"]
