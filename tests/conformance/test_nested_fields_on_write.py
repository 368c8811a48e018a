"""Struct fields on write: never a value dropped or nulled.

A struct field the table lacks, or one whose name differs only in case, is a ``SchemaMismatchError`` naming the field
(at any depth: inside lists and maps too), with nothing written; ``lake.add_column(t, ("s", "c"), type)`` adds a
nested field as DuckDB's ``ALTER TABLE t ADD COLUMN s.c`` does, and DuckDB reads the result exactly.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest
from sqlalchemy import create_engine, text

import pyspark_ducklake as pdl
from pyspark_ducklake.exceptions import NoSuchColumnError, SchemaMismatchError
from tests.support.bad_inputs import expect_bad_input
from tests.support.compare import canonical_rows
from tests.support.duck import open_duckdb

S = pa.struct([("a", pa.int64()), ("b", pa.string())])
SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("s", S),
        ("l", pa.list_(S)),
        ("m", pa.map_(pa.string(), S)),
    ]
)


@pytest.fixture(params=[0, 10], ids=["parquet", "inlined"])
def lake(request: pytest.FixtureRequest, sqlite_catalog: Any) -> pdl.Lake:
    lake = pdl.connect(sqlite_catalog.url, sqlite_catalog.data_path, data_inlining_row_limit=request.param)
    lake.create_table("main.t", SCHEMA)
    lake.append("main.t", pa.table({"id": [0], "s": [{"a": 0, "b": "x"}]}))
    return lake


def with_extra(field: str) -> pa.StructType:
    return pa.struct([("a", pa.int64()), ("b", pa.string()), (field, pa.string())])


@pytest.mark.parametrize(
    ("column", "data", "named"),
    [
        ("s", pa.array([{"a": 1, "b": "y", "c": "lost?"}], with_extra("c")), "s.c"),
        ("l", pa.array([[{"a": 1, "b": "y", "c": "lost?"}]], pa.list_(with_extra("c"))), "l.element.c"),
        (
            "m",
            pa.array([[("k", {"a": 1, "b": "y", "c": "lost?"})]], pa.map_(pa.string(), with_extra("c"))),
            "m.value.c",
        ),
    ],
    ids=["struct", "list-of-struct", "map-of-struct"],
)
def test_an_extra_struct_field_is_refused_not_dropped(lake: pdl.Lake, column: str, data: pa.Array, named: str) -> None:
    with expect_bad_input("struct-field-unknown", lake) as err:
        lake.append("main.t", pa.table({"id": [1], column: data}))
    assert repr(named) in str(err.value) and repr(tuple(named.split("."))) in str(err.value)


def test_a_field_or_column_differing_only_in_case_is_refused_not_nulled(lake: pdl.Lake) -> None:
    upper_b = pa.struct([("a", pa.int64()), ("B", pa.string())])
    with expect_bad_input("name-case-only", lake) as err:
        lake.append("main.t", pa.table({"id": [1], "s": pa.array([{"a": 1, "B": "kept?"}], upper_b)}))
    assert "'s.B'" in str(err.value) and "'s.b'" in str(err.value)
    with expect_bad_input("name-case-only", lake):
        lake.append("main.t", pa.table({"ID": [1]}))
    with expect_bad_input("name-case-only", lake):
        lake.append(
            "main.t", pa.table({"id": [1], "l": pa.array([[{"A": 1}]], pa.list_(pa.struct([("A", pa.int64())])))})
        )


def test_a_nested_leaf_that_does_not_convert_losslessly_is_refused(lake: pdl.Lake) -> None:
    text_a = pa.struct([("a", pa.string())])
    with expect_bad_input("schema-mismatch-type", lake):
        lake.append("main.t", pa.table({"id": [1], "s": pa.array([{"a": "12"}], text_a)}))
    with pytest.raises(SchemaMismatchError, match=r"'l' of main\.t has type list"):
        lake.append("main.t", pa.table({"id": [1], "l": pa.array([{"a": 1}], pa.struct([("a", pa.int64())]))}))


def test_missing_fields_and_reordered_fields_keep_every_value(lake: pdl.Lake) -> None:
    reordered = pa.struct([("b", pa.string()), ("a", pa.int64())])
    lake.append(
        "main.t",
        pa.table(
            {
                "id": [1, 2],
                "s": pa.array([{"b": "r", "a": 5}, None], reordered),
                "l": pa.array([[{"a": 7}], None], pa.list_(pa.struct([("a", pa.int64())]))),
            }
        ),
    )
    got = {r["id"]: r for r in lake.scan("main.t").to_pylist()}
    assert got[1]["s"] == {"a": 5, "b": "r"} and got[2]["s"] is None
    assert got[1]["l"] == [{"a": 7, "b": None}] and got[2]["l"] is None


def test_add_column_adds_nested_fields_as_duckdb_does(catalog: Any) -> None:
    lake = pdl.connect(catalog.url, catalog.data_path, data_inlining_row_limit=0)
    lake.create_table("main.t", SCHEMA)
    lake.append("main.t", pa.table({"id": [0], "s": [{"a": 0, "b": "x"}], "l": [[{"a": 1, "b": "y"}]]}))
    lake.add_column("main.t", ("s", "c"), pa.string())
    lake.add_column("main.t", ["l", "element", "c"], pa.int32(), default=7)
    lake.add_column("main.t", ("m", "value", "c"), pa.string())
    with pytest.raises(SchemaMismatchError, match="already exists"):
        lake.add_column("main.t", ("s", "C"), pa.string())
    with pytest.raises(NoSuchColumnError):
        lake.add_column("main.t", ("nope", "c"), pa.string())
    with pytest.raises(SchemaMismatchError, match="not a struct"):
        lake.add_column("main.t", ("id", "c"), pa.string())
    row = {
        "id": [1],
        "s": pa.array([{"a": 1, "b": "y", "c": "kept"}], with_extra("c")),
        "l": pa.array(
            [[{"a": 2, "b": "z", "c": 3}]],
            pa.list_(pa.struct([("a", pa.int64()), ("b", pa.string()), ("c", pa.int32())])),
        ),
        "m": pa.array([[("k", {"a": 4, "b": "w", "c": "v"})]], pa.map_(pa.string(), with_extra("c"))),
    }
    lake.append("main.t", pa.table(row))
    ours = lake.scan("main.t")
    assert {r["id"]: r for r in ours.to_pylist()}[1]["s"] == {"a": 1, "b": "y", "c": "kept"}
    # the old row reads the new list field's default, as DuckDB does
    assert {r["id"]: r for r in ours.to_pylist()}[0]["l"] == [{"a": 1, "b": "y", "c": 7}]
    con = open_duckdb(catalog)
    try:
        duck = con.execute("SELECT * FROM lake.main.t").to_arrow_table()
        assert canonical_rows(duck) == canonical_rows(ours)
        con.execute("ALTER TABLE lake.main.t ADD COLUMN s.d INTEGER")
        con.execute("INSERT INTO lake.main.t (id, s) VALUES (2, {'a': 3, 'b': 'q', 'c': 'r', 'd': 4})")
        duck = con.execute("SELECT * FROM lake.main.t").to_arrow_table()
    finally:
        con.close()
    assert canonical_rows(lake.scan("main.t")) == canonical_rows(duck)
    engine = create_engine(catalog.url)
    with engine.connect() as conn:
        rows = conn.execute(
            text(
                "SELECT c.column_name, p.column_name FROM ducklake_column c JOIN ducklake_column p "
                "ON p.column_id = c.parent_column AND p.table_id = c.table_id AND p.end_snapshot IS NULL "
                "WHERE c.column_name IN ('c', 'd') AND c.end_snapshot IS NULL ORDER BY c.column_id"
            )
        ).all()
    engine.dispose()
    assert [tuple(r) for r in rows] == [("c", "s"), ("c", "element"), ("c", "value"), ("d", "s")]
