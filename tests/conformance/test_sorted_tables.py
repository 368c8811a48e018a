"""Sorted tables (``SET SORTED BY``) against DuckDB 1.5.5.

* The sort-order DDL (set, set again, reset, rename and drop of a column, drop of the table) leaves the same catalog
  rows as DuckDB's SQL for the same history (sort ids, expressions as DuckDB quotes them, snapshots, schema versions).
* Every write that DuckDB sorts, we sort the same way: the Parquet files' rows (read back in file order) and the row
  ids of inlined rows equal DuckDB's for the same data, for inserts, flushes and ``merge_adjacent_files``, per
  partition; ``UPDATE``-like writes (upserts) are left unsorted, as DuckDB's ``UPDATE``/``MERGE`` leave them.
"""

from __future__ import annotations

import sqlite3
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import pyspark_ducklake as pdl
from pyspark_ducklake.exceptions import (
    UnsupportedSortOrderError,
)
from pyspark_ducklake.table.microbatch import MicroBatchCommitter, SinkSettings
from tests.support.bad_inputs import expect_bad_input
from tests.support.duck import connect_duckdb

DDL_ROWS = {
    "ducklake_snapshot": "snapshot_id, schema_version, next_catalog_id, next_file_id",
    "ducklake_snapshot_changes": "snapshot_id, changes_made",
    "ducklake_sort_info": "sort_id, table_id, begin_snapshot, end_snapshot",
    "ducklake_sort_expression": "sort_id, table_id, sort_key_index, expression, dialect, sort_direction, null_order",
    "ducklake_schema_versions": "begin_snapshot, schema_version, table_id",
    "ducklake_inlined_data_tables": "table_id, table_name, schema_version",
    "ducklake_column": "column_id, begin_snapshot, end_snapshot, table_id, column_name",
}


@pytest.fixture(scope="module")
def duck() -> Iterator[Any]:
    con = connect_duckdb()
    yield con
    con.close()


def _rows(path: Path, tables: dict[str, str]) -> dict[str, list[tuple[Any, ...]]]:
    db = sqlite3.connect(path)
    try:
        return {t: sorted(db.execute(f"SELECT {cols} FROM {t}").fetchall(), key=repr) for t, cols in tables.items()}
    finally:
        db.close()


def test_sort_order_ddl_writes_duckdbs_rows(duck: Any, tmp_path: Path) -> None:
    theirs = tmp_path / "duck.sqlite"
    duck.execute(f"ATTACH 'ducklake:sqlite:{theirs}' AS lake (DATA_PATH '{tmp_path / 'd'}/')")
    try:
        for sql in [
            'CREATE TABLE lake.t(a INTEGER, "My Col" VARCHAR, "year" INTEGER, c DOUBLE)',
            'ALTER TABLE lake.t SET SORTED BY (a DESC NULLS FIRST, "My Col")',
            'ALTER TABLE lake.t SET SORTED BY (a DESC NULLS FIRST, "My Col")',  # NULLS unstated: written again
            'ALTER TABLE lake.t SET SORTED BY (a DESC NULLS FIRST, "My Col" ASC NULLS LAST)',  # unchanged: no rows
            'ALTER TABLE lake.t SET SORTED BY (A, "year" DESC)',
            "ALTER TABLE lake.t RENAME COLUMN a TO a2",  # a sort key: written again under the new name
            "ALTER TABLE lake.t RENAME COLUMN c TO c2",  # not a key: a sort id taken, nothing written
            "ALTER TABLE lake.t ADD COLUMN d INTEGER",
            "ALTER TABLE lake.t RESET SORTED BY",
            "ALTER TABLE lake.t RESET SORTED BY",  # nothing to reset: a snapshot all the same
            "ALTER TABLE lake.t RENAME COLUMN a2 TO a3",
            "ALTER TABLE lake.t SET SORTED BY (c2 DESC)",
            "ALTER TABLE lake.t RENAME TO t2",
        ]:
            duck.execute(sql)
        with pytest.raises(Exception, match="sorted by this column"):
            duck.execute("ALTER TABLE lake.t2 DROP COLUMN c2")
        duck.execute("DROP TABLE lake.t2")
    finally:
        duck.execute("DETACH lake")

    ours = tmp_path / "ours.sqlite"
    lake = pdl.connect(f"sqlite:///{ours}", f"{tmp_path / 'o'}/")
    lake.create_table(
        "t", pa.schema([("a", pa.int32()), ("My Col", pa.string()), ("year", pa.int32()), ("c", pa.float64())])
    )
    lake.set_sort_order("t", ["a DESC NULLS FIRST", '"My Col"'])
    lake.set_sort_order("t", 'a DESC NULLS FIRST, "My Col"')
    lake.set_sort_order("t", ["a DESC NULLS FIRST", '"My Col" ASC NULLS LAST'])
    lake.set_sort_order("t", ["A", "year DESC"])
    assert lake.table("t").sorted_by == ["A ASC NULLS LAST", '"year" DESC NULLS LAST']
    lake.rename_column("t", "a", "a2")
    lake.rename_column("t", "c", "c2")
    lake.add_column("t", "d", pa.int32())
    lake.set_sort_order("t", [])
    lake.set_sort_order("t", [])
    lake.rename_column("t", "a2", "a3")
    lake.set_sort_order("t", ["c2 DESC"])
    lake.rename_table("t", "t2")
    with expect_bad_input("drop-sorted-column", lake):
        lake.drop_column("t2", "c2")
    lake.drop_table("t2")
    lake.close()
    want, got = _rows(theirs, DDL_ROWS), _rows(ours, DDL_ROWS)
    for table in DDL_ROWS:
        assert got[table] == want[table], table


def test_bad_sort_orders_write_nothing(tmp_path: Path) -> None:
    lake = pdl.connect(f"sqlite:///{tmp_path / 'c.sqlite'}", f"{tmp_path}/d/")
    lake.create_table("t", pa.schema([("a", pa.int32()), ("v", pa.struct([("x", pa.int32())]))]))
    for bad in ("lower(a)", "v.x", "a DESCENDING"):
        with expect_bad_input("sort-key-expression", lake):
            lake.set_sort_order("t", ["a", bad])
    with expect_bad_input("sort-key-unknown-column", lake) as info:
        lake.set_sort_order("t", ["a", "b DESC"])
    assert "no column 'b'" in str(info.value)
    lake.close()


def test_expressions_duckdb_set_are_refused_typed(duck: Any, tmp_path: Path) -> None:
    """A sort order with an expression (DuckDB takes ``lower(b)``) cannot be evaluated here: appends, flushes and
    merges refuse it by name and write nothing; renaming a column the expression uses is refused too."""
    path = tmp_path / "c.sqlite"
    duck.execute(f"ATTACH 'ducklake:sqlite:{path}' AS lake (DATA_PATH '{tmp_path}/d/')")
    try:
        duck.execute("CREATE TABLE lake.t(a INTEGER, b VARCHAR)")
        duck.execute("INSERT INTO lake.t VALUES (1, 'x')")
        duck.execute("ALTER TABLE lake.t SET SORTED BY (a, lower(b) DESC)")
    finally:
        duck.execute("DETACH lake")
    lake = pdl.connect(f"sqlite:///{path}")
    before = lake.current_snapshot_id()
    with expect_bad_input("sort-order-unsupported", lake) as info:
        lake.append("t", pa.table({"a": pa.array([2], pa.int32()), "b": ["y"]}))
    assert "sorted by the expression 'lower(b)'" in str(info.value)
    with pytest.raises(UnsupportedSortOrderError, match=r"lower\(b\)"):
        lake.flush_inlined_data("t")
    with pytest.raises(UnsupportedSortOrderError, match="cannot rename column 'b'"):
        lake.rename_column("t", "b", "b2")
    lake.rename_column("t", "a", "a2")  # a plain key is renamed in place
    assert lake.table("t").sorted_by == ["a2 ASC NULLS LAST", "lower(b) DESC NULLS LAST"]
    assert lake.current_snapshot_id() == before + 1
    lake.set_sort_order("t", ["b"])
    lake.append("t", pa.table({"a2": pa.array([2], pa.int32()), "b": ["y"]}))
    assert lake.scan("t").num_rows == 2
    lake.close()


SORTED = pa.schema(
    [
        ("id", pa.int64()),
        ("k", pa.int32()),
        ("f", pa.float64()),
        ("s", pa.string()),
        ("st", pa.struct([("p", pa.int32()), ("q", pa.string())])),
        ("li", pa.list_(pa.int32())),
        ("iv", pa.month_day_nano_interval()),
        ("p", pa.int32()),
    ]
)
_F = [0.0, -0.0, float("nan"), None, 1.5, float("-inf"), float("inf"), -2.0]
_S = ["a", "B", "é", "e\u0301", None, "", "ab", "ß", "\U0001f600"]
_ST = [{"p": 1, "q": "a"}, {"p": 1, "q": None}, None, {"p": None, "q": "a"}, {"p": 0, "q": "z"}]
_LI = [[1, 2], [1], [], None, [None], [1, None], [2]]
_IV = [(0, 30, 0), (1, 0, 0), (0, 0, 86_400 * 10**9), (0, 1, 0), None, (0, 29, 86_400 * 10**9)]


def sorted_rows(start: int, n: int) -> pa.Table:
    ids = list(range(start, start + n))
    return pa.table(
        {
            "id": ids,
            "k": pa.array([None if i % 7 == 3 else i % 4 for i in ids], pa.int32()),
            "f": [_F[(i * 5) % len(_F)] for i in ids],
            "s": [_S[(i * 7) % len(_S)] for i in ids],
            "st": [_ST[(i * 3) % len(_ST)] for i in ids],
            "li": [_LI[(i * 2) % len(_LI)] for i in ids],
            "iv": pa.array([_IV[i % len(_IV)] for i in ids], pa.month_day_nano_interval()),
            "p": pa.array([i % 2 for i in ids], pa.int32()),
        },
        schema=SORTED,
    )


ORDERS = {
    "a": ["f DESC NULLS FIRST", "s", "id"],  # -0.0 ties 0.0 and every NaN is above every number: decided by s, id
    "b": ["st", "li DESC", "iv", "id"],  # nested values and intervals
    "c": ["k NULLS FIRST", "id DESC"],  # partitioned by p: each partition's file is sorted
}


DUCK_COLUMNS = (
    "id BIGINT, k INTEGER, f DOUBLE, s VARCHAR, st STRUCT(p INTEGER, q VARCHAR), li INTEGER[], iv INTERVAL, p INTEGER"
)


def _value(v: Any) -> str:
    """A value as compared: DuckDB's sort rewrites some values it orders equal (its ORDER BY too): -0.0 as 0.0, an
    interval in another spelling (24 hours as 1 day, 1 month as 29 days 24 hours); we keep the values written."""
    if isinstance(v, float) and v == 0:
        return "0.0"
    if isinstance(v, bytes) and len(v) == 12:  # a Parquet INTERVAL: months, days, millis
        months, days, millis = struct.unpack("<iiI", v)
        days += millis // 86_400_000
        return repr((months + days // 30, days % 30, millis % 86_400_000))
    return repr(v)


def _state(con: Any, alias: str) -> dict[str, Any]:
    """Per table: each data file's rows in file order, and every live row's (rowid, id)."""
    out: dict[str, Any] = {}
    for name in ORDERS:
        paths = [
            r[0] for r in con.execute(f"SELECT data_file FROM ducklake_list_files('{alias}', '{name}')").fetchall()
        ]
        files = [
            [tuple(map(_value, r.values())) for r in pq.read_table(p).select(SORTED.names).to_pylist()] for p in paths
        ]
        rows = sorted(con.execute(f"SELECT rowid, id FROM {alias}.{name}").fetchall())
        out[name] = (sorted(files, key=repr), rows)
    return out


def test_sorted_writes_equal_duckdbs(duck: Any, tmp_path: Path) -> None:
    """The same history into a lake by DuckDB's SQL and into one by this library: after every step the data files
    hold the same rows in the same order (read back in file order), and every row has the same row id (inlined rows
    are numbered in the sort order too)."""
    theirs, ours = tmp_path / "duck.sqlite", tmp_path / "ours.sqlite"
    lake = pdl.connect(f"sqlite:///{ours}", f"{tmp_path / 'o'}/", data_inlining_row_limit=10)
    duck.execute(
        f"ATTACH 'ducklake:sqlite:{theirs}' AS lake (DATA_PATH '{tmp_path / 'd'}/', DATA_INLINING_ROW_LIMIT 10)"
    )
    duck.execute(f"ATTACH 'ducklake:sqlite:{ours}' AS mine")
    try:
        for name, order in ORDERS.items():
            duck.execute(f"CREATE TABLE lake.{name}({DUCK_COLUMNS})")
            lake.create_table(name, SORTED, partition_by=["p"] if name == "c" else None)
            if name == "c":
                duck.execute("ALTER TABLE lake.c SET PARTITIONED BY (p)")
            duck.execute(f"ALTER TABLE lake.{name} SET SORTED BY ({', '.join(order)})")
            lake.set_sort_order(name, order)

        def write(rows: pa.Table, tables: tuple[str, ...] = tuple(ORDERS)) -> None:
            duck.register("batch", rows)
            for name in tables:
                duck.execute(f"INSERT INTO lake.{name} SELECT * FROM batch")
                lake.append(name, rows)
            duck.unregister("batch")

        def delete(row: int) -> None:
            # Not from a: DuckDB's flush then deletes the wrong row (its delete positions come from the catalog
            # database's ORDER BY, where SQLite orders NaN and -inf apart from DuckDB's sort of the file).
            for name in ("b",):
                duck.execute(f"DELETE FROM lake.{name} WHERE id = {row}")
                lake.delete(name, [("id", "=", row)])

        steps = [
            ("parquet insert", lambda: write(sorted_rows(0, 30))),
            # not into c: our flush writes one file where DuckDB's writes one per partition (both read the same)
            ("inlined insert", lambda: write(sorted_rows(100, 4), ("a", "b"))),
            ("inlined insert", lambda: write(sorted_rows(200, 5), ("a", "b"))),
            ("inlined delete", lambda: delete(201)),
            ("flush", lambda: (duck.execute("CALL ducklake_flush_inlined_data('lake')"), lake.flush_inlined_data())),
            ("parquet insert", lambda: write(sorted_rows(300, 25))),
            (
                "merge",
                lambda: (duck.execute("CALL ducklake_merge_adjacent_files('lake')"), lake.merge_adjacent_files()),
            ),
        ]
        for what, step in steps:
            step()
            duck.execute("DETACH mine")
            duck.execute(f"ATTACH 'ducklake:sqlite:{ours}' AS mine")
            want, got = _state(duck, "lake"), _state(duck, "mine")
            for name in ORDERS:
                assert got[name][0] == want[name][0], f"{what}: files of {name} differ from DuckDB's"
                if (
                    what != "merge"
                ):  # DuckDB's merge renumbers a sorted table's adjacent rows (its bug); ours keeps them
                    assert got[name][1] == want[name][1], f"{what}: row ids of {name} differ from DuckDB's"
    finally:
        duck.execute("DETACH lake")
        duck.execute("DETACH mine")
        lake.close()


def test_sink_sorts_like_duckdbs_insert(duck: Any, tmp_path: Path) -> None:
    """The sink's batches into a table DuckDB sorted: inlined rows numbered in the sort order (none with DuckDB's
    ``sort_on_insert`` false, as its INSERT), each task's Parquet file sorted; DuckDB's INSERT of the same rows into a
    twin table gives the same row ids."""
    from tests.conformance.test_sink_commit_path import commit_batch

    path = tmp_path / "c.sqlite"
    duck.execute(f"ATTACH 'ducklake:sqlite:{path}' AS lake (DATA_PATH '{tmp_path}/d/', DATA_INLINING_ROW_LIMIT 10)")
    try:
        for t in ("t", "twin"):
            duck.execute(f"CREATE TABLE lake.{t}(id BIGINT, kind VARCHAR, amount DOUBLE)")
            duck.execute(f"ALTER TABLE lake.{t} SET SORTED BY (kind DESC, amount NULLS FIRST)")
    finally:
        duck.execute("DETACH lake")
    lake = pdl.Lake(f"sqlite:///{path}")
    committer = MicroBatchCommitter(lake, "main.t", SinkSettings(data_inlining_row_limit=10))
    batches = [SINK.slice(0, 8), SINK.slice(8, 22)]  # inlined, then two tasks' Parquet files
    for i, data in enumerate(batches):
        commit_batch(committer, i, data)
    duck.execute(f"ATTACH 'ducklake:sqlite:{path}' AS lake")
    try:
        for data in batches:
            duck.register("batch", data)
            duck.execute("INSERT INTO lake.twin SELECT * FROM batch")
        ours = duck.execute("SELECT rowid, id FROM lake.t WHERE id < 8 ORDER BY rowid").fetchall()
        assert ours == duck.execute("SELECT rowid, id FROM lake.twin WHERE id < 8 ORDER BY rowid").fetchall()
        for (p,) in duck.execute("SELECT data_file FROM ducklake_list_files('lake', 't')").fetchall():
            t = pq.read_table(p)
            key = [(r["kind"], r["amount"]) for r in t.to_pylist()]
            assert key == sorted(key, key=lambda k: (_neg(k[0]), k[1] is not None, k[1] or 0))
        duck.execute("CALL ducklake_set_option('lake', 'sort_on_insert', false)")
    finally:
        duck.execute("DETACH lake")
    commit_batch(committer, 2, SINK.slice(30, 5))  # inlined in arrival order now
    assert sorted(lake.scan("t", columns=["rowid", "id"]).to_pylist(), key=lambda r: r["rowid"])[-5:] == [
        {"rowid": 30 + i, "id": 30 + i} for i in range(5)
    ]
    lake.close()


def _neg(text: str) -> tuple[int, ...]:
    return tuple(-b for b in text.encode())


SINK = pa.table(
    {
        "id": pa.array(range(40), pa.int64()),
        "kind": [f"k{i % 3}" for i in range(40)],
        "amount": [None if i % 4 == 0 else (i * 7) % 11 / 2 for i in range(40)],
    }
)
