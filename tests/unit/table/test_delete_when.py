"""writeStream's ``deleteWhen`` evaluator: Spark's results on chosen edges, and what it refuses (typed, naming the
option). The comparison with Spark itself on random rows and expressions is tests/property/test_delete_when_vs_spark.py.
"""

from __future__ import annotations

import math
import pickle

import pyarrow as pa
import pytest

from pyspark_ducklake.exceptions import InvalidOptionError
from pyspark_ducklake.table.delete_when import arrow_kind, compile_delete_when

NAN = math.nan
ROWS = pa.table(
    {
        "op": pa.array(["d", "u", None, "D", "it's", "é"], pa.string()),
        "x": pa.array([1, None, 2**63 - 1, -(2**63), 0, 2**53 + 1], pa.int64()),
        "f": pa.array([NAN, -0.0, 1.5, None, math.inf, 0.0], pa.float64()),
        "g": pa.array([16777217.0, None, NAN, -0.0, 1.0, 2.0], pa.float32()),
        "b": pa.array([True, False, None, True, False, None], pa.bool_()),
        "Kind": pa.array(["a", "b", "c", "d", "e", "f"], pa.string()),
        "we ird": pa.array([1, 2, 3, 4, 5, None], pa.int8()),
        "day": pa.array([None, 1, 2, 3, 4, 5], pa.date32()),
    }
)
KINDS = {f.name: arrow_kind(f.type) for f in ROWS.schema}


def run(text: str) -> list[bool | None]:
    return compile_delete_when(text, KINDS).evaluate(ROWS).to_pylist()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("op = 'd'", [True, False, None, False, False, False]),  # strings compare exactly (binary collation)
        ('OP <> "d"', [False, True, None, True, True, True]),  # names and keywords case-insensitive
        ("op = 'it\\'s'", [False, False, None, False, True, False]),
        ("op > 'z'", [False, False, None, False, False, True]),  # by UTF-8 bytes: é above z
        ("x > 1.5", [False, None, True, False, False, True]),  # integers against a decimal: exact
        ("x = 1.0", [True, None, False, False, False, False]),
        ("x <= 9223372036854775806.5", [True, None, False, True, True, True]),  # a decimal literal: exact
        ("x = 9223372036854775808", [False, None, False, False, False, False]),  # beyond bigint: a decimal literal
        ("x = -9223372036854775808", [False, None, False, True, False, False]),
        ("x = 9007199254740992e0", [False, None, False, False, False, True]),  # bigint to double: Spark's cast
        ("f = 0", [False, True, False, None, False, True]),  # -0.0 equals 0.0
        ("f = f", [True, True, True, None, True, True]),  # NaN equals NaN
        ("f > 1e300", [True, False, False, None, True, False]),  # NaN above every number, infinity included
        ("f < f", [False, False, False, None, False, False]),
        ("g = 16777216", [True, None, False, False, False, False]),  # float vs int: Spark compares in float
        ("g > 0", [True, None, True, False, True, True]),
        ("f <=> NULL", [False, False, False, True, False, False]),
        ("b <=> b", [True, True, True, True, True, True]),
        ("op = NULL", [None] * 6),
        ("x IN (1, 0, NULL)", [True, None, None, None, True, None]),  # three-valued IN
        ("x NOT IN (1, 0)", [False, None, True, True, False, True]),
        ("NOT b", [False, True, None, False, True, None]),
        ("b OR x IS NULL", [True, True, None, True, False, None]),
        ("b AND (op = 'd' OR op IS NULL)", [True, False, None, False, False, False]),
        ("`we ird` >= 4 AND kind IN ('d', 'e')", [False, False, False, True, True, False]),
        ("day IS NULL", [True, False, False, False, False, False]),  # any type: IS [NOT] NULL only
        ("NOT NULL", [None] * 6),
        ("TRUE", [True] * 6),
        ("1 < 2.5 AND 'a' < 'b'", [True] * 6),
        ("(x = 1) = TRUE", [True, None, False, False, False, False]),
        ("x = - 1 OR x = -.5", [False, None, False, False, False, False]),
    ],
)
def test_results_as_spark_gives_them(text: str, expected: list[bool | None]) -> None:
    assert run(text) == expected


def test_flags_count_null_as_false_and_name_the_columns_read() -> None:
    compiled = compile_delete_when("op = 'd' OR `KIND` = 'f' OR b", KINDS)
    assert compiled.flags(ROWS).to_pylist() == [True, False, False, True, False, True]
    assert compiled.columns == ("op", "Kind", "b")
    again = pickle.loads(pickle.dumps(compiled))  # shipped to the executors with the writer
    assert again.flags(ROWS).to_pylist() == compiled.flags(ROWS).to_pylist()
    chunked = pa.concat_tables([ROWS.slice(0, 2), ROWS.slice(2)])
    assert compiled.flags(chunked).to_pylist() == compiled.flags(ROWS).to_pylist()


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("upper(op) = 'D'", "function calls"),
        ("x IN (SELECT 1)", "subqueries"),
        ("opp = 'd'", "did you mean 'op'"),
        ("op = 1", "between number and string"),
        ("b = 1", "between bool and number"),
        ("day = 1", "compares only with IS [NOT] NULL"),
        ("x + 1 > 2", "unexpected character '+'"),
        ("x = -x", "only before a number literal"),
        ("NULL", "not a boolean expression"),
        ("op", "not a boolean expression"),
        ("op AND b", "AND takes boolean operands"),
        ("x == 1", "write '='"),
        ("x = 1L", "typed literals"),
        ("op = 'a' 'b'", "unexpected"),
        ("op = 'a\\x'", "the escape \\x"),
        ("op = 'a' -- comment", "comments"),
        ("case = 1", "backquote a column of that name"),
        ("x BETWEEN 1 AND 2", "unexpected"),
        ("op LIKE 'd%'", "unexpected"),
        ("x IS TRUE", "only IS NULL and IS NOT NULL"),
        ("x IN (1,2,3,4,5,6,7,8,9,10,11)", "more than 10 items"),
        ("f = 0.1234567890123456", "more than 15 digits"),
        ("f = 1e400", "out of the range of a double"),
        ("x < 0.0000000000000000001", "Spark would round it"),  # 19 decimals
        ("x < 9223372036854775808", "even for NULL"),  # Spark: true, on NULL rows too
        ("-9223372036854775809 >= x", "even for NULL"),
        ("x < 123456789012345678901", "Spark would round it"),  # 21 digits
        ("x.y = 1", "unexpected character '.'"),
        ("", "it is empty"),
        ("(op = 'd'", "expected ')'"),
        ("op = 'd')", "unexpected ')'"),
    ],
)
def test_outside_the_subset_is_refused_naming_the_option(text: str, says: str) -> None:
    with pytest.raises(InvalidOptionError) as info:
        compile_delete_when(text, KINDS)
    message = str(info.value)
    assert message.startswith("option deleteWhen ") and says in message, message
    assert "ducklake_sink" in message  # where full Spark SQL is evaluated


def test_ambiguous_name_is_refused() -> None:
    with pytest.raises(InvalidOptionError, match="ambiguous"):
        compile_delete_when("a = 1", {"a": "int32", "A": "int32"})
