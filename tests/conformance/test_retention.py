"""Retention for long histories: expiry in batches (bounded memory, resumable after a kill, writers committing
meanwhile), the lake's retention settings shared with DuckDB 1.5.5, and a sink keeping to them on a schedule."""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import subprocess
import sys
import threading
import time
import tracemalloc
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from pyspark_ducklake.exceptions import InvalidOptionError
from pyspark_ducklake.lake import Lake
from pyspark_ducklake.table.maintenance.retention import RetentionSpec
from pyspark_ducklake.table.microbatch import MicroBatchCommitter, SinkSettings
from tests.support.bad_inputs import expect_bad_input
from tests.support.catalog_rows import catalog_rows
from tests.support.catalogs import REPO_ROOT, CatalogLocation
from tests.support.duck import attached, connect_duckdb
from tests.support.history import QUIET, STREAM, Churn, History, sink_batch

CHURN = Churn(rows_per_commit=3, flush_every=10, merge_every=40, delete_every=7, upsert_every=11)


def _history(catalog: CatalogLocation, snapshots: int) -> Lake:
    lake = Lake(catalog.url, catalog.data_path)
    history = History(lake, CHURN)
    history.grow_to(snapshots)
    history.close()
    return lake


def _time_of(lake: Lake, snapshot_id: int) -> dt.datetime:
    (info,) = lake.snapshots(since=snapshot_id, limit=1)
    assert info.snapshot.snapshot_time is not None
    return info.snapshot.snapshot_time


def _duckdb_reads(catalog: CatalogLocation) -> tuple[list[Any], list[Any], int]:
    with attached(connect_duckdb(), catalog) as con:
        stream = con.execute("SELECT id, v FROM lake.main.stream ORDER BY ALL").fetchall()
        quiet = con.execute("SELECT id, v FROM lake.main.quiet ORDER BY ALL").fetchall()
        (count,) = con.execute("SELECT count(*) FROM lake.snapshots()").fetchone()
    return stream, quiet, count


def _ours(lake: Lake) -> tuple[list[Any], list[Any]]:
    out = []
    for name in (STREAM, QUIET):
        t = lake.scan(name, columns=["id", "v"])
        out.append(sorted(zip(t.column("id").to_pylist(), t.column("v").to_pylist(), strict=True)))
    return out[0], out[1]


def test_an_expiry_killed_halfway_is_finished_by_running_it_again(sqlite_catalog: CatalogLocation) -> None:
    """Each batch is one transaction: a kill after the third leaves three batches expired and a lake DuckDB reads
    as before; running it again gives exactly the catalog one uninterrupted run gives."""
    lake = _history(sqlite_catalog, 150)
    cut = _time_of(lake, 120)
    before = _ours(lake)
    lake.close()
    db = Path(sqlite_catalog.url.removeprefix("sqlite:///"))
    twin = db.with_name("twin.sqlite")
    shutil.copy(db, twin)
    expire = [sys.executable, "-m", "pyspark_ducklake", "--catalog", sqlite_catalog.url, "expire"]
    expire += ["--older-than", cut.isoformat(), "--batch-size", "20"]
    env = {**os.environ, "PYSPARK_DUCKLAKE_CRASH_AT": "expire_batch:3"}
    killed = subprocess.run(expire, env=env, cwd=REPO_ROOT, start_new_session=True, capture_output=True, check=False)
    assert killed.returncode == -9, killed.stderr
    stream, quiet, count = _duckdb_reads(sqlite_catalog)
    assert count == 151 - 3 * 20  # three batches of snapshots 0..59
    assert (stream, quiet) == before
    done = subprocess.run(expire, cwd=REPO_ROOT, capture_output=True, text=True, check=False)
    assert done.returncode == 0 and "expired 60 snapshots" in done.stdout, done.stdout + done.stderr
    whole = Lake(f"sqlite:///{twin}").expire_snapshots(older_than=cut)
    assert whole.expired == 120 and whole.batches == 1
    skip = {"schedule_start"}
    assert catalog_rows(db, skip=skip) == catalog_rows(twin, skip=skip)
    assert _duckdb_reads(sqlite_catalog) == (*before, 31)


def test_expiry_while_writers_commit_loses_nothing(catalog: CatalogLocation) -> None:
    lake = _history(catalog, 60)
    cut = _time_of(lake, 50)
    appended: list[int] = []
    errors: list[BaseException] = []

    def writer() -> None:
        other = Lake(catalog.url)
        try:
            for i in range(25):
                other.append(STREAM, pa.table({"id": [10**6 + i], "v": ["w"]}))
                appended.append(10**6 + i)
        except BaseException as e:
            errors.append(e)
        finally:
            other.close()

    thread = threading.Thread(target=writer)
    thread.start()
    reports = []
    while thread.is_alive() or not reports:
        reports.append(lake.expire_snapshots(older_than=cut, batch_size=4))
    thread.join()
    assert not errors
    assert sum(r.expired for r in reports) == 50
    stream, _ = _ours(lake)
    assert {i for i, _ in stream} >= set(appended) and len(appended) == 25
    assert _duckdb_reads(catalog)[0] == stream
    lake.close()


def test_expiry_memory_does_not_grow_with_what_it_expires(sqlite_catalog: CatalogLocation) -> None:
    lake = _history(sqlite_catalog, 1100)
    peaks = []
    for upto in (110, 1050):  # 110 snapshots, then 940 more, 50 per batch (tracemalloc makes each call slow)
        tracemalloc.start()
        report = lake.expire_snapshots(older_than=_time_of(lake, upto), batch_size=50)
        peaks.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
        assert report.snapshot_ranges[-1][1] == upto - 1
    assert peaks[1] < peaks[0] * 1.5, peaks
    lake.close()


def test_retention_settings_are_duckdbs(catalog: CatalogLocation) -> None:
    lake = _history(catalog, 30)
    head = lake.overwrite(QUIET, pa.table({"id": list(range(50)), "v": ["o"] * 50}))  # ends the table's file
    assert lake.retention().expire_older_than is None
    kept = lake.set_retention(expire_older_than="1 second", delete_older_than="0 seconds")
    assert (kept.expire_older_than, kept.delete_older_than) == ("1 second", "0 seconds")
    with attached(connect_duckdb(), catalog) as con:
        options = dict(con.execute("SELECT option_name, value FROM lake.options() WHERE scope = 'GLOBAL'").fetchall())
        assert options["expire_older_than"] == "1 second" and options["delete_older_than"] == "0 seconds"
        con.execute("CALL lake.set_option('expire_older_than', '2 days')")
    assert lake.retention().expire_older_than == "2 days"
    lake.set_retention(expire_older_than="1 second")
    time.sleep(1.1)
    expired, cleaned = lake.apply_retention()
    assert expired.expired == head and expired.files_scheduled  # all but the newest
    assert set(expired.files_scheduled) <= set(cleaned.files)  # and the files they left, at once
    assert len(lake.snapshots()) == 1
    for bad in ({"expire_older_than": "7"}, {"delete_older_than": "soon"}):
        with expect_bad_input("retention-interval", lake):
            lake.set_retention(**bad)
    with pytest.raises(InvalidOptionError, match="expire_older_than must be an interval"):
        lake.set_retention(expire_older_than=7)  # type: ignore[arg-type]
    assert lake.retention().expire_older_than == "1 second"  # nothing set by a refused call
    lake.close()


def test_a_sink_expires_on_its_schedule(catalog: CatalogLocation) -> None:
    lake = _history(catalog, 40)
    spec = RetentionSpec(interval=3600, expire_older_than=dt.timedelta(0), delete_older_than=dt.timedelta(0))
    committer = MicroBatchCommitter(lake, STREAM, SinkSettings(retention=spec))
    history = History(lake, CHURN)
    history.next_id = 10**7
    sink_batch(committer, "app", 0, history.batch())
    first = committer.retention.last if committer.retention else None
    assert first is not None and first[0].expired >= 40 and first[1].files
    assert len(lake.snapshots()) == 1  # all but the newest expired, right after the first commit
    sink_batch(committer, "app", 1, history.batch())
    assert committer.retention is not None and committer.retention.last is first  # not due again for an hour
    assert len(lake.snapshots()) == 2
    assert _duckdb_reads(catalog)[2] == 2
    history.close()
    lake.close()


def test_the_cli_shows_sets_and_applies_retention(sqlite_catalog: CatalogLocation, capsys: Any) -> None:
    from pyspark_ducklake.__main__ import main

    lake = _history(sqlite_catalog, 20)
    head = lake.current_snapshot_id()
    lake.close()
    url = sqlite_catalog.url
    assert main(["--catalog", url, "retention"]) == 0
    assert "expire_older_than: not set (snapshots are kept for ever)" in capsys.readouterr().out
    assert main(["--catalog", url, "retention", "--expire-older-than", "1 second", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["retention"]["expire_older_than"] == "1 second"
    time.sleep(1.1)
    assert main(["--catalog", url, "retention", "--apply", "--dry-run", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["expire"]["expired"] == head and out["expire"]["dry_run"] and out["expire"]["snapshots"][0] == 0
    assert main(["--catalog", url, "retention", "--apply", "--max-batches", "1"]) == 0
    assert f"expired {head} snapshots" in capsys.readouterr().out
    assert main(["--catalog", url, "retention", "--expire-older-than", "a while"]) == 1
    assert "could not parse option expire_older_than" in capsys.readouterr().err
