"""``add_files(spark, table, paths)``: register existing Parquet files in a table from a Spark session.

Only the driver touches the catalog and reads the files' footers (and their columns, for statistics); nothing runs
on executors. The lake comes from ``catalog`` / ``data_path`` or ``options`` (the ``write`` options of the data
source: retry and ``ducklake.s3.*`` settings), then the ``spark.ducklake.*`` conf, then the environment, as for
``spark.read.format("ducklake")``. The files are registered as :meth:`pyspark_ducklake.Lake.add_files` registers
them (DuckDB's ``ducklake_add_data_files``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pyspark_ducklake.exceptions import InvalidOptionError
from pyspark_ducklake.options import Entry, check_options
from pyspark_ducklake.spark.lake_config import LakeConfig, spark_conf


def add_files(
    spark: Any,
    table: str,
    paths: str | Sequence[str],
    *,
    allow_missing: bool = False,
    ignore_extra_columns: bool = False,
    hive_partitioning: bool | None = None,
    catalog: str | None = None,
    data_path: str | None = None,
    options: Mapping[str, str] | None = None,
) -> int:
    """Register the Parquet files at ``paths`` (paths, globs) in ``table``; returns the new snapshot id.

    Raises:
        SchemaMismatchError, DataFileError, InvalidOptionError: as :meth:`pyspark_ducklake.Lake.add_files`;
            nothing is written.
        LakeNotConfiguredError: no catalog given or configured.
        CommitFailedError, CommitConflictError, CommitStateUnknownError: see the commit protocol.
    """
    opts = {str(k): str(v) for k, v in (options or {}).items()}
    for key, value in (("catalog", catalog), ("dataPath", data_path)):
        if value is None:
            continue
        if key.lower() in {k.lower() for k in opts}:
            raise InvalidOptionError(f"add_files() got option {key} both as an argument and in options; give it once")
        opts[key] = value
    check_options(opts, Entry.WRITE)
    lake = LakeConfig.resolve(opts, spark_conf(spark).get).connect()
    try:
        return lake.add_files(
            table,
            paths,
            allow_missing=allow_missing,
            ignore_extra_columns=ignore_extra_columns,
            hive_partitioning=hive_partitioning,
        )
    finally:
        lake.close()


__all__ = ["add_files"]
