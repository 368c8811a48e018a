"""Conformance 2: histories written by DuckDB's ducklake extension read back exactly by this library."""

from __future__ import annotations

from typing import Any

import pytest

import pyspark_ducklake as pdl
from tests.support.compare import canonical_rows
from tests.support.duck import open_duckdb

BROAD_DDL = """
CREATE TABLE lake.main.t (
    id BIGINT, b BOOLEAN, i8 TINYINT, i16 SMALLINT, i32 INTEGER, u8 UTINYINT, u16 USMALLINT, u32 UINTEGER,
    u64 UBIGINT, h HUGEINT, f32 FLOAT, f64 DOUBLE, d18 DECIMAL(18,3), d38 DECIMAL(38,10), dt DATE, tm TIME,
    ts TIMESTAMP, tstz TIMESTAMPTZ, tsns TIMESTAMP_NS, iv INTERVAL, s VARCHAR, bl BLOB, u UUID, j JSON,
    li INTEGER[], st STRUCT(a INTEGER, b VARCHAR), mp MAP(VARCHAR, INTEGER)
)
"""


def broad_insert(first: int, n: int) -> str:
    return f"""
INSERT INTO lake.main.t SELECT
    i, i % 2 = 0, (i % 200 - 100)::TINYINT, (i * 7 % 30000)::SMALLINT, i * 1000, (i % 256)::UTINYINT,
    (i % 60000)::USMALLINT, (i * 100000)::UINTEGER, (i::UBIGINT * 1000000000000::UBIGINT), i::HUGEINT * 1000,
    CASE WHEN i % 9 = 0 THEN 'nan'::FLOAT ELSE i / 3 END, CASE WHEN i % 11 = 0 THEN '-inf'::DOUBLE ELSE i * 1.25 END,
    (i * 1.001)::DECIMAL(18,3), (i / 7)::DECIMAL(38,10), DATE '2024-01-01' + i::INTEGER,
    TIME '01:02:03' + INTERVAL (i) SECOND,
    TIMESTAMP '2024-01-01 10:00:00.123456' + INTERVAL (i) MINUTE,
    TIMESTAMPTZ '2024-01-01 08:00:00+00' + INTERVAL (i) HOUR,
    TIMESTAMP_NS '2024-01-01 00:00:00.123456789', INTERVAL (i) DAY + INTERVAL 1 MONTH,
    CASE WHEN i % 5 = 0 THEN NULL WHEN i % 5 = 1 THEN 'it''s, [x] {{y}}' ELSE 'row ' || i || ' ü' END,
    ('\\x00\\xFF' || i::VARCHAR)::BLOB, md5(i::VARCHAR)::UUID, '{{"k": ' || i || '}}',
    [i::INTEGER, NULL, 3], {{'a': i::INTEGER, 'b': 'x''' || i}}, MAP {{'k' || i: i::INTEGER}}
FROM range({first}, {first + n}) r(i)
"""


def duck_snapshots(con: Any) -> list[int]:
    return [r[0] for r in con.execute("SELECT snapshot_id FROM lake.snapshots() ORDER BY 1").fetchall()]


def test_duckdb_history_reads_identically(catalog: Any) -> None:
    con = open_duckdb(catalog, inlining_row_limit=10)
    try:
        con.execute(BROAD_DDL)
        con.execute(broad_insert(0, 5))  # inlined
        con.execute(broad_insert(5, 200))  # Parquet
        con.execute(broad_insert(205, 3))  # inlined
        con.execute("DELETE FROM lake.main.t WHERE id IN (1, 206)")  # inlined rows
        con.execute(
            "DELETE FROM lake.main.t WHERE id BETWEEN 10 AND 14"
        )  # small delete of Parquet rows: inlined delete
        con.execute("DELETE FROM lake.main.t WHERE id BETWEEN 100 AND 150")  # delete file
        con.execute("UPDATE lake.main.t SET s = 'updated', i32 = -1 WHERE id IN (2, 20, 207)")
        con.execute("ALTER TABLE lake.main.t ADD COLUMN extra VARCHAR DEFAULT 'dflt'")
        con.execute("INSERT INTO lake.main.t (id, extra) VALUES (500, 'new'), (501, NULL)")
        con.execute("ALTER TABLE lake.main.t RENAME COLUMN s TO label")
        con.execute("ALTER TABLE lake.main.t ALTER COLUMN i32 TYPE BIGINT")
        con.execute("ALTER TABLE lake.main.t DROP COLUMN u16")
        con.execute("INSERT INTO lake.main.t (id, label, i32) VALUES (600, 'post-alter', 5000000000)")
        con.execute("CALL ducklake_flush_inlined_data('lake')")
        con.execute("DELETE FROM lake.main.t WHERE id IN (3, 600)")  # deletes from flushed files
        con.execute(
            (broad_insert(1000, 50))
            .replace(
                "INSERT INTO lake.main.t SELECT",
                "INSERT INTO lake.main.t (id, b, i8, i16, i32, u8, u32, u64, h, f32, f64, d18, d38, dt, tm, ts, tstz, "
                "tsns, iv, label, bl, u, j, li, st, mp) SELECT",
            )
            .replace("(i % 60000)::USMALLINT,", "")
        )
        con.execute("CALL ducklake_merge_adjacent_files('lake')")
        snapshots = duck_snapshots(con)
        expected = {
            s: canonical_rows(con.execute(f"SELECT * FROM lake.main.t AT (VERSION => {s})").to_arrow_table())
            for s in snapshots
            if s >= 2
        }
        virtual = {
            s: sorted(con.execute(f"SELECT rowid, snapshot_id, id FROM lake.main.t AT (VERSION => {s})").fetchall())
            for s in snapshots
            if s >= 2
        }
    finally:
        con.close()
    lake = pdl.connect(catalog.url)
    for s, rows in expected.items():
        assert canonical_rows(lake.scan("main.t", snapshot=s)) == rows, f"snapshot {s}"
        got = lake.scan("main.t", snapshot=s, columns=["rowid", "snapshot_id", "id"])
        assert sorted(zip(*[got.column(i).to_pylist() for i in range(3)], strict=False)) == virtual[s], (
            f"virtual columns at {s}"
        )
    lake.close()


@pytest.mark.parametrize("limit", [0, 1000])
def test_nested_values_with_hostile_strings(catalog: Any, limit: int) -> None:
    """Nested strings with quotes, backslashes, commas and brackets, inlined (limit 1000) and in Parquet (0)."""
    con = open_duckdb(catalog, inlining_row_limit=limit)
    try:
        con.execute(
            "CREATE TABLE lake.main.n "
            "(id INTEGER, l VARCHAR[], s STRUCT(a VARCHAR, b INTEGER[]), m MAP(VARCHAR, VARCHAR))"
        )
        con.execute(r"""INSERT INTO lake.main.n VALUES
            (1, ['a', 'b c', NULL, ''], {'a': 'x', 'b': [1, NULL]}, MAP {'k': 'v', 'k2': NULL}),
            (2, [], {'a': NULL, 'b': []}, MAP {}),
            (3, NULL, NULL, NULL),
            (4, ['[x]', '{y}', 'a,b', 'c=d'], {'a': 'brackets [] {} , :', 'b': NULL}, MAP {'a,b': 'c=d'})""")
        expected = canonical_rows(con.execute("SELECT * FROM lake.main.n").to_arrow_table())
    finally:
        con.close()
    lake = pdl.connect(catalog.url)
    assert canonical_rows(lake.scan("main.n")) == expected
