"""Large upsert batches of ``writeStream.format("ducklake")``: the tasks pair their rows with the table and write
them, the driver gets only keys (``table/staged_upsert.py``).

The stream writer runs here as Spark runs it, without the JVM: the writer is planned on the driver, a pickled copy
runs each task's ``write()``, another the ``commit()``. Every batch is also applied through the small-batch path (a
twin table whose tasks hand their rows to the driver) and by hand, and DuckDB reads both tables, their row ids and
their change feeds alike. Real SQLite and PostgreSQL catalogs, real files.
"""

from __future__ import annotations

import datetime as dt
import pickle
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import types as T

import pyspark_ducklake as pdl
from pyspark_ducklake.exceptions import DuplicateKeyError, NullKeyError
from pyspark_ducklake.spark.lake_config import LakeConfig
from pyspark_ducklake.streaming.write_stream import DuckLakeStreamWriter, StreamTaskMessage
from pyspark_ducklake.table import scratch, staged_upsert
from pyspark_ducklake.table.microbatch import TaskOutput
from pyspark_ducklake.table.staged_upsert import StagedTask
from tests.support.duck import open_duckdb

SPARK_SCHEMA = T.StructType(
    [
        T.StructField("id", T.LongType()),
        T.StructField("g", T.IntegerType()),
        T.StructField("v", T.StringType()),
        T.StructField("op", T.StringType()),
        T.StructField("lsn", T.LongType()),
    ]
)
TABLE_SCHEMA = pa.schema([("id", pa.int64()), ("g", pa.int32()), ("v", pa.string())])
Row = tuple[Any, ...]  # id, g, v, op ('d' deletes), lsn


def task_batch(rows: Sequence[Row]) -> pa.RecordBatch:
    names = ["id", "g", "v", "op", "lsn"]
    types = [pa.int64(), pa.int32(), pa.string(), pa.string(), pa.int64()]
    cols: list[Any] = list(zip(*rows, strict=True)) if rows else [[] for _ in names]
    return pa.record_batch([pa.array(list(c), t) for c, t in zip(cols, types, strict=True)], names=names)


def writer(catalog: Any, table: str, limit: int, *, ordered: bool = True, file_rows: int = 7) -> DuckLakeStreamWriter:
    options = {
        "catalog": catalog.url,
        "dataPath": catalog.data_path,
        "upsertOn": "id",
        "deleteWhen": "op = 'd'",
        "orderBy": "lsn",
        "app_id": "app",
        "data_inlining_row_limit": str(limit),
        "target_file_rows": str(file_rows),  # 7: several files per task
    }
    schema = SPARK_SCHEMA
    if not ordered:  # the stream has no lsn column either (the table does not keep it)
        del options["orderBy"]
        schema = T.StructType([f for f in SPARK_SCHEMA.fields if f.name != "lsn"])
    return DuckLakeStreamWriter(LakeConfig.resolve(options), table, options, schema)


def copy(w: DuckLakeStreamWriter) -> DuckLakeStreamWriter:
    return pickle.loads(pickle.dumps(w))  # a task's or the commit's copy, as Spark ships it


def run_tasks(w: DuckLakeStreamWriter, tasks: Sequence[Sequence[Row]]) -> list[StreamTaskMessage]:
    names = [f.name for f in w.schema.fields]
    return [copy(w).write(iter([task_batch(rows).select(names)])) for rows in tasks]


def apply(
    catalog: Any, table: str, limit: int, batch_id: int, tasks: Sequence[Sequence[Row]]
) -> list[StreamTaskMessage]:
    w = writer(catalog, table, limit)
    messages = run_tasks(w, tasks)
    copy(w).commit(list(messages), batch_id)
    return messages


def model(state: dict[int, tuple[int, str]], tasks: Sequence[Sequence[Row]]) -> dict[int, tuple[int, str]]:
    """The batch by hand: the last row of each key by lsn (ties: the later task), deletes drop the key."""
    last: dict[int, Row] = {}
    for rows in tasks:
        for r in rows:
            assert r[0] is not None
            if r[0] not in last or r[4] >= last[r[0]][4]:
                last[r[0]] = r
    out = dict(state)
    for k, (_, g, v, op, _) in last.items():
        if op == "d":
            out.pop(k, None)
        else:
            out[k] = (g, v)
    return out


def rows_of(lake: pdl.Lake, table: str) -> list[tuple[Any, ...]]:
    t = lake.scan(table, columns=["rowid", "id", "g", "v"])
    return sorted(zip(*(t.column(c).to_pylist() for c in ("rowid", "id", "g", "v")), strict=True))


def feed(lake: pdl.Lake, table: str, start: int) -> list[tuple[Any, ...]]:
    t = lake.table_changes(table, start)
    cols = ("_rowid", "_change_type", "id", "g", "v")
    return sorted(zip(*(t.column(c).to_pylist() for c in cols), strict=True))


def staged(messages: Sequence[StreamTaskMessage]) -> int:
    return sum(isinstance(m.output, StagedTask) for m in messages)


BASE = {i: (i % 3, f"v{i}") for i in range(40)}
BATCHES: list[list[list[Row]]] = [
    [  # two large tasks: updates, new keys, deletes; key 5 in both (the later lsn wins), key 6 a tie (later task)
        [(i, 1, f"a{i}", "u", 1) for i in range(12)] + [(100, 2, "n100", "c", 1), (30, 0, "", "d", 1)],
        [(5, 2, "b5", "u", 2), (6, 0, "b6", "u", 1), (7, 0, "", "d", 1)]
        + [(i, 2, f"b{i}", "c", 1) for i in range(101, 110)],
    ],
    [  # key 100 updated in one task and deleted with a later lsn in the other; key 11 deleted then re-inserted
        [(100, 0, "x", "u", 1), (11, 0, "", "d", 1)] + [(i, 0, f"c{i}", "u", 1) for i in range(20, 30)],
        [(100, 0, "", "d", 2), (11, 1, "back", "u", 2), (2, 1, "one small task", "u", 1)],
    ],
]


@pytest.fixture
def small_parts(monkeypatch: pytest.MonkeyPatch) -> None:
    """The driver resolves 5 keys at a time and scratch files hold 3 rows: every range and file boundary is met."""
    monkeypatch.setattr(staged_upsert, "RANGE_KEYS", 5)
    monkeypatch.setattr(scratch, "SCRATCH_ROWS", 3)


@pytest.mark.parametrize(
    ("partitioned", "parts"),
    [(False, False), (True, False), (False, True), (True, True)],
    ids=["plain", "partitioned", "plain-small-parts", "partitioned-small-parts"],
)
def test_large_batches_equal_the_small_batch_path_and_duckdb(
    catalog: Any, partitioned: bool, parts: bool, request: pytest.FixtureRequest
) -> None:
    if parts:
        request.getfixturevalue("small_parts")
    lake = pdl.connect(catalog.url, catalog.data_path)
    initial = pa.table(
        {"id": list(BASE), "g": [g for g, _ in BASE.values()], "v": [v for _, v in BASE.values()]},
        schema=TABLE_SCHEMA,
    )
    for name in ("main.big", "main.small"):
        lake.create_table(name, TABLE_SCHEMA, partition_by=["g"] if partitioned else None)
        lake.append(name, initial)
    start = lake.current_snapshot_id() + 1
    want = dict(BASE)
    for batch_id, tasks in enumerate(BATCHES):
        before = {r[1]: r[0] for r in rows_of(lake, "main.big")}
        messages = apply(catalog, "main.big", 3, batch_id, tasks)
        assert staged(messages) >= 1  # the large tasks wrote their rows themselves
        assert staged(apply(catalog, "main.small", 1000, batch_id, tasks)) == 0  # all through the driver
        want = model(want, tasks)
        big = rows_of(lake, "main.big")
        assert {i: (g, v) for _, i, g, v in big} == want
        assert [r[1:] for r in big] == [r[1:] for r in rows_of(lake, "main.small")]
        assert len({r[0] for r in big}) == len(big)
        for rowid, i, _, _ in big:  # a replaced row keeps its row id (new rows' ids follow their files' order)
            if i in before:
                assert rowid == before[i]
    ours = feed(lake, "main.big", start)
    assert sorted(r[1:] for r in ours) == sorted(r[1:] for r in feed(lake, "main.small", start))
    pre = {(r, i) for r, c, i, *_ in ours if c == "update_preimage"}
    assert pre == {(r, i) for r, c, i, *_ in ours if c == "update_postimage"} and pre
    kinds = {c for _, c, *_ in ours}
    assert kinds == {"insert", "delete", "update_preimage", "update_postimage"}
    assert lake.orphan_files(older_than=dt.timedelta(0)) == []  # the rewritten files are gone
    con = open_duckdb(catalog)
    try:
        for name in ("big", "small"):
            assert sorted(con.execute(f"SELECT rowid, id, g, v FROM lake.main.{name}").fetchall()) == rows_of(
                lake, f"main.{name}"
            )
        end = lake.current_snapshot_id()
        theirs = con.execute(
            f"SELECT rowid, change_type, id, g, v FROM ducklake_table_changes('lake', 'main', 'big', {start}, {end})"
        ).fetchall()
        assert sorted(theirs) == feed(lake, "main.big", start)
    finally:
        con.close()


def test_replay_commits_nothing_and_removes_what_its_tasks_wrote(catalog: Any) -> None:
    lake = pdl.connect(catalog.url, catalog.data_path)
    lake.create_table("main.t", TABLE_SCHEMA)
    lake.append("main.t", pa.table({"id": [1, 2], "g": [0, 0], "v": ["a", "b"]}, schema=TABLE_SCHEMA))
    tasks = [[(i, 0, f"x{i}", "u", 1) for i in range(10)], [(i, 0, f"y{i}", "u", 1) for i in range(10, 20)]]
    apply(catalog, "main.t", 2, 0, tasks)
    head, rows = lake.current_snapshot_id(), rows_of(lake, "main.t")
    messages = apply(catalog, "main.t", 2, 0, tasks)  # Spark runs batch 0 again after a crash
    assert staged(messages) == 2
    assert lake.current_snapshot_id() == head and rows_of(lake, "main.t") == rows
    assert lake.orphan_files(older_than=dt.timedelta(0)) == []


def test_another_writer_between_the_tasks_and_the_commit(catalog: Any, small_parts: None) -> None:
    # the tasks pair their keys at snapshot S; before the commit another writer updates key 3 (which the batch
    # updates too), inserts key 50 (which the batch inserts) and deletes key 4 (which the batch updates): the commit
    # pairs the keys again at the newest snapshot, so key 50 is not doubled and key 3 keeps its row id
    lake = pdl.connect(catalog.url, catalog.data_path)
    lake.create_table("main.t", TABLE_SCHEMA)
    lake.append("main.t", pa.table({"id": list(range(10)), "g": [0] * 10, "v": ["old"] * 10}, schema=TABLE_SCHEMA))
    tasks = [
        [(i, 0, f"s{i}", "u", 1) for i in range(6)],
        [(50, 1, "s50", "c", 1), (7, 0, "", "d", 1), (8, 1, "s8", "u", 1)],
    ]
    w = writer(catalog, "main.t", 1)
    messages = run_tasks(w, tasks)
    assert staged(messages) == 2
    row_id_of_3 = {r[1]: r[0] for r in rows_of(lake, "main.t")}[3]
    lake.upsert("main.t", pa.table({"id": [3, 50], "g": [2, 2], "v": ["other", "other"]}, schema=TABLE_SCHEMA), on="id")
    lake.delete("main.t", [("id", "=", 4)])
    other = lake.current_snapshot_id()
    copy(w).commit(list(messages), 0)
    assert lake.current_snapshot_id() == other + 1
    got = {i: (g, v) for _, i, g, v in rows_of(lake, "main.t")}
    want = {i: (0, "old") for i in range(10) if i not in (4, 7)} | {i: (0, f"s{i}") for i in range(6)}
    want |= {50: (1, "s50"), 8: (1, "s8")}
    assert got == want  # key 4, deleted by the other writer, is inserted again by the batch
    ids = {r[1]: r[0] for r in rows_of(lake, "main.t")}
    assert ids[3] == row_id_of_3 and len(ids) == len(got)
    assert lake.orphan_files(older_than=dt.timedelta(0)) == []
    con = open_duckdb(catalog)
    try:
        assert sorted(con.execute("SELECT rowid, id, g, v FROM lake.main.t").fetchall()) == rows_of(lake, "main.t")
        kinds = dict(
            con.execute(
                f"SELECT change_type, count(*) FROM ducklake_table_changes('lake', 'main', 't', {other + 1}, "
                f"{other + 1}) GROUP BY ALL"
            ).fetchall()
        )
        # 0-3, 5 and 8 updated; 4 and 50 were written by the other writer's snapshot: 4 new again, 50 updated
        assert kinds == {"update_preimage": 7, "update_postimage": 7, "insert": 1, "delete": 1}
    finally:
        con.close()


@pytest.mark.parametrize(
    ("tasks", "error"),
    [
        ([[(i, 0, "a", "u", 1) for i in range(5)], [(4, 0, "b", "u", 1), (9, 0, "b", "u", 1)]], DuplicateKeyError),
        ([[(i, 0, "a", "u", 1) for i in range(5)], [(None, 0, "b", "u", 1), (9, 0, "b", "u", 1)]], NullKeyError),
    ],
    ids=["duplicate-key-across-tasks", "null-key"],
)
def test_bad_keys_write_nothing(catalog: Any, tasks: list[list[Row]], error: type[Exception]) -> None:
    lake = pdl.connect(catalog.url, catalog.data_path)
    lake.create_table("main.t", TABLE_SCHEMA)
    lake.append("main.t", pa.table({"id": [1], "g": [0], "v": ["a"]}, schema=TABLE_SCHEMA))
    head = lake.current_snapshot_id()
    files_before = sorted(p.name for p in Path(catalog.data_path).rglob("*.parquet"))
    w = writer(catalog, "main.t", 1, ordered=False)  # no orderBy: a key twice is an error
    messages = run_tasks(w, tasks)
    with pytest.raises(error, match="nothing was written"):
        copy(w).commit(list(messages), 0)
    assert lake.current_snapshot_id() == head
    assert sorted(p.name for p in Path(catalog.data_path).rglob("*.parquet")) == files_before


def test_a_small_task_beside_large_ones_and_a_created_table(catalog: Any) -> None:
    # the first batch creates the table (no keys to pair with yet); a task under the limit is staged by the driver
    lake = pdl.connect(catalog.url, catalog.data_path)
    tasks = [[(i, 0, f"a{i}", "c", 1) for i in range(8)], [(3, 0, "tie: the later task", "u", 1)], []]
    messages = apply(catalog, "main.new", 4, 0, tasks)
    assert [type(m.output) for m in messages] == [StagedTask, TaskOutput, TaskOutput]
    assert {i: v for _, i, _, v in rows_of(lake, "main.new")} == {i: f"a{i}" for i in range(8)} | {
        3: "tie: the later task"
    }
    assert lake.table("main.new").table_schema.names() == ["id", "g", "v"]
    assert lake.orphan_files(older_than=dt.timedelta(0)) == []


def test_commit_messages_do_not_grow_with_the_batch(sqlite_catalog: Any) -> None:
    # what Spark hands the driver's commit all at once: file names and a bucket histogram, never the keys
    lake = pdl.connect(sqlite_catalog.url, sqlite_catalog.data_path)
    lake.create_table("main.t", TABLE_SCHEMA)
    lake.append("main.t", pa.table({"id": list(range(0, 40_000, 2)), "g": [0] * 20_000, "v": ["a"] * 20_000}))
    sizes = []
    for n in (2_000, 20_000):
        w = writer(sqlite_catalog, "main.t", 10, file_rows=1_000_000)
        message = run_tasks(w, [[(i, 0, "b", "u", 1) for i in range(n)]])[0]
        sizes.append(len(pickle.dumps(message)))
        copy(w).commit([message], n)
    assert sizes[1] < sizes[0] * 1.2, sizes  # ten times the rows
    assert lake.scan("main.t").num_rows == 20_000 + 10_000
    assert lake.orphan_files(older_than=dt.timedelta(0)) == []  # the scratch files are gone too


def test_an_encrypted_lake_encrypts_the_scratch_files_too(sqlite_catalog: Any, small_parts: None) -> None:
    # the scratch files hold the table's keys: in an encrypted lake each has its own key, as the data files do
    from tests.conformance.test_encrypted_lake import assert_every_file_encrypted, duck_encrypted

    lake = pdl.connect(sqlite_catalog.url, sqlite_catalog.data_path, encrypted=True)
    lake.create_table("main.t", TABLE_SCHEMA)
    lake.append("main.t", pa.table({"id": list(range(10)), "g": [0] * 10, "v": ["old"] * 10}, schema=TABLE_SCHEMA))
    tasks = [[(i, 0, f"a{i}", "u", 1) for i in range(5, 15)], [(3, 1, "", "d", 1), (5, 1, "b5", "u", 2)]]
    w = writer(sqlite_catalog, "main.t", 1)
    messages = run_tasks(w, tasks)
    scratch_files = [s for m in messages if isinstance(m.output, StagedTask) for s in m.output.scratch]
    assert scratch_files
    for s in scratch_files:
        assert s.key is not None and Path(s.path).read_bytes()[:4] == b"PARE"
        with pytest.raises(OSError):
            pq.read_table(s.path)
    copy(w).commit(list(messages), 0)
    want = {i: "old" for i in range(10) if i != 3} | {i: f"a{i}" for i in range(5, 15)} | {5: "b5"}
    assert {i: v for _, i, _, v in rows_of(lake, "main.t")} == want
    assert not any(Path(s.path).exists() for s in scratch_files)
    assert_every_file_encrypted(sqlite_catalog)
    con = duck_encrypted(sqlite_catalog)
    try:
        assert sorted(con.execute("SELECT rowid, id, g, v FROM lake.main.t").fetchall()) == rows_of(lake, "main.t")
    finally:
        con.close()


def test_columns_named_like_the_commits_own(sqlite_catalog: Any, small_parts: None) -> None:
    # a key named like the order columns of the scratch files, a value like their keys, an orderBy named "k0"
    stream = T.StructType(
        [
            T.StructField("__o0", T.LongType()),
            T.StructField("__ducklake_key0", T.StringType()),
            T.StructField("k0", T.LongType()),
        ]
    )
    lake = pdl.connect(sqlite_catalog.url, sqlite_catalog.data_path)
    schema = pa.schema([("__o0", pa.int64()), ("__ducklake_key0", pa.string())])
    lake.create_table("main.odd", schema)
    lake.append("main.odd", pa.table({"__o0": [1, 2, 3], "__ducklake_key0": ["a", "b", "c"]}, schema=schema))
    options = {
        "catalog": sqlite_catalog.url,
        "dataPath": sqlite_catalog.data_path,
        "upsertOn": "__o0",
        "orderBy": "k0",
        "app_id": "app",
        "data_inlining_row_limit": "1",
    }
    w = DuckLakeStreamWriter(LakeConfig.resolve(options), "main.odd", options, stream)
    tasks = [
        pa.record_batch({"__o0": [2, 4, 5], "__ducklake_key0": ["x2", "x4", "x5"], "k0": [9, 1, 1]}),
        pa.record_batch({"__o0": [2, 4], "__ducklake_key0": ["y2", "y4"], "k0": [1, 1]}),
    ]
    messages = [copy(w).write(iter([b])) for b in tasks]
    assert staged(messages) == 2
    copy(w).commit(list[Any](messages), 0)
    t = lake.scan("main.odd")
    got = dict(zip(t.column("__o0").to_pylist(), t.column("__ducklake_key0").to_pylist(), strict=True))
    assert got == {1: "a", 2: "x2", 3: "c", 4: "y4", 5: "x5"}  # 2: the higher k0; 4: a tie, the later task
    assert lake.table("main.odd").table_schema.names() == ["__o0", "__ducklake_key0"]
