"""The executor side of a large upsert batch: replaced rows keep the planned row ids, deleted keys are dropped."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

import pyspark_ducklake as pdl
from pyspark_ducklake.table.microbatch import BatchPlan, to_ipc
from pyspark_ducklake.table.microbatch_upsert import DELETE_FLAG, ROW_ID, UpsertTaskPlan, write_upsert_task
from pyspark_ducklake.table.upsert import INTERNAL_ROW_ID, key_table


def test_replaced_rows_carry_row_ids_and_deletes_are_dropped(tmp_path: Path) -> None:
    lake = pdl.connect(f"sqlite:///{tmp_path / 'c.sqlite'}", str(tmp_path / "data") + "/")
    lake.create_table("main.t", pa.schema([("id", pa.int64()), ("x", pa.float64())]))
    schema = lake.table("main.t").table_schema
    plan = BatchPlan("main.t", str(tmp_path / "data") + "/main/t/", schema, (), 0, 2)
    replaced = pa.table({"id": [1, 3, 5], "x": [0.0, 0.0, 0.0]})
    matches = key_table(replaced, ["id"]).append_column(ROW_ID, pa.array([100, 102, 104], pa.int64()))
    task = UpsertTaskPlan(plan, ("id",), to_ipc(matches))
    batches = [
        pa.record_batch({"id": [1, 2, 3], "x": [1.5, 2.5, None], DELETE_FLAG: [False, True, None]}),
        pa.record_batch({"id": [4, 5, 6], "x": [4.5, 5.5, 6.5], DELETE_FLAG: [False, True, False]}),
    ]
    out = write_upsert_task(task, iter(batches))
    assert out.rows == 4 and out.ipc is None
    read = [pq.read_table(f.written.path) for f in out.files]
    with_ids = [t for t in read if INTERNAL_ROW_ID in t.column_names]
    plain = [t for t in read if INTERNAL_ROW_ID not in t.column_names]
    assert [t.to_pydict() for t in with_ids] == [{"id": [1, 3], "x": [1.5, None], INTERNAL_ROW_ID: [100, 102]}]
    assert sorted(i for t in plain for i in t.column("id").to_pylist()) == [4, 6]  # 2 and 5 deleted
    assert all(t.num_rows <= 2 for t in read)  # target_file_rows=2
    field = with_ids[0].schema.field(INTERNAL_ROW_ID)
    assert field.metadata[b"PARQUET:field_id"] == b"2147483540"  # DuckDB's row id field id


def test_float_keys_match_as_duckdb_compares_them(tmp_path: Path) -> None:
    lake = pdl.connect(f"sqlite:///{tmp_path / 'c.sqlite'}", str(tmp_path / "data") + "/")
    lake.create_table("main.f", pa.schema([("k", pa.float64()), ("v", pa.string())]))
    plan = BatchPlan("main.f", str(tmp_path / "data") + "/main/f/", lake.table("main.f").table_schema, (), 0, 100)
    existing = pa.table({"k": [0.0, float("nan")], "v": ["a", "b"]})
    matches = key_table(existing, ["k"]).append_column(ROW_ID, pa.array([7, 8], pa.int64()))
    rows = pa.record_batch({"k": [-0.0, float("nan"), 1.0], "v": ["x", "y", "z"]})
    out = write_upsert_task(UpsertTaskPlan(plan, ("k",), to_ipc(matches)), iter([rows]))
    tables = [pq.read_table(f.written.path) for f in out.files]
    ids = [t.column(INTERNAL_ROW_ID).to_pylist() for t in tables if INTERNAL_ROW_ID in t.column_names]
    assert ids == [[7, 8]]  # -0.0 matches 0.0, NaN matches NaN
