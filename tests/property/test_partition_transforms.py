"""Property: our ``bucket(N)``, calendar and ``epoch_*`` partition values equal DuckDB's, value for value, every type.

* ``bucket(N)``: DuckDB 1.5.5's own ``murmur3_32`` (the ducklake extension's function, the one its partitioned writes
  call) in ``(murmur3_32(c) & 2147483647) % N``, over every column type ``bucket()`` takes here, the whole range of
  each (BC dates, ``±infinity``, NaN payloads, ``-0.0``, hostile strings with NUL).
* ``year``/``month``/``day``/``hour`` (DuckLake 1.0): DuckDB's own functions, in UTC, past year 9999 and 32767.
* ``epoch_*``: the SQL DuckLake 1.1 partitions with (``DuckLakePartitionUtils::GetPartitionSQLExpression``: ``date_diff``
  from ``DATE '1970-01-01'``, TIMESTAMP_NS floored through ``epoch_ns``, TIMESTAMPTZ through ``epoch_us``), evaluated by
  DuckDB 1.5.5's ``date_diff``; the 1.1 build's ``date_diff`` is the same code (duckdb ``date_diff.cpp``).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import duckdb
import pyarrow as pa
import pytest
from hypothesis import Phase, given, settings
from hypothesis import strategies as st

from pyspark_ducklake.catalog.stats_values import DATE_INFINITY, TIMESTAMP_INFINITY, TIMESTAMP_MIN_MICROS
from pyspark_ducklake.catalog.types import Column
from pyspark_ducklake.table.partition_transforms import bucket_array, transform_array
from tests.support.duckdb_types import connect
from tests.support.hostile import examples, hostile_text

_MAX_US = TIMESTAMP_INFINITY - 1
_TS_RANGE = {
    "timestamp_s": (TIMESTAMP_MIN_MICROS // 10**6 + 1, _MAX_US // 10**6),
    "timestamp_ms": (TIMESTAMP_MIN_MICROS // 10**3 + 1, _MAX_US // 10**3),
    "timestamp": (TIMESTAMP_MIN_MICROS, _MAX_US),
    "timestamptz": (TIMESTAMP_MIN_MICROS, _MAX_US),
    "timestamp_ns": (-_MAX_US, _MAX_US),
}
_TS_ARROW = {
    "timestamp_s": pa.timestamp("s"),
    "timestamp_ms": pa.timestamp("ms"),
    "timestamp": pa.timestamp("us"),
    "timestamptz": pa.timestamp("us", tz="UTC"),
    "timestamp_ns": pa.timestamp("ns"),
}
_INTS = {"int8": 8, "int16": 16, "int32": 32, "int64": 64}
_UINTS = {"uint8": 8, "uint16": 16, "uint32": 32, "uint64": 64}
_DECIMALS = ((4, 1), (9, 2), (18, 3), (18, 0), (38, 5), (20, 20))
_DAY_US = 86_400 * 10**6


def _timestamps(t: str) -> st.SearchStrategy[int]:
    lo, hi = _TS_RANGE[t]
    edges = [lo, hi, 0, -1, 1, TIMESTAMP_INFINITY, -TIMESTAMP_INFINITY]
    return st.one_of(st.sampled_from(edges), st.integers(lo, hi), st.integers(max(lo, -(10**13)), min(hi, 10**13)))


def _dates() -> st.SearchStrategy[int]:
    edges = [0, -1, 1, -719_528, DATE_INFINITY, -DATE_INFINITY, DATE_INFINITY - 1, -(DATE_INFINITY - 1)]
    return st.one_of(st.sampled_from(edges), st.integers(-(DATE_INFINITY - 1), DATE_INFINITY - 1))


# DuckLake type -> (strategy of one value as Arrow takes it, Arrow type, DuckDB expression of column c)
def _cases() -> dict[str, tuple[st.SearchStrategy[Any], pa.DataType, str]]:
    out: dict[str, tuple[st.SearchStrategy[Any], pa.DataType, str]] = {
        "boolean": (st.booleans(), pa.bool_(), "c"),
        "float32": (st.floats(width=32), pa.float32(), "c"),
        "float64": (st.floats(), pa.float64(), "c"),
        "varchar": (hostile_text(nul=True, max_size=40), pa.string(), "c"),
        "json": (hostile_text(nul=False, max_size=12).map(json.dumps), pa.string(), "c::JSON"),
        "blob": (st.binary(max_size=40), pa.binary(), "c"),
        "uuid": (st.uuids().map(str), pa.string(), "c::UUID"),
        "date": (_dates(), pa.int32(), "c"),
        "time": (st.integers(0, _DAY_US), pa.int64(), "c"),
        "timetz": (st.integers(0, _DAY_US), pa.int64(), "c::TIMETZ"),
        "int128": (st.integers(-(10**38) + 1, 10**38 - 1).map(Decimal), pa.decimal128(38, 0), "c::HUGEINT"),
        "uint128": (st.integers(0, 10**38 - 1).map(Decimal), pa.decimal128(38, 0), "c::UHUGEINT"),
        "interval": (
            st.tuples(st.integers(-(10**6), 10**6), st.integers(-(10**6), 10**6), st.integers(-(10**15), 10**15)),
            pa.month_day_nano_interval(),
            "c",
        ),
    }
    for t, bits in _INTS.items():
        out[t] = (st.integers(-(2 ** (bits - 1)), 2 ** (bits - 1) - 1), getattr(pa, t)(), "c")
    for t, bits in _UINTS.items():
        out[t] = (st.integers(0, 2**bits - 1), getattr(pa, t)(), "c")
    for t in _TS_RANGE:
        out[t] = (_timestamps(t), pa.int64(), "c")
    for p, s in _DECIMALS:
        out[f"decimal({p},{s})"] = (
            st.integers(-(10**p) + 1, 10**p - 1).map(lambda u, s=s: Decimal(f"{u}E-{s}")),
            pa.decimal128(p, s),
            "c",
        )
    return out


CASES = _cases()
EPOCH_TYPES = ("date", *_TS_RANGE)


def _arrays(t: str, values: list[Any], dtype: pa.DataType) -> tuple[pa.Array, pa.Array]:
    """(ours: the column's Arrow array as a write holds it, DuckDB's: what it imports before the cast)."""
    if t == "date":
        ours = pa.array(values, pa.int32()).cast(pa.date32())
        return ours, ours
    if t in ("time", "timetz"):
        ours = pa.array(values, pa.int64()).cast(pa.time64("us"))
        return ours, ours
    if t in _TS_ARROW:
        ours = pa.array(values, pa.int64()).cast(_TS_ARROW[t])
        return ours, ours
    if t == "interval":
        ours = pa.array([None if v is None else pa.MonthDayNano([v[0], v[1], v[2] * 1000]) for v in values], dtype)
        return ours, ours
    if t == "uuid":
        raw = pa.array([None if v is None else uuid.UUID(v).bytes for v in values], pa.binary(16))
        return pa.ExtensionArray.from_storage(pa.uuid(), raw), pa.array(values, pa.string())
    if t == "json":
        return pa.ExtensionArray.from_storage(pa.json_(), pa.array(values, pa.string())), pa.array(values, pa.string())
    ours = pa.array(values, dtype)
    return ours, ours


@pytest.fixture(scope="module")
def duck() -> Iterator[duckdb.DuckDBPyConnection]:
    con = connect()
    yield con
    con.close()


def _column(t: str) -> Column:
    return Column(1, "c", t)


# no shrinking: an example draws ~30 columns, and shrinking them took minutes; the report names each column
@settings(max_examples=examples(0.3), deadline=None, phases=[Phase.explicit, Phase.reuse, Phase.generate])
@given(
    data=st.data(),
    count=st.one_of(st.sampled_from([1, 2, 4, 16, 1000, 2**31 - 1]), st.integers(1, 2**31 - 1)),
)
def test_bucket_values_equal_duckdbs(duck: duckdb.DuckDBPyConnection, data: st.DataObject, count: int) -> None:
    ours_cols: dict[str, pa.Array] = {}
    duck_cols: dict[str, pa.Array] = {}
    exprs = []
    for i, (t, (values_of, dtype, expr)) in enumerate(CASES.items()):
        values = data.draw(st.lists(st.none() | values_of, min_size=1, max_size=6), label=t)
        ours_cols[t], duck_cols[f"c{i}"] = _arrays(t, values, dtype)
        cast = expr.replace("c", f"c{i}", 1)
        exprs.append(f"list((murmur3_32({cast}) & 2147483647) % {count} ORDER BY i)")
    n = max(len(a) for a in duck_cols.values())
    table = pa.table({**{k: _pad(a, n) for k, a in duck_cols.items()}, "i": pa.array(range(n), pa.int64())})
    duck.register("src", table)
    try:
        theirs = duck.execute(f"SELECT {', '.join(exprs)} FROM src").fetchone()
    finally:
        duck.unregister("src")
    for (t, arr), expected in zip(ours_cols.items(), theirs, strict=True):
        got = bucket_array(arr, _column(t), count).to_pylist()
        assert got == expected[: len(arr)], f"{t}: {duck_cols[f'c{list(ours_cols).index(t)}'].to_pylist()}"


def _pad(arr: pa.Array, n: int) -> pa.Array:
    return pa.concat_arrays([arr, pa.nulls(n - len(arr), arr.type)]) if len(arr) < n else arr


def _epoch_sql(t: str, part: str, c: str) -> str:
    """DuckLake 1.1's ``GetPartitionSQLExpression`` for ``epoch_<part>`` of a column of type ``t``."""
    if t == "timestamp_ns":
        nanos = f"epoch_ns({c})"
        c = f"make_timestamp(({nanos} - (({nanos} % 1000) + 1000) % 1000) // 1000)"
    elif t == "timestamptz":
        c = f"make_timestamp(epoch_us({c}))"
    return f"date_diff('{part}', DATE '1970-01-01', {c})"


@settings(max_examples=examples(0.6), deadline=None, phases=[Phase.explicit, Phase.reuse, Phase.generate])
@given(data=st.data())
def test_epoch_values_equal_duckdbs(duck: duckdb.DuckDBPyConnection, data: st.DataObject) -> None:
    cols = {}
    for t in EPOCH_TYPES:
        strategy = CASES[t][0]
        if t == "timestamp_ns":  # DuckDB's own expression overflows (an error) within 1000 ns of -2**63
            strategy = strategy.filter(lambda v: v > -_MAX_US + 1000)
        values = data.draw(st.lists(st.none() | strategy, min_size=4, max_size=4), label=t)
        cols[t] = _arrays(t, values, CASES[t][1])[0]
    table = pa.table({**{f"c{i}": a for i, a in enumerate(cols.values())}, "i": pa.array(range(4), pa.int64())})
    exprs = [
        f"list({sql} ORDER BY i)"
        for i, t in enumerate(EPOCH_TYPES)
        for part in ("year", "month", "day", "hour")
        for sql in (_epoch_sql(t, part, f"c{i}"), f"{part}(c{i})")
    ]
    duck.register("src", table)
    try:
        theirs = iter(duck.execute(f"SELECT {', '.join(exprs)} FROM src").fetchone())
    finally:
        duck.unregister("src")
    for t, arr in cols.items():
        raw = arr.cast(pa.int32() if t == "date" else pa.int64()).to_pylist()
        for part in ("year", "month", "day", "hour"):
            for transform in (f"epoch_{part}", part):  # and DuckLake 1.0's calendar parts, DuckDB's year() etc.
                got = transform_array(arr, _column(t), transform).to_pylist()
                assert got == next(theirs), f"{transform} of {t}: {raw}"
