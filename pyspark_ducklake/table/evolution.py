"""Schema evolution: add, rename and drop columns, and lossless type promotion (each one ALTER snapshot)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from sqlalchemy import Connection, func, insert, select, update

from pyspark_ducklake.catalog import reader
from pyspark_ducklake.catalog import tables as T
from pyspark_ducklake.catalog.entries import TableEntry
from pyspark_ducklake.catalog.reserved import inlining_reserved
from pyspark_ducklake.catalog.transaction import CommitContext
from pyspark_ducklake.catalog.types import Column, TableSchema, can_promote
from pyspark_ducklake.catalog.writer import column_rows, create_inlined_table
from pyspark_ducklake.exceptions import InvalidIdentifierError, NoSuchColumnError, SchemaMismatchError


def max_column_id(ctx: CommitContext, table_id: int) -> int:
    return max_column_id_conn(ctx.conn, table_id)


def max_column_id_conn(conn: Connection, table_id: int) -> int:
    """The largest column id the table ever used (dropped columns included: ids are never reused)."""
    c = T.ducklake_column
    row = conn.execute(select(func.max(c.c.column_id)).where(c.c.table_id == table_id)).first()
    return int(row[0]) if row and row[0] is not None else 0


def add_column_with_ids(ctx: CommitContext, table: TableEntry, column: Column) -> None:
    """Add a column whose ids were chosen when the data was written; a concurrent ALTER makes that a conflict.

    Raises:
        CommitConflictError: another writer used those column ids first.
    """
    from pyspark_ducklake.exceptions import CommitConflictError

    if max_column_id(ctx, table.table_id) + 1 != column.column_id:
        raise CommitConflictError(
            f"table {table.schema.schema_name}.{table.table_name} was altered while new column {column.name!r} was "
            "being written; retry the batch"
        )
    ctx.conn.execute(insert(T.ducklake_column), column_rows(table.table_id, ctx.snapshot_id, (column,)))
    finish_alter(ctx, table)


def finish_alter(ctx: CommitContext, table: TableEntry) -> None:
    sv = ctx.bump_schema_version()
    ctx.conn.execute(
        insert(T.ducklake_schema_versions).values(
            begin_snapshot=ctx.snapshot_id, schema_version=sv, table_id=table.table_id
        )
    )
    schema = reader.table_schema(ctx.conn, table.table_id, ctx.snapshot_id)
    if not inlining_reserved(schema.names()):  # such a table never takes inlined rows
        create_inlined_table(ctx, table.table_id, sv, schema)
    ctx.changes.altered_tables.add(table.table_id)


def _end_column(ctx: CommitContext, table_id: int, column: Column) -> None:
    c = T.ducklake_column
    ids = [x.column_id for x in column.walk()]
    ctx.conn.execute(
        update(c)
        .where(c.c.table_id == table_id, c.c.column_id.in_(ids), c.c.end_snapshot.is_(None))
        .values(end_snapshot=ctx.snapshot_id)
    )


def _find(schema: TableSchema, name: str, table: TableEntry) -> Column:
    column = schema.by_name(name)
    if column is None:
        raise NoSuchColumnError(
            f"column {name!r} does not exist in {table.schema.schema_name}.{table.table_name}; "
            f"columns: {schema.names()}"
        )
    return column


def add_column(ctx: CommitContext, table: TableEntry, new: Column, default: Any = None) -> None:
    """Add a column (with nested fields) numbered after every id the table ever used."""
    schema = reader.table_schema(ctx.conn, table.table_id, ctx.snapshot_id)
    if schema.by_name(new.name) is not None:
        raise SchemaMismatchError(
            f"column {new.name!r} already exists in {table.schema.schema_name}.{table.table_name}"
        )
    if not new.name:
        raise InvalidIdentifierError("column name is empty")
    start = max_column_id(ctx, table.table_id) + 1
    renumbered = _renumber(new, [start])
    if default is not None:
        text = str(default)
        renumbered = replace(renumbered, initial_default=text, default_value=text)
    ctx.conn.execute(insert(T.ducklake_column), column_rows(table.table_id, ctx.snapshot_id, (renumbered,)))
    finish_alter(ctx, table)


def _renumber(column: Column, next_id: list[int]) -> Column:
    cid = next_id[0]
    next_id[0] += 1
    return replace(column, column_id=cid, children=tuple(_renumber(c, next_id) for c in column.children))


def rename_column(ctx: CommitContext, table: TableEntry, old: str, new: str) -> None:
    schema = reader.table_schema(ctx.conn, table.table_id, ctx.snapshot_id)
    column = _find(schema, old, table)
    if schema.by_name(new) is not None:
        raise SchemaMismatchError(f"column {new!r} already exists in {table.schema.schema_name}.{table.table_name}")
    _replace_column_row(ctx, table, column, column_name=new)
    finish_alter(ctx, table)


def _replace_column_row(ctx: CommitContext, table: TableEntry, column: Column, **changes: Any) -> None:
    """End the column's live row and start a copy with ``changes`` (same column id), as an ALTER does."""
    c = T.ducklake_column
    row = ctx.conn.execute(
        select(c).where(c.c.table_id == table.table_id, c.c.column_id == column.column_id, c.c.end_snapshot.is_(None))
    ).one()
    _end_single(ctx, table.table_id, column.column_id)
    values = dict(row._mapping)
    values.update(begin_snapshot=ctx.snapshot_id, end_snapshot=None, **changes)
    ctx.conn.execute(insert(c).values(**values))


def _end_single(ctx: CommitContext, table_id: int, column_id: int) -> None:
    c = T.ducklake_column
    ctx.conn.execute(
        update(c)
        .where(c.c.table_id == table_id, c.c.column_id == column_id, c.c.end_snapshot.is_(None))
        .values(end_snapshot=ctx.snapshot_id)
    )


def drop_column(ctx: CommitContext, table: TableEntry, name: str) -> None:
    schema = reader.table_schema(ctx.conn, table.table_id, ctx.snapshot_id)
    column = _find(schema, name, table)
    if len(schema.columns) == 1:
        raise SchemaMismatchError(f"cannot drop {name!r}: it is the only column of {table.table_name}")
    _end_column(ctx, table.table_id, column)
    finish_alter(ctx, table)


def set_column_type(ctx: CommitContext, table: TableEntry, name: str, new_type: str) -> None:
    """Promote a primitive column's type losslessly (int32 → int64, float32 → float64, wider decimals)."""
    schema = reader.table_schema(ctx.conn, table.table_id, ctx.snapshot_id)
    column = _find(schema, name, table)
    if column.is_nested or not can_promote(column.type, new_type):
        raise SchemaMismatchError(
            f"column {name!r}: cannot change type {column.type} to {new_type}; only lossless promotions are allowed"
        )
    _replace_column_row(ctx, table, column, column_type=new_type)
    finish_alter(ctx, table)
