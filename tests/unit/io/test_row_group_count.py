"""DuckLake 1.1's ``row_group_count`` checked against the footer whenever a data or Parquet delete file is read:
a catalog row that disagrees (the file was replaced) is a ``RowGroupCountError`` naming the file, both numbers and
the catalog table, on every read path, and nothing is written; NULL, and a 1.0 catalog (no such column), are not
checked."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from sqlalchemy import create_engine, text

import pyspark_ducklake as pdl
from pyspark_ducklake.table.change_feed_initial import plan_initial, with_row_groups
from pyspark_ducklake.table.file_stream import stream_file_task
from pyspark_ducklake.table.scan import plan_scan
from tests.support.bad_inputs import expect_bad_input


def _sql(url: str, sql: str) -> list[Any]:
    engine = create_engine(url)
    try:
        with engine.begin() as conn:
            result = conn.execute(text(sql))
            return list(result.all()) if result.returns_rows else []
    finally:
        engine.dispose()


def _rows(first: int, n: int) -> pa.Table:
    return pa.table({"id": list(range(first, first + n)), "s": [f"s{i}" for i in range(first, first + n)]})


def _lake(url: str, data_path: str, fmt: str) -> pdl.Lake:
    """Table ``t`` of three Parquet files (one row group each), the first with a Parquet delete file."""
    lake = pdl.connect(url, data_path, data_inlining_row_limit=0, format_version=fmt)
    lake.create_table("main.t", pa.schema([("id", pa.int64()), ("s", pa.string())]))
    lake.append("main.t", _rows(0, 20))
    lake.delete("main.t", [("id", "<", 3)])
    lake.append("main.t", _rows(20, 10))
    lake.append("main.t", _rows(30, 10))
    return lake


LIVE = [*range(3, 40)]  # the ids _lake leaves


def _every_read(lake: pdl.Lake, live: list[int] = LIVE) -> None:
    """Each path that reads the files: scan, the data source's row-group stream, the feed, a stream's initial load
    (its footers), and maintenance that rewrites them."""
    lake.scan("main.t")
    with lake.engine.connect() as conn:
        t = lake.table("main.t")
        plan = plan_scan(conn, t.entry, t.snapshot_id, lake.data_path, fmt=lake.info.format)
        for task in plan.files:
            list(stream_file_task(task, plan.schema))
        with_row_groups(plan_initial(conn, t.entry, t.snapshot_id, lake.data_path, fmt=lake.info.format))
    lake.table_changes("main.t", 1, lake.current_snapshot_id())
    lake.rewrite_data_files("main.t", delete_threshold=0)
    lake.merge_adjacent_files("main.t")
    assert sorted(lake.scan("main.t").column("id").to_pylist()) == live


def test_a_data_file_whose_row_group_count_disagrees_with_its_footer_is_refused_on_every_read(
    sqlite_catalog: Any,
) -> None:
    lake = _lake(sqlite_catalog.url, sqlite_catalog.data_path, "1.1")
    files = _sql(sqlite_catalog.url, "SELECT data_file_id, path, row_group_count FROM ducklake_data_file")
    assert [r[2] for r in files] == [1, 1, 1]  # what we wrote: the footers'
    _sql(sqlite_catalog.url, "UPDATE ducklake_data_file SET row_group_count = 3")
    reads = [
        lambda: lake.scan("main.t"),
        lambda: lake.table_changes("main.t", 1, lake.current_snapshot_id()),
        lambda: lake.rewrite_data_files("main.t", delete_threshold=0),
        lambda: lake.merge_adjacent_files("main.t"),
    ]
    for read in reads:
        with expect_bad_input("row-group-count-lies", lake) as info:
            read()
    message = str(info.value)  # the merge's: the second or third file
    assert any(path in message and f"(data_file_id {i})" in message for i, path, _ in files), message
    assert "ducklake_data_file" in message
    assert "1 row group(s) in its footer" in message and "row_group_count 3" in message
    with lake.engine.connect() as conn:
        t = lake.table("main.t")
        plan = plan_scan(conn, t.entry, t.snapshot_id, lake.data_path, fmt=lake.info.format)
        with expect_bad_input("row-group-count-lies", lake):
            list(stream_file_task(plan.files[0], plan.schema))
        load = plan_initial(conn, t.entry, t.snapshot_id, lake.data_path, fmt=lake.info.format)
        with expect_bad_input("row-group-count-lies", lake):
            with_row_groups(load)
    _sql(sqlite_catalog.url, "UPDATE ducklake_data_file SET row_group_count = NULL")  # unknown: not checked
    _every_read(lake)


def test_a_parquet_delete_file_whose_row_group_count_disagrees_is_refused(sqlite_catalog: Any) -> None:
    lake = _lake(sqlite_catalog.url, sqlite_catalog.data_path, "1.1")
    (delete_file_id, path, fmt, count) = _sql(
        sqlite_catalog.url, "SELECT delete_file_id, path, format, row_group_count FROM ducklake_delete_file"
    )[0]
    assert (fmt, count) == ("parquet", 1)
    _sql(sqlite_catalog.url, "UPDATE ducklake_delete_file SET row_group_count = 0")
    for read in (lambda: lake.scan("main.t"), lambda: lake.table_changes("main.t", 1, lake.current_snapshot_id())):
        with expect_bad_input("row-group-count-lies", lake) as info:
            read()
    message = str(info.value)
    assert f"delete file {Path(lake.data_path) / 'main' / 't' / path}" in message
    assert f"ducklake_delete_file (delete_file_id {delete_file_id})" in message and "row_group_count 0" in message


def test_files_of_several_row_groups_read_and_a_1_0_catalog_has_nothing_to_check(
    sqlite_catalog: Any, tmp_path: Path
) -> None:
    lake = _lake(sqlite_catalog.url, sqlite_catalog.data_path, "1.1")
    added = tmp_path / "added.parquet"
    pq.write_table(_rows(40, 10), added, row_group_size=3)
    lake.add_files("main.t", str(added))
    rows = _sql(sqlite_catalog.url, "SELECT row_group_count FROM ducklake_data_file ORDER BY data_file_id")
    assert [r[0] for r in rows] == [1, 1, 1, 4]
    _every_read(lake, [*LIVE, *range(40, 50)])
    lake.close()

    (tmp_path / "old").mkdir()
    old = _lake(f"sqlite:///{tmp_path}/old.sqlite", f"{tmp_path}/old/", "1.0")
    assert old.format_version == "1.0"
    _every_read(old)


@pytest.mark.parametrize("fmt", ["1.0", "1.1"])
def test_the_reader_selects_row_group_count_only_where_the_format_has_it(sqlite_catalog: Any, fmt: str) -> None:
    lake = _lake(sqlite_catalog.url, sqlite_catalog.data_path, fmt)
    with lake.engine.connect() as conn:
        t = lake.table("main.t")
        task, *_ = plan_scan(conn, t.entry, t.snapshot_id, lake.data_path, fmt=lake.info.format).files
    expected = 1 if fmt == "1.1" else None
    assert task.file.row_group_count == expected
    assert task.file.delete_file is not None and task.file.delete_file.row_group_count == expected
