"""Per-leaf min/max strings for Parquet files, fast on large arrays.

Arrow's vectorised ``min_max`` gives the same answer as DuckDB's value-by-value writer whenever no string needs
truncation; only then (or for types Arrow cannot order) does :func:`stats_values.array_min_max` replay DuckDB.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from pyspark_ducklake.catalog.stats_values import array_min_max, check_temporal_range, render_stat
from pyspark_ducklake.catalog.types import Column, TableSchema

MAX_STRING_STATS = 256
_FAST_TYPES = frozenset(
    {
        "boolean",
        "int8",
        "int16",
        "int32",
        "int64",
        "uint8",
        "uint16",
        "uint32",
        "uint64",
        "date",
        "time",
        "timestamp",
        "timestamp_s",
        "timestamp_ms",
        "timestamp_ns",
        "timestamptz",
        "float32",
        "float64",
        "varchar",
        "json",
        "uuid",
    }
)

_INTEGER_STORAGE = {
    "date": pa.int32(),
    "time": pa.int64(),
    "timestamp": pa.int64(),
    "timestamp_s": pa.int64(),
    "timestamp_ms": pa.int64(),
    "timestamp_ns": pa.int64(),
    "timestamptz": pa.int64(),
}

LeafStatsFn = Callable[[int, pa.Array], tuple[str | None, str | None, bool | None]]


def leaf_min_max(column: Column, array: pa.Array) -> tuple[str | None, str | None, bool | None]:
    """``(min, max, contains_nan)`` as DuckDB's Parquet writer records them for one leaf."""
    t = column.type
    if t not in _FAST_TYPES and not t.startswith("decimal"):
        return array_min_max(column, array)
    storage = array.storage if isinstance(array, pa.ExtensionArray) else array
    contains_nan: bool | None = None
    if t in ("float32", "float64"):
        contains_nan = bool(pc.any(pc.is_nan(storage)).as_py() or False)
        storage = storage.filter(pc.invert(pc.is_nan(storage)).fill_null(True))
    if len(storage) == storage.null_count:
        return None, None, contains_nan
    if pa.types.is_decimal(storage.type) or t == "boolean":
        mm = pc.min_max(storage)
        lo, hi = mm["min"].as_py(), mm["max"].as_py()
    elif t == "uuid":
        mm = pc.min_max(storage)
        lo, hi = uuid.UUID(bytes=mm["min"].as_py()), uuid.UUID(bytes=mm["max"].as_py())
    elif t in ("varchar", "json"):
        mm = pc.min_max(storage.cast(pa.binary()))
        blo, bhi = mm["min"].as_py(), mm["max"].as_py()
        if len(blo) > MAX_STRING_STATS or len(bhi) > MAX_STRING_STATS:
            return array_min_max(column, array)
        return blo.decode(), bhi.decode(), contains_nan
    elif t in _INTEGER_STORAGE:
        # Dates and timestamps by their integers: Python's datetime cannot hold years beyond 1..9999, DuckDB can.
        mm = pc.min_max(storage.cast(_INTEGER_STORAGE[t]))
        lo, hi = mm["min"].as_py(), mm["max"].as_py()
        check_temporal_range(column, lo, hi)
    else:
        mm = pc.min_max(storage)
        lo, hi = mm["min"].as_py(), mm["max"].as_py()
    return render_stat(column, lo), render_stat(column, hi), contains_nan


def stats_function(schema: TableSchema) -> LeafStatsFn:
    """A callback for :func:`io.parquet.write_table` that renders a leaf's stats by its field id."""
    by_id = schema.by_id()

    def fn(field_id: int, array: pa.Array) -> tuple[str | None, str | None, bool | None]:
        column = by_id.get(field_id)
        if column is None or column.is_nested:
            return None, None, None
        return leaf_min_max(column, array)

    return fn


__all__ = ["Any", "LeafStatsFn", "leaf_min_max", "stats_function"]
