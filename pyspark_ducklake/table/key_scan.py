"""What the tasks of a large ``writeStream`` upsert batch pair their rows with: the table's key columns at the
snapshot the batch's writer was planned at (the live files and their statistics of the first key column, not their
values), pickled into the tasks with the writer; each task reads only the files its own keys may be in."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import pyarrow as pa

from pyspark_ducklake.catalog.db import Connection
from pyspark_ducklake.catalog.entries import TableEntry
from pyspark_ducklake.catalog.format_version import FormatVersion
from pyspark_ducklake.catalog.types import Column
from pyspark_ducklake.table import upsert as U
from pyspark_ducklake.table.pruning import column_statistics, may_match
from pyspark_ducklake.table.scan import ScanPlan, plan_scan


@dataclass(frozen=True)
class KeyBounds:
    """One file's statistics of the first key column (what :func:`may_match` reads)."""

    min_value: str | None
    max_value: str | None
    contains_nan: bool | None


@dataclass(frozen=True)
class KeyScan:
    """The key columns of a table's live rows at one snapshot, and what prunes its files by a task's keys (pickled
    into the tasks with the writer)."""

    scan: ScanPlan
    key: Column
    bounds: tuple[KeyBounds | None, ...]  # per file of ``scan``
    types: frozenset[str]  # the types the key column has had

    def for_rows(self, rows: pa.Table) -> ScanPlan:
        """The plan of only the files whose statistics may hold one of ``rows``' keys."""
        branches = U.prune_filter(rows, self.key.name)
        if branches is None or not self.scan.files:
            return self.scan
        keep = np.zeros(len(self.scan.files), dtype=bool)
        for branch in branches:
            passing = np.ones(len(self.scan.files), dtype=bool)
            for _, op, value in branch:
                passing &= may_match(self.key, op, value, self.bounds, set(self.types))
            keep |= passing
        files = [f for f, k in zip(self.scan.files, keep, strict=True) if k]
        return replace(self.scan, files=files, pruned_files=len(self.scan.files) - len(files))


def plan_key_scan(
    conn: Connection, entry: TableEntry, snapshot: int, data_path: str, fmt: FormatVersion, keys: Sequence[str]
) -> KeyScan:
    """What the tasks of one batch pair their keys with: the table at ``snapshot``, key columns only."""
    scan = plan_scan(conn, entry, snapshot, data_path, fmt=fmt, columns=list(keys))
    key = scan.schema.by_name(keys[0])
    assert key is not None
    stats, history = column_statistics(conn, entry, [key.column_id], [f.file for f in scan.files])
    bounds = []
    for f in scan.files:
        row = stats.get(f.file.data_file_id, {}).get(key.column_id)
        bounds.append(None if row is None else KeyBounds(row.min_value, row.max_value, row.contains_nan))
    types = history.get(key.column_id, set())
    return KeyScan(scan, key, tuple(bounds), frozenset(types))
