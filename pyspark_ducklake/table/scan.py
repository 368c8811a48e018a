"""Reading a table at a snapshot: data files minus deletes, plus live inlined rows.

The plan (which files, which delete files, which inlined tables) comes from the catalog in one read; executing a
plan task needs only the task itself, so Spark executors can run them in parallel.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pyspark_ducklake.catalog import reader
from pyspark_ducklake.catalog.corrupt import reading
from pyspark_ducklake.catalog.db import Connection
from pyspark_ducklake.catalog.entries import DataFileEntry, DeleteFileEntry, TableEntry
from pyspark_ducklake.catalog.format_version import FormatVersion
from pyspark_ducklake.catalog.inlined_tables import (
    columns_at_schema_version,
    decoded_values,
    inlined_file_deletes,
    inlined_layout,
    inlined_rows,
)
from pyspark_ducklake.catalog.types import Column, TableSchema, arrow_field, empty_table
from pyspark_ducklake.exceptions import InvalidOptionError
from pyspark_ducklake.io.deletion_vector import PARQUET, PUFFIN, read_deletion_vector
from pyspark_ducklake.io.parquet import field_id, read_columns
from pyspark_ducklake.io.row_group_count import RecordedRowGroups
from pyspark_ducklake.table import filters as filters_module
from pyspark_ducklake.table.conform import conform_table, default_array
from pyspark_ducklake.table.data_files import DELETE_POS_ID
from pyspark_ducklake.table.filters import FILTER_OPERATORS
from pyspark_ducklake.table.name_mapped import apply_name_mapping, apply_positional, conform_foreign, without_field_ids
from pyspark_ducklake.table.projection import project
from pyspark_ducklake.table.pruning import prune_files

ROW_ID_FIELD_ID = 2147483540
SNAPSHOT_ID_FIELD_ID = 2147483539
ROWID = "rowid"
SNAPSHOT_ID = "snapshot_id"
VIRTUAL_COLUMNS = (ROWID, SNAPSHOT_ID)
# Names that reach the virtual columns when the table has columns named rowid / snapshot_id (DuckLake's own names
# for them in data files).
VIRTUAL_ALIASES = {ROWID: "_ducklake_internal_row_id", SNAPSHOT_ID: "_ducklake_internal_snapshot_id"}


@dataclass(frozen=True)
class FileTask:
    """One data file to read at a snapshot, with the positions deleted from it."""

    file: DataFileEntry
    snapshot_id: int
    inlined_deleted_positions: tuple[int, ...] = ()


@dataclass(frozen=True)
class InlinedTask:
    """Live rows of the inlined-data tables, already fetched from the catalog (they are small by design)."""

    data: pa.Table


@dataclass
class ScanPlan:
    table: TableEntry
    schema: TableSchema
    snapshot_id: int
    files: list[FileTask] = field(default_factory=list)
    inlined: InlinedTask | None = None
    pruned_files: int = 0


def plan_scan(
    conn: Connection,
    table: TableEntry,
    snapshot_id: int,
    data_path: str,
    *,
    fmt: FormatVersion,
    filters: Any = None,
    columns: Collection[str] | None = None,
    full: TableSchema | None = None,
) -> ScanPlan:
    """Everything needed to read ``table`` at ``snapshot_id``; files whose stats exclude ``filters`` (as
    :func:`filter_expression` takes them) are pruned. With ``columns`` the plan reads only the table columns
    named there (the filter's columns must be among them), so a column of a type this library cannot read blocks
    only reads that select it. ``full``: the table's schema at the snapshot, when the caller has read it already.
    ``fmt``: the catalog's format version (on 1.1 each file's ``row_group_count`` is checked when it is read).

    Raises:
        CorruptCatalogError: a catalog value that does not parse, naming where it is and the snapshot.
    """
    with reading(snapshot_id):
        if full is None:
            full = reader.table_schema(conn, table.table_id, snapshot_id)
        schema = project(full, columns)
        plan = ScanPlan(table, schema, snapshot_id)
        files = reader.data_files(conn, table, snapshot_id, data_path, fmt)
        if filters is not None:
            files, plan.pruned_files = prune_files(conn, table, full, files, filters)
        inlined_deletes = read_inlined_file_deletes(conn, table.table_id, snapshot_id)
        for f in files:
            plan.files.append(FileTask(f, snapshot_id, tuple(sorted(inlined_deletes.get(f.data_file_id, ())))))
        plan.inlined = InlinedTask(read_inlined_rows(conn, table.table_id, schema, snapshot_id))
    return plan


def read_inlined_file_deletes(conn: Connection, table_id: int, snapshot_id: int) -> dict[int, set[int]]:
    return {fid: {pos for pos, _ in dels} for fid, dels in inlined_file_deletes(conn, table_id, snapshot_id).items()}


def read_inlined_rows(
    conn: Connection,
    table_id: int,
    schema: TableSchema,
    snapshot_id: int,
    *,
    include_ended: bool = False,
    changed_since: int | None = None,
) -> pa.Table:
    """Live inlined rows at the snapshot, in the table's schema, with ``rowid`` and ``snapshot_id`` (``include_ended``:
    ended ones too, with ``end_snapshot``; ``changed_since``: only those begun or ended since that snapshot)."""
    parts = []
    backend = conn.dialect.name
    for name, sv in reader.inlined_tables(conn, table_id):
        if not reader.has_table(conn, name):
            continue
        old = columns_at_schema_version(conn, table_id, sv, schema)
        layout = inlined_layout(conn, name, old.columns)
        cols = layout.columns
        rows = inlined_rows(
            conn, layout, snapshot_id=snapshot_id, include_ended=include_ended, changed_since=changed_since
        )
        if not rows:
            continue
        n = len(rows)
        by_id = {c.column_id: c for c in cols}
        arrays = []
        for column in schema.columns:
            src = by_id.get(column.column_id)
            if src is None:
                arrays.append(default_array(column, n))
                continue
            decoded = decoded_values(rows, src, backend, table=name)
            arrays.append(_retype(decoded, src, column))
        arrays.append(pa.array([r.row_id for r in rows], pa.int64()))
        arrays.append(pa.array([r.begin_snapshot for r in rows], pa.int64()))
        names = [*schema.names(), ROWID, SNAPSHOT_ID]
        if include_ended:
            arrays.append(pa.array([r.end_snapshot for r in rows], pa.int64()))
            names.append("end_snapshot")
        parts.append(pa.Table.from_arrays(arrays, names=names))
    if not parts:
        return empty_result(schema, with_virtual=True)
    return pa.concat_tables([p.cast(parts[0].schema) for p in parts])


def _retype(arr: pa.Array, src: Column, column: Column) -> pa.Array:
    if src.type == column.type and src.children == column.children:
        return arr
    from pyspark_ducklake.table.conform import conform_array

    # Convert to the current column; nested fields are matched by field id (renamed, added, dropped fields).
    return conform_array(arr, column)


def empty_result(schema: TableSchema, *, with_virtual: bool) -> pa.Table:
    fields = [arrow_field(c) for c in schema.columns]
    if with_virtual:
        fields += [pa.field(ROWID, pa.int64()), pa.field(SNAPSHOT_ID, pa.int64())]
    return empty_table(pa.schema(fields))


FILE_POSITION = "_file_position"


def execute_file_task(
    task: FileTask,
    schema: TableSchema,
    *,
    storage_options: dict[str, Any] | None = None,
    with_positions: bool = False,
    row_groups: Sequence[tuple[int, int, int]] | None = None,
) -> pa.Table:
    """Read one data file's live rows at the task's snapshot, with ``rowid`` and ``snapshot_id``.

    With ``with_positions`` a ``_file_position`` column gives each row's position in the file (for delete files).
    Only the columns of ``schema`` (a projection: an upsert reads just the key columns) and the internal ones are
    decoded from a file with field ids. ``row_groups``: only these row groups, each ``(index, its first row's
    position in the file, rows)``.
    """
    f = task.file
    wanted = {c.column_id for c in schema.columns} | {ROW_ID_FIELD_ID, SNAPSHOT_ID_FIELD_ID}

    def pick(file_schema: pa.Schema) -> list[str] | None:
        # only the schema's columns are decoded, in a file of ours or DuckDB's (columns known by field id)
        if f.name_mapping is not None or len(set(file_schema.names)) != len(file_schema.names):
            return None
        ids = [field_id(x) for x in file_schema]
        if all(i is None for i in ids):
            return None
        return [x.name for x, i in zip(file_schema, ids, strict=True) if i in wanted]

    raw = read_columns(
        f.path,
        pick,
        storage_options=storage_options,
        encryption_key=f.encryption_key,
        row_groups=None if row_groups is None else [g[0] for g in row_groups],
        recorded_row_groups=f.recorded_row_groups,
    )
    foreign = f.name_mapping is not None or without_field_ids(raw)
    if f.name_mapping is not None:  # an added file: columns by name, not field id
        raw = apply_name_mapping(raw, f.name_mapping, f.path, schema)
    elif foreign:  # neither mapping nor field ids: by position, as DuckDB
        raw = apply_positional(raw, schema)
    n = raw.num_rows
    ids = {field_id(raw.schema.field(i)): i for i in range(raw.num_columns)}
    at: np.ndarray | None = None  # each row's position in the file, when only some row groups were read
    if row_groups is not None:
        at = np.concatenate(
            [np.arange(first, first + rows, dtype=np.int64) for _, first, rows in row_groups]
            or [np.zeros(0, dtype=np.int64)]
        )
    row_ids, snaps = row_versions(f, raw, n, at)
    keep = np.ones(n, dtype=bool)
    if f.partial_max is not None and f.partial_max > task.snapshot_id and SNAPSHOT_ID_FIELD_ID in ids:
        keep &= snaps.to_numpy(zero_copy_only=False) <= task.snapshot_id
    if f.delete_file is not None:
        rows = n if at is None else f.record_count
        positions = read_delete_positions(f.delete_file, task.snapshot_id, storage_options, row_count=rows)
        if at is None:
            positions = positions[positions < n]
            keep[positions] = False
        else:
            keep &= ~np.isin(at, positions)
    if task.inlined_deleted_positions:
        pos = np.array(task.inlined_deleted_positions, dtype=np.int64)
        if at is None:
            keep[pos[pos < n]] = False
        else:
            keep &= ~np.isin(at, pos)
    data = conform_foreign(raw, schema, f.path) if foreign else conform_table(raw, schema)
    data = data.append_column(ROWID, row_ids).append_column(SNAPSHOT_ID, snaps)
    if with_positions:
        data = data.append_column(FILE_POSITION, pa.array(np.arange(n, dtype=np.int64) if at is None else at))
    if not keep.all():
        data = data.filter(pa.array(keep))
    return data


def row_versions(
    f: DataFileEntry, raw: pa.Table, n: int, positions: np.ndarray | None = None
) -> tuple[pa.Array, pa.Array]:
    """Each of the file's ``n`` rows' row id and begin snapshot: from its internal columns where ``raw`` has them
    (flush and rewrite output), else ``row_id_start + position`` (``positions``: the rows' positions in the file,
    when ``raw`` is not the whole file) and the file's own begin snapshot."""
    ids = {field_id(x): i for i, x in enumerate(raw.schema)}
    if ROW_ID_FIELD_ID in ids:
        row_ids = raw.column(ids[ROW_ID_FIELD_ID]).combine_chunks().cast(pa.int64())
    else:
        start = f.row_id_start or 0
        row_ids = pa.array(np.arange(start, start + n, dtype=np.int64) if positions is None else start + positions)
    if SNAPSHOT_ID_FIELD_ID in ids:
        snaps = raw.column(ids[SNAPSHOT_ID_FIELD_ID]).combine_chunks().cast(pa.int64())
    else:
        snaps = pa.array(np.full(n, f.begin_snapshot, dtype=np.int64))
    return row_ids, snaps


def read_delete_file(
    path: str,
    storage_options: dict[str, Any] | None = None,
    encryption_key: str | None = None,
    *,
    file_format: str = PARQUET,
    row_count: int | None = None,
    recorded_row_groups: RecordedRowGroups | None = None,
) -> tuple[np.ndarray, np.ndarray | None]:
    """``(positions, snapshots)`` of a delete file: ``snapshots`` per row where the file has
    ``_ducklake_internal_snapshot_id`` (flush and rewrite output, and DuckDB's cumulative files), else None. Only
    those columns are read (not the repeated ``file_path``). A ``puffin`` file is a deletion vector: a bare one has
    no per-row snapshots, DuckLake 1.1's Puffin container of several has (each position's first blob); its
    positions are checked against ``row_count``, the data file's rows, when given. A Parquet file's footer is
    checked against ``recorded_row_groups`` (its catalog row's ``row_group_count``, DuckLake 1.1).

    Raises:
        DataFileError: the file is missing or unreadable; DeletionVectorError when a deletion vector is corrupt;
            RowGroupCountError when the footer disagrees with ``recorded_row_groups``.
    """
    if file_format == PUFFIN:
        return read_deletion_vector(path, storage_options, row_count=row_count)

    def pick(schema: pa.Schema) -> list[str]:
        by_id = {field_id(f): f.name for f in schema}
        pos = by_id.get(DELETE_POS_ID) or ("pos" if "pos" in schema.names else schema.names[1])
        snap = by_id.get(SNAPSHOT_ID_FIELD_ID) or (
            "_ducklake_internal_snapshot_id" if "_ducklake_internal_snapshot_id" in schema.names else None
        )
        return [pos] if snap is None else [pos, snap]

    raw = read_columns(
        path,
        pick,
        storage_options=storage_options,
        encryption_key=encryption_key,
        recorded_row_groups=recorded_row_groups,
    )
    positions = raw.column(0).to_numpy().astype(np.int64, copy=False)
    snapshots = raw.column(1).to_numpy().astype(np.int64, copy=False) if raw.num_columns > 1 else None
    return positions, snapshots


def read_delete_positions(
    delete: DeleteFileEntry, snapshot_id: int, storage_options: dict[str, Any] | None = None, *, row_count: int
) -> np.ndarray:
    """Deleted positions of a delete file (and of the :attr:`~DeleteFileEntry.earlier` ones visible with it); rows
    tagged with a later snapshot (flush/rewrite output) are kept."""
    parts = []
    for d in (*delete.earlier, delete):
        positions, snapshots = read_delete_file(
            d.path,
            storage_options,
            d.encryption_key,
            file_format=d.format,
            row_count=row_count,
            recorded_row_groups=d.recorded_row_groups,
        )
        parts.append(positions if snapshots is None else positions[snapshots <= snapshot_id])
    return parts[0] if len(parts) == 1 else np.unique(np.concatenate(parts))


def read_delete_entries(
    path: str,
    begin_snapshot: int,
    storage_options: dict[str, Any] | None = None,
    encryption_key: str | None = None,
    *,
    file_format: str = PARQUET,
    row_count: int | None = None,
) -> tuple[list[int], list[int]]:
    """Every position of a delete file with the snapshot that deleted it (the file's own begin without per-row ids)."""
    positions, snapshots = read_delete_file(
        path, storage_options, encryption_key, file_format=file_format, row_count=row_count
    )
    if snapshots is None:
        return positions.tolist(), [begin_snapshot] * len(positions)
    return positions.tolist(), snapshots.tolist()


def execute_plan(
    plan: ScanPlan,
    *,
    columns: list[str] | None = None,
    filters: Any = None,
    storage_options: dict[str, Any] | None = None,
) -> pa.Table:
    """Run every task of the plan locally and concatenate (the Python API's path; Spark runs tasks itself)."""
    parts = [execute_file_task(t, plan.schema, storage_options=storage_options) for t in plan.files]
    if plan.inlined is not None and plan.inlined.data.num_rows:
        parts.append(plan.inlined.data)
    result = empty_result(plan.schema, with_virtual=True) if not parts else _concat(parts)
    result = visible(result, plan.schema)
    if filters is not None:
        result = apply_filter(result, filter_expression(filters, plan.schema), filters)
    if columns is not None:
        return result.select(columns)
    return table_columns(result, plan.schema)


def apply_filter(rows: pa.Table, expression: pc.Expression, filters: Any) -> pa.Table:
    """``rows.filter(expression)``; ``filters`` is what the caller gave, for the message.

    Raises:
        InvalidOptionError: pyarrow cannot evaluate the filter on the columns' types (a decimal column against an
            int, a naive datetime against a timestamptz).
    """
    try:
        return rows.filter(expression)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as e:
        raise InvalidOptionError(
            f"filter {filters!r} cannot be evaluated on the table's columns ({e}); give values of the "
            "column's type (e.g. a Decimal for a decimal column, an aware datetime for a timestamptz column)"
        ) from e


def check_filter(expression: pc.Expression, schema: TableSchema, filters: Any) -> None:
    """Evaluate the filter on no rows of the table, so a filter of the wrong types fails before anything is written.

    Raises:
        InvalidOptionError: as :func:`apply_filter`.
    """
    apply_filter(visible(empty_result(schema, with_virtual=True), schema), expression, filters)


def table_columns(result: pa.Table, schema: TableSchema) -> pa.Table:
    """The table's own columns of a read result, without the internal ones after them."""
    return result.select(list(range(len(schema.columns))))


def internal_column(result: pa.Table, schema: TableSchema, name: str) -> pa.ChunkedArray:
    """An internal column of a read result (``rowid``, ``snapshot_id``, ``_file_position``, ``end_snapshot``),
    found by position after the table's columns: the table may have a column of the same name."""
    n = len(schema.columns)
    return result.column(n + result.schema.names[n:].index(name))


def virtual_names(schema: TableSchema) -> dict[str, str]:
    """``{name a filter or column list may use: virtual column}``. A table column of the same name, compared
    case-insensitively as DuckDB does, hides ``rowid`` / ``snapshot_id``; they stay reachable by their aliases
    unless the table has those names too."""
    taken = {name.lower() for name in schema.names()}
    out = {}
    for virtual in VIRTUAL_COLUMNS:
        for name in (virtual, VIRTUAL_ALIASES[virtual]):
            if name.lower() not in taken:
                out[name] = virtual
    return out


def visible(result: pa.Table, schema: TableSchema) -> pa.Table:
    """A read result as filters and column lists see it: the table's columns, then the virtual columns under
    the names :func:`virtual_names` gives them (so every name is unique)."""
    out = table_columns(result, schema)
    for name, virtual in virtual_names(schema).items():
        out = out.append_column(name, internal_column(result, schema, virtual))
    return out


def _concat(parts: list[pa.Table]) -> pa.Table:
    target = parts[0].schema
    return pa.concat_tables([p.cast(target) if p.schema != target else p for p in parts])


__all__ = ["FILTER_OPERATORS", "FileTask", "ScanPlan", "execute_file_task", "execute_plan", "pc", "plan_scan"]


def filter_expression(filters: Any, schema: TableSchema | None = None) -> pc.Expression:
    """A DNF filter or an Expression as an Expression selecting what DuckDB's ``WHERE`` selects on the columns of
    ``schema`` (:mod:`pyspark_ducklake.table.filters`).

    Raises:
        InvalidOptionError: the filter is not one pyarrow understands (an unknown operator, a malformed tuple).
    """
    return filters_module.filter_expression(filters, schema)
