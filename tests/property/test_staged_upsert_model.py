"""Random large upsert batches through ``writeStream``'s staged path (random tasks, keys in several of them, deletes,
ties, tiny bucket ranges and scratch files, a table the first batch creates) against a dict model after every batch,
and at the end against DuckDB's read of the lake and of its change feed's update pairs."""

from __future__ import annotations

import pickle
import tempfile
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st
from pyspark.sql import types as T

import pyspark_ducklake as pdl
from pyspark_ducklake.exceptions import NoSuchTableError
from pyspark_ducklake.spark.lake_config import LakeConfig
from pyspark_ducklake.streaming.write_stream import DuckLakeStreamWriter
from pyspark_ducklake.table import scratch, staged_upsert
from tests.support.catalogs import sqlite_location
from tests.support.duck import open_duckdb
from tests.support.hostile import examples

SCHEMA = T.StructType(
    [
        T.StructField("id", T.LongType()),
        T.StructField("v", T.StringType()),
        T.StructField("op", T.StringType()),
        T.StructField("lsn", T.LongType()),
    ]
)
ROW = st.tuples(
    st.integers(0, 15),  # key
    st.one_of(st.none(), st.text(alphabet="ab é'\"[]/.", max_size=3)),  # value
    st.sampled_from(["u", "u", "d"]),  # op
    st.integers(0, 2),  # lsn: ties go to the later task
)
TASKS = st.lists(st.lists(ROW, max_size=8), min_size=1, max_size=4)


def model(state: dict[int, str | None], tasks: list[list[tuple[Any, ...]]]) -> None:
    last: dict[int, tuple[int, str | None, bool]] = {}
    for rows in tasks:
        winners: dict[int, tuple[int, str | None, bool]] = {}
        for key, v, op, lsn in rows:  # inside a task the later row wins a tie, as across tasks
            if key not in winners or lsn >= winners[key][0]:
                winners[key] = (lsn, v, op == "d")
        for key, w in winners.items():
            if key not in last or w[0] >= last[key][0]:
                last[key] = w
    for key, (_, v, gone) in last.items():
        if gone:
            state.pop(key, None)
        else:
            state[key] = v


def commit(location: Any, batch_id: int, tasks: list[list[tuple[Any, ...]]]) -> None:
    options = {
        "catalog": location.url,
        "dataPath": location.data_path,
        "upsertOn": "id",
        "deleteWhen": "op = 'd'",
        "orderBy": "lsn",
        "app_id": "app",
        "data_inlining_row_limit": "1",
        "target_file_rows": "3",
    }
    w = DuckLakeStreamWriter(LakeConfig.resolve(options), "main.t", options, SCHEMA)
    messages = []
    for rows in tasks:
        cols = list(zip(*rows, strict=True)) if rows else [[], [], [], []]
        types = [pa.int64(), pa.string(), pa.string(), pa.int64()]
        batch = pa.record_batch([pa.array(list(c), t) for c, t in zip(cols, types, strict=True)], names=SCHEMA.names)
        messages.append(pickle.loads(pickle.dumps(w)).write(iter([batch])))
    pickle.loads(pickle.dumps(w)).commit(messages, batch_id)


def exists(lake: pdl.Lake) -> bool:
    try:
        lake.table("main.t")
    except NoSuchTableError:
        return False
    return True


@pytest.fixture(scope="module")
def small_parts() -> Any:
    with pytest.MonkeyPatch.context() as m:
        m.setattr(staged_upsert, "RANGE_KEYS", 4)
        m.setattr(scratch, "SCRATCH_ROWS", 2)
        yield


# 5 examples under the ci profile, 250 under make fuzz
@settings(
    max_examples=examples(0.05),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(batches=st.lists(TASKS, min_size=1, max_size=4), created=st.booleans())
def test_staged_upserts_equal_a_dict_model_and_duckdb(
    small_parts: Any, batches: list[list[list[tuple[Any, ...]]]], created: bool
) -> None:
    with tempfile.TemporaryDirectory() as folder:
        location = sqlite_location(Path(folder))
        lake = pdl.connect(location.url, location.data_path)
        if created:  # else the first batch with rows creates it, with no keys to pair with
            lake.create_table("main.t", pa.schema([("id", pa.int64()), ("v", pa.string())]))
        state: dict[int, str | None] = {}
        for batch_id, tasks in enumerate(batches):
            note(f"batch {batch_id}: {tasks}")
            commit(location, batch_id, tasks)
            model(state, tasks)
            if exists(lake):
                t = lake.scan("main.t", columns=["id", "v"])
                got = dict(zip(t.column("id").to_pylist(), t.column("v").to_pylist(), strict=True))
                assert got == state and t.num_rows == len(state)
        if not exists(lake):
            return
        ours = sorted(lake.scan("main.t", columns=["rowid", "id", "v"]).to_pylist(), key=lambda r: r["rowid"])
        end = lake.current_snapshot_id()
        con = open_duckdb(location)
        try:
            theirs = con.execute("SELECT rowid, id, v FROM lake.main.t ORDER BY rowid").fetchall()
            assert theirs == [(r["rowid"], r["id"], r["v"]) for r in ours]
            kinds = con.execute(
                f"SELECT rowid, change_type, count(*) FROM ducklake_table_changes('lake', 'main', 't', 0, {end}) "
                "WHERE change_type LIKE 'update%' GROUP BY ALL"
            ).fetchall()
            pre = {(r, n) for r, c, n in kinds if c == "update_preimage"}
            assert pre == {(r, n) for r, c, n in kinds if c == "update_postimage"}
        finally:
            con.close()
