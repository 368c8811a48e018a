"""DuckDB-file catalogs (``ATTACH 'ducklake:my.ducklake'``): DuckDB writes, we read equal; we write, DuckDB reads
exactly; the file lock; hostile locations. DuckDB and we never have the file open at the same time (its lock is per
process, and two DuckDB instances in one process must not share a file)."""

from __future__ import annotations

import decimal
import os
import subprocess
import sys
import textwrap
import time

import pyarrow as pa
import pytest

import pyspark_ducklake as pdl
from pyspark_ducklake.catalog.location import parse_location
from pyspark_ducklake.exceptions import (
    CatalogLockedError,
    InvalidOptionError,
    NotADuckLakeCatalogError,
)
from tests.support.bad_inputs import expect_bad_input
from tests.support.duck import connect_duckdb, sql_string

COLUMNS = (
    "id INTEGER, v VARCHAR, b BLOB, f DOUBLE, r REAL, d DECIMAL(18,3), h HUGEINT, u UBIGINT, ts TIMESTAMP, "
    "tz TIMESTAMPTZ, dt DATE, tm TIME, iv INTERVAL, g UUID, j JSON, "
    "s STRUCT(a INTEGER, b VARCHAR[]), m MAP(VARCHAR, INTEGER), l VARCHAR[]"
)
ROWS = [
    "(1, 'x}', '\\x00ab'::BLOB, -0.0, 1.5, 12.345, 99999999999999999999999999999999999999, 18446744073709551615, "
    "'infinity', '2024-01-02 03:04:05.123456+00', '-infinity', '24:00:00', INTERVAL '1 month 2 days 3 us', "
    "'12345678-1234-5678-1234-567812345678', '{\"a\": [1, 2]}', {'a': 1, 'b': ['p}q', NULL, '']}, "
    "MAP {'k]': 1, 'n': NULL}, ['it''s', 'a,b', 'null'])",
    "(2, NULL, NULL, 'nan', '-inf', NULL, -5, 0, '2020-01-01 00:00:00.5', NULL, '2020-02-29', '00:00:01', NULL, "
    "NULL, NULL, NULL, MAP {}, [])",
]


def _attach(con, path: str, data_path: str | None = None, alias: str = "lake") -> None:
    options = f" (DATA_PATH {sql_string(data_path)})" if data_path else ""
    con.execute(f"ATTACH {sql_string('ducklake:' + path)} AS {alias}{options}")


def _duck_rows(path: str, query: str) -> list[tuple]:
    con = connect_duckdb()
    try:
        _attach(con, path)
        return con.execute(query).fetchall()
    finally:
        con.close()


def _duck_arrow(path: str, query: str) -> pa.Table:
    con = connect_duckdb()
    try:
        _attach(con, path)
        return con.execute(query).to_arrow_table()
    finally:
        con.close()


@pytest.fixture
def duck_lake(tmp_path) -> str:
    """A ``.ducklake`` file DuckDB made: table t with inlined rows, then Parquet rows, then a delete of each."""
    path = str(tmp_path / "my lake 'q'.ducklake")
    con = connect_duckdb()
    try:
        _attach(con, path)
        con.execute(f"CREATE TABLE lake.t ({COLUMNS})")
        con.execute(f"INSERT INTO lake.t VALUES {ROWS[0]}, {ROWS[1]}")  # inlined (<= 10 rows)
        con.execute(
            "INSERT INTO lake.t (id, v, d, s, l) SELECT i + 10, 'p' || i, i / 8, {'a': i, 'b': ['q' || i]}, ['x]'] "
            "FROM range(40) r(i)"
        )  # a Parquet file
        con.execute("DELETE FROM lake.t WHERE id IN (2, 11)")
    finally:
        con.close()
    return path


def _ours(table: pa.Table) -> pa.Table:
    return table.sort_by("id")


def test_location_spellings(tmp_path) -> None:
    path = str(tmp_path / "a.ducklake")
    for spelling in (f"ducklake:{path}", f"ducklake:duckdb:{path}", path, f"duckdb:{path}", f"duckdb:///{path}"):
        loc = parse_location(spelling)
        assert loc.backend == "duckdb"
        assert loc.duckdb_attach() == f"ducklake:{path}"
    # DuckDB's ATTACH takes any file name after 'ducklake:' as a DuckDB database, .db included
    assert parse_location(f"ducklake:{tmp_path}/x.db").backend == "duckdb"
    with pytest.raises(InvalidOptionError, match="in-memory DuckDB"):
        parse_location("ducklake::memory:")


def test_duckdb_writes_we_read_equal(duck_lake: str) -> None:
    expected = _duck_arrow(duck_lake, "SELECT id, v, b, f, r, d, h, u, dt, tm, g, s, m, l FROM lake.t ORDER BY id")
    with pdl.connect(f"ducklake:{duck_lake}") as lake:
        got = _ours(lake.scan("main.t"))
    assert got.num_rows == expected.num_rows == 40
    for name in ("id", "v", "b", "d", "h", "u", "s", "l"):
        assert got.column(name).to_pylist() == expected.column(name).to_pylist(), name
    assert got.column("dt").cast(pa.int32()).to_pylist() == expected.column("dt").cast(pa.int32()).to_pylist()
    for name in ("f", "r"):  # -0.0 and NaN: compare the spelling
        assert [repr(v) for v in got.column(name).to_pylist()] == [repr(v) for v in expected.column(name).to_pylist()]
    # types whose Python values DuckDB's Arrow export spells differently: compare through DuckDB's text
    text = _duck_rows(
        duck_lake,
        "SELECT id, CAST(ts AS VARCHAR), CAST(tz AS VARCHAR), CAST(dt AS VARCHAR), CAST(iv AS VARCHAR), "
        "CAST(g AS VARCHAR), CAST(j AS VARCHAR), CAST(m AS VARCHAR), CAST(tm AS VARCHAR) FROM lake.t WHERE id = 1",
    )[0]
    row = got.select(["g", "j", "m", "iv", "d", "tm"]).filter(pa.compute.equal(got.column("id"), 1)).to_pylist()[0]
    assert str(row["g"]) == text[5]
    assert row["j"] == text[6]
    assert row["m"] == [("k]", 1), ("n", None)]
    assert row["iv"] == pa.scalar((1, 2, 3000), pa.month_day_nano_interval()).as_py()
    assert row["d"] == decimal.Decimal("12.345")
    assert got.column("ts").cast(pa.int64()).to_pylist()[0] == 2**63 - 1  # DuckDB's infinity sentinel
    assert row["tm"].isoformat() == "00:00:00" or text[8] == "24:00:00"


def test_we_write_duckdb_reads_exactly(duck_lake: str) -> None:
    new = pa.table(
        {
            "id": pa.array([100, 101], pa.int32()),
            "v": ["a'b}", "line\nbreak"],
            "d": pa.array([decimal.Decimal("-1.250"), None], pa.decimal128(18, 3)),
            "s": pa.array(
                [{"a": 2, "b": ["x]", None, "}{"]}, None], pa.struct([("a", pa.int32()), ("b", pa.list_(pa.string()))])
            ),
            "m": pa.array([[("k}", 3), ("'", None)], []], pa.map_(pa.string(), pa.int32())),
            "l": pa.array([["[", "]", None], None], pa.list_(pa.string())),
        }
    )
    with pdl.connect(f"ducklake:{duck_lake}") as lake:
        lake.append("main.t", new)  # 2 rows: inlined
        lake.append("main.t", pa.table({"id": pa.array(range(200, 230), pa.int32())}))  # 30 rows: Parquet
        lake.delete("main.t", [("id", "in", [1, 12, 205])])  # an inlined row of DuckDB's, a Parquet row each
        ours = _ours(lake.scan("main.t", columns=["id", "v", "d", "s", "m", "l"]))
    rows = _duck_rows(duck_lake, "SELECT id, v, d, s, m, l FROM lake.t ORDER BY id")
    assert [r[0] for r in rows] == ours.column("id").to_pylist()
    assert 1 not in [r[0] for r in rows] and 12 not in [r[0] for r in rows] and 205 not in [r[0] for r in rows]
    by_id = {r[0]: r for r in rows}
    assert by_id[100] == (
        100,
        "a'b}",
        decimal.Decimal("-1.250"),
        {"a": 2, "b": ["x]", None, "}{"]},
        {"k}": 3, "'": None},
        ["[", "]", None],
    )
    assert by_id[101] == (101, "line\nbreak", None, None, {}, None)
    assert by_id[229][0] == 229
    # inlined in the typed columns DuckDB declared, flushed by us: DuckDB still reads them
    with pdl.connect(f"ducklake:{duck_lake}") as lake:
        lake.flush_inlined_data("main.t")
    assert _duck_rows(duck_lake, "SELECT v, s FROM lake.t WHERE id = 100") == [
        ("a'b}", {"a": 2, "b": ["x]", None, "}{"]})
    ]


def test_we_create_duckdb_reads(tmp_path) -> None:
    path = str(tmp_path / "new.ducklake")
    data = str(tmp_path / "files")
    with pdl.connect(f"ducklake:{path}", data_path=data) as lake:
        lake.create_table("main.t", pa.schema([("id", pa.int64()), ("v", pa.string())]))
        lake.append("main.t", pa.table({"id": [1, 2], "v": ["a", None]}))
        lake.append("main.t", pa.table({"id": list(range(3, 40)), "v": ["p"] * 37}))
    assert _duck_rows(path, "SELECT count(*), sum(id), count(v) FROM lake.t") == [(39, sum(range(1, 40)), 38)]
    # the catalog we created has DuckDB's own column types
    ref = str(tmp_path / "ref.ducklake")
    con = connect_duckdb()
    con.execute(f"ATTACH {sql_string('ducklake:' + ref)} AS r")
    con.close()
    query = (
        "SELECT table_name, column_name, data_type FROM information_schema.columns "
        "WHERE table_name LIKE 'ducklake_%' AND table_name NOT LIKE 'ducklake_inlined%' ORDER BY ALL"
    )
    import duckdb

    def columns(p: str) -> list[tuple]:
        c = duckdb.connect(p, read_only=True)
        try:
            return c.execute(query).fetchall()
        finally:
            c.close()

    ours, theirs = columns(path), columns(ref)
    assert [r for r in ours if r[0] != "ducklake_app_progress"] == theirs


_HOLDER = textwrap.dedent(
    """
    import sys, time
    from pyspark_ducklake.duckdb_attach import connect_duckdb
    con = connect_duckdb()
    path = sys.argv[1].replace("'", "''")
    con.execute(f"ATTACH 'ducklake:{path}' AS lake")
    print("held", flush=True)
    sys.stdin.readline()
    """
)


def test_lock_held_by_another_process(duck_lake: str) -> None:
    lake = pdl.connect(f"ducklake:{duck_lake}")  # open between transactions: the file is free
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, duck_lake], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        started = time.monotonic()
        with expect_bad_input("catalog-duckdb-locked", watch=[os.path.dirname(duck_lake)]) as info:
            pdl.connect(f"ducklake:{duck_lake}")
        assert isinstance(info.value, CatalogLockedError) and f"held by process {holder.pid} (" in str(info.value)
        assert time.monotonic() - started < 30  # a bounded wait, never a hang
        assert "SQLite/PostgreSQL" in str(info.value)
        # a lake opened before: its append fails the same way, and the Parquet file it wrote is removed
        with expect_bad_input("catalog-duckdb-locked", watch=[os.path.dirname(duck_lake)]):
            lake.append("main.t", pa.table({"id": pa.array(range(100, 150), pa.int32())}))
    finally:
        holder.communicate("\n", timeout=30)
        lake.close()
    # released: we open it again
    with pdl.connect(f"ducklake:{duck_lake}") as lake:
        assert lake.scan("main.t").num_rows == 40


def test_missing_file_without_data_path_creates_nothing(tmp_path) -> None:
    path = tmp_path / "missing.ducklake"
    with pytest.raises(InvalidOptionError, match="is new: pass data_path"):
        pdl.connect(f"ducklake:{path}")
    assert not path.exists() and os.listdir(tmp_path) == []


def test_duckdb_database_that_is_not_a_lake(tmp_path) -> None:
    import duckdb

    path = str(tmp_path / "other.ducklake")
    c = duckdb.connect(path)
    c.execute("CREATE TABLE people (name VARCHAR)")
    c.close()
    with pytest.raises(NotADuckLakeCatalogError, match="holds no DuckLake catalog but has other tables"):
        pdl.connect(f"ducklake:{path}", data_path=str(tmp_path / "files"))
    c = duckdb.connect(path, read_only=True)
    assert c.execute("SELECT table_name FROM information_schema.tables").fetchall() == [("people",)]
    c.close()


def test_change_feed_and_every_snapshot_equal_duckdbs(duck_lake: str) -> None:
    with pdl.connect(f"ducklake:{duck_lake}") as lake:
        lake.append("main.t", pa.table({"id": pa.array([300], pa.int32()), "v": ["ours"]}))
        snapshots = [s.snapshot.snapshot_id for s in lake.snapshots()]
        last = snapshots[-1]
        ours = lake.table_changes("main.t", 0, last, columns=["id", "v"])
        at = {
            s: sorted(lake.scan("main.t", snapshot=s, columns=["id"]).column("id").to_pylist()) for s in snapshots[2:]
        }
    theirs = _duck_rows(
        duck_lake,
        f"SELECT id, v, change_type, snapshot_id, rowid FROM ducklake_table_changes('lake', 'main', 't', 0, {last})",
    )
    mine = zip(
        *(ours.column(c).to_pylist() for c in ("id", "v", "_change_type", "_snapshot_id", "_rowid")), strict=True
    )
    assert sorted(mine) == sorted(theirs)
    for snapshot, ids in at.items():
        assert ids == [
            r[0] for r in _duck_rows(duck_lake, f"SELECT id FROM lake.t AT (VERSION => {snapshot}) ORDER BY id")
        ]


def test_threads_of_one_process_commit_concurrently(duck_lake: str) -> None:
    from concurrent.futures import ThreadPoolExecutor

    with pdl.connect(f"ducklake:{duck_lake}", retry_wait_ms=5) as lake:

        def append(i: int) -> None:  # odd: one inlined row; even: a Parquet file of 30 rows
            rows = [1000 + i] if i % 2 else range(10000 + 100 * i, 10030 + 100 * i)
            lake.append("main.t", pa.table({"id": pa.array(rows, pa.int32())}))

        with ThreadPoolExecutor(4) as pool:
            list(pool.map(append, range(16)))
        ids = lake.scan("main.t", columns=["id"]).column("id").to_pylist()
    assert len([i for i in ids if i >= 1000]) == 8 + 8 * 30
    # the last connection closed the file: DuckDB (in this very process) attaches it
    assert _duck_rows(duck_lake, "SELECT count(*) FROM lake.t WHERE id >= 1000") == [(8 + 8 * 30,)]


def test_duckdb_inlined_variants_read_equal_and_flush(tmp_path) -> None:
    """DuckDB inlines VARIANT natively in a DuckDB file (not on SQLite/PostgreSQL): we read every shape equal to
    DuckDB's read, append (to Parquet: we never inline VARIANT) and flush its inlined rows to Parquet."""
    from pyspark_ducklake.io.variant import decode
    from tests.conformance.test_variant import SHAPES, norm, shape_sql

    path = str(tmp_path / "v.ducklake")
    con = connect_duckdb()
    try:
        con.execute(f"ATTACH {sql_string('ducklake:' + path)} AS lake (DATA_INLINING_ROW_LIMIT 100)")
        con.execute("CREATE TABLE lake.t (id INTEGER, v VARIANT)")
        # DuckDB 1.5.5 cannot inline shape 7 (a JSON null inside a list of objects: "Cannot deduce template type"),
        # and after that failed commit the process keeps the file attached: it is left out
        shapes = [i for i in range(len(SHAPES)) if i != 7]
        con.execute("INSERT INTO lake.t VALUES " + ", ".join(f"({i}, {shape_sql(i)})" for i in shapes))
    finally:
        con.close()
    assert _duck_rows(path, "SELECT count(*) FROM ducklake_list_files('lake', 't')") == [(0,)]  # all inlined

    def duck_values() -> list:
        return sorted((i, norm(v)) for i, v in _duck_rows(path, "SELECT id, v FROM lake.t"))

    def our_values(lake: pdl.Lake) -> list:
        rows = lake.scan("main.t").to_pylist()
        return sorted(
            (r["id"], None if r["v"] is None else norm(decode(r["v"]["metadata"], r["v"]["value"]))) for r in rows
        )

    expected = duck_values()
    with pdl.connect(f"ducklake:{path}") as lake:
        assert our_values(lake) == expected
        feed = lake.table_changes("main.t", 0)
        assert feed.num_rows == len(shapes)
        first = lake.scan("main.t").slice(0, 1)
        lake.append("main.t", first.set_column(0, "id", pa.array([999], pa.int32())))
        lake.flush_inlined_data("main.t")
        after = our_values(lake)
    assert after == duck_values() == sorted([*expected, (999, expected[0][1])])
    assert _duck_rows(path, "SELECT count(*) FROM ducklake_list_files('lake', 't')") == [(2,)]


def test_lake_attached_by_duckdb_in_this_process(duck_lake: str) -> None:
    con = connect_duckdb()
    try:
        _attach(con, duck_lake)
        with expect_bad_input("catalog-duckdb-locked", watch=[os.path.dirname(duck_lake)]) as info:
            pdl.connect(f"ducklake:{duck_lake}")
        assert "a DuckDB connection of this process" in str(info.value)
    finally:
        con.close()


def test_schema_changes_partitioning_and_maintenance(tmp_path) -> None:
    import datetime as dt

    path = str(tmp_path / "m.ducklake")
    with pdl.connect(f"ducklake:{path}", data_path=str(tmp_path / "files")) as lake:
        lake.create_table("main.t", pa.schema([("id", pa.int64()), ("v", pa.string())]))
        for i in range(4):
            lake.append("main.t", pa.table({"id": list(range(i * 20, i * 20 + 20)), "v": ["x"] * 20}))
        lake.append("main.t", pa.table({"id": [1000], "v": ["inl"]}))  # inlined, then a new schema version
        lake.add_column("main.t", "w", pa.int32())
        lake.append("main.t", pa.table({"id": [1001], "v": ["inl2"], "w": [5]}))
        lake.rename_column("main.t", "v", "vv")
        lake.delete("main.t", [("id", "<", 5)])
        merged = lake.merge_adjacent_files("main.t")
        lake.expire_snapshots(older_than=dt.timedelta(0))
        cleaned = lake.cleanup_old_files(older_than=dt.timedelta(0))
        assert lake.orphan_files(older_than=0) == []
        lake.set_partitioning("main.t", ["w"])
        lake.append("main.t", pa.table({"id": list(range(2000, 2030)), "vv": ["p"] * 30, "w": [1] * 15 + [2] * 15}))
        lake.flush_inlined_data()
        ours = sorted(lake.scan("main.t").to_pylist(), key=lambda r: r["id"])
    assert merged.groups and cleaned.files
    theirs = _duck_rows(path, "SELECT id, vv, w FROM lake.t ORDER BY id")
    assert theirs == [(r["id"], r["vv"], r["w"]) for r in ours]
    assert len(theirs) == 80 - 5 + 2 + 30 and (1000, "inl", None) in theirs and (1001, "inl2", 5) in theirs
