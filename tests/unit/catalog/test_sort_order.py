"""Sort expressions as DuckDB writes and reads them back (``ColumnRefExpression::ToString``)."""

from __future__ import annotations

import pytest

from pyspark_ducklake.catalog.sort_order import column_expression, column_reference, names_in


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("a", "a"),
        ("Ab_9", "Ab_9"),  # capitals stay bare
        ("year", '"year"'),  # any keyword is quoted, in any case
        ("SELECT", '"SELECT"'),
        ("My Col", '"My Col"'),
        ('x"y', '"x""y"'),
        ("1a", '"1a"'),
        ("é", '"é"'),
        ("a.b", '"a.b"'),
    ],
)
def test_column_expression_quotes_as_duckdb(name: str, text: str) -> None:
    assert column_expression(name) == text
    assert column_reference(text) == name


@pytest.mark.parametrize("text", ["lower(b)", "(c + 1)", "b COLLATE nocase", '"a" || "b"', "t.a", '"unclosed'])
def test_expressions_are_not_column_references(text: str) -> None:
    assert column_reference(text) is None


def test_names_in_skips_string_literals() -> None:
    assert names_in("""concat("My Col", 'a''b', x)""") == ["concat", "My Col", "x"]
