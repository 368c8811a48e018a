"""writeStream upserts without Spark: the options checked against the stream's columns, the columns stored, what a
task hands to the commit, and the kinds of Spark columns ``deleteWhen`` compares."""

from __future__ import annotations

import pickle

import pyarrow as pa
import pytest
from pyspark.sql import types as T

from pyspark_ducklake.exceptions import InvalidOptionError, NoSuchColumnError
from pyspark_ducklake.options import Entry, check_options
from pyspark_ducklake.streaming.write_stream import sink_settings
from pyspark_ducklake.streaming.write_stream_upsert import spark_kind, stream_upsert, task_rows
from pyspark_ducklake.table.microbatch import UpsertSpec
from pyspark_ducklake.table.microbatch_upsert import DELETE_FLAG

KINDS = {"id": "int64", "v": "string", "op": "string", "lsn": "int64", "note": "string"}


def test_stored_columns_leave_out_what_only_delete_when_and_order_by_use() -> None:
    up = stream_upsert(UpsertSpec(("id",), "OP = 'd' AND `note` IS NOT NULL OR id < 0", ("lsn",)), KINDS)
    assert up.control == {"op", "note", "lsn"}  # never the key, though deleteWhen reads it
    new = up.for_table(None)  # a table the first batch creates
    assert new.stored == ("id", "v") and new.order_only == ("lsn",)
    kept = up.for_table(["id", "v", "lsn"])  # a table that has lsn keeps it
    assert kept.stored == ("id", "v", "lsn") and kept.order_only == ()


def test_task_keeps_the_rows_and_delete_flags_the_commit_needs() -> None:
    up = stream_upsert(UpsertSpec(("id",), "op = 'd'", ("lsn",)), KINDS).for_table(None)
    up = pickle.loads(pickle.dumps(up))  # as the executors get it
    batch = pa.record_batch(
        {
            "id": pa.array([1, 2, 3], pa.int64()),
            "v": ["a", None, "c"],
            "op": ["u", "d", None],
            "lsn": pa.array([5, 6, 7], pa.int64()),
            "note": ["x", "y", "z"],
        }
    )
    rows = task_rows(up, [batch.slice(0, 0), batch.slice(0, 2), batch.slice(2)])
    assert rows is not None and rows.num_rows == 3
    assert rows.column_names == ["id", "v", "note", "lsn", DELETE_FLAG]  # op is only read by deleteWhen
    assert rows.column(DELETE_FLAG).to_pylist() == [False, True, False]  # NULL counts as false
    assert task_rows(up, []) is None


def test_task_keeps_the_last_row_of_each_key_by_order_by() -> None:
    # fewer rows to the driver, the same winners: the last by lsn, ties to the later row, NULL lsn first
    up = stream_upsert(UpsertSpec(("id",), "op = 'd'", ("lsn",)), KINDS).for_table(["id", "v"])
    ids = [1, 2, 1, 1, 3, 2]
    lsns = [5, None, 7, 7, 1, 0]
    batch = pa.record_batch(
        {
            "id": pa.array(ids, pa.int64()),
            "v": ["a", "b", "c", "d", "e", "f"],
            "op": ["u", "u", "d", "u", "u", "u"],
            "lsn": pa.array(lsns, pa.int64()),
            "note": [""] * 6,
        }
    )
    rows = task_rows(up, [batch])
    assert rows is not None
    assert rows.column("v").to_pylist() == ["d", "e", "f"]
    assert rows.column(DELETE_FLAG).to_pylist() == [False, False, False]
    with_null_key = pa.record_batch({**{n: batch.column(n) for n in batch.schema.names}, "id": [1, None, 1, 1, 3, 2]})
    kept = task_rows(up, [with_null_key])
    assert kept is not None and kept.num_rows == 6  # kept whole: the commit refuses NULL keys
    plain = stream_upsert(UpsertSpec(("id",), "op = 'd'"), KINDS).for_table(["id", "v"])
    whole = task_rows(plain, [batch])
    assert whole is not None and whole.num_rows == 6  # duplicates without orderBy: the commit refuses them


def test_columns_are_checked_when_the_query_starts() -> None:
    with pytest.raises(NoSuchColumnError, match="upsertOn column 'ID' is not in the stream; did you mean 'id'"):
        stream_upsert(UpsertSpec(("ID",)), KINDS)
    with pytest.raises(NoSuchColumnError, match=r"orderBy column 'lssn'.*did you mean 'lsn'"):
        stream_upsert(UpsertSpec(("id",), None, ("lssn",)), KINDS)
    with pytest.raises(InvalidOptionError, match=r"option deleteWhen 'opp = 1'.*did you mean 'op'"):
        stream_upsert(UpsertSpec(("id",), "opp = 1"), KINDS)


def test_upsert_options_are_writestream_options() -> None:
    parsed = check_options({"upsertOn": "id, k", "deletewhen": "op = 'd'", "ORDERBY": "lsn"}, Entry.STREAM_WRITE)
    assert parsed == {"upsert_on": ("id", "k"), "delete_when": "op = 'd'", "order_by": ("lsn",)}
    settings = sink_settings({"upsertOn": "id", "deleteWhen": "op = 'd'"}, None)
    assert settings.upsert == UpsertSpec(("id",), "op = 'd'")
    with pytest.raises(InvalidOptionError, match="give upsertOn"):
        sink_settings({"orderBy": "lsn"}, None)
    with pytest.raises(InvalidOptionError, match="leave it out to delete nothing"):
        sink_settings({"upsertOn": "id", "deleteWhen": "False"}, None)


@pytest.mark.parametrize(
    ("data_type", "kind"),
    [
        (T.ByteType(), "int8"),
        (T.ShortType(), "int16"),
        (T.IntegerType(), "int32"),
        (T.LongType(), "int64"),
        (T.FloatType(), "float32"),
        (T.DoubleType(), "float64"),
        (T.BooleanType(), "bool"),
        (T.StringType(), "string"),
        (T.StringType("UTF8_LCASE"), "other"),  # another collation compares otherwise
        (T.DecimalType(10, 2), "other"),
        (T.DateType(), "other"),
        (T.ArrayType(T.StringType()), "other"),
    ],
)
def test_spark_kinds(data_type: T.DataType, kind: str) -> None:
    assert spark_kind(data_type) == kind
