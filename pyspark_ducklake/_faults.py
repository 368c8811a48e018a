"""Crash points for recovery tests: ``PYSPARK_DUCKLAKE_CRASH_AT=<point>[:<batch_id>]`` kills the process group.

Nothing happens unless that variable is set. The tests use it to SIGKILL a streaming driver (with its JVM and
Python workers, as a machine failure would) at the moments where a crash is hardest to recover from.
"""

from __future__ import annotations

import os
import signal

ENV = "PYSPARK_DUCKLAKE_CRASH_AT"
AFTER_FILES_WRITTEN = "after_files_written"  # Parquet files written, catalog not committed
AFTER_CATALOG_COMMIT = "after_catalog_commit"  # snapshot committed, Spark's commit log not yet written
DURING_FLUSH = "during_flush"  # flush files written inside the open catalog transaction


def crash_point(point: str, batch_id: int | None = None) -> None:
    wanted = os.environ.get(ENV)
    if not wanted:
        return
    name, _, batch = wanted.partition(":")
    if name != point or (batch and batch_id is not None and int(batch) != batch_id):
        return
    os.killpg(os.getpgid(0), signal.SIGKILL)
