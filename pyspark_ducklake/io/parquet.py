"""Writing and reading Parquet files the way DuckLake expects them.

Every field carries ``PARQUET:field_id`` (the DuckLake column id) at every nesting level; the writer reports
the file's size, footer size and per-leaf statistics so the catalog can record them without reopening the file.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from pyspark_ducklake.exceptions import DataFileError
from pyspark_ducklake.io.fileio import ensure_parent, filesystem

FIELD_ID_KEY = b"PARQUET:field_id"
DEFAULT_COMPRESSION = "snappy"
ROW_GROUP_SIZE = 122_880  # DuckDB's default row group size


@dataclass(frozen=True)
class LeafStats:
    """Statistics of one leaf column of a written file (values are Python values, not yet rendered)."""

    field_id: int
    column_size_bytes: int
    value_count: int
    null_count: int
    min_value: Any = None
    max_value: Any = None
    contains_nan: bool | None = None


@dataclass(frozen=True)
class WrittenFile:
    """A Parquet file written for a commit; a frozen record of primitives, so it pickles to the driver."""

    path: str
    record_count: int
    file_size_bytes: int
    footer_size: int
    leaf_stats: tuple[LeafStats, ...] = field(default_factory=tuple)


def field_id(f: pa.Field) -> int | None:
    if f.metadata and FIELD_ID_KEY in f.metadata:
        return int(f.metadata[FIELD_ID_KEY])
    return None


def leaf_fields(schema: pa.Schema) -> list[pa.Field]:
    """Leaf fields depth first: the order of Parquet's column chunks."""
    out: list[pa.Field] = []

    def walk(f: pa.Field) -> None:
        t = f.type
        if isinstance(t, pa.BaseExtensionType):
            out.append(f)
        elif pa.types.is_list(t) or pa.types.is_large_list(t):
            walk(t.value_field)
        elif pa.types.is_map(t):
            walk(t.key_field)
            walk(t.item_field)
        elif pa.types.is_struct(t):
            for i in range(t.num_fields):
                walk(t.field(i))
        else:
            out.append(f)

    for f in schema:
        walk(f)
    return out


def leaf_arrays(table: pa.Table) -> list[pa.Array]:
    """The flattened values of every leaf, depth first (nested nulls dropped with their parents)."""
    out: list[pa.Array] = []

    def walk(arr: pa.Array) -> None:
        t = arr.type
        if isinstance(t, pa.BaseExtensionType):
            out.append(arr.storage)
        elif pa.types.is_list(t) or pa.types.is_large_list(t):
            walk(arr.flatten())
        elif pa.types.is_map(t):
            walk(arr.keys)
            walk(arr.items)
        elif pa.types.is_struct(t):
            # flatten() folds the parent's nulls into the children, as Parquet's definition levels do
            for child in arr.flatten():
                walk(child)
        else:
            out.append(arr)

    for col in table.columns:
        walk(col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col)
    return out


StatsFn = Callable[[int, pa.Array], tuple[Any, Any, "bool | None"]]


def write_table(
    table: pa.Table,
    path: str,
    *,
    storage_options: dict[str, Any] | None = None,
    compression: str = DEFAULT_COMPRESSION,
    stats: StatsFn | None = None,
) -> WrittenFile:
    """Write ``table`` (whose schema already carries field ids) to ``path`` and describe it.

    ``stats(field_id, leaf_values)`` gives each leaf's ``(min, max, contains_nan)``; the file's own metadata gives
    sizes and counts. The file is complete before this returns; a failed upload raises and leaves no catalog trace.
    """
    ensure_parent(path, storage_options)
    fs, p = filesystem(path, storage_options)
    with fs.open(p, "wb") as out:
        writer = pq.ParquetWriter(
            out,
            table.schema,
            compression=compression,
            use_compliant_nested_type=True,
            store_schema=False,
            write_statistics=True,
        )
        writer.write_table(table, row_group_size=ROW_GROUP_SIZE)
        writer.close()
        metadata = writer.metadata if hasattr(writer, "metadata") else None
    size = int(fs.size(p))
    with fs.open(p, "rb") as f:
        f.seek(size - 8)
        tail = f.read(8)
    footer_size = struct.unpack("<I", tail[:4])[0]
    if metadata is None:
        with fs.open(p, "rb") as f:
            metadata = pq.ParquetFile(f).metadata
    leaves = leaf_fields(table.schema)
    arrays = leaf_arrays(table)
    described = []
    for i, (lf, arr) in enumerate(zip(leaves, arrays, strict=False)):
        size_bytes = 0
        value_count = 0
        null_count = 0
        for rg in range(metadata.num_row_groups):
            chunk = metadata.row_group(rg).column(i)
            size_bytes += chunk.total_compressed_size
            value_count += chunk.num_values
            if chunk.statistics is not None and chunk.statistics.has_null_count:
                null_count += chunk.statistics.null_count
        fid = field_id(lf)
        lo, hi, nan = stats(fid, arr) if stats is not None and fid is not None else (None, None, None)
        described.append(LeafStats(fid if fid is not None else -1, size_bytes, value_count, null_count, lo, hi, nan))
    return WrittenFile(path, table.num_rows, size, footer_size, tuple(described))


def read_table(
    path: str,
    *,
    columns: list[str] | None = None,
    storage_options: dict[str, Any] | None = None,
    footer_size: int | None = None,
) -> pa.Table:
    """Read a whole Parquet file (schema metadata, including field ids, preserved)."""
    fs, p = filesystem(path, storage_options)
    try:
        with fs.open(p, "rb") as f:
            return pq.ParquetFile(f).read(columns=columns, use_threads=True)
    except FileNotFoundError as e:
        raise DataFileError(
            f"data file {path} is missing: the lake's files were removed or moved (its data_path is recorded in the "
            "catalog); restore the file or time-travel to a snapshot that does not need it"
        ) from e
    except (OSError, pa.ArrowInvalid) as e:
        raise DataFileError(f"data file {path} cannot be read as Parquet: {e}") from e


def read_schema(path: str, *, storage_options: dict[str, Any] | None = None) -> pa.Schema:
    fs, p = filesystem(path, storage_options)
    with fs.open(p, "rb") as f:
        return pq.ParquetFile(f).schema_arrow
