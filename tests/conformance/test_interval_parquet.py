"""INTERVAL columns written to Parquet by this library read back exactly in DuckDB, as DuckDB writes them.

DuckDB writes INTERVAL as ``FIXED_LEN_BYTE_ARRAY(12)`` with converted type INTERVAL (months, days, millis as
little-endian uint32), no min/max statistics, refuses negative intervals and truncates sub-millisecond parts.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import pyspark_ducklake as pdl
from pyspark_ducklake.catalog.stats_values import parse_interval
from pyspark_ducklake.exceptions import UnsupportedTypeError
from tests.support.duck import open_duckdb

M = pa.MonthDayNano
SCHEMA = pa.schema([("id", pa.int64()), ("iv", pa.month_day_nano_interval()), ("name", pa.string())])

# (months, days, nanoseconds); all whole milliseconds, so nothing is truncated
VALUES: list[tuple[int, int, int] | None] = [
    (0, 0, 0),
    (0, 1, 0),
    (1, 2, 3_500_000_000),
    (14, 0, 0),
    None,
    (0, 0, 86_399_999_000_000),  # 23:59:59.999
    (1200, 36500, 4_000_000_000_000_000),  # ~46 days as a time part (4e9 ms, below 2**32)
    (2**31 - 1, 2**31 - 1, (2**32 - 1) * 1_000_000),  # every part at its Parquet maximum
]


def _batch(start: int, values: list[tuple[int, int, int] | None]) -> pa.Table:
    return pa.table(
        {
            "id": pa.array(range(start, start + len(values)), pa.int64()),
            "iv": pa.array([None if v is None else M(list(v)) for v in values], pa.month_day_nano_interval()),
            "name": pa.array([f"row {start + k}" for k in range(len(values))], pa.string()),
        },
        schema=SCHEMA,
    )


def _as_micros(v: Any) -> tuple[int, int, int] | None:
    """(months, days, micros) of an Arrow MonthDayNano, a (months, days, nanos) tuple or None."""
    if v is None:
        return None
    if isinstance(v, tuple):
        return (v[0], v[1], v[2] // 1000)
    return (v.months, v.days, v.nanoseconds // 1000)


def _duck_intervals(con: Any, table: str) -> list[tuple[int, tuple[int, int, int] | None]]:
    # through VARCHAR: Python's timedelta cannot hold the large values, DuckDB's text is exact
    rows = con.execute(f"SELECT id, iv::VARCHAR FROM {table} ORDER BY id").fetchall()
    return [(i, None if text is None else parse_interval(text)) for i, text in rows]


def _parquet_files(catalog: Any) -> list[Path]:
    return sorted(Path(catalog.data_path).rglob("*.parquet"))


def test_intervals_read_back_exactly_in_duckdb(catalog: Any) -> None:
    lake = pdl.connect(catalog.url, catalog.data_path, data_inlining_row_limit=0)
    lake.create_table("main.iv", SCHEMA)
    lake.append("main.iv", _batch(0, VALUES))
    files = _parquet_files(catalog)
    assert len(files) == 1, "the append should have written one Parquet file"

    expected = [(k, _as_micros(v)) for k, v in enumerate(VALUES)]
    ours = lake.scan("main.iv").sort_by("id")
    assert [(r["id"], _as_micros(r["iv"])) for r in ours.to_pylist()] == expected
    assert ours.column("name").to_pylist() == [f"row {k}" for k in range(len(VALUES))]

    con = open_duckdb(catalog)
    try:
        assert _duck_intervals(con, "lake.main.iv") == expected
        # the file itself is annotated as DuckDB annotates INTERVAL, with no statistics for it
        path = str(files[0])
        schema = con.execute(
            "SELECT name, type, converted_type, type_length FROM parquet_schema(?) WHERE name = 'iv'", [path]
        ).fetchall()
        assert schema == [("iv", "FIXED_LEN_BYTE_ARRAY", "INTERVAL", "12")]
        stats = con.execute(
            "SELECT stats_min_value, stats_max_value FROM parquet_metadata(?) WHERE path_in_schema = 'iv'", [path]
        ).fetchall()
        assert stats == [(None, None)]
        other = con.execute(
            "SELECT stats_min_value, stats_max_value FROM parquet_metadata(?) WHERE path_in_schema = 'id'", [path]
        ).fetchall()
        assert other == [("0", str(len(VALUES) - 1))]
        # filters on the interval column (no stats to prune with) and on the others still work
        assert con.execute("SELECT count(*) FROM lake.main.iv WHERE iv = INTERVAL '14 months'").fetchone() == (1,)
        assert con.execute("SELECT count(*) FROM lake.main.iv WHERE iv IS NULL").fetchone() == (1,)

        # DuckDB keeps writing to the table (a Parquet file of its own: ATTACH without inlining here)
        con.execute("INSERT INTO lake.main.iv VALUES (100, INTERVAL '3 days 00:00:01.25', 'duck')")
        expected.append((100, (0, 3, 1_250_000)))
        assert _duck_intervals(con, "lake.main.iv") == expected
    finally:
        con.close()

    # and we append again after DuckDB, then both read everything
    lake.append("main.iv", _batch(200, [(5, 6, 7_000_000), None]))
    expected += [(200, (5, 6, 7_000)), (201, None)]
    ours = lake.scan("main.iv").sort_by("id")
    assert [(r["id"], _as_micros(r["iv"])) for r in ours.to_pylist()] == expected
    con = open_duckdb(catalog)
    try:
        assert _duck_intervals(con, "lake.main.iv") == expected
    finally:
        con.close()


def test_sub_millisecond_parts_truncate_like_duckdb(catalog: Any) -> None:
    """DuckDB truncates an interval's microseconds to milliseconds in Parquet; so do we."""
    con = open_duckdb(catalog)
    try:
        tmp = Path(catalog.data_path) / "duck_sub_ms.parquet"
        tmp.parent.mkdir(parents=True, exist_ok=True)
        con.execute(
            "COPY (SELECT * FROM (VALUES (1, INTERVAL '1 microsecond'), (2, INTERVAL '1999 microseconds'), "
            f"(3, INTERVAL '1 day 00:00:02.999999')) t(id, iv)) TO '{tmp}'"
        )
        duck = [parse_interval(t) for (t,) in con.execute(f"SELECT iv::VARCHAR FROM '{tmp}' ORDER BY id").fetchall()]
        tmp.unlink()
    finally:
        con.close()
    assert duck == [(0, 0, 0), (0, 0, 1_000), (0, 1, 2_999_000)]

    lake = pdl.connect(catalog.url, catalog.data_path, data_inlining_row_limit=0)
    lake.create_table("main.sub", SCHEMA)
    lake.append("main.sub", _batch(1, [(0, 0, 1_000), (0, 0, 1_999_000), (0, 1, 2_999_999_000)]))
    con = open_duckdb(catalog)
    try:
        assert [v for _, v in _duck_intervals(con, "lake.main.sub")] == duck
    finally:
        con.close()
    assert [_as_micros(v) for v in lake.scan("main.sub").sort_by("id").column("iv").to_pylist()] == duck


@pytest.mark.parametrize(
    "bad",
    [(0, 0, -1_000_000), (-1, 0, 0), (0, -1, 3_600_000_000_000)],
    ids=["negative-time", "negative-months", "negative-days"],
)
def test_negative_interval_is_refused_and_nothing_written(catalog: Any, bad: tuple[int, int, int]) -> None:
    lake = pdl.connect(catalog.url, catalog.data_path, data_inlining_row_limit=0)
    lake.create_table("main.neg", SCHEMA)
    lake.append("main.neg", _batch(0, [(0, 1, 0)]))
    before_files = _parquet_files(catalog)
    with pytest.raises(UnsupportedTypeError, match=r"'iv'.*negative"):
        lake.append("main.neg", _batch(1, [(1, 1, 1_000_000), bad]))
    assert _parquet_files(catalog) == before_files
    assert lake.scan("main.neg").num_rows == 1
    con = open_duckdb(catalog)
    try:
        assert _duck_intervals(con, "lake.main.neg") == [(0, (0, 1, 0))]
    finally:
        con.close()


def test_time_part_beyond_32_bit_millis_is_refused(catalog: Any) -> None:
    """DuckDB silently wraps such a value in Parquet; we refuse it rather than corrupt it."""
    lake = pdl.connect(catalog.url, catalog.data_path, data_inlining_row_limit=0)
    lake.create_table("main.big", SCHEMA)
    with pytest.raises(UnsupportedTypeError, match="'iv'"):
        lake.append("main.big", _batch(0, [(0, 0, 2**32 * 1_000_000)]))
    assert _parquet_files(catalog) == []
    assert lake.scan("main.big").num_rows == 0
