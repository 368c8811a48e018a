"""A change-feed stream without a start option: the table's rows at the newest snapshot as inserts (DuckDB's read of
the table there), in bounded micro-batches, then DuckDB's ``table_changes`` for the rest; restarts from the
checkpoint in the middle of that load (across a flush and a merge), the load's snapshot expired under it, the
``columns`` option, and a checkpoint of another table. A real local SparkSession.

The load and the changes after it run on both catalogs (``test_rows_at_the_start_then_changes``); the other tests
run on SQLite only: what they vary (restarts, expiry, columns, row groups, a driver killed) is in the Spark source
and Parquet reads, not in catalog SQL, whose PostgreSQL spelling of the same reads that test and
``test_change_feed_stream.py`` cover.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

import pyspark_ducklake as pdl
from pyspark_ducklake.exceptions import CheckpointMismatchError
from pyspark_ducklake.spark.change_feed import plan_initial_load
from pyspark_ducklake.table.change_feed_initial import next_window, read_window, window_pieces
from pyspark_ducklake.table.scan import execute_file_task
from tests.support.duck import open_duckdb
from tests.support.jvm import existing_archive_options, spark_submit_env

FEED = ["_snapshot_id", "_rowid", "_change_type", "id", "s"]


def history(catalog: Any) -> pdl.Lake:
    """Inlined rows, Parquet files (one of 60 rows, one of 200), deletes of both, an UPDATE and an insert by DuckDB."""
    lake = pdl.connect(catalog.url, catalog.data_path, data_inlining_row_limit=10)
    lake.create_table("main.a", pa.schema([("id", pa.int64()), ("s", pa.string())]))
    lake.append("main.a", pa.table({"id": [1, 2, 3], "s": ["a", "b", "c"]}))
    lake.append("main.a", pa.table({"id": list(range(100, 160)), "s": [f"p{i}" for i in range(60)]}))
    lake.append("main.a", pa.table({"id": list(range(1000, 1200)), "s": [f"q{i}" for i in range(200)]}))
    lake.delete("main.a", [("id", "=", 2)])
    lake.delete("main.a", [("id", ">=", 150), ("id", "<", 1010)])
    duck(
        catalog,
        "UPDATE lake.main.a SET s = 'upd' WHERE id IN (1, 100, 1100)",
        "INSERT INTO lake.main.a VALUES (7, 'duck')",
    )
    return lake


def duck(catalog: Any, *statements: str) -> list[Any]:
    con = open_duckdb(catalog, inlining_row_limit=10)
    try:
        out: list[Any] = []
        for statement in statements:
            out = con.execute(statement).fetchall()
        return out
    finally:
        con.close()


def duck_rows_as_inserts(catalog: Any, snapshot: int) -> list[tuple[Any, ...]]:
    """DuckDB's read of the table at ``snapshot``, each row as the feed's insert at that snapshot."""
    got = duck(catalog, f"SELECT rowid, id, s FROM lake.main.a AT (VERSION => {snapshot})")
    return sorted((snapshot, rowid, "insert", id_, s) for rowid, id_, s in got)


def duck_changes(catalog: Any, start: int, end: int, columns: str = "id, s") -> list[tuple[Any, ...]]:
    return sorted(
        duck(
            catalog,
            f"SELECT snapshot_id, rowid, change_type, {columns} "
            f"FROM ducklake_table_changes('lake', 'main', 'a', {start}, {end})",
        )
    )


class Collector:
    """foreachBatch rows per batch id (a replayed batch replaces its earlier attempt, which is kept apart)."""

    def __init__(self, columns: list[str] = FEED, fail_at: int | None = None) -> None:
        self.columns = columns
        self.fail_at = fail_at
        self.batches: dict[int, list[tuple[Any, ...]]] = {}
        self.failed: dict[int, list[tuple[Any, ...]]] = {}
        self.schemas: list[Any] = []

    def __call__(self, df: Any, batch_id: int) -> None:
        got = sorted(tuple(r) for r in df.select(*self.columns).collect())
        self.schemas.append(df.schema)
        if batch_id == self.fail_at:
            self.fail_at = None
            self.failed[batch_id] = got
            raise RuntimeError(f"killed in batch {batch_id}")
        self.batches[batch_id] = got

    def rows(self) -> list[tuple[Any, ...]]:
        return sorted(r for b in self.batches.values() for r in b)


def run(spark: SparkSession, catalog: Any, checkpoint: Path, sink: Any, **options: str) -> Any:
    reader = spark.readStream.format("ducklake").option("catalog", catalog.url).option("readChangeFeed", "true")
    for k, v in options.items():
        reader = reader.option(k, v)
    q = (
        reader.load("main.a")
        .writeStream.foreachBatch(sink)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    try:
        q.awaitTermination(180)
    except Exception:
        pass
    if q.isActive:  # not done in time: a test must not read a half-run stream as a finished one
        q.stop()
        raise AssertionError("the stream did not finish within 180 s")
    return q


def test_rows_at_the_start_then_changes(spark: SparkSession, catalog: Any, tmp_path: Path) -> None:
    """The load in bounded batches (each row with the load snapshot's commit timestamp), then DuckDB's
    table_changes; on SQLite also ``startingSnapshot=latest`` on the same lake (only what comes after the query
    starts, as a stream without a start option did before), one lake instead of a history built per test."""
    pdl.register(spark)
    lake = history(catalog)
    start = lake.current_snapshot_id()
    expected = duck_rows_as_inserts(catalog, start)
    assert len(expected) == 3 + 50 + 190  # inlined, the 60-row file and the 200-row file, less the deletes
    sink = Collector(columns=[*FEED, "_commit_timestamp"])
    q = run(spark, catalog, tmp_path / "ck", sink, maxRowsPerTrigger="64")
    assert q.exception() is None
    assert [r[:5] for r in sink.rows()] == expected
    sizes = [len(b) for b in sink.batches.values()]
    assert len(sizes) >= 4 and max(sizes) <= 64, sizes  # bounded, none empty but perhaps the last
    # every initial row carries the load snapshot's commit time: DuckDB's snapshot_time of that snapshot
    when = duck(catalog, f"SELECT snapshot_time FROM ducklake_snapshots('lake') WHERE snapshot_id = {start}")[0][0]
    stamps = {r[5] for r in sink.rows()}
    assert len(stamps) == 1
    (stamp,) = stamps
    # PySpark hands back a naive time in the local zone, DuckDB an aware one: the same instant
    assert stamp.timestamp() == when.timestamp()
    assert sink.schemas[0].names == ["id", "s", "_change_type", "_snapshot_id", "_rowid", "_commit_timestamp"]
    latest = Collector()
    if catalog.backend == "sqlite":  # the start option is resolved in the Spark source, not in catalog SQL
        assert run(spark, catalog, tmp_path / "ck-latest", latest, startingSnapshot="latest").exception() is None
        assert latest.rows() == []
    # later commits: exactly DuckDB's table_changes after the load's snapshot
    lake.append("main.a", pa.table({"id": [500, 501], "s": ["x", "y"]}))
    lake.delete("main.a", [("id", "=", 3)])
    duck(catalog, "UPDATE lake.main.a SET s = 'again' WHERE id = 1150")
    loaded = len(sink.batches)
    assert run(spark, catalog, tmp_path / "ck", sink, maxRowsPerTrigger="64").exception() is None
    later = sorted(r[:5] for i, b in sink.batches.items() if i >= loaded for r in b)
    assert later == duck_changes(catalog, start + 1, lake.current_snapshot_id())
    assert later and len(sink.rows()) == len(set(sink.rows()))
    if catalog.backend == "sqlite":
        assert run(spark, catalog, tmp_path / "ck-latest", latest, startingSnapshot="latest").exception() is None
        assert latest.rows() == later


def test_restart_in_the_middle_of_the_load(spark: SparkSession, sqlite_catalog: Any, tmp_path: Path) -> None:
    """A micro-batch killed in the middle of the load is replayed with the same rows, across a flush and a merge
    that rewrite the files in between; every row comes exactly once, then the changes."""
    catalog = sqlite_catalog
    pdl.register(spark)
    lake = history(catalog)
    start = lake.current_snapshot_id()
    expected = duck_rows_as_inserts(catalog, start)
    sink = Collector(fail_at=2)
    # 64 rows a batch: at least four (test_rows_at_the_start_then_changes), so batch 2 is in the middle
    first = run(spark, catalog, tmp_path / "ck", sink, maxRowsPerTrigger="64")
    assert first.exception() is not None and "killed in batch 2" in str(first.exception())
    assert sorted(sink.batches) == [0, 1]
    # between the kill and the restart: inlined rows flushed to Parquet and files merged (new files, same row ids)
    lake.append("main.a", pa.table({"id": [600], "s": ["after"]}))
    duck(catalog, "CALL ducklake_flush_inlined_data('lake')", "CALL ducklake_merge_adjacent_files('lake')")
    assert run(spark, catalog, tmp_path / "ck", sink, maxRowsPerTrigger="64").exception() is None
    assert sink.batches[2] == sink.failed[2]  # the replay emitted what the killed attempt had
    initial = sorted(r for r in sink.rows() if r[0] == start and r[2] == "insert")
    assert initial == expected
    rest = sorted(r for r in sink.rows() if r[0] > start)
    assert rest == duck_changes(catalog, start + 1, lake.current_snapshot_id())
    assert len(sink.rows()) == len(set(sink.rows())) == len(expected) + len(rest)


def test_stopped_between_batches_and_restarted(spark: SparkSession, sqlite_catalog: Any, tmp_path: Path) -> None:
    """The query stopped (not failed) after some of the load's batches: the restart goes on from the checkpoint."""
    catalog = sqlite_catalog
    pdl.register(spark)
    lake = history(catalog)
    start = lake.current_snapshot_id()
    sink = Collector()
    two = threading.Event()

    def collect(df: Any, batch_id: int) -> None:
        sink(df, batch_id)
        if len(sink.batches) >= 2:
            two.set()

    reader = (
        spark.readStream.format("ducklake")
        .option("catalog", catalog.url)
        .option("readChangeFeed", "true")
        .option("maxFilesPerTrigger", "1")
    )
    q = (
        reader.load("main.a")
        .writeStream.foreachBatch(collect)
        .option("checkpointLocation", str(tmp_path / "ck"))
        .trigger(processingTime="2 seconds")
        .start()
    )
    assert two.wait(120)
    q.stop()
    stopped_at = len(sink.batches)
    assert stopped_at < 4  # the load has three pieces (two files, the inlined rows) and a last empty window
    restarted = run(spark, catalog, tmp_path / "ck", sink, maxFilesPerTrigger="1")
    assert not restarted.isActive and restarted.exception() is None
    assert stopped_at < len(sink.batches) <= 4
    assert sink.rows() == duck_rows_as_inserts(catalog, start)
    assert all(len({r[1] for r in b}) == len(b) for b in sink.batches.values())


def test_load_snapshot_expired_under_the_load(spark: SparkSession, sqlite_catalog: Any, tmp_path: Path) -> None:
    catalog = sqlite_catalog
    pdl.register(spark)
    lake = history(catalog)
    start = lake.current_snapshot_id()
    sink = Collector(fail_at=1)
    assert run(spark, catalog, tmp_path / "ck", sink, maxRowsPerTrigger="64").exception() is not None
    lake.append("main.a", pa.table({"id": [700], "s": ["later"]}))
    lake.expire_snapshots(versions=[start])
    failed = run(spark, catalog, tmp_path / "ck", sink, maxRowsPerTrigger="64")
    assert failed.exception() is not None
    message = str(failed.exception())
    assert "DataLossError" in message and f"rows at snapshot {start}, which was expired" in message


def test_start_in_expired_history_names_the_oldest_readable(
    spark: SparkSession, sqlite_catalog: Any, tmp_path: Path
) -> None:
    catalog = sqlite_catalog
    pdl.register(spark)
    lake = history(catalog)
    lake.expire_snapshots(versions=[1, 2, 3])
    oldest = min(s.snapshot_id for s in lake.snapshots() if s.snapshot_id > 1)
    failed = run(spark, catalog, tmp_path / "ck", Collector(), startingSnapshot="2")
    message = str(failed.exception())
    assert "DataLossError" in message and "needs snapshots 2..3" in message
    assert f"the oldest snapshot still readable after them is {oldest}" in message
    # 'earliest' starts there, after the gap (snapshot 0 is older still, but reading on from it would skip 1..3):
    # DuckDB's table_changes from the oldest snapshot readable without a gap
    sink = Collector()
    assert run(spark, catalog, tmp_path / "ck2", sink, startingSnapshot="earliest").exception() is None
    assert sink.rows() == duck_changes(catalog, oldest, lake.current_snapshot_id())


def test_columns_option(spark: SparkSession, sqlite_catalog: Any, tmp_path: Path) -> None:
    """Only the named columns (and every change column) in the load and in the changes."""
    catalog = sqlite_catalog
    pdl.register(spark)
    lake = history(catalog)
    start = lake.current_snapshot_id()
    columns = ["_snapshot_id", "_rowid", "_change_type", "S"]
    sink = Collector(columns=columns)
    assert run(spark, catalog, tmp_path / "ck", sink, columns="S").exception() is None
    assert sink.schemas[0].names == ["s", "_change_type", "_snapshot_id", "_rowid", "_commit_timestamp"]
    expected = sorted((snap, rowid, kind, s) for snap, rowid, kind, _id, s in duck_rows_as_inserts(catalog, start))
    assert sink.rows() == expected
    full = sink.rows()
    duck(catalog, "UPDATE lake.main.a SET s = 'narrow' WHERE id = 7")
    lake.append("main.a", pa.table({"id": [800], "s": ["z"]}))
    assert run(spark, catalog, tmp_path / "ck", sink, columns="S").exception() is None
    later = sorted(set(sink.rows()) - set(full))
    assert later == duck_changes(catalog, start + 1, lake.current_snapshot_id(), "s")
    # a stream with a start option takes it too
    other = Collector(columns=["_change_type", "s"])
    assert (
        run(spark, catalog, tmp_path / "ck2", other, columns="s", startingSnapshot=str(start + 1)).exception() is None
    )
    assert other.schemas[0].names == ["s", "_change_type", "_snapshot_id", "_rowid", "_commit_timestamp"]
    assert other.rows() == sorted((r[2], r[3]) for r in later)


def test_checkpoint_of_another_table_names_both(spark: SparkSession, sqlite_catalog: Any, tmp_path: Path) -> None:
    """A checkpoint written by a's load (no start option) refused for b. A few inlined rows suffice: the checkpoint's
    table is under test, not the load (whose history the other tests build)."""
    catalog = sqlite_catalog
    pdl.register(spark)
    lake = pdl.connect(catalog.url, catalog.data_path)
    for name in ("main.a", "main.b"):
        lake.create_table(name, pa.schema([("id", pa.int64()), ("s", pa.string())]))
        lake.append(name, pa.table({"id": [1, 2], "s": ["x", "y"]}))
    assert run(spark, catalog, tmp_path / "ck", Collector(), maxRowsPerTrigger="40").exception() is None
    q = (
        spark.readStream.format("ducklake")
        .option("catalog", catalog.url)
        .option("readChangeFeed", "true")
        .load("main.b")
        .writeStream.foreachBatch(lambda df, _: None)
        .option("checkpointLocation", str(tmp_path / "ck"))
        .trigger(availableNow=True)
        .start()
    )
    with pytest.raises(Exception) as failure:
        q.awaitTermination(120)
    message = str(failure.value)
    assert CheckpointMismatchError.__name__ in message
    assert "written for table main.a" in message and "not for main.b" in message


def test_a_merged_file_is_loaded_row_group_by_row_group(
    spark: SparkSession, sqlite_catalog: Any, tmp_path: Path
) -> None:
    """DuckDB's merge of four inserts is one file of four row groups (row ids by position, no row-id column), with
    a delete file: each window reads only its row groups, and the load equals DuckDB's read."""
    catalog = sqlite_catalog
    pdl.register(spark)
    statements = [
        "CALL lake.set_option('parquet_row_group_size', 100)",
        "CREATE TABLE lake.main.a(id BIGINT, s VARCHAR)",
    ]
    statements += [
        f"INSERT INTO lake.main.a SELECT i, 'v' || i FROM range({i * 250}, {i * 250 + 250}) t(i)" for i in range(4)
    ]
    statements += ["CALL ducklake_merge_adjacent_files('lake')", "DELETE FROM lake.main.a WHERE id % 7 = 0"]
    duck(catalog, *statements)
    lake = pdl.connect(catalog.url, catalog.data_path)
    start = lake.current_snapshot_id()
    expected = duck_rows_as_inserts(catalog, start)
    assert len(expected) == 1000 - 143
    load = plan_initial_load(lake, "main", "a", start)
    assert [len(p.groups or ()) for p in load.pieces] == [4]
    (piece,) = load.pieces
    assert piece.task is not None and piece.groups is not None
    second = execute_file_task(piece.task, load.schema, row_groups=[piece.groups[1][:3]])  # that row group alone
    assert sorted(zip(second.column("rowid").to_pylist(), second.column("id").to_pylist(), strict=True)) == [
        (rowid, id_) for _snap, rowid, _kind, id_, _s in expected if 250 <= rowid < 500
    ]
    got, low = [], 0
    while True:
        high = next_window(load, low, max_rows=250, max_files=10)
        for piece in window_pieces(load, low, high):
            part = read_window(load, piece, low, high)
            got += part.select(["_snapshot_id", "_rowid", "_change_type", "id", "s"]).to_pylist()
        if high is None:
            break
        low = high
    assert sorted(tuple(r.values()) for r in got) == expected
    sink = Collector()
    assert run(spark, catalog, tmp_path / "ck", sink, maxRowsPerTrigger="250").exception() is None
    assert sink.rows() == expected
    assert len(sink.batches) >= 4 and max(len(b) for b in sink.batches.values()) <= 250


def test_driver_killed_in_the_middle_of_the_load(sqlite_catalog: Any, tmp_path: Path) -> None:
    """SIGKILL of the driver process (and its JVM) after its second micro-batch of the load; the restarted driver
    finishes it from the checkpoint: every row exactly once, the batches together DuckDB's read."""
    catalog = sqlite_catalog
    lake = history(catalog)
    expected = duck_rows_as_inserts(catalog, lake.current_snapshot_id())
    out, checkpoint = tmp_path / "out", tmp_path / "ck"
    # 64 rows per batch: at least four batches (test_rows_at_the_start_then_changes), the kill after the second
    args = [sys.executable, "-m", "tests.support.feed_app", catalog.url, str(out), str(checkpoint), "64"]
    root = Path(__file__).resolve().parents[2]
    env = os.environ | spark_submit_env(existing_archive_options())  # a faster JVM start-up
    proc = subprocess.Popen(
        args, cwd=root, env=env, start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    seen: list[int] = []
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.startswith("BATCH "):
                seen.append(int(line.split()[1]))
                if len(seen) == 2:
                    os.killpg(proc.pid, signal.SIGKILL)
                    break
    finally:
        proc.wait(timeout=120)
    assert proc.returncode == -signal.SIGKILL and seen == [0, 1]
    done = subprocess.run(args, cwd=root, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    again = [int(line.split()[1]) for line in done.stdout.splitlines() if line.startswith("BATCH ")]
    # at most the killed one replayed, then the rest, in order
    assert again and again[0] in (1, 2) and len(again) >= 2 and again == list(range(again[0], again[0] + len(again)))
    got = pq.read_table(out, schema=None).select(["_snapshot_id", "_rowid", "_change_type", "id", "s"]).to_pylist()
    rows = sorted(tuple(r.values()) for r in got)
    assert rows == expected  # none twice, none lost
