"""Two streams and a batch writer on one table at once: every commit lands once, nothing lost or doubled."""

from __future__ import annotations

import threading
from typing import Any

import pyarrow as pa
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

import pyspark_ducklake as pdl
from pyspark_ducklake.streaming.sink import ducklake_sink
from tests.support.duck import open_duckdb

BATCHES = 6


def test_two_streams_and_a_batch_writer(spark: SparkSession, catalog: Any) -> None:
    lake = pdl.connect(catalog.url, catalog.data_path)
    lake.create_table("main.shared", pa.schema([("writer", pa.string()), ("id", pa.int64())]))
    frames = {
        (w, b): spark.range(b * 1000, b * 1000 + (20 if b % 2 else 400)).select(F.lit(w).alias("writer"), F.col("id"))
        for w in ("a", "b")
        for b in range(BATCHES)
    }
    errors: list[BaseException] = []

    def stream(name: str) -> None:
        sink = ducklake_sink(
            "main.shared",
            catalog=catalog.url,
            app_id=f"stream-{name}",
            data_inlining_row_limit=50,
            flush_rows=60,
            max_retry_count=50,
            retry_wait_ms=20,
        )
        try:
            for b in range(BATCHES):
                sink(frames[(name, b)], b)
                if b == 2:
                    sink(frames[(name, b)], b)  # a replay in the middle of the race
        except BaseException as e:
            errors.append(e)

    def batch_writer() -> None:
        other = pdl.connect(catalog.url, max_retry_count=50, retry_wait_ms=20)
        try:
            for i in range(BATCHES):
                other.append("main.shared", pa.table({"writer": ["c"] * 30, "id": list(range(i * 30, i * 30 + 30))}))
        except BaseException as e:
            errors.append(e)

    threads = [
        threading.Thread(target=stream, args=("a",)),
        threading.Thread(target=stream, args=("b",)),
        threading.Thread(target=batch_writer),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=600)
    assert not errors, errors
    rows = lake.scan("main.shared").to_pylist()
    expected = [(w, i) for (w, b), df in frames.items() for i in range(b * 1000, b * 1000 + (20 if b % 2 else 400))]
    expected += [("c", i) for i in range(BATCHES * 30)]
    got = [(r["writer"], r["id"]) for r in rows]
    assert len(got) == len(expected) and sorted(got) == sorted(expected)
    snapshots = lake.snapshots()
    assert len(snapshots) == 2 + 3 * BATCHES  # create schema/table + one per batch per writer
    con = open_duckdb(catalog)
    try:
        assert con.execute("SELECT count(*), count(DISTINCT (writer, id)) FROM lake.main.shared").fetchone() == (
            len(expected),
            len(expected),
        )
    finally:
        con.close()
