"""Bringing a data file's columns to the table's schema at the read snapshot.

Columns are matched by Parquet field id (= DuckLake column id) at every nesting level, so renames and drops
never mix values up; files without field ids (added by ``ducklake_add_data_files``) are matched by name. Missing
columns read as their initial default, and narrower stored types are widened to the table's type.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pyspark_ducklake.catalog.corrupt import corrupt, is_parse_error
from pyspark_ducklake.catalog.stats_values import parse_stat
from pyspark_ducklake.catalog.types import Column, TableSchema, arrow_field, arrow_type, table_of
from pyspark_ducklake.exceptions import UnsupportedTypeError
from pyspark_ducklake.io.parquet import field_id
from pyspark_ducklake.io.variant import repeated_string, unshred


def default_array(column: Column, n: int, *, current: bool = False) -> pa.Array:
    """``n`` copies of the column's initial default (rows older than the column), or with ``current`` its
    default for new rows (``default_value``); NULL when it has none."""
    t = arrow_type(column)
    raw = column.default_value if current else column.initial_default
    if column.type == "variant" and raw is not None and raw != "NULL":
        return repeated_string(raw, n)  # DuckDB reads a VARIANT column's default as the VARCHAR variant of its text
    if raw is None or raw == "NULL" or column.is_nested or column.type == "variant":
        return pa.nulls(n, t)
    try:
        value: Any = parse_stat(column, raw, inlined=True)
    except Exception as e:
        if not is_parse_error(e):
            raise
        field = "default_value" if current else "initial_default"
        raise corrupt(
            f"ducklake_column.{field} of column {column.name!r}", raw, f"a value of type {column.type}"
        ) from e
    if isinstance(t, pa.BaseExtensionType):
        return pa.ExtensionArray.from_storage(t, pa.array([_storage_value(t, value)] * n, t.storage_type))
    return pa.array([value] * n, t)


def _storage_value(t: pa.BaseExtensionType, value: Any) -> Any:
    if t.extension_name == "arrow.uuid":
        import uuid

        return uuid.UUID(str(value)).bytes
    return value


def _match(file_fields: list[tuple[pa.Field, pa.Array]], column: Column) -> tuple[pa.Field, pa.Array] | None:
    for f, arr in file_fields:
        if field_id(f) == column.column_id:
            return f, arr
    for f, arr in file_fields:
        if field_id(f) is None and f.name == column.name:
            return f, arr
    return None


def conform_table(data: pa.Table, schema: TableSchema, columns: list[str] | None = None) -> pa.Table:
    """Project and convert a file's table to ``schema`` (optionally only ``columns``)."""
    wanted = [c for c in schema.columns if columns is None or c.name in columns]
    fields = [(data.schema.field(i), data.column(i)) for i in range(data.num_columns)]
    arrays: list[pa.Array | pa.ChunkedArray] = []
    for column in wanted:
        m = _match(fields, column)
        if m is None:
            arrays.append(default_array(column, data.num_rows))
        elif column.type not in _NESTED and m[1].type == arrow_type(column):
            arrays.append(m[1])  # already the table's type: kept as read, row groups and all (no copy)
        else:
            arrays.append(conform_array(m[1].combine_chunks(), column))
    return table_of(arrays, pa.schema([arrow_field(c) for c in wanted]), data.num_rows)


# Conformed child by child (matched by field id, so equal Arrow types are not enough), and VARIANT (un-shredded).
_NESTED = frozenset({"struct", "list", "map", "variant"})


def conform_array(arr: pa.Array, column: Column) -> pa.Array:
    if column.type == "variant":  # shredded or not in the file: the unshredded pair (io.variant)
        return unshred(arr)
    target = arrow_type(column)
    t = arr.type
    if column.type == "struct":
        sub = [(t.field(i), child) for i, child in enumerate(_struct_children(arr))]
        children = []
        for child_col in column.children:
            m = _match(sub, child_col)
            children.append(default_array(child_col, len(arr)) if m is None else conform_array(m[1], child_col))
        return pa.StructArray.from_arrays(
            children, fields=[arrow_field(c) for c in column.children], mask=arr.is_null() if arr.null_count else None
        )
    if column.type == "list":
        lst = arr if pa.types.is_list(t) else arr.cast(pa.list_(t.value_type))
        values = conform_array(lst.values, column.children[0])
        offsets = lst.offsets
        return pa.ListArray.from_arrays(offsets, values, type=target, mask=lst.is_null() if lst.null_count else None)
    if column.type == "map":
        keys = conform_array(arr.keys, column.children[0])
        items = conform_array(arr.items, column.children[1])
        return pa.MapArray.from_arrays(
            arr.offsets, keys, items, type=target, mask=arr.is_null() if arr.null_count else None
        )
    return conform_primitive(arr, column, target)


def _struct_children(arr: pa.Array) -> list[pa.Array]:
    return [arr.field(i) for i in range(arr.type.num_fields)]


def conform_primitive(arr: pa.Array, column: Column, target: pa.DataType) -> pa.Array:
    t = arr.type
    if t == target:
        return arr
    if isinstance(target, pa.BaseExtensionType):
        storage = arr.storage if isinstance(t, pa.BaseExtensionType) else arr
        if target.extension_name == "arrow.json" and not pa.types.is_string(storage.type):
            storage = storage.cast(pa.string())
        return pa.ExtensionArray.from_storage(target, storage)
    if isinstance(t, pa.BaseExtensionType):
        arr = arr.storage
        t = arr.type
    if target == pa.month_day_nano_interval() and pa.types.is_fixed_size_binary(t):
        return _parquet_interval(arr)
    if pa.types.is_decimal(target) and pa.types.is_floating(t):
        # DuckDB stores HUGEINT as DOUBLE; it cannot be more exact than the double.
        return hugeint_from_double(arr, column, target)
    if pa.types.is_timestamp(target) and pa.types.is_timestamp(t) and target.tz != t.tz:
        arr = arr.cast(pa.timestamp(t.unit, tz=target.tz) if target.tz else pa.timestamp(t.unit))
    return arr.cast(target, safe=False) if pa.types.is_timestamp(target) else arr.cast(target)


def hugeint_from_double(arr: pa.Array, column: Column, target: pa.DataType) -> pa.Array:
    """A HUGEINT column's doubles as ``target``.

    Raises:
        UnsupportedTypeError: a value beyond 38 digits (DuckDB itself cannot read the file then).
    """
    import decimal

    try:
        return pa.array([None if v is None else decimal.Decimal(int(v)) for v in arr.to_pylist()], target)
    except (pa.ArrowInvalid, OverflowError, ValueError) as exc:
        raise UnsupportedTypeError(
            f"column {column.name!r}: value does not fit Arrow type {target} ({exc}); DuckDB cannot read this file's "
            f"value either: read the other columns (leave {column.name!r} out of the columns you select)"
        ) from exc


def _parquet_interval(arr: pa.Array) -> pa.Array:
    """Parquet INTERVAL (months, days, millis as little-endian uint32) to Arrow month_day_nano."""
    raw = np.frombuffer(arr.buffers()[1], dtype="<u4", count=3 * (len(arr) + arr.offset))[3 * arr.offset :].reshape(
        -1, 3
    )
    valid = arr.is_valid().to_numpy(zero_copy_only=False)
    values = [
        pa.MonthDayNano([int(m), int(d), int(ms) * 1_000_000]) if ok else None
        for (m, d, ms), ok in zip(raw.tolist(), valid, strict=False)
    ]
    return pa.array(values, pa.month_day_nano_interval())


def naive_utc(value: dt.datetime) -> dt.datetime:
    return value.astimezone(dt.timezone.utc).replace(tzinfo=None) if value.tzinfo else value


__all__ = ["conform_array", "conform_table", "default_array", "pc"]
