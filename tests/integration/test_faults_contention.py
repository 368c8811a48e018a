"""Contention: many writers on one table while maintenance runs, for a while.

``test_writers_deleters_and_maintenance_processes``, on SQLite and PostgreSQL catalogs: real processes
(:mod:`tests.support.load`) for ``DUCKLAKE_LOAD_SECONDS`` (default 25; ``make soak`` runs 12 writers for 10 minutes):
three writers appending inlined and Parquet batches, deleting and overwriting ranges of their own rows, one DuckDB
writer doing the same through SQL, our maintenance and DuckDB's (flush, merge, expire, clean-up) and a reader
checking the invariants while it runs. No append, delete or overwrite of ours may fail, and at the end the table
holds exactly the union of every writer's rows, read by us and by DuckDB. The seed is fixed (``DUCKLAKE_LOAD_SEED``).
Both catalogs: SQLite's file lock and PostgreSQL's row locks and serialization are what is under test.

``test_four_writers_and_compaction``, with Spark: two streams and two batch appenders write one table while
maintenance compacts it.

On a PostgreSQL catalog (its row locks are the contention under test; the processes above cover SQLite's), for
``DUCKLAKE_CONTENTION_SECONDS`` (default 20: about a dozen micro-batches per stream and a few merges and flushes
among them; the issue's "several minutes" is ``DUCKLAKE_CONTENTION_SECONDS=300``):

- two Spark streams (file sources fed by the test, ``ducklake_sink``, mixed inlined and Parquet micro-batches, the
  sink's own flushes);
- two threads appending with ``lake.append`` (inlined and Parquet appends);
- one thread alternating ``lake.merge_adjacent_files`` (compaction) and ``lake.flush_inlined_data``.

Every commit either lands or fails with a typed ``DuckLakeError``; at the end the table holds every row of every
landed commit exactly once and nothing of a failed one (DuckDB agrees), each stream's micro-batches are one snapshot
each, and after orphan clean-up every file under the data path is referenced. Commit counts, commits per second and
retries (from the sink's metrics and the commit protocol's retry log) are recorded.
"""

from __future__ import annotations

import logging
import os
import random
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql import SparkSession

import pyspark_ducklake as pdl
from pyspark_ducklake import ducklake_sink
from pyspark_ducklake.exceptions import CommitStateUnknownError, DuckLakeError
from tests.support.faults import (
    FAULTS_WORKER,
    SOURCE_SCHEMA,
    assert_exact,
    assert_no_orphans_after_cleanup,
    batch_ids_by_app,
    record_figures,
    write_source_file,
)

SECONDS = float(os.environ.get("DUCKLAKE_CONTENTION_SECONDS", "20"))
LOAD_SECONDS = float(os.environ.get("DUCKLAKE_LOAD_SECONDS", "25"))
LOAD_SEED = int(os.environ.get("DUCKLAKE_LOAD_SEED", "20261"))
STREAM_ROWS = [20, 60, 400, 1200]  # inlined (<= 100) and Parquet micro-batches
APPEND_ROWS = [3, 8, 300, 2000]  # inlined (<= 10, the lake's default limit) and Parquet appends
STREAMS = ("a", "b")
APPENDERS = 2
SCHEMA = pa.schema([("id", pa.int64()), ("kind", pa.string()), ("amount", pa.float64())])

pytestmark = [pytest.mark.timeout(SECONDS + 300), FAULTS_WORKER]


@pytest.mark.timeout(LOAD_SECONDS + 400)
def test_writers_deleters_and_maintenance_processes(catalog: Any, tmp_path: Path) -> None:
    from tests.support.load import LoadSpec, problems, run_load

    spec = LoadSpec(
        catalog.url,
        catalog.duckdb,
        catalog.data_path,
        str(tmp_path / "work"),
        seconds=LOAD_SECONDS,
        seed=LOAD_SEED,
        writers=3,
        duckdb_writers=1,
        maintainers=("ours", "duckdb"),
        readers=1,
    )
    figures = run_load(spec)
    print({k: v for k, v in figures.items() if k != "by_op"}, flush=True)
    assert problems(figures) == []
    assert figures["by_op"]["delete"]["ok"] and figures["by_op"]["append_inlined"]["ok"]  # the mix really ran
    assert figures["reader_checks"].get("time_travel") and figures["reader_checks"].get("duckdb_compared")
    maintained = figures["maintainer_ours"]["done"]
    assert maintained.get("flush") and maintained.get("merge")
    record_figures(f"load_{catalog.backend}", {**figures, "backend": catalog.backend})


class RetryLog(logging.Handler):
    """Counts the commit protocol's retries per thread (it logs each one at DEBUG)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.by_thread: Counter[str] = Counter()

    def emit(self, record: logging.LogRecord) -> None:
        if record.getMessage().startswith("commit attempt"):
            self.by_thread[record.threadName] += 1


def rows(first_id: int, n: int) -> pa.Table:
    ids = list(range(first_id, first_id + n))
    return pa.table({"id": ids, "kind": [f"k{i % 3}" for i in ids], "amount": [i * 0.5 for i in ids]}, schema=SCHEMA)


def test_four_writers_and_compaction(spark: SparkSession, pg_catalog: Any, tmp_path: Path) -> None:
    seed = random.SystemRandom().randrange(1 << 31)
    print(f"contention seed {seed}, {SECONDS:g} s", flush=True)
    lake = pdl.connect(pg_catalog.url, pg_catalog.data_path)
    lake.create_table("main.shared", SCHEMA)
    start_snapshot = lake.current_snapshot_id()
    retries = RetryLog()
    tx_log = logging.getLogger("pyspark_ducklake.catalog.transaction")
    old_level = tx_log.level
    tx_log.setLevel(logging.DEBUG)
    tx_log.addHandler(retries)

    stop = threading.Event()
    expected: list[int] = []  # ids of every landed commit
    lock = threading.Lock()
    failures: list[BaseException] = []  # typed failures of commits (allowed)
    crashes: list[BaseException] = []  # anything else (fails the test)
    counts: Counter[str] = Counter()

    # --- two streams, fed one file each about every 1.5 s
    sinks = {
        name: ducklake_sink(
            "main.shared",
            catalog=pg_catalog.url,
            app_id=f"stream-{name}",
            data_inlining_row_limit=100,
            flush_rows=300,
            max_retry_count=100,
            retry_wait_ms=20,
        )
        for name in STREAMS
    }
    for name in STREAMS:
        (tmp_path / name).mkdir()
    queries = {
        name: spark.readStream.schema(SOURCE_SCHEMA)
        .option("maxFilesPerTrigger", 1)
        .json(str(tmp_path / name))
        .writeStream.foreachBatch(sinks[name])
        .option("checkpointLocation", str(tmp_path / f"cp-{name}"))
        .queryName(f"contention_{name}")
        .start()
        for name in STREAMS
    }
    stream_files: Counter[str] = Counter()

    def feeder() -> None:
        rng = random.Random(seed)
        try:
            while time.monotonic() < deadline and not stop.is_set():
                for s, name in enumerate(STREAMS):
                    index = (s + 1) * 10_000 + stream_files[name]
                    ids = write_source_file(tmp_path / name, index, rng.choice(STREAM_ROWS))
                    stream_files[name] += 1
                    with lock:
                        expected.extend(ids)
                time.sleep(1.5)  # about what a stream commits per second here, so that the streams keep up
        except BaseException as e:
            crashes.append(e)

    def appender(k: int) -> None:
        rng = random.Random(seed + k + 1)
        other = pdl.connect(pg_catalog.url)
        n = 0
        try:
            while time.monotonic() < deadline and not stop.is_set():
                batch = rows((k + 1) * 10**11 + n * 10**5, rng.choice(APPEND_ROWS))
                n += 1
                try:
                    other.append("main.shared", batch)
                except CommitStateUnknownError as e:  # may have landed: settled at the end
                    failures.append(e)
                    counts["unknown"] += 1
                    continue
                except DuckLakeError as e:
                    failures.append(e)
                    counts["append_failed"] += 1
                    continue
                counts["appends"] += 1
                with lock:
                    expected.extend(batch.column("id").to_pylist())
                time.sleep(0.05)
        except BaseException as e:
            crashes.append(e)
        finally:
            other.close()

    def maintenance() -> None:
        other = pdl.connect(pg_catalog.url)
        try:
            while time.monotonic() < deadline and not stop.is_set():
                for name, op in (
                    ("merges", lambda: other.merge_adjacent_files("main.shared").snapshot_id),
                    ("flushes", lambda: other.flush_inlined_data("main.shared")),
                ):
                    try:
                        if op() is not None:
                            counts[name] += 1
                    except DuckLakeError as e:
                        failures.append(e)
                        counts[f"{name}_failed"] += 1
                time.sleep(1.0)
        except BaseException as e:
            crashes.append(e)
        finally:
            other.close()

    threads = [threading.Thread(target=feeder, name="feeder"), threading.Thread(target=maintenance, name="maint")]
    threads += [threading.Thread(target=appender, args=(k,), name=f"appender-{k}") for k in range(APPENDERS)]
    began = time.monotonic()
    deadline = began + SECONDS  # the writers' time starts now, not before the streams' start-up
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=SECONDS + 120)
        for query in queries.values():
            query.processAllAvailable()  # the streams catch up with every file fed
        elapsed = time.monotonic() - began
    finally:
        stop.set()
        for query in queries.values():
            query.stop()
        tx_log.removeHandler(retries)
        tx_log.setLevel(old_level)
    assert not crashes, crashes
    for query in queries.values():
        assert query.exception() is None, query.exception()
    assert all(isinstance(f, DuckLakeError) for f in failures)
    assert counts["unknown"] == 0, "a COMMIT of unknown outcome (the catalog stayed up: it should not happen)"

    # contention happened: every kind of writer landed commits (a run whose writers never wrote proves nothing)
    assert counts["appends"] > 0 and sum(stream_files.values()) > 0 and counts["merges"] + counts["flushes"] > 0, counts
    assert_exact(lake, pg_catalog, "main.shared", expected)
    by_app = batch_ids_by_app(lake)
    for name in STREAMS:  # every fed file is one micro-batch, committed once
        assert by_app[f"stream-{name}"] == list(range(stream_files[name]))
    commits = lake.current_snapshot_id() - start_snapshot
    stream_retries = sum(m.attempts - 1 for s in sinks.values() for m in s.metrics if m.attempts)
    orphans = assert_no_orphans_after_cleanup(lake)
    lake.close()
    figures = {
        "seed": seed,
        "seconds": round(elapsed, 1),
        "writers": len(STREAMS) + APPENDERS,
        "maintenance": "merge_adjacent_files + flush_inlined_data",
        "commits": commits,
        "commits_per_second": round(commits / elapsed, 1),
        "stream_batches": sum(stream_files.values()),
        "appends": counts["appends"],
        "merges": counts["merges"],
        "flushes": counts["flushes"],
        "typed_failures": len(failures),
        "failures_by_type": dict(Counter(type(f).__name__ for f in failures)),
        "retries_total": sum(retries.by_thread.values()),  # every commit retry logged in this process
        "retries_streams": stream_retries,  # from the sinks' metrics
        "retries_appenders": sum(v for k, v in retries.by_thread.items() if k.startswith("appender")),
        "retries_maintenance": retries.by_thread["maint"],
        "rows": len(expected),
        "rows_lost": 0,
        "rows_duplicated": 0,
        "orphans_deleted": orphans,
    }
    print(figures, flush=True)
    record_figures("contention", figures)
