"""``(column, op, value)`` filters as pyarrow expressions that select the rows DuckDB's ``WHERE`` selects.

pyarrow's own reading of such filters (``pyarrow.parquet.filters_to_expression``) differs from DuckDB's on floats
and NULLs: there NaN fails every comparison but ``!=``, and ``not in`` keeps NULL rows. DuckDB (and Spark) order NaN
above every number and equal to itself, take -0.0 equal to 0.0, and let no NULL pass a comparison. Each term is
built here so that pyarrow's evaluation gives DuckDB's result:

- float32 columns are compared as DOUBLE (exact widening), so a value beyond float32's range stays itself;
- float column, NaN value: ``=`` and ``>=`` select the NaN rows, ``>`` none, ``<`` and ``!=`` the other non-NULL
  rows, ``<=`` every non-NULL row;
- float column, number value: ``>`` and ``>=`` also select the NaN rows (the other operators already agree);
- integer or decimal column, NaN value: the column holds no NaN, so ``=``, ``>``, ``>=`` select nothing and ``<``,
  ``<=``, ``!=`` every non-NULL row;
- ``in`` / ``not in``: on floats -0.0 matches 0.0 and any NaN matches any NaN (whatever its sign and payload bits);
  NULL rows never pass; a NULL in the list
  matches nothing, and makes ``not in`` pass nothing (DuckDB's ``x NOT IN (1, NULL)`` is never true).

The same terms decide file pruning (:mod:`pyspark_ducklake.table.pruning`), so pruning and the row filter cannot
disagree. A ``pyarrow.compute.Expression`` given instead of tuples is used as it is (pyarrow's semantics).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from decimal import Decimal
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pyspark_ducklake.catalog.types import TableSchema
from pyspark_ducklake.exceptions import InvalidOptionError

FILTER_OPERATORS = ("=", "==", "!=", "<", "<=", ">", ">=", "in", "not in")
FLOAT_TYPES = frozenset({"float32", "float64"})
_NUMERIC_PREFIXES = ("int", "uint", "decimal")


def filter_expression(filters: Any, schema: TableSchema | None = None) -> pc.Expression:
    """A DNF filter (``[("id", "<", 5)]`` or a list of such lists, OR-ed) as an Expression with DuckDB's semantics
    for the columns of ``schema`` (see the module docstring); an Expression is returned as it is.

    Raises:
        InvalidOptionError: the filter is malformed (an unknown operator, a tuple of another length, an ``in``
            value that is not a collection).
    """
    if isinstance(filters, pc.Expression):
        return filters
    try:
        branches = dnf_branches(filters)
        types = {c.name: c.type for c in schema.columns} if schema is not None else {}
        disjunction: pc.Expression | None = None
        for branch in branches:
            conjunction: pc.Expression | None = None
            for column, op, value in branch:
                term = term_expression(column, op, value, types.get(column))
                conjunction = term if conjunction is None else conjunction & term
            assert conjunction is not None
            disjunction = conjunction if disjunction is None else disjunction | conjunction
        assert disjunction is not None
        return disjunction
    except (ValueError, TypeError, pa.ArrowException) as e:
        raise InvalidOptionError(
            f"filter {filters!r} is not a valid filter ({e}); give (column, operator, value) tuples, or lists of "
            f"them OR-ed together, with an operator among {', '.join(FILTER_OPERATORS)}, or a pyarrow Expression"
        ) from e


def dnf_branches(filters: Any) -> list[list[tuple[str, str, Any]]]:
    """The OR-ed conjunctions of a DNF filter, read as pyarrow reads it.

    Raises:
        ValueError: an empty filter or conjunction, or a term that is not ``(column, operator, value)``.
    """
    if not isinstance(filters, (list, tuple)) or not filters or any(len(f) == 0 for f in filters):
        raise ValueError("Malformed filters")
    groups = [filters] if isinstance(filters[0][0], str) else filters
    out = []
    for group in groups:
        terms = []
        for term in group:
            column, op, value = term
            terms.append((column, op, value))
        out.append(terms)
    return out


def term_expression(column: str, op: str, value: Any, column_type: str | None) -> pc.Expression:
    """One ``column op value`` term, selecting what DuckDB's ``WHERE`` selects on a column of ``column_type``.

    Raises:
        ValueError: an unknown operator.
        TypeError: an ``in`` value that is not a collection.
    """
    field = pc.field(column)
    if column_type == "float32":
        # compared as DOUBLE, as DuckDB and Spark compare a FLOAT with a double: exact, and pyarrow would otherwise
        # cast the value to float32 (1e300 becoming inf, which then matched an inf row)
        field = field.cast(pa.float64())
    if op in ("in", "not in"):
        return _membership(field, op == "not in", value, column_type in FLOAT_TYPES)
    if op not in FILTER_OPERATORS:
        raise ValueError(f'"{op}" is not a valid operator in predicates.')
    if column_type in FLOAT_TYPES:
        if is_nan(value):
            nan = pc.is_nan(field)
            return {"=": nan, "==": nan, ">=": nan, ">": _nothing(field), "<": ~nan, "!=": ~nan}.get(
                op, field.is_valid()
            )
        plain = _compare(field, op, value)
        return plain | pc.is_nan(field) if op in (">", ">=") else plain
    if is_nan(value) and column_type is not None and column_type.startswith(_NUMERIC_PREFIXES):
        return _nothing(field) if op in ("=", "==", ">", ">=") else field.is_valid()
    return _compare(field, op, value)


def _compare(field: pc.Expression, op: str, value: Any) -> pc.Expression:
    if op in ("=", "=="):
        return field == value
    if op == "!=":
        return field != value
    if op == "<":
        return field < value
    if op == "<=":
        return field <= value
    if op == ">":
        return field > value
    return field >= value


def _membership(field: pc.Expression, negated: bool, value: Any, floats: bool) -> pc.Expression:
    if isinstance(value, (str, bytes)) or not isinstance(value, (Sequence, set, frozenset, np.ndarray, pa.Array)):
        # a string would be split into its characters; DuckDB's IN takes a list
        raise TypeError(f"the value of 'in' / 'not in' must be a list, tuple or set, not {type(value).__name__}")
    values = value.to_pylist() if isinstance(value, pa.Array) else list(value)
    has_null = any(v is None for v in values)
    values = [v for v in values if v is not None]
    if floats:
        # is_in hashes bit patterns: -0.0 + 0.0 is 0.0, and every NaN (a sign or payload bit set) becomes one NaN
        plus_zero = pc.add(field, pa.scalar(0.0))
        field = pc.if_else(pc.is_nan(field), pa.scalar(math.nan), plus_zero)
        values = [math.nan if is_nan(v) else 0.0 if v == 0 else v for v in values]
    hit = field.isin(pa.array(values, pa.float64()) if floats else values)
    if not negated:
        return hit
    if has_null:
        return _nothing(field)
    return ~hit & field.is_valid()


def _nothing(field: pc.Expression) -> pc.Expression:
    return field.is_valid() & pc.scalar(False)


def is_nan(value: Any) -> bool:
    if isinstance(value, (float, np.floating)):
        return math.isnan(value)
    return isinstance(value, Decimal) and value.is_nan()


__all__ = ["FILTER_OPERATORS", "dnf_branches", "filter_expression", "is_nan", "term_expression"]
