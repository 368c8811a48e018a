"""The stats strings and inlined-table encodings agree with what DuckDB 1.5.5's ducklake extension does.

DuckDB is the oracle throughout:

1. Text: our rendering of every type (and of LIST/STRUCT/MAP) equals ``CAST(value AS VARCHAR)``, DuckDB's
   ``CAST(our_text AS <type>)`` gives back the original value, and our parsing of DuckDB's text does too.
2. Stats: ``array_min_max`` / ``render_stat`` / ``widen`` give the strings DuckDB writes into
   ``ducklake_file_column_stats`` and ``ducklake_table_column_stats`` (Parquet and inlined inserts).
3. Inlined tables (SQLite and PostgreSQL): ``decode_values`` of the raw rows DuckDB stored equals what DuckDB
   reads, and rows overwritten in place with ``encode_values`` read back in DuckDB as the original values.
"""

from __future__ import annotations

import datetime as dt
import math
import sqlite3
import uuid
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pytest
import sqlalchemy as sa
from sqlalchemy.dialects import sqlite as sqlite_dialect

from pyspark_ducklake.catalog.inlined_codec import (
    decode_values,
    encode_values,
    inlined_select_expression,
    inlined_sql_type,
    python_to_arrow,
    render_nested,
)
from pyspark_ducklake.catalog.stats_values import (
    DATE_INFINITY,
    TIMESTAMP_INFINITY,
    array_min_max,
    duckdb_text,
    from_python,
    widen,
)
from pyspark_ducklake.catalog.types import Column, arrow_type
from tests.support.duckdb_types import connect, duckdb_type_sql, quote_identifier

UTC = dt.timezone.utc
NAN = float("nan")
INF = float("inf")


def _leaf(name: str, type_: str) -> Column:
    return Column(0, name, type_)


def _list(name: str, child: Column) -> Column:
    return Column(0, name, "list", children=(Column(0, "element", child.type, children=child.children),))


def _struct(name: str, *children: Column) -> Column:
    return Column(0, name, "struct", children=children)


def _map(name: str, key: Column, value: Column) -> Column:
    return Column(
        0,
        name,
        "map",
        children=(
            Column(0, "key", key.type, children=key.children),
            Column(0, "value", value.type, children=value.children),
        ),
    )


STRINGS = [
    "it's",
    'say "hi"',
    "back\\slash",
    "a,b",
    "[x]",
    "{y}",
    "k:v",
    "a=b",
    " lead",
    "trail ",
    "",
    "NULL",
    "null",
    "ünï ✓",
    "'",
    "\\",
    "\\'",
    "x y",
    "\n",
    "a\tb",
    "''",
    '"',
    "(p)",
    " ",
    "a\\",
    "\\x",
    "it''s",
    "x" * 300,
]

# (column, values): every DuckLake type with its awkward values; NULL rows are added by padding.
CASES: list[tuple[Column, list[Any]]] = [
    (_leaf("b", "boolean"), [True, False]),
    (_leaf("i8", "int8"), [-128, 127, 0]),
    (_leaf("i16", "int16"), [-32768, 32767]),
    (_leaf("i32", "int32"), [-(2**31), 2**31 - 1]),
    (_leaf("i64", "int64"), [-(2**63), 2**63 - 1]),
    (_leaf("u8", "uint8"), [0, 255]),
    (_leaf("u16", "uint16"), [0, 65535]),
    (_leaf("u32", "uint32"), [0, 2**32 - 1]),
    (_leaf("u64", "uint64"), [0, 2**64 - 1]),
    (_leaf("h", "int128"), [-(10**38 - 1), 10**38 - 1, 0]),
    (_leaf("uh", "uint128"), [0, 10**38 - 1]),
    (_leaf("f32", "float32"), [NAN, INF, -INF, -0.0, 0.0, 1.0, 33.333332, 3.4028235e38, 1e-45, 334609.625, 1e16]),
    (_leaf("f64", "float64"), [NAN, INF, -INF, -0.0, 1.0, 0.1, 1e308, 5e-324, 1e16, 1e-5, 123456789.0]),
    (_leaf("fz", "float64"), [0.0, -0.0, 0.0]),
    (_leaf("fz2", "float64"), [-0.0, 0.0]),
    # only -0.0: DuckDB 1.5.5 records '-0.0' as min and max (of equal values, the first one seen), in files and inlined
    (_leaf("fzn", "float64"), [-0.0, -0.0]),
    (_leaf("fzn32", "float32"), [-0.0]),
    (_leaf("fzm", "float64"), [-1.0, -0.0, NAN]),
    (
        _leaf("d18", "decimal(18,3)"),
        [Decimal("123456789012345.678"), Decimal("-999999999999999.999"), Decimal("0.000")],
    ),
    (
        _leaf("d38", "decimal(38,10)"),
        [
            Decimal("9999999999999999999999999999.9999999999"),
            Decimal("-9999999999999999999999999999.9999999999"),
            Decimal("-0.0000000001"),
        ],
    ),
    (_leaf("d44", "decimal(4,4)"), [Decimal("0.5000"), Decimal("-0.9999")]),
    (_leaf("d41", "decimal(4,1)"), [Decimal("-999.9"), Decimal("0.5")]),
    (
        _leaf("dt", "date"),
        [
            dt.date(2024, 2, 29),
            dt.date(1, 1, 1),
            dt.date(9999, 12, 31),
            dt.date(1969, 12, 31),
            DATE_INFINITY,
            -DATE_INFINITY,
            -800000,
            3000000,
        ],
    ),
    (_leaf("tm", "time"), [dt.time(23, 59, 59, 999999), dt.time(0, 0), dt.time(12, 30, 1, 5), 86400 * 10**6]),
    (
        _leaf("ts", "timestamp"),
        [
            dt.datetime(2024, 1, 1, 10, 0, 0, 123456),
            dt.datetime(1, 1, 1),
            dt.datetime(1969, 12, 31, 23, 59, 59, 999999),
            TIMESTAMP_INFINITY,
            -TIMESTAMP_INFINITY,
            6311390400000000000,
            -70000000000000000,
        ],
    ),
    (_leaf("ts_s", "timestamp_s"), [dt.datetime(2024, 1, 1, 10, 0, 1), dt.datetime(1900, 1, 1), -62135596800]),
    (
        _leaf("ts_ms", "timestamp_ms"),
        [dt.datetime(2024, 1, 1, 10, 0, 0, 123000), dt.datetime(1950, 6, 1, 0, 0, 0, 500000)],
    ),
    (
        _leaf("ts_ns", "timestamp_ns"),
        [1704103200123456789, -1, -9000000000000000001, 100, TIMESTAMP_INFINITY, -TIMESTAMP_INFINITY],
    ),
    (
        _leaf("tz", "timestamptz"),
        [
            dt.datetime(2024, 1, 1, 8, 0, 0, 500000, tzinfo=UTC),
            dt.datetime(1, 1, 1, tzinfo=UTC),
            dt.datetime(2024, 6, 1, 12, 0, tzinfo=dt.timezone(dt.timedelta(hours=5, minutes=30))),
            TIMESTAMP_INFINITY,
            -TIMESTAMP_INFINITY,
        ],
    ),
    (
        _leaf("iv", "interval"),
        [
            pa.MonthDayNano([14, 3, 14706789000000]),
            pa.MonthDayNano([-13, -2, -1500000000]),
            pa.MonthDayNano([0, 0, 0]),
            pa.MonthDayNano([0, 0, 360000000000000]),
            pa.MonthDayNano([1, -1, 1000]),
        ],
    ),
    (_leaf("v", "varchar"), STRINGS),
    (_leaf("bl", "blob"), [b"\x00\xffab", b"", bytes(range(256)), b"'\\\"", b"NULL", b"\xff" * 300]),
    (
        _leaf("u", "uuid"),
        [uuid.UUID("01234567-89ab-cdef-0123-456789abcdef"), uuid.UUID(int=0), uuid.UUID(int=2**128 - 1)],
    ),
    (_leaf("j", "json"), ['{"a": [1,2]}', "null", '"s"', "[1, 2.50]", '{"k":"it\'s"}']),
    (_list("li", _leaf("element", "int32")), [[1, None, 3], [], [None]]),
    (_list("lv", _leaf("element", "varchar")), [STRINGS, [None, "NULL", "nUlL"], []]),
    (
        _struct("st", _leaf("a", "int32"), _leaf("b", "varchar")),
        [{"a": 1, "b": "it's"}, {"a": None, "b": None}, {"a": 2, "b": "NULL"}, {"a": 3, "b": "{'a': 1}"}],
    ),
    (
        _struct("we ird", _leaf("it's", "int32"), _leaf('q"x', "varchar"), _leaf("a:b=c", "float32")),
        [{"it's": 1, 'q"x': "v", "a:b=c": NAN}, {"it's": None, 'q"x': "", "a:b=c": -0.0}],
    ),
    (
        _map("mp", _leaf("key", "varchar"), _leaf("value", "int32")),
        [[("k1", 1), ("k 2", None)], [], [(s, i) for i, s in enumerate(STRINGS)]],
    ),
    (_map("mi", _leaf("key", "int32"), _leaf("value", "float64")), [[(1, NAN), (2, -0.0), (3, None)]]),
    (
        _struct(
            "nest",
            _list("l", _map("element", _leaf("key", "varchar"), _list("value", _leaf("element", "float64")))),
            _leaf("t", "timestamptz"),
            _struct("s", _leaf("x", "blob"), _leaf("y", "uuid"), _leaf("d", "date"), _leaf("i", "interval")),
        ),
        [
            {
                "l": [[("a", [1.5, None, INF]), ("b,c", None), ("", [])], None, []],
                "t": dt.datetime(2024, 1, 1, tzinfo=UTC),
                "s": {"x": b"\x00'\\", "y": uuid.UUID(int=5), "d": -DATE_INFINITY, "i": pa.MonthDayNano([1, 2, 3000])},
            },
            {"l": None, "t": None, "s": None},
            {"l": [None], "t": TIMESTAMP_INFINITY, "s": {"x": None, "y": None, "d": None, "i": None}},
        ],
    ),
    (_list("ll", _list("element", _leaf("element", "varchar"))), [[["a", None], None, [], ["[x]", "y z"]], [None]]),
    (_list("lj", _leaf("element", "json")), [['{"a":1}', "[1,2]", '"x y"', "null"], []]),
    (_list("lt", _leaf("element", "timestamp_ns")), [[1704103200123456789, None, -1]]),
]


def numbered(columns: list[Column]) -> list[Column]:
    """The columns with DuckLake's depth-first ids (from 1), as DuckDB assigns them on CREATE TABLE."""
    counter = [0]

    def number(c: Column) -> Column:
        counter[0] += 1
        cid = counter[0]
        children = tuple(number(child) for child in c.children)
        return Column(cid, c.name, c.type, c.nulls_allowed, children)

    return [number(c) for c in columns]


COLUMNS = numbered([c for c, _ in CASES])
ROWS = max(len(v) for _, v in CASES) + 1  # every column also gets NULLs


def padded(values: list[Any], n: int = ROWS) -> list[Any]:
    return (values + [None] * n)[:n]


def _parquet_safe(column: Column, value: Any) -> Any:
    """DuckDB cannot write negative intervals to Parquet ("Parquet files do not support negative intervals")."""
    if column.type == "interval" and value is not None and min(value.months, value.days, value.nanoseconds) < 0:
        return None
    return value


def source_table(columns: list[Column], rows: int = ROWS, *, rotate: int = 0, parquet: bool = False) -> pa.Table:
    """One Arrow table with every case column (values rotated by ``rotate`` rows), plus a row index ``i``."""
    arrays: dict[str, pa.Array] = {"i": pa.array(range(rows), pa.int64())}
    for column, (_, values) in zip(columns, CASES, strict=True):
        vals = padded(values, rows)
        if parquet:
            vals = [_parquet_safe(column, v) for v in vals]
        vals = vals[rotate:] + vals[:rotate]
        arrays[column.name] = python_to_arrow(column, vals)
    return pa.table(arrays)


def q(name: str) -> str:
    return quote_identifier(name)


@pytest.fixture()
def duck() -> Iterator[duckdb.DuckDBPyConnection]:
    con = connect()
    yield con
    con.close()


@pytest.fixture(scope="module")
def cast_duck() -> Iterator[duckdb.DuckDBPyConnection]:
    """One connection for every case of test_text_matches_duckdb_cast (a connection per case was most of each
    case's time): the cases only register Arrow tables under the same names, replaced case by case, and run
    SELECTs; nothing is attached, created or set."""
    con = connect()
    yield con
    con.close()


def our_text(column: Column, value: Any) -> str | None:
    if value is None:
        return None
    if column.is_nested:
        return render_nested(column, value)
    return duckdb_text(column, from_python(column, value))


def mismatches(con: duckdb.DuckDBPyConnection, table: str, left: str, right: str) -> list[Any]:
    """Rows of ``table`` where columns ``left`` and ``right`` differ in value or in DuckDB's text (-0.0, NaN)."""
    return con.execute(
        f"SELECT i FROM {table} WHERE NOT ({left} IS NOT DISTINCT FROM {right} "
        f"AND CAST({left} AS VARCHAR) IS NOT DISTINCT FROM CAST({right} AS VARCHAR)) ORDER BY i"
    ).fetchall()


# ------------------------------------------------------------------------------------------------------------
# 1. Text of single and nested values, both directions.


@pytest.mark.parametrize("case", range(len(CASES)), ids=[c.name for c, _ in CASES])
def test_text_matches_duckdb_cast(cast_duck: duckdb.DuckDBPyConnection, case: int) -> None:
    duck = cast_duck
    column = COLUMNS[case]
    values = padded(CASES[case][1], len(CASES[case][1]) + 1)
    src = pa.table({"i": pa.array(range(len(values)), pa.int64()), "c": python_to_arrow(column, values)})
    duck.register("src", src)
    duck_text = [r[0] for r in duck.execute("SELECT CAST(c AS VARCHAR) FROM src ORDER BY i").fetchall()]
    ours = [our_text(column, v) for v in values]
    sql_type = duckdb_type_sql(column)
    # Ours differs on purpose only where DuckDB would not read its own text back: a bare backslash ending a map
    # key escapes the quote opening the value, and quotes inside a nested child do not hide its brackets.
    for i, (o, d) in enumerate(zip(ours, duck_text, strict=True)):
        if o != d:
            assert _map_key_ends_with_backslash(column, values[i]) or not _duckdb_reads_back(duck, d, sql_type, i)

    with_text = src.append_column("t", pa.array(ours, pa.string()))
    duck.register("with_text", with_text)
    back = duck.execute(
        f"SELECT i FROM with_text WHERE NOT (CAST(t AS {sql_type}) IS NOT DISTINCT FROM c "
        f"AND CAST(CAST(t AS {sql_type}) AS VARCHAR) IS NOT DISTINCT FROM CAST(c AS VARCHAR))"
    ).fetchall()
    assert back == [], f"DuckDB reads our text differently in rows {back}"

    decoded = decode_values(column, duck_text, "sqlite")
    assert decoded.type == arrow_type(column)
    duck.register("decoded", src.append_column("d", decoded))
    assert mismatches(duck, "decoded", "d", "c") == []


def _duckdb_reads_back(duck: duckdb.DuckDBPyConnection, text: str, sql_type: str, row: int) -> bool:
    try:
        got = duck.execute(
            f"SELECT TRY_CAST(? AS {sql_type}) IS NOT DISTINCT FROM c FROM src WHERE i = ?", [text, row]
        ).fetchone()
    except duckdb.Error:
        return False
    return got is not None and got[0] is True


def _map_key_ends_with_backslash(column: Column, value: Any) -> bool:
    if value is None or not column.is_nested:
        return False
    if column.type == "list":
        return any(_map_key_ends_with_backslash(column.children[0], v) for v in value)
    if column.type == "struct":
        return any(_map_key_ends_with_backslash(c, value.get(c.name)) for c in column.children)
    val = column.children[1]
    return any((isinstance(k, str) and k.endswith("\\")) or _map_key_ends_with_backslash(val, v) for k, v in value)


# ------------------------------------------------------------------------------------------------------------
# 2. Stats strings DuckDB writes.


def leaf_arrays(column: Column, array: pa.Array) -> list[tuple[Column, pa.Array]]:
    """(leaf column, its values) as a Parquet writer sees them: nested values flattened, NULL parents dropped."""
    if not column.is_nested:
        return [(column, array)]
    if column.type == "list":
        return leaf_arrays(column.children[0], array.flatten())
    if column.type == "map":
        return leaf_arrays(column.children[0], array.keys) + leaf_arrays(column.children[1], array.items)
    out: list[tuple[Column, pa.Array]] = []
    for child, values in zip(column.children, array.flatten(), strict=True):
        out += leaf_arrays(child, values)
    return out


def all_leaves(table: pa.Table, columns: list[Column]) -> dict[int, tuple[Column, pa.Array]]:
    out: dict[int, tuple[Column, pa.Array]] = {}
    for column in columns:
        for leaf, arr in leaf_arrays(column, table.column(column.name).combine_chunks()):
            out[leaf.column_id] = (leaf, arr)
    return out


def create_lake(con: duckdb.DuckDBPyConnection, attach: str, data_path: Path, inline_limit: int) -> None:
    con.execute(f"ATTACH '{attach}' AS lake (DATA_PATH '{data_path}', DATA_INLINING_ROW_LIMIT {inline_limit})")
    ddl = ", ".join(f"{q(c.name)} {duckdb_type_sql(c)}" for c in COLUMNS)
    con.execute(f"CREATE TABLE lake.t ({ddl})")


def insert(con: duckdb.DuckDBPyConnection, table: pa.Table) -> None:
    con.register("batch", table)
    names = ", ".join(q(c.name) for c in COLUMNS)
    con.execute(f"INSERT INTO lake.t ({names}) SELECT {names} FROM batch ORDER BY i")
    con.unregister("batch")


def test_parquet_stats_match_duckdb(duck: duckdb.DuckDBPyConnection, tmp_path: Path) -> None:
    create_lake(duck, f"ducklake:sqlite:{tmp_path}/cat.db", tmp_path / "data", 0)
    batches = [source_table(COLUMNS, parquet=True), source_table(COLUMNS, rotate=3, parquet=True)]
    for batch in batches:
        insert(duck, batch)
    duck.execute("DETACH lake")
    cat = sqlite3.connect(tmp_path / "cat.db")
    files = [r[0] for r in cat.execute("SELECT data_file_id FROM ducklake_data_file ORDER BY data_file_id")]
    assert len(files) == len(batches)
    expected_table: dict[int, tuple[str | None, str | None]] = {}
    failures = []
    for file_id, batch in zip(files, batches, strict=True):
        stored = {
            r[0]: (r[1], r[2], r[3])
            for r in cat.execute(
                "SELECT column_id, min_value, max_value, contains_nan FROM ducklake_file_column_stats "
                "WHERE data_file_id = ?",
                (file_id,),
            )
        }
        for cid, (leaf, arr) in all_leaves(batch, COLUMNS).items():
            lo, hi, nan = array_min_max(leaf, arr)
            got = stored.get(cid, (None, None, None))
            if (lo, hi) != got[:2] or (nan is not None and bool(nan) != bool(got[2])):
                failures.append((leaf.name, leaf.type, (lo, hi, nan), got))
            old = expected_table.get(cid, (None, None))
            expected_table[cid] = widen(leaf, old[0], old[1], lo, hi)
    assert failures == []
    table_stats = {
        r[0]: (r[1], r[2])
        for r in cat.execute("SELECT column_id, min_value, max_value FROM ducklake_table_column_stats")
    }
    for cid, expected in expected_table.items():
        assert table_stats.get(cid, (None, None)) == expected, cid


def test_inlined_stats_match_duckdb(duck: duckdb.DuckDBPyConnection, tmp_path: Path) -> None:
    create_lake(duck, f"ducklake:sqlite:{tmp_path}/cat.db", tmp_path / "data", 100)
    batches = [source_table(COLUMNS), source_table(COLUMNS, rotate=5)]
    expected: dict[int, tuple[str | None, str | None]] = {}
    cat = sqlite3.connect(tmp_path / "cat.db")
    for batch in batches:
        insert(duck, batch)
        for cid, (leaf, arr) in all_leaves(batch, COLUMNS).items():
            lo, hi, _ = array_min_max(leaf, arr, inlined=True)
            old = expected.get(cid, (None, None))
            expected[cid] = widen(leaf, old[0], old[1], lo, hi)
        stored = {
            r[0]: (r[1], r[2])
            for r in cat.execute("SELECT column_id, min_value, max_value FROM ducklake_table_column_stats")
        }
        names = {c.column_id: c for top in COLUMNS for c in top.walk()}
        failures = [
            (names[cid].name, names[cid].type, want, stored.get(cid, (None, None)))
            for cid, want in expected.items()
            if stored.get(cid, (None, None)) != want
        ]
        assert failures == []


# ------------------------------------------------------------------------------------------------------------
# 3. Raw rows of DuckDB's inlined tables.


# DuckDB's inlined writer renders STRUCT leaves as SQL (CAST('2024-01-01' AS DATE), CAST('nan' AS VARCHAR), 'it''s'
# field names) and quotes JSON list elements; DuckDB then fails to read these columns (on PostgreSQL with an
# INTERNAL error that invalidates the database). decode_values unwraps them instead.
BROKEN_BY_DUCKDB_WRITER = ("we ird", "nest", "lj")


def inlined_table(engine: sa.Engine, backend: str) -> sa.Table:
    with engine.connect() as conn:
        name = conn.execute(
            sa.text("SELECT table_name FROM ducklake_inlined_data_tables ORDER BY schema_version DESC LIMIT 1")
        ).scalar_one()
    cols = [
        sa.Column("row_id", sa.BigInteger),
        sa.Column("begin_snapshot", sa.BigInteger),
        sa.Column("end_snapshot", sa.BigInteger),
    ]
    cols += [sa.Column(c.name, inlined_sql_type(c, backend), key=f"c{c.column_id}") for c in COLUMNS]
    return sa.Table(name, sa.MetaData(), *cols)


def check_inlined_round_trip(
    duck: duckdb.DuckDBPyConnection, attach: str, data_path: Path, engine: sa.Engine, backend: str
) -> None:
    create_lake(duck, attach, data_path, 100)
    src = source_table(COLUMNS)
    # DuckDB's own writer cannot inline a SQL NULL inside a JSON list, and mangles apostrophes inside structs;
    # what it stored is compared with what it reads, whatever that is.
    insert(duck, src)
    duck.register("batch_src", src)
    table = inlined_table(engine, backend)
    select = sa.select(
        table.c.row_id, *[inlined_select_expression(c, backend, table.c[f"c{c.column_id}"]) for c in COLUMNS]
    ).order_by(table.c.row_id)
    with engine.connect() as conn:
        rows = conn.execute(select).all()
    assert len(rows) == ROWS

    # decode_values gives what DuckDB reads from its own rows
    decoded = {"i": pa.array([r[0] for r in rows], pa.int64())}
    for k, column in enumerate(COLUMNS):
        decoded[column.name] = decode_values(column, [r[k + 1] for r in rows], backend)
        assert decoded[column.name].type == arrow_type(column)
    duck.register("decoded", pa.table(decoded))
    for column in COLUMNS:
        if column.name in BROKEN_BY_DUCKDB_WRITER:
            continue
        bad = duck.execute(
            f"SELECT d.i FROM decoded d JOIN (SELECT rowid AS i, * FROM lake.t) v USING (i) "
            f"WHERE NOT (d.{q(column.name)} IS NOT DISTINCT FROM v.{q(column.name)} "
            f"AND CAST(d.{q(column.name)} AS VARCHAR) IS NOT DISTINCT FROM CAST(v.{q(column.name)} AS VARCHAR))"
        ).fetchall()
        assert bad == [], f"{column.name}: decode differs from DuckDB in rows {bad}"
    for name in ("we ird", "lj"):  # recovered exactly (nest's blob inside a struct is garbled by DuckDB's writer)
        bad = duck.execute(
            f"SELECT d.i FROM decoded d JOIN batch_src s USING (i) WHERE NOT (d.{q(name)} IS NOT DISTINCT FROM "
            f"s.{q(name)} AND CAST(d.{q(name)} AS VARCHAR) IS NOT DISTINCT FROM CAST(s.{q(name)} AS VARCHAR))"
        ).fetchall()
        assert bad == [], f"{name}: DuckDB's broken rows not recovered in rows {bad}"

    # overwrite the stored values with encode_values output: DuckDB must read the source values back exactly
    encoded = {f"c{c.column_id}": encode_values(c, src.column(c.name), backend) for c in COLUMNS}
    duck.execute("DETACH lake")
    with engine.begin() as conn:
        for r in rows:
            i = r[0]
            conn.execute(sa.update(table).where(table.c.row_id == i).values({k: v[i] for k, v in encoded.items()}))
    duck.execute(f"ATTACH '{attach}' AS lake (DATA_PATH '{data_path}')")
    duck.register("src", src)
    for column in COLUMNS:
        bad = duck.execute(
            f"SELECT s.i FROM src s JOIN (SELECT rowid AS i, * FROM lake.t) v USING (i) "
            f"WHERE NOT (s.{q(column.name)} IS NOT DISTINCT FROM v.{q(column.name)} "
            f"AND CAST(s.{q(column.name)} AS VARCHAR) IS NOT DISTINCT FROM CAST(v.{q(column.name)} AS VARCHAR))"
        ).fetchall()
        assert bad == [], f"{column.name}: DuckDB reads our encoding differently in rows {bad}"
    duck.execute("DETACH lake")


def test_duckdb_cannot_read_its_own_inlined_struct_sql(duck: duckdb.DuckDBPyConnection, tmp_path: Path) -> None:
    """Documents the DuckDB writer bug worked around above (SQLite; PostgreSQL crashes the DuckDB instance)."""
    create_lake(duck, f"ducklake:sqlite:{tmp_path}/cat.db", tmp_path / "data", 100)
    insert(duck, source_table(COLUMNS))
    for name in BROKEN_BY_DUCKDB_WRITER:
        with pytest.raises(duckdb.ConversionException):
            duck.execute(f"SELECT {q(name)} FROM lake.t").fetchall()


def test_sqlite_inlined_rows(duck: duckdb.DuckDBPyConnection, tmp_path: Path) -> None:
    engine = sa.create_engine(f"sqlite:///{tmp_path}/cat.db")
    try:
        check_inlined_round_trip(duck, f"ducklake:sqlite:{tmp_path}/cat.db", tmp_path / "data", engine, "sqlite")
    finally:
        engine.dispose()


@pytest.fixture()
def pg_database(pg_url: str) -> Iterator[sa.URL]:
    """A fresh database on the test server, dropped afterwards."""
    admin = sa.create_engine(pg_url, isolation_level="AUTOCOMMIT")
    name = f"codec_{uuid.uuid4().hex[:12]}"
    with admin.connect() as conn:
        conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    url = sa.make_url(pg_url).set(database=name)
    try:
        yield url
    finally:
        with admin.connect() as conn:
            conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def test_postgres_inlined_rows(duck: duckdb.DuckDBPyConnection, tmp_path: Path, pg_database: sa.URL) -> None:
    url = pg_database
    dsn = f"dbname={url.database} host={url.host or '127.0.0.1'} port={url.port or 5432} user={url.username}"
    if url.password:
        dsn += f" password={url.password}"
    engine = sa.create_engine(url)
    try:
        check_inlined_round_trip(duck, f"ducklake:postgres:{dsn}", tmp_path / "data", engine, "postgresql")
    finally:
        engine.dispose()


def test_postgres_inlined_ddl_types(duck: duckdb.DuckDBPyConnection, tmp_path: Path, pg_database: sa.URL) -> None:
    """inlined_sql_type renders the type names DuckDB itself declares on PostgreSQL."""
    url = pg_database
    dsn = f"dbname={url.database} host={url.host or '127.0.0.1'} port={url.port or 5432} user={url.username}"
    create_lake(duck, f"ducklake:postgres:{dsn}", tmp_path / "data", 100)
    duck.execute("DETACH lake")
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            name = conn.execute(sa.text("SELECT table_name FROM ducklake_inlined_data_tables")).scalar_one()
            declared: dict[str, str] = dict(
                conn.execute(
                    sa.text(
                        "SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute "
                        "WHERE attrelid = CAST(:t AS regclass) AND attnum > 0"
                    ),
                    {"t": name},
                ).all()
            )
            ours = {}
            for c in COLUMNS:
                ddl = sa.schema.CreateTable(
                    sa.Table("x", sa.MetaData(), sa.Column("c", inlined_sql_type(c, "postgresql")))
                )
                conn.execute(sa.text("DROP TABLE IF EXISTS x"))
                conn.execute(ddl)
                ours[c.name] = conn.execute(
                    sa.text(
                        "SELECT format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = 'x'::regclass "
                        "AND attname = 'c'"
                    )
                ).scalar_one()
            conn.rollback()
    finally:
        engine.dispose()
    assert {c.name: declared[c.name] for c in COLUMNS} == ours


def test_sqlite_inlined_ddl_types(duck: duckdb.DuckDBPyConnection, tmp_path: Path) -> None:
    """inlined_sql_type renders the type names DuckDB itself declares on SQLite."""
    create_lake(duck, f"ducklake:sqlite:{tmp_path}/cat.db", tmp_path / "data", 100)
    duck.execute("DETACH lake")
    cat = sqlite3.connect(tmp_path / "cat.db")
    name = cat.execute("SELECT table_name FROM ducklake_inlined_data_tables").fetchone()[0]
    declared = {r[1]: r[2] for r in cat.execute(f"PRAGMA table_info({name})")}
    dialect = sqlite_dialect.dialect()
    ours = {c.name: inlined_sql_type(c, "sqlite").compile(dialect=dialect) for c in COLUMNS}
    assert {c.name: declared[c.name] for c in COLUMNS} == ours


def test_nan_rendering_is_not_a_min(duck: duckdb.DuckDBPyConnection) -> None:
    """Sanity: DuckDB orders NaN above +inf, as widen() does."""
    assert duck.execute("SELECT 'nan'::DOUBLE > 'inf'::DOUBLE").fetchone() == (True,)
    assert math.isnan(float("nan"))


def test_duckdb_file_inlined_rows(duck: duckdb.DuckDBPyConnection, tmp_path: Path) -> None:
    """A DuckDB-file catalog's typed inlined columns: decode_values of DuckDB's rows equals DuckDB's read of them, and
    rows overwritten with encode_values read back in DuckDB as the source values (every case column)."""
    from pyspark_ducklake.catalog.location import create_catalog_engine, parse_location

    path = f"{tmp_path}/cat.ducklake"
    create_lake(duck, f"ducklake:{path}", tmp_path / "data", 100)
    src = source_table(COLUMNS)
    insert(duck, src)
    duck.execute("DETACH lake")
    # DuckDB's read of the file as stored: its checkpoint may flip the sign of a float zero next to the other zero
    # (0.0 stored as -0.0 and back, DuckDB 1.5.5), so what it reads after a re-attach is what the file holds
    duck.execute(f"ATTACH 'ducklake:{path}' AS lake")
    duck.execute("CREATE TEMP TABLE reference AS SELECT rowid AS i, * FROM lake.t")  # DuckDB's types, kept in memory
    duck.execute("DETACH lake")  # DuckDB and we never hold the file at once
    engine = create_catalog_engine(parse_location(f"ducklake:{path}"))
    try:
        table = inlined_table(engine, "duckdb")
        select = sa.select(
            table.c.row_id, *[inlined_select_expression(c, "duckdb", table.c[f"c{c.column_id}"]) for c in COLUMNS]
        ).order_by(table.c.row_id)
        with engine.connect() as conn:
            rows = conn.execute(select).all()
        assert len(rows) == ROWS
        decoded = {"i": pa.array([r[0] for r in rows], pa.int64())}
        for k, column in enumerate(COLUMNS):
            decoded[column.name] = decode_values(column, [r[k + 1] for r in rows], "duckdb")
            assert decoded[column.name].type == arrow_type(column)
        duck.register("decoded", pa.table(decoded))
        for column in COLUMNS:  # DuckDB's typed inlined writer has none of the text writers' bugs
            bad = duck.execute(
                f"SELECT d.i FROM decoded d JOIN reference v USING (i) "
                f"WHERE NOT (d.{q(column.name)} IS NOT DISTINCT FROM v.{q(column.name)} "
                f"AND CAST(d.{q(column.name)} AS VARCHAR) IS NOT DISTINCT FROM CAST(v.{q(column.name)} AS VARCHAR))"
            ).fetchall()
            assert bad == [], f"{column.name}: decode differs from DuckDB in rows {bad}"
        encoded = {f"c{c.column_id}": encode_values(c, src.column(c.name), "duckdb") for c in COLUMNS}
        with engine.begin() as conn:
            for r in rows:
                i = r[0]
                conn.execute(sa.update(table).where(table.c.row_id == i).values({k: v[i] for k, v in encoded.items()}))
    finally:
        engine.dispose()
    duck.execute(f"ATTACH 'ducklake:{path}' AS lake (DATA_PATH '{tmp_path / 'data'}')")
    for column in COLUMNS:  # exactly what DuckDB's own write of the source left (its -0.0 checkpoint quirk included)
        bad = duck.execute(
            f"SELECT s.i FROM reference s JOIN (SELECT rowid AS i, * FROM lake.t) v USING (i) "
            f"WHERE NOT (s.{q(column.name)} IS NOT DISTINCT FROM v.{q(column.name)} "
            f"AND CAST(s.{q(column.name)} AS VARCHAR) IS NOT DISTINCT FROM CAST(v.{q(column.name)} AS VARCHAR))"
        ).fetchall()
        assert bad == [], f"{column.name}: DuckDB reads our encoding differently in rows {bad}"
    duck.execute("DETACH lake")


def test_duckdb_file_inlined_ddl_types(duck: duckdb.DuckDBPyConnection, tmp_path: Path) -> None:
    """inlined_sql_type renders the types DuckDB itself declares for a DuckDB file's inlined columns."""
    path = f"{tmp_path}/cat.ducklake"
    create_lake(duck, f"ducklake:{path}", tmp_path / "data", 100)
    duck.execute("DETACH lake")
    con = duckdb.connect(path)
    try:
        name = con.execute("SELECT table_name FROM ducklake_inlined_data_tables").fetchone()[0]
        declared = dict(
            con.execute(
                "SELECT column_name, data_type FROM information_schema.columns WHERE table_name = ?", [name]
            ).fetchall()
        )
        from sqlalchemy.dialects import postgresql

        ddl = ", ".join(
            f"{q(c.name)} {inlined_sql_type(c, 'duckdb').compile(dialect=postgresql.dialect())}" for c in COLUMNS
        )
        con.execute(f"CREATE TEMP TABLE x ({ddl})")
        ours = dict(
            con.execute(
                "SELECT column_name, data_type FROM information_schema.columns WHERE table_name = 'x'"
            ).fetchall()
        )
    finally:
        con.close()
    assert {c.name: declared[c.name] for c in COLUMNS} == ours
