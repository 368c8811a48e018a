"""Two writers, one commit forced between the other's planning and its commit, for every pair that ends or moves rows.

Each test lands the other writer's commit with :func:`pyspark_ducklake._faults.before_next_commit` (ours, or DuckDB's
own ``ducklake_flush_inlined_data`` / ``ducklake_merge_adjacent_files`` / ``DELETE``), then checks the rows exactly,
here and in DuckDB, that no snapshot recorded an empty change, and where it matters that time travel and the change
feed read the same as DuckDB's.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import pyspark_ducklake as pdl
from pyspark_ducklake._faults import before_next_commit
from pyspark_ducklake.catalog.types import TableSchema, columns_from_arrow
from pyspark_ducklake.exceptions import CommitConflictError, StalePlanError
from pyspark_ducklake.table.microbatch import MicroBatchCommitter, SinkSettings, write_task
from tests.support.duck import attached, connect_duckdb, open_duckdb

SCHEMA = pa.schema([("id", pa.int64()), ("who", pa.string())])


def rows(ids: range | list[int], who: str = "a") -> pa.Table:
    ids = list(ids)
    return pa.table({"id": ids, "who": [who] * len(ids)}, schema=SCHEMA)


def ids_here(lake: pdl.Lake, table: str = "main.t", snapshot: int | None = None) -> list[int]:
    return sorted(lake.scan(table, columns=["id"], snapshot=snapshot).column("id").to_pylist())


_SHARED: list[Any] = []  # the module's DuckDB (see ``shared_duckdb``)


@pytest.fixture(scope="module", autouse=True)
def shared_duckdb() -> Iterator[None]:
    """One DuckDB for the module's oracle reads and writes: loading its extensions into a new connection costs about
    ten times attaching a lake, and tests here query DuckDB three times or so each."""
    con = connect_duckdb()
    _SHARED.append(con)
    yield
    _SHARED.remove(con)
    con.close()


def duck(location: Any, sql: str) -> list[tuple[Any, ...]]:
    """``sql`` in DuckDB with the lake attached afresh as ``lake`` (nothing DuckDB cached survives the detach)."""
    with attached(_SHARED[0], location) as con:
        return con.execute(sql).fetchall()


def ids_in_duckdb(location: Any, table: str = "main.t") -> list[int]:
    return sorted(r[0] for r in duck(location, f"SELECT id FROM lake.{table}"))


def no_empty_commit(lake: pdl.Lake) -> None:
    empty = [s.snapshot_id for s in lake.snapshots() if not s.changes_made]
    assert not empty, f"snapshots {empty} recorded no change"


def history(lake: pdl.Lake, table: str = "main.t") -> dict[int, list[int]]:
    """The table's ids at every snapshot (time travel)."""
    first = lake.table(table).entry.begin_snapshot
    return {s.snapshot_id: ids_here(lake, table, s.snapshot_id) for s in lake.snapshots() if s.snapshot_id >= first}


def feed(lake: pdl.Lake, start: int, end: int | None = None, table: str = "main.t") -> list[tuple[Any, ...]]:
    """``(snapshot, rowid, change type, id)`` of the change feed, sorted."""
    t = lake.table_changes(table, start, end)
    return sorted(
        zip(*(t.column(c).to_pylist() for c in ("_snapshot_id", "_rowid", "_change_type", "id")), strict=True)
    )


def feed_matches_duckdb(lake: pdl.Lake, location: Any, start: int, end: int, table: str = "main.t") -> None:
    schema_name, name = table.split(".")
    want = duck(
        location,
        f"SELECT snapshot_id, rowid, change_type, id FROM ducklake_table_changes('lake', '{schema_name}', '{name}', "
        f"{start}, {end})",
    )
    assert feed(lake, start, end, table) == sorted(want)


def deleted_at(lake: pdl.Lake, start: int) -> dict[int, int]:
    """Row id -> the snapshot that deleted it, from our change feed (DuckDB 1.5.5's ``ducklake_table_changes``
    misdates deletes recorded in a delete file of a flushed or merged file, its own included, so it is not the
    oracle for those)."""
    out: dict[int, int] = {}
    for snap, rowid, kind, _ in feed(lake, start):
        if kind == "delete":
            assert rowid not in out, f"row {rowid} deleted twice"
            out[rowid] = snap
    return out


def lake_with(location: Any, *appends: pa.Table, limit: int | None = None) -> pdl.Lake:
    lake = pdl.connect(location.url, location.data_path, data_inlining_row_limit=limit)
    lake.create_table("main.t", SCHEMA)
    for a in appends:
        lake.append("main.t", a)
    return lake


def other_writer(location: Any, limit: int | None = None) -> pdl.Lake:
    return pdl.connect(location.url, data_inlining_row_limit=limit)


def in_duckdb(location: Any, sql: str) -> Callable[[], None]:
    return lambda: duck(location, sql) and None


# --- a delete whose rows were moved: planned again ---------------------------------------------------------------


def test_delete_of_inlined_rows_flushed_under_it_is_replanned(catalog: Any) -> None:
    lake = lake_with(catalog, rows(range(5)))
    start = lake.current_snapshot_id()
    before = history(lake)
    with before_next_commit(lambda: other_writer(catalog).flush_inlined_data("main.t")):
        snap = lake.delete("main.t", [("id", "<", 3)])
    assert ids_here(lake) == ids_in_duckdb(catalog) == [3, 4]
    changes = [s.changes_made for s in lake.snapshots()[-2:]]
    assert changes == ["inline_flush:1", "deleted_from_table:1"] and snap == lake.current_snapshot_id()
    after = history(lake)
    assert {k: after[k] for k in before} == before  # time travel reads the same across the flush
    feed_matches_duckdb(lake, catalog, start, snap - 1)  # the range spanning the flush
    assert deleted_at(lake, start) == {0: snap, 1: snap, 2: snap}
    no_empty_commit(lake)


def test_delete_of_inlined_rows_flushed_by_duckdb_is_replanned(catalog: Any) -> None:
    lake = lake_with(catalog, rows(range(5)))
    start = lake.current_snapshot_id()
    with before_next_commit(in_duckdb(catalog, "CALL ducklake_flush_inlined_data('lake')")):
        snap = lake.delete("main.t", [("id", "in", [0, 4])])
    assert ids_here(lake) == ids_in_duckdb(catalog) == [1, 2, 3]
    assert "flush" in (lake.snapshots()[-2].changes_made or "")
    feed_matches_duckdb(lake, catalog, start, snap - 1)
    assert deleted_at(lake, start) == {0: snap, 4: snap}
    no_empty_commit(lake)


def test_delete_of_file_rows_compacted_under_it_is_replanned(catalog: Any) -> None:
    lake = lake_with(catalog, rows(range(10)), rows(range(10, 20)), rows(range(20, 30)), limit=0)
    start = lake.current_snapshot_id()
    before = history(lake)
    with before_next_commit(lambda: other_writer(catalog).merge_adjacent_files("main.t")):
        snap = lake.delete("main.t", [("id", "in", [5, 25])])
    assert ids_here(lake) == ids_in_duckdb(catalog) == [i for i in range(30) if i not in (5, 25)]
    assert [s.changes_made for s in lake.snapshots()[-2:]] == ["merge_adjacent:1", "deleted_from_table:1"]
    after = history(lake)
    assert {k: after[k] for k in before} == before
    feed_matches_duckdb(lake, catalog, start, snap - 1)
    assert deleted_at(lake, start) == {5: snap, 25: snap}
    no_empty_commit(lake)


def test_delete_of_file_rows_compacted_by_duckdb_is_replanned(catalog: Any) -> None:
    lake = lake_with(catalog, rows(range(10)), rows(range(10, 20)), limit=0)
    start = lake.current_snapshot_id()
    with before_next_commit(in_duckdb(catalog, "CALL ducklake_merge_adjacent_files('lake')")):
        snap = lake.delete("main.t", [("id", "=", 12)])
    assert ids_here(lake) == ids_in_duckdb(catalog) == [i for i in range(20) if i != 12]
    assert "merge_adjacent:1" in (lake.snapshots()[-2].changes_made or "")
    feed_matches_duckdb(lake, catalog, start, snap - 1)
    assert deleted_at(lake, start) == {12: snap}
    no_empty_commit(lake)


def test_delete_of_rows_flushed_by_the_sink_is_replanned(catalog: Any) -> None:
    lake = lake_with(catalog)
    sink = MicroBatchCommitter(lake, "main.t", SinkSettings(flush_rows=8))
    incoming = TableSchema(tuple(columns_from_arrow(SCHEMA)))

    def batch(batch_id: int, data: pa.Table) -> None:
        done, planned = sink.prepare("app", batch_id, incoming)
        assert done is None and planned is not None
        plan, tplan = planned
        outputs = [write_task(plan, data.to_batches())]
        sink.commit(plan, tplan, outputs, app_id="app", batch_id=batch_id, started=time.monotonic())

    batch(0, rows(range(5)))  # inlined, below the flush threshold
    user = other_writer(catalog)
    with before_next_commit(lambda: batch(1, rows(range(5, 10)))):  # crosses it: the sink flushes
        user.delete("main.t", [("id", "<", 3)])
    assert ids_here(lake) == ids_in_duckdb(catalog) == list(range(3, 10))
    assert "inline_flush:1" in (lake.snapshots()[-2].changes_made or "")
    no_empty_commit(lake)


@pytest.mark.parametrize("limit", [None, 0], ids=["inlined", "parquet"])
def test_filtered_overwrite_of_moved_rows_is_replanned(catalog: Any, limit: int | None) -> None:
    lake = lake_with(catalog, rows(range(5), "a"), rows(range(5, 10), "b"), limit=limit)
    move = (lambda: other_writer(catalog).flush_inlined_data("main.t")) if limit is None else None
    move = move or (lambda: other_writer(catalog).merge_adjacent_files("main.t"))
    with before_next_commit(move):
        lake.overwrite("main.t", rows([100, 101], "a"), filter=[("who", "=", "a")])
    assert ids_here(lake) == ids_in_duckdb(catalog) == [5, 6, 7, 8, 9, 100, 101]
    no_empty_commit(lake)


# --- the same rows ended twice ----------------------------------------------------------------------------------


@pytest.mark.parametrize("limit", [None, 0], ids=["inlined", "parquet"])
def test_delete_of_rows_another_writer_deleted_ends_each_row_once(catalog: Any, limit: int | None) -> None:
    lake = lake_with(catalog, rows(range(10)), limit=limit)
    start = lake.current_snapshot_id()
    with before_next_commit(lambda: other_writer(catalog, limit).delete("main.t", [("id", "<", 4)])):
        snap = lake.delete("main.t", [("id", "<", 6)])  # 0..3 are gone when it commits; 4 and 5 are left to it
    assert ids_here(lake) == ids_in_duckdb(catalog) == [6, 7, 8, 9]
    assert snap == lake.current_snapshot_id() == start + 2
    assert deleted_at(lake, start) == {**dict.fromkeys(range(4), start + 1), 4: snap, 5: snap}  # each row once
    feed_matches_duckdb(lake, catalog, start, snap)
    no_empty_commit(lake)


@pytest.mark.parametrize("limit", [None, 0], ids=["inlined", "parquet"])
def test_delete_of_rows_already_deleted_commits_nothing(catalog: Any, limit: int | None) -> None:
    lake = lake_with(catalog, rows(range(10)), limit=limit)
    with before_next_commit(lambda: other_writer(catalog, limit).delete("main.t", [("id", "<", 4)])):
        snap = lake.delete("main.t", [("id", "<", 2)])
    assert snap == lake.current_snapshot_id() == 3  # the other writer's delete; none of its own
    assert ids_here(lake) == ids_in_duckdb(catalog) == list(range(4, 10))
    no_empty_commit(lake)


@pytest.mark.parametrize("earlier", [False, True], ids=["first-delete", "replaced-delete-file"])
def test_deletes_of_other_rows_of_one_file_both_land_without_a_new_plan(
    catalog: Any, earlier: bool, caplog: pytest.LogCaptureFixture
) -> None:
    lake = lake_with(catalog, rows(range(10)), limit=0)
    if earlier:
        lake.delete("main.t", [("id", "=", 0)])
    start = lake.current_snapshot_id()
    caplog.set_level(logging.DEBUG, "pyspark_ducklake.catalog.transaction")
    with before_next_commit(lambda: other_writer(catalog).delete("main.t", [("id", "=", 1)])):
        snap = lake.delete("main.t", [("id", "=", 8)])
    assert not [r for r in caplog.records if "planned again" in r.getMessage()]  # its positions were merged in
    assert (
        ids_here(lake)
        == ids_in_duckdb(catalog)
        == [i for i in range(10) if i not in (0, 1, 8) or (i == 0 and not earlier)]
    )
    assert deleted_at(lake, start + 1) == {1: snap - 1, 8: snap}
    feed_matches_duckdb(lake, catalog, start + 1, snap)
    no_empty_commit(lake)


def test_delete_whose_delete_file_was_replaced_and_cleaned_up_is_replanned(catalog: Any) -> None:
    lake = lake_with(catalog, rows(range(10)), limit=0)
    lake.delete("main.t", [("id", "=", 0)])  # the file's first delete file, which the next delete replaces

    def delete_expire_cleanup() -> None:
        other = other_writer(catalog)
        other.delete("main.t", [("id", "=", 1)])
        other.expire_snapshots(versions=[s.snapshot_id for s in other.snapshots()[:-1]])
        report = other.cleanup_old_files(cleanup_all=True)
        assert report.files  # the replaced delete file is gone from disk

    with before_next_commit(delete_expire_cleanup):
        lake.delete("main.t", [("id", "=", 9)])
    assert ids_here(lake) == ids_in_duckdb(catalog) == list(range(2, 9))
    no_empty_commit(lake)


# --- appends and deletes side by side ---------------------------------------------------------------------------


@pytest.mark.parametrize("limit", [None, 0], ids=["inlined", "parquet"])
def test_delete_commits_beside_a_concurrent_append(catalog: Any, limit: int | None) -> None:
    lake = lake_with(catalog, rows(range(5)), limit=limit)
    # The append adds ids the delete's filter matches: it is ordered after the delete, so they stay.
    with before_next_commit(lambda: other_writer(catalog, limit).append("main.t", rows([0, 1, 50]))):
        lake.delete("main.t", [("id", "<", 2)])
    assert ids_here(lake) == ids_in_duckdb(catalog) == [0, 1, 2, 3, 4, 50]
    assert [s.changes_made for s in lake.snapshots()[-2:]][1] in ("inlined_delete:1", "deleted_from_table:1")
    no_empty_commit(lake)


@pytest.mark.parametrize("limit", [None, 0], ids=["inlined", "parquet"])
def test_append_commits_beside_a_concurrent_delete(catalog: Any, limit: int | None) -> None:
    lake = lake_with(catalog, rows(range(5)), limit=limit)
    with before_next_commit(lambda: other_writer(catalog, limit).delete("main.t", [("id", "<", 2)])):
        lake.append("main.t", rows([7, 8]))
    assert ids_here(lake) == ids_in_duckdb(catalog) == [2, 3, 4, 7, 8]
    no_empty_commit(lake)


def test_overwrite_replaces_rows_appended_before_it_commits(catalog: Any) -> None:
    lake = lake_with(catalog, rows(range(5)))
    with before_next_commit(lambda: other_writer(catalog).append("main.t", rows([50]))):
        lake.overwrite("main.t", rows([100]))
    assert ids_here(lake) == ids_in_duckdb(catalog) == [100]
    no_empty_commit(lake)


def test_filtered_overwrite_keeps_rows_appended_meanwhile(catalog: Any) -> None:
    lake = lake_with(catalog, rows(range(5), "a"))
    with before_next_commit(lambda: other_writer(catalog).append("main.t", rows([50], "a"))):
        lake.overwrite("main.t", rows([100], "a"), filter=[("who", "=", "a")])
    assert ids_here(lake) == ids_in_duckdb(catalog) == [50, 100]
    no_empty_commit(lake)


# --- maintenance planned before another writer's change ----------------------------------------------------------


def test_flush_commits_beside_a_concurrent_delete(catalog: Any) -> None:
    lake = lake_with(catalog, rows(range(5)))
    start = lake.current_snapshot_id()
    with before_next_commit(lambda: other_writer(catalog).delete("main.t", [("id", "=", 2)])):
        assert lake.flush_inlined_data("main.t") is not None
    assert ids_here(lake) == ids_in_duckdb(catalog) == [0, 1, 3, 4]
    assert ids_here(lake, snapshot=start) == [0, 1, 2, 3, 4]
    assert duck(catalog, f"SELECT count(*) FROM lake.main.t AT (VERSION => {start})") == [(5,)]
    feed_matches_duckdb(lake, catalog, start, lake.current_snapshot_id())
    no_empty_commit(lake)


def test_flush_after_a_concurrent_flush_has_nothing_to_do(catalog: Any) -> None:
    lake = lake_with(catalog, rows(range(5)))
    with before_next_commit(lambda: other_writer(catalog).flush_inlined_data("main.t")):
        assert lake.flush_inlined_data("main.t") is None
    assert ids_here(lake) == ids_in_duckdb(catalog) == list(range(5))
    assert [s.changes_made for s in lake.snapshots()].count("inline_flush:1") == 1
    no_empty_commit(lake)


def test_duckdb_delete_of_rows_our_flush_moved_fails_in_duckdb(catalog: Any) -> None:
    lake = lake_with(catalog, rows(range(5)))
    con = open_duckdb(catalog)
    try:
        con.execute("BEGIN")
        con.execute("DELETE FROM lake.main.t WHERE id < 2")
        lake.flush_inlined_data("main.t")  # commits while DuckDB's delete is open
        with pytest.raises(Exception, match=r"(?i)conflict"):
            con.execute("COMMIT")
    finally:
        con.close()
    assert ids_here(lake) == ids_in_duckdb(catalog) == list(range(5))  # nothing half-done


def test_compaction_of_a_file_duckdb_deleted_from_meanwhile_fails(catalog: Any) -> None:
    lake = lake_with(catalog, rows(range(10)), rows(range(10, 20)), limit=0)
    with before_next_commit(in_duckdb(catalog, "DELETE FROM lake.main.t WHERE id = 3")):
        with pytest.raises(CommitConflictError, match="being merged were deleted from"):
            lake.merge_adjacent_files("main.t")
    assert ids_here(lake) == ids_in_duckdb(catalog) == [i for i in range(20) if i != 3]
    no_empty_commit(lake)


# --- what still conflicts ---------------------------------------------------------------------------------------


def test_delete_conflicts_with_a_concurrent_drop(catalog: Any) -> None:
    lake = lake_with(catalog, rows(range(5)))
    with before_next_commit(in_duckdb(catalog, "DROP TABLE lake.main.t")):
        with pytest.raises(CommitConflictError, match="dropped"):
            lake.delete("main.t", [("id", "<", 2)])


def test_delete_whose_rows_keep_moving_fails_after_the_retries(catalog: Any) -> None:
    lake = pdl.connect(catalog.url, catalog.data_path, max_retry_count=0)
    lake.create_table("main.t", SCHEMA)
    lake.append("main.t", rows(range(5)))
    head = lake.current_snapshot_id() + 1
    with before_next_commit(lambda: other_writer(catalog).flush_inlined_data("main.t")):
        with pytest.raises(StalePlanError, match=r"moved to Parquet.*planned again 0 times"):
            lake.delete("main.t", [("id", "<", 3)])
    assert lake.current_snapshot_id() == head  # only the flush
    assert ids_here(lake) == list(range(5))
    referenced = lake.referenced_files([str(p) for p in Path(catalog.data_path).rglob("*.parquet")])
    assert len(referenced) == len(list(Path(catalog.data_path).rglob("*.parquet")))  # its files were removed


# --- DuckDB's caches see our commits ----------------------------------------------------------------------------


def test_duckdb_insert_after_our_inlined_append_gets_new_row_ids(catalog: Any) -> None:
    # DuckDB caches a table's statistics (next_row_id, min/max) by the snapshot's next_file_id, and bumps it on an
    # inlined-only commit to say the data changed; a commit that did not would make DuckDB reuse row ids.
    lake = lake_with(catalog)
    con = open_duckdb(catalog, inlining_row_limit=10)
    try:
        con.execute("INSERT INTO lake.main.t VALUES (100, 'duck'), (101, 'duck')")
        con.execute("SELECT count(*) FROM lake.main.t").fetchall()  # DuckDB caches the statistics it read
        lake.append("main.t", rows([1, 2, 3]))
        con.execute("INSERT INTO lake.main.t VALUES (102, 'duck')")
        got = con.execute("SELECT id, rowid FROM lake.main.t ORDER BY id").fetchall()
    finally:
        con.close()
    assert [i for i, _ in got] == [1, 2, 3, 100, 101, 102]
    assert len({r for _, r in got}) == 6
    assert ids_here(lake) == ids_in_duckdb(catalog) == [1, 2, 3, 100, 101, 102]


# --- a read is one snapshot ---------------------------------------------------------------------------------------


def test_read_spanning_a_flush_sees_one_snapshot(catalog: Any) -> None:
    # A scan reads the data files first and the inlined rows last; a flush committing in between moves the rows out
    # of the catalog into a file the scan did not list. Reading both in one database snapshot sees them once.
    from sqlalchemy import event

    lake = lake_with(catalog, rows(range(5)))
    other = other_writer(catalog)
    flushed: list[int | None] = []

    @event.listens_for(lake.engine, "before_cursor_execute")
    def _flush_first(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if not flushed and "FROM ducklake_inlined_data_1_1" in statement:
            flushed.append(other.flush_inlined_data("main.t"))

    assert ids_here(lake) == [0, 1, 2, 3, 4]
    assert flushed and flushed[0] is not None
    event.remove(lake.engine, "before_cursor_execute", _flush_first)
    assert ids_here(lake) == ids_in_duckdb(catalog) == [0, 1, 2, 3, 4]


def test_compaction_commits_the_groups_no_other_writer_touched(catalog: Any) -> None:
    lake = pdl.connect(catalog.url, catalog.data_path, data_inlining_row_limit=0)
    lake.create_table("main.t", SCHEMA, partition_by=["who"])
    for i in range(2):
        lake.append(
            "main.t",
            pa.concat_tables([rows(range(i * 10, i * 10 + 5), "a"), rows(range(100 + i * 10, 105 + i * 10), "b")]),
        )
    before = lake.scan("main.t").num_rows
    with before_next_commit(lambda: other_writer(catalog).delete("main.t", [("id", "=", 2)])):
        report = lake.merge_adjacent_files("main.t")  # two groups, one per partition; "a" got a delete meanwhile
    assert report.files_processed == 2 and report.files_created == 1
    assert [g.sources[0].split("/")[-2] for g in report.groups] == ["who=b"]
    files = {str(p) for p in Path(catalog.data_path).rglob("*.parquet")}
    assert lake.referenced_files(sorted(files)) == files  # the skipped group's merged file was removed
    assert lake.scan("main.t").num_rows == before - 1
    assert ids_here(lake) == ids_in_duckdb(catalog)
    no_empty_commit(lake)


@pytest.mark.parametrize("limit", [None, 0], ids=["inlined", "parquet"])
def test_delete_of_a_row_duckdb_updated_meanwhile_deletes_its_new_version(catalog: Any, limit: int | None) -> None:
    # In either order the updated row is gone: deleted after the update, or updated after the delete (a no-op).
    lake = lake_with(catalog, rows(range(10)), limit=limit)
    with before_next_commit(in_duckdb(catalog, "UPDATE lake.main.t SET who = 'b' WHERE id = 1")):
        lake.delete("main.t", [("id", "<", 3)])
    assert ids_here(lake) == ids_in_duckdb(catalog) == list(range(3, 10))
    no_empty_commit(lake)


# --- a schema change between planning and commit ---------------------------------------------------------------

EVOLVING = pa.schema([("id", pa.int64()), ("who", pa.string()), ("n", pa.int32())])
SCHEMA_CHANGES: dict[str, Callable[[pdl.Lake], None]] = {
    "add_column": lambda w: w.add_column("main.e", "extra", pa.int64(), default=5),
    "rename_column": lambda w: w.rename_column("main.e", "who", "owner"),
    "drop_column": lambda w: w.drop_column("main.e", "who"),
    "set_column_type": lambda w: w.set_column_type("main.e", "n", pa.int64()),
}


def evolving(ids: range | list[int]) -> pa.Table:
    ids = list(ids)
    return pa.table({"id": ids, "who": ["a"] * len(ids), "n": ids}, schema=EVOLVING)


def data_files(location: Any) -> set[str]:
    return {str(p) for p in Path(location.data_path).rglob("*") if p.is_file()}


def state(lake: pdl.Lake, location: Any) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """The table's rows here and in DuckDB, by id, every column (DuckDB's text of each value)."""
    here = sorted(tuple(r.values()) for r in lake.scan("main.e").to_pylist())
    names = ", ".join('"' + n + '"' for n in lake.table("main.e").schema.names)
    return here, sorted(duck(location, f"SELECT {names} FROM lake.main.e"))


# The conflict rule is per kind of schema change and per kind of write; rows inlined or in Parquet and the catalog
# backend are independent of it. Not the full 4x3x2x2 grid (48 cells) but a pairwise covering set: every kind of
# change meets every kind of write, and each of them, and each pair of (write, storage, backend), occurs with both
# values of the others (12 cells; the commit protocol is the subject, so both backends stay).
WRITE_CELLS = [  # (backend, change, storage, operation)
    ("sqlite", "add_column", "inlined", "delete"),
    ("postgres", "add_column", "parquet", "append"),
    ("postgres", "add_column", "inlined", "sink batch"),
    ("postgres", "drop_column", "parquet", "delete"),
    ("sqlite", "drop_column", "inlined", "append"),
    ("sqlite", "drop_column", "parquet", "sink batch"),
    ("postgres", "rename_column", "inlined", "delete"),
    ("sqlite", "rename_column", "parquet", "append"),
    ("postgres", "rename_column", "parquet", "sink batch"),
    ("sqlite", "set_column_type", "parquet", "delete"),
    ("postgres", "set_column_type", "inlined", "append"),
    ("sqlite", "set_column_type", "inlined", "sink batch"),
]
LIMITS = {"inlined": None, "parquet": 0}


@pytest.mark.parametrize(
    ("catalog", "change", "storage", "operation"),
    [pytest.param(*cell, id="-".join(cell)) for cell in WRITE_CELLS],
    indirect=["catalog"],
)
def test_a_write_planned_before_a_concurrent_schema_change_conflicts_with_nothing_committed(
    catalog: Any, change: str, storage: str, operation: str
) -> None:
    """As the isolation table says: a delete, an append or a sink batch whose table's columns changed between its
    planning and its commit fails with CommitConflictError; the schema change stays, nothing of the write is
    committed or left in the data path, and DuckDB reads the table as we do. A retry then lands on the new columns."""
    limit = LIMITS[storage]
    lake = pdl.connect(catalog.url, catalog.data_path, data_inlining_row_limit=limit)
    lake.create_table("main.e", EVOLVING)
    lake.append("main.e", evolving(range(5)))
    writer = other_writer(catalog, limit)
    sink = MicroBatchCommitter(lake, "main.e", SinkSettings(data_inlining_row_limit=10 if limit is None else 0))
    incoming = TableSchema(tuple(columns_from_arrow(EVOLVING)))

    def write() -> None:
        if operation == "delete":
            lake.delete("main.e", [("id", "<", 2)])
        elif operation == "append":
            lake.append("main.e", evolving([7, 8]))
        else:
            done, planned = sink.prepare("app", 0, incoming)
            assert done is None and planned is not None
            plan, tplan = planned
            sink.commit(
                plan,
                tplan,
                [write_task(plan, evolving([7, 8]).to_batches())],
                app_id="app",
                batch_id=0,
                started=time.monotonic(),
            )

    snapshots = len(lake.snapshots())
    with before_next_commit(lambda: SCHEMA_CHANGES[change](writer)):
        files = data_files(catalog)
        with pytest.raises(CommitConflictError):
            write()
    assert len(lake.snapshots()) == snapshots + 1  # the schema change only
    assert data_files(catalog) == files  # nothing of the failed write stayed (the schema change writes no file)
    here, in_duckdb = state(lake, catalog)
    assert [r[0] for r in here] == list(range(5)) and here == in_duckdb
    no_empty_commit(lake)
    if operation != "sink batch":  # the retry: planned against the new columns, it lands
        if operation == "delete":
            lake.delete("main.e", [("id", "<", 2)])
        else:
            lake.append("main.e", pa.table({"id": [7, 8]}))
        here, in_duckdb = state(lake, catalog)
        assert [r[0] for r in here] == ([2, 3, 4] if operation == "delete" else [0, 1, 2, 3, 4, 7, 8])
        assert here == in_duckdb


# Every kind of change meets every kind of write (12 cells); the backend alternates so that each change and each
# write runs on both (pairwise, as above: the full grid on both backends was 24 cells).
BESIDE_CELLS = [
    (backend, cell[1], cell[3]) for backend, cell in zip(["sqlite", "postgres"] * 6, WRITE_CELLS, strict=True)
]


@pytest.mark.parametrize(
    ("catalog", "change", "operation"),
    [pytest.param(*cell, id="-".join(cell)) for cell in BESIDE_CELLS],
    indirect=["catalog"],
)
def test_a_schema_change_commits_beside_a_concurrent_write(catalog: Any, change: str, operation: str) -> None:
    """The other direction: a delete, an append or a sink batch lands between the schema change's planning and its
    commit; the schema change commits after it, and the rows written before it read with the new columns, here and
    in DuckDB."""
    limit = None  # the catalog's: inlined rows (Parquet files take the same path through a schema change)
    lake = pdl.connect(catalog.url, catalog.data_path, data_inlining_row_limit=limit)
    lake.create_table("main.e", EVOLVING)
    lake.append("main.e", evolving(range(5)))
    writer = other_writer(catalog, limit)
    sink = MicroBatchCommitter(writer, "main.e", SinkSettings(data_inlining_row_limit=10 if limit is None else 0))
    incoming = TableSchema(tuple(columns_from_arrow(EVOLVING)))

    def other() -> None:
        if operation == "delete":
            writer.delete("main.e", [("id", "<", 2)])
        elif operation == "append":
            writer.append("main.e", evolving([7, 8]))
        else:
            done, planned = sink.prepare("app", 0, incoming)
            assert done is None and planned is not None
            plan, tplan = planned
            sink.commit(
                plan,
                tplan,
                [write_task(plan, evolving([7, 8]).to_batches())],
                app_id="app",
                batch_id=0,
                started=time.monotonic(),
            )

    with before_next_commit(other):
        SCHEMA_CHANGES[change](lake)
    here, in_duckdb = state(lake, catalog)
    assert [r[0] for r in here] == ([2, 3, 4] if operation == "delete" else [0, 1, 2, 3, 4, 7, 8])
    assert here == in_duckdb
    names = lake.table("main.e").schema.names
    assert (
        names
        == {
            "add_column": ["id", "who", "n", "extra"],
            "rename_column": ["id", "owner", "n"],
            "drop_column": ["id", "n"],
            "set_column_type": ["id", "who", "n"],
        }[change]
    )
    no_empty_commit(lake)
