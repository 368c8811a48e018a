"""DuckLake's ``timetz`` and ``time_ns`` columns (issue #16 item 4).

* ``timetz``: DuckDB's Parquet writer stores the time normalised to UTC (``TIME(us, isAdjustedToUTC=true)``, the
  offset dropped, no column statistics, and a file statistics row of zeros), and its inlined rows keep the text with
  the offset (``'12:34:56.789+05:30'``). DuckDB's own Arrow read gives ``time64[us]`` of the time as written with
  the offset dropped (``12:34:56.789`` inlined, ``07:04:56.789`` once flushed); we read the same.

  Written from Arrow, a ``time64[us]`` value carries no offset, so it means a UTC time: it is stored with offset
  ``+00`` (inlined ``'12:34:56+00'``; in Parquet the UTC time itself), and DuckDB reads it back as
  ``12:34:56+00`` inlined and after either flush. ``24:00:00`` stays ``24:00:00+00`` in our Parquet files too
  (DuckDB's own flush turns it into ``00:00:00+00``).
* ``time_ns``: ``time64[ns]``, only ever inlined. DuckDB's Parquet writer refuses it (an INTERNAL error), and its
  reader reads a ``TIME(NANOS)`` column as microsecond ``TIME``, which it cannot cast to ``TIME_NS`` ("Unimplemented
  type for cast"): a file we wrote would make the table unreadable in DuckDB. So rows of a table with a ``time_ns``
  column stay inlined (on SQLite; DuckDB 1.5.5 cannot create such a table with inlining on PostgreSQL), and a write
  that needs Parquet is refused naming the column.
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
UTC_OFFSET_TEXT = "+00"  # the offset of every timetz value written here (DuckDB's spelling of UTC)

_OFFSET_RE = re.compile(r"^(.*\d)\s*([+-]\d{1,2}(?::?\d{2}){0,2})\s*$")


def _split_offset(text: str) -> tuple[str, int]:
    """The time part of a ``timetz`` text and its offset in seconds east of UTC (0 when none)."""
    m = _OFFSET_RE.match(text)
    if m is None:
        return text, 0
    zone = m.group(2)
    sign = -1 if zone[0] == "-" else 1
    body = zone[1:]
    parts = body.split(":") if ":" in body else [body[i : i + 2] for i in range(0, len(body), 2)]
    hours, minutes, seconds = (int(p) for p in [*parts, "0", "0"][:3])
    return m.group(1), sign * (hours * 3600 + minutes * 60 + seconds)


def parse_time_text(text: str, type_name: str) -> int:
    """Units of the day (µs, ns for ``time_ns``) of DuckDB's text of a ``timetz`` / ``time_ns`` value; a
    ``timetz`` offset is dropped, as DuckDB's Arrow read drops it.

    Raises:
        ValueError: the text is not a time.
    """
    from pyspark_ducklake.catalog.stats_values import parse_time

    if type_name == "timetz":
        text = _split_offset(text)[0]
    return parse_time(text, TIME_PER_SECOND[type_name])


def parse_timetz_utc(text: str) -> int:
    """Microseconds of the UTC time of DuckDB's ``timetz`` text, as DuckDB's flush stores it in Parquet
    (``'00:00:00+15:59:59'`` → ``08:00:01``); a ``+00`` time is kept as it is, so ``24:00:00+00`` stays.

    Raises:
        ValueError: the text is not a time.
    """
    from pyspark_ducklake.catalog.stats_values import parse_time

    time_text, offset = _split_offset(text)
    micros = parse_time(time_text)
    return micros if offset == 0 else (micros - offset * 10**6) % (86400 * 10**6)


def timetz_order_key(text: str) -> tuple[int, int]:
    """How DuckDB orders ``timetz`` values in min/max statistics (and ``min()``/``max()``): by the time as written,
    then the larger offset first (``dtime_tz_t``'s bits), not by the UTC time its ``ORDER BY`` uses. Measured:
    ``max('23:00:00-15:59:59', '24:00:00+00')`` is ``'24:00:00+00'``.

    Raises:
        ValueError: the text is not a time.
    """
    from pyspark_ducklake.catalog.stats_values import parse_time

    time_text, offset = _split_offset(text)
    return parse_time(time_text), -offset


def format_timetz(micros: int) -> str:
    """DuckDB's text of a ``timetz`` value written here: the time and offset ``+00``."""
    from pyspark_ducklake.catalog.stats_values import format_time

    return format_time(micros) + UTC_OFFSET_TEXT


def format_time_ns(nanos: int) -> str:
    """DuckDB's text of a ``time_ns`` value (nine fraction digits, trailing zeros trimmed)."""
    from pyspark_ducklake.catalog.stats_values import format_time

    return format_time(nanos, digits=9, per_second=10**9)


def utc_time_field_ids(columns: Iterable[Column]) -> frozenset[int]:
    """Field ids of the ``timetz`` leaves (at any depth): written as ``TIME(us, isAdjustedToUTC=true)`` without
    statistics, as DuckDB writes them."""
    return frozenset(c.column_id for top in columns for c in top.walk() if c.type == "timetz")


def parquet_obstacle(columns: Iterable[Column], table_name: str) -> UnsupportedTypeError | None:
    """The error for writing rows of these columns to Parquet, or None when DuckDB reads such a file back."""
    for top in columns:
        for c in top.walk():
            if c.type == "time_ns":
                where = repr(top.name) if c is top else f"{top.name!r} (its field {c.name!r})"
                return UnsupportedTypeError(
                    f"table {table_name} has column {where} of DuckLake type 'time_ns', which can only be stored "
                    "inlined (DuckDB 1.5.5 cannot write it to Parquet, nor read a TIME(NANOS) file back as TIME_NS): "
                    "append at most data_inlining_row_limit rows at a time (the rows stay inlined; flushes leave "
                    "them so), or store the column as TIME (microseconds) instead; nothing was written"
                )
    return None


def check_parquet_writable(columns: Iterable[Column], table_name: str) -> None:
    """Refuse writing rows of these columns to Parquet when DuckDB could not read the file back.

    Raises:
        UnsupportedTypeError: a ``time_ns`` column (or nested field); names it and says what to do.
    """
    error = parquet_obstacle(columns, table_name)
    if error is not None:
        raise error


__all__ = [
    "TIME_ARROW",
    "TIME_PER_SECOND",
    "UTC_OFFSET_TEXT",
    "check_parquet_writable",
    "format_time_ns",
    "format_timetz",
    "parquet_obstacle",
    "parse_time_text",
    "parse_timetz_utc",
    "timetz_order_key",
    "utc_time_field_ids",
]
