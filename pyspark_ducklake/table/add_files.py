"""Registering existing Parquet files in a table, as DuckDB's ``ducklake_add_data_files`` does (format-2 §1).

Each file is checked against the table first (nothing is written if one fails): its columns are matched to the
table's by name, case-insensitively, at every nesting level; each matched column's type must be one DuckDB accepts
for the table's type (§1.3); extra file columns fail unless ``ignore_extra_columns``, table columns the file lacks
fail unless ``allow_missing`` or a ``name=value`` folder of the path gives them (hive partitioning, §1.4). The
result is a name mapping per file, the file's statistics and its partition values, for the catalog to register.
"""

from __future__ import annotations

import glob as globlib
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from pyspark_ducklake.catalog.added_files import register_added_file
from pyspark_ducklake.catalog.file_stats import leaf_min_max
from pyspark_ducklake.catalog.name_mapping import MappingNode
from pyspark_ducklake.catalog.partitioning import PartitionSpec, bucket_count, partition_spec, transform_kind
from pyspark_ducklake.catalog.stats_values import parse_stat
from pyspark_ducklake.catalog.transaction import CommitContext
from pyspark_ducklake.catalog.types import Column, TableSchema, arrow_type
from pyspark_ducklake.exceptions import (
    CommitConflictError,
    DataFileError,
    EncryptedLakeError,
    InvalidOptionError,
    SchemaMismatchError,
)
from pyspark_ducklake.io.fileio import filesystem
from pyspark_ducklake.io.parquet import LeafStats, WrittenFile, leaf_arrays, read_table
from pyspark_ducklake.io.parquet_schema_tree import SchemaNode, derived_type, footer_schema
from pyspark_ducklake.io.wkb import normalize_array
from pyspark_ducklake.table.commit import commit, current_schema
from pyspark_ducklake.table.lake_table import LakeTable
from pyspark_ducklake.table.name_mapped import hive_values

_SIGNED = ["int8", "int16", "int32", "int64"]
_UNSIGNED = ["uint8", "uint16", "uint32", "uint64"]
_TIMESTAMPS = {"timestamp", "timestamp_ms", "timestamp_s"}


@dataclass(frozen=True)
class AddFilesOptions:
    """DuckDB's options of ``ducklake_add_data_files``; ``hive_partitioning`` None is automatic."""

    allow_missing: bool = False
    ignore_extra_columns: bool = False
    hive_partitioning: bool | None = None


@dataclass(frozen=True)
class AddedFile:
    """One checked file: its mapping, description (statistics keyed by column id) and partition values."""

    path: str
    nodes: tuple[MappingNode, ...]
    written: WrittenFile
    partition_values: tuple[str | None, ...] = ()


def accepted_types(table_type: str) -> list[str] | None:
    """File types DuckDB accepts for a table type (None: only that exact type; decimals are checked apart)."""
    if table_type in _SIGNED:
        i = _SIGNED.index(table_type)
        out = [_SIGNED[0]]
        for k in range(1, i + 1):
            out += [_SIGNED[k], _UNSIGNED[k - 1]]
        return out
    if table_type in _UNSIGNED:
        return _UNSIGNED[: _UNSIGNED.index(table_type) + 1]
    if table_type == "float64":
        return ["float64", "float32"]
    if table_type in ("timestamp", "timestamp_ns"):
        return ["timestamp_ns", "timestamp", "timestamp_ms", "timestamp_s"]
    if table_type in ("timestamp_ms", "timestamp_s"):
        return sorted(_TIMESTAMPS)
    return None


def _decimal(t: str) -> tuple[int, int] | None:
    if not t.startswith("decimal("):
        return None
    p, s = t[len("decimal(") : -1].split(",")
    return int(p), int(s)


def check_type(column: Column, source: str, where: str) -> None:
    """Raise unless DuckDB accepts a file column of type ``source`` for ``column``.

    Raises:
        SchemaMismatchError: naming the file, the column and the types.
    """
    target = column.type
    ok: bool
    if target in ("list", "struct", "map"):
        ok = source == target
    elif _decimal(target) is not None:
        src, tgt = _decimal(source), _decimal(target)
        ok = src is not None and tgt is not None and src[0] <= tgt[0] and src[1] <= tgt[1]
    else:
        accepted = accepted_types(target)
        ok = source in accepted if accepted is not None else source == target
    if not ok:
        expected = accepted_types(target) or [target]
        raise SchemaMismatchError(
            f"cannot add {where}: the file's type {source} does not fit the table's {target} (accepted: "
            f"{', '.join(expected)}); cast the column when writing the file, or change the table's column type"
        )


class _Mapper:
    def __init__(self, path: str, table: str, options: AddFilesOptions, hive: dict[str, str | None]) -> None:
        self.path, self.table, self.options, self.hive = path, table, options, hive
        self.partition_nodes: dict[int, str | None] = {}  # column id -> hive value
        # column id of a mapped leaf -> its column-chunk index and its type in the file (stats are in that type)
        self.leaves: dict[int, tuple[int, str]] = {}

    def where(self, prefix: str, name: str) -> str:
        return f'column "{prefix}{name}" of file {self.path} (table {self.table})'

    def columns(self, nodes: list[SchemaNode], columns: Sequence[Column], prefix: str, top: bool) -> list[MappingNode]:
        remaining = {c.name.lower(): c for c in columns}
        out: list[MappingNode] = []
        for node in nodes:
            column = remaining.pop(node.name.lower(), None)
            if column is None:
                if self.options.ignore_extra_columns:
                    continue
                raise SchemaMismatchError(
                    f"{self.where(prefix, node.name)} is not in the table; pass ignore_extra_columns=True to add "
                    "the file anyway (the column is not read)"
                )
            if top and node.name in self.hive:
                out.append(self.partition(column, self.hive[node.name]))
                continue
            out.append(self.column(node, column, prefix))
        for column in remaining.values():
            if top and column.name in self.hive:
                out.append(self.partition(column, self.hive[column.name]))
                continue
            if not self.options.allow_missing:
                raise SchemaMismatchError(
                    f'column "{prefix}{column.name}" of table {self.table} is not in file {self.path}; pass '
                    "allow_missing=True to add it anyway (the column reads as its default, else NULL)"
                )
        return out

    def partition(self, column: Column, value: str | None) -> MappingNode:
        if column.is_nested:
            raise SchemaMismatchError(
                f"column {column.name} of table {self.table} is {column.type}: a hive partition value in the path "
                f"of {self.path} cannot fill it"
            )
        if value is not None:
            try:
                parse_stat(column, value, inlined=True)
                pa.array([parse_stat(column, value, inlined=True)], arrow_type(column))
            except (ValueError, TypeError, ArithmeticError, pa.ArrowException) as e:
                raise SchemaMismatchError(
                    f'column "{column.name}" is a hive partition of {self.path} with value {value!r}, which is not '
                    f"a {column.type} ({e}); rename the folder, pass hive_partitioning=False, or change the column type"
                ) from e
        self.partition_nodes[column.column_id] = value
        return MappingNode(column.name, column.column_id, True)

    def column(self, node: SchemaNode, column: Column, prefix: str) -> MappingNode:
        source = derived_type(node)
        check_type(column, source, self.where(prefix, node.name))
        inner = f"{prefix}{node.name}."
        if column.type == "struct":
            children = tuple(self.columns(node.children, column.children, inner, False))
        elif column.type == "list":
            repeated = node.children[0]
            if repeated.name == "array" or not repeated.children:  # legacy 2-level list: the element repeats
                element = repeated
                name = element.name
            else:
                element, name = repeated.children[0], "list"
            child = self.column(element, column.children[0], inner)
            children = (MappingNode(name, child.target_field_id, False, child.children),)
        elif column.type == "map":
            entries = node.children[0].children
            children = tuple(self.columns(entries, column.children, inner, False))
        else:
            if node.leaf is not None:
                self.leaves[column.column_id] = (node.leaf, source)
            children = ()
        return MappingNode(node.name, column.column_id, False, children)


def expand_paths(paths: str | Sequence[str], storage_options: dict[str, Any] | None = None) -> list[str]:
    """Absolute paths of the files, globs expanded, duplicates dropped (the first occurrence kept).

    Raises:
        InvalidOptionError: no path given, or a glob matches nothing.
        DataFileError: a named file does not exist.
    """
    items = [paths] if isinstance(paths, str) else list(paths)
    if not items or not all(isinstance(p, str) and p for p in items):
        raise InvalidOptionError(f"add_files() needs a path, a glob or a list of them, got {paths!r}")
    out: list[str] = []
    for item in items:
        if "://" not in item:
            item = os.path.abspath(os.path.expanduser(item))
        if any(ch in item for ch in "*?["):
            if "://" in item:
                fs, p = filesystem(item, storage_options)
                scheme = item.split("://", 1)[0]
                found = [f"{scheme}://{m}" for m in sorted(fs.glob(p))]
            else:
                found = sorted(globlib.glob(item))
            if not found:
                raise InvalidOptionError(f"add_files(): {item} matches no file; check the path")
            out += found
        else:
            fs, p = filesystem(item, storage_options)
            if not fs.isfile(p):
                raise DataFileError(f"add_files(): {item} is not a file")
            out.append(item)
    seen: set[str] = set()
    return [p for p in out if not (p in seen or seen.add(p))]  # type: ignore[func-returns-value]


def plan_added_file(
    path: str,
    table_name: str,
    schema: TableSchema,
    partition: PartitionSpec | None,
    options: AddFilesOptions,
    storage_options: dict[str, Any] | None = None,
) -> AddedFile | None:
    """Check one file against the table and describe it; None for a file without rows (DuckDB skips those).

    Raises:
        SchemaMismatchError: a column is extra, missing, or of a type the table's column does not accept; or the
            path's partition folders do not fit the table's partitioning.
        DataFileError: the file cannot be read as Parquet.
        InvalidOptionError: the table is partitioned by a transform this library does not know.
    """
    top, size, footer_size, row_groups = footer_schema(path, storage_options)
    hive = hive_values(path) if options.hive_partitioning is not False else {}
    mapper = _Mapper(path, table_name, options, hive)
    nodes = tuple(mapper.columns(top, schema.columns, "", True))
    values = _partition_values(mapper, partition, schema, path, table_name)
    raw = read_table(path, storage_options=storage_options)
    if raw.num_rows == 0:
        return None
    stats = _leaf_stats(path, raw, schema, mapper, storage_options)
    return AddedFile(
        path,
        nodes,
        WrittenFile(path, raw.num_rows, size, footer_size, tuple(stats), row_group_count=row_groups),
        values,
    )


def _partition_values(
    mapper: _Mapper, partition: PartitionSpec | None, schema: TableSchema, path: str, table_name: str
) -> tuple[str | None, ...]:
    if partition is None:
        return ()
    by_id = schema.by_id()
    values: list[str | None] = []
    for f in partition.fields:
        if f.transform != "identity":
            values.append(_transformed_value(mapper.hive, f.key_name, f.transform, path, table_name))
            continue
        if f.column_id not in mapper.partition_nodes:
            raise _no_partition_folder(path, f.key_name, table_name)
        value = mapper.partition_nodes[f.column_id]
        column = by_id[f.column_id]
        values.append(None if value is None else _render(column, value))
    return tuple(values)


_INTEGER = re.compile(r"^\s*[+-]?\d+\s*$")


def _transformed_value(hive: dict[str, str | None], key: str, transform: str, path: str, table_name: str) -> str | None:
    """A transformed key's value from the path's ``<key>=<value>`` folder (``bucket=3``, ``year=2024``), as DuckDB
    takes it: cast to the key's type (INTEGER for a bucket, else BIGINT), not checked against the file's rows."""
    if key not in hive:
        raise _no_partition_folder(path, key, table_name)
    text = hive[key]
    if text is None:
        return None
    kind = transform_kind(transform)
    value = int(text) if _INTEGER.match(text) else None
    if kind == "bucket":
        # DuckDB 2.0 refuses a bucket outside 0..N-1 (1.5.5 registered it, and its equality filters then miss it)
        valid = value is not None and 0 <= value < bucket_count(transform)
        wanted = f"a bucket number from 0 to {bucket_count(transform) - 1}"
    else:
        valid = value is not None and -(2**63) <= value < 2**63
        wanted = f"a whole number of {kind.removeprefix('epoch_')}s" if kind.startswith("epoch_") else f"a {kind}"
    if not valid:
        raise SchemaMismatchError(
            f"file {path} is in the folder {key}={text}, but table {table_name} is partitioned by {transform} there, "
            f"which needs {wanted}: it contains an invalid partition value for the table configuration; move the "
            "file to the right folder, or pass hive_partitioning=False to a table without that partitioning"
        )
    return str(value)


def _no_partition_folder(path: str, key: str, table_name: str) -> SchemaMismatchError:
    return SchemaMismatchError(
        f"file {path} has no {key}=<value> folder in its path, which table {table_name} is "
        "partitioned by: it contains an invalid partition value for the table configuration"
    )


def _render(column: Column, value: str) -> str | None:
    lo, _, _ = leaf_min_max(column, pa.array([parse_stat(column, value, inlined=True)], arrow_type(column)))
    return lo


def _leaf_stats(
    path: str,
    raw: pa.Table,
    schema: TableSchema,
    mapper: _Mapper,
    storage_options: dict[str, Any] | None,
) -> list[LeafStats]:
    """Statistics of the mapped leaves as DuckDB takes them from the file: sizes and counts from the footer,
    min/max in the file's own type (a DECIMAL(10,2) column of a DECIMAL(18,3) table keeps ``1.25``)."""
    import pyarrow.parquet as pq

    by_id = schema.by_id()
    out = []
    if mapper.leaves:
        arrays = leaf_arrays(raw)
        fs, p = filesystem(path, storage_options)
        with fs.open(p, "rb") as fh:
            meta = pq.ParquetFile(fh).metadata
        for cid, (leaf, source) in mapper.leaves.items():
            size = values = nulls = 0
            for rg in range(meta.num_row_groups):
                chunk = meta.row_group(rg).column(leaf)
                size += chunk.total_compressed_size
                values += chunk.num_values
                if chunk.statistics is not None and chunk.statistics.has_null_count:
                    nulls += chunk.statistics.null_count
            if source == "geometry":
                # no min/max; types and box from the values (refused if not WKB DuckDB reads). pyarrow writes no
                # Statistics for a geometry leaf, so the NULLs are counted from the values (DuckDB leaves them NULL)
                present = len(arrays[leaf]) - arrays[leaf].null_count
                geo = normalize_array(arrays[leaf], f'column "{by_id[cid].name}" of file {path}')[1]
                out.append(LeafStats(cid, size, present, max(values - present, 0), None, None, None, geo))
                continue
            lo, hi, _ = leaf_min_max(Column(cid, by_id[cid].name, source), arrays[leaf])
            # contains_nan stays NULL: DuckDB takes stats from the footer, which does not say
            out.append(LeafStats(cid, size, max(values - nulls, 0), nulls, lo, hi, None))
    for cid, value in mapper.partition_nodes.items():
        if value is None:
            out.append(LeafStats(cid, 0, 0, raw.num_rows))
        else:
            rendered = _render(by_id[cid], value)
            out.append(LeafStats(cid, 0, raw.num_rows, 0, rendered, rendered))
    return out


def check_flag(value: Any, name: str) -> bool:
    """A real bool option (``"false"`` as a string would read as true).

    Raises:
        InvalidOptionError: ``value`` is not a bool.
    """
    if not isinstance(value, bool):
        raise InvalidOptionError(f"add_files() option {name} must be True or False, got {value!r}")
    return value


def add_files(
    lake: Any,
    table: LakeTable,
    paths: str | Sequence[str],
    options: AddFilesOptions,
) -> int:
    """Check every file, then register them all in one snapshot; returns its id (the table's current one when
    every file is empty). Nothing is written when a file fails its checks, and the files are never deleted, even
    when the commit fails.

    Raises:
        SchemaMismatchError, DataFileError, InvalidOptionError: see :func:`plan_added_file`, :func:`expand_paths`.
        EncryptedLakeError: the lake is encrypted (added files have no key).
        CommitFailedError, CommitConflictError, CommitStateUnknownError: see the commit protocol.
    """
    if lake.catalog_info.encrypted:
        raise EncryptedLakeError(
            f"add_files(): the lake of table {table.name} is encrypted, and added files are plaintext without a key, "
            "which neither DuckDB nor this library reads there (DuckDB registers them, then fails every read: "
            "'does not have an encryption key'); append the files' rows with lake.append instead"
        )
    storage = lake.storage_options
    planned = [
        plan_added_file(p, table.name, table.table_schema, table.partition, options, storage)
        for p in expand_paths(paths, storage)
    ]
    files = [f for f in planned if f is not None]
    if not files:
        return table.snapshot_id

    def apply(ctx: CommitContext) -> None:
        schema = current_schema(ctx, table)
        current = partition_spec(ctx.conn, table.table_id, ctx.snapshot_id, schema)
        if (current.partition_id if current else None) != (table.partition.partition_id if table.partition else None):
            raise CommitConflictError(f"table {table.name} was re-partitioned by another writer; retry")
        for f in files:
            register_added_file(
                ctx,
                table.entry,
                schema,
                f.path,
                f.nodes,
                f.written,
                partition_id=table.partition.partition_id if table.partition else None,
                partition_values=f.partition_values,
            )

    result = commit(lake, apply, base=table.snapshot_id)  # no ``files=``: a failed commit must keep the user's files
    assert result.snapshot_id is not None
    return result.snapshot_id


__all__ = [
    "AddFilesOptions",
    "AddedFile",
    "accepted_types",
    "add_files",
    "check_flag",
    "check_type",
    "expand_paths",
    "plan_added_file",
]
