"""``rewrite_data_files`` against DuckDB 1.5.5's ``ducklake_rewrite_data_files``.

* The same rewrite of one history (files deleted from by delete files, by inlined deletes, wholly; partitions; a
  sorted table; inlined rows; a threshold that leaves some deletes) by DuckDB and by us, on two copies of one SQLite
  catalog, leaves the same catalog rows: which files end, the new files' rows and statistics, the recomputed table
  statistics, ``rewrite_delete:<id>``.
* After our rewrite DuckDB reads every snapshot exactly as before (``rowid`` included) and the change feed over every
  range as after its own rewrite (its own feed shows a rewrite as an update of every row it moved; ours shows none);
  we read DuckDB's rewrite the same way; the new files hold the live rows in the order DuckDB's do (a sorted
  table's in its sort order).
* A delete landing between planning and commit leaves that group out (nothing lost, its new file removed).
"""

from __future__ import annotations

import dataclasses
import shutil
from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from sqlalchemy import text

import pyspark_ducklake as pdl
from pyspark_ducklake.exceptions import StalePlanError
from pyspark_ducklake.table.change_feed import CHANGE_COLUMNS
from pyspark_ducklake.table.maintenance.rewrite import rewrite_deletes
from tests.support.bad_inputs import expect_bad_input
from tests.support.catalogs import compaction_catalog_rows
from tests.support.compare import canonical, canonical_rows
from tests.support.duck import attached, connect_duckdb

TABLES = ("r", "p", "s", "q")


@pytest.fixture(scope="module")
def duck() -> Iterator[Any]:
    con = connect_duckdb()
    yield con
    con.close()


def rows(start: int, n: int) -> pa.Table:
    ids = list(range(start, start + n))
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "k": pa.array([i % 3 for i in ids], pa.int32()),
            "v": pa.array([f"v{i % 11}" if i % 5 else None for i in ids], pa.string()),
            "f": pa.array([float(i % 7) / 2 if i % 9 else float("nan") for i in ids], pa.float64()),
        }
    )


def build(lake: pdl.Lake, duck: Any, catalog: Any) -> None:
    """r: ours and DuckDB's files with delete files, inlined deletes and a file wholly deleted, plus inlined rows;
    p: partitioned by k; s: sorted by (v DESC, id)."""
    schema = rows(0, 0).schema
    lake.create_table("r", schema)
    lake.create_table("p", schema, partition_by=["k"])
    lake.create_table("s", schema)
    lake.set_sort_order("s", ["v DESC NULLS FIRST", "id"])
    for t in ("r", "p", "s"):
        lake.append(t, rows(0, 40))
        lake.append(t, rows(100, 40))
    lake.delete("r", [("id", "<", 30)])  # a delete file: 30 of 40
    lake.delete("p", [("id", "in", [1, 2, 4, 5, 7, 100])])
    lake.delete("s", [("id", ">=", 110)])
    with attached(duck, catalog, inlining_row_limit=5) as con:
        for t in ("r", "p", "s"):
            con.execute(f"INSERT INTO lake.{t} SELECT 200 + i, i % 3, 'd' || i, i / 4 FROM range(30) t(i)")
        con.execute("DELETE FROM lake.r WHERE id IN (201, 202, 203)")  # DuckDB's small deletes: inlined
        con.execute("DELETE FROM lake.r WHERE id = 105")
        con.execute("DELETE FROM lake.s WHERE id < 215")
        con.execute("DELETE FROM lake.p WHERE id > 220")
        # q: inlined rows beside its files (no float column: DuckDB's own recompute fails on SQLite on one)
        con.execute("CREATE TABLE lake.q (id BIGINT, v VARCHAR, ts TIMESTAMP, d DECIMAL(9, 2), b BOOLEAN)")
        con.execute(
            "INSERT INTO lake.q SELECT i, 'q' || i, TIMESTAMP '2024-01-01' + INTERVAL (i) HOUR, i / 8, i % 2 = 0 "
            "FROM range(20) t(i)"
        )
        con.execute("DELETE FROM lake.q WHERE id < 8")
        con.execute(
            "INSERT INTO lake.q VALUES (50, 'zz', TIMESTAMP '2023-06-01 12:00:00', -1.25, NULL), (51, NULL, NULL, 99, true)"
        )
    lake.append("r", rows(400, 20))
    lake.delete("r", [("id", ">=", 400)])  # a whole file: ended, not deleted from


def history(con: Any, table: str, snapshots: list[int]) -> dict[int, list[tuple[Any, ...]]]:
    """DuckDB's rows (with rowid) at each snapshot since the table was created."""
    created = con.execute(
        "SELECT min(snapshot_id) FROM __ducklake_metadata_lake.ducklake_snapshot_changes "
        f"WHERE changes_made LIKE '%\"{table}\"%'"
    ).fetchone()[0]
    sql = " UNION ALL BY NAME ".join(
        f"SELECT {s} AS at_snapshot, rowid, * FROM lake.{table} AT (VERSION => {s})" for s in snapshots if s >= created
    )
    rows = con.execute(sql).to_arrow_table()
    return {
        s: sorted(canonical_rows(rows.filter(pc.field("at_snapshot") == s).drop_columns(["at_snapshot"])), key=repr)
        for s in snapshots
        if s >= created
    }


def our_history(lake: pdl.Lake, table: str, snapshots: Iterable[int]) -> dict[int, list[tuple[Any, ...]]]:
    return {
        s: sorted(
            canonical_rows(
                lake.scan(table, snapshot=s, columns=["rowid", *lake.table(table, snapshot=s).schema.names])
            ),
            key=repr,
        )
        for s in snapshots
    }


def duck_feed(con: Any, table: str, start: int, end: int) -> Counter[tuple[Any, ...]]:
    t = con.execute(f"SELECT * FROM ducklake_table_changes('lake', 'main', '{table}', {start}, {end})").to_arrow_table()
    return Counter(tuple(canonical(v) for v in r.values()) for r in t.to_pylist())


def our_feed(lake: pdl.Lake, table: str, start: int, end: int) -> Counter[tuple[Any, ...]]:
    start = max(start, lake.table(table).entry.begin_snapshot)
    t = lake.table_changes(f"main.{table}", start, end)
    cols = [c for c in t.column_names if c not in CHANGE_COLUMNS]
    t = t.select(["_snapshot_id", "_rowid", "_change_type", *cols])
    return Counter(tuple(canonical(v) for v in r.values()) for r in t.to_pylist())


def twin(catalog: Any, tmp_path: Path, name: str) -> Any:
    copy = tmp_path / name
    shutil.copy(catalog.url.removeprefix("sqlite:///"), copy)
    return dataclasses.replace(catalog, url=f"sqlite:///{copy}", duckdb=f"ducklake:sqlite:{copy}")


def new_files(con: Any, table: str, snapshot: int) -> list[list[tuple[Any, ...]]]:
    """The rows of the table's files that began at ``snapshot``, in file order (user columns and row ids)."""
    out = []
    for (path,) in con.execute(
        f"SELECT data_file FROM ducklake_list_files('lake', '{table}') f "
        f"JOIN lake.snapshots() s ON s.snapshot_id = {snapshot}"
    ).fetchall():
        t = pq.read_table(path)
        if "_ducklake_internal_row_id" in t.column_names:
            out.append(canonical_rows(t))
    return sorted(out, key=repr)


@pytest.mark.parametrize("threshold", [0.1, 0.0])
def test_same_catalog_rows_as_duckdb(duck: Any, sqlite_catalog: Any, tmp_path: Path, threshold: float) -> None:
    """0.1 leaves deletes in r and p (their statistics stay); 0.0 rewrites every file with deletes, so the
    statistics of every table are recomputed, r's with its inlined rows folded in."""
    lake = pdl.connect(sqlite_catalog.url, sqlite_catalog.data_path, data_inlining_row_limit=5)
    build(lake, duck, sqlite_catalog)
    lake.close()
    ours, theirs = twin(sqlite_catalog, tmp_path, "ours.sqlite"), twin(sqlite_catalog, tmp_path, "theirs.sqlite")
    with attached(duck, theirs) as con:
        done = con.execute(
            f"SELECT * FROM ducklake_rewrite_data_files('lake', delete_threshold => {threshold})"
        ).fetchall()
        want_files = {t: new_files(con, t, duck_last(con)) for t in TABLES}
    lake = pdl.connect(ours.url)
    dry = lake.rewrite_data_files(delete_threshold=threshold, dry_run=True)
    report = lake.rewrite_data_files(delete_threshold=str(threshold))
    assert [g.sources for g in dry.groups] == [g.sources for g in report.groups]
    assert sorted((g.table, len(g.sources)) for g in report.groups) == sorted((f"main.{t}", n) for _, t, n, _ in done)
    assert report.files_created == sum(c for *_, c in done)
    ids = sorted(lake.table(t).table_id for t in TABLES)
    assert lake.snapshots()[-1].changes_made == ",".join(f"rewrite_delete:{i}" for i in ids)
    lake.close()
    with attached(duck, ours) as con:
        assert {t: new_files(con, t, duck_last(con)) for t in TABLES} == want_files
    # The change feed over every range, DuckDB's and ours, is the same after our rewrite as after DuckDB's.
    feeds = {}
    for name, where in (("ours", ours), ("theirs", theirs)):
        lake = pdl.connect(where.url)
        with attached(duck, where) as con:
            last = duck_last(con)
            ranges = [(lake.table(t).entry.begin_snapshot, end, t) for t in TABLES for end in (last - 1, last)]
            feeds[name] = [(duck_feed(con, t, a, b), our_feed(lake, t, a, b)) for a, b, t in ranges]
        lake.close()
    assert feeds["ours"] == feeds["theirs"]
    if threshold:  # we read DuckDB's rewrite as DuckDB does (rowid included), before and after it
        lake = pdl.connect(theirs.url)
        with attached(duck, theirs) as con:
            for t in TABLES:
                want = history(con, t, snapshots(con)[-3:])
                assert our_history(lake, t, want) == want
        assert lake.rewrite_data_files(delete_threshold=threshold).groups == ()  # DuckDB rewrote what we would
        lake.close()
    mine, theirs_rows = (
        compaction_catalog_rows(tmp_path / "ours.sqlite"),
        compaction_catalog_rows(tmp_path / "theirs.sqlite"),
    )
    recomputed = [r for r in mine["ducklake_table_stats"] if r[1] < r[2]]  # record_count below next_row_id
    assert len(recomputed) == (2 if threshold else 4)
    assert mine.keys() == theirs_rows.keys()
    for name in mine:
        assert mine[name] == theirs_rows[name], f"{name} differs from DuckDB's"


def duck_last(con: Any) -> int:
    return int(con.execute("SELECT max(snapshot_id) FROM lake.snapshots()").fetchone()[0])


def changed(lake: pdl.Lake, table: str) -> list[int]:
    """The snapshots that changed the table (each snapshot in between reads as the one before it)."""
    t = lake.table(table)
    return [
        s.snapshot_id
        for s in lake.snapshots()
        if s.snapshot_id == t.entry.begin_snapshot or t.table_id in s.changes.tables_touched()
    ]


def snapshots(con: Any) -> list[int]:
    return [r[0] for r in con.execute("SELECT snapshot_id FROM lake.snapshots() ORDER BY 1").fetchall()]


def test_duckdb_reads_our_rewrite_as_before(duck: Any, catalog: Any) -> None:
    lake = pdl.connect(catalog.url, catalog.data_path, data_inlining_row_limit=5)
    build(lake, duck, catalog)
    with attached(duck, catalog) as con:
        snaps = snapshots(con)
        before = {t: history(con, t, changed(lake, t)) for t in TABLES}
    ours_before = {t: our_feed(lake, t, 1, snaps[-1]) for t in TABLES}
    report = lake.rewrite_data_files(delete_threshold=0)
    assert report.rows_removed > 0 and report.snapshot_id == snaps[-1] + 1
    new = report.snapshot_id
    assert lake.rewrite_data_files(delete_threshold=0).groups == ()  # nothing left with deletes
    with attached(duck, catalog, inlining_row_limit=5) as con:
        for t in TABLES:
            after = history(con, t, [*before[t], new])
            assert after == {**before[t], new: before[t][max(before[t])]}, f"DuckDB reads {t} differently now"
            assert our_feed(lake, t, 1, new) == ours_before[t]  # the rewrite changes no row
            assert our_feed(lake, t, new, new) == Counter()
            assert (
                sorted(canonical_rows(lake.scan(t, columns=["rowid", *lake.table(t).schema.names])), key=repr)
                == (before[t][max(before[t])])
            )
        # DuckDB keeps writing into the rewritten files, and we read what it wrote.
        con.execute("DELETE FROM lake.r WHERE id IN (31, 220)")
        con.execute("UPDATE lake.s SET v = 'upd' WHERE id = 216")
        con.execute("INSERT INTO lake.q VALUES (60, 'later', NULL, 1, false)")
        later = snapshots(con)[-3:]
        for t in TABLES:
            want = history(con, t, later)
            assert our_history(lake, t, want) == want
    lake.close()


def test_rewrite_conflicts_with_concurrent_deletes(duck: Any, sqlite_catalog: Any) -> None:
    """A delete landing while the files are rewritten (ours, or DuckDB's) leaves that group out: the others commit,
    its new file is removed, and nothing is lost; when every group changed, nothing commits."""
    lake = pdl.connect(sqlite_catalog.url, sqlite_catalog.data_path, data_inlining_row_limit=0)
    lake.create_table("c", rows(0, 0).schema, partition_by=["k"])
    lake.append("c", rows(0, 30))
    lake.delete("c", [("id", "in", [0, 1, 2, 3, 4, 5])])  # each partition's file: 2 of 10 deleted
    written: list[str] = []

    def rewrite(groups: list[Any]) -> list[Any]:
        out = [rewrite_deletes(g) for g in groups]
        written.extend(w.written.path for w in out if w is not None)
        lake.delete("c", [("id", "=", 9)])  # k = 0: lands while the rewrite is being written
        return out

    report = lake.rewrite_data_files("c", delete_threshold=0.1, rewrite=rewrite)
    assert len(report.groups) == 2 and report.files_processed == 2  # k = 1 and k = 2
    assert sum(Path(p).exists() for p in written) == 2  # the k = 0 group's file was removed
    expected = sorted(i for i in range(30) if i > 5 and i != 9)
    assert sorted(lake.scan("c").column("id").to_pylist()) == expected

    def rewrite_late(groups: list[Any]) -> list[Any]:
        out = [rewrite_deletes(g) for g in groups]
        written[:] = [w.written.path for w in out if w is not None]
        with attached(duck, sqlite_catalog) as con:
            con.execute("DELETE FROM lake.c WHERE id = 12")  # DuckDB deletes from the only group's file
        return out

    before = lake.current_snapshot_id()
    with pytest.raises(StalePlanError, match=r"main\.c being rewritten were deleted from"):
        lake.rewrite_data_files("c", delete_threshold=0.1, rewrite=rewrite_late)
    assert written and not any(Path(p).exists() for p in written)
    assert lake.current_snapshot_id() == before + 1  # DuckDB's delete only
    assert lake.rewrite_data_files("c", delete_threshold=0.1).files_processed == 1
    assert sorted(lake.scan("c").column("id").to_pylist()) == [i for i in expected if i != 12]
    lake.close()


@pytest.mark.parametrize("bad", [1.5, -0.1, "x", float("nan")])
def test_bad_delete_threshold_writes_nothing(sqlite_catalog: Any, bad: Any) -> None:
    lake = pdl.connect(sqlite_catalog.url, sqlite_catalog.data_path, data_inlining_row_limit=0)
    lake.create_table("t", rows(0, 0).schema)
    lake.append("t", rows(0, 10))
    lake.delete("t", [("id", "<", 9)])
    before = lake.current_snapshot_id()
    with expect_bad_input("rewrite-delete-threshold", lake):
        lake.rewrite_data_files("t", delete_threshold=bad)
    with lake.engine.begin() as conn:  # a bad value in the catalog's option is refused the same way
        conn.execute(
            text("INSERT INTO ducklake_metadata VALUES ('rewrite_delete_threshold', '2', 'table', :t)"),
            {"t": lake.table("t").table_id},
        )
    with expect_bad_input("rewrite-delete-threshold", lake) as info:
        lake.rewrite_data_files("t")
    assert "option rewrite_delete_threshold must be" in str(info.value)
    assert lake.current_snapshot_id() == before
    assert lake.rewrite_data_files("t", delete_threshold=0.9).files_created == 1  # the argument wins
    lake.close()
