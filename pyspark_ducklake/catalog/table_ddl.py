"""Dropping and renaming tables and schemas, with the catalog rows DuckDB 1.5.5 writes for the same DDL.

* ``DROP TABLE``: the table row, its columns, data files, delete files, partition spec, sort order, comments
  (``ducklake_tag``) and column comments end at the snapshot; the schema version moves on (no
  ``ducklake_schema_versions`` row); ``dropped_table:<id>``. Inlined rows, table statistics and the files themselves
  stay (``expire_snapshots`` / ``cleanup_old_files`` remove them later).
* ``DROP SCHEMA``: the schema row ends; with ``CASCADE`` each table and view in it is dropped as above in the same
  snapshot (``dropped_schema:<id>,dropped_table:<id>...``), a view with its comments (and, on 1.1, its column
  comments); without it a schema holding any is refused.
* ``ALTER TABLE .. RENAME TO``: the table row ends and a new one with the same id, uuid and path (the folder keeps
  its old name) begins; a new schema version with its ``ducklake_schema_versions`` row and inlined-data table, as
  any ALTER; ``created_table:"schema"."new"``.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Table, insert, select, update

from pyspark_ducklake.catalog import reader
from pyspark_ducklake.catalog import tables as T
from pyspark_ducklake.catalog.column_rows import record_schema_version
from pyspark_ducklake.catalog.commit_rows import check_table_name_free, create_inlined_table, takes_inlined_rows
from pyspark_ducklake.catalog.entries import SchemaEntry, TableEntry
from pyspark_ducklake.catalog.transaction import CommitContext
from pyspark_ducklake.exceptions import CommitConflictError, InvalidIdentifierError


def _end(ctx: CommitContext, table: Table, *where: Any) -> None:
    ctx.conn.execute(update(table).where(*where, table.c.end_snapshot.is_(None)).values(end_snapshot=ctx.snapshot_id))


def drop_table(ctx: CommitContext, table: TableEntry) -> None:
    """End the table and everything of it that is live (see the module doc)."""
    tid = table.table_id
    _end(ctx, T.ducklake_table, T.ducklake_table.c.table_id == tid)
    _end(ctx, T.ducklake_column, T.ducklake_column.c.table_id == tid)
    _end(ctx, T.ducklake_data_file, T.ducklake_data_file.c.table_id == tid)
    _end(ctx, T.ducklake_delete_file, T.ducklake_delete_file.c.table_id == tid)
    _end(ctx, T.ducklake_partition_info, T.ducklake_partition_info.c.table_id == tid)
    _end(ctx, T.ducklake_column_tag, T.ducklake_column_tag.c.table_id == tid)
    _end(ctx, T.ducklake_tag, T.ducklake_tag.c.object_id == tid)
    _end(ctx, T.ducklake_sort_info, T.ducklake_sort_info.c.table_id == tid)
    ctx.bump_schema_version()
    ctx.changes.dropped_tables.add(tid)


def drop_schema(ctx: CommitContext, schema: SchemaEntry, *, cascade: bool) -> None:
    """End the schema, and with ``cascade`` its tables and views.

    Raises:
        InvalidIdentifierError: the schema holds tables or views and not ``cascade``.
    """
    snap = ctx.base.snapshot_id
    tables = reader.tables(ctx.conn, snap, schema.schema_name)
    v = T.ducklake_view
    views = [
        int(r[0])
        for r in ctx.conn.execute(select(v.c.view_id).where(v.c.schema_id == schema.schema_id, reader.visible(v, snap)))
    ]
    if (tables or views) and not cascade:
        names = [t.table_name for t in tables]
        raise InvalidIdentifierError(
            f"schema {schema.schema_name} is not empty (tables {names}, {len(views)} views); drop them first, or "
            "pass cascade=True"
        )
    _end(ctx, T.ducklake_schema, T.ducklake_schema.c.schema_id == schema.schema_id)
    ctx.bump_schema_version()
    for t in tables:
        drop_table(ctx, t)
    for view_id in views:
        _end(ctx, v, v.c.view_id == view_id)
        _end(ctx, T.ducklake_tag, T.ducklake_tag.c.object_id == view_id)
        if ctx.format.view_column_tags:
            _end(ctx, T.ducklake_view_column_tag, T.ducklake_view_column_tag.c.view_id == view_id)
        ctx.changes.dropped_views.add(view_id)
    ctx.changes.dropped_schemas.add(schema.schema_id)


def rename_table(ctx: CommitContext, table: TableEntry, new_name: str) -> None:
    """Give the table a new name in its schema (see the module doc).

    Raises:
        InvalidIdentifierError: an empty name. TableAlreadyExistsError: the name (or one differing only in case) is
            taken by another table or view.
    """
    if not new_name:
        raise InvalidIdentifierError("the new table name is empty")
    if new_name != table.table_name:
        check_table_name_free(ctx.conn, table.schema, new_name, ctx.base.snapshot_id)
    t = T.ducklake_table
    row = ctx.conn.execute(t.select().where(t.c.table_id == table.table_id, t.c.end_snapshot.is_(None))).first()
    if row is None:
        raise CommitConflictError(f"table {table.table_name} was dropped by another writer")
    _end(ctx, t, t.c.table_id == table.table_id)
    values = dict(row._mapping)
    values.update(begin_snapshot=ctx.snapshot_id, end_snapshot=None, table_name=new_name)
    ctx.conn.execute(insert(t).values(**values))
    sv = ctx.bump_schema_version()
    record_schema_version(ctx.conn, table.table_id, ctx.snapshot_id, sv)
    schema = reader.table_schema(ctx.conn, table.table_id, ctx.base.snapshot_id)
    if takes_inlined_rows(schema.columns, ctx.backend, ctx.format):
        create_inlined_table(ctx, table.table_id, sv, schema)
    ctx.changes.created_tables.append((table.schema.schema_name, new_name))
