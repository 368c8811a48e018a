"""Fault injection for tests: crash points, and another writer landed between a change's planning and its commit.

``PYSPARK_DUCKLAKE_CRASH_AT=<point>[:<batch_id>]`` kills the process group; nothing happens unless it is set. The
tests use it to SIGKILL a streaming driver (with its JVM and Python workers, as a machine failure would) at the moments
where a crash is hardest to recover from. :func:`before_next_commit` forces an interleaving of two writers.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager

ENV = "PYSPARK_DUCKLAKE_CRASH_AT"
# the process group a crash point kills (default: the caller's own); a driver whose Python workers run in groups of
# their own (writeStream's commit runs in one) sets its group here, as a machine failure takes them all
GROUP_ENV = "PYSPARK_DUCKLAKE_CRASH_GROUP"
AFTER_FILES_WRITTEN = "after_files_written"  # Parquet files written, catalog not committed
AFTER_CATALOG_COMMIT = "after_catalog_commit"  # snapshot committed, Spark's commit log not yet written
DURING_FLUSH = "during_flush"  # flush files written inside the open catalog transaction
EXPIRE_BATCH = "expire_batch"  # an expiry committed its n-th batch (:<n>), more batches to go


def crash_point(point: str, batch_id: int | None = None) -> None:
    wanted = os.environ.get(ENV)
    if not wanted:
        return
    name, _, batch = wanted.partition(":")
    if name != point or (batch and batch_id is not None and int(batch) != batch_id):
        return
    os.killpg(int(os.environ.get(GROUP_ENV) or os.getpgid(0)), signal.SIGKILL)


def expire_batch_committed(batch: int) -> None:
    """Called by snapshot expiry after each committed batch that more will follow (``expire_batch:<n>``)."""
    crash_point(EXPIRE_BATCH, batch)


# Actions to run once, just before the next commit in this process starts (after the change was planned).
_before_commit: list[Callable[[], None]] = []


@contextmanager
def before_next_commit(action: Callable[[], None]) -> Iterator[None]:
    """Run ``action`` once, between the planning of the next commit in this process and its first attempt.

    Tests use it to land another writer's commit exactly there (the action may commit through the same library:
    it is taken off the list before it runs).
    """
    _before_commit.append(action)
    try:
        yield
    finally:
        if action in _before_commit:
            _before_commit.remove(action)


def commit_starting() -> None:
    """Called by the commit protocol before its first attempt; runs the pending :func:`before_next_commit` action."""
    while _before_commit:
        _before_commit.pop(0)()
