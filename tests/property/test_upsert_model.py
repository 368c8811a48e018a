"""Random upsert batches (deletes, duplicate keys resolved by ``order_by``, keys old and new) against a Python dict
model after every batch, and at the end against DuckDB's read and DuckDB's ``table_changes`` of our lake."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import pyarrow as pa
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

import pyspark_ducklake as pdl
from tests.support.catalogs import sqlite_location
from tests.support.duck import open_duckdb
from tests.support.hostile import examples

ROW = st.tuples(
    st.integers(0, 12),  # key
    st.one_of(st.none(), st.text(alphabet="abcXYZ é", max_size=4)),  # value
    st.booleans(),  # delete
    st.integers(0, 3),  # lsn: ties resolved by position
)
BATCHES = st.lists(st.lists(ROW, min_size=1, max_size=12), min_size=1, max_size=5)


def apply_model(model: dict[int, str | None], rows: list[tuple[int, str | None, bool, int]]) -> None:
    last: dict[int, tuple[int, str | None, bool]] = {}
    for key, v, d, lsn in rows:
        if key not in last or lsn >= last[key][0]:
            last[key] = (lsn, v, d)
    for key, (_, v, d) in last.items():
        if d:
            model.pop(key, None)
        else:
            model[key] = v


# 6 examples under the ci profile, 300 under make fuzz (it was a fixed 12 under both); the model is checked after
# every batch, each example exercising up to 5 upserts, a flush and DuckDB's read and feed
@settings(max_examples=examples(0.06), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batches=BATCHES, limit=st.sampled_from([0, 4, 100]), flush_after=st.integers(0, 5))
def test_upserts_equal_a_dict_model_and_duckdb(
    batches: list[list[tuple[int, str | None, bool, int]]], limit: int, flush_after: int
) -> None:
    with tempfile.TemporaryDirectory() as folder:
        location = sqlite_location(Path(folder))
        lake = pdl.connect(location.url, location.data_path, data_inlining_row_limit=limit)
        schema = pa.schema([("id", pa.int64()), ("v", pa.string())])
        lake.create_table("main.t", schema)
        model: dict[int, str | None] = {}
        start = lake.current_snapshot_id()
        for n, rows in enumerate(batches):
            keys, vs, ds, lsns = (list(x) for x in zip(*rows, strict=True))
            data = pa.table({"id": keys, "v": pa.array(vs, pa.string()), "gone": ds, "lsn": lsns})
            lake.upsert("main.t", data, on=["id"], delete_column="gone", order_by="lsn")
            apply_model(model, rows)
            if n == flush_after:
                lake.flush_inlined_data("main.t")
            got = {r["id"]: r["v"] for r in lake.scan("main.t").to_pylist()}
            assert lake.scan("main.t").num_rows == len(got)  # one row per key
            assert got == model
        end = lake.current_snapshot_id()
        ours = lake.table_changes("main.t", start, end)
        feed = sorted(
            zip(
                *(ours.column(c).to_pylist() for c in ("_snapshot_id", "_rowid", "_change_type", "id", "v")),
                strict=True,
            ),
            key=repr,
        )
        con = open_duckdb(location)
        try:
            read: dict[Any, Any] = dict(con.execute("SELECT id, v FROM lake.t").fetchall())
            assert read == model
            if end > start:
                want = con.execute(
                    f"SELECT snapshot_id, rowid, change_type, id, v FROM ducklake_table_changes('lake', 'main', 't', "
                    f"{start}, {end})"
                ).fetchall()
                note(f"ours {feed}")
                assert feed == sorted(want, key=repr)
        finally:
            con.close()
