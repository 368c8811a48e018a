"""Shared parts of the fault tests (``tests/integration/test_faults_*.py``).

- a deterministic, replayable source: numbered JSON files a Spark file stream reads one per micro-batch;
- :func:`assert_exact`: the table holds every expected row exactly once, and DuckDB reads the same;
- :func:`assert_no_orphans_after_cleanup`: after ``delete_orphan_files(older_than=0)`` every file under the data
  path is referenced by the catalog;
- :func:`record_figures`: a test's figures as JSON under ``.cache/reliability/`` (``python -m
  tests.support.reliability`` prints the docs' table from them, docs/reliability.md).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

import pyspark_ducklake as pdl
from tests.support.catalogs import REPO_ROOT
from tests.support.duck import LakeLocation, open_duckdb

FIGURES_DIR = REPO_ROOT / ".cache" / "reliability"
SOURCE_SCHEMA = "id BIGINT, kind STRING, amount DOUBLE"
# `make test` runs two pytest-xdist workers (--dist loadgroup): the fault tests share one, so that no two of them
# (each loads the machine on purpose, and measures under that load) run at the same time.
FAULTS_WORKER = pytest.mark.xdist_group("faults")


def write_source_file(folder: Path, index: int, rows: int) -> list[int]:
    """File ``part-<index>.json`` with ``rows`` rows whose ids are ``index * 100_000 + j``; returns the ids.

    Modification times increase with the index, so a file stream with ``maxFilesPerTrigger=1`` reads them in order.
    """
    folder.mkdir(parents=True, exist_ok=True)
    ids = [index * 100_000 + j for j in range(rows)]
    tmp = folder / f".part-{index:05d}.json.tmp"
    tmp.write_text("\n".join(json.dumps({"id": i, "kind": f"k{i % 3}", "amount": i * 0.5}) for i in ids))
    stamp = 1_700_000_000 + index
    os.utime(tmp, (stamp, stamp))
    tmp.rename(folder / f"part-{index:05d}.json")  # the stream never sees a half-written file
    return ids


def write_source(folder: Path, sizes: Sequence[int], first_index: int = 0) -> list[int]:
    ids: list[int] = []
    for offset, rows in enumerate(sizes):
        ids += write_source_file(folder, first_index + offset, rows)
    return ids


def start_available_now(df: Any, sink: Any, checkpoint: Path) -> Any:
    """Start ``df.writeStream.foreachBatch(sink)`` with ``Trigger.AvailableNow`` from ``checkpoint``."""
    return (
        df.writeStream.foreachBatch(sink)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )


def file_stream(spark: Any, source: Path, schema: str = SOURCE_SCHEMA) -> Any:
    """The JSON files in ``source`` as a stream, one file per micro-batch."""
    return spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).json(str(source))


def assert_exact(lake: pdl.Lake, location: LakeLocation, table: str, expected: Sequence[int]) -> None:
    """Every expected id exactly once (nothing lost, nothing doubled), here and in DuckDB."""
    ids = lake.scan(table, columns=["id"]).column("id").to_pylist()
    missing = sorted(set(expected) - set(ids))[:10]
    extra = sorted(set(ids) - set(expected))[:10]
    doubled = len(ids) - len(set(ids))
    assert not missing and not extra and doubled == 0, f"missing {missing}, unexpected {extra}, doubled {doubled}"
    assert len(ids) == len(expected)
    query = f"SELECT count(*), count(DISTINCT id), coalesce(sum(id), 0) FROM lake.{table}"
    con = open_duckdb(location)
    try:
        got = con.execute(query).fetchone()
    finally:
        con.close()
    want = (len(expected), len(expected), sum(expected))
    if got != want:  # say what DuckDB saw: its snapshot, its files, and whether a second connection agrees
        con = open_duckdb(location)
        try:
            again = con.execute(query).fetchone()
            snapshot = con.execute("SELECT max(snapshot_id) FROM ducklake_snapshots('lake')").fetchone()
            schema, name = table.split(".")
            files = con.execute(f"SELECT count(*) FROM ducklake_list_files('lake', '{name}', schema => '{schema}')")
            seen = files.fetchone()
        finally:
            con.close()
        raise AssertionError(
            f"DuckDB read {got} (a second connection {again}), expected {want}; DuckDB's latest snapshot {snapshot}, "
            f"ours {lake.current_snapshot_id()}; DuckDB lists {seen} files, our scan plans "
            f"{len(lake.referenced_files(data_files(lake.data_path)))} referenced files"
        )


def data_files(data_path: str) -> list[str]:
    return sorted(os.path.join(d, f) for d, _, fs in os.walk(data_path) for f in fs)


def assert_no_orphans_after_cleanup(lake: pdl.Lake) -> int:
    """Delete the orphans (no safety age) and check every remaining file is referenced; returns how many went."""
    deleted = lake.delete_orphan_files(older_than=dt.timedelta(0))
    remaining = data_files(lake.data_path)
    unreferenced = sorted(set(remaining) - lake.referenced_files(remaining))
    assert unreferenced == [], unreferenced[:10]
    assert lake.orphan_files(older_than=dt.timedelta(0)) == []
    return len(deleted)


def batch_ids_by_app(lake: pdl.Lake) -> dict[str, list[int]]:
    """The sink's ``(app_id, batch_id)`` of every snapshot, in commit order, per app."""
    out: dict[str, list[int]] = {}
    for s in lake.snapshots():
        if s.commit_extra_info:
            info = json.loads(s.commit_extra_info)
            if "batch_id" in info:
                out.setdefault(info["app_id"], []).append(info["batch_id"])
    return out


def record_figures(name: str, figures: dict[str, Any]) -> None:
    """Write one test's figures to ``.cache/reliability/<name>.json`` (with when they were taken)."""
    FIGURES_DIR.mkdir(parents=True, exist_ok=True)
    payload = {"test": name, "recorded_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"), **figures}
    (FIGURES_DIR / f"{name}.json").write_text(json.dumps(payload, indent=2, sort_keys=True) + "\n")


def wait_until(condition: Any, timeout: float, what: str, interval: float = 0.2) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(interval)
