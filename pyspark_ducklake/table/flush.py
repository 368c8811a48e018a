"""Flushing inlined rows to Parquet inside a commit, as the reference's ``ducklake_flush_inlined_data`` does.

Each registered inlined table becomes one Parquet file per partition (of the spec its schema version began with, as
DuckDB's flush partitions) in that table's own schema version, holding every row version (dead ones included) ordered
by (row_id, begin_snapshot) (by the table's current sort order first, when it has one, as DuckDB's flush sorts), with
``_ducklake_internal_row_id`` and ``_ducklake_internal_snapshot_id``. Rows that had ended get a delete file whose
per-row snapshot ids are their ``end_snapshot``. So time travel and the change feed read the same before and after
the flush.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import pyarrow as pa

from pyspark_ducklake.catalog import commit_rows as W
from pyspark_ducklake.catalog import reader
from pyspark_ducklake.catalog.entries import TableEntry
from pyspark_ducklake.catalog.file_stats import stats_function
from pyspark_ducklake.catalog.inlined_tables import (
    columns_at_schema_version,
    decoded_values,
    drop_inlined_table,
    empty_inlined_table,
    inlined_layout,
    inlined_rows,
)
from pyspark_ducklake.catalog.partitioning import PartitionSpec, partition_spec
from pyspark_ducklake.catalog.paths import check_folder_names, checked_table_dir
from pyspark_ducklake.catalog.sort_order import sort_order
from pyspark_ducklake.catalog.time_types import parquet_obstacle, utc_time_field_ids
from pyspark_ducklake.catalog.transaction import CommitContext
from pyspark_ducklake.catalog.types import TableSchema, arrow_field
from pyspark_ducklake.exceptions import StalePlanError
from pyspark_ducklake.io.deletion_vector import PUFFIN, write_deletion_vector_history
from pyspark_ducklake.io.encryption import encode_key, new_key
from pyspark_ducklake.io.parquet import write_table
from pyspark_ducklake.table.data_files import (
    DELETE_FILE_PATH_ID,
    DELETE_POS_ID,
    new_data_file_name,
    new_delete_file_name,
)
from pyspark_ducklake.table.delete import deletion_vectors_on
from pyspark_ducklake.table.partition_values import partition_dir, resolve_keys, split_by_partition
from pyspark_ducklake.table.scan import ROW_ID_FIELD_ID, SNAPSHOT_ID_FIELD_ID
from pyspark_ducklake.table.sort_rows import SortKey, sort_keys, sort_permutation

INTERNAL_ROW_ID = "_ducklake_internal_row_id"
INTERNAL_SNAPSHOT_ID = "_ducklake_internal_snapshot_id"
_END = "__ducklake_flush_end_snapshot"  # carried beside each row to its file's deletes; never written


@dataclass(frozen=True)
class FlushResult:
    """Files written and rows moved; ``kept`` says why the rows stayed inlined (a TIME_NS column), else None."""

    files: int
    rows: int
    kept: str | None = None


def internal_field(name: str, field_id: int) -> pa.Field:
    return pa.field(name, pa.int64(), metadata={b"PARQUET:field_id": str(field_id).encode()})


def flush_inlined(ctx: CommitContext, table: TableEntry, *, strict: bool = False) -> FlushResult:
    """Move every inlined row of ``table`` to Parquet in this commit (``inline_flush:<table_id>``).

    A table whose rows DuckDB could not read back from Parquet (a TIME_NS column) keeps them inlined: the result's
    ``kept`` says why, so a commit that flushes when a threshold is crossed still commits its own rows.

    Raises:
        UnsupportedTypeError: with ``strict`` (the user named this table), instead of keeping the rows inlined.
        UnsupportedSortOrderError: the table's sort order has a key this library cannot evaluate.
    """
    registered = reader.inlined_tables(ctx.conn, table.table_id)
    table_dir = reader.table_path(table, ctx.data_path)
    current = reader.table_schema(ctx.conn, table.table_id, ctx.snapshot_id)
    qualified = f"{table.schema.schema_name}.{table.table_name}"
    obstacle = parquet_obstacle(current.columns, qualified)
    for _, sv in registered:  # an older version may still have a column dropped since
        if obstacle is None:
            obstacle = parquet_obstacle(
                columns_at_schema_version(ctx.conn, table.table_id, sv, current).columns, qualified
            )
    if obstacle is not None:
        if strict:
            raise obstacle
        return FlushResult(0, 0, str(obstacle))
    files = rows_flushed = 0
    keys: tuple[SortKey, ...] | None = None
    for position, (name, sv) in enumerate(registered):
        if not reader.has_table(ctx.conn, name):
            continue
        schema = columns_at_schema_version(ctx.conn, table.table_id, sv, current)
        layout = inlined_layout(ctx.conn, name, schema.columns)
        schema = TableSchema(layout.columns)
        rows = inlined_rows(ctx.conn, layout)
        is_latest = position == len(registered) - 1
        if rows:
            if keys is None:  # the table's sort order now, not when the rows were written (as DuckDB's flush)
                keys = sort_keys(sort_order(ctx.conn, table.table_id, ctx.snapshot_id), current, qualified)
            name_ = f"{table.schema.schema_name}.{table.table_name}"
            # partitioned as the table was when this schema version began (every re-partitioning starts a version)
            began = reader.table_schema_version_snapshot(ctx.conn, table.table_id, sv)
            spec = partition_spec(ctx.conn, table.table_id, ctx.snapshot_id if began is None else began, schema)
            folder = checked_table_dir(table_dir, ctx.data_path, name_)
            files += _write_flush_files(ctx, table, schema, folder, name, rows, keys, spec)
            rows_flushed += len(rows)
            moved = empty_inlined_table(ctx.conn, layout)
            if moved is not None and moved >= 0 and moved != len(rows):
                raise StalePlanError(f"inlined table {name} changed while it was flushed; flush again")
        if not is_latest:
            drop_inlined_table(ctx.conn, table.table_id, layout)
    if files:
        ctx.changes.inline_flush.add(table.table_id)
    return FlushResult(files, rows_flushed)


def _write_flush_files(
    ctx: CommitContext,
    table: TableEntry,
    schema: TableSchema,
    table_dir: str,
    inlined: str,
    rows: Sequence[Any],
    keys: tuple[SortKey, ...],
    spec: PartitionSpec | None,
) -> int:
    """Write the rows as one data file per partition of ``spec`` (one file when unpartitioned), each with a delete
    file for its ended rows; returns how many data files."""
    # TIMETZ goes to Parquet as its UTC time, as DuckDB's flush writes it (inlined text keeps the offset)
    arrays = [decoded_values(rows, c, ctx.backend, table=inlined, timetz_utc=True) for c in schema.columns]
    fields = [arrow_field(c) for c in schema.columns]
    fields += [
        internal_field(INTERNAL_ROW_ID, ROW_ID_FIELD_ID),
        internal_field(INTERNAL_SNAPSHOT_ID, SNAPSHOT_ID_FIELD_ID),
        pa.field(_END, pa.int64()),
    ]
    arrays += [
        pa.array([r.row_id for r in rows], pa.int64()),
        pa.array([r.begin_snapshot for r in rows], pa.int64()),
        pa.array([r.end_snapshot for r in rows], pa.int64()),
    ]
    data = pa.Table.from_arrays(arrays, schema=pa.schema(fields))
    # DuckDB's flush: the sort keys, then (row_id, begin_snapshot), the order its delete positions assume
    order = sort_permutation(data, keys, schema, (INTERNAL_ROW_ID, INTERNAL_SNAPSHOT_ID)) if keys else None
    if order is not None:
        data = data.take(pa.array(order))
    # then one file per partition, each keeping that order
    partition_keys = resolve_keys(spec, schema)
    groups = [
        (values, part, partition_dir(partition_keys, values))
        for values, part in split_by_partition(data, partition_keys)
    ]
    for _, _, folder in groups:
        check_folder_names(folder, f"partition folder of {table_dir}")
    encrypt = reader.lake_encrypted(ctx.conn)  # read in the attempt, as every catalog fact of a commit
    for values, part, folder in groups:
        _write_flush_file(ctx, table, schema, table_dir, folder, part, encrypt, spec, values)
    return len(groups)


def _write_flush_file(
    ctx: CommitContext,
    table: TableEntry,
    schema: TableSchema,
    table_dir: str,
    folder: str,
    part: pa.Table,
    encrypt: bool,
    spec: PartitionSpec | None,
    values: tuple[str | None, ...],
) -> None:
    ends = part.column(_END).to_pylist()
    data = part.drop_columns([_END])
    name = folder + new_data_file_name()
    ctx.attempt_files.append(table_dir + name)
    written = write_table(
        data,
        table_dir + name,
        stats=stats_function(schema),
        storage_options=ctx.storage_options,
        encrypt=encrypt,
        utc_time_ids=utc_time_field_ids(schema.columns),
    )
    begin_values = data.column(INTERNAL_SNAPSHOT_ID).to_pylist()
    file_id = W.add_data_file(
        ctx,
        table,
        schema,
        written,
        relative_path=name,
        begin_snapshot=min(begin_values),
        row_id_start=min(data.column(INTERNAL_ROW_ID).to_pylist()),
        partial_max=max(begin_values),
        count_rows=False,
        partition_id=spec.partition_id if spec is not None else None,
        partition_values=values,
    )
    ended = [(pos, int(end)) for pos, end in enumerate(ends) if end is not None]
    if not ended:
        return
    if ctx.format.multi_snapshot_deletion_vectors and deletion_vectors_on(ctx, table):
        dname, dwritten = _deletion_vector_history(ctx, written.path, ended, table_dir, encrypted=encrypt)
    else:
        dname, dwritten = _parquet_deletes(ctx, written.path, ended, table_dir, encrypted=encrypt)
    W.add_delete_file(
        ctx,
        table,
        file_id,
        dwritten,
        relative_path=dname,
        previous_delete_file_id=None,
        begin_snapshot=min(s for _, s in ended),
        logical=False,
    )


def _parquet_deletes(
    ctx: CommitContext, data_file_path: str, ended: list[tuple[int, int]], table_dir: str, *, encrypted: bool
) -> tuple[str, Any]:
    """The flushed file's ended rows as a Parquet delete file with each row's snapshot (DuckDB 1.5.5's flush, and
    1.1's without deletion vectors): its name in the table folder and what was written."""
    delete_schema = pa.schema(
        [
            pa.field("file_path", pa.string(), metadata={b"PARQUET:field_id": str(DELETE_FILE_PATH_ID).encode()}),
            pa.field("pos", pa.int64(), metadata={b"PARQUET:field_id": str(DELETE_POS_ID).encode()}),
            internal_field(INTERNAL_SNAPSHOT_ID, SNAPSHOT_ID_FIELD_ID),
        ]
    )
    deletes = pa.Table.from_arrays(
        [
            pa.array([data_file_path] * len(ended)),
            pa.array([p for p, _ in ended], pa.int64()),
            pa.array([s for _, s in ended], pa.int64()),
        ],
        schema=delete_schema,
    )
    dname = new_delete_file_name()  # in the table folder, as DuckDB writes delete files
    ctx.attempt_files.append(table_dir + dname)
    dwritten = write_table(deletes, table_dir + dname, storage_options=ctx.storage_options, encrypt=encrypted)
    return dname, dwritten


def _deletion_vector_history(
    ctx: CommitContext, data_file_path: str, ended: list[tuple[int, int]], table_dir: str, *, encrypted: bool
) -> tuple[str, Any]:
    """The flushed file's ended rows as DuckLake 1.1's deletion vector of one cumulative blob per snapshot, as
    DuckDB 1.1's flush writes them for a table with ``write_deletion_vectors`` on
    (``WriteDeletionVectorFileWithSnapshots``: beginning at the oldest, no ``partial_max``)."""
    ordered = sorted(ended)
    name = new_delete_file_name(PUFFIN)
    ctx.attempt_files.append(table_dir + name)
    written = write_deletion_vector_history(
        [p for p, _ in ordered],
        [s for _, s in ordered],
        table_dir + name,
        data_file_path=data_file_path,
        storage_options=ctx.storage_options,
    )
    if encrypted:  # DuckDB's DV rows carry a key in an encrypted lake, though DVs stay plain
        written = replace(written, encryption_key=encode_key(new_key()))
    return name, written
