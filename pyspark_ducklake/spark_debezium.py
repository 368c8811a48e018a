"""Debezium change events (Kafka messages of its JSON converter) as rows for an upsert: ``pdl.debezium(df, schema)``.

Debezium sends one message per row change, ``{"before": {...}, "after": {...}, "source": {"lsn": n, ...}, "op": "c"}``
(with ``schemas.enable=false``; with schemas on, the same under ``"payload"``), and a tombstone (a null value) after
each delete. :func:`debezium` turns a DataFrame of such messages (a ``value`` column, as Spark's Kafka source gives it)
into the row each change leaves (``after``; for a delete, ``before``: at least the key, every column under
``REPLICA IDENTITY FULL``), plus the change's ``op`` (``r`` snapshot read, ``c`` create, ``u`` update, ``d`` delete)
and its ``lsn`` (the source LSN: the order PostgreSQL committed the changes in). Tombstones, and events other than
those four (``t`` truncate, ``m`` message), are dropped. A primary-key change arrives as a delete of the old key and a
create of the new one, so it needs no special case.

Values are decoded by the column's Spark type as Debezium 3.x encodes them by default (``decimal.handling.mode=
string`` advised, numbers also accepted): DECIMAL from a string or number; DATE from days since 1970-01-01 (or an ISO
string); TIMESTAMP / TIMESTAMP_NTZ from an ISO string (``timestamptz``) or from a number in ``timestamp_unit``
(PostgreSQL's ``timestamp`` at its default precision arrives in microseconds; ``timestamp(0..3)`` in milliseconds);
BINARY from base64; other types as Spark's JSON reader reads them (nested values included).
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from pyspark_ducklake.exceptions import InvalidOptionError

OPS = ("r", "c", "u", "d")
_UNITS = {"us": "timestamp_micros", "ms": "timestamp_millis", "s": "timestamp_seconds"}
# Types read as the JSON text of the value, then converted (Debezium's encodings differ from Spark's JSON reader).
_AS_TEXT = (T.DecimalType, T.DateType, T.TimestampType, T.TimestampNTZType, T.BinaryType)


def debezium(
    df: DataFrame,
    schema: T.StructType | str,
    *,
    value_column: str = "value",
    op_column: str = "op",
    order_column: str = "lsn",
    timestamp_unit: str = "us",
) -> DataFrame:
    """The rows Debezium's change events in ``df[value_column]`` leave, with their op and LSN.

    Args:
        df: Kafka messages (``value`` binary or string), batch or streaming.
        schema: the captured table's columns (a ``StructType`` or a DDL string such as ``"id INT, name STRING"``).
        op_column, order_column: names of the op and LSN columns added after the table's columns (for
            ``delete_when`` / ``order_by`` of the upsert sink).
        timestamp_unit: ``us``, ``ms`` or ``s``: the unit of timestamps Debezium sends as numbers.

    Raises:
        InvalidOptionError: a column name clashes with ``op_column``/``order_column``, ``value_column`` is not in
            ``df``, or ``timestamp_unit`` is not one of the three.
    """
    columns = T.StructType.fromDDL(schema) if isinstance(schema, str) else schema
    if not isinstance(columns, T.StructType):
        raise InvalidOptionError(f"schema must be a struct of the table's columns, got {schema!r}")
    if timestamp_unit not in _UNITS:
        raise InvalidOptionError(f"timestamp_unit must be one of {', '.join(_UNITS)}, got {timestamp_unit!r}")
    if value_column not in df.columns:
        raise InvalidOptionError(f"value_column {value_column!r} is not a column of the DataFrame: {df.columns}")
    for f in columns.fields:
        _check_decodable(f.name, f.dataType, top=True)
    names = {f.name.lower() for f in columns.fields}
    for option, name in (("op_column", op_column), ("order_column", order_column)):
        if name.lower() in names:
            raise InvalidOptionError(
                f"the table has a column {name!r}, the name of the {option.removesuffix('_column')} column; "
                f"pass {option}= another name"
            )
    raw_row = T.StructType([T.StructField(f.name, _raw_type(f.dataType)) for f in columns.fields])
    event = T.StructType(
        [
            T.StructField("before", raw_row),
            T.StructField("after", raw_row),
            T.StructField("op", T.StringType()),
            T.StructField("source", T.StructType([T.StructField("lsn", T.LongType())])),
        ]
    )
    enveloped = T.StructType([T.StructField("payload", event), *event.fields])
    text = F.col(value_column).cast("string")
    parsed = F.from_json(text, enveloped)
    # Schemas on: the event is under "payload"; off: it is the message itself.
    e = F.when(parsed["payload"].isNotNull(), parsed["payload"]).otherwise(
        F.struct(*(parsed[f.name].alias(f.name) for f in event.fields))
    )
    events = df.where(F.col(value_column).isNotNull()).select(e.alias("_e")).where(F.col("_e.op").isin(*OPS))
    row = F.when(F.col("_e.op") == "d", F.col("_e.before")).otherwise(F.col("_e.after"))
    return events.select(
        *(_decode(row[f.name], f.dataType, timestamp_unit).alias(f.name) for f in columns.fields),
        F.col("_e.op").alias(op_column),
        F.col("_e.source.lsn").alias(order_column),
    )


def _check_decodable(name: str, t: T.DataType, *, top: bool) -> None:
    """Refuse what Spark's JSON reader would silently read as NULL from Debezium's encoding: TIME anywhere, and dates,
    timestamps and binaries inside arrays, maps and structs (decoded here only at the top level).

    Raises:
        InvalidOptionError: names the column and what to declare instead.
    """
    time_type = getattr(T, "TimeType", None)
    if time_type is not None and isinstance(t, time_type):
        raise InvalidOptionError(
            f"column {name!r}: TIME is not decoded from Debezium's microseconds yet; declare it BIGINT"
        )
    if not top and isinstance(t, _AS_TEXT) and not isinstance(t, T.DecimalType):
        raise InvalidOptionError(
            f"column {name!r}: a {t.simpleString()} inside a nested type is not decoded from Debezium's encoding; "
            "declare it as Debezium sends it (BIGINT, STRING) and convert it after"
        )
    if isinstance(t, T.ArrayType):
        _check_decodable(name, t.elementType, top=False)
    elif isinstance(t, T.MapType):
        _check_decodable(name, t.keyType, top=False)
        _check_decodable(name, t.valueType, top=False)
    elif isinstance(t, T.StructType):
        for child in t.fields:
            _check_decodable(f"{name}.{child.name}", child.dataType, top=False)


def _raw_type(t: T.DataType) -> T.DataType:
    return T.StringType() if isinstance(t, _AS_TEXT) else t


def _decode(value: Column, t: T.DataType, unit: str) -> Column:
    """A value of Debezium's JSON (as text for the types of ``_AS_TEXT``) as Spark type ``t``."""
    numeric = value.rlike(r"^-?\d+$")
    if isinstance(t, T.DecimalType):
        return value.cast(t)
    if isinstance(t, T.DateType):
        days = F.date_add(F.lit("1970-01-01").cast("date"), value.cast("int"))
        return F.when(numeric, days).otherwise(F.to_date(value))
    if isinstance(t, T.TimestampType | T.TimestampNTZType):
        instant: Column = getattr(F, _UNITS[unit])(value.cast("long"))
        if isinstance(t, T.TimestampType):
            return F.when(numeric, instant).otherwise(F.to_timestamp(value))
        # A TIMESTAMP without zone is sent as its wall time counted from the epoch as if in UTC.
        wall = F.convert_timezone(F.current_timezone(), F.lit("UTC"), instant.cast(T.TimestampNTZType()))
        return F.when(numeric, wall).otherwise(F.to_timestamp_ntz(value))
    if isinstance(t, T.BinaryType):
        return F.unbase64(value)
    return value


__all__ = ["OPS", "debezium"]
