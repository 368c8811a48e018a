"""Our flush of inlined data: DuckDB reads the same rows and the same change feed before and after."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

import pyspark_ducklake as pdl
from tests.support.compare import canonical_rows
from tests.support.data import BROAD_SCHEMA, broad_rows
from tests.support.duck import open_duckdb


def history(con: Any, table: str, snapshots: list[int]) -> dict[int, list[Any]]:
    return {
        s: canonical_rows(con.execute(f"SELECT * FROM lake.main.{table} AT (VERSION => {s})").to_arrow_table())
        for s in snapshots
    }


def changes(con: Any, table: str, start: int, end: int) -> list[tuple[Any, ...]]:
    return sorted(
        con.execute(
            "SELECT snapshot_id, rowid, change_type, id "
            f"FROM ducklake_table_changes('lake', 'main', '{table}', {start}, {end})"
        ).fetchall()
    )


def test_we_flush_what_duckdb_and_we_inlined(catalog: Any) -> None:
    lake = pdl.connect(catalog.url, catalog.data_path, data_inlining_row_limit=50)
    lake.create_table("main.f", BROAD_SCHEMA)
    lake.append("main.f", broad_rows(0, 20))
    lake.append("main.f", broad_rows(20, 20))
    lake.delete("main.f", [("id", "<", 5)])
    con = open_duckdb(catalog, inlining_row_limit=50)
    try:
        con.execute("INSERT INTO lake.main.f (id, s) VALUES (100, 'duck'), (101, 'it''s')")
        con.execute("UPDATE lake.main.f SET s = 'upd' WHERE id IN (7, 100)")
        con.execute("ALTER TABLE lake.main.f ADD COLUMN extra INTEGER")
        con.execute("INSERT INTO lake.main.f (id, extra) VALUES (200, 1)")
        con.execute("DELETE FROM lake.main.f WHERE id = 21")
        snaps = [
            r[0] for r in con.execute("SELECT snapshot_id FROM lake.snapshots() WHERE snapshot_id >= 2").fetchall()
        ]
        last = snaps[-1]
        before = history(con, "f", snaps)
        feed_before = changes(con, "f", 2, last)
    finally:
        con.close()
    flushed = lake.flush_inlined_data("main.f")
    assert flushed == last + 1
    assert lake.flush_inlined_data("main.f") is None  # nothing left: no empty snapshot
    con = open_duckdb(catalog)
    try:
        assert history(con, "f", snaps) == before
        assert changes(con, "f", 2, last) == feed_before
        assert changes(con, "f", 2, flushed) == feed_before  # the flush itself changes nothing
        inlined = con.execute("SELECT count(*) FROM __ducklake_metadata_lake.ducklake_inlined_data_tables").fetchone()[
            0
        ]
        assert inlined == 1  # old schema versions' tables dropped, the latest kept
        con.execute("INSERT INTO lake.main.f (id) VALUES (300)")
        con.execute("DELETE FROM lake.main.f WHERE id IN (10, 20)")  # deletes from our flushed files
        now = canonical_rows(con.execute("SELECT * FROM lake.main.f").to_arrow_table())
    finally:
        con.close()
    for s, rows in before.items():
        assert canonical_rows(lake.scan("main.f", snapshot=s)) == rows
    assert canonical_rows(lake.scan("main.f")) == now
    lake.delete("main.f", [("id", "=", 30)])
    con = open_duckdb(catalog)
    try:
        assert con.execute("SELECT count(*) FROM lake.main.f WHERE id = 30").fetchone()[0] == 0
        assert con.execute("SELECT count(*) FROM lake.main.f").fetchone()[0] == len(now) - 1
    finally:
        con.close()
    assert pa.Table is not None
