"""Maintenance as Spark jobs, for tables too large for one process: the executors rewrite, the driver commits.

``merge_adjacent_files(spark, "main.events")`` plans the merge on the driver exactly as
:meth:`pyspark_ducklake.Lake.merge_adjacent_files` does, rewrites each group of files in its own Spark task (one task
per output file, reading only that group), and commits every merged file in one snapshot;
``rewrite_data_files(spark, "main.events")`` does the same for :meth:`pyspark_ducklake.Lake.rewrite_data_files`. A
failed job commits nothing; files its finished tasks wrote are unreferenced and ``delete_orphan_files`` removes them.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

import pyarrow as pa

from pyspark_ducklake.options import CATALOG, DATA_PATH
from pyspark_ducklake.spark.lake_config import LakeConfig, spark_conf
from pyspark_ducklake.table.maintenance.compaction import MergedFile, MergeGroup, rewrite_group
from pyspark_ducklake.table.maintenance.rewrite import RewriteGroup, rewrite_deletes

_RESULT = pa.schema([("i", pa.int64()), ("payload", pa.binary())])
_G = TypeVar("_G")
_R = TypeVar("_R")

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from pyspark_ducklake.table.maintenance.compaction import CompactionReport
    from pyspark_ducklake.table.maintenance.rewrite import RewriteReport


def _in_tasks(spark: SparkSession, groups: list[_G], rewrite: Callable[[_G], _R]) -> list[_R]:
    """``rewrite`` of each group in its own Spark task, the results in the groups' order."""
    if not groups:
        return []

    def task(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for index in batch.column(0).to_pylist():
                done = rewrite(groups[index])
                yield pa.RecordBatch.from_pydict({"i": [index], "payload": [pickle.dumps(done)]}, _RESULT)

    # One partition per group (spark.range with as many slices), through DataFrames rather than
    # sparkContext.parallelize, which a Spark Connect session does not have.
    ids = spark.range(0, len(groups), 1, len(groups))
    done = ids.mapInArrow(task, "i bigint, payload binary").collect()
    return [pickle.loads(row["payload"]) for row in sorted(done, key=lambda row: row["i"])]


def spark_rewrite(
    spark: SparkSession, storage_options: dict[str, Any] | None = None
) -> Callable[[list[MergeGroup]], list[MergedFile]]:
    """A ``rewrite`` for :meth:`Lake.merge_adjacent_files` that runs one Spark task per group."""
    return lambda groups: _in_tasks(spark, groups, lambda g: rewrite_group(g, storage_options))


def spark_rewrite_deletes(
    spark: SparkSession, storage_options: dict[str, Any] | None = None
) -> Callable[[list[RewriteGroup]], list[MergedFile | None]]:
    """A ``rewrite`` for :meth:`Lake.rewrite_data_files` that runs one Spark task per group."""
    return lambda groups: _in_tasks(spark, groups, lambda g: rewrite_deletes(g, storage_options))


def merge_adjacent_files(
    spark: SparkSession,
    table: str | None = None,
    *,
    catalog: str | None = None,
    data_path: str | None = None,
    **options: Any,
) -> CompactionReport:
    """Merge adjacent small files of ``table`` (or of every table) with the rewriting done by Spark executors.

    Args:
        spark: the session; the lake comes from ``catalog``/``data_path``, else the ``spark.ducklake.*`` conf, else
            the ``DUCKLAKE_*`` environment.
        table: ``"schema.table"``; None merges every table.
        **options: as :meth:`pyspark_ducklake.Lake.merge_adjacent_files` (``target_file_size``, ``dry_run``...).

    Returns:
        The :class:`~pyspark_ducklake.table.maintenance.compaction.CompactionReport`.
    """
    given = {k: v for k, v in ((CATALOG, catalog), (DATA_PATH, data_path)) if v}
    config = LakeConfig.resolve(given, spark_conf(spark).get)
    lake = config.connect()
    try:
        report: CompactionReport = lake.merge_adjacent_files(
            table, rewrite=spark_rewrite(spark, lake.storage_options), **options
        )
        return report
    finally:
        lake.close()


def rewrite_data_files(
    spark: SparkSession,
    table: str | None = None,
    *,
    catalog: str | None = None,
    data_path: str | None = None,
    **options: Any,
) -> RewriteReport:
    """Rewrite data files with deletes of ``table`` (or of every table) with the rewriting done by Spark executors,
    one task per output file.

    Args:
        spark: the session; the lake comes from ``catalog``/``data_path``, else the ``spark.ducklake.*`` conf, else
            the ``DUCKLAKE_*`` environment.
        table: ``"schema.table"``; None rewrites every table.
        **options: as :meth:`pyspark_ducklake.Lake.rewrite_data_files` (``delete_threshold``, ``dry_run``).

    Returns:
        The :class:`~pyspark_ducklake.table.maintenance.rewrite.RewriteReport`.
    """
    given = {k: v for k, v in ((CATALOG, catalog), (DATA_PATH, data_path)) if v}
    config = LakeConfig.resolve(given, spark_conf(spark).get)
    lake = config.connect()
    try:
        report: RewriteReport = lake.rewrite_data_files(
            table, rewrite=spark_rewrite_deletes(spark, lake.storage_options), **options
        )
        return report
    finally:
        lake.close()
