"""The CDC pipeline end to end on real parts, killed and restarted while it runs (issue #17).

PostgreSQL (its own server, ``wal_level=logical``) -> Debezium's PostgreSQL connector in a real Kafka Connect worker
-> a real Kafka broker -> Spark Structured Streaming -> ``ducklake_sink(upsert_on=..., delete_when=..., order_by=...)``,
as ``examples/cdc_postgres_to_lake/cdc_to_lake.py`` runs it. A random workload (inserts, updates, some of one key
twice in a transaction, deletes, primary-key changes, hostile strings, NULLs) runs on two tables while the pipeline's
driver is SIGKILLed with its JVM and Python workers at a random moment after one of its batches committed
(mid-batch, or between a commit and Spark's checkpoint), and started again from its checkpoint; batches of up to 60
changes are inlined by the driver, larger ones written by the executors. One kill per run (the seed is printed): each
kill costs a driver start-up and a batch, and a second kill repeated the same random kind of moment; the sink's fixed
crash points are killed one by one in ``test_crash_recovery.py``.
Afterwards each lake table equals its PostgreSQL table row for row, DuckDB reads the same, and the lake's change
feed holds update pre/post pairs of one key and one row id, replaying into the table.
"""

from __future__ import annotations

import os
import random
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

import pyspark_ducklake as pdl
from tests.support.catalogs import CatalogLocation
from tests.support.debezium import ConnectWorker
from tests.support.jvm import existing_archive_options, spark_submit_env
from tests.support.pg_instance import PgInstance
from tests.support.processes import Spawned, load_module

pytestmark = [pytest.mark.kafka, pytest.mark.slow, pytest.mark.timeout(900), pytest.mark.xdist_group("debezium")]

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "cdc_postgres_to_lake" / "cdc_to_lake.py"
KILLS = 1  # the moment is random per run; more kills repeat the same kind of moment
WAIT = 300  # seconds any one step may take on a busy 2-core machine
ENV_DROP = ("CDC_POSTGRES_URL", "KAFKA_BOOTSTRAP", "CONNECT_URL", "DUCKLAKE_CATALOG", "DUCKLAKE_DATA_PATH")


def batches(catalog: CatalogLocation) -> int:
    """Snapshots the sink has committed so far (0 before the catalog exists)."""
    try:
        lake = pdl.connect(catalog.url)
    except Exception:  # not created yet
        return 0
    try:
        return sum(1 for s in lake.snapshots() if s.commit_extra_info)
    finally:
        lake.close()


def catch_up(example: Any, pipeline: Spawned, server_url: str, names: Any, catalog: CatalogLocation) -> None:
    """Wait until every lake table equals its PostgreSQL table."""
    deadline = time.monotonic() + WAIT
    while diff := example.differences(server_url, names, catalog.url, catalog.data_path):
        assert pipeline.proc.poll() is None, f"the pipeline exited:\n{pipeline.output()[-4000:]}"
        assert time.monotonic() < deadline, f"the lake never equalled PostgreSQL: {diff}"
        time.sleep(1)


def test_kill_and_restart_under_a_random_workload(
    cdc_pg: PgInstance,
    connect_worker: ConnectWorker,
    kafka_broker: str,
    kafka_spark_jars: str,
    sqlite_catalog: CatalogLocation,
    tmp_path: Path,
) -> None:
    example = load_module(EXAMPLE)
    seed = random.SystemRandom().randrange(1 << 31)
    print(f"cdc workload seed {seed}", flush=True)
    server = cdc_pg.start()
    server_url = server.url()
    names = example.Names(f"t{uuid.uuid4().hex[:8]}")
    example.create_database(server_url, names)
    example.add_connector(connect_worker.url, server_url, names)
    argv = [
        sys.executable, str(EXAMPLE), "pipeline", "--tag", names.tag, "--postgres", server_url,
        "--bootstrap", kafka_broker, "--catalog", sqlite_catalog.url, "--data-path", sqlite_catalog.data_path,
        "--checkpoint", str(tmp_path / "checkpoint"), "--spark-jars", kafka_spark_jars,
        "--trigger-seconds", "0.5", "--max-per-batch", "400", "--inline-limit", "60",
    ]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if k not in ENV_DROP} | {"PYTHONUNBUFFERED": "1"}
    env |= spark_submit_env(existing_archive_options())  # a faster start-up of the pipeline's driver JVM
    rng = random.Random(seed)
    stop = threading.Event()
    try:
        counts: dict[str, Any] = {}
        workload = threading.Thread(
            target=lambda: counts.update(example.workload(server_url, names, 1000, 50, seed, stop)), daemon=True
        )
        workload.start()
        time.sleep(3)  # a backlog above the inlining limit for the first batch
        for run in range(KILLS):
            pipeline = Spawned(argv, tmp_path / f"run-{run}.log", cwd=ROOT, env=env)
            before, deadline = batches(sqlite_catalog), time.monotonic() + WAIT
            while batches(sqlite_catalog) <= before:  # at least one batch of this run committed
                assert pipeline.proc.poll() is None, f"the pipeline exited:\n{pipeline.output()[-4000:]}"
                assert time.monotonic() < deadline, f"no batch in {WAIT} s:\n{pipeline.output()[-4000:]}"
                time.sleep(0.5)
            time.sleep(rng.uniform(0, 2))  # anywhere: mid-batch, between a commit and Spark's checkpoint
            pipeline.kill()
        workload.join(WAIT)
        assert not workload.is_alive() and counts, "the workload did not finish"
        assert counts.get("update") and counts.get("delete") and counts.get("key"), counts

        final = Spawned(argv, tmp_path / "final.log", cwd=ROOT, env=env)
        try:
            catch_up(example, final, server_url, names, sqlite_catalog)
            # A few more changes into the running pipeline: batches under the inlining limit, which the driver
            # inlines (the backlog after each restart was above it: written by the executors).
            before = batches(sqlite_catalog)
            example.workload(server_url, names, 12, 0, seed + 1)
            catch_up(example, final, server_url, names, sqlite_catalog)
            assert batches(sqlite_catalog) > before
        finally:
            final.kill()
        # Still equal once it stopped (nothing committed after the check undoes it), read by DuckDB too.
        assert example.differences(server_url, names, sqlite_catalog.url, sqlite_catalog.data_path) == []
        assert example.duckdb_differences(sqlite_catalog.url, sqlite_catalog.data_path) == []
        feed, problems = example.feed_problems(sqlite_catalog.url, sqlite_catalog.data_path)
        assert problems == []
        for table, kinds in feed.items():
            assert kinds.get("update_preimage") == kinds.get("update_postimage"), (table, kinds)
            assert kinds.get("update_preimage") and kinds.get("delete"), (table, kinds)
        lake = pdl.connect(sqlite_catalog.url)
        try:
            infos = [s.commit_extra_info for s in lake.snapshots() if s.commit_extra_info]
        finally:
            lake.close()
        assert len(infos) == len(set(infos))  # no micro-batch committed twice
        modes = "".join(p.read_text() for p in tmp_path.glob("*.log"))
        assert "changes inlined" in modes and "changes parquet" in modes, modes[-3000:]  # both paths ran
    finally:
        stop.set()
        example.remove(connect_worker.url, server_url, names)  # the example's clean-up: connector, slot, database
