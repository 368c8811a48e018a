"""``examples/change_feed.py`` as a user runs it: a process that follows a table and prints each change.

The lake gets a history first (inlined and Parquet inserts by this library, a delete, an UPDATE by DuckDB); the
example starts from the earliest snapshot, and once it has printed that history DuckDB commits more changes while it
runs. What it prints must be DuckDB's own ``ducklake_table_changes`` for the whole history, change for change, each
once. One Spark start-up is the cost of this test.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pytest

import pyspark_ducklake as pdl
from tests.support.catalogs import CatalogLocation
from tests.support.duck import open_duckdb
from tests.support.jvm import existing_archive_options, spark_submit_env

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "change_feed.py"
WAIT = 300  # seconds the process may take on a busy 2-core machine
CHANGE = re.compile(r"^  snapshot (\d+)  \S+  (\w+)\s+id=(\d+)  kind='(\w+)'$")


def make_history(catalog: CatalogLocation) -> None:
    lake = pdl.connect(catalog.url, catalog.data_path, data_inlining_row_limit=10)
    schema = pa.schema([("id", pa.int64()), ("kind", pa.string()), ("amount", pa.float64())])
    lake.create_table("main.events", schema)
    lake.append("main.events", pa.table({"id": [1, 2, 3], "kind": ["click", "view", "buy"], "amount": [1.0, 2.0, 3.0]}))
    lake.append("main.events", pa.table({"id": list(range(10, 30)), "kind": ["view"] * 20, "amount": [0.5] * 20}))
    lake.delete("main.events", [("id", "=", 2)])
    lake.close()
    duckdb("UPDATE lake.main.events SET kind = 'buy' WHERE id = 1", catalog)


def duckdb(sql: str, catalog: CatalogLocation) -> list[tuple[object, ...]]:
    con = open_duckdb(catalog, inlining_row_limit=10)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def duckdb_changes(catalog: CatalogLocation) -> Counter[tuple[int, str, int, str]]:
    last = duckdb("SELECT id FROM lake.current_snapshot()", catalog)[0][0]
    rows = duckdb(
        f"SELECT snapshot_id, change_type, id, kind FROM ducklake_table_changes('lake', 'main', 'events', 0, {last})",
        catalog,
    )
    return Counter((int(s), str(t), int(i), str(k)) for s, t, i, k in rows)


def test_follows_the_table_and_prints_each_change_once(tmp_path: Path, sqlite_catalog: CatalogLocation) -> None:
    make_history(sqlite_catalog)
    history = duckdb_changes(sqlite_catalog)
    assert sum(history.values()) == 26 and {t for _, t, _, _ in history} == {
        "insert",
        "delete",
        "update_preimage",
        "update_postimage",
    }
    # 3 changes more once the history is out: a delete, an insert, an update (pre and post image) of one row.
    total = sum(history.values()) + 4
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CHANGE_FEED_", "DUCKLAKE_"))}
    env |= spark_submit_env(existing_archive_options())  # a faster start-up of the example's driver JVM
    log = tmp_path / "feed.log"
    with log.open("w") as out:
        proc = subprocess.Popen(
            [sys.executable, str(EXAMPLE), "--catalog", sqlite_catalog.url, "--starting-snapshot", "earliest",
             "--keys", "id,kind", "--checkpoint", str(tmp_path / "checkpoint"), "--trigger-seconds", "0.5",
             "--max-changes", str(total), "--max-seconds", str(WAIT)],
            cwd=ROOT, env={**env, "PYTHONUNBUFFERED": "1"}, stdin=subprocess.DEVNULL, stdout=out,
            stderr=subprocess.STDOUT,
        )  # fmt: skip
        try:
            deadline = time.monotonic() + WAIT
            while "batch 0:" not in log.read_text():
                assert proc.poll() is None, log.read_text()[-4000:]
                assert time.monotonic() < deadline, log.read_text()[-4000:]
                time.sleep(0.5)
            duckdb("DELETE FROM lake.main.events WHERE id = 3", sqlite_catalog)
            duckdb("INSERT INTO lake.main.events VALUES (99, 'late', 9.5)", sqlite_catalog)
            duckdb("UPDATE lake.main.events SET kind = 'click' WHERE id = 10", sqlite_catalog)
            assert proc.wait(WAIT) == 0, log.read_text()[-4000:]
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    output = log.read_text()
    printed = Counter((int(m[1]), m[2], int(m[3]), m[4]) for line in output.splitlines() if (m := CHANGE.match(line)))
    expected = duckdb_changes(sqlite_catalog)
    assert sum(expected.values()) == total
    assert printed == expected, output[-4000:]
    assert f"stopped by --max-changes {total}" in output, output[-4000:]
    # The later changes came in later micro-batches than the history.
    batches = [line for line in output.splitlines() if line.startswith("batch ")]
    assert batches[0].startswith("batch 0: snapshots 2..5, 26 changes (delete 1, insert 23, update 1)"), batches
    assert len(batches) >= 2, batches
