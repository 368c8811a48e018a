"""Maintenance arguments nobody listed: ages that are negative, huge, dates, strings and numbers; versions that are
not lists. Each is an exact result or an InvalidOptionError with nothing changed (real SQLite catalog, real files)."""

from __future__ import annotations

import datetime as dt
import os
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import pyspark_ducklake as pdl
from pyspark_ducklake.exceptions import InvalidOptionError
from tests.support.bad_inputs import expect_bad_input


def small_lake(tmp_path: Path) -> pdl.Lake:
    lake = pdl.connect(f"sqlite:///{tmp_path}/c.sqlite", str(tmp_path / "data"), data_inlining_row_limit=0)
    lake.create_table("main.t", pa.schema([("id", pa.int64())]))
    for i in range(3):
        lake.append("main.t", pa.table({"id": [i]}))
    return lake


def orphan(lake: pdl.Lake, age: dt.timedelta) -> Path:
    """An unreferenced Parquet file under the table's folder, ``age`` old (what a crashed writer leaves)."""
    path = Path(lake.data_path) / "main" / "t" / f"ducklake-orphan-{age.total_seconds():.0f}.parquet"
    path.write_bytes(b"PAR1")
    then = time.time() - age.total_seconds()
    os.utime(path, (then, then))
    return path


@pytest.mark.parametrize(
    "older_than",
    [dt.timedelta(hours=-1), "-1 hour", -5, float("nan"), dt.timedelta.max, 1e300, "soon", None, True, [1]],
    ids=["negative", "negative-text", "negative-number", "nan", "max", "huge", "word", "none", "bool", "list"],
)
def test_orphan_age_that_is_not_a_safe_duration_is_refused(tmp_path: Path, older_than: Any) -> None:
    """A negative age reached into the future and deleted a file a writer had just written; others raised
    TypeError or OverflowError."""
    lake = small_lake(tmp_path)
    young = orphan(lake, dt.timedelta(seconds=0))
    if older_than is dt.timedelta.max:  # the largest age is fine: no file is that old
        assert lake.delete_orphan_files(older_than=older_than).deleted == ()
        assert young.exists()
        return
    with expect_bad_input("maintenance-age", lake):
        lake.delete_orphan_files(older_than=older_than)
    assert young.exists()


def test_orphan_age_as_seconds_or_interval_text(tmp_path: Path) -> None:
    lake = small_lake(tmp_path)
    old = orphan(lake, dt.timedelta(hours=2))
    young = orphan(lake, dt.timedelta(minutes=5))
    assert list(lake.orphan_files(older_than="1 hour")) == [str(old)]
    assert list(lake.orphan_files(older_than=3600)) == [str(old)]
    assert sorted(lake.delete_orphan_files(older_than="0 s")) == sorted([str(old), str(young)])


@pytest.mark.parametrize(
    "older_than",
    [dt.timedelta(days=-1), "-1 day", "0", 3600, "yesterday", object()],
    ids=["negative", "negative-text", "bare-zero", "number", "word", "object"],
)
def test_expire_and_cleanup_age_that_is_not_a_time_or_age_is_refused(tmp_path: Path, older_than: Any) -> None:
    """A negative age expired every snapshot but the newest (a cut-off in the future); "0" and numbers are
    ambiguous (seconds? hours?)."""
    lake = small_lake(tmp_path)
    with expect_bad_input("maintenance-age", lake):
        lake.expire_snapshots(older_than=older_than)
    with expect_bad_input("maintenance-age", lake):
        lake.cleanup_old_files(older_than=older_than)


def test_expire_older_than_dates_intervals_and_extremes(tmp_path: Path) -> None:
    lake = small_lake(tmp_path)
    ids = [s.snapshot_id for s in lake.snapshots()]
    older = ids[:-1]
    assert lake.expire_snapshots(older_than=dt.timedelta.max, dry_run=True).snapshots == ()  # OverflowError before
    assert lake.expire_snapshots(older_than="7 days", dry_run=True).snapshots == ()
    assert lake.expire_snapshots(older_than=dt.date(2000, 1, 1), dry_run=True).snapshots == ()  # AttributeError before
    tomorrow = dt.date.today() + dt.timedelta(days=2)
    assert lake.expire_snapshots(older_than=tomorrow, dry_run=True).snapshots == tuple(older)
    assert lake.expire_snapshots(older_than="0 seconds", dry_run=True).snapshots == tuple(older)
    naive_future = dt.datetime.now() + dt.timedelta(days=2)  # naive: UTC
    assert lake.expire_snapshots(older_than=naive_future, dry_run=True).snapshots == tuple(older)
    assert lake.cleanup_old_files(older_than=dt.date(2000, 1, 1), dry_run=True).files == ()
    assert [s.snapshot_id for s in lake.snapshots()] == ids  # dry runs only


@pytest.mark.parametrize(
    "versions",
    ["3,4", 3, ["x"], [-1], [1.5], ["1"]],
    ids=["text", "int", "word", "negative", "float", "id-as-text"],
)
def test_expire_versions_that_are_not_a_list_of_ids_are_refused(tmp_path: Path, versions: Any) -> None:
    """'3,4' raised a bare ValueError, 3 a TypeError, 1.5 was truncated to snapshot 1."""
    lake = small_lake(tmp_path)
    with pytest.raises(InvalidOptionError, match="versions"):
        lake.expire_snapshots(versions=versions)
    assert len(lake.snapshots()) == 5


def test_expire_versions_empty_and_missing(tmp_path: Path) -> None:
    lake = small_lake(tmp_path)
    assert lake.expire_snapshots(versions=[]).snapshots == ()  # DuckDB fails with a SQL syntax error here
    report = lake.expire_snapshots(versions=[1, 99])
    assert report.snapshots == (1,) and report.not_found == (99,)
    assert "no snapshot 99 (never existed or already expired)" in report.summary()
    assert [s.snapshot_id for s in lake.snapshots()] == [0, 2, 3, 4]


@pytest.mark.parametrize("value", ["x", 1.5, 0, "-2"], ids=["word", "float", "zero", "negative"])
def test_merge_max_compacted_files_that_is_not_a_count_is_refused(tmp_path: Path, value: Any) -> None:
    """'x' raised a bare TypeError ('<=' not supported between str and int)."""
    lake = small_lake(tmp_path)
    with pytest.raises(InvalidOptionError, match="max_compacted_files"):
        lake.merge_adjacent_files("main.t", max_compacted_files=value)
    assert len(lake.snapshots()) == 5


def test_merge_of_an_empty_or_inlined_only_table_does_nothing(tmp_path: Path) -> None:
    lake = pdl.connect(f"sqlite:///{tmp_path}/c.sqlite", str(tmp_path / "data"))
    lake.create_table("main.e", pa.schema([("id", pa.int64())]))
    assert lake.merge_adjacent_files("main.e").snapshot_id is None
    lake.append("main.e", pa.table({"id": [1, 2]}))  # inlined
    head = lake.current_snapshot_id()
    assert lake.merge_adjacent_files("main.e", max_compacted_files="3").snapshot_id is None
    assert lake.current_snapshot_id() == head and lake.scan("main.e").num_rows == 2
