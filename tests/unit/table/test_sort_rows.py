"""Row order of sorted tables: the cases DuckDB orders in its own way (its ORDER BY is the oracle in
tests/conformance/test_sorted_tables.py; these pin the rules without it)."""

from __future__ import annotations

import pyarrow as pa

from pyspark_ducklake.catalog.types import Column, TableSchema
from pyspark_ducklake.table.sort_rows import SortKey, sort_table

SCHEMA = TableSchema((Column(1, "v", "x"), Column(2, "id", "int64")))


def _order(values: pa.Array, *, desc: bool = False, nulls_first: bool = False) -> list[int]:
    data = pa.table({"v": values, "id": list(range(len(values)))})
    return sort_table(data, (SortKey(1, "v", desc, nulls_first),), SCHEMA).column("id").to_pylist()


def test_floats_nan_above_numbers_and_signed_zeros_equal() -> None:
    values = pa.array([0.0, float("nan"), -0.0, None, float("inf"), -1.0])
    assert _order(values) == [5, 0, 2, 4, 1, 3]  # -0.0 and 0.0 tie: input order kept
    assert _order(values, desc=True, nulls_first=True) == [3, 1, 4, 0, 2, 5]


def test_strings_by_bytes() -> None:
    assert _order(pa.array(["é", "Z", "a", "e\u0301", ""])) == [4, 1, 2, 3, 0]


def test_nested_nulls_above_values_and_prefixes_first() -> None:
    lists = pa.array([[1, None], [1], [], [1, 2], None, [None]])
    assert _order(lists) == [2, 1, 3, 0, 5, 4]
    assert _order(lists, desc=True) == [5, 0, 3, 1, 2, 4]
    structs = pa.array([{"p": 1, "q": None}, {"p": None, "q": "a"}, {"p": 1, "q": "a"}, None])
    assert _order(structs) == [2, 0, 1, 3]


def test_intervals_normalised() -> None:
    day, month = 86_400 * 10**9, (1, 0, 0)
    values = pa.array([(0, 30, 0), month, (0, 0, day), (0, 1, 0), (0, 29, day + 1000)], pa.month_day_nano_interval())
    assert _order(values) == [2, 3, 0, 1, 4]  # 24h = 1 day; 30 days = 1 month; 29 days 24h 1us above them
