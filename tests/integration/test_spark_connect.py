"""Everything a classic session does, from a Spark Connect client (``SparkSession.builder.remote``) of a local Connect
server started from pyspark's own jars: batch reads and writes, ``register`` with the session's conf, the sink, the
change feed, the fast paths' fallback to the data source and the Spark compaction job; exact against DuckDB."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

import pyspark_ducklake as pdl
from pyspark_ducklake.batch.compaction_job import merge_adjacent_files
from pyspark_ducklake.exceptions import NoSuchTableError
from pyspark_ducklake.spark.connect import is_connect
from tests.support import session_scenarios as scenarios
from tests.support.compare import canonical_rows

# One Connect server for the run: every Connect test on the same xdist worker.
pytestmark = pytest.mark.xdist_group("connect")


def test_a_connect_session_has_no_spark_context(connect_spark: SparkSession) -> None:
    assert is_connect(connect_spark)
    with pytest.raises(Exception, match="JVM_ATTRIBUTE_NOT_SUPPORTED"):
        _ = connect_spark.sparkContext


def test_a_server_started_outside_the_checkout_finds_the_data_source(
    connect_spark: SparkSession, sqlite_catalog: Any
) -> None:
    """The server runs this venv's python in a temporary folder, without ``PYTHONPATH``: PySpark's lookup there
    lists the editable install (tests/unit/test_discovery.py). A new session, which nothing registered, reads
    ``format("ducklake")``."""
    lake = pdl.connect(sqlite_catalog.url, sqlite_catalog.data_path)
    lake.create_table("main.found", pa.schema([("id", pa.int64())]))
    lake.append("main.found", pa.table({"id": [1, 2]}))
    fresh = connect_spark.newSession()
    try:
        rows = fresh.read.format("ducklake").option("catalog", sqlite_catalog.url).load("main.found").collect()
    finally:
        fresh.stop()
    assert sorted(r.id for r in rows) == [1, 2]


# One backend (SQLite) for the batch paths: the catalog is not under test here (the classic batch tests run both
# backends, and the standalone cluster's classic driver runs this scenario on PostgreSQL).
def test_batch_write_and_read(connect_spark: SparkSession, sqlite_catalog: Any) -> None:
    scenarios.batch_write_and_read(connect_spark, sqlite_catalog)


# The streams once: the catalog code under them is the classic tests' own, and each Connect stream costs tens of
# seconds (its start-up on the server most of it), so the Connect side starts three: the sink's two runs (SQLite), and
# one stream that is both the change feed's (read from PostgreSQL) and writeStream.format("ducklake")'s (written to
# SQLite); the standalone cluster's classic driver runs session_scenarios' separate feed and format streams.
def test_sink_streams(connect_spark: SparkSession, sqlite_catalog: Any, tmp_path: Path) -> None:
    scenarios.sink_streams(connect_spark, sqlite_catalog, tmp_path, write_stream=False)


def test_change_feed_batch_and_stream_into_write_stream(
    connect_spark: SparkSession, pg_catalog: Any, sqlite_catalog: Any, tmp_path: Path
) -> None:
    """The change feed as a batch read and as a stream (three snapshots per micro-batch: two micro-batches over the
    history, then one more resumed from its checkpoint after more changes), written by ``writeStream.format
    ("ducklake")`` to another lake: DuckDB reads there exactly DuckDB's ``table_changes`` of the first, no row
    twice."""
    scenarios.change_feed(connect_spark, pg_catalog, tmp_path, into=sqlite_catalog)


def test_sink_without_app_id_fails_naming_it(connect_spark: SparkSession, sqlite_catalog: Any, tmp_path: Path) -> None:
    """Spark Connect does not tell a foreachBatch function its query's id: the sink refuses to guess, and the batch
    writes nothing."""
    scenarios.write_json_batches(tmp_path / "in", batches=1, rows=5)
    sink = pdl.ducklake_sink("main.t", catalog=sqlite_catalog.url, data_path=sqlite_catalog.data_path)
    query = (
        connect_spark.readStream.schema("id bigint, s string, x double")
        .json(str(tmp_path / "in"))
        .writeStream.foreachBatch(sink)
        .option("checkpointLocation", str(tmp_path / "ck"))
        .trigger(availableNow=True)
        .start()
    )
    with pytest.raises(Exception, match=r"on Spark Connect cannot find .*ducklake_sink\('main\.t', app_id="):
        query.awaitTermination(300)
    with pytest.raises(NoSuchTableError):
        pdl.connect(sqlite_catalog.url).scan("main.t")


def test_register_finds_the_conf_the_server_started_with(connect_spark: SparkSession) -> None:
    from tests.conftest import CONNECT_SERVER_CONF

    key, value = CONNECT_SERVER_CONF
    source: Any = pdl.register(connect_spark)
    assert source.spark_conf[key] == value


def test_register_takes_the_session_conf(connect_spark: SparkSession, sqlite_catalog: Any) -> None:
    """``spark.ducklake.*`` set on the Connect session reaches the data source through ``register`` (read from the
    session's conf: there is no SparkConf on a Connect client)."""
    conf = {"spark.ducklake.catalog": sqlite_catalog.url, "spark.ducklake.dataPath": sqlite_catalog.data_path}
    try:
        for key, value in conf.items():
            connect_spark.conf.set(key, value)
        pdl.register(connect_spark)
        df = scenarios.events(connect_spark, 0, 20)
        df.write.format("ducklake").mode("append").save("main.by_conf")
        ours = connect_spark.read.format("ducklake").load("main.by_conf")
        assert canonical_rows(ours.toArrow()) == scenarios.duck_rows(sqlite_catalog, "SELECT * FROM lake.main.by_conf")
        assert canonical_rows(df.toArrow()) == canonical_rows(ours.toArrow())
    finally:
        for key in conf:
            connect_spark.conf.unset(key)
        pdl.register(connect_spark)


def test_fast_paths_fall_back_to_the_data_source(connect_spark: SparkSession, sqlite_catalog: Any) -> None:
    """``write_table``/``read_table`` need the JVM (footers rewritten on the client, paths qualified by Hadoop): on
    Connect they go through the data source, say so, and give the same rows. One backend: the fallback does not
    depend on the catalog."""
    reason = scenarios.fast_paths(connect_spark, sqlite_catalog, native=False)
    assert reason is not None and reason.count("Spark Connect") == 2


def test_compaction_job_runs_on_connect(connect_spark: SparkSession, sqlite_catalog: Any) -> None:
    """The Spark compaction job hands its groups to tasks through a DataFrame, not ``sparkContext.parallelize``."""
    pdl.register(connect_spark)
    for start in (0, 100, 200):
        scenarios.writer(scenarios.events(connect_spark, start, 100), sqlite_catalog).save("main.small")
    before = scenarios.duck_rows(sqlite_catalog, "SELECT * FROM lake.main.small")
    report = merge_adjacent_files(
        connect_spark, "main.small", catalog=sqlite_catalog.url, data_path=sqlite_catalog.data_path
    )
    assert (report.files_processed, report.files_created) == (3, 1)
    assert scenarios.duck_rows(sqlite_catalog, "SELECT * FROM lake.main.small") == before
    files = "SELECT count(*) AS id FROM ducklake_list_files('lake', 'small')"
    assert scenarios.duck_rows(sqlite_catalog, files) == [(1,)]


def test_add_files_and_debezium_on_connect(connect_spark: SparkSession, sqlite_catalog: Any, tmp_path: Path) -> None:
    """``pdl.add_files`` (the session's conf only) and ``pdl.debezium`` (DataFrame functions and a DDL schema parsed
    through the session) from a Connect client; the added rows as DuckDB reads them."""
    lake = pdl.connect(sqlite_catalog.url, sqlite_catalog.data_path)
    lake.create_table("main.added", pa.schema([("id", pa.int64()), ("s", pa.string())]))
    pq.write_table(pa.table({"id": [1, 2, 3], "s": ["a", None, "it's"]}), tmp_path / "f.parquet")
    pdl.add_files(connect_spark, "main.added", str(tmp_path / "f.parquet"), catalog=sqlite_catalog.url)
    assert scenarios.duck_rows(sqlite_catalog, "SELECT * FROM lake.main.added") == [(1, "a"), (2, None), (3, "it's")]

    change = {"before": None, "after": {"id": 5, "s": "x"}, "op": "c", "source": {"lsn": 42}, "ts_ms": 0}
    events = connect_spark.createDataFrame([(json.dumps(change),)], "value STRING")
    rows = [tuple(r) for r in pdl.debezium(events, "id BIGINT, s STRING").collect()]  # type: ignore[attr-defined]
    assert rows == [(5, "x", "c", 42)]


def test_ctas_is_refused_naming_create_table_then_insert(connect_spark: SparkSession, sqlite_catalog: Any) -> None:
    """PySpark passes a Python data source no OPTIONS for CREATE TABLE ... AS SELECT, on Connect as on a classic
    session: the error shows the route, which then works (docs/spark.md#sql-tables) and DuckDB reads its rows."""
    pdl.register(connect_spark)
    url, data_path = sqlite_catalog.url, sqlite_catalog.data_path
    options = f"table 'main.low', catalog '{url}', dataPath '{data_path}'"
    with pytest.raises(Exception, match=r"CREATE TABLE \.\.\. AS SELECT.*then CREATE TABLE.*INSERT INTO") as ctas:
        connect_spark.sql(f"CREATE TABLE connect_ctas USING ducklake OPTIONS ({options}) AS SELECT 1L AS id")
    assert "no DuckLake table given" in str(ctas.value)
    assert not connect_spark.catalog.tableExists("connect_ctas")
    low = connect_spark.sql("SELECT 1L AS id")
    low.write.format("ducklake").mode("append").option("catalog", url).option("dataPath", data_path).save("main.low")
    connect_spark.sql(f"CREATE TABLE connect_ctas USING ducklake OPTIONS ({options})")
    try:
        connect_spark.sql("INSERT INTO connect_ctas VALUES (2)")
        assert scenarios.duck_rows(sqlite_catalog, "SELECT * FROM lake.main.low") == [(1,), (2,)]
    finally:
        connect_spark.sql("DROP TABLE connect_ctas")
