"""On a real Spark standalone cluster from pyspark's own jars on 127.0.0.1: a master and a worker whose executors
run in JVMs and Python workers of their own. One application runs on it: a classic driver in a process of its own
(``tests/support/cluster_app.py``) that first finds ``format("ducklake")`` without ``register()``
(``tests/support/discovery_app.py``), then runs every check of ``tests/support/session_scenarios.py``: batch writes
and reads, the fast paths (which must take Spark's own Parquet writer and reader), the sink, ``writeStream`` and the
change feed, batch and stream. Exact against DuckDB; the catalogs are reached from the executors (the test
PostgreSQL over TCP, SQLite file paths) and the data files through the shared disk.

Spark Connect is checked on a local Connect server (``tests/integration/test_spark_connect.py``, the same
scenarios): what Connect changes is on the driver side (no JVM on the client, ``foreachBatch`` in the server's
Python process), and the executors run the same code whichever driver hands them tasks. A second application (a
Connect server on this cluster) cost as much as the classic one and checked nothing these two do not.

Discovery: PySpark finds a data source by itself in an installed package named ``pyspark_*`` exporting
``DefaultSource`` (pyspark/sql/worker/lookup_data_sources.py, which lists the modules on the Python workers' path).
The app runs with the package on ``PYTHONPATH`` and its working folder outside the repository, as an installed
package would be found (the repository's editable install is a path entry too: tests/unit/test_discovery.py). It
shares this app (a fresh driver process, which it needs) rather than starting a Spark of its own. The wheel installed into an empty venv is checked the same way in
``tests/support/install_smoke.py``.
"""

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

from tests.support.catalogs import REPO_ROOT, sqlite_location
from tests.support.duck import open_duckdb
from tests.support.spark_daemons import CONNECT_MODE_ENV, StandaloneCluster, start_standalone_cluster

pytestmark = [pytest.mark.xdist_group("cluster"), pytest.mark.timeout(900)]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneCluster]:
    try:
        running = start_standalone_cluster(tmp_path_factory.mktemp("standalone"), cores=2, memory="1g")
    except Exception as e:
        pytest.fail(f"could not start the standalone cluster: {e}", pytrace=False)
    yield running
    running.stop()
    assert not running.worker.running() and not running.master.running()


def test_classic_driver_on_the_cluster(
    cluster: StandaloneCluster, pg_catalog: Any, sqlite_catalog: Any, tmp_path: Path
) -> None:
    found = sqlite_location(tmp_path / "discovery")  # a lake of its own: the scenarios count their snapshots
    work = tmp_path / "work"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYSPARK", "DUCKLAKE_")) and k != CONNECT_MODE_ENV}
    env["PYTHONPATH"] = str(REPO_ROOT)
    proc = subprocess.run(
        [sys.executable, "-m", "tests.support.cluster_app", cluster.url, json.dumps(asdict(pg_catalog)),
         json.dumps(asdict(sqlite_catalog)), json.dumps(asdict(found)), str(work)],
        cwd=work, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=800, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-6000:]
    # its executors ran on the worker, in processes of their own
    executors = list((cluster.worker.state_dir / "work").glob("app-*/*/stderr"))
    assert executors, "no executor of the application ran on the worker"

    # format("ducklake") without register(): exactly what DuckDB reads of the tables it wrote
    got = json.loads((work / "discovery.json").read_text())
    con = open_duckdb(found)
    try:
        first = sorted(con.execute("SELECT * FROM lake.main.events AT (VERSION => 1)").fetchall())
        events = sorted(con.execute("SELECT * FROM lake.main.events").fetchall())
        copy = sorted(con.execute("SELECT * FROM lake.main.copy").fetchall())
    finally:
        con.close()
    assert [list(r) for r in first] == got["read"] == [[1, "a"], [2, "b"], [3, "c"]]
    assert copy == first  # readStream -> writeStream, both format("ducklake")
    assert [list(r) for r in events] == got["sql"] == [[1, "a"], [2, "b"], [3, "c"], [4, "d"]]
    assert got["conf_without_register"] == "register"
    assert got["conf_with_register"] == 3
