"""File pruning in ``lake.scan(filter=...)``: exactly the rows of the unpruned read, whatever the values."""

from __future__ import annotations

import datetime as dt
import tempfile
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pyspark_ducklake as pdl
from pyspark_ducklake.exceptions import InvalidOptionError
from pyspark_ducklake.lake import parse_identifier
from pyspark_ducklake.table.scan import plan_scan
from tests.support.bad_inputs import expect_bad_input
from tests.support.pruning_data import SCHEMA, assert_exact, lake_files, outcome, scan_filters, unpruned

PROPERTY = settings(
    derandomize=True,
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def pruned_files(lake: pdl.Lake, table: str, filters: Any) -> int:
    snapshot = lake.current_snapshot_id()
    with lake.engine.connect() as conn:
        from pyspark_ducklake.catalog import reader

        entry = reader.table_by_name(conn, *parse_identifier(table), snapshot)
        return plan_scan(conn, entry, snapshot, lake.data_path, filters=filters).pruned_files


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
        finally:
            lake.close()


NAN = float("nan")


@pytest.mark.parametrize(
    ("filters", "kept_ids"),
    [
        ([("f", ">", 5.0)], []),  # pyarrow: NaN > 5 is false; the NaN file's max (2.0) prunes it with no loss
        ([("f", "!=", 5.0)], [0, 1, 2, 3, 4]),  # NaN != 5; NULL != 5 is NULL
        ([("f", "in", [NAN])], [2]),  # is_in matches NaN: not pruned
        ([("f", "=", 0.0)], [3, 4]),  # -0.0 == 0.0
        ([("f", "<", 0.0)], []),
        ([("d", "=", 0.1)], [5]),  # DECIMAL 0.10 equals the double 0.1 once pyarrow casts it
        ([("d", "=", Decimal("0.1"))], [5]),
        ([[("f", ">", 100.0)], [("d", ">=", Decimal("0.1"))]], [5]),
    ],
)
def test_pruning_follows_pyarrow_comparisons(tmp_path: Path, filters: Any, kept_ids: list[int]) -> None:
    lake = _lake(tmp_path)
    schema = pa.schema([("id", pa.int64()), ("f", pa.float64()), ("d", pa.decimal128(10, 2))])
    lake.create_table("main.t", schema)
    lake.append("main.t", pa.table({"id": [0, 1, 2], "f": [1.0, 2.0, NAN], "d": [None] * 3}, schema=schema))
    lake.append("main.t", pa.table({"id": [3, 4], "f": [-0.0, 0.0], "d": [None] * 2}, schema=schema))
    lake.append("main.t", pa.table({"id": [5], "f": [None], "d": [Decimal("0.10")]}, schema=schema))
    assert sorted(lake.scan("main.t", filter=filters).column("id").to_pylist()) == kept_ids
    assert outcome(lambda: unpruned(lake, "main.t", filters)) == ("rows", kept_ids)
    lake.close()


def test_files_are_pruned_by_their_statistics(tmp_path: Path) -> None:
    """The exactness above must not come from reading every file."""
    lake = _lake(tmp_path)
    lake.create_table("main.t", pa.schema([("id", pa.int64()), ("s", pa.string())]))
    for i in range(4):
        lake.append("main.t", pa.table({"id": [i], "s": ["z" * 300 + str(i)]}))
    assert pruned_files(lake, "main.t", [("id", ">=", 2)]) == 2
    assert pruned_files(lake, "main.t", [[("id", "=", 0)], [("id", "=", 3)]]) == 2
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
