"""Maintenance with Spark: the merge's and rewrite's files written by a Spark job (into a sorted table too); the
change-feed stream after our expiry."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

import pyspark_ducklake as pdl
from pyspark_ducklake.batch.compaction_job import merge_adjacent_files, rewrite_data_files
from pyspark_ducklake.exceptions import DataLossError
from pyspark_ducklake.spark.change_feed import feed_schema
from pyspark_ducklake.spark.lake_config import LakeConfig
from pyspark_ducklake.spark_parquet_write import write_table
from pyspark_ducklake.streaming.change_feed_stream import DuckLakeChangeFeedReader
from tests.support.compare import canonical_rows

SCHEMA = pa.schema([("id", pa.int64()), ("k", pa.string())])


def rows(start: int, n: int, k: str) -> pa.Table:
    return pa.table({"id": list(range(start, start + n)), "k": [k] * n}, schema=SCHEMA)


def test_spark_job_rewrites_the_groups(spark: SparkSession, sqlite_catalog: Any) -> None:
    catalog = sqlite_catalog
    lake = pdl.connect(catalog.url, catalog.data_path, data_inlining_row_limit=0)
    lake.create_table("main.s", SCHEMA, partition_by=["k"])
    snaps = [
        lake.append("main.s", pa.concat_tables([rows(i * 10, 5, "a"), rows(i * 10 + 5, 5, "b")])) for i in range(3)
    ]
    history = {
        s: canonical_rows(lake.scan("main.s", snapshot=s, columns=["rowid", "snapshot_id", "id", "k"])) for s in snaps
    }
    report = merge_adjacent_files(spark, "main.s", catalog=catalog.url, target_file_size="1MB")
    assert (report.files_processed, report.files_created) == (6, 2)  # one task (and file) per partition
    assert report.snapshot_id == snaps[-1] + 1
    for s, expected in history.items():
        assert canonical_rows(lake.scan("main.s", snapshot=s, columns=["rowid", "snapshot_id", "id", "k"])) == expected
    assert len(lake.table_changes("main.s", 1, report.snapshot_id)) == 30  # inserts only; the merge emits nothing
    lake.close()


def test_stream_fails_on_snapshots_our_expiry_removed(sqlite_catalog: Any) -> None:
    catalog = sqlite_catalog
    lake = pdl.connect(catalog.url, catalog.data_path)
    lake.create_table("main.f", SCHEMA)
    done = lake.append("main.f", rows(0, 3, "a"))
    later = [lake.append("main.f", rows(10 + i, 1, "a")) for i in range(3)]
    lake.expire_snapshots(versions=later[:2])
    config = LakeConfig.resolve({"catalog": catalog.url})
    table = lake.table("main.f").table_schema
    for fail, expected in (("true", None), ("false", later[-1])):
        stream = DuckLakeChangeFeedReader(
            config, "main.f", {"startingSnapshot": "1", "failOnDataLoss": fail}, feed_schema(table)
        )
        if expected is None:
            with pytest.raises(DataLossError, match=f"needs snapshots {later[0]}..{later[1]}"):
                stream.partitions({"snapshot_id": done}, {"snapshot_id": later[-1]})
        else:  # skips ahead with a warning
            (part,) = stream.partitions({"snapshot_id": done}, {"snapshot_id": later[-1]})
            assert (part.part.plan.start, part.part.plan.end) == (expected, expected)
            assert part.part.rows == 1  # the one row appended there
    lake.close()


def _stream(catalog: Any, lake: Any, fail: str) -> DuckLakeChangeFeedReader:
    config = LakeConfig.resolve({"catalog": catalog.url})
    table = lake.table("main.f").table_schema
    options = {"startingSnapshot": "1", "failOnDataLoss": fail}
    return DuckLakeChangeFeedReader(config, "main.f", options, feed_schema(table))


def test_stream_fails_on_a_gap_inside_its_range(sqlite_catalog: Any) -> None:
    """Snapshots expired in the middle of a micro-batch's range (not right after its start) are data loss too."""
    catalog = sqlite_catalog
    lake = pdl.connect(catalog.url, catalog.data_path, data_inlining_row_limit=0)
    lake.create_table("main.f", SCHEMA)
    done = lake.append("main.f", rows(0, 3, "a"))
    later = [lake.append("main.f", rows(10 + i, 1, "a")) for i in range(4)]
    lake.delete("main.f", [("id", "=", 11)])  # ends the file of later[1] before its snapshots go
    lake.expire_snapshots(versions=later[1:3])
    head = lake.current_snapshot_id()
    with pytest.raises(DataLossError, match=f"needs snapshots {later[1]}..{later[2]}"):
        _stream(catalog, lake, "true").latestOffset({"snapshot_id": done}, None)  # type: ignore[arg-type]
    with pytest.raises(DataLossError, match=f"needs snapshots {later[1]}..{later[2]}"):
        _stream(catalog, lake, "true").partitions({"snapshot_id": done}, {"snapshot_id": head})
    # failOnDataLoss=false: warned, and what is left of the range is read
    parts = _stream(catalog, lake, "false").partitions({"snapshot_id": done}, {"snapshot_id": head})
    assert sum(p.part.rows for p in parts) >= 2
    lake.close()


def test_stream_fails_when_expiry_lands_while_it_plans(sqlite_catalog: Any, monkeypatch: Any) -> None:
    """An expiry that commits after the micro-batch checked its range but before its plan read the catalog: the plan
    may lack those snapshots' changes, so the batch fails (it used to go on without them)."""
    catalog = sqlite_catalog
    lake = pdl.connect(catalog.url, catalog.data_path, data_inlining_row_limit=0)
    lake.create_table("main.f", SCHEMA)
    done = lake.append("main.f", rows(0, 3, "a"))
    later = [lake.append("main.f", rows(10 + i, 1, "a")) for i in range(3)]
    import pyspark_ducklake.streaming.change_feed_stream as feed_stream

    planned = feed_stream.change_partitions

    def expiry_lands_first(*args: Any) -> Any:
        lake.expire_snapshots(versions=later[:2])
        return planned(*args)

    monkeypatch.setattr(feed_stream, "change_partitions", expiry_lands_first)
    with pytest.raises(DataLossError, match=f"needs snapshots {later[0]}..{later[1]}"):
        _stream(catalog, lake, "true").partitions({"snapshot_id": done}, {"snapshot_id": later[-1]})
    lake.close()


def test_spark_writes_sorted_and_rewrites_deletes(spark: SparkSession, sqlite_catalog: Any) -> None:
    """A sorted, partitioned table: Spark's writes (write_table falls back to the data source, which sorts each
    file), then rewrite_data_files as a Spark job: one task per partition, the files' rows in the sort order, every
    row with its id, time travel before the rewrite unchanged."""
    catalog = sqlite_catalog
    lake = pdl.connect(catalog.url, catalog.data_path, data_inlining_row_limit=0)
    lake.create_table("main.w", SCHEMA, partition_by=["k"])
    lake.set_sort_order("main.w", ["id DESC"])
    df = spark.createDataFrame([(i, "ab"[i % 2]) for i in range(40)], "id bigint, k string").repartition(3)
    assert not write_table(df.coalesce(1), "main.w", catalog=catalog.url).native  # a file per partition
    lake.create_table("main.u", SCHEMA)
    lake.set_sort_order("main.u", ["k", "id DESC"])
    outcome = write_table(df, "main.u", catalog=catalog.url)
    assert not outcome.native and outcome.reason == "the table is sorted (SET SORTED BY)"
    for path in lake.list_files("main.u").column("data_file").to_pylist():  # one file per Spark task
        keys = [(r["k"], -r["id"]) for r in pq.read_table(path).to_pylist()]
        assert keys == sorted(keys)
    for path in lake.list_files("main.w").column("data_file").to_pylist():
        ids = pq.read_table(path).column("id").to_pylist()
        assert ids == sorted(ids, reverse=True)
    lake.delete("main.w", [("id", "<", 30)])
    head = lake.current_snapshot_id()
    before = canonical_rows(lake.scan("main.w", columns=["rowid", "id", "k"]))
    report = rewrite_data_files(spark, "main.w", catalog=catalog.url, delete_threshold=0.5)
    assert report.files_created == 2 and report.rows_removed == 30 and report.snapshot_id == head + 1
    assert canonical_rows(lake.scan("main.w", columns=["rowid", "id", "k"])) == before
    assert lake.scan("main.w", snapshot=head - 1).num_rows == 40  # before the delete: the old files
    for path in lake.list_files("main.w").column("data_file").to_pylist():
        ids = pq.read_table(path).column("id").to_pylist()
        assert ids == sorted(ids, reverse=True) and len(ids) == 5  # 30..39 of each partition
    lake.close()
