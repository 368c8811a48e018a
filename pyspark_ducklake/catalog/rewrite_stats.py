"""A table's statistics recomputed after ``rewrite_data_files``, as DuckDB 1.5.5 recomputes them
(``DuckLakeTransactionState::RecomputeGlobalStatsAfterRewrite``).

Table statistics only ever widen, and ``record_count`` counts every row ever inserted: DuckDB answers MIN/MAX from
them only while ``record_count`` equals the live row count (no row was ever deleted). A rewrite that leaves the
table without any delete makes them exact again: ``record_count``, ``file_size_bytes`` and every column's
``contains_null``/``contains_nan``/``min_value``/``max_value`` are computed afresh from the live files' statistics
(and the live inlined rows, when every top-level column is a number, a time, a string or a boolean). When some
delete remains, or an inlined column is of another type, nothing changes, as in DuckDB.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pyarrow.compute as pc
from sqlalchemy import BigInteger, cast, func, select, update

from pyspark_ducklake.catalog import reader
from pyspark_ducklake.catalog import tables as T
from pyspark_ducklake.catalog.geometry import GeoSummary, geo_stats_text, parse_geo_stats
from pyspark_ducklake.catalog.inlined_tables import (
    columns_at_schema_version,
    decoded_values,
    inlined_layout,
    inlined_rows,
)
from pyspark_ducklake.catalog.stats_values import array_min_max, storable_stat, widen
from pyspark_ducklake.catalog.transaction import CommitContext
from pyspark_ducklake.catalog.types import Column, TableSchema, decimal_params

_FOLDABLE = frozenset(
    {"boolean", "varchar", "json", "float32", "float64", "int128", "uint128"}
    | {f"{s}int{n}" for s in ("", "u") for n in (8, 16, 32, 64)}
    | {"date", "time", "time_ns", "timetz", "timestamp", "timestamptz", "timestamp_s", "timestamp_ms", "timestamp_ns"}
)


@dataclass
class _Stats:
    """One column's merged statistics (``DuckLakeColumnStats``): a count or bound is None once a part lacked it."""

    column: Column
    null_count: int | None = 0
    nan: bool | None = None
    lo: str | None = None
    hi: str | None = None
    has_lo: bool = False
    has_hi: bool = False
    valid: bool = False  # any non-NULL value seen (min/max start there)
    geo: GeoSummary | None = None
    seen: bool = False

    def merge(
        self,
        values: int | None,
        nulls: int | None,
        lo: str | None,
        hi: str | None,
        nan: bool | None,
        geo: GeoSummary | None = None,
    ) -> None:
        """``DuckLakeColumnStats::MergeStats`` of one more part (a file's statistics row)."""
        first = not self.seen
        self.seen = True
        self.null_count = None if nulls is None or self.null_count is None else self.null_count + nulls
        if first:
            self.nan = nan
        else:
            self.nan = None if nan is None or self.nan is None else self.nan or nan
        if geo is not None:
            self.geo = geo if self.geo is None else self.geo.merge(geo)
        any_valid = values is None or nulls is None or values > 0
        if not any_valid:
            return
        if not self.valid:
            self.valid, self.lo, self.hi, self.has_lo, self.has_hi = True, lo, hi, lo is not None, hi is not None
            return
        self.has_lo = self.has_lo and lo is not None
        self.has_hi = self.has_hi and hi is not None
        if self.has_lo or self.has_hi:
            new_lo, new_hi = widen(self.column, self.lo, self.hi, lo, hi)
            self.lo = new_lo if self.has_lo else None
            self.hi = new_hi if self.has_hi else None


@dataclass
class _Totals:
    records: int = 0
    size: int = 0
    columns: dict[int, _Stats] = field(default_factory=dict)


def recompute_after_rewrite(ctx: CommitContext, table_id: int) -> None:
    """Recompute the table's statistics rows from what is live at this snapshot (after the rewrite's rows), when no
    delete remains; call it after the commit's own statistics are written."""
    conn = ctx.conn
    if reader.table_stats(conn, table_id) is None:
        return
    schema = reader.table_schema(conn, table_id, ctx.snapshot_id)
    by_id = schema.by_id()
    totals = _file_totals(ctx, table_id, by_id)
    if totals.records != _net_file_rows(ctx, table_id):
        return  # deletes remain: the statistics cannot be exact
    inlined = _fold_inlined(ctx, table_id, schema, totals)
    if inlined is None:
        return
    s, cs = T.ducklake_table_stats, T.ducklake_table_column_stats
    conn.execute(
        update(s)
        .where(s.c.table_id == table_id)
        .values(record_count=totals.records + inlined, file_size_bytes=totals.size)
    )
    existing = set(reader.table_column_stats(conn, table_id))
    for column_id, column in by_id.items():
        if column_id not in existing:
            continue  # DuckDB only updates the rows there are
        st = totals.columns.get(column_id, _Stats(column))
        conn.execute(
            update(cs)
            .where(cs.c.table_id == table_id, cs.c.column_id == column_id)
            .values(
                contains_null=None if not st.seen or st.null_count is None else st.null_count > 0,
                contains_nan=st.nan if st.seen else None,
                min_value=storable_stat(st.lo) if st.has_lo else None,
                max_value=storable_stat(st.hi) if st.has_hi else None,
                extra_stats=geo_stats_text(st.geo) if st.geo is not None else None,
            )
        )


def _file_totals(ctx: CommitContext, table_id: int, by_id: dict[int, Column]) -> _Totals:
    d, fs = T.ducklake_data_file, T.ducklake_file_column_stats
    files = ctx.conn.execute(
        select(d.c.data_file_id, d.c.record_count, d.c.file_size_bytes)
        .where(d.c.table_id == table_id, reader.visible(d, ctx.snapshot_id))
        .order_by(d.c.data_file_id)
    ).all()
    totals = _Totals()
    ids = [int(f.data_file_id) for f in files]
    for f in files:
        totals.records += int(f.record_count or 0)
        totals.size += int(f.file_size_bytes or 0)
    rows: dict[int, list[Any]] = {}
    for i in range(0, len(ids), 500):
        for r in ctx.conn.execute(select(fs).where(fs.c.data_file_id.in_(ids[i : i + 500]))):
            rows.setdefault(int(r.data_file_id), []).append(r)
    for file_id in ids:  # in data_file_id order, as DuckDB merges them
        for r in rows.get(file_id, []):
            column = by_id.get(int(r.column_id))
            if column is None:
                continue
            st = totals.columns.setdefault(column.column_id, _Stats(column))
            st.merge(
                r.value_count,
                r.null_count,
                r.min_value,
                r.max_value,
                r.contains_nan,
                parse_geo_stats(r.extra_stats) if column.type == "geometry" else None,
            )
    return totals


def _net_file_rows(ctx: CommitContext, table_id: int) -> int:
    """Live rows of the live data files: their records less their live delete files' and inlined deletes."""
    d, x = T.ducklake_data_file, T.ducklake_delete_file
    snap = ctx.snapshot_id
    # summed in SQL as BIGINT: PostgreSQL's SUM of a BIGINT is a NUMERIC, which the column's own type refuses
    records = ctx.conn.execute(
        select(_total(d.c.record_count)).where(d.c.table_id == table_id, reader.visible(d, snap))
    ).scalar_one()
    deleted = ctx.conn.execute(
        select(_total(x.c.delete_count))
        .select_from(x.join(d, x.c.data_file_id == d.c.data_file_id))
        .where(x.c.table_id == table_id, reader.visible(x, snap), reader.visible(d, snap))
    ).scalar_one()
    inlined = 0
    if reader.has_table(ctx.conn, T.inlined_delete_table_name(table_id)):
        t = T.inlined_delete_table(table_id)
        inlined = ctx.conn.execute(
            select(func.count())
            .select_from(t.join(d, t.c.file_id == d.c.data_file_id))
            .where(t.c.begin_snapshot <= snap, d.c.table_id == table_id, reader.visible(d, snap))
        ).scalar_one()
    return int(records) - int(deleted) - int(inlined)


def _total(column: Any) -> Any:
    return cast(func.coalesce(func.sum(column), 0), BigInteger)


def _foldable(column: Column) -> bool:
    return column.type in _FOLDABLE or decimal_params(column.type) is not None


def _fold_inlined(ctx: CommitContext, table_id: int, schema: TableSchema, totals: _Totals) -> int | None:
    """Merge the live inlined rows into ``totals``; their count, or None when a top-level column cannot be folded
    (DuckDB's ``TryMergeInlinedStats``: numbers, times, strings and booleans only)."""
    parts: list[tuple[str, TableSchema, list[Any]]] = []
    count = 0
    for name, version in reader.inlined_tables(ctx.conn, table_id):
        if not reader.has_table(ctx.conn, name):
            continue
        at = columns_at_schema_version(ctx.conn, table_id, version, schema)
        layout = inlined_layout(ctx.conn, name, at.columns)
        rows = list(inlined_rows(ctx.conn, layout, snapshot_id=ctx.snapshot_id))
        count += len(rows)
        parts.append((name, TableSchema(layout.columns), rows))
    if count == 0:
        return 0
    if not all(_foldable(c) for c in schema.columns):
        return None
    by_id = schema.by_id()
    for name, part_schema, rows in parts:
        if not rows:
            continue
        for column in part_schema.columns:
            current = by_id.get(column.column_id)
            if current is None:
                continue
            values = decoded_values(rows, column, ctx.backend, table=name)
            nulls = values.null_count
            nan: bool | None = None
            lo = hi = None
            if current.type in ("float32", "float64"):
                nan = bool(pc.any(pc.is_nan(values)).as_py() or False)
            if not nan and len(values) > nulls:
                lo, hi, _ = array_min_max(current, values, inlined=True)
            st = totals.columns.setdefault(current.column_id, _Stats(current))
            st.merge(len(values) - nulls, nulls, lo, hi, nan)
    return count


__all__ = ["recompute_after_rewrite"]
