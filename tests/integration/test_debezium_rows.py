"""``pdl.debezium`` on hand-made envelopes: both converter layouts, what it drops, and what it refuses (the real
connector's events are in test_debezium_capture.py)."""

from __future__ import annotations

import json
from typing import Any

import pytest

import pyspark_ducklake as pdl
from pyspark_ducklake.exceptions import InvalidOptionError

SCHEMA = "id INT, name STRING, day DATE"


def event(op: str, before: dict[str, Any] | None, after: dict[str, Any] | None, lsn: int) -> dict[str, Any]:
    return {"before": before, "after": after, "op": op, "source": {"lsn": lsn, "txId": 1}, "ts_ms": 0}


def frame(spark: Any, values: list[Any]) -> Any:
    return spark.createDataFrame([(None if v is None else json.dumps(v),) for v in values], "value STRING")


def test_both_layouts_tombstones_and_other_ops(spark: Any) -> None:
    values = [
        event("r", None, {"id": 1, "name": "a", "day": 0}, 10),
        {"schema": {"type": "struct"}, "payload": event("u", {"id": 1}, {"id": 1, "name": "b", "day": -1}, 11)},
        event("d", {"id": 1, "name": "b", "day": -1}, None, 12),
        None,  # the delete's tombstone
        event("t", None, None, 13),  # a truncate: not a row
        event("m", None, None, 14),  # a logical decoding message
    ]
    rows = [tuple(r) for r in pdl.debezium(frame(spark, values), SCHEMA).orderBy("lsn").collect()]
    import datetime as dt

    epoch = dt.date(1970, 1, 1)
    assert rows == [
        (1, "a", epoch, "r", 10),
        (1, "b", epoch - dt.timedelta(days=1), "u", 11),
        (1, "b", epoch - dt.timedelta(days=1), "d", 12),
    ]


def test_renamed_change_columns(spark: Any) -> None:
    df = pdl.debezium(frame(spark, [event("c", None, {"id": 1}, 5)]), "id INT, op STRING", op_column="_op")
    assert df.columns == ["id", "op", "_op", "lsn"]
    assert [tuple(r) for r in df.collect()] == [(1, None, "c", 5)]


@pytest.mark.parametrize(
    ("schema", "options", "message"),
    [
        ("id INT, op STRING", {}, "pass op_column="),
        ("id INT, LSN BIGINT", {}, "pass order_column="),
        (SCHEMA, {"timestamp_unit": "ns"}, "timestamp_unit must be one of us, ms, s"),
        (SCHEMA, {"value_column": "payload"}, "value_column 'payload' is not a column"),
        ("id INT, days ARRAY<DATE>", {}, "column 'days': a date inside a nested type"),
        ("id INT, s STRUCT<at: TIMESTAMP>", {}, "column 's.at': a timestamp inside a nested type"),
        ("id INT", {"order_colum": "x"}, "unknown argument 'order_colum' for debezium(); did you mean 'order_column'"),
    ],
)
def test_refused(spark: Any, schema: str, options: dict[str, str], message: str) -> None:
    with pytest.raises(InvalidOptionError, match=message.replace("(", r"\(").replace(")", r"\)")):
        pdl.debezium(frame(spark, []), schema, **options)


def test_time_refused(spark: Any) -> None:
    from pyspark.sql import types as T

    schema = T.StructType([T.StructField("id", T.IntegerType()), T.StructField("t", T.TimeType(6))])
    with pytest.raises(InvalidOptionError, match="TIME is not decoded"):
        pdl.debezium(frame(spark, []), schema)
