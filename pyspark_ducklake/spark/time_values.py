"""DuckDB TIME values as Spark's TIME(6): nanoseconds (``time_ns``) truncated to microseconds; ``24:00:00``,
which DuckDB allows and Spark cannot hold (its nano-of-day stops at 23:59:59.999999999), refused."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from pyspark_ducklake.exceptions import UnsupportedTypeError

_DAY = {"s": 86400, "ms": 86400 * 10**3, "us": 86400 * 10**6, "ns": 86400 * 10**9}


def spark_time(arr: pa.Array, target: pa.DataType) -> pa.Array:
    """``arr`` (a ``time32``/``time64`` array) as ``target``.

    Raises:
        UnsupportedTypeError: a value is ``24:00:00`` or later (the caller adds the column's name).
    """
    top = pc.max(arr.cast(pa.int32() if pa.types.is_time32(arr.type) else pa.int64())).as_py()
    if top is not None and top >= _DAY[arr.type.unit]:
        raise UnsupportedTypeError(
            f"holds the time 24:00:00, which Spark's TIME cannot hold (a value of {top} {arr.type.unit} since "
            "midnight); read the other columns, or read it in Python (lake.scan) or with DuckDB"
        )
    return pc.cast(arr, target, safe=False)


__all__ = ["spark_time"]
