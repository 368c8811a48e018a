"""Metadata writes of one commit: schemas, tables, columns, data and delete files, inlined rows, statistics.

Every function takes the attempt's :class:`CommitContext` and registers what it changed in ``ctx.changes``; table
statistics are accumulated and written once by :func:`write_table_stats`.

Functions that end or move rows check that the rows are still where the change planned them (the update hits every
planned inlined row, the data file is live and its deletes are the ones planned against) and raise
:class:`StalePlanError` otherwise: the commit protocol then plans the change again or fails, and never commits a change
that silently missed its rows.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import pyarrow as pa
import pyarrow.compute
from sqlalchemy import Column as SAColumn
from sqlalchemy import Connection, MetaData, Table, and_, bindparam, delete, insert, select, update
from sqlalchemy.schema import CreateTable, DropTable

from pyspark_ducklake.catalog import dialects, reader
from pyspark_ducklake.catalog import tables as T
from pyspark_ducklake.catalog.catalog import uuid7
from pyspark_ducklake.catalog.corrupt import corrupt, is_parse_error
from pyspark_ducklake.catalog.entries import SchemaEntry, TableEntry
from pyspark_ducklake.catalog.format_version import FormatVersion
from pyspark_ducklake.catalog.geometry import geo_stats_text, parse_geo_stats
from pyspark_ducklake.catalog.inlined_codec import encode_values, inlined_sql_type
from pyspark_ducklake.catalog.partitioning import record_partition_values
from pyspark_ducklake.catalog.paths import path_component
from pyspark_ducklake.catalog.reserved import check_column_names, check_identifiers, inlining_obstacle
from pyspark_ducklake.catalog.stats_values import array_min_max, storable_stat, widen
from pyspark_ducklake.catalog.transaction import CommitContext, now_utc
from pyspark_ducklake.catalog.types import Column, TableSchema, find_folded, validate_columns
from pyspark_ducklake.exceptions import (
    InvalidIdentifierError,
    NotATableError,
    SchemaAlreadyExistsError,
    StalePlanError,
    TableAlreadyExistsError,
)
from pyspark_ducklake.io.deletion_vector import PARQUET, PUFFIN, WrittenDeletionVector
from pyspark_ducklake.io.parquet import WrittenFile, leaf_arrays
from pyspark_ducklake.io.wkb import GeoSummary


def create_schema(ctx: CommitContext, name: str) -> int:
    """Raises: SchemaAlreadyExistsError (also for a name differing only in case: DuckDB's names are
    case-insensitive, and it cannot attach a lake holding both), InvalidIdentifierError (an empty name)."""
    if not name:
        raise InvalidIdentifierError("schema name is empty")
    existing = find_folded([s.schema_name for s in reader.schemas(ctx.conn, ctx.base.snapshot_id)], name)
    if existing == name:
        raise SchemaAlreadyExistsError(f"schema {name!r} already exists; pass exist_ok=True to use it")
    if existing is not None:
        raise SchemaAlreadyExistsError(
            f"schema {existing!r} already exists and DuckDB's names are case-insensitive: use {existing!r}, or "
            f"choose another name than {name!r}"
        )
    schema_id = ctx.allocate_catalog_id()
    ctx.bump_schema_version()
    ctx.conn.execute(
        insert(T.ducklake_schema).values(
            schema_id=schema_id,
            schema_uuid=uuid7(),
            begin_snapshot=ctx.snapshot_id,
            end_snapshot=None,
            schema_name=name,
            path=path_component(name),
            path_is_relative=True,
        )
    )
    ctx.changes.created_schemas.append(name)
    return schema_id


def column_rows(
    table_id: int, snapshot_id: int, columns: tuple[Column, ...], parent: int | None = None
) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for c in columns:
        rows.append(
            {
                "column_id": c.column_id,
                "begin_snapshot": snapshot_id,
                "end_snapshot": None,
                "table_id": table_id,
                "column_order": c.column_id,
                "column_name": c.name,
                "column_type": c.type,
                "initial_default": c.initial_default,
                "default_value": c.default_value
                if c.default_value is not None
                else ("NULL" if not c.is_nested else None),
                "nulls_allowed": c.nulls_allowed,
                "parent_column": parent,
                "default_value_type": "literal" if not c.is_nested else "",
                "default_value_dialect": "duckdb" if not c.is_nested else None,
            }
        )
        rows.extend(column_rows(table_id, snapshot_id, c.children, c.column_id))
    return rows


def create_table(ctx: CommitContext, schema: SchemaEntry, name: str, columns: tuple[Column, ...]) -> TableEntry:
    """Raises: TableAlreadyExistsError (also for a table or view whose name differs only in case),
    InvalidIdentifierError, UnsupportedTypeError (what DuckDB refuses: see ``types.validate_columns``)."""
    if not name:
        raise InvalidIdentifierError("table name is empty")
    validate_columns(columns, f"table {schema.schema_name}.{name}")
    check_column_names([c.name for c in columns], 0, ctx.format)  # 1.1's reserved prefix, whatever the limit
    check_table_name_free(ctx.conn, schema, name, ctx.base.snapshot_id)
    t = T.ducklake_table
    table_id = ctx.allocate_catalog_id()
    sv = ctx.bump_schema_version()
    entry = TableEntry(table_id, uuid7(), schema, name, path_component(name), True, ctx.snapshot_id)
    ctx.conn.execute(
        insert(t).values(
            table_id=table_id,
            table_uuid=entry.table_uuid,
            begin_snapshot=ctx.snapshot_id,
            end_snapshot=None,
            schema_id=schema.schema_id,
            table_name=name,
            path=entry.path,
            path_is_relative=True,
        )
    )
    ctx.conn.execute(insert(T.ducklake_column), column_rows(table_id, ctx.snapshot_id, columns))
    ctx.conn.execute(
        insert(T.ducklake_schema_versions).values(begin_snapshot=ctx.snapshot_id, schema_version=sv, table_id=table_id)
    )
    # such tables never take inlined rows (DuckDB creates no inlined table for VARIANT on SQLite and PostgreSQL,
    # nor for GEOMETRY: ducklake-format-2.md §5, nor for a column name PostgreSQL would cut)
    if takes_inlined_rows(columns, ctx.backend, ctx.format):
        create_inlined_table(ctx, table_id, sv, TableSchema(columns))
    ctx.changes.created_tables.append((schema.schema_name, name))
    return entry


def takes_inlined_rows(columns: tuple[Column, ...], backend: str, fmt: FormatVersion) -> bool:
    """Whether a table of ``columns`` gets an inlined-data table on ``backend`` (see ``reserved.inlining_obstacle``)."""
    return inlining_obstacle(columns, backend, fmt) is None


def check_table_name_free(conn: Connection, schema: SchemaEntry, name: str, snapshot_id: int) -> None:
    """Raises: TableAlreadyExistsError when a table or view of the schema has this name, case-insensitively (DuckDB
    resolves names case-insensitively and cannot attach a lake holding ``T`` and ``t``); NotATableError when a view
    has exactly this name."""
    t, v = T.ducklake_table, T.ducklake_view
    names = [
        r[0]
        for r in conn.execute(
            select(t.c.table_name).where(t.c.schema_id == schema.schema_id, reader.visible(t, snapshot_id))
        )
    ]
    views = [
        r[0]
        for r in conn.execute(
            select(v.c.view_name).where(v.c.schema_id == schema.schema_id, reader.visible(v, snapshot_id))
        )
    ]
    if name in views:
        raise NotATableError(
            f"{schema.schema_name}.{name} is a view (DuckDB's CREATE VIEW), not a table, and a table cannot take its "
            "name: choose another name for the table, or drop the view with DuckDB"
        )
    names += views
    existing = find_folded(names, name)
    if existing == name:
        raise TableAlreadyExistsError(
            f"table {schema.schema_name}.{name} already exists; pass exist_ok=True to use it, or choose another name"
        )
    if existing is not None:
        raise TableAlreadyExistsError(
            f"table (or view) {schema.schema_name}.{existing} already exists and DuckDB's names are case-insensitive: "
            f"use {existing!r}, or choose another name than {name!r}"
        )


def inlined_table(name: str, schema: TableSchema, backend: str, fmt: FormatVersion) -> Table:
    """An inlined-data table of a catalog of format ``fmt``, its system columns keyed ``row_id``,
    ``begin_snapshot``, ``end_snapshot`` and the table's columns ``c<column_id>``."""
    cols = T.inlined_system_columns(fmt.inlined_system_columns)
    cols += [SAColumn(c.name, inlined_sql_type(c, backend), key=f"c{c.column_id}") for c in schema.columns]
    return Table(name, MetaData(), *cols)


def create_inlined_table(ctx: CommitContext, table_id: int, schema_version: int, schema: TableSchema) -> str:
    """The inlined-data table of ``schema_version``, for ``schema``. A commit altering a table several times (the
    sink's merge_schema adds every new column) has one schema version: the table this commit created for it at an
    earlier alteration (empty, not yet visible to anyone) is replaced, so it holds every column."""
    name = T.inlined_data_table_name(table_id, schema_version)
    # each column is an identifier: one the database would cut short would be a column DuckDB cannot find
    check_identifiers(schema.names(), ctx.backend, f"inlined-data table {name}")
    created: dict[str, Table] = ctx.scratch("inlined_tables_created", dict)
    table = inlined_table(name, schema, ctx.backend, ctx.format)
    earlier = created.get(name)
    if earlier is not None:
        ctx.conn.execute(DropTable(earlier))
        ctx.conn.execute(CreateTable(table))
        created[name] = table
        return name  # registered already
    ctx.conn.execute(CreateTable(table, if_not_exists=True))
    ctx.conn.execute(
        insert(T.ducklake_inlined_data_tables).values(table_id=table_id, table_name=name, schema_version=schema_version)
    )
    created[name] = table
    return name


@dataclass(frozen=True)
class ColumnStats:
    """One ``ducklake_table_column_stats`` row (without ``extra_stats``, which commits leave alone)."""

    contains_null: bool | None
    contains_nan: bool | None
    min_value: str | None
    max_value: str | None


@dataclass(frozen=True)
class TableStats:
    """A table's ``ducklake_table_stats`` row and its ``ducklake_table_column_stats`` rows by column id."""

    record_count: int
    next_row_id: int
    file_size_bytes: int
    columns: dict[int, ColumnStats]


@dataclass
class TableStatsDelta:
    """What one commit adds to ``ducklake_table_stats`` and ``ducklake_table_column_stats``.

    ``base`` is the table's statistics before the commit (None when it has no ``ducklake_table_stats`` row yet);
    ``base_columns`` is None until its column rows are read.
    """

    record_count: int = 0
    file_size_bytes: int = 0
    next_row_id: int | None = None
    columns: dict[int, dict[str, Any]] = field(default_factory=dict)
    base: TableStats | None = None
    base_columns: dict[int, ColumnStats] | None = None


def seed_table_stats(ctx: CommitContext, table_id: int, stats: TableStats) -> None:
    """Declare the table's statistics rows known, so this attempt does not read them.

    Only for a caller that wrote them itself (see :func:`written_table_stats`) and knows that no snapshot was
    committed since: every writer changes them only in a commit that adds a snapshot.
    """
    ctx.scratch("table_stats_known", dict)[table_id] = stats


def written_table_stats(ctx: CommitContext) -> dict[int, TableStats]:
    """The statistics rows :func:`write_table_stats` left in this attempt, by table id."""
    written: dict[int, TableStats] = ctx.scratch("table_stats_written", dict)
    return written


def _stats_delta(ctx: CommitContext, table_id: int) -> TableStatsDelta:
    deltas: dict[int, TableStatsDelta] = ctx.scratch("table_stats", dict)
    if table_id not in deltas:
        known: TableStats | None = ctx.scratch("table_stats_known", dict).get(table_id)
        if known is not None:
            delta = TableStatsDelta(next_row_id=known.next_row_id, base=known, base_columns=known.columns)
        else:
            row = reader.table_stats(ctx.conn, table_id)
            base = None
            if row is not None:
                next_row_id = int(row.next_row_id) if row.next_row_id is not None else 0
                base = TableStats(int(row.record_count or 0), next_row_id, int(row.file_size_bytes or 0), {})
            delta = TableStatsDelta(next_row_id=base.next_row_id if base else 0, base=base)
        deltas[table_id] = delta
    return deltas[table_id]


def allocate_row_ids(ctx: CommitContext, table_id: int, count: int) -> int:
    """Reserve ``count`` row ids; returns the first."""
    delta = _stats_delta(ctx, table_id)
    assert delta.next_row_id is not None
    start = delta.next_row_id
    delta.next_row_id += count
    delta.record_count += count
    return start


def note_column_values(
    ctx: CommitContext,
    table_id: int,
    column: Column,
    lo: str | None,
    hi: str | None,
    has_null: bool,
    has_nan: bool | None,
    geo: GeoSummary | None = None,
) -> None:
    """Fold one file's (or inlined batch's) min/max strings (and a GEOMETRY leaf's types and bounding box) into
    the commit's table-level statistics."""
    delta = _stats_delta(ctx, table_id)
    entry = delta.columns.setdefault(
        column.column_id, {"column": column, "lo": None, "hi": None, "null": False, "nan": None, "geo": None}
    )
    if geo is not None:
        entry["geo"] = geo if entry["geo"] is None else entry["geo"].merge(geo)
    if lo is not None or hi is not None:
        entry["lo"], entry["hi"] = widen(column, entry["lo"], entry["hi"], lo, hi)
    entry["null"] = entry["null"] or has_null
    if has_nan is not None:
        entry["nan"] = bool(entry["nan"]) or has_nan


def add_data_file(
    ctx: CommitContext,
    table: TableEntry,
    schema: TableSchema,
    written: WrittenFile,
    *,
    relative_path: str,
    begin_snapshot: int | None = None,
    row_id_start: int | None = -1,
    partial_max: int | None = None,
    count_rows: bool = True,
    partition_id: int | None = None,
    partition_values: tuple[str | None, ...] = (),
    path_is_relative: bool = True,
    mapping_id: int | None = None,
    table_stats: bool = True,
) -> int:
    """Register a written Parquet file (or, with ``mapping_id``, an added one at an absolute path); returns its
    data_file_id. ``table_stats=False`` leaves the table's statistics alone (a rewrite recomputes them)."""
    file_id = ctx.allocate_file_id()
    if row_id_start == -1:
        row_id_start = allocate_row_ids(ctx, table.table_id, written.record_count) if count_rows else None
    elif count_rows:
        _stats_delta(ctx, table.table_id).record_count += written.record_count
    if table_stats:
        _stats_delta(ctx, table.table_id).file_size_bytes += written.file_size_bytes
    ctx.conn.execute(
        insert(T.data_file_table(ctx.format)).values(
            **_row_group_count(ctx, written),
            data_file_id=file_id,
            table_id=table.table_id,
            begin_snapshot=begin_snapshot if begin_snapshot is not None else ctx.snapshot_id,
            end_snapshot=None,
            file_order=None,
            path=relative_path,
            path_is_relative=path_is_relative,
            file_format="parquet",
            record_count=written.record_count,
            file_size_bytes=written.file_size_bytes,
            footer_size=written.footer_size,
            row_id_start=row_id_start,
            partition_id=partition_id,
            encryption_key=written.encryption_key,
            mapping_id=mapping_id,
            partial_max=partial_max,
        )
    )
    if partition_id is not None:
        record_partition_values(ctx, file_id, table.table_id, partition_values)
    by_id = schema.by_id()
    rows = []
    for s in written.leaf_stats:
        column = by_id.get(s.field_id)
        if column is None:
            continue
        rows.append(
            {
                "data_file_id": file_id,
                "table_id": table.table_id,
                "column_id": s.field_id,
                "column_size_bytes": s.column_size_bytes,
                "value_count": s.value_count,
                "null_count": s.null_count,
                "min_value": storable_stat(s.min_value),
                "max_value": storable_stat(s.max_value),
                "contains_nan": s.contains_nan,
                "extra_stats": geo_stats_text(s.geo) if s.geo is not None else None,
            }
        )
        if table_stats:
            note_column_values(
                ctx, table.table_id, column, s.min_value, s.max_value, s.null_count > 0, s.contains_nan, s.geo
            )
    if rows:
        ctx.conn.execute(insert(T.ducklake_file_column_stats), rows)
    if count_rows:
        ctx.changes.inserted_into.add(table.table_id)
    return file_id


def _row_group_count(ctx: CommitContext, written: WrittenFile | WrittenDeletionVector) -> dict[str, int | None]:
    """``row_group_count`` for a file row, on catalogs that have the column (1.1)."""
    return {"row_group_count": written.row_group_count} if ctx.format.row_group_counts else {}


def latest_inlined_table(ctx: CommitContext, table: TableEntry, schema: TableSchema) -> Table:
    """The inlined-data table for the table's current schema, created when a foreign writer left none."""
    registered = reader.inlined_tables(ctx.conn, table.table_id)
    current_sv = reader.table_schema_version(ctx.conn, table.table_id, ctx.snapshot_id)
    if registered and registered[-1][1] >= current_sv:
        name = registered[-1][0]
    else:
        name = create_inlined_table(ctx, table.table_id, current_sv, schema)
    return inlined_table(name, schema, ctx.backend, ctx.format)


def inlined_insert(
    ctx: CommitContext,
    table: TableEntry,
    schema: TableSchema,
    data: pa.Table,
    *,
    target: Table | None = None,
    row_ids: Sequence[int] | None = None,
) -> int:
    """Insert rows into the table's inlined-data table (``target`` if the caller knows it); returns the first row id.

    With ``row_ids`` the rows are new versions of rows this commit ended (an update): they keep those row ids, and
    ``next_row_id`` stays, as DuckDB's inlined UPDATE leaves it (``record_count`` still counts them).
    """
    n = data.num_rows
    if row_ids is None:
        start = allocate_row_ids(ctx, table.table_id, n)
        ids: Sequence[int] = range(start, start + n)
    else:
        assert len(row_ids) == n
        ids = row_ids
        start = min(row_ids, default=0)
        _stats_delta(ctx, table.table_id).record_count += n
    if target is None:
        target = latest_inlined_table(ctx, table, schema)
    encoded: dict[str, list[Any]] = {}
    for column in schema.columns:
        arr = data.column(column.name).combine_chunks() if column.name in data.column_names else pa.nulls(n)
        encoded[f"c{column.column_id}"] = encode_values(column, arr, ctx.backend)
        _note_array_stats(ctx, table.table_id, column, arr)
    rows = [
        {
            "row_id": ids[i],
            "begin_snapshot": ctx.snapshot_id,
            "end_snapshot": None,
            **{k: v[i] for k, v in encoded.items()},
        }
        for i in range(n)
    ]
    if rows:
        ctx.conn.execute(insert(target), rows)
    signalled: set[int] = ctx.scratch("inlined_insert_signalled", set)
    if table.table_id not in signalled:
        # DuckDB caches table statistics (next_row_id, min/max) by the snapshot's next_file_id and moves it on
        # inlined-only commits; without this DuckDB reuses row ids and misreads values after our inlined insert.
        signalled.add(table.table_id)
        ctx.allocate_file_id()
    ctx.changes.inlined_insert.add(table.table_id)
    return start


def _note_array_stats(ctx: CommitContext, table_id: int, column: Column, arr: pa.Array) -> None:
    leaves = [c for c in column.walk() if not c.is_nested]
    arrays = leaf_arrays(pa.table({column.name: arr}))
    for leaf, values in zip(leaves, arrays, strict=False):
        lo, hi, nan = array_min_max(leaf, values, inlined=True)
        if leaf.type in ("float32", "float64"):
            nan = bool(pa.compute.any(pa.compute.is_nan(values)).as_py() or False)
        note_column_values(ctx, table_id, leaf, lo, hi, values.null_count > 0, nan)


def end_inlined_rows(ctx: CommitContext, table_id: int, row_ids: list[int]) -> int:
    """Mark the table's inlined rows ``row_ids`` (the versions live at the planned snapshot) deleted at this
    snapshot; returns how many were ended. Rows another writer deleted meanwhile are left as they are: deleting
    them again would change nothing.

    Raises:
        StalePlanError: some of them were moved to Parquet (a flush) or replaced by a newer version of the row
            (an update) since the change was planned.
    """
    wanted = sorted(set(row_ids))
    planned = ctx.planned_snapshot_id
    tables = [
        Table(name, MetaData(), *T.inlined_system_columns(ctx.format.inlined_system_columns))
        for name, _ in reader.inlined_tables(ctx.conn, table_id)
        if reader.has_table(ctx.conn, name)
    ]
    count = 0
    for t in tables:
        for i in range(0, len(wanted), 500):
            chunk = wanted[i : i + 500]
            cond = and_(t.c.row_id.in_(chunk), t.c.end_snapshot.is_(None))
            if planned is not None:
                cond = and_(cond, t.c.begin_snapshot <= planned)
            count += dialects.changed_rows(ctx.conn, update(t).where(cond).values(end_snapshot=ctx.snapshot_id))
    if count < len(wanted):
        # Which of the others were deleted by another writer (still here, ended), not moved or updated?
        gone = len(wanted) - count
        ended_by_others: set[int] = set()
        for t in tables:
            for i in range(0, len(wanted), 500):
                chunk = wanted[i : i + 500]
                versions = ctx.conn.execute(
                    select(t.c.row_id, t.c.begin_snapshot, t.c.end_snapshot).where(t.c.row_id.in_(chunk))
                ).all()
                newer = {r.row_id for r in versions if planned is not None and r.begin_snapshot > planned}
                ended_by_others.update(
                    r.row_id
                    for r in versions
                    if r.end_snapshot is not None
                    and r.end_snapshot != ctx.snapshot_id
                    and (planned is None or r.end_snapshot > planned)
                    and r.row_id not in newer
                )
        if len(ended_by_others) < gone:
            raise StalePlanError(
                f"{gone - len(ended_by_others)} of the {len(wanted)} inlined rows of table {table_id} planned for "
                "deletion were moved to Parquet (a flush) or updated by another writer since the change was planned"
            )
    if count:
        ctx.changes.inlined_delete.add(table_id)
    return count


def end_all_inlined_rows(ctx: CommitContext, table_id: int) -> int:
    """Mark every live inlined row of the table deleted at this snapshot (read in this attempt, so never stale)."""
    count = 0
    for name, _ in reader.inlined_tables(ctx.conn, table_id):
        if reader.has_table(ctx.conn, name):
            t = Table(name, MetaData(), *T.inlined_system_columns(ctx.format.inlined_system_columns))
            statement = update(t).where(t.c.end_snapshot.is_(None)).values(end_snapshot=ctx.snapshot_id)
            count += dialects.changed_rows(ctx.conn, statement)
    if count:
        ctx.changes.inlined_delete.add(table_id)
    return count


@dataclass(frozen=True)
class DataFileState:
    """What deletes a live data file has now: its live delete file row (None without one) and the positions deleted
    through ``ducklake_inlined_delete_<tid>`` (DuckDB's small deletes)."""

    delete_file: Any | None
    inlined_positions: frozenset[int]


def data_file_state(ctx: CommitContext, table_id: int, data_file_id: int) -> DataFileState:
    """The deletes of a data file as of this attempt.

    Raises:
        StalePlanError: the file is no longer live (compacted, rewritten or removed by another writer).
    """
    d, x = T.ducklake_data_file, T.ducklake_delete_file
    live = ctx.conn.execute(
        select(d.c.data_file_id).where(d.c.data_file_id == data_file_id, d.c.end_snapshot.is_(None))
    ).first()
    if live is None:
        raise StalePlanError(
            f"data file {data_file_id} of table {table_id} was compacted, rewritten or removed by another writer "
            "since the change was planned"
        )
    rows = ctx.conn.execute(select(x).where(x.c.data_file_id == data_file_id, x.c.end_snapshot.is_(None))).all()
    if len(rows) > 1:
        raise StalePlanError(f"data file {data_file_id} of table {table_id} has {len(rows)} live delete files")
    inlined: frozenset[int] = frozenset()
    if _has_inlined_deletes(ctx, table_id):
        t = T.inlined_delete_table(table_id)
        found = ctx.conn.execute(select(t.c.row_id).where(t.c.file_id == data_file_id))
        inlined = frozenset(int(r[0]) for r in found)
    return DataFileState(rows[0] if rows else None, inlined)


def check_data_file(
    ctx: CommitContext,
    table_id: int,
    data_file_id: int,
    delete_file_id: int | None,
    *,
    deletes_seen: int | None = None,
) -> None:
    """Check that a data file whose rows this change ends is as the change saw it: still live, with the live delete
    file ``delete_file_id`` (or none), and no inlined file deletes committed after ``deletes_seen`` (default: the
    snapshot the change was planned against).

    Raises:
        StalePlanError: the file was compacted, rewritten or removed, or another writer deleted rows of it.
    """
    state = data_file_state(ctx, table_id, data_file_id)
    current = None if state.delete_file is None else int(state.delete_file.delete_file_id)
    if current != delete_file_id:
        raise StalePlanError(
            f"another writer deleted rows of data file {data_file_id} of table {table_id} since the change was planned"
        )
    seen = ctx.planned_snapshot_id if deletes_seen is None else deletes_seen
    if seen is not None and seen < ctx.base.snapshot_id and state.inlined_positions:
        t = T.inlined_delete_table(table_id)
        newer = ctx.conn.execute(
            select(t.c.file_id).where(t.c.file_id == data_file_id, t.c.begin_snapshot > seen).limit(1)
        ).first()
        if newer is not None:
            raise StalePlanError(
                f"another writer deleted rows of data file {data_file_id} of table {table_id} (inlined deletes) since "
                "the change was planned"
            )


def check_not_updated(ctx: CommitContext, table_id: int, data_file_id: int) -> None:
    """Rows of a data file that this change planned to delete were deleted by another writer meanwhile: fine when it
    was a delete, but an update (DuckDB's ``UPDATE`` ends a row and writes its new version with the same row id, in
    the same snapshot as an insert) must be planned again, so that the filter sees the new version.

    Raises:
        StalePlanError: a snapshot since the planned one both deleted from and inserted into the table.
    """
    planned = ctx.planned_snapshot_id
    if planned is None:
        return
    for other in reader.snapshot_changes_after(ctx.conn, planned):
        c = other.changes
        if table_id in (c.deleted_from | c.inlined_delete) and table_id in (c.inserted_into | c.inlined_insert):
            raise StalePlanError(
                f"rows of data file {data_file_id} of table {table_id} planned for deletion were changed (deleted "
                f"and written again, as an update does) by snapshot {other.snapshot_id} since the change was planned"
            )


def _widen_table_stats(
    ctx: CommitContext, table_id: int, entry: dict[str, Any], old: ColumnStats
) -> tuple[str | None, str | None]:
    """The table's min/max widened by the commit's.

    Raises:
        CorruptCatalogError: the table's min or max does not parse as a value of the column (DuckDB's commit fails
            on it too; a read only ignores it, as statistics are hints).
    """
    column: Column = entry["column"]
    try:
        return widen(column, old.min_value, old.max_value, entry["lo"], entry["hi"])
    except Exception as e:
        if not is_parse_error(e):
            raise
        where = f"ducklake_table_column_stats.min_value/max_value of table_id {table_id}, column {column.name!r}"
        value = (old.min_value, old.max_value)
        raise corrupt(
            where, value, f"a minimum and maximum of type {column.type}", snapshot=ctx.base.snapshot_id
        ) from e


def _has_inlined_deletes(ctx: CommitContext, table_id: int) -> bool:
    known: dict[int, bool] = ctx.scratch("inlined_delete_tables", dict)
    if table_id not in known:
        known[table_id] = reader.has_table(ctx.conn, T.inlined_delete_table_name(table_id))
    return known[table_id]


def add_delete_file(
    ctx: CommitContext,
    table: TableEntry,
    data_file_id: int,
    written: WrittenFile | WrittenDeletionVector,
    *,
    relative_path: str,
    previous_delete_file_id: int | None,
    begin_snapshot: int | None = None,
    logical: bool = True,
    deletes_seen: int | None = None,
) -> int:
    """Register a delete file (all deleted positions of the data file), ending the previous one.

    ``begin_snapshot`` earlier than this snapshot is for delete files carrying per-row snapshot ids (a flush);
    ``logical=False`` records no ``deleted_from_table`` change (a flush deletes nothing, in a file it just wrote).
    ``deletes_seen`` is the snapshot up to which the caller accounted for the file's deletes (see
    :func:`check_data_file`).

    Raises:
        StalePlanError: (a logical delete) the data file or its deletes changed since the change was planned.
    """
    if logical:
        check_data_file(ctx, table.table_id, data_file_id, previous_delete_file_id, deletes_seen=deletes_seen)
    if previous_delete_file_id is not None:
        ctx.conn.execute(
            update(T.ducklake_delete_file)
            .where(T.ducklake_delete_file.c.delete_file_id == previous_delete_file_id)
            .values(end_snapshot=ctx.snapshot_id)
        )
    delete_file_id = _insert_delete_file(ctx, table, data_file_id, written, relative_path, begin_snapshot)
    if logical:
        ctx.changes.deleted_from.add(table.table_id)
    return delete_file_id


def _insert_delete_file(
    ctx: CommitContext,
    table: TableEntry,
    data_file_id: int,
    written: WrittenFile | WrittenDeletionVector,
    relative_path: str,
    begin_snapshot: int | None,
) -> int:
    # a deletion vector's row as DuckDB writes it: format 'puffin', footer_size 0 (ducklake-format-2.md §2.2)
    file_format = PUFFIN if isinstance(written, WrittenDeletionVector) else PARQUET
    delete_file_id = ctx.allocate_file_id()
    ctx.conn.execute(
        insert(T.delete_file_table(ctx.format)).values(
            **_row_group_count(ctx, written),
            delete_file_id=delete_file_id,
            table_id=table.table_id,
            begin_snapshot=ctx.snapshot_id if begin_snapshot is None else begin_snapshot,
            end_snapshot=None,
            data_file_id=data_file_id,
            path=relative_path,
            path_is_relative=True,
            format=file_format,
            delete_count=written.record_count,
            file_size_bytes=written.file_size_bytes,
            footer_size=written.footer_size,
            encryption_key=written.encryption_key,
            partial_max=None,
        )
    )
    return delete_file_id


def replace_delete_file(
    ctx: CommitContext,
    table: TableEntry,
    previous: Any,
    data_file_id: int,
    written: WrittenFile | WrittenDeletionVector,
    *,
    relative_path: str,
    begin_snapshot: int,
    deletes_seen: int | None = None,
) -> int:
    """Swap a data file's delete file for one that carries per-row snapshot ids (DuckDB 1.5.5's way), or for a
    deletion vector of every deleted position beginning now (DuckDB 1.5.5's way too, which loses history, §2.4).

    The old row is removed, not ended (the new file covers its history), and its file is scheduled for deletion.
    ``previous`` needs ``delete_file_id`` and ``path`` (absolute).

    Raises:
        StalePlanError: the data file or its deletes changed since the change was planned.
    """
    check_data_file(ctx, table.table_id, data_file_id, previous.delete_file_id, deletes_seen=deletes_seen)
    d = T.ducklake_delete_file
    row = ctx.conn.execute(
        select(d.c.path, d.c.path_is_relative).where(d.c.delete_file_id == previous.delete_file_id)
    ).one()
    ctx.conn.execute(delete(d).where(d.c.delete_file_id == previous.delete_file_id))
    relative_to_data = previous.path[len(ctx.data_path) :] if previous.path.startswith(ctx.data_path) else previous.path
    ctx.conn.execute(
        insert(T.ducklake_files_scheduled_for_deletion).values(
            data_file_id=previous.delete_file_id,
            path=relative_to_data if row.path_is_relative is not False else row.path,
            path_is_relative=row.path_is_relative is not False,
            schedule_start=ctx.base.snapshot_time or now_utc(),
        )
    )
    delete_file_id = _insert_delete_file(ctx, table, data_file_id, written, relative_path, begin_snapshot)
    ctx.changes.deleted_from.add(table.table_id)
    return delete_file_id


def end_data_file(ctx: CommitContext, table: TableEntry, data_file_id: int) -> None:
    """Remove a whole data file, with its live delete file, from the table at this snapshot (an overwrite).

    Raises:
        StalePlanError: the file is no longer live (compacted, rewritten or removed by another writer).
    """
    d, x = T.ducklake_data_file, T.ducklake_delete_file
    ended = dialects.changed_rows(
        ctx.conn,
        update(d)
        .where(d.c.data_file_id == data_file_id, d.c.end_snapshot.is_(None))
        .values(end_snapshot=ctx.snapshot_id),
    )
    if ended != 1:
        raise StalePlanError(
            f"data file {data_file_id} of table {table.table_id} was compacted, rewritten or removed by another "
            "writer since the change was planned"
        )
    ctx.conn.execute(
        update(x)
        .where(x.c.data_file_id == data_file_id, x.c.end_snapshot.is_(None))
        .values(end_snapshot=ctx.snapshot_id)
    )
    ctx.changes.deleted_from.add(table.table_id)


def write_table_stats(ctx: CommitContext) -> None:
    """Write the accumulated table statistics (``finalize`` step of a commit).

    Column rows are inserted for new columns and updated only where the commit widened them, each kind in one
    ``executemany``.
    """
    deltas: dict[int, TableStatsDelta] = ctx.scratch("table_stats", dict)
    ts, cs = T.ducklake_table_stats, T.ducklake_table_column_stats
    for table_id, delta in deltas.items():
        base = delta.base
        assert delta.next_row_id is not None
        after = TableStats(
            (base.record_count if base else 0) + delta.record_count,
            delta.next_row_id,
            (base.file_size_bytes if base else 0) + delta.file_size_bytes,
            {},
        )
        if base is None:
            ctx.conn.execute(
                insert(ts).values(
                    table_id=table_id,
                    record_count=after.record_count,
                    next_row_id=after.next_row_id,
                    file_size_bytes=after.file_size_bytes,
                )
            )
        else:
            ctx.conn.execute(
                update(ts)
                .where(ts.c.table_id == table_id)
                .values(
                    record_count=after.record_count,
                    next_row_id=after.next_row_id,
                    file_size_bytes=after.file_size_bytes,
                )
            )
        existing = delta.base_columns
        if existing is None:
            existing = {
                cid: ColumnStats(r.contains_null, r.contains_nan, r.min_value, r.max_value)
                for cid, r in reader.table_column_stats(ctx.conn, table_id).items()
            }
        had_rows = base is not None and base.record_count > 0
        columns = dict(existing)
        inserts: list[dict[str, Any]] = []
        updates: list[dict[str, Any]] = []
        for column_id, e in delta.columns.items():
            old = existing.get(column_id)
            if old is None:
                if had_rows:
                    # A column added after rows existed: those rows hold its default, which these stats would
                    # not cover (DuckDB answers count(col) from contains_null). Leave it unknown, as DuckDB does.
                    continue
                new = ColumnStats(e["null"], e["nan"], storable_stat(e["lo"]), storable_stat(e["hi"]))
                geo = e.get("geo")
                extra = geo_stats_text(geo) if geo is not None else None
                inserts.append({"table_id": table_id, "column_id": column_id, **asdict(new), "extra_stats": extra})
            else:
                lo, hi = _widen_table_stats(ctx, table_id, e, old)
                nan = old.contains_nan
                if e["nan"] is not None:
                    nan = bool(nan) or e["nan"]
                new = ColumnStats(bool(old.contains_null) or e["null"], nan, storable_stat(lo), storable_stat(hi))
                if new == old:
                    continue
                updates.append({"b_column_id": column_id, **asdict(new)})
            columns[column_id] = new
        if inserts:
            ctx.conn.execute(insert(cs), inserts)
        if updates:
            # SET comes from the parameter keys; one statement, executed for every changed column.
            ctx.conn.execute(
                update(cs).where(cs.c.table_id == table_id, cs.c.column_id == bindparam("b_column_id")), updates
            )
        _widen_geo_stats(ctx, table_id, {cid: e["geo"] for cid, e in delta.columns.items() if e.get("geo")}, existing)
        variants = [cid for cid, e in delta.columns.items() if e["column"].type == "variant"]
        if variants:
            # Our files are unshredded (no variant stats); a file without them clears the table's, as DuckDB does,
            # or DuckDB would prune our rows by the stats of its shredded files.
            ctx.conn.execute(
                update(cs)
                .where(cs.c.table_id == table_id, cs.c.column_id.in_(variants), cs.c.extra_stats.is_not(None))
                .values(extra_stats=None)
            )
        written_table_stats(ctx)[table_id] = replace(after, columns=columns)
    for recompute in ctx.scratch("recompute_table_stats", list):
        recompute(ctx)


def recompute_table_stats(ctx: CommitContext, recompute: Callable[[CommitContext], None]) -> None:
    """Run ``recompute`` after this commit's table statistics are written (a rewrite recomputes them from the live
    files, as DuckDB does, rather than adding to them)."""
    ctx.scratch("recompute_table_stats", list).append(recompute)


def _widen_geo_stats(
    ctx: CommitContext, table_id: int, geos: dict[int, GeoSummary], existing: dict[int, ColumnStats]
) -> None:
    """Union this commit's GEOMETRY summaries into the table rows' ``extra_stats`` (new rows got theirs already),
    as DuckDB merges its per-file geo stats: types united, bounding boxes widened."""
    cs = T.ducklake_table_column_stats
    known = [cid for cid in geos if cid in existing]
    if not known:
        return
    rows = ctx.conn.execute(
        select(cs.c.column_id, cs.c.extra_stats).where(cs.c.table_id == table_id, cs.c.column_id.in_(known))
    )
    updates = []
    for column_id, text in rows:
        old = parse_geo_stats(text)
        merged = geos[column_id] if old is None else old.merge(geos[column_id])
        new_text = geo_stats_text(merged)
        if new_text != text:
            updates.append({"b_column_id": column_id, "extra_stats": new_text})
    if updates:
        ctx.conn.execute(
            update(cs).where(cs.c.table_id == table_id, cs.c.column_id == bindparam("b_column_id")), updates
        )


def schedule_file_deletion(ctx: CommitContext, file_id: int, path: str) -> None:
    """Schedule an absolute ``path`` for deletion (stored relative to the data path when inside it)."""
    inside = path.startswith(ctx.data_path)
    ctx.conn.execute(
        insert(T.ducklake_files_scheduled_for_deletion).values(
            data_file_id=file_id,
            path=path[len(ctx.data_path) :] if inside else path,
            path_is_relative=inside,
            schedule_start=now_utc(),
        )
    )


def remove_data_files(ctx: CommitContext, files: list[tuple[int, str]]) -> None:
    """Remove ``(data_file_id, absolute path)`` files from the catalog outright, with their stats, delete files and
    partition values, and schedule the files for deletion: a compaction's sources, whose rows and history the new
    file carries (the reference's ``WriteMergeAdjacent``)."""
    ids = [file_id for file_id, _ in files]
    for table in (
        T.ducklake_data_file,
        T.ducklake_file_column_stats,
        T.ducklake_delete_file,
        T.ducklake_file_partition_value,
        T.ducklake_file_variant_stats,
    ):
        for i in range(0, len(ids), 500):
            ctx.conn.execute(delete(table).where(table.c.data_file_id.in_(ids[i : i + 500])))
    for file_id, path in files:
        schedule_file_deletion(ctx, file_id, path)


def end_rewritten_files(ctx: CommitContext, files: Sequence[tuple[int, int | None]]) -> None:
    """End ``(data_file_id, live delete_file_id or None)`` at this snapshot: files a rewrite replaced by one without
    their deleted rows. Nothing is removed or scheduled for deletion (time travel before the rewrite still reads
    them; expiry schedules them later), as DuckDB's ``WriteDeleteRewrites``."""
    d, x = T.ducklake_data_file, T.ducklake_delete_file
    data_ids = [f for f, _ in files]
    delete_ids = [x_id for _, x_id in files if x_id is not None]
    for i in range(0, len(data_ids), 500):
        ctx.conn.execute(
            update(d).where(d.c.data_file_id.in_(data_ids[i : i + 500])).values(end_snapshot=ctx.snapshot_id)
        )
    for i in range(0, len(delete_ids), 500):
        ctx.conn.execute(
            update(x).where(x.c.delete_file_id.in_(delete_ids[i : i + 500])).values(end_snapshot=ctx.snapshot_id)
        )


def add_compacted_file(
    ctx: CommitContext,
    table: TableEntry,
    schema: TableSchema,
    written: WrittenFile,
    *,
    relative_path: str,
    begin_snapshot: int,
    row_id_start: int | None,
    partial_max: int,
    partition_id: int | None,
    partition_values: tuple[str | None, ...],
) -> int:
    """Register a compaction's output file. Rows, row ids and table statistics stay as they were (as the reference
    leaves ``ducklake_table_stats`` untouched by a merge)."""
    file_id = add_data_file(
        ctx,
        table,
        schema,
        written,
        relative_path=relative_path,
        begin_snapshot=begin_snapshot,
        row_id_start=row_id_start,
        partial_max=partial_max,
        count_rows=False,
        partition_id=partition_id,
        partition_values=partition_values,
    )
    _stats_delta(ctx, table.table_id).file_size_bytes -= written.file_size_bytes
    return file_id
