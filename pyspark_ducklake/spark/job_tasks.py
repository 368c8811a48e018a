"""Waiting, on the driver, until the tasks of a failed Spark job have stopped.

When one task fails, Spark fails the job at once and only then kills the job's other running tasks; a task can
still finish (and write its file) after the action has raised. Code that cleans up after a failed job therefore
waits for those tasks first: the jobs run under a job tag, and the status tracker tells when their stages have no
active task left.
"""

from __future__ import annotations

import contextlib
import logging
import time
import uuid
from collections.abc import Iterator
from typing import Any

from pyspark_ducklake.spark.connect import is_connect

log = logging.getLogger("pyspark_ducklake.cleanup")

TASKS_STOP_TIMEOUT_S = 120.0

# Spark kills the Python worker of a cancelled task within about 4 s (a 2 s check, then
# spark.python.task.killTimeout, 2 s by default); an abort that cannot see the tasks looks again for this long.
LATE_TASK_GRACE_S = 6.0


@contextlib.contextmanager
def tasks_stopped_on_failure(spark: Any, *, timeout_s: float = TASKS_STOP_TIMEOUT_S) -> Iterator[None]:
    """Run the block's Spark jobs under a job tag of their own; when the block raises, wait (up to ``timeout_s``)
    until no task of those jobs is running any more, then let the error through."""
    # Spark Connect has no SparkContext (nor status tracker) to ask: the block runs unguarded, so files a late task
    # of a failed job writes stay as orphans (delete_orphan_files removes them)
    sc = None if is_connect(spark) else spark.sparkContext
    if sc is None or not hasattr(sc, "addJobTag"):
        yield
        return
    tag = f"ducklake-write-{uuid.uuid4().hex}"
    sc.addJobTag(tag)
    try:
        yield
    except BaseException:
        try:
            stopped = wait_for_tasks(sc, tag, timeout_s)
        except Exception as e:  # the JVM gone or unreachable: nothing runs that could be waited for
            log.warning("cannot tell whether the tasks of a failed ducklake write stopped: %s", e)
        else:
            if not stopped:
                log.warning("tasks of a failed ducklake write still running after %.0f s", timeout_s)
        raise
    finally:
        sc.removeJobTag(tag)


def wait_for_tasks(sc: Any, tag: str, timeout_s: float) -> bool:
    """Whether every job tagged ``tag`` has ended and its stages have no running task, within ``timeout_s``."""
    tracker = sc.statusTracker()
    jvm = sc._jsc.sc()
    deadline = time.monotonic() + timeout_s
    # The status store is fed by the listener bus: let it take in every event posted so far (the job's start, its
    # tasks' starts, its end), so that every task that ever started is counted in its stage until it stops.
    jvm.listenerBus().waitUntilEmpty(int(timeout_s * 1000))
    while True:
        busy = False
        for job_id in jvm.statusTracker().getJobIdsForTag(tag):
            info = tracker.getJobInfo(job_id)
            if info is None:  # no longer retained by the status store: long over
                continue
            if info.status in ("RUNNING", "UNKNOWN"):
                busy = True
                break
            for stage_id in info.stageIds:
                stage = tracker.getStageInfo(stage_id)
                if stage is not None and stage.numActiveTasks > 0:
                    busy = True
        if not busy:
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)


__all__ = ["tasks_stopped_on_failure", "wait_for_tasks"]
