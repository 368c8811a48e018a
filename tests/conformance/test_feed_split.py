"""A change-feed range cut into parts (``split_plan``, one Spark task each) gives the same rows as the whole.

The history is written by DuckDB, so UPDATEs are delete/insert pairs of one rowid in one snapshot, with inlined
inserts, a flush and deletes that hit every earlier file; ``ordered=False`` (what the Spark source asks for) only
changes the order of the rows.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pyarrow.parquet as pq
import pytest

import pyspark_ducklake as pdl
from pyspark_ducklake.catalog import reader
from pyspark_ducklake.exceptions import DataFileError
from pyspark_ducklake.table import change_feed as changes
from pyspark_ducklake.table.change_feed import plan_changes, table_changes
from pyspark_ducklake.table.change_feed_split import ChangePart, _cost, execute_part, split_plan
from tests.support.catalogs import sqlite_location
from tests.support.compare import canonical
from tests.support.duck import open_duckdb


def _rows(t: Any) -> Counter[tuple[Any, ...]]:
    return Counter(tuple(canonical(v) for v in r.values()) for r in t.to_pylist())


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[pdl.Lake, int, int]]:
    location = sqlite_location(tmp_path_factory.mktemp("lake"))
    con = open_duckdb(location, inlining_row_limit=5)
    con.execute("CREATE TABLE lake.main.t (id BIGINT, v VARCHAR, n INTEGER)")
    first = con.execute("SELECT max(snapshot_id) FROM lake.snapshots()").fetchone()[0]
    lo = 0
    for i in range(8):
        size = 3 if i % 3 == 2 else 200  # every third insert is inlined
        con.execute(f"INSERT INTO lake.main.t SELECT r, 'v' || r, r % 7 FROM range({lo}, {lo + size}) x(r)")
        lo += size
        if i % 2 == 1:
            con.execute(f"UPDATE lake.main.t SET n = n + 100, v = 'u{i}' WHERE id % 11 = {i}")
            con.execute(f"DELETE FROM lake.main.t WHERE id % 13 = {i}")
    con.execute("CALL ducklake_flush_inlined_data('lake')")
    con.execute("UPDATE lake.main.t SET n = -1 WHERE id % 17 = 0")
    last = con.execute("SELECT max(snapshot_id) FROM lake.snapshots()").fetchone()[0]
    con.close()
    lake = pdl.connect(location.url)
    yield lake, first, last
    lake.close()


def _parts(lake: pdl.Lake, first: int, last: int, target_rows: int) -> list[ChangePart]:
    with lake.engine.connect() as conn:
        table = reader.table_by_name(conn, "main", "t", last)
        plan = plan_changes(conn, table, first, last, lake.data_path, fmt=lake.info.format)
    return split_plan(plan, target_rows=target_rows)


@pytest.mark.parametrize("target_rows", [1, 50, 150, 400, 10**6])
def test_parts_add_up_to_the_whole(history: tuple[pdl.Lake, int, int], target_rows: int) -> None:
    lake, first, last = history
    whole = table_changes(lake.engine, lake.data_path, "main", "t", first, last, fmt=lake.info.format)
    assert {"update_preimage", "update_postimage", "delete", "insert"} <= set(whole.column("_change_type").to_pylist())
    parts = _parts(lake, first, last, target_rows)
    pieces = [p for part in parts for p in part.pieces]
    if target_rows >= whole.num_rows:
        assert len(parts) == 1
    elif target_rows == 1:
        assert all(len(part.pieces) == 1 for part in parts)  # one file (or the inlined rows) each
    # Every data file is read by one part at most.
    files = [p.task.file.data_file_id for p in pieces if p.task is not None]
    assert len(files) == len(set(files))
    got: Counter[tuple[Any, ...]] = Counter()
    for part in parts:
        tables = list(execute_part(part))
        assert sum(t.num_rows for t in tables) == part.rows
        for t in tables:
            assert t.schema == whole.schema
            got += _rows(t)
    assert got == _rows(whole)


def test_parts_are_balanced_by_their_work(history: tuple[pdl.Lake, int, int]) -> None:
    lake, first, last = history
    whole = table_changes(lake.engine, lake.data_path, "main", "t", first, last, fmt=lake.info.format)
    parts = _parts(lake, first, last, whole.num_rows // 3)
    assert len(parts) == 3
    loads = sorted(sum(_cost(p) for p in part.pieces) for part in parts)
    biggest = max(_cost(p) for part in parts for p in part.pieces)
    assert loads[-1] - loads[0] <= biggest  # greedy by size: no part exceeds another by more than one piece


def test_a_file_changed_after_planning_is_an_error(history: tuple[pdl.Lake, int, int], tmp_path: Any) -> None:
    lake, first, last = history
    (part,) = _parts(lake, first, last, 10**6)
    piece = next(p for p in part.pieces if p.task is not None and p.inserts)
    shorter = pq.read_table(piece.task.file.path).slice(1)
    copy = tmp_path / "shorter.parquet"
    pq.write_table(shorter, copy)
    moved = replace(piece, task=replace(piece.task, file=replace(piece.task.file, path=str(copy))))
    with pytest.raises(DataFileError, match=r"planned \d+: the file or catalog changed"):
        list(execute_part(ChangePart(part.plan, (moved,))))


def test_unordered_feed_is_the_same_rows(history: tuple[pdl.Lake, int, int]) -> None:
    lake, first, last = history
    ordered = table_changes(lake.engine, lake.data_path, "main", "t", first, last, fmt=lake.info.format)
    unordered = table_changes(
        lake.engine, lake.data_path, "main", "t", first, last, fmt=lake.info.format, ordered=False
    )
    assert unordered.schema == ordered.schema
    assert _rows(unordered) == _rows(ordered)
    keys = list(zip(ordered.column("_snapshot_id").to_pylist(), ordered.column("_rowid").to_pylist(), strict=True))
    assert keys == sorted(keys)


@pytest.mark.parametrize("min_run", [1, 8, 150])
def test_ordering_slices_runs_already_in_order(
    history: tuple[pdl.Lake, int, int], monkeypatch: pytest.MonkeyPatch, min_run: int
) -> None:
    lake, first, last = history
    gathered = table_changes(
        lake.engine, lake.data_path, "main", "t", first, last, fmt=lake.info.format
    )  # runs too short to slice
    monkeypatch.setattr(changes, "_MIN_RUN", min_run)
    sliced = table_changes(lake.engine, lake.data_path, "main", "t", first, last, fmt=lake.info.format)
    assert sliced.equals(gathered)
    assert sliced.column(0).num_chunks > 1  # pieces of the files' tables, not one gathered copy
