"""pyspark-ducklake: DuckLake tables for Apache Spark and Python."""

from __future__ import annotations

from pyspark_ducklake.catalog.transaction import RetryConfig
from pyspark_ducklake.exceptions import DuckLakeError
from pyspark_ducklake.lake import Lake, LakeTable, connect

__version__ = "0.1.0"


def ducklake_sink(table: str, **options: object) -> object:
    """A ``foreachBatch`` function committing each micro-batch to ``table`` (:mod:`pyspark_ducklake.streaming.sink`).

    Raises:
        InvalidOptionError: an unknown option (naming the closest valid one) or a value that does not parse.
    """
    from pyspark_ducklake.options import Entry, check_options, lookup
    from pyspark_ducklake.streaming.sink import ducklake_sink as _sink

    check_options(options, Entry.SINK)
    kwargs = {}
    for key, value in options.items():
        option = lookup(key, Entry.SINK)
        assert option is not None  # the sink takes no ducklake.s3.* names
        kwargs[option.python_name] = value
    return _sink(table, **kwargs)  # type: ignore[arg-type]


def read_table(spark: object, table: str, **options: object) -> object:
    """``table`` as a DataFrame read by Spark's own Parquet reader, the fast read path (falls back to the
    ``ducklake`` data source where that cannot be exact); see :func:`pyspark_ducklake.spark_parquet_read.read_table`."""
    from pyspark_ducklake.options import check_keywords
    from pyspark_ducklake.spark_parquet_read import read_table as _read_table

    check_keywords(options, ("snapshot", "timestamp", "catalog", "data_path", "columns", "options"), "read_table()")
    return _read_table(spark, table, **options)  # type: ignore[arg-type]


def write_table(df: object, table: str, **options: object) -> object:
    """Write ``df`` to ``table`` with Spark's own Parquet writer, the fast write path (falls back to the ``ducklake``
    data source where that cannot be exact); see :func:`pyspark_ducklake.spark_parquet_write.write_table`."""
    from pyspark_ducklake.options import check_keywords
    from pyspark_ducklake.spark_parquet_write import write_table as _write_table

    allowed = ("mode", "partition_by", "catalog", "data_path", "options", "txn_app_id", "txn_version")
    check_keywords(options, allowed, "write_table()")
    return _write_table(df, table, **options)  # type: ignore[arg-type]


def add_files(spark: object, table: str, paths: object, **options: object) -> int:
    """Register existing Parquet files in ``table`` from a Spark session, as DuckDB's ``ducklake_add_data_files``
    does; see :func:`pyspark_ducklake.spark_add_files.add_files`."""
    from pyspark_ducklake.options import check_keywords
    from pyspark_ducklake.spark_add_files import add_files as _add_files

    check_keywords(
        options,
        ("allow_missing", "ignore_extra_columns", "hive_partitioning", "catalog", "data_path", "options"),
        "add_files()",
    )
    return _add_files(spark, table, paths, **options)  # type: ignore[arg-type]


def debezium(df: object, schema: object, **options: object) -> object:
    """Debezium's change events (Kafka messages) as the rows they leave plus ``op`` and ``lsn``, for an upsert; see
    :func:`pyspark_ducklake.spark_debezium.debezium`."""
    from pyspark_ducklake.options import check_keywords
    from pyspark_ducklake.spark_debezium import debezium as _debezium

    check_keywords(options, ("value_column", "op_column", "order_column", "timestamp_unit"), "debezium()")
    return _debezium(df, schema, **options)  # type: ignore[arg-type]


def __getattr__(name: str) -> object:
    # PySpark finds Python data sources in installed packages named pyspark_* by their DefaultSource
    # (pyspark/sql/worker/lookup_data_sources.py); loaded lazily so that `import pyspark_ducklake` stays light.
    if name == "DefaultSource":
        from pyspark_ducklake.datasource import DuckLakeDataSource

        return DuckLakeDataSource
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def register(spark: object) -> object:
    """Register the ``ducklake`` Spark data source (``spark.read.format("ducklake")``) with ``spark``."""
    from pyspark_ducklake.datasource import register as _register

    return _register(spark)


__all__ = [
    "DuckLakeError",
    "Lake",
    "LakeTable",
    "RetryConfig",
    "__version__",
    "add_files",
    "connect",
    "debezium",
    "ducklake_sink",
    "read_table",
    "register",
    "write_table",
]
