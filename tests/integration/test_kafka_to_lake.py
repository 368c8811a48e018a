"""The whole product as a user runs it: events from a real Kafka broker through Spark into DuckLake, exactly once.

``examples/kafka_to_lake.py`` runs as separate processes: the producer (confluent-kafka) and the Spark pipeline
(``readStream.format("kafka")`` into ``foreachBatch(ducklake_sink(...))``), the latter with its own JVM, which these
tests SIGKILL together with its Python workers mid-stream, as a machine failure would, while more events arrive.
Restarted from the same checkpoint, the pipeline must leave every produced event in the lake exactly once, by event
id and by Kafka partition/offset, with each micro-batch committed as exactly one snapshot; DuckDB reads the same.
The catalog is PostgreSQL: the kill after a catalog commit is where its transactions decide whether a replayed batch
was committed (``test_crash_recovery.py`` kills the file-source driver at every crash point on SQLite). The restarted
pipeline runs while events arrive, so it also is the pipeline on PostgreSQL that a test of its own used to start
(Spark's start-up is the cost of these tests).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

import pyspark_ducklake as pdl
from pyspark_ducklake._faults import AFTER_CATALOG_COMMIT, ENV
from tests.support.catalogs import CatalogLocation
from tests.support.duck import open_duckdb
from tests.support.jvm import existing_archive_options, spark_submit_env
from tests.support.kafka import KAFKA_SCRIPT, KafkaBroker, create_topic, run_script, topic_offsets
from tests.support.processes import Spawned, load_module

pytestmark = [pytest.mark.kafka, pytest.mark.slow, pytest.mark.timeout(600)]

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "kafka_to_lake.py"
WAIT = 300  # seconds any one process may take on a busy 2-core machine


def load_example() -> Any:
    return load_module(EXAMPLE)


def clean_env(crash: str | None = None) -> dict[str, str]:
    """The environment without anything that would point the example elsewhere (flags say it all)."""
    drop = {ENV, "KAFKA_BOOTSTRAP", "KAFKA_TOPIC", "DUCKLAKE_CATALOG", "DUCKLAKE_DATA_PATH"}
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env["PYTHONUNBUFFERED"] = "1"
    env |= spark_submit_env(existing_archive_options())  # a faster start-up of the pipeline's driver JVM
    if crash:
        env[ENV] = crash
    return env


class Pipeline(Spawned):
    """``kafka_to_lake.py --pipeline`` in its own session (process group), its output in a file."""

    def __init__(self, args: list[str], log: Path, crash: str | None = None) -> None:
        super().__init__([sys.executable, str(EXAMPLE), "--pipeline", *args], log, cwd=ROOT, env=clean_env(crash))

    def wait(self, timeout: float = WAIT) -> int:
        return super().wait(timeout)


def producer(bootstrap: str, topic: str, count: int, first_id: int, rate: float = 0) -> subprocess.Popen[str]:
    flags = {"--bootstrap": bootstrap, "--topic": topic, "--produce": count, "--first-id": first_id, "--rate": rate}
    return subprocess.Popen(
        [sys.executable, str(EXAMPLE), *(str(x) for item in flags.items() for x in item)],
        cwd=ROOT,
        env=clean_env(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def finish(proc: subprocess.Popen[str]) -> None:
    out, _ = proc.communicate(timeout=WAIT)
    assert proc.returncode == 0, out[-4000:]


def batch_snapshots(catalog: CatalogLocation) -> list[int]:
    """Batch ids of the sink's snapshots so far ([] before the catalog exists)."""
    try:
        lake = pdl.connect(catalog.url)
    except Exception:  # not created yet
        return []
    try:
        return [json.loads(s.commit_extra_info)["batch_id"] for s in lake.snapshots() if s.commit_extra_info]
    finally:
        lake.close()


def wait_for_batches(catalog: CatalogLocation, n: int, pipeline: Pipeline) -> None:
    deadline = time.monotonic() + WAIT
    while len(batch_snapshots(catalog)) < n:
        assert pipeline.proc.poll() is None, f"the pipeline exited early:\n{pipeline.output()[-4000:]}"
        assert time.monotonic() < deadline, f"no {n} batches in {WAIT} s:\n{pipeline.output()[-4000:]}"
        time.sleep(1)


def pipeline_args(tmp: Path, bootstrap: str, topic: str, catalog: CatalogLocation, jars: str) -> list[str]:
    return [
        "--bootstrap", bootstrap, "--topic", topic, "--catalog", catalog.url, "--data-path", catalog.data_path,
        "--checkpoint", str(tmp / "checkpoint"), "--spark-jars", jars, "--trigger-seconds", "0.5",
    ]  # fmt: skip


def check_exactly_once(catalog: CatalogLocation, bootstrap: str, topic: str, total: int) -> None:
    """The lake holds events 0..total-1 once each, with their content, at every offset of the topic once."""
    example = load_example()
    lake = pdl.connect(catalog.url)
    table = lake.scan("main.events").sort_by("id")
    ids = table.column("id").to_pylist()
    assert len(ids) == total and ids == list(range(total))  # nothing lost, nothing twice
    expected = [example.event(i) for i in range(total)]
    assert table.column("kind").to_pylist() == [e["kind"] for e in expected]
    assert table.column("amount").to_pylist() == [e["amount"] for e in expected]
    assert table.column("ts").null_count == 0
    partitions, offsets = table.column("kafka_partition").to_pylist(), table.column("kafka_offset").to_pylist()
    positions = set(zip(partitions, offsets, strict=True))
    topic_positions = {(p, o) for p, (low, high) in topic_offsets(bootstrap, topic).items() for o in range(low, high)}
    assert positions == topic_positions and len(positions) == total
    batches = batch_snapshots(catalog)
    assert batches == list(range(len(batches)))  # one snapshot per micro-batch, each exactly once
    con = open_duckdb(catalog)
    try:
        got = con.execute(
            "SELECT count(*), count(DISTINCT id), min(id), max(id), "
            "count(DISTINCT (kafka_partition, kafka_offset)) FROM lake.main.events"
        ).fetchone()
    finally:
        con.close()
    assert got == (total, total, 0, total - 1, total)


def test_sigkill_mid_stream_and_restart(
    tmp_path: Path, kafka_broker: str, kafka_spark_jars: str, pg_catalog: CatalogLocation
) -> None:
    """100,000 events; the driver dies right after committing batch 3, while 40,000 more are still arriving."""
    topic = f"events-{uuid.uuid4().hex[:8]}"
    create_topic(kafka_broker, topic, partitions=3)
    finish(producer(kafka_broker, topic, 60_000, first_id=0))
    args = pipeline_args(tmp_path, kafka_broker, topic, pg_catalog, kafka_spark_jars)

    # Batches of 15,000: batch 3 holds the last of the first 60,000 events; the crash comes after its catalog
    # commit and before Spark records it, the worst moment: the restart re-runs batch 3 and must not add it again.
    first = Pipeline([*args, "--max-per-batch", "15000"], tmp_path / "first.log", crash=f"{AFTER_CATALOG_COMMIT}:3")
    wait_for_batches(pg_catalog, 1, first)
    more = producer(kafka_broker, topic, 40_000, first_id=60_000, rate=5_000)  # arrives during the crash and restart
    assert first.wait() == -signal.SIGKILL, first.output()[-4000:]
    assert batch_snapshots(pg_catalog) == [0, 1, 2, 3]

    second = Pipeline([*args, "--until-count", "100000"], tmp_path / "second.log")
    finish(more)
    assert second.wait() == 0, second.output()[-4000:]
    out = second.output()
    assert "batch   3: already committed before a restart" in out, out[-4000:]
    assert "exactly once: yes" in out and "DuckDB reads:" in out, out[-4000:]
    check_exactly_once(pg_catalog, kafka_broker, topic, 100_000)


def test_broker_script_is_idempotent(tmp_path: Path, kafka_server: KafkaBroker) -> None:
    """``scripts/kafka.sh`` on the session's broker: start again is a no-op, status and bootstrap agree."""
    state = kafka_server.state_dir
    assert run_script("start", state_dir=state).strip() == kafka_server.bootstrap
    assert run_script("bootstrap", state_dir=state).strip() == kafka_server.bootstrap
    assert kafka_server.bootstrap in run_script("status", state_dir=state)
    assert (state / "broker.pid").read_text().strip() == str(kafka_server.pid)
    idle = subprocess.run(
        ["bash", str(KAFKA_SCRIPT), "status"],
        env={**os.environ, "KAFKA_STATE_DIR": str(tmp_path / "none")},
        capture_output=True,
        text=True,
        check=False,
    )
    assert idle.returncode == 3 and "not running" in idle.stdout
    jars = [Path(j).name for j in run_script("spark-jars").strip().split(",")]
    assert any(j.startswith("spark-sql-kafka-0-10_2.13-") for j in jars)
    assert any(j.startswith("kafka-clients-") for j in jars)
    assert not any(j.startswith(("scala-library-", "slf4j-api-", "hadoop-client-")) for j in jars)  # pyspark has them
