"""The commit protocol under concurrent writers, on SQLite and PostgreSQL catalogs, checked by DuckDB."""

from __future__ import annotations

import os
import threading
from typing import Any

import pyarrow as pa
import pytest

import pyspark_ducklake as pdl
from pyspark_ducklake.exceptions import CommitConflictError
from tests.support.duck import open_duckdb

WRITERS = 4
COMMITS_PER_WRITER = 8


def parquet_files(root: str) -> set[str]:
    return {os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs if f.endswith(".parquet")}


def test_concurrent_appends_lose_nothing(catalog: Any) -> None:
    setup = pdl.connect(catalog.url, catalog.data_path)
    setup.create_table("main.c", pa.schema([("writer", pa.int32()), ("seq", pa.int32()), ("n", pa.int32())]))
    errors: list[BaseException] = []

    def writer(w: int) -> None:
        lake = pdl.connect(catalog.url, max_retry_count=100, retry_wait_ms=5)
        try:
            for seq in range(COMMITS_PER_WRITER):
                rows = 3 if seq % 2 == 0 else 40  # alternate inlined and Parquet appends
                lake.append(
                    "main.c",
                    pa.table(
                        {
                            "writer": pa.array([w] * rows, pa.int32()),
                            "seq": pa.array([seq] * rows, pa.int32()),
                            "n": pa.array(range(rows), pa.int32()),
                        }
                    ),
                )
        except BaseException as e:
            errors.append(e)
        finally:
            lake.close()

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(WRITERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not errors, errors
    result = setup.scan("main.c", columns=["writer", "seq", "n", "rowid"])
    expected = {
        (w, s, n) for w in range(WRITERS) for s in range(COMMITS_PER_WRITER) for n in range(3 if s % 2 == 0 else 40)
    }
    got = list(zip(*(result.column(i).to_pylist() for i in range(3)), strict=False))
    assert len(got) == len(expected) and set(got) == expected
    rowids = result.column("rowid").to_pylist()
    assert len(set(rowids)) == len(rowids) == len(expected)
    assert setup.current_snapshot_id() == 1 + WRITERS * COMMITS_PER_WRITER
    con = open_duckdb(catalog)
    try:
        assert con.execute("SELECT count(*), count(DISTINCT rowid) FROM lake.main.c").fetchone() == (len(expected),) * 2
        con.execute("INSERT INTO lake.main.c VALUES (99, 0, 0)")
        assert con.execute("SELECT count(DISTINCT rowid) FROM lake.main.c").fetchone()[0] == len(expected) + 1
    finally:
        con.close()


def test_logical_conflict_fails_cleanly_and_removes_its_files(catalog: Any) -> None:
    lake = pdl.connect(catalog.url, catalog.data_path)
    lake.create_table("main.k", pa.schema([("id", pa.int64())]))
    lake.append("main.k", pa.table({"id": list(range(100))}))
    stale = lake.table("main.k")  # a writer that planned against this snapshot
    lake.delete("main.k", [("id", "=", 50)])  # someone else deletes from the same data file first
    files_before = parquet_files(catalog.data_path)
    snap_before = lake.current_snapshot_id()
    # A delete file planned at the stale snapshot, staged without a way to plan again, must not commit: it would
    # leave the data file with two live delete files.
    from pyspark_ducklake.catalog import commit_rows as W
    from pyspark_ducklake.table.commit import commit, table_folder
    from pyspark_ducklake.table.data_files import write_delete_file

    (file_entry,) = [t.file for t in _plan(lake, stale).files]
    name, written = write_delete_file(file_entry.path, [0, 1], table_folder(stale, lake.data_path))
    assert written.path in parquet_files(catalog.data_path)
    with pytest.raises(CommitConflictError, match="another writer deleted rows of data file"):
        commit(
            lake,
            lambda ctx: W.add_delete_file(
                ctx, stale.entry, file_entry.data_file_id, written, relative_path=name, previous_delete_file_id=None
            ),
            base=stale.snapshot_id,
            files=[written.path],
        )
    assert lake.current_snapshot_id() == snap_before
    assert parquet_files(catalog.data_path) == files_before  # the conflicting commit's file was removed
    assert lake.scan("main.k").num_rows == 99


def _plan(lake: pdl.Lake, table: Any) -> Any:
    from pyspark_ducklake.table.scan import plan_scan

    with lake.engine.connect() as conn:
        return plan_scan(conn, table.entry, table.snapshot_id, lake.data_path, fmt=lake.info.format)


@pytest.mark.parametrize("limit", [0, 10])
def test_overwrite_is_one_snapshot(catalog: Any, limit: int) -> None:
    lake = pdl.connect(catalog.url, catalog.data_path, data_inlining_row_limit=limit)
    lake.create_table("main.o", pa.schema([("id", pa.int64())]))
    lake.append("main.o", pa.table({"id": [1, 2, 3]}))
    lake.append("main.o", pa.table({"id": list(range(10, 60))}))
    before = lake.current_snapshot_id()
    snap = lake.overwrite("main.o", pa.table({"id": [7, 8]}))
    assert snap == before + 1
    assert sorted(lake.scan("main.o").column(0).to_pylist()) == [7, 8]
    assert lake.scan("main.o", snapshot=before).num_rows == 53
    con = open_duckdb(catalog)
    try:
        assert sorted(r[0] for r in con.execute("SELECT id FROM lake.main.o").fetchall()) == [7, 8]
        assert con.execute(f"SELECT count(*) FROM lake.main.o AT (VERSION => {before})").fetchone()[0] == 53
    finally:
        con.close()


def test_concurrent_committers_queue_instead_of_colliding(catalog: Any) -> None:
    # With no retries at all, every commit of four writers still lands: they wait for the commit lock (SQLite's
    # BEGIN IMMEDIATE, a PostgreSQL advisory lock) instead of losing the snapshot id to each other.
    setup = pdl.connect(catalog.url, catalog.data_path)
    setup.create_table("main.q", pa.schema([("w", pa.int32()), ("i", pa.int32())]))
    errors: list[BaseException] = []

    def writer(w: int) -> None:
        lake = pdl.connect(catalog.url, max_retry_count=0)
        try:
            for i in range(COMMITS_PER_WRITER):
                lake.append("main.q", pa.table({"w": pa.array([w], pa.int32()), "i": pa.array([i], pa.int32())}))
        except BaseException as e:
            errors.append(e)
        finally:
            lake.close()

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(WRITERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not errors, errors
    assert setup.scan("main.q").num_rows == WRITERS * COMMITS_PER_WRITER
    setup.close()
