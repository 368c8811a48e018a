"""Splitting data by a table's partition keys, with DuckDB's partition value text and Hive folder names."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote

import numpy as np
import pyarrow as pa

from pyspark_ducklake.catalog.partitioning import PartitionSpec
from pyspark_ducklake.catalog.stats_values import duckdb_text, storage_values
from pyspark_ducklake.catalog.types import Column, TableSchema
from pyspark_ducklake.table.partition_transforms import transform_array

HIVE_NULL = "__HIVE_DEFAULT_PARTITION__"


@dataclass(frozen=True)
class PartitionKey:
    """One key of a spec, resolved against the table's columns (picklable, for executors)."""

    column: Column
    transform: str
    key_name: str


def resolve_keys(spec: PartitionSpec | None, schema: TableSchema) -> tuple[PartitionKey, ...]:
    if spec is None:
        return ()
    by_id = schema.by_id()
    return tuple(PartitionKey(by_id[f.column_id], f.transform, f.key_name) for f in spec.fields)


def _render(values: pa.Array, key: PartitionKey) -> list[str | None]:
    if key.transform != "identity":
        return [None if v is None else str(int(v)) for v in values.to_pylist()]
    raw = storage_values(key.column, values)
    return [None if v is None else duckdb_text(key.column, v) for v in raw]


def split_by_partition(data: pa.Table, keys: tuple[PartitionKey, ...]) -> list[tuple[tuple[str | None, ...], pa.Table]]:
    """Groups of rows sharing partition values, with the values as DuckDB writes them (None for NULL).

    Raises:
        InvalidOptionError: a key's transform is not one this library knows (a newer DuckDB's).
        UnsupportedTypeError: a bucket() of a column whose hash DuckDB takes from its own text (nested values).
    """
    if not keys or data.num_rows == 0:
        return [((), data)] if data.num_rows or not keys else []
    codes = np.zeros(data.num_rows, dtype=np.int64)
    per_key: list[tuple[np.ndarray, list[str | None]]] = []
    for key in keys:
        values = transform_array(data.column(key.column.name).combine_chunks(), key.column, key.transform)
        encoded = values.dictionary_encode(null_encoding="encode")
        dictionary = encoded.dictionary
        indices = encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64)
        codes = codes * (len(dictionary) + 1) + indices
        per_key.append((indices, _render(dictionary, key)))
    unique, inverse = np.unique(codes, return_inverse=True)
    groups = []
    order = np.argsort(inverse, kind="stable")
    bounds = np.searchsorted(inverse[order], np.arange(len(unique) + 1))
    for g in range(len(unique)):
        rows = order[bounds[g] : bounds[g + 1]]
        first = int(rows[0])
        part = data.take(pa.array(rows))
        groups.append((tuple(rendered[int(indices[first])] for indices, rendered in per_key), part))
    return groups


def partition_dir(keys: tuple[PartitionKey, ...], values: tuple[str | None, ...]) -> str:
    """``k=a%2Fb/year=2024/`` (Hive style; NULL is ``__HIVE_DEFAULT_PARTITION__``).

    Key names and values are URL-encoded as DuckDB encodes them, so no segment is a separator, ``.`` or ``..``:
    a column named ``../../x`` gives the folder ``..%2F..%2Fx=…``, inside the table's folder.
    """
    return "".join(
        f"{quote(k.key_name, safe='')}={HIVE_NULL if v is None else quote(v, safe='')}/"
        for k, v in zip(keys, values, strict=False)
    )
