"""Upserts through ``writeStream.format("ducklake")`` (``upsertOn``, ``deleteWhen``, ``orderBy``) on a real local
SparkSession: the same change stream through ``foreachBatch(ducklake_sink(...))`` gives the same table and change
feed, DuckDB reads both as we do, a replayed batch (a no-op one included) changes nothing, a driver killed after its
catalog commit is restarted from the checkpoint, and options outside the subset are refused before anything is
written.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql import SparkSession

import pyspark_ducklake as pdl
from pyspark_ducklake._faults import AFTER_CATALOG_COMMIT, ENV
from pyspark_ducklake.catalog import app_progress
from pyspark_ducklake.streaming.sink import ducklake_sink
from pyspark_ducklake.streaming.write_stream import sink_settings
from pyspark_ducklake.streaming.write_stream_upsert import spark_kind, stream_upsert
from tests.support import ws_upsert_app
from tests.support.bad_inputs import expect_bad_input
from tests.support.duck import open_duckdb
from tests.support.jvm import existing_archive_options

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.string())])
FEED = ("_snapshot_id", "_rowid", "_change_type", "id", "v")

Row = tuple[int | None, str | None, str | None, int]  # id, v, op ('d' deletes; NULL does not), lsn

FILES: list[list[Row]] = [
    [(2, "u2", "u", 1), (5, "u5", "u", 1), (20, "n20", "c", 1), (7, None, "d", 1)],
    [(3, "a", "u", 2), (3, "b", "u", 1), (21, "c", "c", 1), (20, "n20b", None, 1)],
    [(99, None, "d", 1), (98, "x", "d", 1)],  # deletes keys that do not exist: changes nothing
    [(21, None, "d", 1), (22, "x", "c", 1), (0, "z", "u", 1), (2, "u2b", "u", 2), (2, "u2c", "u", 3)],
    [(21, "back", "c", 1), (22, "gone", "d", 5), (22, "y", "u", 4), (8, "it's é", "u", 1)],
]


def drop_file(source: Path, i: int, rows: list[Row]) -> None:
    path = source / f"part-{i:04d}.json"
    keys = ("id", "v", "op", "lsn")
    path.write_text("\n".join(json.dumps(dict(zip(keys, r, strict=True))) for r in rows))
    os.utime(path, (1_700_000_000 + i, 1_700_000_000 + i))  # the file source orders by modification time


def forget_newest_commit(checkpoint: Path) -> int:
    """Spark re-runs the newest batch on restart when its commit log entry is gone."""
    newest = max(int(p.name) for p in (checkpoint / "commits").iterdir() if p.name.isdigit())
    os.remove(checkpoint / "commits" / str(newest))
    os.remove(checkpoint / "commits" / f".{newest}.crc")
    return newest


def expected(files: list[list[Row]]) -> dict[int, str | None]:
    """Each file applied by key: the last row per key by lsn (ties: the later row)."""
    table: dict[int, str | None] = {i: f"v{i}" for i in range(10)}
    for rows in files:
        last: dict[int, tuple[int, str | None, bool]] = {}
        for k, v, op, lsn in rows:
            assert k is not None
            if k not in last or lsn >= last[k][0]:
                last[k] = (lsn, v, op == "d")
        for k, (_, v, gone) in last.items():
            if gone:
                table.pop(k, None)
            else:
                table[k] = v
    return table


def run_ws(spark: SparkSession, source: Path, checkpoint: Path, catalog: Any, table: str = "main.ws") -> None:
    query = ws_upsert_app.start(spark, str(source), str(checkpoint), catalog.url, catalog.data_path, table)
    query.awaitTermination(180)
    assert query.exception() is None, query.exception()


def query_id(checkpoint: Path) -> str:
    return str(json.loads((checkpoint / "metadata").read_text().splitlines()[0])["id"])


def rows_of(lake: pdl.Lake, table: str) -> list[tuple[Any, ...]]:
    t = lake.scan(table, columns=["rowid", "id", "v"])
    return sorted(zip(*(t.column(c).to_pylist() for c in ("rowid", "id", "v")), strict=True))


def _key(r: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple((x is None, x) for x in r)


def feed_of(lake: pdl.Lake, table: str) -> list[tuple[Any, ...]]:
    t = lake.table_changes(table, 1)
    return sorted(zip(*(t.column(c).to_pylist() for c in FEED), strict=True), key=_key)


def by_batch(lake: pdl.Lake, feed: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """The feed with each snapshot id replaced by the micro-batch that made it (None: the test's own set-up)."""
    batch = {
        s.snapshot_id: json.loads(s.commit_extra_info)["batch_id"] for s in lake.snapshots() if s.commit_extra_info
    }
    return sorted(((batch.get(r[0]), *r[1:]) for r in feed), key=_key)


def check_update_pairs(feed: list[tuple[Any, ...]]) -> int:
    pre = {(s, r, i) for s, r, c, i, _ in feed if c == "update_preimage"}
    post = {(s, r, i) for s, r, c, i, _ in feed if c == "update_postimage"}
    assert pre == post
    return len(pre)


def last_batch(lake: pdl.Lake, app_id: str, table: str) -> tuple[int, int] | None:
    with lake.engine.connect() as conn:
        return app_progress.last_batch(conn, app_id, lake.table(table).table_id)


def test_writestream_upserts_survive_a_kill_and_equal_the_sink_and_duckdb(
    spark: SparkSession, pg_catalog: Any, tmp_path: Path
) -> None:
    # One stream, one killed driver (these were two tests: the kill's and the equality's, each with its own stream):
    # the driver (JVM and Python workers) is SIGKILLed after batch 1's snapshot landed, before Spark's commit log;
    # restarted from the checkpoint, batch 1 is replayed and skipped and the stream goes on; a batch that changed
    # nothing is replayed too; then the same files through foreachBatch(ducklake_sink(...)) give the same table and
    # feed. PostgreSQL: the kill after the commit is the commit protocol's case (the catalog decides whether the
    # replayed batch was committed); SQLite's is tests/integration/test_crash_recovery.py's chain.
    catalog = pg_catalog
    pdl.register(spark)
    lake = pdl.connect(catalog.url, catalog.data_path)
    initial = pa.table({"id": list(range(10)), "v": [f"v{i}" for i in range(10)]}, schema=SCHEMA)
    for name in ("main.ws", "main.fb"):
        lake.create_table(name, SCHEMA)
        lake.append(name, initial)
    source, ws_ck = tmp_path / "in", tmp_path / "ck-ws"
    source.mkdir()
    for i in range(2):
        drop_file(source, i, FILES[i])
    start = lake.current_snapshot_id()
    env = {k: v for k, v in os.environ.items() if k != ENV}
    env[ENV] = f"{AFTER_CATALOG_COMMIT}:1"
    env["STREAM_APP_JAVA_OPTIONS"] = existing_archive_options()  # the class archive if made: a faster start-up
    args = [sys.executable, "-m", "tests.support.ws_upsert_app", str(source), str(ws_ck)]
    args += [catalog.url, catalog.data_path]
    proc = subprocess.run(args, cwd=ROOT, env=env, start_new_session=True, capture_output=True, text=True, timeout=300)
    assert proc.returncode == -9, proc.stderr[-3000:]
    assert lake.current_snapshot_id() == start + 2  # batches 0 and 1
    app = query_id(ws_ck)
    assert last_batch(lake, app, "main.ws") == (1, start + 2)
    drop_file(source, 2, FILES[2])
    run_ws(spark, source, ws_ck, catalog)  # batch 1 again (committed: skipped), then 2
    # batch 2 changed nothing: no snapshot, but its batch id is recorded
    assert lake.current_snapshot_id() == start + 2
    assert last_batch(lake, app, "main.ws") == (2, start + 2)
    assert forget_newest_commit(ws_ck) == 2
    drop_file(source, 3, FILES[3])
    drop_file(source, 4, FILES[4])
    run_ws(spark, source, ws_ck, catalog)  # batch 2 again (skipped, unread), then 3 and 4
    assert lake.current_snapshot_id() == start + 4
    assert last_batch(lake, app, "main.ws") == (4, start + 4)
    batches = [json.loads(s.commit_extra_info) for s in lake.snapshots() if s.commit_extra_info]
    # each batch exactly once
    assert [b["batch_id"] for b in batches] == [0, 1, 3, 4] and {b["app_id"] for b in batches} == {app}

    # the same stream through foreachBatch(ducklake_sink(...))
    sink = ducklake_sink(
        "main.fb",
        catalog=catalog.url,
        data_path=catalog.data_path,
        upsert_on="id",
        delete_when="op = 'd'",
        order_by="lsn",
    )
    query = (
        spark.readStream.schema(ws_upsert_app.BATCH_DDL)
        .option("maxFilesPerTrigger", 1)
        .json(str(source))
        .writeStream.foreachBatch(sink)
        .option("checkpointLocation", str(tmp_path / "ck-fb"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(180)
    assert query.exception() is None
    assert [m.mode for m in sink.metrics] == ["inlined", "inlined", "empty", "inlined", "inlined"]

    want = sorted(expected(FILES).items())
    assert [(i, v) for _, i, v in rows_of(lake, "main.ws")] == want
    assert rows_of(lake, "main.ws") == rows_of(lake, "main.fb")  # row ids included
    assert lake.table("main.ws").table_schema.names() == ["id", "v"]  # op and lsn are not stored
    ours = feed_of(lake, "main.ws")
    assert by_batch(lake, ours) == by_batch(lake, feed_of(lake, "main.fb"))
    assert check_update_pairs(ours) > 0
    con = open_duckdb(catalog)
    try:  # DuckDB reads our rows and our change feed exactly as we do
        assert sorted(con.execute("SELECT rowid, id, v FROM lake.main.ws").fetchall()) == rows_of(lake, "main.ws")
        end = lake.current_snapshot_id()
        theirs = con.execute(
            f"SELECT snapshot_id, rowid, change_type, id, v FROM ducklake_table_changes('lake', 'main', 'ws', 1, {end})"
        ).fetchall()
        assert sorted(theirs, key=_key) == ours
    finally:
        con.close()


def test_created_table_large_batch_and_replay_of_an_empty_batch(
    spark: SparkSession, sqlite_catalog: Any, tmp_path: Path
) -> None:
    # a table the stream creates leaves out the control columns; a batch over the inlining limit is written by the
    # tasks (each pairs its rows with the table and writes them; the driver gets only keys)
    pdl.register(spark)
    source, checkpoint = tmp_path / "in", tmp_path / "ck"
    source.mkdir()
    files: list[list[Row]] = [
        [(i, f"a{i}", "c", 1) for i in range(300)],
        [(i, f"b{i}", "u", 2) for i in range(250, 400)] + [(i, None, "d", 2) for i in range(10)],
    ]
    for i, rows in enumerate(files):
        drop_file(source, i, rows)
    query = (
        spark.readStream.schema(ws_upsert_app.BATCH_DDL)
        .option("maxFilesPerTrigger", 1)
        .json(str(source))
        .writeStream.format("ducklake")
        .option("catalog", sqlite_catalog.url)
        .option("dataPath", sqlite_catalog.data_path)
        .option("checkpointLocation", str(checkpoint))
        .option("upsert_on", "id")
        .option("DELETEWHEN", "`op` IN ('d', 'x') AND lsn IS NOT NULL")
        .option("orderBy", "lsn")
        .option("data_inlining_row_limit", "50")
        .trigger(availableNow=True)
        .start("main.created")
    )
    query.awaitTermination(180)
    assert query.exception() is None, query.exception()
    lake = pdl.connect(sqlite_catalog.url)
    assert lake.table("main.created").table_schema.names() == ["id", "v"]
    snapshots = lake.snapshots()[1:]
    assert len(snapshots) == 2 and not any("inlined" in s.changes_made for s in snapshots)  # both over the limit
    want = {i: f"a{i}" for i in range(10, 250)} | {i: f"b{i}" for i in range(250, 400)}
    t = lake.scan("main.created")
    assert dict(zip(t.column("id").to_pylist(), t.column("v").to_pylist(), strict=True)) == want
    assert lake.orphan_files(older_than=dt.timedelta(0)) == []
    con = open_duckdb(sqlite_catalog)
    try:
        assert con.execute("SELECT count(*), count(DISTINCT id) FROM lake.main.created").fetchone() == (390, 390)
        kinds = dict(
            con.execute(
                "SELECT change_type, count(*) FROM ducklake_table_changes('lake', 'main', 'created', 1, "
                f"{lake.current_snapshot_id()}) GROUP BY ALL"
            ).fetchall()
        )
        assert kinds == {"insert": 300 + 100, "update_preimage": 50, "update_postimage": 50, "delete": 10}
    finally:
        con.close()


def test_sink_records_batches_that_change_nothing(spark: SparkSession, sqlite_catalog: Any) -> None:
    # ducklake_sink: an empty batch and one that deletes only missing keys record their batch id (no snapshot); their
    # replays are skipped before anything is read, on the driver path and the executors' path
    lake = pdl.connect(sqlite_catalog.url, sqlite_catalog.data_path)
    lake.create_table("main.t", SCHEMA)
    lake.append("main.t", pa.table({"id": [1, 2], "v": ["a", "b"]}, schema=SCHEMA))
    for limit in (1000, 0):
        sink = ducklake_sink(
            "main.t",
            catalog=sqlite_catalog.url,
            app_id=f"noop-{limit}",
            upsert_on="id",
            delete_when="op = 'd'",
            order_by="lsn",
            data_inlining_row_limit=limit,
        )
        before = lake.current_snapshot_id()
        empty = spark.createDataFrame([], ws_upsert_app.BATCH_DDL)
        missing = spark.createDataFrame([(50, None, "d", 1), (51, None, "d", 1)], ws_upsert_app.BATCH_DDL)
        sink(empty, 0)
        sink(missing.repartition(2), 1)
        sink(missing.repartition(2), 1)  # replays
        sink(empty, 0)
        assert [m.mode for m in sink.metrics] == ["empty", "empty", "skipped", "skipped"], limit
        assert lake.current_snapshot_id() == before
        assert last_batch(lake, f"noop-{limit}", "main.t") == (1, before)
    assert sorted(lake.scan("main.t").column("id").to_pylist()) == [1, 2]


def test_hostile_options_are_refused_before_anything_is_written(
    spark: SparkSession, sqlite_catalog: Any, tmp_path: Path
) -> None:
    pdl.register(spark)
    lake = pdl.connect(sqlite_catalog.url, sqlite_catalog.data_path)
    lake.create_table("main.h", SCHEMA)
    lake.append("main.h", pa.table({"id": [1, 2], "v": ["a", "b"]}, schema=SCHEMA))
    source = tmp_path / "in"
    source.mkdir()
    drop_file(source, 0, [(1, "x", "d", 1), (3, "y", "u", 1)])
    runs = [0]

    def run(rows: list[Row] | None = None, **options: str) -> None:
        runs[0] += 1
        if rows is not None:
            drop_file(source, runs[0], rows)
        writer = (
            spark.readStream.schema(ws_upsert_app.BATCH_DDL)
            .json(str(source))
            .writeStream.format("ducklake")
            .option("catalog", sqlite_catalog.url)
            .option("checkpointLocation", str(tmp_path / f"ck{runs[0]}"))
            .trigger(availableNow=True)
        )
        for k, v in options.items():
            writer = writer.option(k, v)
        query = writer.start("main.h")
        query.awaitTermination(120)
        error = query.exception()
        if error is not None:
            raise error

    # Every option mistake is raised where the stream writer is made (``sink_settings``, then ``stream_upsert``
    # against the stream's columns), before any task runs: one whole Spark query per function proves the route (the
    # error reaches the query, nothing is written); the other mistakes go through those two functions directly, with
    # the stream's own column kinds (a Spark query each cost seconds and proved the same).
    upsert = {"upsertOn": "id", "orderBy": "lsn"}
    with expect_bad_input("option-unknown", lake) as info:
        run(upsertOnn="id")
    assert "did you mean 'upsertOn'" in str(info.value)
    with expect_bad_input("ws-delete-when-subset", lake) as info:
        run(deleteWhen="op IN (SELECT 'd')", **upsert)
    assert "option deleteWhen" in str(info.value)
    stream = spark.createDataFrame([], ws_upsert_app.BATCH_DDL).schema
    kinds = {f.name: spark_kind(f.dataType) for f in stream.fields}

    def writer_made(**options: str) -> None:
        settings = sink_settings(options, None)
        assert settings.upsert is not None
        stream_upsert(settings.upsert, kinds)

    for bad in ("upper(op) = 'D'", "opp = 'd'", "lsn + 1 > 2", "op = 1", "op LIKE 'd%'"):
        with expect_bad_input("ws-delete-when-subset", lake) as info:
            writer_made(deleteWhen=bad, **upsert)
        assert "option deleteWhen" in str(info.value)
    with expect_bad_input("ws-upsert-option-alone", lake):
        writer_made(deleteWhen="op = 'd'")
    with expect_bad_input("delete-when-constant", lake):
        writer_made(deleteWhen="false", **upsert)
    with expect_bad_input("sink-order-by-missing", lake):
        writer_made(upsertOn="id", orderBy="lssn")
    with expect_bad_input("upsert-duplicate-key", lake):
        run([(5, "p", "u", 1), (5, "q", "u", 2)], upsertOn="id", deleteWhen="op = 'd' AND lsn > 0")
    with expect_bad_input("upsert-null-key", lake):
        run([(None, "p", "u", 1)], upsertOn="id", deleteWhen="op = 'd'", orderBy="lsn")
    assert sorted(lake.scan("main.h").column("id").to_pylist()) == [1, 2]


@pytest.mark.parametrize("value", ["TRUE", " false "])
def test_delete_when_constant_is_refused_by_the_sink(sqlite_catalog: Any, value: str) -> None:
    with expect_bad_input("delete-when-constant"):
        ducklake_sink("main.t", catalog=sqlite_catalog.url, upsert_on="id", delete_when=value)
