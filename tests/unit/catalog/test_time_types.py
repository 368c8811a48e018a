"""TIMETZ and TIME_NS text, ordering and the Parquet refusal (catalog/time_types.py); the DuckDB side is in
tests/conformance/test_time_writes.py."""

from __future__ import annotations

import re

import pyarrow as pa
import pytest

from pyspark_ducklake.catalog.inlined_codec import decode_values, encode_values
from pyspark_ducklake.catalog.stats_values import widen
from pyspark_ducklake.catalog.time_types import (
    check_parquet_writable,
    format_time_ns,
    format_timetz,
    parse_time_text,
    parse_timetz_utc,
    timetz_order_key,
    utc_time_field_ids,
)
from pyspark_ducklake.catalog.types import Column
from pyspark_ducklake.exceptions import InvalidOptionError, UnsupportedTypeError
from pyspark_ducklake.options import parse_column_names

TZ = Column(2, "tz", "timetz")
NS = Column(3, "tn", "time_ns")


@pytest.mark.parametrize(
    ("micros", "text"),
    [
        (0, "00:00:00+00"),
        (45_296_789_000, "12:34:56.789+00"),
        (86_400_000_000, "24:00:00+00"),
        (1, "00:00:00.000001+00"),
    ],
)
def test_timetz_text_round_trips_at_utc(micros: int, text: str) -> None:
    assert format_timetz(micros) == text
    assert parse_time_text(text, "timetz") == micros
    assert parse_timetz_utc(text) == micros


@pytest.mark.parametrize(
    ("text", "utc"),
    [
        ("12:34:56.789+05:30", 25_496_789_000),  # 07:04:56.789
        ("00:00:00+15:59:59", 28_801_000_000),  # 08:00:01, the day before
        ("23:00:00-15:59:59", 53_999_000_000),  # 14:59:59, the day after
        ("24:00:00+00", 86_400_000_000),
    ],
)
def test_timetz_utc_of_duckdbs_text_as_its_flush(text: str, utc: int) -> None:
    assert parse_timetz_utc(text) == utc


def test_timetz_stats_order_is_duckdbs_time_then_larger_offset_first() -> None:
    assert timetz_order_key("24:00:00+00") > timetz_order_key("23:00:00-15:59:59")
    assert timetz_order_key("00:00:00+15:59:59") < timetz_order_key("00:00:00+00")
    assert widen(TZ, "00:00:00+15:59:59", "23:00:00-15:59:59", "00:00:00+00", "24:00:00+00") == (
        "00:00:00+15:59:59",
        "24:00:00+00",
    )


def test_time_ns_text() -> None:
    assert format_time_ns(45_296_123_456_789) == "12:34:56.123456789"
    assert format_time_ns(86_400 * 10**9) == "24:00:00"
    assert format_time_ns(1_000) == "00:00:00.000001"


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_inlined_values_round_trip(backend: str) -> None:
    tz = pa.array([0, 86_400_000_000, None], pa.time64("us"))
    assert encode_values(TZ, tz, backend) == ["00:00:00+00", "24:00:00+00", None]
    assert decode_values(TZ, ["12:34:56+05:30", None], backend).to_pylist()[1] is None
    assert decode_values(TZ, ["12:34:56+05:30"], backend, timetz_utc=True).cast(pa.int64()).to_pylist() == [
        25_496_000_000
    ]
    ns = pa.array([45_296_123_456_789, None], pa.time64("ns"))
    assert encode_values(NS, ns, backend) == ["12:34:56.123456789", None]
    assert decode_values(NS, ["12:34:56.123456789"], backend).cast(pa.int64()).to_pylist() == [45_296_123_456_789]


def test_time_ns_refused_for_parquet_naming_the_column_even_nested() -> None:
    listed = Column(4, "l", "list", children=(Column(5, "element", "time_ns"),))
    check_parquet_writable([TZ], "main.t")
    for columns, where in (([NS], "'tn'"), ([TZ, listed], "'l' (its field 'element')")):
        with pytest.raises(
            UnsupportedTypeError, match=rf"column {re.escape(where)}.*append at most data_inlining_row_limit"
        ):
            check_parquet_writable(columns, "main.t")
    assert utc_time_field_ids([TZ, Column(6, "l", "list", children=(Column(7, "element", "timetz"),))]) == {2, 7}


def test_columns_option_names() -> None:
    assert parse_column_names(" id, Name ", "columns") == ("id", "Name")
    assert parse_column_names(["a", "b"], "columns") == ("a", "b")
    for bad in ("", "a,,b", "a, A", 3):
        with pytest.raises(InvalidOptionError, match="option columns"):
            parse_column_names(bad, "columns")
