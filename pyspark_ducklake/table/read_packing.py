"""Packing a scan's file tasks into a few read partitions of about equal bytes, as Spark packs Parquet files.

One partition per file costs a Spark task, a Python worker round trip and a pickled plan each; Spark's own Parquet
scan instead packs files into splits of ``min(spark.sql.files.maxPartitionBytes, max(openCostInBytes,
bytes / parallelism))``. Here: two partitions per core (so a slow file does not leave a core idle at the end), more
where a partition would pass 128 MB, never more than there are files; files are not split. Each file counts its
bytes plus Spark's open cost, and the largest goes first into the lightest partition.
"""

from __future__ import annotations

import heapq
import math
import os
from collections.abc import Sequence

from pyspark_ducklake.table.scan import FileTask

PARTITIONS_PER_CORE = 2
MAX_PARTITION_BYTES = 128 * 1024 * 1024  # spark.sql.files.maxPartitionBytes' default
OPEN_COST_BYTES = 4 * 1024 * 1024  # spark.sql.files.openCostInBytes' default


def default_cores() -> int:
    """The cores of this machine available to this process (Spark plans a Python data source's partitions in a
    worker on the driver, which is told nothing of the cluster's cores)."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):  # not Linux
        return os.cpu_count() or 1


def pack_tasks(tasks: Sequence[FileTask], cores: int) -> list[tuple[FileTask, ...]]:
    """``tasks`` in partitions of about equal bytes: ``PARTITIONS_PER_CORE`` per core, more where one would pass
    ``MAX_PARTITION_BYTES``, at most one per task; within a partition the tasks keep their order."""
    if not tasks:
        return []
    weights = [max(t.file.file_size_bytes, 0) + OPEN_COST_BYTES for t in tasks]
    count = max(PARTITIONS_PER_CORE * max(cores, 1), math.ceil(sum(weights) / MAX_PARTITION_BYTES))
    count = min(count, len(tasks))
    heap = [(0, p) for p in range(count)]
    members: list[list[int]] = [[] for _ in range(count)]
    for i in sorted(range(len(tasks)), key=lambda i: (-weights[i], i)):
        load, p = heapq.heappop(heap)
        members[p].append(i)
        heapq.heappush(heap, (load + weights[i], p))
    return [tuple(tasks[i] for i in sorted(m)) for m in members if m]


__all__ = ["MAX_PARTITION_BYTES", "OPEN_COST_BYTES", "PARTITIONS_PER_CORE", "default_cores", "pack_tasks"]
