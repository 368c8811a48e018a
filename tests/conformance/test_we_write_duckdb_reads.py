"""Conformance 1: histories written by this library read back exactly in DuckDB, which can then keep writing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import pyspark_ducklake as pdl
from tests.support.compare import canonical_rows
from tests.support.data import BROAD_SCHEMA, broad_rows
from tests.support.duck import open_duckdb


def duck_rows(con: Any, sql: str) -> list[tuple[Any, ...]]:
    return canonical_rows(con.execute(sql).to_arrow_table())


def ours(lake: pdl.Lake, table: str, snapshot: int | None = None) -> list[tuple[Any, ...]]:
    return canonical_rows(lake.scan(table, snapshot=snapshot))


def test_broad_history_reads_identically(catalog: Any) -> None:
    lake = pdl.connect(catalog.url, catalog.data_path)
    lake.create_table("main.broad", BROAD_SCHEMA)
    expected: dict[int, list[tuple[Any, ...]]] = {}
    truth = broad_rows(0, 0)

    def record(snapshot: int, table: pa.Table) -> None:
        expected[snapshot] = canonical_rows(table)
        assert ours(lake, "main.broad", snapshot) == expected[snapshot]

    batch = broad_rows(0, 8)  # inlined
    truth = pa.concat_tables([truth, batch])
    record(lake.append("main.broad", batch), truth)
    batch = broad_rows(8, 300)  # Parquet
    truth = pa.concat_tables([truth, batch])
    record(lake.append("main.broad", batch), truth)
    batch = broad_rows(308, 5)  # inlined again
    truth = pa.concat_tables([truth, batch])
    record(lake.append("main.broad", batch), truth)
    snap = lake.delete("main.broad", [("id", "<", 3)])  # deletes inlined rows
    truth = truth.filter(pa.compute.field("id") >= 3)
    record(snap, truth)
    snap = lake.delete("main.broad", [("id", ">=", 100), ("id", "<", 150)])  # a delete file
    truth = truth.filter((pa.compute.field("id") < 100) | (pa.compute.field("id") >= 150))
    record(snap, truth)
    snap = lake.delete("main.broad", [("id", "=", 160)])  # a second delete file on the same data file
    truth = truth.filter(pa.compute.field("id") != 160)
    record(snap, truth)

    con = open_duckdb(catalog)
    try:
        for snapshot, rows in expected.items():
            got = duck_rows(con, f"SELECT * FROM lake.main.broad AT (VERSION => {snapshot})")
            assert got == rows, f"DuckDB disagrees at snapshot {snapshot}"
            count = con.execute(f"SELECT count(*) FROM lake.main.broad AT (VERSION => {snapshot})").fetchone()[0]
            assert count == len(rows)
        # ORDER BY trusts table-level min/max stats (compressed materialisation): wrong stats corrupt values here.
        for col in ("id", "i8", "i16", "i32", "u8", "u16", "u32", "u64", "d18", "d38", "dt", "tm", "ts"):
            got = [r[0] for r in con.execute(f"SELECT {col} FROM lake.main.broad ORDER BY {col} NULLS LAST").fetchall()]
            mine = list(lake.scan("main.broad", columns=[col]).column(0).to_pylist())
            assert got == sorted(mine, key=lambda v: (v is None, v)), f"ORDER BY {col}"
        # DuckDB keeps writing into our table: inlined insert, Parquet insert, delete, update, flush, merge.
        con.execute("INSERT INTO lake.main.broad (id, s, i32) VALUES (1000, 'duck''s', 7), (1001, NULL, 8)")
        con.execute("INSERT INTO lake.main.broad (id, s) SELECT 2000 + i, 'bulk' || i FROM range(50) t(i)")
        con.execute("DELETE FROM lake.main.broad WHERE id IN (4, 200, 2001)")
        con.execute("UPDATE lake.main.broad SET s = 'updated' WHERE id IN (5, 201, 1000)")
        con.execute("CALL ducklake_flush_inlined_data('lake')")
        con.execute("INSERT INTO lake.main.broad (id, s) SELECT 3000 + i, 'more' || i FROM range(40) t(i)")
        con.execute("CALL ducklake_merge_adjacent_files('lake')")
        duck_now = duck_rows(con, "SELECT * FROM lake.main.broad")
        history = {
            s: duck_rows(con, f"SELECT * FROM lake.main.broad AT (VERSION => {s})")
            for (s,) in con.execute("SELECT snapshot_id FROM lake.snapshots()").fetchall()
            if s >= min(expected)
        }
    finally:
        con.close()
    assert ours(lake, "main.broad") == duck_now
    for s, rows in history.items():
        assert ours(lake, "main.broad", s) == rows, f"we disagree with DuckDB's history at snapshot {s}"
    lake.close()


def test_duckdb_merges_our_files(catalog: Any) -> None:
    lake = pdl.connect(catalog.url, catalog.data_path, data_inlining_row_limit=0)
    lake.create_table("main.m", BROAD_SCHEMA)
    snaps = [lake.append("main.m", broad_rows(i * 30, 30)) for i in range(4)]
    before = {s: ours(lake, "main.m", s) for s in snaps}
    con = open_duckdb(catalog)
    try:
        con.execute("CALL ducklake_merge_adjacent_files('lake')")
        assert duck_rows(con, "SELECT * FROM lake.main.m") == before[snaps[-1]]
    finally:
        con.close()
    assert "merge_adjacent" in (lake.snapshots()[-1].changes_made or "")
    for s, rows in before.items():  # time travel through the merged file (partial_max, internal snapshot ids)
        assert ours(lake, "main.m", s) == rows
    lake.append("main.m", broad_rows(500, 20))
    lake.delete("main.m", [("id", "<", 10)])  # a delete file on DuckDB's merged file
    con = open_duckdb(catalog)
    try:
        assert duck_rows(con, "SELECT * FROM lake.main.m") == ours(lake, "main.m")
    finally:
        con.close()


def test_overwrite_and_schema_evolution(catalog: Any) -> None:
    lake = pdl.connect(catalog.url, catalog.data_path)
    schema = pa.schema([("id", pa.int32()), ("name", pa.string()), ("score", pa.float32())])
    lake.create_table("main.evo", schema)
    lake.append(
        "main.evo",
        pa.table(
            {
                "id": pa.array(range(20), pa.int32()),
                "name": [f"n{i}" for i in range(20)],
                "score": pa.array([i / 3 for i in range(20)], pa.float32()),
            }
        ),
    )
    lake.append(
        "main.evo",
        pa.table({"id": pa.array([100], pa.int32()), "name": ["inl"], "score": pa.array([1.0], pa.float32())}),
    )
    lake.add_column("main.evo", "extra", pa.string(), default="dflt")
    lake.rename_column("main.evo", "name", "label")
    lake.set_column_type("main.evo", "id", pa.int64())
    lake.set_column_type("main.evo", "score", pa.float64())
    lake.append("main.evo", pa.table({"id": [200, 201], "label": ["a", "b"], "extra": ["x", None]}))
    lake.drop_column("main.evo", "score")
    lake.append("main.evo", pa.table({"id": list(range(300, 330)), "label": ["bulk"] * 30}))
    snap_before_overwrite = lake.current_snapshot_id()
    lake.overwrite("main.evo", pa.table({"id": [1, 2, 3], "label": ["o1", "o2", "o3"]}))
    con = open_duckdb(catalog)
    try:
        for s in range(1, lake.current_snapshot_id() + 1):
            got = duck_rows(con, f"SELECT * FROM lake.main.evo AT (VERSION => {s})") if s >= 1 else []
            assert got == ours(lake, "main.evo", s), f"snapshot {s}"
        assert (
            con.execute(f"SELECT count(*) FROM lake.main.evo AT (VERSION => {snap_before_overwrite})").fetchone()[0]
            == 53
        )
        cols = [r[0] for r in con.execute("DESCRIBE lake.main.evo").fetchall()]
        assert cols == ["id", "label", "extra"]
        con.execute("ALTER TABLE lake.main.evo ADD COLUMN z INTEGER DEFAULT 9")
        con.execute("INSERT INTO lake.main.evo VALUES (4, 'duck', NULL, 1)")
        duck_now = duck_rows(con, "SELECT * FROM lake.main.evo")
    finally:
        con.close()
    assert ours(lake, "main.evo") == duck_now
    lake.append("main.evo", pa.table({"id": [5], "label": ["after duck"]}))
    con = open_duckdb(catalog)
    try:
        assert duck_rows(con, "SELECT * FROM lake.main.evo") == ours(lake, "main.evo")
        assert con.execute("SELECT z FROM lake.main.evo WHERE id = 1").fetchone()[0] == 9
    finally:
        con.close()


@pytest.mark.parametrize("name", ['we\'ird "name"', "dots.in.name", "semi; DROP TABLE x;--", "../escape"])
def test_hostile_identifiers(catalog: Any, name: str) -> None:
    lake = pdl.connect(catalog.url, catalog.data_path)
    lake.create_schema("s p'a")
    ident = ("s p'a", name)
    lake.create_table(ident, pa.schema([(name, pa.int64())]))
    lake.append(ident, pa.table({name: list(range(30))}))
    lake.append(ident, pa.table({name: [99]}))
    assert sorted(lake.scan(ident).column(0).to_pylist()) == [*range(30), 99]
    import pathlib

    root = pathlib.Path(catalog.data_path).resolve()
    files = list(root.rglob("*.parquet"))
    assert files and all(root in p.resolve().parents for p in files)
    con = open_duckdb(catalog)
    try:
        q_schema = '"' + "s p'a".replace('"', '""') + '"'
        q_table = '"' + name.replace('"', '""') + '"'
        got = sorted(r[0] for r in con.execute(f"SELECT * FROM lake.{q_schema}.{q_table}").fetchall())
        assert got == [*range(30), 99]
    finally:
        con.close()


def test_repeated_deletes_keep_every_snapshot_right(catalog: Any) -> None:
    """Our second delete on a file merges the first (per-row snapshot ids), so DuckDB's later deletes and time
    travel see exactly one delete file per data file at every snapshot."""
    lake = pdl.connect(catalog.url, catalog.data_path, data_inlining_row_limit=0)
    lake.create_table("main.d", pa.schema([("id", pa.int64())]))
    lake.append("main.d", pa.table({"id": list(range(100))}))
    lake.delete("main.d", [("id", "<", 10)])
    lake.delete("main.d", [("id", ">=", 90)])
    con = open_duckdb(catalog, inlining_row_limit=0)
    try:
        con.execute("DELETE FROM lake.main.d WHERE id BETWEEN 40 AND 49")
        files = con.execute(
            "SELECT count(*) FROM __ducklake_metadata_lake.ducklake_delete_file WHERE end_snapshot IS NULL"
        ).fetchone()
    finally:
        con.close()
    lake.delete("main.d", [("id", "=", 50)])
    con = open_duckdb(catalog)
    try:
        for s in range(2, lake.current_snapshot_id() + 1):
            duck = sorted(r[0] for r in con.execute(f"SELECT id FROM lake.main.d AT (VERSION => {s})").fetchall())
            assert duck == sorted(lake.scan("main.d", snapshot=s).column(0).to_pylist()), f"snapshot {s}"
            count = con.execute(f"SELECT count(*) FROM lake.main.d AT (VERSION => {s})").fetchone()[0]
            assert count == len(duck)
    finally:
        con.close()
    assert files == (1,)
    assert sorted(lake.scan("main.d").column(0).to_pylist()) == [i for i in range(10, 90) if not 40 <= i <= 50]


NAN_PREDICATES = [
    "x > 100",
    "x >= 'nan'::DOUBLE",
    "x = 'nan'::DOUBLE",
    "x < 0",
    "x BETWEEN 10 AND 20",
    "f > 100",
    "isnan(x)",
    "list_max(xs) > 100",
]


def test_filters_on_nan_columns_match_duckdbs_own_files(sqlite_catalog: Any) -> None:
    """DuckDB prunes row groups by the Parquet min/max and orders NaN above every number: a file whose bounds leave
    NaN out loses the NaN rows from ``x > 100``. DuckDB's own files, written from the same rows, are the oracle."""
    catalog = sqlite_catalog  # Parquet contents, not the catalog: one backend
    n = 3000
    xs = [float(i % 100) for i in range(n)]
    fs = [float(i % 50) for i in range(n)]
    xs[7] = float("nan")
    xs[2500] = None  # type: ignore[call-overload]
    fs[11] = float("nan")
    lists = [[float(i % 30), float("nan") if i == 13 else 1.0] for i in range(n)]
    data = pa.table(
        {
            "id": pa.array(range(n), pa.int64()),
            "x": pa.array(xs, pa.float64()),
            "f": pa.array(fs, pa.float32()),
            "xs": pa.array(lists, pa.list_(pa.float64())),
        }
    )
    with pdl.connect(catalog.url, catalog.data_path) as lake:
        lake.create_table("main.nan_ours", data.schema)
        lake.append("main.nan_ours", data)  # 3,000 rows: a Parquet file, not inlined
    con = open_duckdb(catalog)
    try:
        con.execute("CREATE TABLE lake.main.nan_duck AS SELECT * FROM lake.main.nan_ours")
        for predicate in NAN_PREDICATES:
            got = con.execute(f"SELECT list(id ORDER BY id) FROM lake.main.nan_ours WHERE {predicate}").fetchone()
            want = con.execute(f"SELECT list(id ORDER BY id) FROM lake.main.nan_duck WHERE {predicate}").fetchone()
            assert got == want, predicate
        assert con.execute("SELECT count(*) FROM lake.main.nan_ours WHERE x > 100").fetchone() == (1,)
        stats = """
            SELECT c.column_name, s.value_count, s.null_count, s.min_value, s.max_value, s.contains_nan
            FROM __ducklake_metadata_lake.ducklake_file_column_stats s
            JOIN __ducklake_metadata_lake.ducklake_column c USING (table_id, column_id)
            WHERE c.column_name IN ('x', 'f')
              AND s.table_id = (SELECT table_id FROM __ducklake_metadata_lake.ducklake_table WHERE table_name = '{t}')
            ORDER BY 1
        """
        assert con.execute(stats.format(t="nan_ours")).fetchall() == con.execute(stats.format(t="nan_duck")).fetchall()
    finally:
        con.close()


def test_dictionary_encoding_only_where_values_repeat(sqlite_catalog: Any) -> None:
    """Leaves of (nearly) unique values are written plain, repeating ones with a dictionary (Spark reads files of
    unique-value dictionaries ~25% slower); DuckDB reads the mixed file exactly, filters included."""
    catalog = sqlite_catalog  # Parquet contents, not the catalog: one backend
    n = 50_000
    data = pa.table(
        {
            "id": pa.array(range(n), pa.int64()),
            "category": pa.array([f"cat-{i % 7}" for i in range(n)]),
            "point": pa.array([{"x": i * 0.5, "tag": "ab"[i % 2]} for i in range(n)]),
            "xs": pa.array([[i % 3, i] for i in range(n)], pa.list_(pa.int32())),
        }
    )
    with pdl.connect(catalog.url, catalog.data_path) as lake:
        lake.create_table("main.dict", data.schema)
        lake.append("main.dict", data)
    (path,) = Path(catalog.data_path).rglob("*.parquet")
    meta = pq.ParquetFile(path).metadata
    dictionary = {
        meta.row_group(0).column(i).path_in_schema: meta.row_group(0).column(i).has_dictionary_page
        for i in range(meta.num_columns)
    }
    assert dictionary == {
        "id": False,
        "category": True,
        "point.x": False,
        "point.tag": True,
        "xs.list.element": True,  # half of the sampled elements repeat (i % 3)
    }
    con = open_duckdb(catalog)
    try:
        assert duck_rows(con, "SELECT * FROM lake.main.dict") == canonical_rows(data)
        got = con.execute(
            "SELECT count(*), sum(id) FROM lake.main.dict WHERE category = 'cat-3' AND point.tag = 'b' AND id > 100"
        ).fetchone()
        want = [i for i in range(n) if i % 7 == 3 and i % 2 == 1 and i > 100]
        assert got == (len(want), sum(want))
    finally:
        con.close()
