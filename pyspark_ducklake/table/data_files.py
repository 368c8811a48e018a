"""Preparing data for a table: schema checks and casts, Parquet files, delete files."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pyspark_ducklake.catalog.catalog import uuid7
from pyspark_ducklake.catalog.file_stats import stats_function
from pyspark_ducklake.catalog.paths import check_folder_names
from pyspark_ducklake.catalog.stats_values import check_temporal_range
from pyspark_ducklake.catalog.time_types import check_parquet_writable, utc_time_field_ids
from pyspark_ducklake.catalog.types import (
    Column,
    TableSchema,
    arrow_field,
    arrow_type,
    can_promote,
    ducklake_type,
    find_folded,
)
from pyspark_ducklake.exceptions import InvalidStringError, SchemaMismatchError, UnsupportedTypeError
from pyspark_ducklake.io.fileio import delete_files
from pyspark_ducklake.io.parquet import WrittenFile, write_table
from pyspark_ducklake.io.variant import variant_column
from pyspark_ducklake.table.conform import default_array
from pyspark_ducklake.table.geometry_values import geometry_in, geometry_values
from pyspark_ducklake.table.job_files import JobToken
from pyspark_ducklake.table.partition_values import PartitionKey, partition_dir, split_by_partition
from pyspark_ducklake.table.sort_rows import SortKey, sort_table

DELETE_FILE_PATH_ID = 2147483646
DELETE_POS_ID = 2147483645
INTERNAL_SNAPSHOT_ID_FIELD_ID = 2147483539


def new_data_file_name(job: JobToken | None = None) -> str:
    """``ducklake-<uuid7>.parquet``; a file of a Spark job carries the job's token (see ``job_files``)."""
    return job.file_name() if job is not None else f"ducklake-{uuid7()}.parquet"


def new_delete_file_name(extension: str = "parquet") -> str:
    """``ducklake-<uuid7>-delete.parquet`` (``.puffin`` for a deletion vector), as DuckDB names them."""
    return f"ducklake-{uuid7()}-delete.{extension}"


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

    The one check every write path shares (Python ``append``/``overwrite``, the Spark data source and fast path,
    the streaming sink): no value is ever dropped. A column or struct field the table lacks, or one whose name
    differs only in case (DuckDB's names are case-insensitive), is an error naming it, at any nesting depth (struct
    fields inside lists and maps too). Fields the data lacks read NULL, as in DuckDB's ``INSERT``.

    Raises:
        SchemaMismatchError: an unknown column or field, a missing NOT NULL column, a type that does not convert
            losslessly, or a date/timestamp DuckDB cannot hold; the message names the column and says what to do.
            Nothing has been written.
        UnsupportedTypeError: a TIME_NS column bound for Parquet (DuckDB cannot read it back), or a geometry
            carries an SRID or CRS (DuckLake keeps none).
        InvalidGeometryError: a GEOMETRY value that is not WKB DuckDB reads (table.geometry_values).
    """
    known = set(schema.names())
    for n in data.column_names:
        if n in known:
            continue
        near = find_folded(known, n)
        if near is not None:
            raise SchemaMismatchError(
                f"column {n!r} differs only in case from column {near!r} of table {table_name} "
                f"(DuckDB's names are case-insensitive); rename it to {near!r} in the data"
            )
        raise SchemaMismatchError(
            f"column {n!r} is not in table {table_name} (columns: {schema.names()}); "
            "add it first with lake.add_column()"
        )
    if len(set(data.column_names)) != len(data.column_names):
        raise SchemaMismatchError(f"the data for {table_name} names a column twice: {data.column_names}")
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
        if geometry_in(column):  # checked, normalised WKB in geoarrow.wkb at every GEOMETRY position
            col = pa.chunked_array([geometry_values(col, column, f"column {column.name!r} of {table_name}")])
        if variant_in(column):  # checked and in the variant struct (io.variant); no Arrow cast applies
            arrays.append(variant_values(col, column, table_name))
            continue
        if column.is_nested:
            check_fields(col.type, column, (column.name,), table_name)
        # Matching columns stay chunked (no copy: Spark hands over many small batches); casts need one array.
        arr = col if col.type == target else col.combine_chunks()
        result = _check_utf8(_cast(arr, column, target, table_name), column, table_name)
        check_value_ranges(result, column)
        arrays.append(result)
    return pa.Table.from_arrays(arrays, schema=schema.arrow_schema())


def variant_in(column: Column) -> bool:
    """Whether the column is a VARIANT or holds one in a nested field."""
    return any(c.type == "variant" for c in column.walk())


def variant_values(col: pa.ChunkedArray, column: Column, table_name: str) -> pa.Array:
    """A top-level VARIANT column's values, checked (io.variant.variant_column).

    Raises:
        UnsupportedTypeError: a VARIANT nested in a list, struct or map (DuckDB cannot write those to Parquet, and
            never inlines VARIANT on SQLite or PostgreSQL).
        InvalidVariantError: not variant data, or malformed variant bytes.
        SchemaMismatchError: NULLs in a NOT NULL column.
    """
    if column.type != "variant":
        raise UnsupportedTypeError(
            f"column {column.name!r} of {table_name} has a VARIANT inside a {column.type}, which DuckDB 1.5.5 cannot "
            "write to Parquet either (and it never inlines VARIANT): make the VARIANT a top-level column"
        )
    result = variant_column(col, f"column {column.name!r} of {table_name}")
    if not column.nulls_allowed and result.null_count:
        raise SchemaMismatchError(
            f"column {column.name!r} of {table_name} is NOT NULL but the data has NULLs; drop or fill those rows first"
        )
    return result


def _path_text(path: tuple[str, ...]) -> str:
    return ".".join(path)


def check_fields(t: pa.DataType, column: Column, path: tuple[str, ...], table_name: str) -> None:
    """Every field of the incoming nested type ``t`` has a place in ``column`` (recursively), so the cast to the
    column's type drops nothing.

    Raises:
        SchemaMismatchError: a field the column lacks (or differing only in case), a duplicate field, another
            kind of type (a list where a struct is), or a leaf type that does not convert losslessly.
    """
    if isinstance(t, pa.BaseExtensionType) and column.is_nested:
        t = t.storage_type
    if pa.types.is_null(t):
        return
    if column.type == "struct":
        if not pa.types.is_struct(t):
            raise _kind_mismatch(t, column, path, table_name)
        children = {c.name: c for c in column.children}
        seen: set[str] = set()
        for i in range(t.num_fields):
            f = t.field(i)
            if f.name in seen:
                raise SchemaMismatchError(
                    f"field {_path_text((*path, f.name))!r} appears twice in the data for {table_name}; "
                    "give every struct field its own name"
                )
            seen.add(f.name)
            child = children.get(f.name)
            if child is None:
                where = _path_text((*path, f.name))
                near = find_folded(children, f.name)
                if near is not None:
                    raise SchemaMismatchError(
                        f"field {where!r} differs only in case from field {_path_text((*path, near))!r} of table "
                        f"{table_name} (DuckDB's names are case-insensitive); rename it to {near!r} in the data"
                    )
                raise SchemaMismatchError(
                    f"field {where!r} is not in table {table_name} (fields of {_path_text(path)!r}: "
                    f"{[c.name for c in column.children]}); its values would be lost: add it first with "
                    f"lake.add_column({table_name!r}, {(*path, f.name)!r}, <type>) (a stream: merge_schema=True)"
                )
            check_fields(f.type, child, (*path, f.name), table_name)
        return
    if column.type == "list":
        if not (pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t)):
            raise _kind_mismatch(t, column, path, table_name)
        check_fields(t.value_type, column.children[0], (*path, "element"), table_name)
        return
    if column.type == "map":
        if not pa.types.is_map(t):
            raise _kind_mismatch(t, column, path, table_name)
        check_fields(t.key_type, column.children[0], (*path, "key"), table_name)
        check_fields(t.item_type, column.children[1], (*path, "value"), table_name)
        return
    if pa.types.is_struct(t) or pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_map(t):
        raise _kind_mismatch(t, column, path, table_name)
    _check_primitive(t, column, _path_text(path), table_name)


def _kind_mismatch(t: pa.DataType, column: Column, path: tuple[str, ...], table_name: str) -> SchemaMismatchError:
    return SchemaMismatchError(
        f"column {_path_text(path)!r} of {table_name} has type {column.type}, the data has {t}; "
        "cast the data or change the column type"
    )


def _check_primitive(t: pa.DataType, column: Column, where: str, table_name: str) -> None:
    """Raise unless ``t`` converts losslessly to the non-nested ``column`` (a promotion, any timestamp, or an
    integer the safe cast then checks value by value)."""
    if pa.types.is_null(t) or t == arrow_type(column):
        return
    try:
        incoming = ducklake_type(t, where=where)
    except UnsupportedTypeError as e:
        raise SchemaMismatchError(str(e)) from e
    same_family = incoming == column.type or can_promote(incoming, column.type)
    # Integers narrow when every value fits (checked by the safe cast below), as DuckDB's INSERT casts.
    same_family = same_family or (_is_int(incoming) and _is_int(column.type))
    # Arrow has one time type: time64 of any unit goes into TIME, TIMETZ (as UTC) and TIME_NS when it casts exactly.
    same_family = same_family or (incoming == "time" and column.type in ("timetz", "time_ns"))
    if not same_family and not (incoming.startswith("timestamp") and column.type.startswith("timestamp")):
        raise SchemaMismatchError(
            f"column {where!r} of {table_name} has type {column.type}, "
            f"the data has {incoming} ({t}); "
            "cast the data or change the column type"
        )


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
        if not column.is_nested:
            _check_primitive(arr.type, column, column.name, table_name)
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


def check_value_ranges(arr: pa.Array | pa.ChunkedArray, column: Column) -> None:
    """Refuse dates and timestamps DuckDB cannot hold, at any nesting depth.

    Raises:
        SchemaMismatchError: a value beyond DuckDB's range (see ``stats_values.check_temporal_range``).
    """
    if column.type in _TEMPORAL_INTEGERS:
        if len(arr) and arr.null_count < len(arr):
            mm = pc.min_max(arr.cast(_TEMPORAL_INTEGERS[column.type]))
            check_temporal_range(column, mm["min"].as_py(), mm["max"].as_py())
        return
    if not column.is_nested or not any(c.type in _TEMPORAL_INTEGERS for c in column.walk()):
        return
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    if column.type == "struct":
        # flatten() folds the struct's own NULLs into its fields: values under a NULL struct are not checked
        for child, values in zip(column.children, arr.flatten(), strict=True):
            check_value_ranges(values, child)
    elif column.type == "list":
        check_value_ranges(arr.flatten(), column.children[0])
    elif column.type == "map":
        check_value_ranges(arr.keys, column.children[0])
        check_value_ranges(arr.items, column.children[1])


_TEMPORAL_INTEGERS = {
    "date": pa.int32(),
    "timestamp": pa.int64(),
    "timestamp_s": pa.int64(),
    "timestamp_ms": pa.int64(),
    "timestamp_ns": pa.int64(),
    "timestamptz": pa.int64(),
}


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
    job: JobToken | None = None,
    encrypt: bool = False,
    table_name: str = "",
    sort_by: tuple[SortKey, ...] = (),
) -> list[PendingFile]:
    """Write ``data`` as one file per partition (one file when unpartitioned), named for ``job`` when given
    (encrypted, each file with its own key, with ``encrypt``: the lake is encrypted), each file's rows in the
    order of ``sort_by`` (the table's sort order, as DuckDB sorts an insert).

    Raises:
        DataFileError: a partition folder name would be too long (checked before any file is written).
        UnsupportedTypeError: the table has a column DuckDB cannot read back from Parquet (TIME_NS).
    """
    check_parquet_writable(schema.columns, table_name or table_dir)
    out: list[PendingFile] = []
    groups = [(values, part, partition_dir(keys, values)) for values, part in split_by_partition(data, keys)]
    for _, _, folder in groups:
        check_folder_names(folder, f"partition folder of {table_dir}")
    try:
        for values, part, folder in groups:
            name, written = write_data_file(
                sort_table(part, sort_by, schema),
                table_dir + folder,
                schema,
                storage_options=storage_options,
                job=job,
                encrypt=encrypt,
            )
            out.append(PendingFile(folder + name, written, values))
    except BaseException:
        delete_files([f.written.path for f in out], storage_options)
        raise
    return out


def write_data_file(
    data: pa.Table,
    table_dir: str,
    schema: TableSchema,
    *,
    storage_options: dict[str, Any] | None = None,
    job: JobToken | None = None,
    encrypt: bool = False,
) -> tuple[str, WrittenFile]:
    """Write one data file into the table's folder; returns (file name, description with rendered stats)."""
    # INTERVAL columns are written by io.parquet (FLBA(12) + converted type INTERVAL, as DuckDB writes them); it
    # raises UnsupportedTypeError for negative or nested intervals before anything is written.
    name = new_data_file_name(job)
    return name, write_table(
        data,
        table_dir + name,
        storage_options=storage_options,
        stats=stats_function(schema),
        encrypt=encrypt,
        utc_time_ids=utc_time_field_ids(schema.columns),
    )


def unique_positions(positions: Sequence[int] | np.ndarray) -> np.ndarray:
    """The distinct positions, ascending (a sort, not numpy's hash-based ``unique``: ten times faster here)."""
    out = np.sort(np.asarray(positions, dtype=np.int64))
    if len(out) > 1:
        out = out[np.concatenate(([True], out[1:] != out[:-1]))]
    return out


def write_delete_file(
    data_file_path: str,
    positions: Sequence[int] | np.ndarray,
    table_dir: str,
    *,
    storage_options: dict[str, Any] | None = None,
    snapshot_ids: list[int] | None = None,
    encrypt: bool = False,
) -> tuple[str, WrittenFile]:
    """A DuckLake delete file: ``file_path`` and ``pos`` with the reference's reserved field ids, plus
    ``_ducklake_internal_snapshot_id`` per position when ``snapshot_ids`` is given (else the positions are
    deduplicated and sorted)."""
    fields = [
        pa.field("file_path", pa.string(), metadata={b"PARQUET:field_id": str(DELETE_FILE_PATH_ID).encode()}),
        pa.field("pos", pa.int64(), metadata={b"PARQUET:field_id": str(DELETE_POS_ID).encode()}),
    ]
    pos = np.asarray(positions, dtype=np.int64)
    if snapshot_ids is None:
        pos = unique_positions(pos)
    # one path for every row: a dictionary of one value in memory (the file holds the same plain strings)
    paths = pa.DictionaryArray.from_arrays(pa.array(np.zeros(len(pos), dtype=np.int32)), pa.array([data_file_path]))
    arrays: list[pa.Array] = [paths, pa.array(pos)]
    if snapshot_ids is not None:
        fields.append(
            pa.field(
                "_ducklake_internal_snapshot_id",
                pa.int64(),
                metadata={b"PARQUET:field_id": str(INTERNAL_SNAPSHOT_ID_FIELD_ID).encode()},
            )
        )
        arrays.append(pa.array(snapshot_ids, pa.int64()))
    fields[0] = fields[0].with_type(paths.type)
    table = pa.Table.from_arrays(arrays, schema=pa.schema(fields))
    name = new_delete_file_name()
    return name, write_table(table, table_dir + name, storage_options=storage_options, encrypt=encrypt)


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
    job: JobToken | None = None,
    encrypt: bool = False,
    sort_by: tuple[SortKey, ...] = (),
) -> list[PendingFile]:
    """Conform batches to the table and write them, rolling to a new file every ``target_file_rows`` rows, each
    file sorted by ``sort_by``; files are named for ``job`` (so the driver finds them when the job fails, whatever
    became of this task).

    Files already written are removed when a later batch fails, so a failed task leaves nothing behind.

    Raises:
        UnsupportedTypeError: the table has a column DuckDB cannot read back from Parquet (TIME_NS), before any
            batch is read.
    """
    check_parquet_writable(schema.columns, table_name)
    written: list[PendingFile] = []
    pending: list[pa.RecordBatch] = []
    rows = 0

    def flush() -> None:
        nonlocal pending, rows
        if rows:
            data = conform_to_table(pa.Table.from_batches(pending), schema, table_name)
            files = write_data_files(
                data,
                table_dir,
                schema,
                keys,
                storage_options=storage_options,
                job=job,
                encrypt=encrypt,
                table_name=table_name,
                sort_by=sort_by,
            )
            written.extend(files)
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
