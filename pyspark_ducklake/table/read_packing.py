"""Packing a scan's files into a few read partitions of about equal bytes, as Spark packs Parquet files.

One partition per file costs a Spark task, a Python worker round trip and a pickled plan each; one large file in one
partition reads on one core. Spark's own Parquet scan cuts files into splits of ``min(maxPartitionBytes,
max(openCostInBytes, bytes / parallelism))`` and packs them; here the parallelism is two partitions per core (so a
slow split does not leave a core idle at the end): a file larger than ``bytes / (2 x cores)`` (at most 128 MB, at
least 4 MB) is cut into byte ranges of that size, each reading the row groups whose middle byte it holds (as Spark
does; :func:`pyspark_ducklake.io.parquet.iter_row_groups`), then the pieces are packed, largest first into the
lightest partition, into ``2 x cores`` partitions (more where one would pass 128 MB, never more than there are
pieces). Each piece counts its bytes plus Spark's open cost. Files added by name mapping (read whole) and encrypted
files (decrypted whole in memory) are never cut.
"""

from __future__ import annotations

import heapq
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass

from pyspark_ducklake.table.scan import FileTask

PARTITIONS_PER_CORE = 2
MAX_PARTITION_BYTES = 128 * 1024 * 1024  # spark.sql.files.maxPartitionBytes' default
OPEN_COST_BYTES = 4 * 1024 * 1024  # spark.sql.files.openCostInBytes' default


@dataclass(frozen=True)
class FileSlice:
    """A file task's row groups whose middle byte lies in ``[start, end)`` (``end`` None: to the file's end)."""

    task: FileTask
    start: int = 0
    end: int | None = None

    @property
    def whole(self) -> bool:
        return self.start == 0 and self.end is None


def default_cores() -> int:
    """The cores of this machine available to this process (Spark plans a Python data source's partitions in a
    worker on the driver, which is told nothing of the cluster's cores)."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):  # not Linux
        return os.cpu_count() or 1


def split_bytes(tasks: Sequence[FileTask], cores: int) -> int:
    """The size files are cut at: the table's bytes over ``PARTITIONS_PER_CORE x cores``, within [4 MB, 128 MB]."""
    total = sum(max(t.file.file_size_bytes, 0) for t in tasks)
    return min(MAX_PARTITION_BYTES, max(OPEN_COST_BYTES, total // (PARTITIONS_PER_CORE * max(cores, 1))))


def slices(tasks: Sequence[FileTask], cores: int) -> list[FileSlice]:
    """Each task whole, or cut into byte ranges of :func:`split_bytes` (the last one open-ended)."""
    size = split_bytes(tasks, cores)
    out = []
    for t in tasks:
        n = math.ceil(max(t.file.file_size_bytes, 0) / size)
        if n <= 1 or t.file.name_mapping is not None or t.file.encryption_key is not None:
            out.append(FileSlice(t))
            continue
        out.extend(FileSlice(t, k * size, None if k == n - 1 else (k + 1) * size) for k in range(n))
    return out


def _weight(piece: FileSlice) -> int:
    size = max(piece.task.file.file_size_bytes, 0)
    end = size if piece.end is None else min(piece.end, size)
    return max(end - piece.start, 0) + OPEN_COST_BYTES


def pack_files(tasks: Sequence[FileTask], cores: int) -> list[tuple[FileSlice, ...]]:
    """``tasks`` as :func:`slices` packed into partitions of about equal bytes: ``PARTITIONS_PER_CORE`` per core,
    more where one would pass ``MAX_PARTITION_BYTES``, at most one per piece; within a partition the pieces keep the
    tasks' order."""
    pieces = slices(tasks, cores)
    if not pieces:
        return []
    weights = [_weight(p) for p in pieces]
    count = max(PARTITIONS_PER_CORE * max(cores, 1), math.ceil(sum(weights) / MAX_PARTITION_BYTES))
    count = min(count, len(pieces))
    heap = [(0, p) for p in range(count)]
    members: list[list[int]] = [[] for _ in range(count)]
    for i in sorted(range(len(pieces)), key=lambda i: (-weights[i], i)):
        load, p = heapq.heappop(heap)
        members[p].append(i)
        heapq.heappush(heap, (load + weights[i], p))
    return [tuple(pieces[i] for i in sorted(m)) for m in members if m]


__all__ = [
    "MAX_PARTITION_BYTES",
    "OPEN_COST_BYTES",
    "PARTITIONS_PER_CORE",
    "FileSlice",
    "default_cores",
    "pack_files",
    "slices",
    "split_bytes",
]
