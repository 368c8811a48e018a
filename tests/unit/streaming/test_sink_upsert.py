"""Which batch columns are the sink's control columns (named by delete_when, or order_by columns)."""

from __future__ import annotations

from pyspark_ducklake.streaming.sink_upsert import control_columns, quoted
from pyspark_ducklake.table.microbatch import UpsertSpec

COLUMNS = ["id", "v", "op", "lsn", "Kind", "a.b", "note"]


def test_columns_named_outside_string_literals() -> None:
    spec = UpsertSpec(("id",), "OP = 'd' AND note <> 'lsn' OR `a.b` > 1 OR \"kind\" = 'x' OR v = 'it''s op'", ("lsn",))
    assert control_columns(COLUMNS, spec) == {"op", "note", "a.b", "lsn", "v"}


def test_without_delete_when_only_order_by() -> None:
    assert control_columns(COLUMNS, UpsertSpec(("id",), None, ("lsn", "Kind"))) == {"lsn", "Kind"}
    assert control_columns(COLUMNS, UpsertSpec(("id",))) == set()


def test_quoted_names() -> None:
    assert quoted("a.b") == "`a.b`"
    assert quoted("we`ird") == "`we``ird`"
