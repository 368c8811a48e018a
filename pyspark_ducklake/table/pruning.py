"""Skipping data files whose column statistics show that no row can pass a ``lake.scan`` filter.

The rows are filtered with pyarrow compute (:func:`pyspark_ducklake.table.filters.term_expression`), so a file's
bounds are put through the very same comparison: its min and max become one-element Arrow arrays of the column's
type, compared with the filter's value by the same expression, with the same implicit casts (a decimal column
against a float, an integer column against a float, a date against a datetime). Those casts keep order, so a bound
that fails the comparison proves that every value between the bounds fails it too. Where that reasoning does not
hold the file is kept:

- NaN: rows are filtered with DuckDB's semantics (:mod:`pyspark_ducklake.table.filters`: NaN above every number,
  equal to itself), and DuckDB's statistics leave NaN out of min and max; so NaN is a candidate value of its own, put
  through the same comparison, for every file whose ``contains_nan`` is not false. A bound that is itself NaN (it
  hides the largest real value) says nothing, and the file is kept.
- Promoted columns: a file written while a column was FLOAT stores FLOAT statistics ("0.1" is FLOAT 0.1, above the
  DOUBLE 0.1); its bounds are widened to cover both readings.
- Truncated strings: DuckDB cuts a long min (a prefix is smaller) and cuts then increments a long max (larger);
  files whose max cannot be incremented have no statistics at all.
- Missing statistics (NULL-only files, nested, INTERVAL, HUGEINT, columns added after the file was written), types
  pyarrow cannot compare, and any comparison pyarrow refuses (the row filter raises the same error).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pyspark_ducklake.catalog import reader
from pyspark_ducklake.catalog.db import Connection
from pyspark_ducklake.catalog.entries import DataFileEntry, TableEntry
from pyspark_ducklake.catalog.stats_values import parse_duckdb_text, round_float32
from pyspark_ducklake.catalog.types import Column, TableSchema, arrow_type
from pyspark_ducklake.exceptions import UnsupportedTypeError
from pyspark_ducklake.table.filters import FLOAT_TYPES, is_nan, term_expression
from pyspark_ducklake.table.partition_pruning import PARTITION_OPERATORS, PartitionPruner

# Comparisons whose result the bounds decide, and which bound each needs: "=" needs both; "in" is an "=" per value.
PRUNABLE_OPERATORS = ("=", "==", "<", "<=", ">", ">=", "in")
# An "in" list longer than this is pruned by its smallest and largest value (one comparison, not one per value).
IN_VALUES_COMPARED = 32
# Types whose bounds are not compared (extension types pyarrow cannot order; no Parquet stats for the others).
# TIMETZ statistics are ordered by instant, its Arrow values are times with the offset dropped: never compared.
_NOT_COMPARED = frozenset({"uuid", "json", "interval", "int128", "uint128", "timetz", "time_ns", "geometry"})
_TEMPORAL = frozenset({"date", "time", "timestamp", "timestamp_s", "timestamp_ms", "timestamp_ns", "timestamptz"})

Term = tuple[str, str, Any]


def filter_branches(filters: Any) -> list[list[Term]] | None:
    """The OR-ed conjunctions of a DNF filter (``[(c, op, v), ...]`` or a list of such lists); None when the filter
    is not in that form (a pyarrow Expression), which prunes nothing."""
    if not isinstance(filters, (list, tuple)) or not filters:
        return None
    if all(isinstance(t, tuple) for t in filters):
        groups: list[Any] = [filters]
    elif all(isinstance(g, (list, tuple)) and all(isinstance(t, tuple) for t in g) for g in filters):
        groups = list(filters)
    else:
        return None
    out = []
    for group in groups:
        terms = [t for t in group if len(t) == 3 and isinstance(t[0], str)]
        if len(terms) != len(group):
            return None
        out.append([(str(c), str(op), v) for c, op, v in terms])
    return out


def prune_files(
    conn: Connection,
    table: TableEntry,
    schema: TableSchema,
    files: list[DataFileEntry],
    filters: Any,
) -> tuple[list[DataFileEntry], int]:
    """The files a row passing ``filters`` may come from, and how many were dropped: by column statistics, and by
    partition values where the table has ``bucket`` or ``epoch_*`` keys (:mod:`.partition_pruning`)."""
    branches = filter_branches(filters)
    if not branches or not files:
        return files, 0
    by_name = {c.name: c for c in schema.columns if not c.is_nested}
    terms = [[(by_name[c], op, v) for c, op, v in branch if c in by_name and v is not None] for branch in branches]
    usable = [[t for t in branch if t[1] in PRUNABLE_OPERATORS] for branch in terms]
    by_partition = [[t for t in branch if t[1] in PARTITION_OPERATORS] for branch in terms]
    if any(not a and not b for a, b in zip(usable, by_partition, strict=True)):
        return files, 0  # a branch with nothing to prune on may match any file
    ids = sorted({c.column_id for branch in usable for c, _, _ in branch})
    stats, history = column_statistics(conn, table, ids, files)
    partitioned = any(f.partition_id is not None for f in files)
    pruner = PartitionPruner(conn, table.table_id, [c for b in by_partition for c, _, _ in b]) if partitioned else None
    keep = np.zeros(len(files), dtype=bool)
    for stat_terms, partition_terms in zip(usable, by_partition, strict=True):
        branch = np.ones(len(files), dtype=bool)
        for column, op, value in stat_terms:
            rows = [stats.get(f.data_file_id, {}).get(column.column_id) for f in files]
            branch &= may_match(column, op, value, rows, history.get(column.column_id, set()))
        if pruner is not None:
            for column, op, value in partition_terms:
                branch &= pruner.may_match(column, op, value, files)
        keep |= branch
    kept = [f for f, k in zip(files, keep, strict=True) if k]
    return kept, len(files) - len(kept)


def column_statistics(
    conn: Connection, table: TableEntry, column_ids: list[int], files: Sequence[DataFileEntry]
) -> tuple[dict[int, dict[int, Any]], dict[int, set[str]]]:
    """What :func:`may_match` reads for ``files``: ``{data_file_id: {column_id: stats row}}``, and the types each
    column has had (statistics keep the type of their file)."""
    if not column_ids:
        return {}, {}
    stats = reader.file_column_stats(conn, table.table_id, column_ids, [f.data_file_id for f in files])
    history = reader.column_types_ever(conn, table.table_id, column_ids)
    if any(f.mapping_id is not None for f in files):
        # added files keep statistics in their own types: a FLOAT file in a DOUBLE column has FLOAT bounds
        for cid in column_ids:
            history.setdefault(cid, set()).add("float32")
    return stats, history


def may_match(column: Column, op: str, value: Any, rows: Sequence[Any], types: set[str]) -> np.ndarray:
    """Per statistics row (``min_value``/``max_value``, or None): whether a value between them may pass
    ``column op value`` as pyarrow evaluates it. ``types`` are the types the column has had."""
    n = len(rows)
    everything = np.ones(n, dtype=bool)
    if column.type in _NOT_COMPARED:
        return everything
    float32_stats = column.type == "float64" and "float32" in types
    lo = _bounds(column, [None if r is None else r.min_value for r in rows], lower=True, float32=float32_stats)
    hi = _bounds(column, [None if r is None else r.max_value for r in rows], lower=False, float32=float32_stats)
    if lo is None or hi is None:
        return everything
    unknown = np.asarray(pc.or_(pc.is_null(lo), pc.is_null(hi)).to_numpy(zero_copy_only=False), dtype=bool)
    may_hold_nan = np.array([r is None or r.contains_nan is not False for r in rows], dtype=bool)

    def term(op: str, value: Any) -> np.ndarray:
        if op in ("=", "=="):
            result = _passes(column, hi, ">=", value) & _passes(column, lo, "<=", value)
        elif op in ("<", "<="):
            result = _passes(column, lo, op, value)
        else:
            result = _passes(column, hi, op, value)
        if column.type in FLOAT_TYPES:
            # NaN lies outside min..max (DuckDB's statistics leave it out): a file that may hold NaN may match
            # whatever NaN itself passes, put through the same comparison
            nan = _passes(column, pa.array([math.nan], arrow_type(column)), op, value)[0]
            result = result | (may_hold_nan & nan)
        return result

    try:
        result = _membership(term, value, n) if op == "in" else term(op, value)
    except (pa.ArrowException, TypeError, ValueError, OverflowError, ArithmeticError):
        return everything  # the row filter meets the same refusal
    return result | unknown


def _membership(term: Any, value: Any, n: int) -> np.ndarray:
    """``in``: a row passes when it equals one of the non-NULL values (:func:`filters.term_expression`), so a file
    may hold one when one value may be in it; a long list is tested as the range of its values, NaN apart."""
    if isinstance(value, (str, bytes)):
        raise TypeError("'in' takes a list")  # the row filter refuses it the same way
    values = [v for v in (value.to_pylist() if isinstance(value, pa.Array) else list(value)) if v is not None]
    result = np.zeros(n, dtype=bool)
    if len(values) <= IN_VALUES_COMPARED:
        for v in values:
            result |= term("=", v)
        return result
    numbers = [v for v in values if not is_nan(v)]
    if numbers:
        result |= term(">=", min(numbers)) & term("<=", max(numbers))
    if len(numbers) < len(values):
        result |= term("=", math.nan)
    return result


def _passes(column: Column, bounds: pa.Array, op: str, value: Any) -> np.ndarray:
    """Which bounds pass ``column op value`` as the row filter (:func:`filters.term_expression`) evaluates it."""
    name = column.name
    index = "i" if name != "i" else "j"
    table = pa.table({name: bounds, index: pa.array(np.arange(len(bounds), dtype=np.int64))})
    passed = table.filter(term_expression(name, op, value, column.type)).column(index).to_numpy()
    out = np.zeros(len(bounds), dtype=bool)
    out[passed] = True
    return out


def _bounds(column: Column, texts: list[str | None], *, lower: bool, float32: bool) -> pa.Array | None:
    """The statistics strings as an array of the column's Arrow type; NULL where there is no usable bound."""
    values: list[Any] = []
    for text in texts:
        values.append(None if text is None else _bound(column, text, lower=lower, float32=float32))
    t = column.type
    try:
        if t == "date":
            return pa.array(values, pa.int32()).cast(pa.date32())
        if t in _TEMPORAL:
            return pa.array(values, pa.int64()).cast(arrow_type(column))
        return pa.array(values, arrow_type(column))
    except (pa.ArrowException, TypeError, ValueError, OverflowError, UnsupportedTypeError):
        return None


def _bound(column: Column, text: str, *, lower: bool, float32: bool) -> Any:
    try:
        # file statistics are in DuckDB's Parquet form: blobs as hex
        value = bytes.fromhex(text) if column.type == "blob" else parse_duckdb_text(column, text)
    except (ValueError, UnsupportedTypeError):
        return None
    if isinstance(value, float):
        if math.isnan(value):
            return None
        if float32:
            as_float32 = round_float32(text)
            value = min(value, as_float32) if lower else max(value, as_float32)
    return value


__all__ = ["PRUNABLE_OPERATORS", "filter_branches", "may_match", "prune_files"]
