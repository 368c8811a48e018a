"""Catalog rows for files registered by ``Lake.add_files``, as ``ducklake_add_data_files`` writes them (§1.1).

A name mapping identical to one the table already has (same names, targets and partition flags) is reused, as
DuckDB reuses it; a new one takes its id from ``next_file_id`` before the file does.
"""

from __future__ import annotations

from sqlalchemy import insert, select

from pyspark_ducklake.catalog import commit_rows as W
from pyspark_ducklake.catalog import tables as T
from pyspark_ducklake.catalog.entries import TableEntry
from pyspark_ducklake.catalog.name_mapping import MAP_BY_NAME, MappingNode, NameMapping, load_mappings
from pyspark_ducklake.catalog.transaction import CommitContext
from pyspark_ducklake.catalog.types import TableSchema
from pyspark_ducklake.io.parquet import WrittenFile


def mapping_id_for(ctx: CommitContext, table_id: int, nodes: tuple[MappingNode, ...]) -> int:
    """The id of an identical mapping of the table, else of a new one written now."""
    m = T.ducklake_column_mapping
    ids = {int(r.mapping_id) for r in ctx.conn.execute(select(m.c.mapping_id).where(m.c.table_id == table_id))}
    wanted = NameMapping(-1, table_id, nodes).flat()
    for mapping_id, mapping in sorted(load_mappings(ctx.conn, ids).items()):
        if mapping.flat() == wanted:
            return mapping_id
    mapping_id = ctx.allocate_file_id()
    ctx.conn.execute(insert(m).values(mapping_id=mapping_id, table_id=table_id, type=MAP_BY_NAME))
    if wanted:
        ctx.conn.execute(
            insert(T.ducklake_name_mapping),
            [
                {
                    "mapping_id": mapping_id,
                    "column_id": node_id,
                    "source_name": name,
                    "target_field_id": target,
                    "parent_column": parent,
                    "is_partition": partition,
                }
                for node_id, name, target, parent, partition in wanted
            ],
        )
    return mapping_id


def register_added_file(
    ctx: CommitContext,
    table: TableEntry,
    schema: TableSchema,
    path: str,
    nodes: tuple[MappingNode, ...],
    written: WrittenFile,
    *,
    partition_id: int | None = None,
    partition_values: tuple[str | None, ...] = (),
) -> int:
    """Register an existing file at its absolute ``path``; returns its data_file_id."""
    mapping_id = mapping_id_for(ctx, table.table_id, nodes)
    return W.add_data_file(
        ctx,
        table,
        schema,
        written,
        relative_path=path,
        path_is_relative=False,
        mapping_id=mapping_id,
        partition_id=partition_id,
        partition_values=partition_values,
    )


__all__ = ["mapping_id_for", "register_added_file"]
