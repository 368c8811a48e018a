"""Inlined-table encodings and DuckDB's nested text (pure Python; DuckDB itself is the oracle in
tests/conformance/test_codec_vs_duckdb.py)."""

from __future__ import annotations

import datetime as dt
import math
import uuid
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from pyspark_ducklake.catalog.inlined_codec import (
    decode_values,
    encode_values,
    inline_obstacle,
    inlined_select_expression,
    inlined_sql_type,
    parse_nested,
    python_to_arrow,
    render_nested,
    storage_tree,
)
from pyspark_ducklake.catalog.stats_values import DATE_INFINITY, TIMESTAMP_INFINITY
from pyspark_ducklake.catalog.types import Column, arrow_type
from pyspark_ducklake.exceptions import UnsupportedTypeError

UTC = dt.timezone.utc
NAN = float("nan")
INF = float("inf")
BACKENDS = ("sqlite", "postgresql")


def leaf(name: str, type_: str) -> Column:
    return Column(1, name, type_)


def list_of(child: Column, name: str = "l") -> Column:
    return Column(1, name, "list", children=(Column(2, "element", child.type, children=child.children),))


def struct_of(*children: Column, name: str = "s") -> Column:
    return Column(1, name, "struct", children=children)


def map_of(key: Column, value: Column, name: str = "m") -> Column:
    return Column(
        1,
        name,
        "map",
        children=(
            Column(2, "key", key.type, children=key.children),
            Column(3, "value", value.type, children=value.children),
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
    "Null",
    "ünï ✓ 🦆",
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
    "\\\\",
    "'quoted'",
    "{'a': 1}",
    "[1, 2]",
    "k=v, x=y",
]

CASES: list[tuple[Column, list[Any]]] = [
    (leaf("b", "boolean"), [True, False]),
    (leaf("i8", "int8"), [-128, 127, 0]),
    (leaf("i16", "int16"), [-32768, 32767]),
    (leaf("i32", "int32"), [-(2**31), 2**31 - 1]),
    (leaf("i64", "int64"), [-(2**63), 2**63 - 1]),
    (leaf("u8", "uint8"), [0, 255]),
    (leaf("u16", "uint16"), [65535]),
    (leaf("u32", "uint32"), [2**32 - 1]),
    (leaf("u64", "uint64"), [0, 2**64 - 1]),
    (leaf("h", "int128"), [-(10**38 - 1), 10**38 - 1]),
    (leaf("uh", "uint128"), [10**38 - 1]),
    (leaf("f32", "float32"), [NAN, INF, -INF, -0.0, 0.0, 33.333332, 3.4028235e38, 1e-45, 334609.625]),
    (leaf("f64", "float64"), [NAN, INF, -INF, -0.0, 0.1, 1e308, 5e-324, 1e16]),
    (leaf("d18", "decimal(18,3)"), [Decimal("123456789012345.678"), Decimal("-999999999999999.999"), Decimal(0)]),
    (
        leaf("d38", "decimal(38,10)"),
        [
            Decimal("9999999999999999999999999999.9999999999"),
            Decimal("-9999999999999999999999999999.9999999999"),
            Decimal("-1E-10"),
        ],
    ),
    (leaf("d44", "decimal(4,4)"), [Decimal("0.5"), Decimal("-0.9999")]),
    (
        leaf("dt", "date"),
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
    (leaf("tm", "time"), [dt.time(23, 59, 59, 999999), dt.time(0, 0), 86400 * 10**6]),
    (
        leaf("ts", "timestamp"),
        [
            dt.datetime(2024, 1, 1, 10, 0, 0, 123456),
            dt.datetime(1, 1, 1),
            dt.datetime(1969, 12, 31, 23, 59, 59, 999999),
            TIMESTAMP_INFINITY,
            -TIMESTAMP_INFINITY,
            6311390400000000000,
        ],
    ),
    (leaf("ts_s", "timestamp_s"), [dt.datetime(2024, 1, 1, 10, 0, 1), -62135596800]),
    (leaf("ts_ms", "timestamp_ms"), [dt.datetime(2024, 1, 1, 10, 0, 0, 123000)]),
    (leaf("ts_ns", "timestamp_ns"), [1704103200123456789, -1, -9000000000000000001, TIMESTAMP_INFINITY]),
    (
        leaf("tz", "timestamptz"),
        [
            dt.datetime(2024, 1, 1, 8, 0, 0, 500000, tzinfo=UTC),
            dt.datetime(1, 1, 1, tzinfo=UTC),
            TIMESTAMP_INFINITY,
            -TIMESTAMP_INFINITY,
        ],
    ),
    (
        leaf("iv", "interval"),
        [
            pa.MonthDayNano([14, 3, 14706789000000]),
            pa.MonthDayNano([-13, -2, -1500000000]),
            pa.MonthDayNano([0, 0, 0]),
            pa.MonthDayNano([0, 0, 360000000000000]),
        ],
    ),
    (leaf("v", "varchar"), STRINGS),
    (leaf("bl", "blob"), [b"\x00\xffab", b"", bytes(range(256)), b"'\\\""]),
    (leaf("u", "uuid"), [uuid.UUID("01234567-89ab-cdef-0123-456789abcdef"), uuid.UUID(int=0)]),
    (leaf("j", "json"), ['{"a": [1,2]}', "null", "ünï"]),
    (list_of(leaf("element", "int32")), [[1, None, 3], [], [None]]),
    (list_of(leaf("element", "varchar")), [STRINGS, [None, "NULL", "nUlL", None], [], [""]]),
    (
        struct_of(leaf("a", "int32"), leaf("b", "varchar")),
        [{"a": 1, "b": "it's"}, {"a": None, "b": None}] + [{"a": i, "b": s} for i, s in enumerate(STRINGS)],
    ),
    (
        struct_of(leaf("it's", "int32"), leaf('q"x', "varchar"), leaf("a:b=c", "float32"), leaf("[x]", "date")),
        [
            {"it's": 1, 'q"x': "v", "a:b=c": NAN, "[x]": DATE_INFINITY},
            {"it's": None, 'q"x': "", "a:b=c": -0.0, "[x]": None},
        ],
    ),
    (map_of(leaf("key", "varchar"), leaf("value", "varchar")), [[(s, s) for s in STRINGS], [], [("k", None)]]),
    (map_of(leaf("key", "int32"), leaf("value", "float64")), [[(1, NAN), (2, -0.0), (3, None)]]),
    (
        struct_of(
            list_of(map_of(leaf("key", "varchar"), list_of(leaf("element", "float64"), "value")), "l"),
            leaf("t", "timestamptz"),
            struct_of(leaf("x", "blob"), leaf("y", "uuid"), leaf("i", "interval"), name="inner"),
            name="nest",
        ),
        [
            {
                "l": [[("a", [1.5, None, INF]), ("b,c", None), ("", [])], None, []],
                "t": dt.datetime(2024, 1, 1, tzinfo=UTC),
                "inner": {"x": b"\x00'\\", "y": uuid.UUID(int=5), "i": pa.MonthDayNano([1, 2, 3000])},
            },
            {"l": None, "t": None, "inner": None},
            {"l": [None], "t": TIMESTAMP_INFINITY, "inner": {"x": None, "y": None, "i": None}},
        ],
    ),
    (list_of(list_of(leaf("element", "varchar"))), [[["a", None], None, [], ["[x]", "y z"]], [None]]),
    (list_of(leaf("element", "json")), [['{"a":1}', "[1,2]", '"x y"', "null"], []]),
]


def canonical(value: Any) -> Any:
    """Storage values made comparable: NaN equal to NaN, -0.0 distinct from 0.0."""
    if isinstance(value, float):
        return ("nan",) if math.isnan(value) else (value, math.copysign(1, value))
    if isinstance(value, list):
        return [canonical(v) for v in value]
    if isinstance(value, tuple):
        return tuple(canonical(v) for v in value)
    if isinstance(value, dict):
        return {k: canonical(v) for k, v in value.items()}
    return value


def same_arrays(column: Column, a: pa.Array, b: pa.Array) -> bool:
    return a.type == b.type and canonical(storage_tree(column, a)) == canonical(storage_tree(column, b))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", range(len(CASES)), ids=[c.name for c, _ in CASES])
def test_round_trip(case: int, backend: str) -> None:
    column, values = CASES[case]
    if column.type == "list" and column.children[0].type == "json":
        values = [v for v in values if None not in v]
    array = python_to_arrow(column, [*values, None])
    assert array.type == arrow_type(column)
    encoded = encode_values(column, array, backend)
    assert encoded[-1] is None
    decoded = decode_values(column, encoded, backend)
    assert same_arrays(column, decoded, array)
    assert decode_values(column, encoded, backend).type == arrow_type(column)


@pytest.mark.parametrize("case", range(len(CASES)), ids=[c.name for c, _ in CASES])
def test_nested_text_round_trip(case: int) -> None:
    column, values = CASES[case]
    if not column.is_nested:
        return
    for value in values:
        text = render_nested(column, value)
        again = render_nested(column, parse_nested(column, text))
        assert again == text


def test_sqlite_encodings() -> None:
    def enc(type_: str, values: list[Any]) -> list[Any]:
        column = leaf("c", type_)
        return encode_values(column, python_to_arrow(column, values), "sqlite")

    assert enc("boolean", [True, False, None]) == [1, 0, None]
    assert enc("int64", [-(2**63)]) == [-(2**63)]
    assert enc("uint64", [2**64 - 1]) == ["18446744073709551615"]
    assert enc("int128", [10**38 - 1]) == ["9" * 38]
    assert enc("float32", [NAN, INF, -INF, 33.333332, -0.0]) == ["nan", "inf", "-inf", "33.333332", "-0.0"]
    assert enc("float64", [1e308, 1.0]) == ["1e+308", "1.0"]
    assert enc("decimal(38,10)", [Decimal("-1E-10")]) == ["-0.0000000001"]
    assert enc("date", [dt.date(2024, 2, 29), DATE_INFINITY]) == ["2024-02-29", "infinity"]
    assert enc("time", [dt.time(23, 59, 59, 999999)]) == ["23:59:59.999999"]
    assert enc("timestamp_ns", [1704103200123456789]) == ["2024-01-01 10:00:00.123456789"]
    assert enc(
        "timestamptz", [dt.datetime(2024, 1, 1, 10, 0, 0, 500000, tzinfo=dt.timezone(dt.timedelta(hours=2)))]
    ) == ["2024-01-01 08:00:00.5+00"]
    assert enc("interval", [pa.MonthDayNano([14, 3, 14706789000000])]) == ["1 year 2 months 3 days 04:05:06.789"]
    assert enc("blob", [b"\x00\xff"]) == [b"\x00\xff"]
    assert enc("uuid", [uuid.UUID(int=1)]) == ["00000000-0000-0000-0000-000000000001"]
    assert enc("varchar", ["it's"]) == ["it's"]
    li = list_of(leaf("element", "varchar"))
    assert encode_values(li, python_to_arrow(li, [["a", "x y", None, "NULL", "", "it's"]]), "sqlite") == [
        "[a, x y, NULL, 'NULL', '', 'it\\'s']"
    ]
    st = struct_of(leaf("a", "int32"), leaf("b", "varchar"))
    assert encode_values(st, python_to_arrow(st, [{"a": 1, "b": "it's"}, {"a": None, "b": None}]), "sqlite") == [
        "{'a': 1, 'b': 'it\\'s'}",
        "{'a': NULL, 'b': NULL}",
    ]
    mp = map_of(leaf("key", "varchar"), leaf("value", "int32"))
    assert encode_values(mp, python_to_arrow(mp, [[("k1", 1), ("k 2", None)], []]), "sqlite") == [
        "{k1=1, k 2=NULL}",
        "{}",
    ]


def test_postgres_encodings() -> None:
    def enc(type_: str, values: list[Any]) -> list[Any]:
        column = leaf("c", type_)
        return encode_values(column, python_to_arrow(column, values), "postgresql")

    assert enc("boolean", [True, None]) == [True, None]
    assert enc("int8", [-128]) == [-128]
    assert enc("uint64", [2**64 - 1]) == ["18446744073709551615"]
    out = enc("float32", [NAN, INF, 33.333332, -0.0, 0.0])
    assert math.isnan(out[0]) and out[1] == INF and out[2] == pytest.approx(33.333332) and out[3] == "-0"
    assert out[4] == 0.0 and isinstance(out[4], float)
    assert enc("decimal(18,3)", [Decimal("1.5")]) == [Decimal("1.500")]
    assert enc("date", [dt.date(2024, 2, 29)]) == ["2024-02-29"]
    assert enc("time", [dt.time(1, 2, 3, 4), 86400 * 10**6]) == [dt.time(1, 2, 3, 4), "24:00:00"]
    assert enc("interval", [pa.MonthDayNano([-13, -2, -1500000000])]) == ["-1 year -1 month -2 days -00:00:01.5"]
    assert enc("varchar", ["ünï"]) == ["ünï".encode()]
    assert enc("json", ['{"a": 1}']) == [b'{"a": 1}']
    assert enc("blob", [b"\x00"]) == [b"\x00"]
    assert enc("uuid", [uuid.UUID(int=1)]) == ["00000000-0000-0000-0000-000000000001"]
    assert enc("timestamp", [TIMESTAMP_INFINITY]) == ["infinity"]


def test_decode_driver_types() -> None:
    """What sqlite3 / psycopg2 hand back, including lossy or alternative forms."""

    def dec(type_: str, values: list[Any], backend: str = "postgresql") -> list[Any]:
        return decode_values(leaf("c", type_), values, backend).to_pylist()

    assert dec("varchar", [memoryview(b"\xc3\xbc"), b"x", "y"]) == ["ü", "x", "y"]
    assert dec("blob", [memoryview(b"\x00"), b"\xff"]) == [b"\x00", b"\xff"]
    assert dec("uuid", [uuid.UUID(int=1), "00000000-0000-0000-0000-000000000002"]) == [
        uuid.UUID(int=1),
        uuid.UUID(int=2),
    ]
    assert dec("decimal(4,1)", [Decimal("-999.9")]) == [Decimal("-999.9")]
    assert dec("time", [dt.time(1, 2, 3), "24:00:00"])[0] == dt.time(1, 2, 3)
    assert dec("float32", [33.333332, "nan"])[0] == pytest.approx(33.333332)
    assert dec("boolean", [1, 0, "true"], "sqlite") == [True, False, True]
    assert dec("int64", ["5", 6], "sqlite") == [5, 6]
    intervals = dec(
        "interval",
        [
            "1 year 2 mons 3 days 04:05:06.789",
            "-1 mons -2 days -00:00:01.5",
            "P1Y2M3DT4H5M6.789S",
            dt.timedelta(days=2, microseconds=5),
        ],
    )
    assert [(i.months, i.days, i.nanoseconds) for i in intervals] == [
        (14, 3, 14706789000000),
        (-1, -2, -1500000000),
        (14, 3, 14706789000000),
        (0, 2, 5000),
    ]


def test_decode_infinities_as_duckdb_exports_them() -> None:
    arr = decode_values(leaf("c", "date"), ["infinity", "-infinity", "0001-12-31 (BC)"], "sqlite")
    assert arr.cast(pa.int32()).to_pylist() == [2**31 - 1, -(2**31 - 1), -719163]
    arr = decode_values(leaf("c", "timestamp_ns"), ["infinity", "-infinity"], "postgresql")
    assert arr.cast(pa.int64()).to_pylist() == [2**63 - 1, -(2**63 - 1)]


def test_parse_duckdb_written_text() -> None:
    lv = list_of(leaf("element", "varchar"))
    assert parse_nested(lv, "[a, x y, NULL, 'NULL', '', ' s ', 'a,b', '[x]']") == [
        "a",
        "x y",
        None,
        "NULL",
        "",
        " s ",
        "a,b",
        "[x]",
    ]
    assert parse_nested(lv, "[ a ,  nuLL , 'b' ]") == ["a", None, "b"]
    assert parse_nested(lv, "[]") == [] and parse_nested(lv, "[NULL]") == [None] and parse_nested(lv, "['']") == [""]
    assert parse_nested(lv, r"[back\slash, 'it\'s', \]") == ["back\\slash", "it's", "\\"]
    li = list_of(leaf("element", "int32"))
    assert parse_nested(li, "[1,null,3]") == [1, None, 3]
    st = struct_of(leaf("a", "int32"), leaf("b", "varchar"))
    assert parse_nested(st, "{'a': 1, 'b': 'x'}") == {"a": 1, "b": "x"}
    assert parse_nested(st, '{"a": 5, "b": "q"}') == {"a": 5, "b": "q"}
    assert parse_nested(st, "{'a': 1, 'b': 'it''s'}") == {"a": 1, "b": "its"}  # DuckDB reads it so, too
    assert parse_nested(st, "(7, 'x y')") == {"a": 7, "b": "x y"}
    assert parse_nested(st, "{a: 1, b: it}") == {"a": 1, "b": "it"}
    mp = map_of(leaf("key", "varchar"), leaf("value", "int32"))
    assert parse_nested(mp, "{k1=1, k 2=NULL}") == [("k1", 1), ("k 2", None)]
    assert parse_nested(mp, "{}") == []
    for bad in ("[1, 2", "{'a': 1", "{'zz': 1}", "not a list", "[1] x"):
        with pytest.raises(ValueError):
            parse_nested(li if bad.startswith(("[", "not")) else st, bad)


def test_parse_duckdb_inlined_struct_sql() -> None:
    """DuckDB's inlined STRUCT writer emits SQL it cannot read back itself; decode_values recovers the values."""
    st = struct_of(
        leaf("it's", "int32"), leaf("f", "float32"), leaf("d", "date"), leaf("t", "timestamptz"), leaf("i", "interval")
    )
    text = (
        "{'it''s': 1, 'f': CAST('nan' AS VARCHAR), 'd': CAST('2024-01-01' AS DATE), "
        "'t': CAST('2024-01-01 00:00:00+00' AS VARCHAR), 'i': CAST('1 months 2 days 3000 microseconds' AS INTERVAL)}"
    )
    value = parse_nested(st, text)
    assert value["it's"] == 1 and math.isnan(value["f"]) and value["d"] == dt.date(2024, 1, 1)
    assert value["t"] == dt.datetime(2024, 1, 1, tzinfo=UTC) and value["i"] == pa.MonthDayNano([1, 2, 3000000])
    lj = list_of(leaf("element", "json"))
    assert parse_nested(lj, "['{\"a\":1}', 'null']") == ['{"a":1}', "null"]
    assert parse_nested(lj, '[{"a":  1}, NULL, null, "x y"]') == ['{"a":  1}', None, "null", '"x y"']


def test_null_structure_is_exact() -> None:
    ll = list_of(list_of(leaf("element", "int32")))
    lists: list[Any] = [[], [None], [[]], [[None]], [None, [], [None, 1]]]
    for value in lists:
        assert parse_nested(ll, render_nested(ll, value)) == value
    st = struct_of(leaf("a", "int32"), struct_of(leaf("x", "varchar"), name="b"))
    structs: list[Any] = [{"a": None, "b": None}, {"a": None, "b": {"x": None}}, {"a": 1, "b": {"x": "NULL"}}]
    for struct in structs:
        assert parse_nested(st, render_nested(st, struct)) == struct
    arr = python_to_arrow(st, [None, {"a": None, "b": None}])
    assert encode_values(st, arr, "sqlite") == [None, "{'a': NULL, 'b': NULL}"]


def test_json_list_with_null_element_is_refused() -> None:
    lj = list_of(leaf("element", "json"))
    with pytest.raises(UnsupportedTypeError):
        encode_values(lj, python_to_arrow(lj, [["1", None]]), "sqlite")


@pytest.mark.parametrize(
    "element", ['{"a": 1}', "1.5", "1e2", "-0", "NaN", '"\\u001f"', '{"a":1,"a":2}', '"\\u00e9"', "not json"]
)
def test_json_list_elements_duckdb_would_rewrite_are_not_inlined(element: str) -> None:
    """DuckDB reads an inlined JSON[] as one document and writes each element back minified."""
    lj = list_of(leaf("element", "json"))
    st = struct_of(lj, name="s")
    assert inline_obstacle(lj, python_to_arrow(lj, [["1"], [element]]), "sqlite") is not None
    assert inline_obstacle(st, python_to_arrow(st, [{"l": [element]}]), "postgresql") is not None
    assert inline_obstacle(lj, python_to_arrow(lj, [["1", '{"a":[1,"\\u0000é"]}', "null"]]), "sqlite") is None
    with pytest.raises(UnsupportedTypeError, match="write it to Parquet"):
        encode_values(lj, python_to_arrow(lj, [[element]]), "sqlite")


def test_nul_in_nested_string_is_inlined_on_sqlite_only() -> None:
    """A PostgreSQL varchar cannot hold a NUL; SQLite text can, and DuckDB reads it back."""
    lv = list_of(leaf("element", "varchar"))
    mp = map_of(leaf("key", "varchar"), struct_of(leaf("x", "varchar"), name="value"))
    for column, value in ((lv, ["a", "b\x00"]), (mp, [("k", {"x": "\x00"})])):
        array = python_to_arrow(column, [None, value])
        assert inline_obstacle(column, array, "sqlite") is None
        assert parse_nested(column, encode_values(column, array, "sqlite")[1]) == value
        assert inline_obstacle(column, array, "postgresql") is not None
        assert inline_obstacle(column, array.slice(0, 1), "postgresql") is None
        with pytest.raises(UnsupportedTypeError, match="NUL"):
            encode_values(column, array, "postgresql")


def test_int128_beyond_arrow_raises() -> None:
    with pytest.raises(UnsupportedTypeError):
        decode_values(leaf("c", "int128"), [str(-(2**127))], "sqlite")


def test_unsupported_backend() -> None:
    with pytest.raises(UnsupportedTypeError):
        inlined_sql_type(leaf("c", "int32"), "mysql")


EXPECTED_DDL = {
    "boolean": ("BIGINT", "BOOLEAN"),
    "int8": ("BIGINT", "SMALLINT"),
    "int16": ("BIGINT", "SMALLINT"),
    "int32": ("BIGINT", "INTEGER"),
    "int64": ("BIGINT", "BIGINT"),
    "uint8": ("BIGINT", "INTEGER"),
    "uint16": ("BIGINT", "INTEGER"),
    "uint32": ("BIGINT", "BIGINT"),
    "uint64": ("VARCHAR", "VARCHAR"),
    "int128": ("VARCHAR", "VARCHAR"),
    "uint128": ("VARCHAR", "VARCHAR"),
    "float32": ("VARCHAR", "REAL"),
    "float64": ("VARCHAR", "DOUBLE PRECISION"),
    "decimal(18,3)": ("VARCHAR", "NUMERIC(18, 3)"),
    "date": ("VARCHAR", "VARCHAR"),
    "time": ("VARCHAR", "TIME WITHOUT TIME ZONE"),
    "timestamp": ("VARCHAR", "VARCHAR"),
    "timestamp_ns": ("VARCHAR", "VARCHAR"),
    "timestamptz": ("VARCHAR", "VARCHAR"),
    "interval": ("VARCHAR", "INTERVAL"),
    "varchar": ("VARCHAR", "BYTEA"),
    "json": ("VARCHAR", "BYTEA"),
    "blob": ("BLOB", "BYTEA"),
    "uuid": ("VARCHAR", "UUID"),
    "list": ("VARCHAR", "VARCHAR"),
}


@pytest.mark.parametrize("type_", sorted(EXPECTED_DDL))
def test_inlined_sql_type_ddl(type_: str) -> None:
    column = list_of(leaf("element", "int32")) if type_ == "list" else leaf("c", type_)
    lite, pg = EXPECTED_DDL[type_]
    assert inlined_sql_type(column, "sqlite").compile(dialect=sqlite.dialect()) == lite
    assert inlined_sql_type(column, "postgresql").compile(dialect=postgresql.dialect()) == pg
    assert inlined_sql_type(column, "postgres").compile(dialect=postgresql.dialect()) == pg


def test_select_expression_reads_pg_interval_and_time_as_text() -> None:
    c: sa.ColumnClause[Any] = sa.column("iv")
    expr = inlined_select_expression(leaf("iv", "interval"), "postgresql", c)
    assert "CAST" in str(expr.compile(dialect=postgresql.dialect()))
    assert inlined_select_expression(leaf("iv", "interval"), "sqlite", c) is c
    assert inlined_select_expression(leaf("x", "int32"), "postgresql", c) is c
