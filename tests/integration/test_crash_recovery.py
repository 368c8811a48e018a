"""Checkpoint recovery: a streaming driver SIGKILLed at the worst moments, restarted from its checkpoint.

Each case runs the driver as a real process (with its own JVM) that kills its whole process group at a crash
point, then restarts it without the crash point. The drivers share the crash soak's JVM class archive
(``tests.support.jvm``), which halves their start-up. The table must hold exactly the source rows, DuckDB must read
the same, and the killed attempt's files must be unreferenced orphans that maintenance removes.
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
from tests.support.jvm import driver_java_options

ROOT = Path(__file__).resolve().parents[2]
SIZES = [5, 3000, 7, 6, 2500]  # small (inlined) and large (Parquet) micro-batches


def write_source(folder: Path) -> list[int]:
    folder.mkdir()
    ids = []
    for i, n in enumerate(SIZES):
        rows = [{"id": i * 10_000 + j, "kind": f"k{j % 3}", "amount": j * 0.5} for j in range(n)]
        ids += [r["id"] for r in rows]
        path = folder / f"part-{i:03d}.json"
        path.write_text("\n".join(json.dumps(r) for r in rows))
        os.utime(path, (1_700_000_000 + i, 1_700_000_000 + i))
    return ids


@pytest.fixture(scope="module")
def java_options(tmp_path_factory: pytest.TempPathFactory) -> str:
    """Driver JVM options with the shared class archive, made by one clean run on a throw-away lake if missing."""
    warmup = tmp_path_factory.mktemp("warmup")
    write_source(warmup / "in")
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


CASES = [
    pytest.param(f"{AFTER_FILES_WRITTEN}:1", 100_000, True, id="after-files-before-commit"),
    pytest.param(f"{AFTER_CATALOG_COMMIT}:3", 100_000, False, id="after-commit-before-spark-log"),
    pytest.param(f"{DURING_FLUSH}:2", 10, True, id="during-flush"),
]


@pytest.mark.parametrize(("crash", "flush_rows", "leaves_orphans"), CASES)
def test_sigkill_and_restart(
    tmp_path: Path, sqlite_catalog: Any, java_options: str, crash: str, flush_rows: int, leaves_orphans: bool
) -> None:
    check_recovery(tmp_path, sqlite_catalog, java_options, crash, flush_rows, leaves_orphans)


def test_sigkill_after_commit_on_postgres(tmp_path: Path, pg_catalog: Any, java_options: str) -> None:
    check_recovery(tmp_path, pg_catalog, java_options, f"{AFTER_CATALOG_COMMIT}:1", 100_000, False)


def check_recovery(
    tmp_path: Path, catalog: Any, java_options: str, crash: str, flush_rows: int, leaves_orphans: bool
) -> None:
    expected = write_source(tmp_path / "in")
    code = run_app(tmp_path, catalog, crash, flush_rows, java_options).returncode
    assert code == -9, f"the driver should have been killed at {crash}, exit code {code}"
    lake = pdl.connect(catalog.url)
    crashed_at = len(lake.snapshots())
    assert run_app(tmp_path, catalog, None, flush_rows, java_options).returncode == 0
    ids = lake.scan("main.events").column("id").to_pylist()
    assert len(ids) == len(expected) and sorted(ids) == sorted(expected)  # nothing lost, nothing twice
    batches = [json.loads(s.commit_extra_info)["batch_id"] for s in lake.snapshots() if s.commit_extra_info]
    assert batches == list(range(len(SIZES)))  # one snapshot per micro-batch, each exactly once
    assert crashed_at <= len(lake.snapshots())
    con = open_duckdb(catalog)
    try:
        assert (
            con.execute("SELECT count(*), count(DISTINCT id) FROM lake.main.events").fetchone() == (len(expected),) * 2
        )
    finally:
        con.close()
    orphans = lake.orphan_files(older_than=dt.timedelta(0))
    assert bool(orphans) == leaves_orphans
    referenced = lake.referenced_files(orphans)
    assert not referenced
    lake.delete_orphan_files(older_than=dt.timedelta(0))
    assert lake.orphan_files(older_than=dt.timedelta(0)) == []
    assert sorted(lake.scan("main.events").column("id").to_pylist()) == sorted(expected)
