"""Schema evolution: add, rename and drop columns, and lossless type promotion (each one ALTER snapshot)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from pyspark_ducklake.catalog import column_rows as column_rows_sql
from pyspark_ducklake.catalog import reader
from pyspark_ducklake.catalog.commit_rows import column_rows, create_inlined_table, takes_inlined_rows
from pyspark_ducklake.catalog.db import Connection
from pyspark_ducklake.catalog.entries import TableEntry
from pyspark_ducklake.catalog.sort_order import check_column_not_sorted, rename_sorted_column
from pyspark_ducklake.catalog.transaction import CommitContext
from pyspark_ducklake.catalog.types import Column, TableSchema, can_promote, find_folded
from pyspark_ducklake.exceptions import InvalidIdentifierError, NoSuchColumnError, SchemaMismatchError


def max_column_id(ctx: CommitContext, table_id: int) -> int:
    return max_column_id_conn(ctx.conn, table_id)


def max_column_id_conn(conn: Connection, table_id: int) -> int:
    """The largest column id the table ever used (dropped columns included: ids are never reused)."""
    return column_rows_sql.max_column_id(conn, table_id)


def add_column_with_ids(ctx: CommitContext, table: TableEntry, column: Column, parent: int | None = None) -> None:
    """Add a column (or, under the struct ``parent``, a field) whose ids were chosen when the data was written; a
    concurrent ALTER makes that a conflict.

    Raises:
        CommitConflictError: another writer used those column ids first.
    """
    from pyspark_ducklake.exceptions import CommitConflictError

    if max_column_id(ctx, table.table_id) + 1 != column.column_id:
        raise CommitConflictError(
            f"table {table.schema.schema_name}.{table.table_name} was altered while new column {column.name!r} was "
            "being written; retry the batch"
        )
    column_rows_sql.insert_column_rows(ctx.conn, column_rows(table.table_id, ctx.snapshot_id, (column,), parent))
    finish_alter(ctx, table)


def merge_new_fields(
    current: TableSchema, incoming: TableSchema, next_id: int, table: str
) -> tuple[TableSchema, tuple[tuple[int | None, Column], ...]]:
    """``current`` extended by the columns, and struct fields at any depth (in lists and maps too), that
    ``incoming`` has and it lacks, numbered from ``next_id`` in the order they will be added.

    Returns:
        The merged schema and the additions as ``(parent column id or None, column)``.

    Raises:
        SchemaMismatchError: a name differing only in case from an existing one (DuckDB's names are
            case-insensitive), or a field where the table has another kind of type.
    """
    added: list[tuple[int | None, Column]] = []
    counter = [next_id]

    def merge_level(
        have: tuple[Column, ...], new: tuple[Column, ...], parent: int | None, path: str
    ) -> tuple[Column, ...]:
        out = list(have)
        by_name = {c.name: i for i, c in enumerate(out)}
        for inc in new:
            where = f"{path}.{inc.name}" if path else inc.name
            if inc.name not in by_name:
                clash = find_folded(by_name, inc.name)
                if clash is not None:
                    raise SchemaMismatchError(
                        f"field {where!r} differs only in case from {clash!r} of table {table} (DuckDB's names are "
                        f"case-insensitive); rename it to {clash!r} in the data"
                    )
                column = _renumber(inc, counter)
                added.append((parent, column))
                out.append(column)
                continue
            i = by_name[inc.name]
            out[i] = merge_column(out[i], inc, where)
        return tuple(out)

    def merge_column(have: Column, inc: Column, path: str) -> Column:
        if have.type != inc.type or not have.is_nested:
            return have  # a type difference is for the conform step to judge
        if have.type == "struct":
            return have.with_children(merge_level(have.children, inc.children, have.column_id, path))
        names = ("element",) if have.type == "list" else ("key", "value")
        return have.with_children(
            tuple(
                merge_column(h, n, f"{path}.{name}")
                for h, n, name in zip(have.children, inc.children, names, strict=True)
            )
        )

    merged = merge_level(current.columns, incoming.columns, None, "")
    return TableSchema(merged), tuple(added)


def finish_alter(ctx: CommitContext, table: TableEntry) -> None:
    sv = ctx.bump_schema_version()
    recorded: set[int] = ctx.scratch("schema_versions_recorded", set)
    if table.table_id not in recorded:  # once per table and snapshot, however many alterations it holds
        recorded.add(table.table_id)
        column_rows_sql.record_schema_version(ctx.conn, table.table_id, ctx.snapshot_id, sv)
    schema = reader.table_schema(ctx.conn, table.table_id, ctx.snapshot_id)
    # else the table never takes inlined rows (as in DuckDB)
    if takes_inlined_rows(schema.columns, ctx.backend, ctx.format):
        create_inlined_table(ctx, table.table_id, sv, schema)
    ctx.changes.altered_tables.add(table.table_id)


def _end_column(ctx: CommitContext, table_id: int, column: Column) -> None:
    column_rows_sql.end_columns(ctx.conn, table_id, [x.column_id for x in column.walk()], ctx.snapshot_id)


def _qualified(table: TableEntry) -> str:
    return f"{table.schema.schema_name}.{table.table_name}"


def _find(schema: TableSchema, name: str, table: TableEntry) -> Column:
    column = schema.by_name(name)
    if column is None:
        raise NoSuchColumnError(
            f"column {name!r} does not exist in {table.schema.schema_name}.{table.table_name}; "
            f"columns: {schema.names()}"
        )
    return column


def add_column(
    ctx: CommitContext, table: TableEntry, new: Column, default: Any = None, *, parent_path: tuple[str, ...] = ()
) -> None:
    """Add a column (with nested fields) numbered after every id the table ever used; with ``parent_path`` a new
    field of that struct (``("s",)``, ``("l", "element")``), as DuckDB's ``ADD COLUMN s.c`` records it: new rows
    whose ``parent_column`` is the struct's id, the struct's own row unchanged.

    Raises:
        SchemaMismatchError: the name exists (case-insensitively, as in DuckDB), or the parent is not a struct.
        NoSuchColumnError: the parent path does not exist.
    """
    schema = reader.table_schema(ctx.conn, table.table_id, ctx.snapshot_id)
    qualified = f"{table.schema.schema_name}.{table.table_name}"
    if not new.name:
        raise InvalidIdentifierError("column name is empty")
    parent: Column | None = None
    siblings: list[str] = schema.names()
    if parent_path:
        parent = _find(schema, parent_path[0], table)
        for step in parent_path[1:]:
            parent = _child(parent, step, qualified)
        if parent.type != "struct":
            raise SchemaMismatchError(
                f"{'.'.join(parent_path)!r} of {qualified} is a {parent.type}, not a struct: only struct fields can "
                "be added inside a column (a list's struct is ('l', 'element'), a map's value ('m', 'value'))"
            )
        siblings = [c.name for c in parent.children]
    clash = find_folded(siblings, new.name)
    if clash is not None:
        where = ".".join((*parent_path, clash))
        raise SchemaMismatchError(
            f"column {where!r} already exists in {qualified} (DuckDB's names are case-insensitive); choose another name"
        )
    start = max_column_id(ctx, table.table_id) + 1
    renumbered = _renumber(new, [start])
    if default is not None:
        text = str(default)
        renumbered = replace(renumbered, initial_default=text, default_value=text)
    rows = column_rows(table.table_id, ctx.snapshot_id, (renumbered,), parent.column_id if parent else None)
    column_rows_sql.insert_column_rows(ctx.conn, rows)
    finish_alter(ctx, table)


def _child(column: Column, step: str, qualified: str) -> Column:
    """The field ``step`` of a struct, or ``element`` of a list, ``key``/``value`` of a map."""
    names = {"list": ("element",), "map": ("key", "value")}.get(column.type)
    if names is not None and step in names:
        return column.children[names.index(step)]
    for child in column.children if column.type == "struct" else ():
        if child.name == step:
            return child
    raise NoSuchColumnError(
        f"{column.name!r} of {qualified} has no field {step!r} (it has: "
        f"{list(names) if names else [c.name for c in column.children]})"
    )


def _renumber(column: Column, next_id: list[int]) -> Column:
    cid = next_id[0]
    next_id[0] += 1
    return replace(column, column_id=cid, children=tuple(_renumber(c, next_id) for c in column.children))


def rename_column(ctx: CommitContext, table: TableEntry, old: str, new: str) -> None:
    schema = reader.table_schema(ctx.conn, table.table_id, ctx.snapshot_id)
    column = _find(schema, old, table)
    if not new:
        raise InvalidIdentifierError("column name is empty")
    clash = find_folded([n for n in schema.names() if n != old], new)
    if clash is not None:
        raise SchemaMismatchError(
            f"column {clash!r} already exists in {table.schema.schema_name}.{table.table_name} (DuckDB's names are "
            "case-insensitive); choose another name"
        )
    _replace_column_row(ctx, table, column, column_name=new)
    finish_alter(ctx, table)
    rename_sorted_column(ctx, table.table_id, column.name, new, _qualified(table))


def _replace_column_row(ctx: CommitContext, table: TableEntry, column: Column, **changes: Any) -> None:
    """End the column's live row and start a copy with ``changes`` (same column id), as an ALTER does."""
    column_rows_sql.reversion_column(ctx.conn, table.table_id, column.column_id, ctx.snapshot_id, **changes)


def drop_column(ctx: CommitContext, table: TableEntry, name: str) -> None:
    schema = reader.table_schema(ctx.conn, table.table_id, ctx.snapshot_id)
    column = _find(schema, name, table)
    if len(schema.columns) == 1:
        raise SchemaMismatchError(f"cannot drop {name!r}: it is the only column of {table.table_name}")
    check_column_not_sorted(ctx.conn, table.table_id, ctx.snapshot_id, column.name, _qualified(table))
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
