"""Putting rows in a table's sort order (``SET SORTED BY``) exactly as DuckDB 1.5.5 orders them.

DuckDB's order, checked against its ``ORDER BY``: NULLs where the key says (``NULLS LAST`` unless stated); floats
with ``-0.0`` equal to ``0.0`` and every NaN above every number; strings and blobs by their bytes (no collation);
UUIDs as their text; intervals normalised (30 days = 1 month, 24 hours = 1 day); structs field by field and lists
(and maps, lists of key/value structs) element by element, a shorter list first when it is a prefix, and a NULL
field or element above every value (so first when descending). Ties keep the rows' order (the sort is stable),
which is one of the orders DuckDB may give them.

Only keys that are a column can be evaluated; an expression (``lower(b)``, ``(c + 1)``) or a column of a type
without a defined order here (VARIANT, GEOMETRY, TIMETZ) is refused with :class:`UnsupportedSortOrderError`, before
anything is written: rows are never silently written unsorted into a table DuckDB would sort.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pyspark_ducklake.catalog import reader
from pyspark_ducklake.catalog.db import Connection
from pyspark_ducklake.catalog.entries import TableEntry
from pyspark_ducklake.catalog.sort_order import (
    DUCKDB_DIALECT,
    SortField,
    SortOrder,
    column_expression,
    column_reference,
)
from pyspark_ducklake.catalog.types import Column, TableSchema, find_folded
from pyspark_ducklake.exceptions import InvalidOptionError, NoSuchColumnError, UnsupportedSortOrderError

_KEY = re.compile(
    r'\s*(?P<name>"(?:[^"]|"")*"|[^\W\d]\w*)(?:\s+(?P<dir>ASC|DESC))?(?:\s+NULLS\s+(?P<nulls>FIRST|LAST))?\s*',
    re.IGNORECASE,
)
_UNORDERED_TYPES = frozenset({"variant", "geometry", "timetz"})
_MICROS_PER_DAY = 86_400_000_000
_DAYS_PER_MONTH = 30


@dataclass(frozen=True)
class SortKey:
    """A sort key resolved to a column (by id, so it survives renames); picklable for Spark tasks."""

    column_id: int
    name: str
    descending: bool
    nulls_first: bool


@dataclass(frozen=True)
class InsertOrder:
    """How an insert orders its rows: by the table's sort keys in every Parquet file, and in the catalog's inlined
    rows too unless the ``sort_on_insert`` option is ``false`` (DuckDB then sorts only what goes to Parquet)."""

    keys: tuple[SortKey, ...] = ()
    inlined: bool = True

    def inlined_rows(self, data: pa.Table, schema: TableSchema) -> pa.Table:
        """``data`` in the order rows are inlined into the catalog (their row ids follow it)."""
        return sort_table(data, self.keys, schema) if self.inlined else data


def insert_order(conn: Connection, table: TableEntry, order: SortOrder | None, schema: TableSchema) -> InsertOrder:
    """The order an insert into ``table`` (sort order ``order``, columns ``schema``) writes rows in.

    Raises:
        UnsupportedSortOrderError: see :func:`sort_keys`.
    """
    keys = sort_keys(order, schema, f"{table.schema.schema_name}.{table.table_name}")
    if not keys:
        return InsertOrder()
    # DuckDB compares the option's text with "true" (ducklake_insert.cpp PlanInsert)
    return InsertOrder(keys, (reader.scoped_metadata_value(conn, "sort_on_insert", table) or "true") == "true")


def sort_keys(order: SortOrder | None, schema: TableSchema, table_name: str) -> tuple[SortKey, ...]:
    """The keys of ``order`` as columns of ``schema`` (empty without a sort order); keys of another dialect are
    skipped, as DuckDB skips them.

    Raises:
        UnsupportedSortOrderError: a key is an expression, names no column, or a column of a type this library
            cannot order as DuckDB does.
    """
    if order is None:
        return ()
    keys = []
    for f in order.fields:
        if f.dialect != DUCKDB_DIALECT:
            continue
        name = column_reference(f.expression)
        if name is None:
            raise UnsupportedSortOrderError(
                f"table {table_name} is sorted by the expression {f.expression!r}, which pyspark-ducklake cannot "
                "evaluate (only columns); sort it by columns (Lake.set_sort_order) or reset its sort order, else "
                "write to it with DuckDB"
            )
        column = named_column(schema, name)
        if column is None:
            raise UnsupportedSortOrderError(
                f"table {table_name} is sorted by {f.expression!r}, which names no column of it "
                f"(columns: {schema.names()}); reset or change its sort order"
            )
        _check_orderable(column, f"table {table_name} is sorted by {f.expression!r}")
        keys.append(SortKey(column.column_id, column.name, f.descending, f.nulls_first))
    return tuple(keys)


def parse_sort_order(
    sort_by: Sequence[str] | str, schema: TableSchema, table_name: str
) -> tuple[tuple[SortField, ...], bool]:
    """``["a DESC NULLS FIRST", "b"]`` (or ``"a DESC NULLS FIRST, b"``) as the sort fields DuckDB's ``SET SORTED BY``
    stores, and whether every key stated its NULLS order. A name is bare or double-quoted and matches a top-level
    column in any case; it is stored as spelt, quoted as DuckDB quotes it.

    Raises:
        InvalidOptionError: a key is not ``column [ASC|DESC] [NULLS FIRST|LAST]`` (expressions are not taken).
        NoSuchColumnError: it names no column of the table.
        UnsupportedSortOrderError: the column holds values this library cannot order as DuckDB does.
    """
    items = _split_keys(sort_by) if isinstance(sort_by, str) else list(sort_by)
    fields = []
    stated = True
    for item in items:
        if not isinstance(item, str):
            raise InvalidOptionError(f"sort key {item!r} must be a string such as 'col DESC NULLS FIRST'")
        m = _KEY.fullmatch(item)
        if m is None:
            raise InvalidOptionError(
                f"cannot parse sort key {item!r}; use 'col [ASC|DESC] [NULLS FIRST|NULLS LAST]' with a column name "
                "(double-quoted when it holds spaces or quotes: '\"my col\" DESC'); expressions are not supported"
            )
        name = column_reference(m.group("name"))
        assert name is not None
        column = named_column(schema, name)
        if column is None:
            raise NoSuchColumnError(
                f"sort key {item!r}: no column {name!r} in {table_name} (columns: {schema.names()})"
            )
        _check_orderable(column, f"cannot sort {table_name} by {item!r}")
        direction, nulls = (m.group("dir") or "ASC").upper(), m.group("nulls")
        stated = stated and nulls is not None
        fields.append(SortField(column_expression(name), direction == "DESC", (nulls or "").upper() == "FIRST"))
    return tuple(fields), stated


def named_column(schema: TableSchema, name: str) -> Column | None:
    """The top-level column a sort key names: DuckDB matches names case-insensitively."""
    column = schema.by_name(name)
    if column is None:
        folded = find_folded(schema.names(), name)
        column = None if folded is None else schema.by_name(folded)
    return column


def _split_keys(text: str) -> list[str]:
    """Split at commas outside double quotes."""
    out, current, quoted = [], "", False
    for ch in text:
        if ch == '"':
            quoted = not quoted
        if ch == "," and not quoted:
            out.append(current)
            current = ""
        else:
            current += ch
    out.append(current)
    return [k for k in out if k.strip()]


def _check_orderable(column: Column, what: str) -> None:
    for c in column.walk():
        if c.type in _UNORDERED_TYPES:
            raise UnsupportedSortOrderError(
                f"{what}: column {column.name!r} holds {c.type.upper()} values, which pyspark-ducklake cannot order "
                "as DuckDB does; sort by other columns (or reset the sort order)"
            )


def sort_table(
    data: pa.Table, keys: Sequence[SortKey], schema: TableSchema, tiebreakers: Sequence[str] = ()
) -> pa.Table:
    """``data`` (its first columns being ``schema``'s) in the keys' order, then by ``tiebreakers`` (column names,
    ascending); unchanged without keys. A key whose column the data lacks (added since it was written) holds one
    value for every row and orders nothing."""
    if not keys or data.num_rows < 2:
        return data
    order = sort_permutation(data, keys, schema, tiebreakers)
    if order is None:
        return data
    return data.take(pa.array(order))


def sort_permutation(
    data: pa.Table, keys: Sequence[SortKey], schema: TableSchema, tiebreakers: Sequence[str] = ()
) -> np.ndarray | None:
    """The row order :func:`sort_table` puts ``data`` in, or None when no key is among its columns."""
    positions = {c.column_id: i for i, c in enumerate(schema.columns)}
    columns: list[np.ndarray] = []  # most significant first
    for key in keys:
        i = positions.get(key.column_id)
        if i is None or i >= data.num_columns:
            continue
        values = data.column(i)
        nulls = values.is_null().to_numpy(zero_copy_only=False)
        columns.append(np.where(nulls, 0 if key.nulls_first else 1, 1 if key.nulls_first else 0).astype(np.int8))
        ranks = dense_ranks(values)
        columns.append(-ranks if key.descending else ranks)
    if not columns:
        return None
    for name in tiebreakers:
        columns.append(data.column(name).to_numpy(zero_copy_only=False))
    # np.lexsort is stable and takes its most significant key last
    return np.lexsort(columns[::-1])


def dense_ranks(values: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """Each value's rank among the values in DuckDB's ascending order, equal values ranking equal; a NULL ranks
    above every value (the order of a NULL inside a struct or list)."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks() if values.num_chunks != 1 else values.chunk(0)
    t = values.type
    if isinstance(t, pa.BaseExtensionType):
        return dense_ranks(values.storage)
    if pa.types.is_struct(t):
        return _struct_ranks(values)
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_map(t) or pa.types.is_fixed_size_list(t):
        return _list_ranks(values)
    if t == pa.month_day_nano_interval():
        return _interval_ranks(values)
    if pa.types.is_dictionary(t):
        return dense_ranks(values.dictionary_decode())
    if pa.types.is_null(t):
        return np.zeros(len(values), dtype=np.int64)
    # pyarrow ranks NULLs last, every NaN above every number and -0.0 equal to 0.0, as DuckDB orders them
    return pc.rank(values, sort_keys="ascending", tiebreaker="dense").to_numpy(zero_copy_only=False).astype(np.int64)


def _rank_rows(columns: list[np.ndarray], n: int) -> np.ndarray:
    """Dense ranks of rows compared column by column (the first column most significant)."""
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    if not columns:
        return np.ones(n, dtype=np.int64)
    order = np.lexsort(columns[::-1])
    stacked = np.stack([c[order] for c in columns])
    new = np.ones(n, dtype=bool)
    new[1:] = np.any(stacked[:, 1:] != stacked[:, :-1], axis=0)
    ranks = np.empty(n, dtype=np.int64)
    ranks[order] = np.cumsum(new)
    return ranks


def _struct_ranks(values: pa.StructArray) -> np.ndarray:
    n = len(values)
    columns = []
    for i in range(values.type.num_fields):
        child = values.field(i)  # the child as stored: a NULL struct's slots are overridden by the top null key
        nulls = child.is_null().to_numpy(zero_copy_only=False).astype(np.int8)
        columns += [nulls, dense_ranks(child)]
    ranks = _rank_rows(columns, n)
    return _nulls_last(ranks, values)


def _list_ranks(values: pa.Array) -> np.ndarray:
    n = len(values)
    if pa.types.is_fixed_size_list(values.type):
        size = values.type.list_size
        offsets = np.arange(0, (n + 1) * size, size, dtype=np.int64)
        child = values.values.slice(values.offset * size, n * size)
    else:
        offsets = values.offsets.to_numpy(zero_copy_only=False).astype(np.int64)
        child = values.values.slice(int(offsets[0]), int(offsets[-1] - offsets[0]))
        offsets = offsets - offsets[0]
    element_ranks = dense_ranks(child)
    valid = values.is_valid().to_numpy(zero_copy_only=False)
    keys = [tuple(element_ranks[offsets[i] : offsets[i + 1]].tolist()) if valid[i] else () for i in range(n)]
    distinct = sorted(set(keys))  # tuples compare element by element, a prefix first: DuckDB's list order
    rank_of = {k: r for r, k in enumerate(distinct, 1)}
    ranks = np.fromiter((rank_of[k] for k in keys), dtype=np.int64, count=n)
    return _nulls_last(ranks, values)


_INTERVAL = np.dtype([("months", "<i4"), ("days", "<i4"), ("nanos", "<i8")])


def _interval_ranks(values: pa.Array) -> np.ndarray:
    n = len(values)
    raw = np.frombuffer(values.buffers()[1], dtype=_INTERVAL)[values.offset : values.offset + n]
    months, days = raw["months"].astype(np.int64), raw["days"].astype(np.int64)
    micros = _tdiv(raw["nanos"], 1000)
    # DuckDB's interval_t::Normalize: whole days carried out of micros, then whole months out of days
    days = days + _tdiv(micros, _MICROS_PER_DAY)
    micros = micros - _tdiv(micros, _MICROS_PER_DAY) * _MICROS_PER_DAY
    months = months + _tdiv(days, _DAYS_PER_MONTH)
    days = days - _tdiv(days, _DAYS_PER_MONTH) * _DAYS_PER_MONTH
    return _nulls_last(_rank_rows([months, days, micros], n), values)


def _tdiv(a: np.ndarray, b: int) -> np.ndarray:
    """C++ integer division (toward zero), element-wise."""
    q: np.ndarray = np.abs(a) // b
    return np.where(a >= 0, q, -q)


def _nulls_last(ranks: np.ndarray, values: pa.Array) -> np.ndarray:
    if values.null_count:
        nulls = values.is_null().to_numpy(zero_copy_only=False)
        ranks = np.where(nulls, (ranks.max(initial=0) + 1), ranks)
    return ranks


__all__ = [
    "InsertOrder",
    "SortKey",
    "dense_ranks",
    "insert_order",
    "parse_sort_order",
    "sort_keys",
    "sort_permutation",
    "sort_table",
]
