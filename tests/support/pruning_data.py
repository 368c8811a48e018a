"""Random tables and filters that stress file pruning: NaN, ±0.0, ±inf, NULL-only files, long strings (DuckDB
truncates their statistics), high code points, decimals against floats, dates against datetimes, time zones.

Used by the pruned-versus-unpruned comparisons in tests/unit/table/test_pruning.py (our files) and
tests/conformance/test_pruning_duckdb.py (DuckDB's files, and DuckDB's own filter over our statistics).
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import pyarrow as pa
from hypothesis import strategies as st

import pyspark_ducklake as pdl
from pyspark_ducklake.exceptions import DuckLakeError
from pyspark_ducklake.table.pruning import IN_VALUES_COMPARED
from pyspark_ducklake.table.scan import filter_expression

UTC = dt.timezone.utc
NAN = float("nan")
INF = float("inf")

SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("f", pa.float64()),
        ("g", pa.float32()),
        ("i", pa.int64()),
        ("d", pa.decimal128(10, 2)),
        ("s", pa.string()),
        ("b", pa.bool_()),
        ("dt", pa.date32()),
        ("ts", pa.timestamp("us", tz="UTC")),
    ]
)
DATA_COLUMNS = [n for n in SCHEMA.names if n != "id"]
DUCKDB_DDL = "id BIGINT, f DOUBLE, g FLOAT, i BIGINT, d DECIMAL(10,2), s VARCHAR, b BOOLEAN, dt DATE, ts TIMESTAMPTZ"

_FLOAT_SPECIAL = [NAN, -0.0, 0.0, INF, -INF, 1.0, -1.0, 2.5, 5.0, 1e300, -1e-300, 0.1]
_INT_SPECIAL = [0, -1, 5, 2**53, 2**53 + 1, 2**63 - 1, -(2**63)]
_CHARS = ["a", "b", "z", "~", "\x7f", "é", "\u20ac", "\U0010ffff"]


def _long_string() -> st.SearchStrategy[str]:
    # around DuckDB's 256-byte statistics limit, with ASCII and multi-byte tails (truncation cuts and increments)
    return st.builds(
        lambda head, char, n, tail: head + char * n + tail,
        st.sampled_from(["", "b", "z" * 200]),
        st.sampled_from(_CHARS),
        st.integers(60, 300),
        st.sampled_from(["", "a", "\U0010ffff", "~"]),
    )


VALUES: dict[str, st.SearchStrategy[Any]] = {
    "f": st.sampled_from(_FLOAT_SPECIAL) | st.floats(allow_nan=True),
    "g": st.sampled_from(_FLOAT_SPECIAL[:9]) | st.floats(width=32, allow_nan=True),
    "i": st.sampled_from(_INT_SPECIAL) | st.integers(-(2**63), 2**63 - 1),
    "d": st.decimals(min_value=-(10**8) + 1, max_value=10**8 - 1, places=2, allow_nan=False, allow_infinity=False),
    "s": st.sampled_from(["", "a", "b", "é", "\U0010ffff"]) | st.text(max_size=4) | _long_string(),
    "b": st.booleans(),
    "dt": st.dates(),
    "ts": st.datetimes(min_value=dt.datetime(1, 1, 2), max_value=dt.datetime(9999, 12, 30), timezones=st.just(UTC)),
}


@st.composite
def lake_files(draw: Callable[..., Any], max_files: int = 5) -> list[pa.Table]:
    """A few files' worth of rows; some columns of some files are all NULL."""
    files = []
    next_id = 0
    for _ in range(draw(st.integers(1, max_files))):
        n = draw(st.integers(1, 6))
        null_only = draw(st.sets(st.sampled_from(DATA_COLUMNS), max_size=2))
        columns: dict[str, list[Any]] = {"id": list(range(next_id, next_id + n))}
        for name in DATA_COLUMNS:
            if name in null_only:
                columns[name] = [None] * n
            else:
                columns[name] = draw(st.lists(st.none() | VALUES[name], min_size=n, max_size=n))
        next_id += n
        files.append(pa.table(columns, schema=SCHEMA))
    return files


def _filter_value(name: str, seen: list[Any]) -> st.SearchStrategy[Any]:
    """A value to compare ``name`` with: of the column's domain, one of the rows, or of a neighbouring type."""
    same = VALUES[name] | (st.sampled_from(seen) if seen else st.nothing())
    if name in ("f", "g"):
        return same | st.integers(-10, 10)
    if name == "i":
        return same | st.sampled_from([float(2**53), 0.5, -0.0])
    if name == "d":
        return same | st.sampled_from([0.1, 1.5, -0.0, NAN]) | st.builds(float, VALUES["d"])
    if name == "dt":
        return same | st.builds(lambda d: dt.datetime(d.year, d.month, d.day, 12), VALUES["dt"])
    if name == "ts":
        zones = st.sampled_from(
            [UTC, dt.timezone(dt.timedelta(hours=5, minutes=30)), dt.timezone(-dt.timedelta(hours=8))]
        )
        return same | st.builds(lambda t, z: t.astimezone(z), VALUES["ts"], zones)
    return same


def _in_lists(values: st.SearchStrategy[Any]) -> st.SearchStrategy[list[Any]]:
    """An ``in`` list: short (pruned value by value) or longer than ``IN_VALUES_COMPARED`` (pruned as a range)."""
    return st.lists(values, min_size=1, max_size=3) | st.lists(
        values, min_size=IN_VALUES_COMPARED + 1, max_size=IN_VALUES_COMPARED + 4
    )


@st.composite
def scan_filters(draw: Callable[..., Any], files: list[pa.Table]) -> list[Any]:
    """A DNF filter: one conjunction, sometimes two OR-ed."""

    def term() -> tuple[str, str, Any]:
        name = draw(st.sampled_from(DATA_COLUMNS))
        seen = [v for f in files for v in f.column(name).to_pylist() if v is not None]
        op = draw(st.sampled_from(["=", "<", "<=", ">", ">=", "!=", "in"]))
        if op == "in":
            return name, op, draw(_in_lists(_filter_value(name, seen)))
        return name, op, draw(_filter_value(name, seen))

    conjunction = [term() for _ in range(draw(st.integers(1, 2)))]
    if draw(st.booleans()):
        return [conjunction, [term()]]
    return conjunction


def sql_literal(name: str, value: Any) -> str:
    """``value`` as a DuckDB literal of the column's type."""
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if name in ("f", "g"):
        if math.isnan(value):
            return "'nan'::DOUBLE"
        if math.isinf(value):
            return "'inf'::DOUBLE" if value > 0 else "'-inf'::DOUBLE"
        # quoted: DuckDB parses a bare literal such as -0.00038011557282122875 as a DECIMAL and rounds its cast
        return f"'{float(value)!r}'::DOUBLE"
    if name == "i":
        return f"{int(value)}::BIGINT"
    if name == "d":
        return f"'{Decimal(value)}'::DECIMAL(10,2)"
    if name == "s":
        return "'" + str(value).replace("'", "''") + "'"
    if name == "dt":
        return f"'{value.isoformat()}'::DATE"
    if name == "ts":
        return f"'{value.isoformat()}'::TIMESTAMPTZ"
    raise ValueError(name)


def duckdb_predicate(name: str, op: str, value: Any) -> str:
    """A DuckDB predicate of the same meaning, for values of the column's own type."""
    if op == "in":
        return f"{name} IN ({', '.join(sql_literal(name, v) for v in value)})"
    return f"{name} {'<>' if op == '!=' else op} {sql_literal(name, value)}"


@st.composite
def sql_predicates(draw: Callable[..., Any], files: list[pa.Table]) -> str:
    """A DuckDB WHERE clause over the columns, with values of each column's type (some taken from the rows)."""

    def one() -> str:
        name = draw(st.sampled_from(DATA_COLUMNS))
        seen = [v for f in files for v in f.column(name).to_pylist() if v is not None]
        values = VALUES[name] | (st.sampled_from(seen) if seen else st.nothing())
        op = draw(st.sampled_from(["=", "<", "<=", ">", ">=", "!=", "in", "is null", "is not null"]))
        if op in ("is null", "is not null"):
            return f"{name} {op.upper()}"
        if op == "in":
            return duckdb_predicate(name, op, draw(st.lists(values, min_size=1, max_size=3)))
        return duckdb_predicate(name, op, draw(values))

    clause = " AND ".join(one() for _ in range(draw(st.integers(1, 2))))
    return f"({clause}) OR ({one()})" if draw(st.booleans()) else clause


def outcome(read: Any) -> tuple[str, Any]:
    """("rows", sorted ids) or ("error", None): pruning must neither lose rows nor change whether a filter fails."""
    try:
        table = read()
    except (DuckLakeError, pa.ArrowException):
        return "error", None
    return "rows", sorted(table.column("id").to_pylist())


def unpruned(lake: pdl.Lake, table: str, filters: Any) -> pa.Table:
    return lake.scan(table).filter(filter_expression(filters, lake.table(table).table_schema))


def row_by_row(lake: pdl.Lake, table: str, filters: Any) -> tuple[str, list[int]]:
    """The rows that pass, each evaluated alone (a row pyarrow cannot compare does not pass)."""
    full, expr, ids = lake.scan(table), filter_expression(filters, lake.table(table).table_schema), []
    for i in range(full.num_rows):
        try:
            ids.extend(full.slice(i, 1).filter(expr).column("id").to_pylist())
        except pa.ArrowException:
            continue
    return "rows", sorted(ids)


def assert_exact(lake: pdl.Lake, table: str, filters: Any) -> None:
    """The pruned scan gives what the unpruned one gives. pyarrow refuses some comparisons only for some values
    (an int64 beyond 2**24 against a double): then a scan whose pruning skipped those values may succeed, and its
    rows must be exactly those that pass."""
    pruned = outcome(lambda: lake.scan(table, filter=filters))
    full = outcome(lambda: unpruned(lake, table, filters))
    if full[0] == "error" and pruned[0] == "rows":
        assert pruned == row_by_row(lake, table, filters), filters
    else:
        assert pruned == full, filters


# --- float filters with DuckDB's semantics: NaN above every number and equal to itself, -0.0 = 0.0, NULL never passes

FLOAT_COLUMNS = ("f", "g")
_FLOAT_FILTER_VALUES = st.sampled_from([NAN, -0.0, 0.0, INF, -INF, 1.0, -1.0, 2.5, 5.0, 0.1, 1e300]) | st.integers(
    -3, 3
)


@st.composite
def float_filters(draw: Callable[..., Any], files: list[pa.Table]) -> tuple[list[Any], str]:
    """A DNF filter over the float columns and the same condition as a DuckDB ``WHERE`` clause."""

    def term() -> tuple[tuple[str, str, Any], str]:
        name = draw(st.sampled_from(FLOAT_COLUMNS))
        seen = [v for f in files for v in f.column(name).to_pylist() if v is not None]
        values = _FLOAT_FILTER_VALUES | (st.sampled_from(seen) if seen else st.nothing())
        op = draw(st.sampled_from(["=", "==", "!=", "<", "<=", ">", ">=", "in", "not in"]))
        if op in ("in", "not in"):
            members = draw(_in_lists(values | st.none()))
            listed = ", ".join("NULL" if v is None else sql_literal(name, v) for v in members)
            return (name, op, members), f"{name} {op.upper()} ({listed})"
        value = draw(values)
        sql_op = {"==": "=", "!=": "<>"}.get(op, op)
        return (name, op, value), f"{name} {sql_op} {sql_literal(name, value)}"

    branches = [[term() for _ in range(draw(st.integers(1, 2)))] for _ in range(draw(st.integers(1, 2)))]
    filters = [[t for t, _ in branch] for branch in branches]
    where = " OR ".join("(" + " AND ".join(sql for _, sql in branch) + ")" for branch in branches)
    return filters, where


def duckdb_where_ids(con: Any, source: str, where: str) -> list[int]:
    """The ids of ``source``'s rows DuckDB's ``WHERE`` selects (the oracle of the float filters)."""
    return sorted(r[0] for r in con.execute(f"SELECT id FROM {source} WHERE {where}").fetchall())
