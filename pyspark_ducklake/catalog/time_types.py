"""DuckLake's ``timetz`` and ``time_ns`` columns (issue #16 item 4).

* ``timetz``: DuckDB's Parquet writer stores the time normalised to UTC (``TIME(us, isAdjustedToUTC=true)``, the
  offset dropped), and its inlined rows keep the text with the offset (``'12:34:56.789+05:30'``). DuckDB's own
  Arrow read gives ``time64[us]`` of the time as written with the offset dropped (``12:34:56.789`` inlined,
  ``07:04:56.789`` once flushed); we read the same.
* ``time_ns``: only ever inlined (DuckDB's Parquet writer refuses it), ``time64[ns]``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import TYPE_CHECKING

import pyarrow as pa

from pyspark_ducklake.exceptions import UnsupportedTypeError

if TYPE_CHECKING:
    from pyspark_ducklake.catalog.types import Column

TIME_ARROW: dict[str, pa.DataType] = {"timetz": pa.time64("us"), "time_ns": pa.time64("ns")}
TIME_PER_SECOND = {"time": 10**6, "timetz": 10**6, "time_ns": 10**9}

_OFFSET_RE = re.compile(r"^(.*\d)\s*([+-]\d{1,2}(?::?\d{2}){0,2})\s*$")


def parse_time_text(text: str, type_name: str) -> int:
    """Units of the day (µs, ns for ``time_ns``) of DuckDB's text of a ``timetz`` / ``time_ns`` value; a
    ``timetz`` offset is dropped, as DuckDB's Arrow read drops it.

    Raises:
        ValueError: the text is not a time.
    """
    from pyspark_ducklake.catalog.stats_values import parse_time

    if type_name == "timetz":
        m = _OFFSET_RE.match(text)
        if m is not None:
            text = m.group(1)
    return parse_time(text, TIME_PER_SECOND[type_name])


# Types read here but not written yet: their inlined text is not DuckDB's yet.
READ_ONLY_TYPES = frozenset({"timetz", "time_ns"})


def check_writable(columns: Iterable[Column], table_name: str) -> None:
    """Refuse a write into a table with a column (or nested field) of a type read here but not written.

    Raises:
        UnsupportedTypeError: names the column and says what to do; nothing has been written.
    """
    for top in columns:
        for c in top.walk():
            if c.type in READ_ONLY_TYPES:
                raise UnsupportedTypeError(
                    f"table {table_name} has column {top.name!r} of DuckLake type {c.type!r}, which pyspark-ducklake "
                    "reads but does not write yet; write the rows with DuckDB"
                )


__all__ = ["READ_ONLY_TYPES", "TIME_ARROW", "TIME_PER_SECOND", "check_writable", "parse_time_text"]
