"""Catalog outage: the catalog's PostgreSQL is stopped for 12 seconds while three streams write, then started again.

Runs on a PostgreSQL instance of its own (``tests.support.pg_instance``), never the suite's shared server. Both
behaviours the docs document are exercised in the same outage:

- the ``patient`` stream (default ``reconnect_timeout=60``) waits with backoff inside its micro-batch and continues
  when the catalog is back;
- the ``impatient`` stream (``reconnect_timeout=2``) fails with ``CatalogUnreachableError`` saying to restart, and a
  restart from its checkpoint after the outage continues;
- the ``writer`` stream, ``writeStream.format("ducklake")`` with ``reconnect_timeout=60``, waits like the patient one.

Either way each table ends with every source row exactly once (DuckDB agrees), one snapshot per micro-batch, and
no unreferenced file after orphan clean-up.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pyspark.errors import StreamingQueryException
from pyspark.sql import SparkSession

import pyspark_ducklake as pdl
from pyspark_ducklake import ducklake_sink
from tests.support.catalogs import create_database, pg_admin_engine, postgres_location
from tests.support.faults import (
    FAULTS_WORKER,
    assert_exact,
    assert_no_orphans_after_cleanup,
    batch_ids_by_app,
    file_stream,
    record_figures,
    start_available_now,
    wait_until,
    write_source,
)
from tests.support.pg_instance import PgInstance

# 12 s: six times the impatient stream's reconnect_timeout, so it gives up well inside the outage; a commit gap that
# spans the outage is at least as long as the outage (the commit before it came before the stop), hence 0.75 below.
OUTAGE_S = 12
# Micro-batch sizes: inlined (<= 100 rows) and Parquet ones; flush_rows=150 makes flushes happen too.
SIZES = [30, 700, 40, 60, 900, 20, 500, 50, 45]

pytestmark = [pytest.mark.timeout(300), FAULTS_WORKER]


@pytest.fixture
def own_pg(spark: SparkSession) -> Iterator[PgInstance]:
    instance = PgInstance()
    instance.start()
    try:
        yield instance
    finally:
        for query in spark.streams.active:  # a failed test leaves no stream behind
            query.stop()
        instance.stop()


def start_stream(spark: SparkSession, source: Path, checkpoint: Path, sink: Any) -> Any:
    return start_available_now(file_stream(spark, source), sink, checkpoint)


def test_catalog_outage_mid_stream(spark: SparkSession, own_pg: PgInstance, tmp_path: Path) -> None:
    server = own_pg.start()  # already running: returns the server
    admin = pg_admin_engine(server)
    try:
        location = postgres_location(server, create_database(admin), tmp_path)
    finally:
        admin.dispose()
    lake = pdl.connect(location.url, location.data_path)
    sizes = {"patient": SIZES, "impatient": SIZES, "writer": SIZES * 3}  # the writer starts first and runs longest
    expected = {name: write_source(tmp_path / name, sizes[name]) for name in sizes}

    def sink(name: str, reconnect_timeout: float) -> Any:
        return ducklake_sink(
            f"main.{name}",
            catalog=location.url,
            app_id=name,
            data_inlining_row_limit=100,
            flush_rows=150,
            reconnect_timeout=reconnect_timeout,
        )

    pdl.register(spark)
    writer = (  # the same sink as a streaming data source: writeStream.format("ducklake")
        file_stream(spark, tmp_path / "writer")
        .writeStream.format("ducklake")
        .option("catalog", location.url)
        .option("app_id", "writer")
        .option("data_inlining_row_limit", "100")
        .option("flush_rows", "150")
        .option("reconnect_timeout", "60")
        .option("checkpointLocation", str(tmp_path / "cp-writer"))
        .trigger(availableNow=True)
        .start("main.writer")
    )

    def committed(app: str) -> int:
        return len(batch_ids_by_app(lake).get(app, []))

    wait_until(lambda: committed("writer") >= 1, 120, "the writer's first batch")
    patient_sink = sink("patient", 60)
    patient = start_stream(spark, tmp_path / "patient", tmp_path / "cp-patient", patient_sink)
    impatient = start_stream(spark, tmp_path / "impatient", tmp_path / "cp-impatient", sink("impatient", 2))
    # The outage starts once every stream is a few batches in.
    wait_until(
        lambda: all(committed(app) >= 3 for app in ("patient", "impatient", "writer")), 180, "3 batches per stream"
    )
    lake.close()
    own_pg.stop()
    stopped = time.monotonic()
    restarted = threading.Timer(OUTAGE_S, own_pg.start)
    restarted.start()

    # The impatient stream gives up with a typed error that says what to do.
    with pytest.raises(StreamingQueryException) as failure:
        impatient.awaitTermination(timeout=120)
    message = str(failure.value)
    assert "CatalogUnreachableError" in message and "restart" in message, message[:2000]
    restarted.join()
    outage_s = time.monotonic() - stopped
    assert outage_s >= OUTAGE_S

    # The patient stream rode through; the impatient one continues from its checkpoint.
    assert patient.awaitTermination(timeout=180), "the patient stream did not finish"
    assert writer.awaitTermination(timeout=180), "the writeStream.format('ducklake') stream did not finish"
    impatient = start_stream(spark, tmp_path / "impatient", tmp_path / "cp-impatient", sink("impatient", 60))
    assert impatient.awaitTermination(timeout=180), "the restarted stream did not finish"

    lake = pdl.connect(location.url)
    for name, ids in expected.items():
        assert_exact(lake, location, f"main.{name}", ids)
    by_app = batch_ids_by_app(lake)
    assert by_app == {app: list(range(len(sizes[app]))) for app in sizes}
    orphans = assert_no_orphans_after_cleanup(lake)

    # The patient stream met the outage inside a batch: its commits pause for about the outage's length.
    def longest_pause(app: str) -> float:
        times = [
            s.snapshot.snapshot_time
            for s in lake.snapshots()
            if s.commit_extra_info and f'"{app}"' in s.commit_extra_info
        ]
        return max((b - a).total_seconds() for a, b in itertools.pairwise(times))

    waited = longest_pause("patient")
    assert waited >= 0.75 * OUTAGE_S, f"the patient stream's commits never paused for the outage ({waited:.1f} s)"
    writer_waited = longest_pause("writer")
    assert writer_waited >= 0.75 * OUTAGE_S, f"the writer's commits never paused for the outage ({writer_waited:.1f} s)"
    assert len(patient_sink.metrics) == len(SIZES)
    lake.close()
    record_figures(
        "catalog_outage",
        {
            "outage_seconds": round(outage_s, 1),
            "streams": 3,
            "rows": sum(len(v) for v in expected.values()),
            "rows_lost": 0,
            "rows_duplicated": 0,
            "patient_longest_commit_gap_s": round(waited, 1),
            "writer_longest_commit_gap_s": round(writer_waited, 1),
            "impatient_failed_with": "CatalogUnreachableError",
            "orphans_deleted": orphans,
        },
    )
