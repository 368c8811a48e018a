"""Nested values with hostile strings, inlined by us, read back exactly by us and by DuckDB, before and after a flush.

The property-based version is ``tests/property/test_nested_values.py``; these are its known counterexamples, on both
catalog backends (inlined values live in the catalog database): the shapes inlining keeps as columns of one table,
the ones it cannot keep one test each (one of them sends its whole batch to Parquet).
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

import pyspark_ducklake as pdl
from pyspark_ducklake.catalog.inlined_codec import python_to_arrow
from pyspark_ducklake.catalog.types import columns_from_arrow
from tests.support.bad_inputs import accepted_input
from tests.support.catalogs import CatalogLocation
from tests.support.compare import canonical_rows
from tests.support.duck import open_duckdb

SHAPES: list[tuple[str, pa.DataType, list[Any]]] = [
    ("struct-map-brace-key", pa.struct([("m", pa.map_(pa.string(), pa.int32()))]), [{"m": [("a}", 1)]}]),
    ("list-list-bracket", pa.list_(pa.list_(pa.string())), [[["]"]], [["[", "]", "]]"]]]),
    (
        "map-struct-brace-and-quote",
        pa.map_(pa.string(), pa.struct([("g", pa.string())])),
        [[("a}", {"g": "x"}), ("\\'", {"g": "y'"})], [("}", {"g": "'}"}), ("'", {"g": "\\"})]],
    ),
    ("map-two-entries-one-key", pa.map_(pa.string(), pa.list_(pa.string())), [[("k", ["v}"]), ("w", ["']"])]]),
    ("struct-struct-quote", pa.struct([("s", pa.struct([("t", pa.string())]))]), [{"s": {"t": "it's }"}}]),
    ("list-struct-backslash", pa.list_(pa.struct([("v", pa.string())])), [[{"v": "x\\"}, {"v": "\\'"}]]),
    ("map-backslash-key", pa.map_(pa.string(), pa.string()), [[("a\\", "x,y}"), ("b", "=")]]),
]


def _table(dtype: pa.DataType, values: list[Any]) -> pa.Table:
    schema = pa.schema([("id", pa.int64()), ("c", dtype)])
    column = columns_from_arrow(schema)[1]
    return pa.table({"id": pa.array(range(len(values)), pa.int64()), "c": python_to_arrow(column, values)})


def _read_everywhere(catalog: CatalogLocation, lake: pdl.Lake, expected: list[tuple[Any, ...]]) -> None:
    assert canonical_rows(lake.scan("main.t")) == expected
    con = open_duckdb(catalog)
    try:
        assert canonical_rows(con.execute("SELECT * FROM lake.main.t").to_arrow_table()) == expected
    finally:
        con.close()


def test_inlined_nested_strings_read_back_exactly(catalog: CatalogLocation) -> None:
    """Every shape of SHAPES as a column of one table (shorter columns padded with NULL rows): one inlined insert,
    read back by us and DuckDB, flushed, read again. One table instead of one per shape: inlining encodes each
    column's values on their own, and a mismatch names the column (the shape) in the comparison below."""
    longest = max(len(values) for _, _, values in SHAPES)
    columns = {"id": pa.array(range(longest), pa.int64())}
    for i, (_, dtype, values) in enumerate(SHAPES):
        padded = [*values, *([None] * (longest - len(values)))]
        columns[f"c{i}"] = _table(dtype, padded).column("c")
    data = pa.table(columns)
    with pdl.connect(catalog.url, catalog.data_path) as lake:
        lake.create_table("main.t", data.schema)
        lake.append("main.t", data)
        assert lake.snapshots()[-1].changes_made.startswith("inlined_insert")
        for flushed in (False, True):
            if flushed:
                assert lake.flush_inlined_data("main.t") is not None
            ours = lake.scan("main.t")
            con = open_duckdb(catalog)
            try:
                duck = con.execute("SELECT * FROM lake.main.t").to_arrow_table()
            finally:
                con.close()
            for i, (name, _, _) in enumerate(SHAPES):
                expected = canonical_rows(data.select(["id", f"c{i}"]))
                assert canonical_rows(ours.select(["id", f"c{i}"])) == expected, (name, flushed)
                assert canonical_rows(duck.select(["id", f"c{i}"])) == expected, (name, flushed)


# Values no inlined text can give back to DuckDB exactly: the batch goes to Parquet instead, kept exactly.
TO_PARQUET: list[tuple[str, str, pa.DataType, list[Any]]] = [
    ("nul-in-nested-string", "postgres", pa.list_(pa.string()), [["a\x00b", "c"]]),
    ("nul-in-struct-in-map", "postgres", pa.map_(pa.string(), pa.struct([("s", pa.string())])), [[("\x00", None)]]),
    ("json-list-not-minified", "both", pa.list_(pa.json_()), [['{"a": 1}', "[1, 2]"]]),
    ("json-list-null-element", "both", pa.struct([("j", pa.list_(pa.json_()))]), [{"j": ["1", None]}]),
    ("json-list-float", "both", pa.list_(pa.json_()), [["1e2"]]),
]


@pytest.mark.parametrize(("name", "where", "dtype", "values"), TO_PARQUET, ids=[s[0] for s in TO_PARQUET])
def test_values_inlining_cannot_keep_go_to_parquet(
    catalog: CatalogLocation, name: str, where: str, dtype: pa.DataType, values: list[Any]
) -> None:
    accepted_input("inlined-nested-not-expressible")
    data = _table(dtype, values)
    expected = canonical_rows(data)
    with pdl.connect(catalog.url, catalog.data_path) as lake:
        lake.create_table("main.t", data.schema)
        lake.append("main.t", data)
        changes = lake.snapshots()[-1].changes_made
        if where in ("both", catalog.backend):
            assert changes == f"inserted_into_table:{lake.table('main.t').table_id}"
        else:
            assert changes is not None and changes.startswith("inlined_insert")
        _read_everywhere(catalog, lake, expected)
        lake.overwrite("main.t", data)
        _read_everywhere(catalog, lake, expected)


def _stats(url: str) -> list[tuple[Any, ...]]:
    import sqlalchemy as sa

    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            files = conn.execute(
                sa.text("SELECT column_id, min_value, max_value FROM ducklake_file_column_stats ORDER BY 1, 2")
            ).fetchall()
            table = conn.execute(
                sa.text("SELECT column_id, min_value, max_value FROM ducklake_table_column_stats ORDER BY 1")
            ).fetchall()
    finally:
        engine.dispose()
    return [tuple(r) for r in files] + [("table", *tuple(r)) for r in table]


def test_nul_in_string_stats_are_null_as_duckdb_writes(
    catalog: CatalogLocation, tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> None:
    """DuckDB stores NULL for a min/max holding a NUL (a PostgreSQL text column cannot hold one at all)."""
    inlined = pa.table({"id": pa.array([0, 1], pa.int64()), "s": ["b\x00", "c"]})
    parquet = pa.table({"id": pa.array(range(2, 22), pa.int64()), "s": ["\x00a"] + [f"x{i}" for i in range(19)]})
    with pdl.connect(catalog.url, catalog.data_path) as lake:
        lake.create_table("main.t", inlined.schema)
        lake.append("main.t", inlined)
        lake.append("main.t", parquet)
        expected = canonical_rows(pa.concat_tables([inlined, parquet]))
        _read_everywhere(catalog, lake, expected)
    theirs = request.getfixturevalue("pg_catalog" if catalog.backend == "postgres" else "sqlite_catalog")
    con = open_duckdb(theirs, inlining_row_limit=10)
    try:
        con.execute("CREATE TABLE lake.main.t (id BIGINT, s VARCHAR)")
        for batch in (inlined, parquet):
            con.register("batch", batch)
            con.execute("INSERT INTO lake.main.t SELECT * FROM batch ORDER BY id")
    finally:
        con.close()
    assert _stats(catalog.url) == _stats(theirs.url)
