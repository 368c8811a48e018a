"""On a real Spark standalone cluster from pyspark's own jars on 127.0.0.1: a master and a worker whose executors
run in JVMs and Python workers of their own, driven through a Spark Connect server whose master is the cluster.
Batch writes and reads, the sink and the change feed, exact against DuckDB; the catalogs are reached from the
executors (a SQLite file path, the test PostgreSQL over TCP) and the data files through the shared disk."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from tests.support import session_scenarios as scenarios
from tests.support.spark_daemons import (
    StandaloneCluster,
    connect_mode,
    start_connect_server,
    start_standalone_cluster,
)

pytestmark = [pytest.mark.xdist_group("cluster"), pytest.mark.timeout(900)]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneCluster]:
    try:
        running = start_standalone_cluster(tmp_path_factory.mktemp("standalone"))
    except Exception as e:
        pytest.fail(f"could not start the standalone cluster: {e}", pytrace=False)
    yield running
    running.stop()
    assert not running.worker.running() and not running.master.running()


@pytest.fixture(scope="module")
def cluster_spark(cluster: StandaloneCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkSession]:
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
        with connect_mode():
            yield session
            session.stop()
    finally:
        server.daemon.stop()


def test_executors_run_on_the_worker(cluster_spark: SparkSession, cluster: StandaloneCluster) -> None:
    rows = cluster_spark.range(0, 4, 1, 2).selectExpr("spark_partition_id() AS p").collect()
    assert sorted(r["p"] for r in rows) == [0, 0, 1, 1]
    executors = list((cluster.worker.state_dir / "work").glob("app-*/*/stderr"))
    assert executors, "no executor of the application ran on the worker"


def test_batch_write_and_read(cluster_spark: SparkSession, pg_catalog: Any) -> None:
    scenarios.batch_write_and_read(cluster_spark, pg_catalog)


def test_sink_and_write_stream(cluster_spark: SparkSession, sqlite_catalog: Any, tmp_path: Path) -> None:
    scenarios.sink_streams(cluster_spark, sqlite_catalog, tmp_path)


def test_change_feed_batch_and_stream(cluster_spark: SparkSession, sqlite_catalog: Any, tmp_path: Path) -> None:
    scenarios.change_feed(cluster_spark, sqlite_catalog, tmp_path)
