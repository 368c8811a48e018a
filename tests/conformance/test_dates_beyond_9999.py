"""Dates and timestamps outside Python's years 1..9999: written exactly (inlined and Parquet), read exactly both ways.

DuckDB holds dates from 5877642-06-25 (BC) to 5881580-07-10 and timestamps from 290309-12-22 (BC) to 294247-01-10;
Arrow holds them too (``date32`` days, ``timestamp[us]`` microseconds). Python's ``datetime`` does not, so nothing
on the way may turn them into Python dates. Values beyond DuckDB's range are refused with nothing written.
"""

from __future__ import annotations

import os
from typing import Any

import pyarrow as pa
import pytest

import pyspark_ducklake as pdl
from tests.support.bad_inputs import expect_bad_input
from tests.support.duck import open_duckdb

# days since 1970-01-01: 10183-09-21, 0222-09-04 (BC), DuckDB's smallest and largest finite dates
DAYS = [3_000_000, -800_000, -2_147_483_646, 2_147_483_646, 0]
DAY_TEXT = ["10183-09-21", "0222-09-04 (BC)", "5877642-06-25 (BC)", "5881580-07-10", "1970-01-01"]
# microseconds: 21956-09-21, 290309-12-22 (BC) (DuckDB's smallest), 294247-01-10 04:00:54.775806 (its largest)
MICROS = [630_720_000_000_000_000, -9_223_372_022_400_000_000]
MICROS += [9_223_372_036_854_775_806, 0, 1]
SCHEMA = pa.schema(
    [("id", pa.int64()), ("d", pa.date32()), ("ts", pa.timestamp("us")), ("tz", pa.timestamp("us", "UTC"))]
)


def far_rows() -> pa.Table:
    n = len(DAYS)
    return pa.table(
        {
            "id": pa.array(range(n), pa.int64()),
            "d": pa.array(DAYS, pa.int32()).cast(pa.date32()),
            "ts": pa.array(MICROS, pa.int64()).cast(pa.timestamp("us")),
            "tz": pa.array(MICROS, pa.int64()).cast(pa.timestamp("us", "UTC")),
        },
        schema=SCHEMA,
    )


def as_ints(table: pa.Table) -> list[tuple[int, int, int, int]]:
    """Rows by their storage integers (Python's datetime cannot hold these values)."""
    t = table.sort_by("id")
    cols = [
        t.column("id").to_pylist(),
        t.column("d").cast(pa.int32()).to_pylist(),
        t.column("ts").cast(pa.int64()).to_pylist(),
        t.column("tz").cast(pa.int64()).to_pylist(),
    ]
    return list(zip(*cols, strict=True))


def duck_ints(con: Any, table: str) -> list[tuple[int, int, int, int]]:
    return [
        tuple(r)
        for r in con.execute(
            f"SELECT id, d - DATE '1970-01-01', epoch_us(ts), epoch_us(tz) FROM {table} ORDER BY id"
        ).fetchall()
    ]


@pytest.mark.parametrize("limit", [0, 10], ids=["parquet", "inlined"])
def test_far_dates_and_timestamps_are_written_exactly_and_flush_works(catalog: Any, limit: int) -> None:
    lake = pdl.connect(catalog.url, catalog.data_path, data_inlining_row_limit=limit)
    lake.create_table("main.far", SCHEMA)
    data = far_rows()
    lake.append("main.far", data)
    assert as_ints(lake.scan("main.far")) == as_ints(data)
    con = open_duckdb(catalog)
    try:
        assert duck_ints(con, "lake.main.far") == as_ints(data)
        texts = [r[0] for r in con.execute("SELECT d::VARCHAR FROM lake.main.far ORDER BY id").fetchall()]
        assert texts == DAY_TEXT
        # DuckDB trusts our statistics: min/max of the column are the exact extremes
        assert con.execute("SELECT min(d)::VARCHAR, max(d)::VARCHAR FROM lake.main.far").fetchone() == (
            "5877642-06-25 (BC)",
            "5881580-07-10",
        )
    finally:
        con.close()
    flushed = lake.flush_inlined_data("main.far")
    assert (flushed is not None) == (limit > 0)
    assert as_ints(lake.scan("main.far")) == as_ints(data)
    con = open_duckdb(catalog)
    try:
        assert duck_ints(con, "lake.main.far") == as_ints(data)
    finally:
        con.close()


@pytest.mark.parametrize("limit", [0, 10], ids=["parquet", "inlined"])
def test_far_dates_duckdb_wrote_read_exactly(catalog: Any, limit: int) -> None:
    lake = pdl.connect(catalog.url, catalog.data_path)
    con = open_duckdb(catalog, inlining_row_limit=limit)
    try:
        con.execute("CREATE TABLE lake.main.far (id BIGINT, d DATE, ts TIMESTAMP, tz TIMESTAMPTZ)")
        con.register("src", far_rows())
        con.execute("INSERT INTO lake.main.far SELECT * FROM src")
        expected = duck_ints(con, "lake.main.far")
    finally:
        con.close()
    assert expected == as_ints(far_rows())
    assert as_ints(lake.scan("main.far")) == expected
    assert lake.scan("main.far", filter=[("id", ">=", 0)]).num_rows == len(DAYS)
    changes = lake.table_changes("main.far", 0)
    assert as_ints(changes.select(["id", "d", "ts", "tz"])) == expected


def test_dates_beyond_duckdb_range_are_refused_with_nothing_written(sqlite_catalog: Any) -> None:
    for limit in (0, 10):
        lake = pdl.connect(sqlite_catalog.url, sqlite_catalog.data_path, data_inlining_row_limit=limit)
        lake.create_table("main.t", SCHEMA, exist_ok=True)
        for column, value in (("d", -(2**31)), ("ts", -(2**63) + 5)):
            arr = pa.array([value], pa.int32() if column == "d" else pa.int64()).cast(SCHEMA.field(column).type)
            with expect_bad_input("date-out-of-range", lake):
                lake.append("main.t", pa.table({"id": [1], column: arr}))
    assert not [f for _, _, fs in os.walk(sqlite_catalog.data_path) for f in fs]
    assert lake.flush_inlined_data("main.t") is None
