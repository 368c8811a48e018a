"""On a real Spark standalone cluster from pyspark's own jars on 127.0.0.1: a master and a worker whose executors
run in JVMs and Python workers of their own. Two applications share it: a classic driver in a process of its own
(``tests/support/cluster_app.py``: batch writes and reads, and the fast paths, which must take Spark's own Parquet
writer and reader) and a Spark Connect server whose client is this process (the sink, ``writeStream`` and the change
feed). Exact against DuckDB; the catalogs are reached from the executors (the test PostgreSQL over TCP, a SQLite
file path) and the data files through the shared disk."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from tests.support import session_scenarios as scenarios
from tests.support.catalogs import REPO_ROOT
from tests.support.spark_daemons import (
    CONNECT_MODE_ENV,
    StandaloneCluster,
    connect_mode,
    start_connect_server,
    start_standalone_cluster,
)

pytestmark = [pytest.mark.xdist_group("cluster"), pytest.mark.timeout(900)]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneCluster]:
    try:
        # two applications of 2 cores each (the classic driver's and the Connect server's)
        running = start_standalone_cluster(tmp_path_factory.mktemp("standalone"), cores=4, memory="2g")
    except Exception as e:
        pytest.fail(f"could not start the standalone cluster: {e}", pytrace=False)
    yield running
    running.stop()
    assert not running.worker.running() and not running.master.running()


@pytest.fixture(scope="module")
def cluster_session(cluster: StandaloneCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkSession]:
    """A Connect client of a driver (the Connect server) whose executors run on the cluster's worker."""
    state = tmp_path_factory.mktemp("cluster-driver")
    conf = {"spark.executor.memory": "512m", "spark.cores.max": "2", "spark.executor.cores": "2"}
    try:
        server = start_connect_server(state, master=cluster.url, conf=conf)
    except Exception as e:
        pytest.fail(f"could not start the Connect server on the cluster: {e}", pytrace=False)
    try:
        with connect_mode():
            session = SparkSession.builder.remote(server.url).create()
        yield session
        with connect_mode():
            session.stop()
    finally:
        server.daemon.stop()


@pytest.fixture
def cluster_spark(cluster_session: SparkSession) -> Iterator[SparkSession]:
    """The Connect client, with Spark Connect mode on for the test only (``tests.support.spark_daemons``)."""
    with connect_mode():
        yield cluster_session


def test_executors_run_on_the_worker(cluster_spark: SparkSession, cluster: StandaloneCluster) -> None:
    rows = cluster_spark.range(0, 4, 1, 2).selectExpr("spark_partition_id() AS p").collect()
    assert sorted(r["p"] for r in rows) == [0, 0, 1, 1]
    executors = list((cluster.worker.state_dir / "work").glob("app-*/*/stderr"))
    assert executors, "no executor of the application ran on the worker"


def test_classic_driver_batch_and_fast_paths(cluster: StandaloneCluster, pg_catalog: Any, tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "tests.support.cluster_app", cluster.url, json.dumps(asdict(pg_catalog)), str(tmp_path)],
        cwd=REPO_ROOT, env={**{k: v for k, v in os.environ.items() if k != CONNECT_MODE_ENV}, "PYTHONPATH": str(REPO_ROOT)}, stdin=subprocess.DEVNULL,
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-6000:]
    apps = {p.parent.parent.name for p in (cluster.worker.state_dir / "work").glob("app-*/*/stderr")}
    assert len(apps) >= 1  # its executors ran on the worker


def test_sink_and_write_stream(cluster_spark: SparkSession, sqlite_catalog: Any, tmp_path: Path) -> None:
    scenarios.sink_streams(cluster_spark, sqlite_catalog, tmp_path)


def test_change_feed_batch_and_stream(cluster_spark: SparkSession, sqlite_catalog: Any, tmp_path: Path) -> None:
    scenarios.change_feed(cluster_spark, sqlite_catalog, tmp_path)
