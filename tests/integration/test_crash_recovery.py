"""Checkpoint recovery: a streaming driver SIGKILLed at the worst moments, restarted from its checkpoint.

Each driver runs as a real process (with its own JVM) that kills its whole process group at a crash point. On
SQLite one chain of runs meets every crash point once: killed after batch 1's files were written (not committed),
restarted and killed after batch 2's catalog commit (before Spark's commit log), restarted and killed inside batch
3's flush, then restarted without a crash point. Each restart takes the previous kill's batch first, so each kill
point is recovered from; a chain costs four driver starts where a run per point cost six. After each kill the
orphans say what that point leaves behind (new unreferenced files or none). One backend: the kill after a catalog commit
on PostgreSQL (where its row locks and transactions decide whether a replayed batch was committed) is
``test_kafka_to_lake.py::test_sigkill_mid_stream_and_restart`` (killed after batch 3's commit, restarted, exactly once,
DuckDB agrees), and the crash soak kills a driver on PostgreSQL at random moments and crash points; a PostgreSQL kill
test here (two more driver starts) proved nothing those do not. The drivers share the crash soak's JVM class archive
(``tests.support.jvm``), which halves their start-up; this module runs on the soak's worker (``FAULTS_WORKER``) so that
one run makes the archive for both. The table must hold exactly the source rows, DuckDB must read the same, and the
killed attempts' files must be unreferenced orphans that maintenance removes.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import pyspark_ducklake as pdl
from pyspark_ducklake._faults import AFTER_CATALOG_COMMIT, AFTER_FILES_WRITTEN, DURING_FLUSH, ENV
from tests.support.catalogs import sqlite_location
from tests.support.duck import open_duckdb
from tests.support.faults import FAULTS_WORKER
from tests.support.jvm import driver_java_options

pytestmark = [FAULTS_WORKER]

ROOT = Path(__file__).resolve().parents[2]
SIZES = [5, 3000, 7, 6, 2500]  # small (inlined) and large (Parquet) micro-batches


def write_source(folder: Path, sizes: list[int] = SIZES) -> list[int]:
    folder.mkdir()
    ids = []
    for i, n in enumerate(sizes):
        rows = [{"id": i * 10_000 + j, "kind": f"k{j % 3}", "amount": j * 0.5} for j in range(n)]
        ids += [r["id"] for r in rows]
        path = folder / f"part-{i:03d}.json"
        path.write_text("\n".join(json.dumps(r) for r in rows))
        os.utime(path, (1_700_000_000 + i, 1_700_000_000 + i))
    return ids


@pytest.fixture(scope="module")
def java_options(tmp_path_factory: pytest.TempPathFactory) -> str:
    """Driver JVM options with the shared class archive, made by one clean run on a throw-away lake if missing (an
    inlined and a Parquet micro-batch load the classes the chain's drivers use)."""
    warmup = tmp_path_factory.mktemp("warmup")
    write_source(warmup / "in", SIZES[:2])
    catalog = sqlite_location(tmp_path_factory.mktemp("lake"))
    return driver_java_options(lambda options: run_app(warmup, catalog, None, 100_000, options, check=False))


def run_app(
    tmp: Path, catalog: Any, crash: str | None, flush_rows: int, java_options: str, *, check: bool = True
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != ENV}
    env["STREAM_APP_JAVA_OPTIONS"] = java_options
    if crash:
        env[ENV] = crash
    args = [
        sys.executable,
        "-m",
        "tests.support.stream_app",
        str(tmp / "in"),
        str(tmp / "checkpoint"),
        catalog.url,
        catalog.data_path,
        "100",
        str(flush_rows),
    ]
    proc = subprocess.run(args, cwd=ROOT, env=env, start_new_session=True, capture_output=True, text=True, timeout=300)
    if check and crash is None and proc.returncode != 0:
        raise AssertionError(proc.stderr[-4000:])
    return proc


# The chain on SQLite: (crash point, flush_rows, whether the kill leaves new unreferenced files). flush_rows=10 makes
# batch 3 (6 inlined rows on top of batches 0 and 2) flush, so that the third kill lands inside the flush.
CHAIN = [
    (f"{AFTER_FILES_WRITTEN}:1", 100_000, True),  # batch 1: 3000 rows in Parquet files, not committed
    (f"{AFTER_CATALOG_COMMIT}:2", 100_000, False),  # batch 2: committed, Spark's commit log not written
    (f"{DURING_FLUSH}:3", 10, True),  # batch 3: flush files written inside the open catalog transaction
]


def test_sigkill_at_each_crash_point_and_restart(tmp_path: Path, sqlite_catalog: Any, java_options: str) -> None:
    expected = write_source(tmp_path / "in")
    catalog = sqlite_catalog
    orphans: set[str] = set()
    for crash, flush_rows, leaves_orphans in CHAIN:
        code = run_app(tmp_path, catalog, crash, flush_rows, java_options).returncode
        assert code == -9, f"the driver should have been killed at {crash}, exit code {code}"
        lake = pdl.connect(catalog.url)
        now = set(lake.orphan_files(older_than=dt.timedelta(0)))
        assert orphans <= now, f"{crash}: an earlier kill's orphan was adopted or removed"
        assert (now > orphans) == leaves_orphans, f"{crash}: new orphans {sorted(now - orphans)}"
        orphans = now
        lake.close()
    assert run_app(tmp_path, catalog, None, 10, java_options).returncode == 0
    check_recovered(catalog, expected, orphans)


def check_recovered(catalog: Any, expected: list[int], orphans: set[str]) -> None:
    """The table holds each source row once, DuckDB agrees, one snapshot per micro-batch, and the orphans are
    exactly ``orphans`` (the killed attempts' files), none referenced, removed by maintenance."""
    lake = pdl.connect(catalog.url)
    ids = lake.scan("main.events").column("id").to_pylist()
    assert len(ids) == len(expected) and sorted(ids) == sorted(expected)  # nothing lost, nothing twice
    batches = [json.loads(s.commit_extra_info)["batch_id"] for s in lake.snapshots() if s.commit_extra_info]
    assert batches == list(range(len(SIZES)))  # one snapshot per micro-batch, each exactly once
    con = open_duckdb(catalog)
    try:
        assert (
            con.execute("SELECT count(*), count(DISTINCT id) FROM lake.main.events").fetchone() == (len(expected),) * 2
        )
    finally:
        con.close()
    found = lake.orphan_files(older_than=dt.timedelta(0))
    assert set(found) == orphans
    assert not lake.referenced_files(found)
    lake.delete_orphan_files(older_than=dt.timedelta(0))
    assert lake.orphan_files(older_than=dt.timedelta(0)) == []
    assert sorted(lake.scan("main.events").column("id").to_pylist()) == sorted(expected)
    lake.close()
