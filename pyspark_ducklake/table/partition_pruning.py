"""Skipping data files by their partition values where column statistics cannot: ``bucket(N)`` and ``epoch_*`` keys.

A file's ``bucket`` value is the bucket of every row in it, so ``col = v`` (or ``col in [...]``) keeps only the files
of ``v``'s bucket, as DuckDB prunes them (``BuildBucketPartitionPruningClause``). ``epoch_*`` values never decrease
as the column grows, so ``col < v`` keeps only the files whose value is at most ``v``'s, and so on. Calendar and
identity keys are left to the column statistics, which say as much.

Only files written under a spec that has the key are judged (a file keeps the partition id it was written with; one
written before the table was partitioned has none and is kept, where DuckDB 1.5.5 drops it), and only written ones:
a file registered by ``add_files``/``ducklake_add_data_files`` took its values from its folder names, which nobody
checked against its rows, and DuckDB 1.5.5 reads it whatever they say. A filter value is used
only when it is exactly a value of the column's type that the row filter itself finds equal (so no cast or
comparison pyarrow refuses is skipped, and no rounding moves a value to another bucket); float columns, whose NaN
payloads hash apart, and NULL partition values always keep their files (DuckDB 1.5.5 keeps a NULL bucket; ``±infinity``
has no epoch value).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from pyspark_ducklake.catalog.db import Connection
from pyspark_ducklake.catalog.entries import DataFileEntry
from pyspark_ducklake.catalog.partitioning import EPOCH_TRANSFORMS, partition_keys_by_id, transform_kind
from pyspark_ducklake.catalog.reader import file_partition_values
from pyspark_ducklake.catalog.types import Column, arrow_type
from pyspark_ducklake.exceptions import DuckLakeError
from pyspark_ducklake.table.filters import FLOAT_TYPES, term_expression
from pyspark_ducklake.table.partition_transforms import transform_array

# operators each kind of key can decide, and how a file's value must relate to the filter value's
_RANGE = {"=": "==", "==": "==", "<": "<=", "<=": "<=", ">": ">=", ">=": ">="}
PARTITION_OPERATORS = ("=", "==", "<", "<=", ">", ">=", "in")


class PartitionPruner:
    """The partition values of a table's files and the specs they were written under, read once per scan."""

    def __init__(self, conn: Connection, table_id: int, columns: Sequence[Column]) -> None:
        wanted = {c.column_id for c in columns if c.type not in FLOAT_TYPES}
        self.keys: dict[int, list[tuple[int, int, str]]] = {}  # partition id -> (key index, column id, transform)
        for partition_id, spec in partition_keys_by_id(conn, table_id).items():
            for index, (column_id, transform) in spec.items():
                if column_id in wanted and _prunable(transform):
                    self.keys.setdefault(partition_id, []).append((index, column_id, transform))
        self.values = file_partition_values(conn, table_id) if self.keys else {}

    def may_match(self, column: Column, op: str, value: Any, files: Sequence[DataFileEntry]) -> np.ndarray:
        """Per file: whether a row of it may pass ``column op value``, as far as its partition values tell."""
        keep = np.ones(len(files), dtype=bool)
        if not self.keys or op not in PARTITION_OPERATORS:
            return keep
        cache: dict[str, set[int] | int | None] = {}
        for i, f in enumerate(files):
            # an added file's values are its folder names, never checked against its rows: DuckDB 1.5.5 reads it whole
            keys = self.keys.get(f.partition_id) if f.partition_id is not None and f.mapping_id is None else None
            values = self.values.get(f.data_file_id, ())
            for index, column_id, transform in keys or ():
                if column_id != column.column_id or index >= len(values):
                    continue
                if transform not in cache:
                    cache[transform] = _target(column, transform, op, value)
                target = cache[transform]
                if target is not None and not _holds(values[index], op, target):
                    keep[i] = False
        return keep


def _prunable(transform: str) -> bool:
    try:
        kind = transform_kind(transform)
    except DuckLakeError:
        return False
    return kind == "bucket" or kind in EPOCH_TRANSFORMS


def _target(column: Column, transform: str, op: str, value: Any) -> set[int] | int | None:
    """The partition value(s) of ``value`` under ``transform``: a set for ``in``; None when it cannot be used."""
    if transform.startswith("bucket(") and op not in ("=", "==", "in"):
        return None
    if op == "in":
        if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple, set, frozenset)):
            return None
        targets = [_one(column, transform, v) for v in value if v is not None]
        return None if any(t is None for t in targets) else {t for t in targets if t is not None}
    return _one(column, transform, value)


def _one(column: Column, transform: str, value: Any) -> int | None:
    try:
        exact = pa.array([value], arrow_type(column))
        # the row filter finds the converted value equal to the filter's: no rounding, no refused comparison
        probe = pa.table({column.name: exact})
        if probe.filter(term_expression(column.name, "=", value, column.type)).num_rows != 1:
            return None
        out = transform_array(exact, column, transform)[0].as_py()
    except (pa.ArrowException, TypeError, ValueError, OverflowError, DuckLakeError):
        return None
    return None if out is None else int(out)


def _int(text: str) -> int | None:
    try:
        return int(text)
    except ValueError:
        return None


def _holds(text: str | None, op: str, target: set[int] | int) -> bool:
    if text is None:
        return True  # kept, as DuckDB 1.5.5 keeps a NULL bucket (and a NULL epoch value may be ±infinity)
    partition_value = _int(text)
    if partition_value is None:
        return True  # a value DuckDB would not have written: keep the file
    if isinstance(target, set):
        return partition_value in target
    rel = _RANGE[op]
    if rel == "==":
        return partition_value == target
    return partition_value <= target if rel == "<=" else partition_value >= target


__all__ = ["PARTITION_OPERATORS", "PartitionPruner"]
