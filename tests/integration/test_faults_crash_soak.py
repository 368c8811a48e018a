"""Crash soak: a streaming driver into a PostgreSQL catalog, SIGKILLed at random moments twice (40 in ``make soak``).

Each round starts the driver of ``tests.support.stream_app`` (a real process with its own JVM; JSON files in, one file
per micro-batch, ``ducklake_sink`` out) from the same checkpoint and kills its whole process group: either at a random
moment up to 2 s after its first or second micro-batch reached the sink, or at one of the sink's worst moments (files written but not
committed, committed but not in Spark's commit log, inside a flush). New source files arrive between rounds, as in a
live stream. After the last kill a clean run finishes the backlog; then the table must equal the source exactly (no
row lost or doubled, DuckDB agrees, one snapshot per micro-batch), and after orphan clean-up every file under the
data path must be referenced.

Seeded: the seed is printed and recorded; ``DUCKLAKE_SOAK_SEED=<n>`` replays the same choices (kill moments still
depend on timing). ``DUCKLAKE_SOAK_KILLS`` changes the number of kills (default 2, keeping the suite under 25
minutes; ``make soak`` runs 40). Two suffice in the suite: each of the sink's crash points is also killed and
recovered deterministically in ``test_crash_recovery.py`` (each on SQLite) and ``test_kafka_to_lake.py`` (after the
commit, on PostgreSQL); what the soak adds is random moments and repeated restarts of one checkpoint on PostgreSQL
while new files arrive (two kills and the clean run are three restarts of it), which a new seed varies on every run.
The drivers share a JVM class archive (``tests.support.jvm``) to halve their start-up.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

import pyspark_ducklake as pdl
from pyspark_ducklake._faults import AFTER_CATALOG_COMMIT, AFTER_FILES_WRITTEN, DURING_FLUSH, ENV
from tests.support.catalogs import REPO_ROOT
from tests.support.faults import (
    FAULTS_WORKER,
    assert_exact,
    assert_no_orphans_after_cleanup,
    batch_ids_by_app,
    record_figures,
    write_source,
    write_source_file,
)
from tests.support.jvm import driver_java_options

KILLS = int(os.environ.get("DUCKLAKE_SOAK_KILLS", "2"))
MAX_ROUNDS = KILLS + 10  # a round whose driver finished before its kill moment does not count as a kill
BACKLOG = 4  # source files waiting for the driver at the start of a round
ROW_COUNTS = [5, 40, 80, 600, 1500]  # inlined (<= 100) and Parquet micro-batches
INLINE_LIMIT, FLUSH_ROWS = 100, 150
CRASH_POINTS = [AFTER_FILES_WRITTEN, AFTER_CATALOG_COMMIT, DURING_FLUSH]

pytestmark = [pytest.mark.timeout(900), FAULTS_WORKER]  # about a minute on an idle 2-core machine (2 kills)


@dataclass
class Driver:
    """One run of the stream driver, its ``BATCH <id>`` lines watched by a thread."""

    proc: subprocess.Popen[str]
    batches: list[int] = field(default_factory=list)

    def watch(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith("BATCH "):
                self.batches.append(int(line.split()[1]))

    def wait_for_batches(self, n: int, timeout: float) -> None:
        """Until the n-th micro-batch of this run reached the sink, or the driver exited."""
        deadline = time.monotonic() + timeout
        while len(self.batches) < n and self.proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)

    def kill(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def start_driver(tmp: Path, catalog: Any, java_options: str, log: Path, crash: str | None = None) -> Driver:
    env = {k: v for k, v in os.environ.items() if k != ENV}
    env["STREAM_APP_JAVA_OPTIONS"] = java_options
    if crash:
        env[ENV] = crash
    args = [sys.executable, "-m", "tests.support.stream_app", str(tmp / "in"), str(tmp / "checkpoint")]
    args += [catalog.url, catalog.data_path, str(INLINE_LIMIT), str(FLUSH_ROWS)]
    proc = subprocess.Popen(
        args,
        cwd=REPO_ROOT,
        env=env,
        start_new_session=True,
        stdout=subprocess.PIPE,
        stderr=log.open("w"),
        text=True,
    )
    driver = Driver(proc)
    threading.Thread(target=driver.watch, daemon=True).start()
    return driver


def run_once(tmp: Path, catalog: Any, java_options: str) -> subprocess.CompletedProcess[str]:
    """A driver run to its end (AvailableNow) with ``java_options``; raises when it fails."""
    env = {k: v for k, v in os.environ.items() if k != ENV}
    env["STREAM_APP_JAVA_OPTIONS"] = java_options
    args = [sys.executable, "-m", "tests.support.stream_app", str(tmp / "in"), str(tmp / "checkpoint")]
    args += [catalog.url, catalog.data_path, str(INLINE_LIMIT), str(FLUSH_ROWS)]
    proc = subprocess.run(args, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return proc


def test_crash_soak(tmp_path: Path, pg_catalog: Any, sqlite_catalog: Any) -> None:
    seed = int(os.environ.get("DUCKLAKE_SOAK_SEED", str(random.SystemRandom().randrange(1 << 31))))
    print(f"crash soak seed {seed} (DUCKLAKE_SOAK_SEED={seed} replays it)", flush=True)
    rng = random.Random(seed)

    # The first run (a throw-away lake) also writes the JVM class archive the other drivers share.
    warmup = tmp_path / "warmup"
    write_source(warmup / "in", [5, 600])
    java_options = driver_java_options(lambda options: run_once(warmup, sqlite_catalog, options))

    expected: list[int] = []
    files = 0
    kills: dict[str, int] = {}
    rounds = 0
    killed_at_batches: list[int] = []
    started = time.monotonic()
    lake = pdl.connect(pg_catalog.url, pg_catalog.data_path)
    while sum(kills.values()) < KILLS and rounds < MAX_ROUNDS:
        rounds += 1
        committed = sum(len(b) for b in batch_ids_by_app(lake).values())
        while files - committed < BACKLOG:
            expected += write_source_file(tmp_path / "in", files, rng.choice(ROW_COUNTS))
            files += 1
        crash = rng.choice(CRASH_POINTS) if rng.random() < 0.35 else None
        # Random moment: up to 2 s into this run's first or (more often, so that rounds make progress) second batch.
        nth_batch, delay = rng.choice([1, 2, 2]), rng.uniform(0, 2.0)
        log = tmp_path / f"driver-{rounds}.log"
        round_started = time.monotonic()
        driver = start_driver(tmp_path, pg_catalog, java_options, log, crash)
        try:
            if crash is None:
                driver.wait_for_batches(nth_batch, timeout=180)
                time.sleep(delay)
                driver.kill()
            code = driver.proc.wait(timeout=180)
        finally:
            driver.kill()
        print(
            f"round {rounds}: {crash or f'{delay:.1f} s into batch #{nth_batch}'}, exit {code}, batches "
            f"{driver.batches}, {time.monotonic() - round_started:.1f} s",
            flush=True,
        )
        if code == -signal.SIGKILL:
            kind = crash or "random moment"
            kills[kind] = kills.get(kind, 0) + 1
            killed_at_batches.append(driver.batches[-1] if driver.batches else -1)
        else:
            assert code == 0, f"round {rounds}: exit code {code} (seed {seed}): {log.read_text()[-3000:]}"
    assert sum(kills.values()) == KILLS, f"only {kills} kills in {rounds} rounds (seed {seed})"

    run_once(tmp_path, pg_catalog, java_options)  # the last, clean run finishes the backlog
    elapsed = time.monotonic() - started

    assert_exact(lake, pg_catalog, "main.events", expected)
    # One snapshot per micro-batch, in order, all by the one query (its id is the sink's app id). A micro-batch may
    # hold two files: Spark's file source logs a file for a batch before the batch's offsets, and a kill in between
    # makes the restarted query take it together with the next one.
    (batches,) = batch_ids_by_app(lake).values()
    assert batches == list(range(len(batches))) and len(batches) <= files
    orphans = assert_no_orphans_after_cleanup(lake)
    assert_exact(lake, pg_catalog, "main.events", expected)
    lake.close()
    record_figures(
        "crash_soak",
        {
            "seed": seed,
            "kills": sum(kills.values()),
            "kills_by_moment": kills,
            "rounds": rounds,
            "killed_during_batches": killed_at_batches,
            "source_files": files,
            "micro_batches": len(batches),
            "rows": len(expected),
            "rows_lost": 0,
            "rows_duplicated": 0,
            "orphans_deleted": orphans,
            "seconds": round(elapsed),
        },
    )
