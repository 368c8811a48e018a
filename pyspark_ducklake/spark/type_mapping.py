"""DuckLake columns as Spark types, and Arrow data in the exact shape Spark's Python data sources require.

Spark has no unsigned integers, UUID, JSON or month-based intervals: unsigned types widen to the next signed
type (``uint64`` to ``decimal(20,0)``), UUID and JSON read as strings, INTERVAL as DuckDB's interval text.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_schema

from pyspark_ducklake.catalog.stats_values import format_interval
from pyspark_ducklake.catalog.types import (
    Column,
    TableSchema,
    arrow_field,
    columns_from_arrow,
    decimal_params,
    unreadable_type,
)
from pyspark_ducklake.exceptions import UnsupportedTypeError
from pyspark_ducklake.spark.geometry_values import is_spark_geometry, spark_geometry
from pyspark_ducklake.spark.time_values import spark_time

_PRIMITIVES: dict[str, T.DataType] = {
    "boolean": T.BooleanType(),
    "int8": T.ByteType(),
    "int16": T.ShortType(),
    "int32": T.IntegerType(),
    "int64": T.LongType(),
    "uint8": T.ShortType(),
    "uint16": T.IntegerType(),
    "uint32": T.LongType(),
    "uint64": T.DecimalType(20, 0),
    "int128": T.DecimalType(38, 0),
    "uint128": T.DecimalType(38, 0),
    "float32": T.FloatType(),
    "float64": T.DoubleType(),
    "date": T.DateType(),
    "time": T.TimeType(6),
    "timetz": T.TimeType(6),
    "time_ns": T.TimeType(6),
    "timestamp": T.TimestampNTZType(),
    "timestamp_s": T.TimestampNTZType(),
    "timestamp_ms": T.TimestampNTZType(),
    "timestamp_ns": T.TimestampNTZType(),
    "timestamptz": T.TimestampType(),
    "interval": T.StringType(),
    "varchar": T.StringType(),
    "json": T.StringType(),
    "uuid": T.StringType(),
    "blob": T.BinaryType(),
    "geometry": T.GeometryType(0),
    "variant": T.VariantType(),
}


def spark_type(column: Column) -> T.DataType:
    t = column.type
    if t in _PRIMITIVES:
        return _PRIMITIVES[t]
    dec = decimal_params(t)
    if dec is not None:
        return T.DecimalType(*dec)
    if t == "list":
        child = column.children[0]
        return T.ArrayType(spark_type(child), child.nulls_allowed)
    if t == "struct":
        return T.StructType([T.StructField(c.name, spark_type(c), c.nulls_allowed) for c in column.children])
    if t == "map":
        key, value = column.children
        return T.MapType(spark_type(key), spark_type(value), value.nulls_allowed)
    raise unreadable_type(column.name, t)


def spark_schema(schema: TableSchema, extra: list[T.StructField] | None = None) -> T.StructType:
    fields = [T.StructField(c.name, spark_type(c), True) for c in schema.columns]
    return T.StructType(fields + (extra or []))


def arrow_schema_for_spark(schema: T.StructType) -> pa.Schema:
    return to_arrow_schema(schema, timezone="UTC", prefers_large_types=False)


def to_spark_array(arr: pa.Array, target: pa.DataType) -> pa.Array:
    """Convert one column to the exact Arrow type Spark expects for it."""
    t = arr.type
    if t == target:
        return arr
    if is_spark_geometry(target) and not pa.types.is_struct(t):
        return spark_geometry(arr, target)
    if isinstance(t, pa.BaseExtensionType):
        storage = arr.storage
        if t.extension_name == "arrow.uuid":
            import uuid

            return pa.array([None if b is None else str(uuid.UUID(bytes=b)) for b in storage.to_pylist()], pa.string())
        return to_spark_array(storage, target)
    if t == pa.month_day_nano_interval():
        return pa.array(
            [None if v is None else format_interval(v.months, v.days, v.nanoseconds // 1000) for v in arr.to_pylist()],
            pa.string(),
        )
    if pa.types.is_struct(t) and pa.types.is_struct(target):
        children = [to_spark_array(arr.field(i), target.field(i).type) for i in range(t.num_fields)]
        return pa.StructArray.from_arrays(children, fields=list(target), mask=arr.is_null() if arr.null_count else None)
    if pa.types.is_list(t) and pa.types.is_list(target):
        values = to_spark_array(arr.values, target.value_type)
        return pa.ListArray.from_arrays(
            arr.offsets, values, type=target, mask=arr.is_null() if arr.null_count else None
        )
    if pa.types.is_map(t) and pa.types.is_map(target):
        keys = to_spark_array(arr.keys, target.key_type)
        items = to_spark_array(arr.items, target.item_type)
        return pa.MapArray.from_arrays(
            arr.offsets, keys, items, type=target, mask=arr.is_null() if arr.null_count else None
        )
    if pa.types.is_time(t) and pa.types.is_time(target):
        return spark_time(arr, target)
    if pa.types.is_timestamp(t) and pa.types.is_timestamp(target):
        return pc.cast(arr, target, safe=False)
    return arr.cast(target)


def to_spark_batch(table: pa.Table | pa.RecordBatch, target: pa.Schema) -> pa.RecordBatch:
    """``table`` as one record batch of exactly the Arrow types Spark expects (columns that already have them are
    passed on without a copy).

    Raises:
        UnsupportedTypeError: a value Spark cannot hold (a TIME of 24:00:00); the message names the column.
    """
    arrays = []
    for i in range(table.num_columns):
        try:
            arrays.append(to_spark_array(_one_array(table.column(i)), target.field(i).type))
        except UnsupportedTypeError as e:
            raise UnsupportedTypeError(f"column {target.field(i).name!r} {e}") from e
    return pa.RecordBatch.from_arrays(arrays, schema=target)


def _one_array(column: pa.Array | pa.ChunkedArray) -> pa.Array:
    if isinstance(column, pa.ChunkedArray):
        return column.chunk(0) if column.num_chunks == 1 else column.combine_chunks()
    return column


def columns_from_spark(schema: T.StructType) -> TableSchema:
    """DuckLake columns for a Spark schema (numbered depth first from 1), all nullable as Delta Lake does.

    Raises:
        UnsupportedTypeError: a Spark type DuckLake cannot hold; the message names the column.
    """
    for f in schema.fields:
        # a top-level VARIANT is stored as one; nested ones are refused below (DuckDB cannot write them to Parquet)
        if not isinstance(f.dataType, T.VariantType):
            _check_spark_type(f.name, f.dataType)
    arrow = arrow_schema_for_spark(schema)
    # Spark infers NOT NULL from expressions (spark.range's id); a table should not inherit that accident.
    return TableSchema(tuple(_nullable(c) for c in columns_from_arrow(arrow)))


def _nullable(column: Column) -> Column:
    return column.nullable()


def _check_spark_type(name: str, dt: T.DataType) -> None:
    unsupported = (
        T.CalendarIntervalType,
        T.DayTimeIntervalType,
        T.YearMonthIntervalType,
        T.NullType,
        T.VariantType,
        T.GeographyType,
    )
    if isinstance(dt, T.GeometryType) and dt.srid != 0:
        raise UnsupportedTypeError(
            f"column {name!r}: Spark type {dt.simpleString()} has SRID {dt.srid}, and DuckLake keeps no SRID or CRS; "
            "st_setsrid(col, 0) first if the coordinates need no CRS to be read"
        )
    if isinstance(dt, unsupported):
        hint = {
            T.VariantType: "DuckDB 1.5.5 writes VARIANT only as a top-level column; or to_json(col) for a JSON string",
            T.NullType: "e.g. lit(None).cast('string'): a column of NULLs needs a type",
            T.GeographyType: "e.g. st_asbinary(col) for WKB in a BLOB column",
        }.get(type(dt), "e.g. to a string or a number of seconds")
        raise UnsupportedTypeError(
            f"column {name!r}: Spark type {dt.simpleString()} cannot be stored in DuckLake; cast it first ({hint})"
        )
    if isinstance(dt, T.ArrayType):
        _check_spark_type(name, dt.elementType)
    elif isinstance(dt, T.MapType):
        _check_spark_type(name, dt.keyType)
        _check_spark_type(name, dt.valueType)
    elif isinstance(dt, T.StructType):
        for f in dt.fields:
            _check_spark_type(f"{name}.{f.name}", f.dataType)


__all__ = ["arrow_field", "arrow_schema_for_spark", "columns_from_spark", "spark_schema", "to_spark_batch"]
