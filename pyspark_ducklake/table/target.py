"""The target table of a write, one planner for every writer (the Python API, the Spark data source and fast write
path, the sink): what a table the commit will create must satisfy and where it will live, the partition keys it
is created with, and, inside the commit, the table entry, created when missing."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pyspark_ducklake.catalog import commit_rows as W
from pyspark_ducklake.catalog import reader as R
from pyspark_ducklake.catalog.db import Connection
from pyspark_ducklake.catalog.entries import TableEntry
from pyspark_ducklake.catalog.partitioning import (
    PartitionField,
    PartitionSpec,
    key_names,
    parse_partition_keys,
    partition_spec,
    set_partition_spec,
)
from pyspark_ducklake.catalog.paths import checked_table_dir, path_component
from pyspark_ducklake.catalog.reserved import check_column_names
from pyspark_ducklake.catalog.transaction import CommitContext
from pyspark_ducklake.catalog.types import TableSchema, validate_columns
from pyspark_ducklake.table.partition_values import PartitionKey, resolve_keys


@dataclass(frozen=True)
class NewTable:
    """A table the commit will create: its folder and the partition keys ``(column id, transform)`` it gets."""

    table_dir: str
    partition_keys: tuple[tuple[int, str], ...]


def plan_new_table(
    conn: Connection,
    data_path: str,
    schema_name: str,
    table_name: str,
    columns: TableSchema,
    *,
    inlining_limit: int,
    snapshot: int,
    partition_by: Any = None,
) -> NewTable:
    """Check, before any file is written, what DuckDB would refuse of a new table, and place it.

    Raises:
        NoSuchSchemaError: the schema does not exist.
        InvalidIdentifierError, UnsupportedTypeError: a reserved or clashing column name, an unsupported column.
        TableAlreadyExistsError, NotATableError: the name is taken (in any case), or is a view's.
        DataFileError: the table's folder would be outside the data path.
    """
    qualified = f"{schema_name}.{table_name}"
    schema = R.schema_by_name(conn, schema_name, snapshot)
    # What DuckDB refuses, before any task writes a file: see W.create_table.
    check_column_names(columns.names(), inlining_limit, R.format_version(conn))
    validate_columns(columns.columns, f"table {qualified}")
    W.check_table_name_free(conn, schema, table_name, snapshot)
    table_dir = checked_table_dir(
        R.resolve(R.resolve(data_path, schema.path, schema.path_is_relative), path_component(table_name), True),
        data_path,
        qualified,
    )
    keys = tuple(parse_partition_keys(partition_by, columns, format=R.format_version(conn))) if partition_by else ()
    return NewTable(table_dir, keys)


def new_partition_keys(keys: tuple[tuple[int, str], ...], schema: TableSchema) -> tuple[PartitionKey, ...]:
    """The partition keys a table created with ``keys`` will have, for writing its files before it exists."""
    if not keys:
        return ()
    names = key_names(list(keys), schema)
    spec = PartitionSpec(
        -1, tuple(PartitionField(i, cid, t, n) for i, ((cid, t), n) in enumerate(zip(keys, names, strict=False)))
    )
    return resolve_keys(spec, schema)


def create_target(
    ctx: CommitContext,
    schema_name: str,
    table_name: str,
    table_schema: TableSchema,
    partition_keys: tuple[tuple[int, str], ...] | list[tuple[int, str]],
    *,
    at: int,
) -> tuple[TableEntry, PartitionSpec | None]:
    """Create the table in this commit (its schema as of snapshot ``at``), partitioned by ``partition_keys``.

    Raises:
        TableAlreadyExistsError, NotATableError, InvalidIdentifierError, UnsupportedTypeError: see W.create_table.
    """
    schema = R.schema_by_name(ctx.conn, schema_name, at)
    entry = W.create_table(ctx, schema, table_name, table_schema.columns)
    if not partition_keys:
        return entry, None
    set_partition_spec(ctx, entry.table_id, list(partition_keys))
    return entry, partition_spec(ctx.conn, entry.table_id, ctx.snapshot_id, table_schema)
