"""The foreachBatch sink on a real local SparkSession: one idempotent snapshot per micro-batch, checked by DuckDB.

Both backends where the catalog SQL is the subject: the inlined inserts and the replay check of the commit protocol
(test_small_batches_inline_and_replays_are_skipped) and what PostgreSQL's varchar cannot hold (the hostile nested
strings). The Spark paths (executors' Parquet, flush, checkpoints, ``writeStream``) run on SQLite only; on PostgreSQL
test_s3.py's test_streaming_sink_on_s3 runs a real query through inlined, Parquet and flushed batches."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

import pyspark_ducklake as pdl
from pyspark_ducklake.exceptions import SchemaMismatchError
from pyspark_ducklake.streaming.sink import ducklake_sink
from tests.support.compare import canonical_rows
from tests.support.duck import open_duckdb

SCHEMA = "id BIGINT, kind STRING, amount DOUBLE"


def batch(spark: SparkSession, start: int, n: int) -> Any:
    return spark.range(start, start + n).select(
        F.col("id"),
        F.concat(F.lit("k"), (F.col("id") % 3).cast("string")).alias("kind"),
        (F.col("id") * 1.5).alias("amount"),
    )


def sink_for(catalog: Any, **kw: Any) -> Any:
    return ducklake_sink("main.events", catalog=catalog.url, data_path=catalog.data_path, app_id="app-1", **kw)


def test_small_batches_inline_and_replays_are_skipped(spark: SparkSession, catalog: Any) -> None:
    sink = sink_for(catalog)
    for b in range(3):
        sink(batch(spark, b * 10, 10), b)
    sink(batch(spark, 10, 10), 1)  # a replay of batch 1 after a crash: no-op
    sink(spark.range(0).select(F.col("id"), F.lit("x").alias("kind"), F.lit(1.0).alias("amount")), 3)  # empty
    assert [m.mode for m in sink.metrics] == ["inlined", "inlined", "inlined", "skipped", "empty"]
    lake = pdl.connect(catalog.url)
    snaps = lake.snapshots()
    assert [s.changes_made for s in snaps[1:]] == [
        'created_table:"main"."events",inlined_insert:1',
        "inlined_insert:1",
        "inlined_insert:1",
    ]
    assert [json.loads(s.commit_extra_info) for s in snaps[1:]] == [
        {"app_id": "app-1", "batch_id": b} for b in range(3)
    ]
    assert sorted(lake.scan("main.events").column("id").to_pylist()) == list(range(30))
    con = open_duckdb(catalog)
    try:
        assert con.execute("SELECT count(*), sum(id) FROM lake.main.events").fetchone() == (30, sum(range(30)))
        extra = con.execute(
            "SELECT commit_extra_info FROM lake.snapshots() ORDER BY snapshot_id DESC LIMIT 1"
        ).fetchone()[0]
        assert json.loads(extra) == {"app_id": "app-1", "batch_id": 2}
    finally:
        con.close()


def test_large_batch_is_written_by_executors(spark: SparkSession, sqlite_catalog: Any) -> None:
    catalog = sqlite_catalog  # one backend: the catalog is not under test here (module docstring)
    sink = sink_for(catalog, data_inlining_row_limit=100)
    sink(batch(spark, 0, 5000).repartition(3), 0)
    sink(batch(spark, 5000, 50).repartition(2), 1)  # small again: inlined
    assert [m.mode for m in sink.metrics] == ["parquet", "inlined"]
    assert sink.metrics[0].files == 3
    lake = pdl.connect(catalog.url)
    assert len(lake.snapshots()) == 3
    con = open_duckdb(catalog)
    try:
        duck = con.execute("SELECT * FROM lake.main.events").to_arrow_table()
    finally:
        con.close()
    assert duck.num_rows == 5050
    assert canonical_rows(duck) == canonical_rows(lake.scan("main.events"))


def typed_batch(spark: SparkSession, start: int, n: int, partitions: int) -> Any:
    idc = F.col("id")
    return spark.range(start, start + n, 1, partitions).select(
        idc,
        F.when(idc % 7 == 0, None).otherwise(F.concat(F.lit("s"), idc.cast("string"))).alias("s"),
        (idc / 8).cast("decimal(18,3)").alias("d"),
        F.timestamp_micros(F.lit(1_600_000_000_000_000) + idc * 1_000_003).alias("ts"),
        F.date_add(F.lit("2000-01-01").cast("date"), (idc % 1000).cast("int")).alias("day"),
        (idc % 2 == 0).alias("flag"),
    )


def test_arrow_fetch_after_small_batches_and_fallback(spark: SparkSession, sqlite_catalog: Any) -> None:
    # After an inlined batch the sink fetches the next one with one limited Arrow collect on the driver; a batch
    # over the limit falls back to the executor path. Every type must arrive the same either way.
    sink = sink_for(sqlite_catalog, data_inlining_row_limit=100)
    sizes = [(0, 60, 2), (60, 100, 2), (160, 500, 2), (660, 40, 1)]
    for b, (start, n, partitions) in enumerate(sizes):
        sink(typed_batch(spark, start, n, partitions), b)
    assert [m.mode for m in sink.metrics] == ["inlined", "inlined", "parquet", "inlined"]
    assert sink.metrics[2].files == 2
    expected = canonical_rows(typed_batch(spark, 0, 700, 1).toArrow())
    con = open_duckdb(sqlite_catalog)
    try:
        duck = con.execute("SELECT * FROM lake.main.events").to_arrow_table()
    finally:
        con.close()
    assert canonical_rows(duck) == expected
    assert canonical_rows(pdl.connect(sqlite_catalog.url).scan("main.events")) == expected


def test_flush_threshold_keeps_history(spark: SparkSession, sqlite_catalog: Any) -> None:
    catalog = sqlite_catalog  # one backend: the catalog is not under test here (module docstring)
    sink = sink_for(catalog, flush_rows=25)
    for b in range(4):
        sink(batch(spark, b * 10, 10), b)
    assert [m.flushed_rows for m in sink.metrics] == [0, 0, 30, 0]
    lake = pdl.connect(catalog.url)
    snaps = lake.snapshots()
    assert len(snaps) == 5  # one snapshot per batch, the flush included in batch 2's
    assert snaps[3].changes_made == "inlined_insert:1,inline_flush:1"
    con = open_duckdb(catalog)
    try:
        for s in range(1, 5):
            assert con.execute(f"SELECT count(*) FROM lake.main.events AT (VERSION => {s})").fetchone()[0] == s * 10
        feed = con.execute(
            "SELECT count(*), count(DISTINCT rowid) FROM ducklake_table_changes('lake', 'main', 'events', 1, 4)"
        ).fetchone()
        assert feed == (40, 40)
    finally:
        con.close()
    for s in range(1, 5):
        assert lake.scan("main.events", snapshot=s).num_rows == s * 10


def test_schema_changes(spark: SparkSession, sqlite_catalog: Any) -> None:
    catalog = sqlite_catalog
    sink = sink_for(catalog)
    sink(batch(spark, 0, 5), 0)
    wider = batch(spark, 5, 5).withColumn("country", F.lit("NL"))
    with pytest.raises(SchemaMismatchError, match=r"column 'country' is not in table main\.events.*merge_schema=True"):
        sink(wider, 1)
    bad = batch(spark, 5, 5).withColumn("amount", F.lit("x"))
    with pytest.raises(SchemaMismatchError, match=r"column 'amount'.*float64.*varchar"):
        sink(bad, 1)
    lake = pdl.connect(catalog.url)
    assert len(lake.snapshots()) == 2
    merging = sink_for(catalog, merge_schema=True)
    merging(wider, 1)
    merging(batch(spark, 10, 2000).withColumn("country", F.lit("DE")), 2)
    assert len(lake.snapshots()) == 4  # the ALTER rides in the batch's own snapshot
    assert lake.snapshots()[2].changes_made == "altered_table:1,inlined_insert:1"
    con = open_duckdb(catalog)
    try:
        assert con.execute("SELECT count(*), count(country) FROM lake.main.events").fetchone() == (2010, 2005)
    finally:
        con.close()


# A foreachBatch query restarted from its checkpoint (the re-run batch skipped, the query id kept as app id) runs in
# tests/integration/test_sink_upsert.py's test_streaming_query_with_restart, one query feeding a plain sink and an
# upsert sink.


def test_writestream_format_ducklake(spark: SparkSession, sqlite_catalog: Any, tmp_path: Path) -> None:
    catalog = sqlite_catalog  # one backend: the catalog is not under test here (module docstring)
    pdl.register(spark)
    source = tmp_path / "in"
    source.mkdir()
    for i, n in enumerate([4, 2500, 6]):
        rows = [{"id": i * 10000 + j, "kind": "k", "amount": 1.0} for j in range(n)]
        path = source / f"f{i}.json"
        path.write_text("\n".join(json.dumps(r) for r in rows))
        os.utime(path, (1_700_000_000 + i, 1_700_000_000 + i))

    def run() -> None:
        query = (
            spark.readStream.schema(SCHEMA)
            .option("maxFilesPerTrigger", 1)
            .json(str(source))
            .writeStream.format("ducklake")
            .option("catalog", catalog.url)
            .option("dataPath", catalog.data_path)
            .option("data_inlining_row_limit", "100")
            .option("checkpointLocation", str(tmp_path / "ck"))
            .trigger(availableNow=True)
            .start("main.ws")
        )
        query.awaitTermination(120)
        assert query.exception() is None

    run()
    lake = pdl.connect(catalog.url)
    assert [s.changes_made for s in lake.snapshots()[1:]] == [
        'created_table:"main"."ws",inlined_insert:1',
        "inserted_into_table:1",
        "inlined_insert:1",
    ]
    newest = max(int(p.name) for p in (tmp_path / "ck" / "commits").iterdir() if p.name.isdigit())
    os.remove(tmp_path / "ck" / "commits" / str(newest))
    os.remove(tmp_path / "ck" / "commits" / f".{newest}.crc")
    run()  # batch 2 is re-run and skipped
    assert len(lake.snapshots()) == 4
    assert lake.scan("main.ws").num_rows == 2510
    con = open_duckdb(catalog)
    try:
        assert con.execute("SELECT count(*) FROM lake.main.ws").fetchone()[0] == 2510
    finally:
        con.close()


HOSTILE_NESTED = "id BIGINT, a ARRAY<ARRAY<STRING>>, m MAP<STRING, STRUCT<g: STRING>>, s STRUCT<m: MAP<STRING, INT>>"


def test_sink_inlines_hostile_nested_strings_duckdb_reads_them(spark: SparkSession, catalog: Any) -> None:
    """Brackets, quotes, backslashes (and on PostgreSQL a NUL, which goes to Parquet) inside nested strings."""
    rows = [
        (0, [["]"], ["[", "]]"]], {"a}": ("x",), "\\'": ("y'",)}, ({"a}": 1},)),
        (1, [["it's", "a\\"], None], {"}": ("'}",), "'": ("\\",)}, ({"k=v": 2, "a\\": 3},)),
        (2, [["NULL", "", " x "]], {"{a=1}": None}, None),
    ]
    nul = [(3, [["a\x00b"]], {"\x00": ("\x00",)}, ({"z": 4},))]
    sink = sink_for(catalog)
    first = spark.createDataFrame(rows, HOSTILE_NESTED)
    second = spark.createDataFrame(nul, HOSTILE_NESTED)
    sink(first, 0)
    sink(second, 1)
    # a NUL cannot be held by PostgreSQL's varchar: that batch alone goes to Parquet, kept exactly
    nul_mode = "parquet" if catalog.backend == "postgres" else "inlined"
    assert [m.mode for m in sink.metrics] == ["inlined", nul_mode]
    expected = canonical_rows(pa.concat_tables([first.toArrow(), second.toArrow()]))
    lake = pdl.connect(catalog.url)
    con = open_duckdb(catalog)
    try:
        assert canonical_rows(con.execute("SELECT * FROM lake.main.events").to_arrow_table()) == expected
        assert canonical_rows(lake.scan("main.events")) == expected
        lake.flush_inlined_data("main.events")
        assert canonical_rows(con.execute("SELECT * FROM lake.main.events").to_arrow_table()) == expected
    finally:
        con.close()
        lake.close()
