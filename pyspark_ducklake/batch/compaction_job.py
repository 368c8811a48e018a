"""Maintenance as Spark jobs, for tables too large for one process: the executors rewrite, the driver commits.

``merge_adjacent_files(spark, "main.events")`` plans the merge on the driver exactly as
:meth:`pyspark_ducklake.Lake.merge_adjacent_files` does, rewrites each group of files in its own Spark task (one task
per output file, reading only that group), and commits every merged file in one snapshot. A failed job commits
nothing; files its finished tasks wrote are unreferenced and ``delete_orphan_files`` removes them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pyspark_ducklake.options import CATALOG, DATA_PATH
from pyspark_ducklake.spark.lake_config import LakeConfig, spark_conf
from pyspark_ducklake.table.maintenance.compaction import MergedFile, MergeGroup, rewrite_group

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from pyspark_ducklake.table.maintenance.compaction import CompactionReport


def spark_rewrite(
    spark: SparkSession, storage_options: dict[str, Any] | None = None
) -> Callable[[list[MergeGroup]], list[MergedFile]]:
    """A ``rewrite`` for :meth:`Lake.merge_adjacent_files` that runs one Spark task per group."""

    def rewrite(groups: list[MergeGroup]) -> list[MergedFile]:
        indexed = list(enumerate(groups))
        rdd = spark.sparkContext.parallelize(indexed, max(1, len(indexed)))
        done = rdd.map(lambda item: (item[0], rewrite_group(item[1], storage_options))).collect()
        return [merged for _, merged in sorted(done, key=lambda pair: pair[0])]

    return rewrite


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
