"""File pruning in ``lake.scan(filter=...)``: exactly the rows of the unpruned read, whatever the values."""

from __future__ import annotations

import datetime as dt
import tempfile
from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pyspark_ducklake as pdl
from pyspark_ducklake.exceptions import InvalidOptionError
from pyspark_ducklake.table.identifiers import parse_identifier
from pyspark_ducklake.table.pruning import IN_VALUES_COMPARED
from pyspark_ducklake.table.scan import plan_scan
from tests.support.bad_inputs import expect_bad_input
from tests.support.hostile import examples
from tests.support.pruning_data import (
    SCHEMA,
    assert_exact,
    duckdb_where_ids,
    float_filters,
    lake_files,
    outcome,
    scan_filters,
    unpruned,
)

# 6 examples under the ci profile (tests/conftest.py), 300 under make fuzz (each draws 33 filters over a new lake)
PROPERTY = settings(max_examples=examples(0.06))


def pruned_files(lake: pdl.Lake, table: str, filters: Any) -> int:
    snapshot = lake.current_snapshot_id()
    with lake.engine.connect() as conn:
        from pyspark_ducklake.catalog import reader

        entry = reader.table_by_name(conn, *parse_identifier(table), snapshot)
        return plan_scan(conn, entry, snapshot, lake.data_path, fmt=lake.info.format, filters=filters).pruned_files


def _lake(folder: Path) -> pdl.Lake:
    return pdl.connect(f"sqlite:///{folder}/lake.sqlite", data_path=str(folder / "data"), data_inlining_row_limit=0)


@PROPERTY
@given(data=st.data(), files=lake_files(), promote_after=st.integers(0, 5))
def test_pruned_scans_equal_unpruned_scans_over_random_data(
    data: st.DataObject, files: list[pa.Table], promote_after: int
) -> None:
    with tempfile.TemporaryDirectory() as folder:
        lake = _lake(Path(folder))
        try:
            lake.create_table("main.t", SCHEMA)
            for n, f in enumerate(files):
                if n == promote_after:
                    lake.set_column_type("main.t", "g", pa.float64())  # older files keep FLOAT statistics
                lake.append("main.t", f)
            for _ in range(16):
                assert_exact(lake, "main.t", data.draw(scan_filters(files)))
            # on float columns (NaN, ±0.0, ±inf, NULL) the rows are DuckDB's WHERE over the same rows, in scan and
            # delete
            con = duckdb.connect()
            try:
                con.register("arrow_rows", lake.scan("main.t"))
                con.execute("CREATE TABLE every_row AS SELECT * FROM arrow_rows")
                for _ in range(16):
                    filters, where = data.draw(float_filters(files))
                    got = sorted(lake.scan("main.t", filter=filters).column("id").to_pylist())
                    assert got == duckdb_where_ids(con, "every_row", where), (filters, where)
                filters, where = data.draw(float_filters(files))
                deleted = duckdb_where_ids(con, "every_row", where)
                lake.delete("main.t", filters)
                left = sorted(lake.scan("main.t").column("id").to_pylist())
                assert left == sorted(set(duckdb_where_ids(con, "every_row", "true")) - set(deleted)), where
            finally:
                con.close()
        finally:
            lake.close()


NAN = float("nan")


INF = float("inf")


@pytest.mark.parametrize(
    ("filters", "where", "kept_ids"),
    [
        ([("f", ">", 5.0)], "f > 5", [2]),  # NaN is above every number, in DuckDB and Spark
        ([("f", ">=", INF)], "f >= 'inf'::DOUBLE", [2]),
        ([("f", "=", NAN)], "f = 'nan'::DOUBLE", [2]),  # NaN = NaN
        ([("f", "!=", NAN)], "f <> 'nan'::DOUBLE", [0, 1, 3, 4]),
        ([("f", "<", NAN)], "f < 'nan'::DOUBLE", [0, 1, 3, 4]),
        ([("f", "<=", NAN)], "f <= 'nan'::DOUBLE", [0, 1, 2, 3, 4]),
        ([("f", ">", NAN)], "f > 'nan'::DOUBLE", []),
        ([("f", "!=", 5.0)], "f <> 5", [0, 1, 2, 3, 4]),  # NULL <> 5 is NULL
        ([("f", "in", [NAN])], "f IN ('nan'::DOUBLE)", [2]),
        ([("f", "in", [0.0])], "f IN (0.0)", [3, 4]),  # -0.0 = 0.0
        ([("f", "in", [-0.0, None])], "f IN (-0.0, NULL)", [3, 4]),
        ([("f", "not in", [NAN])], "f NOT IN ('nan'::DOUBLE)", [0, 1, 3, 4]),  # NULL NOT IN (...) is NULL
        ([("f", "not in", [1.0, None])], "f NOT IN (1.0, NULL)", []),
        ([("f", "=", 0.0)], "f = 0.0", [3, 4]),
        ([("f", "<", 0.0)], "f < 0.0", []),
        ([("f", ">", -0.0)], "f > -0.0", [0, 1, 2]),
        ([("i", "<", NAN)], "i < 'nan'::DOUBLE", [3, 4]),
        ([("i", ">=", NAN)], "i >= 'nan'::DOUBLE", []),
        ([("d", "=", 0.1)], "d = 0.1", [5]),  # DECIMAL 0.10 equals the double 0.1 once cast
        ([("d", "=", Decimal("0.1"))], "d = 0.1::DECIMAL(10,2)", [5]),
        ([[("f", ">", 100.0)], [("d", ">=", Decimal("0.1"))]], "f > 100 OR d >= 0.1::DECIMAL(10,2)", [2, 5]),
    ],
)
def test_scan_and_delete_filters_select_what_duckdb_where_selects(
    tmp_path: Path, filters: Any, where: str, kept_ids: list[int]
) -> None:
    """NaN, ±0.0, ±inf and NULL in scan and delete filters, with file pruning on: DuckDB's WHERE over the same rows
    selects the same (pyarrow's own semantics, used before, kept NaN out of > and = and NULL in not in)."""
    lake = _lake(tmp_path)
    schema = pa.schema([("id", pa.int64()), ("f", pa.float64()), ("i", pa.int64()), ("d", pa.decimal128(10, 2))])
    lake.create_table("main.t", schema)
    nones = {"i": [None] * 3, "d": [None] * 3}
    lake.append("main.t", pa.table({"id": [0, 1, 2], "f": [1.0, 2.0, NAN], **nones}, schema=schema))
    lake.append("main.t", pa.table({"id": [3, 4], "f": [-0.0, 0.0], "i": [1, 2], "d": [None] * 2}, schema=schema))
    lake.append("main.t", pa.table({"id": [5], "f": [None], "i": [None], "d": [Decimal("0.10")]}, schema=schema))
    con = duckdb.connect()
    con.register("arrow_rows", lake.scan("main.t"))
    con.execute("CREATE TABLE every_row AS SELECT * FROM arrow_rows")
    assert duckdb_where_ids(con, "every_row", where) == kept_ids
    con.close()
    assert sorted(lake.scan("main.t", filter=filters).column("id").to_pylist()) == kept_ids
    assert outcome(lambda: unpruned(lake, "main.t", filters)) == ("rows", kept_ids)
    lake.delete("main.t", filters)
    assert sorted(lake.scan("main.t").column("id").to_pylist()) == sorted(set(range(6)) - set(kept_ids))
    lake.close()


def test_in_and_not_in_match_a_nan_of_any_sign_and_payload(tmp_path: Path) -> None:
    """pyarrow's is_in hashes bit patterns: a NaN with its sign bit set (which hypothesis found) did not match NaN,
    where DuckDB's IN takes every NaN as equal."""
    import struct

    negative = struct.unpack("<d", struct.pack("<Q", 0xFFF8000000000000))[0]
    payload = struct.unpack("<d", struct.pack("<Q", 0x7FF8000000000001))[0]
    lake = _lake(tmp_path)
    lake.create_table("main.t", pa.schema([("id", pa.int64()), ("f", pa.float64())]))
    lake.append("main.t", pa.table({"id": [0, 1, 2, 3], "f": [negative, payload, NAN, 1.0]}))
    assert sorted(lake.scan("main.t", filter=[("f", "in", [NAN])]).column("id").to_pylist()) == [0, 1, 2]
    assert lake.scan("main.t", filter=[("f", "not in", [-NAN, 2.0])]).column("id").to_pylist() == [3]
    assert sorted(lake.scan("main.t", filter=[("f", "=", negative)]).column("id").to_pylist()) == [0, 1, 2]
    lake.close()


def test_files_are_pruned_by_their_statistics(tmp_path: Path) -> None:
    """The exactness above must not come from reading every file."""
    lake = _lake(tmp_path)
    lake.create_table("main.t", pa.schema([("id", pa.int64()), ("s", pa.string())]))
    for i in range(4):
        lake.append("main.t", pa.table({"id": [i], "s": ["z" * 300 + str(i)]}))
    assert pruned_files(lake, "main.t", [("id", ">=", 2)]) == 2
    assert pruned_files(lake, "main.t", [[("id", "=", 0)], [("id", "=", 3)]]) == 2
    assert pruned_files(lake, "main.t", [("id", "in", [0, 3, None, 99])]) == 2  # an "=" per value
    assert pruned_files(lake, "main.t", [("id", "in", [])]) == 4
    assert pruned_files(lake, "main.t", [("id", "in", list(range(2, 2 + 2 * IN_VALUES_COMPARED)))]) == 2  # a range
    assert lake.scan("main.t", filter=[("id", "in", [0, 3])]).column("id").to_pylist() == [0, 3]
    assert pruned_files(lake, "main.t", pc.field("id") == 0) == 0  # an Expression is not pruned on
    assert pruned_files(lake, "main.t", [("s", ">", "z" * 301)]) == 0  # truncated max 'zzz...{' keeps them all
    assert lake.scan("main.t", filter=[("s", ">", "z" * 300 + "2")]).column("id").to_pylist() == [3]
    assert lake.scan("main.t", filter=pc.field("id") == 1).column("id").to_pylist() == [1]
    lake.close()


def test_a_promoted_float_column_prunes_on_its_float32_statistics(tmp_path: Path) -> None:
    lake = _lake(tmp_path)
    lake.create_table("main.t", pa.schema([("g", pa.float32())]))
    lake.append("main.t", pa.table({"g": pa.array([0.1], pa.float32())}))
    lake.set_column_type("main.t", "g", pa.float64())
    stored = float(pa.scalar(0.1, pa.float32()).as_py())  # 0.10000000149011612, above the double 0.1
    assert lake.scan("main.t", filter=[("g", ">=", stored)]).num_rows == 1
    assert lake.scan("main.t", filter=[("g", "=", stored)]).num_rows == 1
    assert lake.scan("main.t", filter=[("g", "<=", 0.1)]).num_rows == 0
    lake.close()


def test_a_filter_pyarrow_cannot_evaluate_is_a_typed_error(tmp_path: Path) -> None:
    lake = _lake(tmp_path)
    lake.create_table("main.t", pa.schema([("d", pa.decimal128(10, 2)), ("ts", pa.timestamp("us", tz="UTC"))]))
    lake.append("main.t", pa.table({"d": [Decimal("1.00")], "ts": [dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc)]}))
    with expect_bad_input("filter-type-mismatch", lake) as err:
        lake.scan("main.t", filter=[("d", ">", 0)])  # pyarrow refuses a decimal(10,2) against an int64
    assert isinstance(err.value, InvalidOptionError) and "Decimal" in str(err.value)
    with expect_bad_input("filter-type-mismatch", lake):
        lake.scan("main.t", filter=[("ts", "=", dt.datetime(2024, 1, 1))])  # naive against UTC
    lake.close()


def test_delete_and_filtered_overwrite_with_a_filter_pyarrow_cannot_evaluate_are_typed_errors(tmp_path: Path) -> None:
    """As for scan: InvalidOptionError with nothing written (was a raw pyarrow error; the overwrite's new file
    stayed behind), on Parquet and inlined rows alike."""
    lake = _lake(tmp_path)
    schema = pa.schema([("d", pa.decimal128(10, 2)), ("ts", pa.timestamp("us", tz="UTC"))])
    lake.create_table("main.t", schema)
    row = {"d": [Decimal("1.00")], "ts": [dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc)]}
    lake.append("main.t", pa.table(row, schema=schema))
    inlined = pdl.connect(lake.location.url)  # the catalog's limit (10): the second row is inlined
    inlined.append("main.t", pa.table(row, schema=schema))
    for filters in ([("d", ">", 0)], [("ts", "=", dt.datetime(2024, 1, 1))], [[("d", "=", 5)], [("ts", "<", 3)]]):
        with expect_bad_input("filter-type-mismatch", lake) as err:
            lake.delete("main.t", filters)
        assert isinstance(err.value, InvalidOptionError), err.value
        with expect_bad_input("filter-type-mismatch", lake):
            lake.overwrite("main.t", pa.table(row, schema=schema), filter=filters)
        with expect_bad_input("filter-type-mismatch", lake):
            inlined.delete("main.t", filters)
    assert lake.scan("main.t").num_rows == 2
    inlined.close()
    lake.close()
