"""A partition transform applied to a column's values, as DuckDB computes each (``ducklake_partition_data.cpp``).

* ``year``/``month``/``day``/``hour`` (DuckLake 1.0): the calendar part, a TIMESTAMPTZ in UTC (as DuckDB in a UTC
  session; DuckDB takes it in the session's TimeZone) and its year by era (ICU's: 1 BC is 1, 2 BC is 2).
* ``epoch_year``/``epoch_month``/``epoch_day``/``epoch_hour`` (DuckLake 1.1): DuckDB's ``date_diff(part, DATE
  '1970-01-01', col)``, Iceberg's whole units since the epoch: calendar years and months crossed, days of the date,
  hours floored (so before 1970 every value is negative: ``1969-12-31 23:30`` is hour -1, year -1). A TIMESTAMPTZ on
  its UTC instant, a TIMESTAMP_NS floored to microseconds first, ``±infinity`` NULL (``date_diff`` of an infinite
  value; a TIMESTAMP_NS ``infinity`` is an integer to DuckDB's ``epoch_ns``, so a day in 2262).
* ``bucket(N)`` (DuckLake 1.0): ``(murmur3_32(value) & 2147483647) % N`` with DuckDB's ``murmur3_32``, which hashes
  by the value's physical type: an 8-byte long for booleans, signed integers up to 64 bits, DECIMALs up to 18 digits
  (the unscaled value, not Iceberg's minimal bytes), dates (days), times and timestamps (in their own unit:
  seconds for TIMESTAMP_S, nanoseconds for TIMESTAMP_NS), TIMETZ (DuckDB's packed bits) and floats (the DOUBLE's
  bits, ``-0.0`` as ``0.0``); the bytes of strings and blobs; and DuckDB's text of every other value (unsigned
  integers, HUGEINT, DECIMALs of 19 digits and more, UUID (not Iceberg's 16 bytes), INTERVAL).

Every result is an Arrow array of one value per row (NULL for NULL), BIGINT for the calendar and epoch parts,
INTEGER for buckets, as DuckDB types them.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from pyspark_ducklake.catalog.partitioning import CALENDAR_TRANSFORMS, EPOCH_TRANSFORMS, bucket_count, transform_kind
from pyspark_ducklake.catalog.stats_values import (
    DATE_INFINITY,
    TIMESTAMP_INFINITY,
    civil_from_days,
    duckdb_text,
    storage_values,
)
from pyspark_ducklake.catalog.types import Column, decimal_params
from pyspark_ducklake.exceptions import UnsupportedTypeError
from pyspark_ducklake.table.murmur3 import hash_binary_array, hash_bytes, hash_longs

_MICROS_PER = {"s": 10**6, "ms": 10**3, "us": 1}
_HOUR_US = 3600 * 10**6
_DAY_US = 24 * _HOUR_US
# DuckDB's TIMETZ: micros << 24 | (MAX_OFFSET - offset seconds); every value written here has offset +00
_TIMETZ_UTC = 16 * 3600 - 1
_LONG_TYPES = frozenset(
    {"boolean", "int8", "int16", "int32", "int64", "date", "time", "time_ns"}
    | {"timestamp", "timestamp_s", "timestamp_ms", "timestamp_ns", "timestamptz"}
)
_TEXT_TYPES = frozenset({"uint8", "uint16", "uint32", "uint64", "int128", "uint128", "interval"})
_HEX = np.frombuffer(b"0123456789abcdef", dtype=np.uint8)


def transform_array(array: pa.Array, column: Column, transform: str) -> pa.Array:
    """The partition values of ``array`` (a column's values) under ``transform`` (as stored: ``bucket(4)``).

    Raises:
        InvalidOptionError: a transform this library does not know.
    """
    kind = transform_kind(transform)
    if kind == "identity":
        return array
    if kind in CALENDAR_TRANSFORMS:
        return _calendar(array, kind)
    if kind in EPOCH_TRANSFORMS:
        return _epoch(array, kind)
    return bucket_array(array, column, bucket_count(transform))


def _calendar(arr: pa.Array, kind: str) -> pa.Array:
    """DuckDB's ``year``/``month``/``day``/``hour`` of each value, NULL for NULL and ``±infinity``."""
    if pa.types.is_date(arr.type):
        days, finite = _dates(arr)
        hours = np.zeros(len(days), dtype=np.int64)
    else:
        # DuckDB casts TIMESTAMP_NS to TIMESTAMP for these, dropping nanoseconds towards zero
        micros, finite = _micros(arr, ns_floor=False, ns_infinite=True)
        days = micros // _DAY_US
        hours = (micros - days * _DAY_US) // _HOUR_US
    values = hours if kind == "hour" else _civil_part(days, kind)
    if kind == "year" and pa.types.is_timestamp(arr.type) and arr.type.tz is not None:
        # DuckDB takes a TIMESTAMPTZ's year from ICU, which counts years before 1 by era: 1 BC is 1, not 0
        values = np.where(values > 0, values, 1 - values)
    return _with_nulls(values, finite, arr)


def _epoch(arr: pa.Array, kind: str) -> pa.Array:
    """``date_diff('<part>', DATE '1970-01-01', value)``, NULL for NULL and ``±infinity``."""
    if pa.types.is_date(arr.type):
        days, finite = _dates(arr)
        micros = None
    else:
        # nanoseconds floored to microseconds (Iceberg's rule); DuckDB's epoch_ns() takes a TIMESTAMP_NS ±infinity
        # as its integer, a day in 2262 (or 1677)
        micros, finite = _micros(arr, ns_floor=True, ns_infinite=False)
        days = micros // _DAY_US
    if kind == "epoch_day":
        values = days
    elif kind == "epoch_hour":
        values = days * 24 if micros is None else micros // _HOUR_US
    elif kind == "epoch_year":
        values = _civil_part(days, "year") - 1970
    else:
        values = (_civil_part(days, "year") - 1970) * 12 + _civil_part(days, "month") - 1
    return _with_nulls(values, finite, arr)


def _dates(arr: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """Days since 1970-01-01 (0 where NULL or infinite) and which are finite."""
    days = arr.cast(pa.int32()).fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
    finite = np.abs(days) != DATE_INFINITY
    return np.where(finite, days, 0), finite


def _micros(arr: pa.Array, *, ns_floor: bool, ns_infinite: bool) -> tuple[np.ndarray, np.ndarray]:
    """Microseconds since the epoch (UTC; 0 where NULL or infinite) and which are finite."""
    raw = arr.cast(pa.int64()).fill_null(0).to_numpy(zero_copy_only=False)
    unit = arr.type.unit
    finite = np.abs(raw) != TIMESTAMP_INFINITY
    if unit == "ns" and not ns_infinite:
        finite = np.ones(len(raw), dtype=bool)
    raw = np.where(finite, raw, 0)
    if unit != "ns":
        return raw * _MICROS_PER[unit], finite
    if ns_floor:
        return raw // 1000, finite
    return np.where(raw >= 0, raw // 1000, (raw + 999) // 1000), finite


def _with_nulls(values: np.ndarray, finite: np.ndarray, arr: pa.Array) -> pa.Array:
    invalid = ~finite
    if arr.null_count:
        invalid |= np.asarray(arr.is_null().to_numpy(zero_copy_only=False), dtype=bool)
    return pa.array(values.astype(np.int64, copy=False), pa.int64(), mask=invalid if invalid.any() else None)


def _civil_part(days: np.ndarray, part: str) -> np.ndarray:
    """The year, month or day of each of ``days``; computed once per day of their span when that is no longer than
    the array (a batch's rows mostly share few days), else per row."""
    index = {"year": 0, "month": 1, "day": 2}[part]
    if len(days) == 0:
        return days
    lo, hi = int(days.min()), int(days.max())
    if hi - lo < max(len(days), 4096):
        return civil_from_days(np.arange(lo, hi + 1, dtype=np.int64))[index][days - lo]
    return civil_from_days(days)[index]


def bucket_array(array: pa.Array, column: Column, count: int) -> pa.Array:
    """``(murmur3_32(value) & 2147483647) % count`` per value of ``column`` (NULL for NULL), as INTEGER."""
    hashes = murmur3_values(array, column).view(np.uint32)
    buckets = ((hashes & np.uint32(0x7FFFFFFF)) % np.uint32(count)).view(np.int32)
    nulls = np.asarray(array.is_null().to_numpy(zero_copy_only=False), dtype=bool) if array.null_count else None
    return pa.array(buckets, pa.int32(), mask=nulls)


def murmur3_values(array: pa.Array, column: Column) -> np.ndarray:
    """DuckDB's ``murmur3_32`` of each value of ``column`` (int32; anything for NULL slots).

    Raises:
        UnsupportedTypeError: a nested, VARIANT or GEOMETRY column (DuckDB hashes its text of those).
    """
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    t = column.type
    dec = decimal_params(t)
    if t in _LONG_TYPES or t in ("float32", "float64", "timetz") or (dec is not None and dec[0] <= 18):
        return hash_longs(_longs(array, t, dec is not None))
    if t in ("varchar", "blob", "json"):
        storage = array.storage if isinstance(array, pa.ExtensionArray) else array
        return hash_binary_array(storage)
    if t == "uuid":
        return _hash_uuid_text(array.storage if isinstance(array, pa.ExtensionArray) else array)
    if t in _TEXT_TYPES or dec is not None:
        texts = [None if v is None else duckdb_text(column, v) for v in storage_values(column, array)]
        return hash_binary_array(pa.array(["" if v is None else v for v in texts], pa.string()))
    raise UnsupportedTypeError(
        f"bucket() of column {column.name!r} ({t}) is not computed here: DuckDB hashes its own text of such values; "
        "write to this table with DuckDB, or repartition it with lake.set_partitioning()"
    )


def _longs(array: pa.Array, t: str, decimal: bool) -> np.ndarray:
    """The 64-bit integer DuckDB hashes for each value (0 for NULL slots)."""
    if t in ("float32", "float64"):
        values = array.cast(pa.float64()).fill_null(0.0).to_numpy(zero_copy_only=False)
        return np.where(values == 0.0, 0.0, values).view(np.int64)  # -0.0 hashes as 0.0
    if decimal:
        # the unscaled value: the low 64 bits of each little-endian 128-bit decimal
        words = np.frombuffer(array.buffers()[1], dtype="<i8").reshape(-1, 2)
        return np.where(
            np.asarray(array.is_null().to_numpy(zero_copy_only=False), dtype=bool),
            0,
            words[array.offset : array.offset + len(array), 0],
        )
    if t == "date":
        array = array.cast(pa.int32())
    elif t == "boolean":
        array = array.cast(pa.int8())
    values = array.cast(pa.int64()).fill_null(0).to_numpy(zero_copy_only=False)
    if t == "timetz":
        return (values << 24) | _TIMETZ_UTC
    return values


def _hash_uuid_text(storage: pa.Array) -> np.ndarray:
    """murmur3 of DuckDB's text of each UUID (``f79c3e09-677c-4bbd-a479-3f349cb785e7``), built with numpy."""
    n = len(storage)
    raw = np.frombuffer(storage.buffers()[1], dtype=np.uint8)[storage.offset * 16 : (storage.offset + n) * 16]
    raw = raw.reshape(n, 16)
    hexed = np.empty((n, 32), dtype=np.uint8)
    hexed[:, 0::2] = _HEX[raw >> 4]
    hexed[:, 1::2] = _HEX[raw & 15]
    text = np.full((n, 36), ord("-"), dtype=np.uint8)
    for src, dst in ((slice(0, 8), slice(0, 8)), (slice(8, 12), slice(9, 13)), (slice(12, 16), slice(14, 18))):
        text[:, dst] = hexed[:, src]
    text[:, 19:23] = hexed[:, 16:20]
    text[:, 24:36] = hexed[:, 20:32]
    return hash_bytes(text.ravel(), np.arange(n, dtype=np.int64) * 36, np.full(n, 36, dtype=np.int64))


__all__ = ["bucket_array", "murmur3_values", "transform_array"]
