"""The sink's upsert mode (``ducklake_sink(upsert_on=...)``) on a real local SparkSession, DuckDB as the oracle.

The same change stream is applied by the sink to one lake (micro-batches with ``op`` and ``lsn`` columns, deletes by
``delete_when``, duplicates resolved by ``order_by``) and by DuckDB's own ``UPDATE``/``INSERT``/``DELETE`` to a twin
lake, one transaction per batch: the tables and the change feeds must be equal, every replaced key must appear as an
``update_preimage``/``update_postimage`` pair with one ``rowid``, and DuckDB must read our lake's feed exactly as we
do. Small batches go through the driver (inlined), large ones are written by the executors.

Backends: PostgreSQL where the catalog's SQL or the commit protocol is the subject, once per such case, not a full
grid. The inlined path is catalog SQL (inlined rows updated and deleted in the catalog), so its stream-equality case
runs on PostgreSQL and the executors' case on SQLite; PostgreSQL's file registration of the executors' path runs in
test_crash_between_files_and_commit_then_replay, test_partitioned_table_and_merge_schema[postgres-large] and
test_concurrent_writer_between_plan_and_commit[postgres-large-run-again]. Flushes of inlined rows on both backends
are tests/conformance/test_concurrent_commits.py's subject.
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
from pyspark_ducklake._faults import AFTER_FILES_WRITTEN, ENV, before_next_commit
from pyspark_ducklake.exceptions import InvalidOptionError
from pyspark_ducklake.streaming.sink import ducklake_sink
from tests.support import upsert_app
from tests.support.bad_inputs import expect_bad_input
from tests.support.duck import connect_duckdb, open_duckdb
from tests.support.jvm import existing_archive_options

ROOT = Path(__file__).resolve().parents[2]

SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.string())])
BATCH_DDL = "id BIGINT, v STRING, op STRING, lsn BIGINT"
FEED = ("_snapshot_id", "_rowid", "_change_type", "id", "v")

Row = tuple[int | None, str | None, str | None, int]  # id, v, op ('d' deletes; NULL does not), lsn

BATCHES: list[list[Row]] = [
    [(2, "u2", "u", 1), (5, "u5", "u", 1), (20, "n20", "c", 1), (7, None, "d", 1)],
    [(3, "a", "u", 2), (3, "b", "u", 1), (21, "c", "c", 1), (20, "n20b", None, 1)],
    [(21, None, "d", 1), (22, "x", "c", 1), (99, None, "d", 1), (0, "z", "u", 1)],
    [(21, "back", "c", 1), (2, "u2b", "u", 2), (2, "u2c", "u", 3), (22, "gone", "d", 5), (22, "y", "u", 4)],
]


def frame(spark: SparkSession, rows: list[Row], partitions: int = 1) -> Any:
    return spark.createDataFrame(rows, BATCH_DDL).repartition(partitions)


def winners(rows: list[Row]) -> list[tuple[int, str | None, bool]]:
    """The last row per key by lsn (ties: the later row), in the order of the winning rows."""
    best: dict[int, tuple[int, int]] = {}
    for i, (k, _, _, lsn) in enumerate(rows):
        assert k is not None
        if k not in best or lsn >= best[k][0]:
            best[k] = (lsn, i)
    order = sorted(i for _, i in best.values())
    return [(rows[i][0], rows[i][1], rows[i][2] == "d") for i in order]  # type: ignore[misc]


def duckdb_sql(rows: list[Row]) -> str:
    """DuckDB's own change of the batch in one transaction (one snapshot): DELETE, UPDATE ... FROM, INSERT."""
    final = winners(rows)
    gone = [k for k, _, d in final if d]
    kept = [(k, v) for k, v, d in final if not d]
    sql = "BEGIN; "
    if gone:
        sql += f"DELETE FROM t WHERE id IN ({', '.join(map(str, gone))}); "
    if kept:
        values = ", ".join(f"({k}, {'NULL' if v is None else repr(v)}, {n})" for n, (k, v) in enumerate(kept))
        src = f"(VALUES {values}) s(id, v, n)"
        sql += f"UPDATE t SET v = s.v FROM {src} WHERE t.id = s.id; "
        sql += f"INSERT INTO t SELECT id, v FROM {src} WHERE id NOT IN (SELECT id FROM t) ORDER BY n; "
    return sql + "COMMIT"


def twin(tmp_path: Path, limit: int) -> Any:
    con = connect_duckdb()
    con.execute(
        f"ATTACH 'ducklake:{tmp_path / 'twin.ducklake'}' AS lake (DATA_PATH '{tmp_path / 'twin'}/', "
        f"DATA_INLINING_ROW_LIMIT {limit})"
    )
    con.execute("USE lake")
    con.execute("CREATE TABLE t(id BIGINT, v VARCHAR)")
    con.execute("INSERT INTO t SELECT i, 'v' || i FROM range(10) r(i)")
    return con


def lake_with_rows(location: Any, limit: int) -> pdl.Lake:
    lake = pdl.connect(location.url, location.data_path, data_inlining_row_limit=limit)
    lake.create_table("main.t", SCHEMA)
    lake.append("main.t", pa.table({"id": list(range(10)), "v": [f"v{i}" for i in range(10)]}, schema=SCHEMA))
    return lake


def sink_for(location: Any, **kw: Any) -> Any:
    kw.setdefault("upsert_on", ["id"])
    kw.setdefault("delete_when", "op = 'd'")
    kw.setdefault("order_by", "lsn")
    return ducklake_sink("main.t", catalog=location.url, data_path=location.data_path, app_id="cdc-1", **kw)


def _key(r: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple((x is None, x) for x in r)


def feed_here(lake: pdl.Lake) -> list[tuple[Any, ...]]:
    t = lake.table_changes("main.t", 1)
    return sorted(zip(*(t.column(c).to_pylist() for c in FEED), strict=True), key=_key)


def feed_duck(con: Any, end: int) -> list[tuple[Any, ...]]:
    rows = con.execute(
        f"SELECT snapshot_id, rowid, change_type, id, v FROM ducklake_table_changes('lake', 'main', 't', 1, {end})"
    ).fetchall()
    return sorted(rows, key=_key)


def rows_here(lake: pdl.Lake) -> list[tuple[Any, ...]]:
    t = lake.scan("main.t", columns=["rowid", "id", "v"])
    return sorted(zip(*(t.column(c).to_pylist() for c in ("rowid", "id", "v")), strict=True))


def without_rowid(rows: list[tuple[Any, ...]], at: int) -> list[tuple[Any, ...]]:
    return sorted((r[:at] + r[at + 1 :] for r in rows), key=_key)


def check_update_pairs(feed: list[tuple[Any, ...]]) -> int:
    """Every update_preimage has its update_postimage with the same rowid, snapshot and key; returns the pairs."""
    pre = {(s, r, i) for s, r, c, i, _ in feed if c == "update_preimage"}
    post = {(s, r, i) for s, r, c, i, _ in feed if c == "update_postimage"}
    assert pre == post
    # a key keeps its rowid through every update
    ids: dict[int, set[int]] = {}
    for _, r, c, i, _ in feed:
        if c.startswith("update"):
            ids.setdefault(i, set()).add(r)
    assert all(len(r) == 1 for r in ids.values()), ids
    return len(pre)


def location(request: pytest.FixtureRequest, backend: str) -> Any:
    return request.getfixturevalue("pg_catalog" if backend == "postgres" else "sqlite_catalog")


@pytest.mark.parametrize(
    ("backend", "limit", "partitions", "mode"),
    [("postgres", 1000, 1, "inlined"), ("sqlite", 0, 3, "parquet")],
    ids=["postgres-small-inlined", "sqlite-large-executors"],
)
def test_upsert_stream_equals_duckdb(
    spark: SparkSession,
    request: pytest.FixtureRequest,
    tmp_path: Path,
    backend: str,
    limit: int,
    partitions: int,
    mode: str,
) -> None:
    # one case per path, not per path and backend (module docstring): the inlined path's SQL on PostgreSQL
    catalog = location(request, backend)
    lake = lake_with_rows(catalog, limit)
    duck = twin(tmp_path, limit)
    sink = sink_for(catalog, data_inlining_row_limit=limit)
    try:
        for b, rows in enumerate(BATCHES):
            before = lake.current_snapshot_id()
            sink(frame(spark, rows, partitions), b)
            assert lake.current_snapshot_id() == before + 1  # one snapshot per micro-batch
            duck.execute(duckdb_sql(rows))
        assert [m.mode for m in sink.metrics] == [mode] * len(BATCHES)
        end = lake.current_snapshot_id()
        assert duck.execute("SELECT max(snapshot_id) FROM lake.snapshots()").fetchone()[0] == end
        assert lake.table("main.t").table_schema.names() == ["id", "v"]  # op and lsn are not stored
        ours, theirs = feed_here(lake), feed_duck(duck, end)
        if mode == "inlined":  # rows in batch order: row ids equal DuckDB's too
            assert rows_here(lake) == sorted(duck.execute("SELECT rowid, id, v FROM lake.t").fetchall())
            assert ours == theirs
        else:  # executors write new keys in their own order: equal but for new keys' row ids
            here = rows_here(lake)
            assert without_rowid(here, 0) == without_rowid(duck.execute("SELECT rowid, id, v FROM t").fetchall(), 0)
            assert without_rowid(ours, 1) == without_rowid(theirs, 1)
            old = {r[1]: r[0] for r in here if r[1] < 10}  # keys of the first append keep DuckDB's row ids
            assert old == {i: r for r, i, _ in duck.execute("SELECT rowid, id, v FROM t").fetchall() if i < 10}
        assert check_update_pairs(ours) == check_update_pairs(theirs) > 0
        con = open_duckdb(catalog)
        try:  # DuckDB reads our lake's rows and feed exactly as we do
            assert sorted(con.execute("SELECT rowid, id, v FROM lake.main.t").fetchall()) == rows_here(lake)
            duck_on_ours = sorted(
                con.execute(
                    f"SELECT snapshot_id, rowid, change_type, id, v FROM ducklake_table_changes('lake', 'main', 't', "
                    f"1, {end})"
                ).fetchall(),
                key=_key,
            )
            assert duck_on_ours == ours
        finally:
            con.close()
    finally:
        duck.close()


@pytest.mark.parametrize("limit", [1000, 0], ids=["small-inlined", "large-executors"])
def test_replayed_batch_is_a_no_op(spark: SparkSession, sqlite_catalog: Any, limit: int) -> None:
    lake = lake_with_rows(sqlite_catalog, limit)
    sink = sink_for(sqlite_catalog, data_inlining_row_limit=limit)
    sink(frame(spark, BATCHES[0], 2), 0)
    sink(frame(spark, BATCHES[1], 2), 1)
    state = (lake.current_snapshot_id(), rows_here(lake), sorted(p.name for p in Path(lake.data_path).rglob("*")))
    # after a crash Spark delivers batch 1 again, then 2: the replay changes nothing and writes no file
    again = ducklake_sink(
        "main.t",
        catalog=sqlite_catalog.url,
        app_id="cdc-1",
        upsert_on="id",
        delete_when="op = 'd'",
        order_by="lsn",
        data_inlining_row_limit=limit,
    )
    again(frame(spark, BATCHES[1], 2), 1)
    assert [m.mode for m in again.metrics] == ["skipped"]
    assert (
        lake.current_snapshot_id(),
        rows_here(lake),
        sorted(p.name for p in Path(lake.data_path).rglob("*")),
    ) == state
    again(frame(spark, BATCHES[2], 2), 2)
    assert lake.current_snapshot_id() == state[0] + 1


def test_large_then_small_batches_and_flush(spark: SparkSession, sqlite_catalog: Any) -> None:
    # one backend: the Spark paths and the sink's choice between them are the subject here; the flush's catalog SQL
    # on both backends is tests/conformance/test_concurrent_commits.py's (module docstring)
    catalog = sqlite_catalog
    # a batch over the inlining limit goes to the executors, small ones inline and are flushed on the threshold;
    # a table the sink creates leaves out the columns only delete_when and order_by use
    sink = ducklake_sink(
        "main.c",
        catalog=catalog.url,
        data_path=catalog.data_path,
        app_id="cdc-2",
        upsert_on="id",
        delete_when="op = 'd'",
        order_by="lsn",
        data_inlining_row_limit=50,
        flush_rows=60,
    )
    big = [(i, f"a{i}", "c", 1) for i in range(2000)]
    sink(frame(spark, big, 3), 0)
    small1 = [(i, f"b{i}", "u", 2) for i in range(40)] + [(i, None, "d", 2) for i in range(1990, 2000)]
    small2 = [(i, f"c{i}", "u", 3) for i in range(20, 50)] + [(5000, "new", "c", 3)]
    sink(frame(spark, small1, 2), 1)
    sink(frame(spark, small2, 2), 2)
    big2 = [(i, f"d{i}", "u", 4) for i in range(100, 400)] + [(i, f"e{i}", "c", 4) for i in range(3000, 3300)]
    sink(frame(spark, big2, 3), 3)
    assert [m.mode for m in sink.metrics] == ["parquet", "inlined", "inlined", "parquet"]
    assert sink.metrics[2].flushed_rows > 0  # 80 inlined rows crossed flush_rows=60
    # the executors' files: at most a replaced-rows file and a new-rows file per task slot, not one per shuffle
    # partition (spark.sql.shuffle.partitions, 200 by default, made 300 files of 2,000 keys)
    slots = spark.sparkContext.defaultParallelism
    assert 0 < sink.metrics[0].files <= 2 * slots and 0 < sink.metrics[3].files <= 2 * slots, sink.metrics
    lake = pdl.connect(catalog.url)
    assert lake.table("main.c").table_schema.names() == ["id", "v"]
    expected: dict[int, str | None] = {}
    for rows in (big, small1, small2, big2):
        for k, v, d in winners(rows):
            if d:
                expected.pop(k, None)
            else:
                expected[k] = v
    t = lake.scan("main.c", columns=["rowid", "id", "v"])
    assert sorted(zip(t.column("id").to_pylist(), t.column("v").to_pylist(), strict=True)) == sorted(expected.items())
    assert len(set(t.column("rowid").to_pylist())) == t.num_rows
    feed = lake.table_changes("main.c", 1)
    kinds = feed.column("_change_type").to_pylist()
    # updates: 40 + 30 (keys 20..39 twice) + 300; deletes 10; inserts 2000 + 1 + 300
    assert kinds.count("update_postimage") == kinds.count("update_preimage") == 40 + 30 + 300
    assert kinds.count("delete") == 10 and kinds.count("insert") == 2301
    con = open_duckdb(catalog)
    try:
        duck = con.execute("SELECT rowid, id, v FROM lake.main.c").fetchall()
        assert sorted(duck) == sorted(zip(*(t.column(c).to_pylist() for c in ("rowid", "id", "v")), strict=True))
        end = lake.current_snapshot_id()
        changes = con.execute(
            f"SELECT snapshot_id, rowid, change_type, id, v FROM ducklake_table_changes('lake', 'main', 'c', 1, {end})"
        ).fetchall()
        mine = zip(*(feed.column(c).to_pylist() for c in FEED), strict=True)
        assert sorted(changes, key=_key) == sorted(mine, key=_key)
    finally:
        con.close()


def test_without_delete_when_or_order_by(spark: SparkSession, sqlite_catalog: Any) -> None:
    # keys only: rows replace or insert; a column the table has (lsn here) is stored like any other
    lake = pdl.connect(sqlite_catalog.url, sqlite_catalog.data_path)
    lake.create_table("main.k", pa.schema([("id", pa.int64()), ("v", pa.string()), ("lsn", pa.int64())]))
    sink = ducklake_sink("main.k", catalog=sqlite_catalog.url, app_id="k", upsert_on="id", order_by="lsn")
    rows = [(1, "a", None, 1), (2, "b", None, 1), (1, "a2", None, 2)]
    sink(frame(spark, rows).drop("op"), 0)
    sink(frame(spark, [(2, "b2", None, 7)]).drop("op"), 1)
    t = lake.scan("main.k")
    assert sorted(zip(*(t.column(c).to_pylist() for c in ("id", "v", "lsn")), strict=True)) == [
        (1, "a2", 2),
        (2, "b2", 7),
    ]
    plain = ducklake_sink("main.k", catalog=sqlite_catalog.url, app_id="k2", upsert_on="id")
    plain(frame(spark, [(3, "c", None, 1), (1, "a3", None, 1)]).drop("op"), 0)
    assert sorted(lake.scan("main.k").column("v").to_pylist()) == ["a3", "b2", "c"]


@pytest.mark.parametrize("limit", [1000, 0], ids=["small", "large"])
def test_hostile_batches_write_nothing(spark: SparkSession, sqlite_catalog: Any, limit: int) -> None:
    lake = lake_with_rows(sqlite_catalog, 10)

    def run(rows: list[Row], drop: tuple[str, ...] = (), **kw: Any) -> None:
        sink_for(sqlite_catalog, data_inlining_row_limit=limit, **kw)(frame(spark, rows, 2).drop(*drop), 0)

    with expect_bad_input("upsert-null-key", lake):
        run([(1, "a", "u", 1), (None, "b", "u", 1)])
    with expect_bad_input("upsert-duplicate-key", lake) as info:
        run([(1, "a", "u", 1), (1, "b", "u", 2)], drop=("lsn",), order_by=None)
    assert "order_by" in str(info.value)  # names the option that resolves it
    with expect_bad_input("sink-delete-when-not-boolean", lake):
        run([(1, "a", "u", 1)], delete_when="lsn + 1")
    with expect_bad_input("sink-delete-when-not-boolean", lake):
        run([(1, "a", "u", 1)], delete_when="op")
    with expect_bad_input("sink-delete-when-invalid", lake) as info:
        run([(1, "a", "u", 1)], delete_when="opp = 'd'")
    assert "`op`" in str(info.value)  # Spark's own suggestion of the closest column
    with expect_bad_input("sink-delete-when-invalid", lake):
        run([(1, "a", "u", 1)], delete_when="op = = 'd'")
    with expect_bad_input("sink-order-by-missing", lake) as info:
        run([(1, "a", "u", 1)], order_by="lssn")
    assert "did you mean 'lsn'" in str(info.value)
    with expect_bad_input("sink-order-by-missing", lake) as info:
        run([(1, "a", "u", 1)], upsert_on="ID")
    assert "did you mean 'id'" in str(info.value)
    with expect_bad_input("upsert-key-missing", lake):  # a key the batch has but the table lacks
        run([(1, "a", "u", 1)], upsert_on="lsn", delete_when=None, order_by=None, drop=("op",))
    assert rows_here(lake) == [(i, i, f"v{i}") for i in range(10)]


def test_option_mistakes_are_typed(sqlite_catalog: Any) -> None:
    with expect_bad_input("option-unknown") as info:
        ducklake_sink("main.t", catalog=sqlite_catalog.url, upsert_onn=["id"])
    assert "did you mean 'upsert_on'" in str(info.value)
    with expect_bad_input("sink-upsert-option-alone"):
        ducklake_sink("main.t", catalog=sqlite_catalog.url, delete_when="op = 'd'")
    with expect_bad_input("sink-upsert-option-alone"):
        ducklake_sink("main.t", catalog=sqlite_catalog.url, order_by="lsn")
    with pytest.raises(InvalidOptionError, match="without empty ones"):
        ducklake_sink("main.t", catalog=sqlite_catalog.url, upsert_on="id,,v")


def test_crash_between_files_and_commit_then_replay(spark: SparkSession, pg_catalog: Any) -> None:
    # the driver is SIGKILLed after the executors wrote batch 1's files and before its commit; the replay of
    # batch 1 commits it once, the killed attempt's files stay unreferenced (no read sees them) until maintenance.
    # One backend (PostgreSQL; a killed driver costs a Spark process of its own): nothing reaches the catalog at this
    # kill point, and the replay's catalog side (the batch id recorded, a replay skipped) runs on SQLite in
    # test_replayed_batch_is_a_no_op and in tests/integration/test_crash_recovery.py (this kill point, SQLite).
    catalog = pg_catalog
    env = {k: v for k, v in os.environ.items() if k != ENV}
    env[ENV] = f"{AFTER_FILES_WRITTEN}:1"
    env["STREAM_APP_JAVA_OPTIONS"] = existing_archive_options()  # the class archive if made: a faster start-up
    args = [sys.executable, "-m", "tests.support.upsert_app", catalog.url, catalog.data_path, "0", "1"]
    proc = subprocess.run(args, cwd=ROOT, env=env, start_new_session=True, capture_output=True, text=True, timeout=300)
    assert proc.returncode == -9, proc.stderr[-3000:]
    lake = pdl.connect(catalog.url)
    crashed = lake.current_snapshot_id()
    orphans = lake.orphan_files(older_than=dt.timedelta(0))
    assert orphans and not lake.referenced_files(orphans)  # batch 1's files, written and never committed
    again = upsert_app.sink(catalog.url, catalog.data_path)
    for b in (1, 1, 2):  # Spark replays batch 1 (twice here: the second is a no-op), then goes on
        again(spark.createDataFrame(upsert_app.batch_rows(b), upsert_app.BATCH_DDL).repartition(3), b)  # type: ignore[operator]
    assert [m.mode for m in again.metrics] == ["parquet", "skipped", "parquet"]  # 150 deletes: over the limit
    assert lake.current_snapshot_id() == crashed + 2
    batches = [json.loads(s.commit_extra_info)["batch_id"] for s in lake.snapshots() if s.commit_extra_info]
    assert batches == [0, 1, 2]  # each batch exactly once
    expected = {i: f"b{i}" for i in range(150, 3000)}
    t = lake.scan("main.t")
    assert dict(zip(t.column("id").to_pylist(), t.column("v").to_pylist(), strict=True)) == expected
    con = open_duckdb(catalog)
    try:
        assert con.execute("SELECT count(*), count(DISTINCT id), min(id) FROM lake.main.t").fetchone() == (
            2850,
            2850,
            150,
        )
        kinds = dict(
            con.execute(
                f"SELECT change_type, count(*) FROM ducklake_table_changes('lake', 'main', 't', 1, "
                f"{lake.current_snapshot_id()}) GROUP BY ALL"
            ).fetchall()
        )
        assert kinds == {"insert": 200 + 2800, "update_preimage": 100, "update_postimage": 100, "delete": 150}
    finally:
        con.close()
    assert set(lake.orphan_files(older_than=dt.timedelta(0))) == set(orphans)
    lake.delete_orphan_files(older_than=dt.timedelta(0))
    assert lake.orphan_files(older_than=dt.timedelta(0)) == []
    assert lake.scan("main.t").num_rows == 2850


@pytest.mark.parametrize(
    ("backend", "limit"),
    [("sqlite", 1000), ("postgres", 1000), ("postgres", 0)],
    ids=["sqlite-small-replanned", "postgres-small-replanned", "postgres-large-run-again"],
)
def test_concurrent_writer_between_plan_and_commit(
    spark: SparkSession, request: pytest.FixtureRequest, backend: str, limit: int
) -> None:
    # another writer upserts overlapping keys after the batch was planned: the small batch is planned again, the
    # large one (its files carry the planned row ids) runs again; no update is lost and no key is doubled.
    # The conflict is the commit protocol's: both backends; the large batch's run-again is the sink's own logic,
    # on PostgreSQL only (its row locks are the stricter case).
    catalog = location(request, backend)
    lake = lake_with_rows(catalog, limit)
    other = pdl.connect(catalog.url)
    sink = sink_for(catalog, data_inlining_row_limit=limit)
    rows: list[Row] = [(3, "mine3", "u", 1), (50, "mine50", "c", 1), (4, None, "d", 1)]

    def concurrent() -> None:
        other.upsert("main.t", pa.table({"id": [3, 50, 6], "v": ["other3", "other50", "other6"]}), on=["id"])

    with before_next_commit(concurrent):
        sink(frame(spark, rows, 2), 0)
    assert lake.current_snapshot_id() == 4  # create, append, the other writer, the batch
    here = rows_here(lake)
    assert [(i, v) for _, i, v in here] == [(i, f"v{i}") for i in (0, 1, 2)] + [
        (3, "mine3"),
        (5, "v5"),
        (6, "other6"),
        *[(i, f"v{i}") for i in (7, 8, 9)],
        (50, "mine50"),
    ]
    feed = feed_here(lake)
    assert check_update_pairs(feed) == 4  # the other writer: 3 and 6; ours: 3 again and 50 (the other inserted it)
    assert [r[2] for r in feed if r[0] == 4 and r[3] == 50] == ["update_postimage", "update_preimage"]
    assert lake.orphan_files(older_than=dt.timedelta(0)) == []  # the first attempt's files are gone
    con = open_duckdb(catalog)
    try:
        assert sorted(con.execute("SELECT rowid, id, v FROM lake.main.t").fetchall()) == here
    finally:
        con.close()


def test_streaming_query_with_restart(spark: SparkSession, sqlite_catalog: Any, tmp_path: Path) -> None:
    # a real streaming query (file source, one file per micro-batch) whose newest commit Spark forgets: on restart
    # it re-runs that batch, which the sink skips; the query id is the app id across the restart. The same query
    # feeds a plain (append) sink too, which must skip the re-run batch likewise: one query for both modes (this
    # was test_streaming_sink.py's test_streaming_query_restarts_from_checkpoint, a query of its own).
    # One backend: the catalog is not under test here (module docstring).
    source, checkpoint = tmp_path / "in", tmp_path / "checkpoint"
    source.mkdir()
    files: list[list[Row]] = [
        [(i, f"a{i}", "c", 1) for i in range(300)],
        [(5, "b5", "u", 2), (5, "b5x", "u", 3), (7, None, "d", 2), (1000, "n", "c", 2)],
        [(i, f"c{i}", "u", 4) for i in range(100, 250)] + [(i, None, "d", 4) for i in range(5)],
        [(1000, "again", "u", 5), (6, None, "d", 5)],
    ]

    def drop_file(i: int) -> None:
        path = source / f"part-{i:04d}.json"
        keys = ("id", "v", "op", "lsn")
        path.write_text("\n".join(json.dumps(dict(zip(keys, r, strict=True))) for r in files[i]))
        os.utime(path, (1_700_000_000 + i, 1_700_000_000 + i))

    def run_once(sink: Any, plain: Any) -> None:
        def both(df: Any, batch_id: int) -> None:
            plain(df, batch_id)
            sink(df, batch_id)

        query = (
            spark.readStream.schema(BATCH_DDL)
            .option("maxFilesPerTrigger", 1)
            .json(str(source))
            .writeStream.foreachBatch(both)
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination(180)
        assert query.exception() is None

    def make() -> Any:
        return ducklake_sink(
            "main.s",
            catalog=sqlite_catalog.url,
            data_path=sqlite_catalog.data_path,
            upsert_on="id",
            delete_when="op = 'd'",
            order_by="lsn",
            data_inlining_row_limit=100,
        )

    def make_plain() -> Any:
        return ducklake_sink(
            "main.events", catalog=sqlite_catalog.url, data_path=sqlite_catalog.data_path, data_inlining_row_limit=100
        )

    for i in range(3):
        drop_file(i)
    first, first_plain = make(), make_plain()
    run_once(first, first_plain)
    assert [m.mode for m in first.metrics] == ["parquet", "inlined", "parquet"]
    assert [m.mode for m in first_plain.metrics] == ["parquet", "inlined", "parquet"]
    drop_file(3)
    newest = max(int(p.name) for p in (checkpoint / "commits").iterdir() if p.name.isdigit())
    os.remove(checkpoint / "commits" / str(newest))
    os.remove(checkpoint / "commits" / f".{newest}.crc")
    second, second_plain = make(), make_plain()
    run_once(second, second_plain)
    assert [m.mode for m in second.metrics] == ["skipped", "inlined"]
    assert [m.mode for m in second_plain.metrics] == ["skipped", "inlined"]
    expected: dict[int, str | None] = {}
    for rows in files:
        for k, v, d in winners(rows):
            if d:
                expected.pop(k, None)
            else:
                expected[k] = v
    lake = pdl.connect(sqlite_catalog.url)
    t = lake.scan("main.s")
    assert t.column_names == ["id", "v"]
    assert dict(zip(t.column("id").to_pylist(), t.column("v").to_pylist(), strict=True)) == expected
    appended = lake.scan("main.events", columns=["id", "v"])
    every_row = [(r[0], r[1]) for rows in files for r in rows]  # each file's rows once: the re-run skipped
    assert sorted(zip(*(appended.column(c).to_pylist() for c in ("id", "v")), strict=True), key=_key) == sorted(
        every_row, key=_key
    )
    apps = {json.loads(s.commit_extra_info)["app_id"] for s in lake.snapshots() if s.commit_extra_info}
    assert len(apps) == 1  # both sinks, both runs: the query id
    con = open_duckdb(sqlite_catalog)
    try:
        assert con.execute("SELECT count(*), count(DISTINCT id) FROM lake.main.s").fetchone() == (len(expected),) * 2
    finally:
        con.close()


@pytest.mark.parametrize(
    ("backend", "limit"), [("sqlite", 1000), ("postgres", 0)], ids=["sqlite-small", "postgres-large"]
)
def test_partitioned_table_and_merge_schema(
    spark: SparkSession, request: pytest.FixtureRequest, backend: str, limit: int
) -> None:
    # a partitioned table: the executors' and the driver's files follow its keys, replaced rows keep their row ids;
    # merge_schema adds the batch's new column in the batch's own snapshot. Each path once, each backend once: the
    # ALTER in the batch's snapshot is catalog SQL (both backends), the partitioned files are the path's own.
    catalog = location(request, backend)
    lake = pdl.connect(catalog.url, catalog.data_path, data_inlining_row_limit=0)
    lake.create_table(
        "main.p", pa.schema([("id", pa.int64()), ("g", pa.string()), ("v", pa.string())]), partition_by=["g"]
    )
    lake.append("main.p", pa.table({"id": list(range(40)), "g": [f"g{i % 3}" for i in range(40)], "v": ["old"] * 40}))
    sink = ducklake_sink(
        "main.p",
        catalog=catalog.url,
        app_id="p",
        upsert_on="id",
        delete_when="op = 'd'",
        order_by="lsn",
        data_inlining_row_limit=limit,
        merge_schema=True,
    )
    ddl = "id BIGINT, g STRING, v STRING, extra INT, op STRING, lsn BIGINT"
    rows = [(i, f"g{i % 3}", "new", i * 10, "d" if i % 10 == 0 else "u", 1) for i in range(30, 60)]
    before = lake.current_snapshot_id()
    old = lake.scan("main.p", columns=["rowid", "id"])
    row_ids = dict(zip(old.column("id").to_pylist(), old.column("rowid").to_pylist(), strict=True))
    sink(spark.createDataFrame(rows, ddl).repartition(2), 0)
    assert lake.current_snapshot_id() == before + 1
    table = lake.table("main.p")
    assert table.table_schema.names() == ["id", "g", "v", "extra"]
    got = lake.scan("main.p", columns=["rowid", "id", "g", "v", "extra"])
    by_id = {r["id"]: r for r in got.to_pylist()}
    assert sorted(by_id) == [i for i in range(60) if not (i >= 30 and i % 10 == 0)]
    replaced = list(range(31, 40))
    assert [by_id[i]["rowid"] for i in replaced] == [row_ids[i] for i in replaced]  # replaced rows keep row ids
    assert all(by_id[i]["v"] == ("new" if i >= 30 else "old") for i in by_id)
    assert all(by_id[i]["extra"] == (i * 10 if i >= 30 else None) for i in by_id)
    if limit == 0:  # every new file is in its partition's folder
        new_files = list(lake.referenced_files([str(p) for p in Path(catalog.data_path).rglob("*.parquet")]))
        assert all("g=g" in f for f in new_files if "delete" not in f)
    con = open_duckdb(catalog)
    try:
        duck = con.execute("SELECT rowid, id, g, v, extra FROM lake.main.p").fetchall()
        assert sorted(duck) == sorted(tuple(r.values()) for r in got.to_pylist())
        end = lake.current_snapshot_id()
        kinds = dict(
            con.execute(
                f"SELECT change_type, count(*) FROM ducklake_table_changes('lake', 'main', 'p', {end}, {end}) GROUP BY ALL"
            ).fetchall()
        )
        assert kinds == {"update_preimage": 9, "update_postimage": 9, "delete": 1, "insert": 18}
    finally:
        con.close()
