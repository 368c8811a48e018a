"""What each snapshot did to a table's rows, for a stream of its rows (``table.row_stream``): appended, deleted
only, or updated (or deleted and appended), against DuckDB's ``ducklake_table_changes`` of that snapshot. A history
by this library and by DuckDB: inlined and Parquet appends, deletes of both, an UPDATE, an overwrite, a flush of
inlined deletes alone (DuckDB records it as a plain delete; it changes no row), a merge and a schema change."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pyarrow as pa

import pyspark_ducklake as pdl
from pyspark_ducklake.table.row_stream import APPEND, DELETE_ONLY, UPDATE, row_changes
from tests.support.duck import open_duckdb


def duck(catalog: Any, *statements: str) -> None:
    con = open_duckdb(catalog, inlining_row_limit=10)
    try:
        for statement in statements:
            con.execute(statement)
    finally:
        con.close()


def duck_kinds(catalog: Any, start: int, end: int) -> dict[int, str]:
    """Each snapshot's kind from DuckDB's table_changes: appends only, deletes only, else an update."""
    con = open_duckdb(catalog)
    try:
        rows = con.execute(
            f"SELECT snapshot_id, change_type FROM ducklake_table_changes('lake', 'main', 't', {start}, {end})"
        ).fetchall()
    finally:
        con.close()
    by_snapshot: dict[int, Counter[str]] = {}
    for snapshot_id, kind in rows:
        by_snapshot.setdefault(snapshot_id, Counter())[kind] += 1
    out = {}
    for snapshot_id, counts in by_snapshot.items():
        if counts["update_preimage"] or (counts["delete"] and counts["insert"]):
            out[snapshot_id] = UPDATE
        elif counts["delete"]:
            out[snapshot_id] = DELETE_ONLY
        else:
            out[snapshot_id] = APPEND
    return out


def test_each_snapshot_is_appended_deleted_or_updated_as_duckdb_reports_it(catalog: Any) -> None:
    lake = pdl.connect(catalog.url, catalog.data_path, data_inlining_row_limit=10)
    lake.create_table("main.t", pa.schema([("id", pa.int64()), ("s", pa.string())]))
    first = lake.current_snapshot_id()
    lake.append("main.t", pa.table({"id": [1, 2, 3], "s": ["a", "b", "c"]}))  # inlined
    lake.append("main.t", pa.table({"id": list(range(100, 150)), "s": ["p"] * 50}))  # Parquet
    lake.delete("main.t", [("id", "=", 2)])  # an inlined delete
    lake.delete("main.t", [("id", ">=", 140)])  # a delete file
    duck(
        catalog,
        "UPDATE lake.main.t SET s = 'u' WHERE id IN (1, 100)",
        "INSERT INTO lake.main.t VALUES (7, 'duck')",
        "DELETE FROM lake.main.t WHERE id = 7",  # an inlined row's end
        "CALL ducklake_flush_inlined_data('lake')",
        "DELETE FROM lake.main.t WHERE id = 101",  # an inlined delete of a Parquet file's row
    )
    duck(catalog, "CALL ducklake_flush_inlined_data('lake')")  # the inlined delete alone: a plain deleted_from_table
    flush = lake.current_snapshot_id()
    assert lake.snapshots()[-1].changes_made == "deleted_from_table:1"
    duck(catalog, "ALTER TABLE lake.main.t ADD COLUMN x INTEGER")
    lake.overwrite("main.t", pa.table({"id": [9], "s": ["over"], "x": [1]}))
    lake.append("main.t", pa.table({"id": list(range(200, 230)), "s": ["q"] * 30, "x": [2] * 30}))
    duck(catalog, "CALL ducklake_merge_adjacent_files('lake')")
    last = lake.current_snapshot_id()

    known: dict[int, Any] = {}
    got = row_changes(lake.engine, lake.data_path, "main", "t", first, last, fmt=lake.info.format, known=known)
    expected = duck_kinds(catalog, first, last)
    # DuckDB reports no change at the flush; it passes a stream as appending nothing
    assert {c.snapshot_id: c.kind for c in got} == {**expected, flush: APPEND}
    assert [c.snapshot_id for c in got] == sorted([*expected, flush])
    assert {APPEND, DELETE_ONLY, UPDATE} <= set(expected.values())
    # the counts the error reports
    updated = next(c for c in got if c.kind == UPDATE and c.updated)
    assert (updated.updated, updated.deleted) == (2, 0)  # DuckDB's UPDATE of two rows
    # the remembered answers are the same
    assert row_changes(lake.engine, lake.data_path, "main", "t", first, last, fmt=lake.info.format, known=known) == got
    lake.close()
