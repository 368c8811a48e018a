"""Idempotent batch writes (Delta's ``txnAppId``/``txnVersion``) through ``df.write.format("ducklake")`` and
``pdl.write_table``, as a user's ``foreachBatch`` function makes them: a version at or below the app's last committed
one writes nothing, on SQLite and PostgreSQL, checked by DuckDB."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

import pyspark_ducklake as pdl
from tests.support.bad_inputs import expect_bad_input
from tests.support.duck import open_duckdb


def rows(spark: SparkSession, version: int, n: int = 30) -> Any:
    start = version * 1000
    return spark.range(start, start + n, 1, 2).select(F.col("id"), F.lit(version).alias("version"))


def files_of(lake: pdl.Lake) -> list[str]:
    return sorted(str(p) for p in Path(lake.data_path).rglob("*.parquet"))


def source_write(df: Any, catalog: Any, table: str, **options: Any) -> None:
    w = df.write.format("ducklake").mode("append").option("catalog", catalog.url).option("dataPath", catalog.data_path)
    for k, v in options.items():
        w = w.option(k, v)
    w.save(table)


def test_replayed_versions_write_nothing(spark: SparkSession, catalog: Any) -> None:
    pdl.register(spark)
    lake = pdl.connect(catalog.url, catalog.data_path)
    # a foreachBatch function replayed after crashes: versions 0, 1, 1 (replay), 0 (older), 2
    versions = [0, 1, 1, 0, 2]
    outcomes = []
    for v in versions:
        outcomes.append(
            pdl.write_table(
                rows(spark, v),
                "main.native",
                catalog=catalog.url,
                data_path=catalog.data_path,
                txn_app_id="etl",
                txn_version=v,
            )
        )
        source_write(rows(spark, v), catalog, "main.source", txnAppId="etl", txnVersion=str(v))
    assert [o.snapshot_id is not None for o in outcomes] == [True] * 5
    assert [o.reason for o in outcomes] == [
        None,
        None,
        "txn ('etl', 1) already committed",
        "txn ('etl', 0) already committed",
        None,
    ]
    # a replay names the snapshot of the app's last committed version, as lake.append does
    assert outcomes[2].snapshot_id == outcomes[3].snapshot_id == outcomes[1].snapshot_id
    for table in ("main.native", "main.source"):
        got = lake.scan(table)
        assert sorted(set(got.column("version").to_pylist())) == [0, 1, 2]
        assert got.num_rows == 90  # each version once
    infos = [json.loads(s.commit_extra_info) for s in lake.snapshots() if s.commit_extra_info]
    assert [(i["txn_app_id"], i["txn_version"]) for i in infos] == [("etl", 0)] * 2 + [("etl", 1)] * 2 + [
        ("etl", 2)
    ] * 2
    # another app id, or the same app id on another table, has its own versions
    pdl.write_table(rows(spark, 1), "main.native", catalog=catalog.url, txn_app_id="other", txn_version=1)
    assert lake.scan("main.native").num_rows == 120
    con = open_duckdb(catalog)
    try:
        assert con.execute("SELECT count(*), count(DISTINCT id) FROM lake.main.source").fetchone() == (90, 90)
        assert con.execute("SELECT count(*) FROM lake.main.native").fetchone() == (120,)
    finally:
        con.close()


def test_replay_through_the_data_source_leaves_no_file(spark: SparkSession, sqlite_catalog: Any) -> None:
    pdl.register(spark)
    lake = pdl.connect(sqlite_catalog.url, sqlite_catalog.data_path)
    source_write(rows(spark, 0), sqlite_catalog, "main.t", txnAppId="a", txnVersion=5)
    state = (lake.current_snapshot_id(), files_of(lake))
    source_write(rows(spark, 0), sqlite_catalog, "main.t", txn_app_id="a", txn_version="5")
    source_write(rows(spark, 0), sqlite_catalog, "main.t", txnAppId="a", txnVersion="4")
    assert (lake.current_snapshot_id(), files_of(lake)) == state
    source_write(rows(spark, 0), sqlite_catalog, "main.t", txnAppId="a", txnVersion="6")
    assert lake.current_snapshot_id() == state[0] + 1


# Each half or invalid pair: only one of the two, a negative, boolean or fractional version, an empty or boolean app id.
BAD_TXN_OPTIONS = [
    {"txnAppId": "a"},
    {"txnVersion": "1"},
    {"txnAppId": "a", "txnVersion": "-1"},
    {"txnAppId": "a", "txnVersion": "false"},
    {"txnAppId": "a", "txnVersion": "1.5"},
    {"txnAppId": "", "txnVersion": "1"},
    {"txnAppId": "false", "txnVersion": "1"},
]


def test_bad_txn_options_write_nothing(spark: SparkSession, sqlite_catalog: Any) -> None:
    """Every bad pair against one table (one table made once, not once per pair): each write refused, nothing
    written, through the data source and through ``write_table``."""
    pdl.register(spark)
    lake = pdl.connect(sqlite_catalog.url, sqlite_catalog.data_path)
    source_write(rows(spark, 0), sqlite_catalog, "main.t")
    for options in BAD_TXN_OPTIONS:
        with expect_bad_input("write-txn-half", lake):
            source_write(rows(spark, 1), sqlite_catalog, "main.t", **options)
        keywords = {"txn_app_id" if k == "txnAppId" else "txn_version": v for k, v in options.items()}
        with expect_bad_input("write-txn-half", lake):
            pdl.write_table(rows(spark, 1), "main.t", catalog=sqlite_catalog.url, **keywords)
    assert lake.scan("main.t").num_rows == 30
