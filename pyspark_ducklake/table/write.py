"""Preparing data for a table: schema checks and casts, Parquet files, delete files."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from pyspark_ducklake.catalog.catalog import uuid7
from pyspark_ducklake.catalog.file_stats import stats_function
from pyspark_ducklake.catalog.types import Column, TableSchema, arrow_field, arrow_type, can_promote, ducklake_type
from pyspark_ducklake.exceptions import InvalidStringError, SchemaMismatchError, UnsupportedTypeError
from pyspark_ducklake.io.fileio import delete_files
from pyspark_ducklake.io.parquet import WrittenFile, write_table
from pyspark_ducklake.table.conform import default_array
from pyspark_ducklake.table.partition_values import PartitionKey, partition_dir, split_by_partition

DELETE_FILE_PATH_ID = 2147483646
DELETE_POS_ID = 2147483645
INTERNAL_SNAPSHOT_ID_FIELD_ID = 2147483539


def new_data_file_name() -> str:
    return f"ducklake-{uuid7()}.parquet"


def new_delete_file_name() -> str:
    return f"ducklake-{uuid7()}-delete.parquet"


def to_arrow_table(data: Any) -> pa.Table:
    if isinstance(data, pa.Table):
        return data
    if isinstance(data, pa.RecordBatch):
        return pa.Table.from_batches([data])
    if hasattr(data, "to_arrow"):
        return data.to_arrow()
    try:
        return pa.table(data)
    except (TypeError, ValueError, pa.ArrowInvalid) as e:
        raise SchemaMismatchError(f"cannot turn {type(data).__name__} into an Arrow table: {e}") from e


def conform_to_table(data: pa.Table, schema: TableSchema, table_name: str) -> pa.Table:
    """Check ``data`` against the table's columns and cast it to their exact Arrow types.

    Raises:
        SchemaMismatchError: an unknown column, a missing NOT NULL column, or a type that does not convert
            losslessly; the message names the column and both types. Nothing has been written.
    """
    known = set(schema.names())
    extra = [n for n in data.column_names if n not in known]
    if extra:
        raise SchemaMismatchError(
            f"column {extra[0]!r} is not in table {table_name} (columns: {schema.names()}); "
            "add it first with lake.add_column()"
        )
    arrays = []
    for column in schema.columns:
        target = arrow_type(column)
        if column.name not in data.column_names:
            # Missing columns take the column's default for new rows, as an INSERT without them does in DuckDB.
            filled = default_array(column, data.num_rows, current=True)
            if not column.nulls_allowed and filled.null_count:
                raise SchemaMismatchError(f"column {column.name!r} of {table_name} is NOT NULL but missing in the data")
            arrays.append(filled)
            continue
        col = data.column(column.name)
        # Matching columns stay chunked (no copy: Spark hands over many small batches); casts need one array.
        arr = col if col.type == target else col.combine_chunks()
        arrays.append(_check_utf8(_cast(arr, column, target, table_name), column, table_name))
    return pa.Table.from_arrays(arrays, schema=schema.arrow_schema())


def _holds_text(t: pa.DataType) -> bool:
    if isinstance(t, pa.BaseExtensionType):
        return _holds_text(t.storage_type)
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return True
    return any(_holds_text(t.field(i).type) for i in range(t.num_fields))


def _check_utf8(arr: pa.Array | pa.ChunkedArray, column: Column, table_name: str) -> pa.Array | pa.ChunkedArray:
    """``arr`` unchanged; buffers from a foreign producer may hold strings that are not UTF-8, which neither the
    catalog nor a Parquet reader takes."""
    if not _holds_text(arr.type):
        return arr
    first = 0
    for chunk in arr.chunks if isinstance(arr, pa.ChunkedArray) else [arr]:
        try:
            chunk.validate(full=True)
        except pa.ArrowInvalid as e:
            where = f"column {column.name!r} of {table_name}"
            m = re.search(r"string index (\d+)", str(e))
            if m is not None and not column.is_nested:
                where += f" (row {first + int(m.group(1))})"
            if "UTF8" not in str(e):
                raise SchemaMismatchError(f"{where}: the Arrow data is malformed: {e}") from e
            raise InvalidStringError(
                f"{where} holds bytes that are not UTF-8 ({e}); clean or decode those strings first "
                "(or store them in a binary column)"
            ) from e
        first += len(chunk)
    return arr


def _cast(arr: pa.Array, column: Column, target: pa.DataType, table_name: str) -> pa.Array:
    if arr.type == target:
        result = arr
    else:
        if not column.is_nested and not pa.types.is_null(arr.type):
            try:
                incoming = ducklake_type(arr.type, where=column.name)
            except UnsupportedTypeError as e:
                raise SchemaMismatchError(str(e)) from e
            same_family = incoming == column.type or can_promote(incoming, column.type)
            # Integers narrow when every value fits (checked by the safe cast below), as DuckDB's INSERT casts.
            same_family = same_family or (_is_int(incoming) and _is_int(column.type))
            if not same_family and not (incoming.startswith("timestamp") and column.type.startswith("timestamp")):
                raise SchemaMismatchError(
                    f"column {column.name!r} of {table_name} has type {column.type}, "
                    f"the data has {incoming} ({arr.type}); "
                    "cast the data or change the column type"
                )
        try:
            if isinstance(target, pa.BaseExtensionType):
                storage = arr.storage if isinstance(arr.type, pa.BaseExtensionType) else arr
                result = pa.ExtensionArray.from_storage(target, storage.cast(target.storage_type))
            else:
                result = arr.cast(target)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as e:
            raise SchemaMismatchError(
                f"column {column.name!r} of {table_name} has type {column.type} ({target}); "
                f"the data's {arr.type} does not convert: {e}"
            ) from e
    if not column.nulls_allowed and result.null_count:
        raise SchemaMismatchError(
            f"column {column.name!r} of {table_name} is NOT NULL but the data has NULLs; drop or fill those rows first"
        )
    return result


@dataclass(frozen=True)
class PendingFile:
    """A data file written but not yet committed: where it is (relative to the table folder) and its partition."""

    relative_path: str
    written: WrittenFile
    partition_values: tuple[str | None, ...] = ()


def _is_int(type_name: str) -> bool:
    return type_name in ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")


def write_data_files(
    data: pa.Table,
    table_dir: str,
    schema: TableSchema,
    keys: tuple[PartitionKey, ...] = (),
    *,
    storage_options: dict[str, Any] | None = None,
) -> list[PendingFile]:
    """Write ``data`` as one file per partition (one file when unpartitioned)."""
    out: list[PendingFile] = []
    try:
        for values, part in split_by_partition(data, keys):
            folder = partition_dir(keys, values)
            name, written = write_data_file(part, table_dir + folder, schema, storage_options=storage_options)
            out.append(PendingFile(folder + name, written, values))
    except BaseException:
        delete_files([f.written.path for f in out], storage_options)
        raise
    return out


def write_data_file(
    data: pa.Table, table_dir: str, schema: TableSchema, *, storage_options: dict[str, Any] | None = None
) -> tuple[str, WrittenFile]:
    """Write one data file into the table's folder; returns (file name, description with rendered stats)."""
    # INTERVAL columns are written by io.parquet (FLBA(12) + converted type INTERVAL, as DuckDB writes them); it
    # raises UnsupportedTypeError for negative or nested intervals before anything is written.
    name = new_data_file_name()
    return name, write_table(data, table_dir + name, storage_options=storage_options, stats=stats_function(schema))


def write_delete_file(
    data_file_path: str,
    positions: list[int],
    table_dir: str,
    *,
    storage_options: dict[str, Any] | None = None,
    snapshot_ids: list[int] | None = None,
) -> tuple[str, WrittenFile]:
    """A DuckLake delete file: ``file_path`` and ``pos`` with the reference's reserved field ids, plus
    ``_ducklake_internal_snapshot_id`` per position when ``snapshot_ids`` is given."""
    fields = [
        pa.field("file_path", pa.string(), metadata={b"PARQUET:field_id": str(DELETE_FILE_PATH_ID).encode()}),
        pa.field("pos", pa.int64(), metadata={b"PARQUET:field_id": str(DELETE_POS_ID).encode()}),
    ]
    arrays = [pa.array([data_file_path] * len(positions), pa.string()), pa.array(positions, pa.int64())]
    if snapshot_ids is not None:
        fields.append(
            pa.field(
                "_ducklake_internal_snapshot_id",
                pa.int64(),
                metadata={b"PARQUET:field_id": str(INTERNAL_SNAPSHOT_ID_FIELD_ID).encode()},
            )
        )
        arrays.append(pa.array(snapshot_ids, pa.int64()))
    else:
        positions = sorted(set(positions))
        arrays[0] = pa.array([data_file_path] * len(positions), pa.string())
        arrays[1] = pa.array(positions, pa.int64())
    table = pa.Table.from_arrays(arrays, schema=pa.schema(fields))
    name = new_delete_file_name()
    return name, write_table(table, table_dir + name, storage_options=storage_options)


__all__ = ["arrow_field", "conform_to_table", "to_arrow_table", "write_data_file", "write_delete_file"]


def write_rolling(
    batches: Iterable[pa.RecordBatch],
    table_dir: str,
    schema: TableSchema,
    keys: tuple[PartitionKey, ...],
    *,
    table_name: str,
    target_file_rows: int,
    storage_options: dict[str, Any] | None = None,
) -> list[PendingFile]:
    """Conform batches to the table and write them, rolling to a new file every ``target_file_rows`` rows.

    Files already written are removed when a later batch fails, so a failed task leaves nothing behind.
    """
    written: list[PendingFile] = []
    pending: list[pa.RecordBatch] = []
    rows = 0

    def flush() -> None:
        nonlocal pending, rows
        if rows:
            data = conform_to_table(pa.Table.from_batches(pending), schema, table_name)
            written.extend(write_data_files(data, table_dir, schema, keys, storage_options=storage_options))
        pending, rows = [], 0

    try:
        for batch in batches:
            if batch.num_rows == 0:
                continue
            pending.append(batch)
            rows += batch.num_rows
            if rows >= target_file_rows:
                flush()
        flush()
    except BaseException:
        delete_files([f.written.path for f in written], storage_options)
        raise
    return written
