"""DuckDB TIME values as Spark's TIME(6): nanoseconds (``time_ns``) truncated to microseconds; ``24:00:00``,
which DuckDB allows and Spark cannot hold (its nano-of-day stops at 23:59:59.999999999), refused."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

_DAY = {"s": 86400, "ms": 86400 * 10**3, "us": 86400 * 10**6, "ns": 86400 * 10**9}


class SparkTimeRangeError(ValueError):
    """A time of day Spark cannot hold (``24:00:00``)."""


def spark_time(arr: pa.Array, target: pa.DataType) -> pa.Array:
    """``arr`` (a ``time32``/``time64`` array) as ``target``.

    Raises:
        SparkTimeRangeError: a value is ``24:00:00`` or later.
    """
    top = pc.max(arr.cast(pa.int32() if pa.types.is_time32(arr.type) else pa.int64())).as_py()
    if top is not None and top >= _DAY[arr.type.unit]:
        raise SparkTimeRangeError(f"a value of {top} {arr.type.unit} since midnight")
    return pc.cast(arr, target, safe=False)


__all__ = ["SparkTimeRangeError", "spark_time"]
