"""The ``ducklake`` Spark data source: one class for every mode (``spark.read``, ``df.write``, ``readStream``,
``writeStream``), handing each to its wing: batch/ for reads, writes and change-feed reads, streaming/ for streams.
It sits above both wings; the fast paths (spark_parquet_read/write) sit above it and fall back to it."""

from __future__ import annotations

from typing import Any, ClassVar

from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceWriter
from pyspark.sql.types import StructType

from pyspark_ducklake.exceptions import InvalidOptionError
from pyspark_ducklake.options import Entry, check_options
from pyspark_ducklake.spark.lake_config import LakeConfig
from pyspark_ducklake.spark.lake_config import spark_conf as session_conf

FORMAT_NAME = "ducklake"


class DuckLakeDataSource(DataSource):
    """A DuckLake table as a Spark data source; the table identifier is the ``load``/``save`` path.

    Options (case-insensitive) are those :data:`pyspark_ducklake.options.OPTIONS` registers for ``read``, ``write``,
    ``readStream`` and ``writeStream``; any other is an ``InvalidOptionError`` naming the closest valid one.

    Rows cross between Python workers and the JVM as Arrow here, which is several times slower than Spark's own
    Parquet reader and writer: :func:`pyspark_ducklake.read_table` and :func:`pyspark_ducklake.write_table` give the
    same results through those (:mod:`pyspark_ducklake.spark_parquet_read`, ``spark_parquet_write``). A Python data
    source cannot use them itself: PySpark 4.3's ``DataSourceReader``/``DataSourceArrowWriter`` only move rows or
    Arrow batches, with no way to hand Spark a JVM plan.
    """

    # Spark conf captured by register(spark): Python data sources run in workers without a SparkSession.
    spark_conf: ClassVar[dict[str, str]] = {}

    @classmethod
    def name(cls) -> str:
        return FORMAT_NAME

    def __init__(self, options: dict[str, str]) -> None:
        super().__init__(options)
        self._config: LakeConfig | None = None
        # The snapshot (or change-feed range) resolved by schema() when load() ran. Spark pickles this instance
        # after schema() and plans every query of the DataFrame from it, so each query reads the same snapshot.
        self._snapshot: int | None = None
        self._feed_range: tuple[int | None, int] | None = None

    def _check(self, *entries: Entry) -> None:
        check_options(dict(self.options), *entries)

    @property
    def config(self) -> LakeConfig:
        if self._config is None:
            self._config = LakeConfig.resolve(dict(self.options), self.spark_conf.get)
        return self._config

    @property
    def identifier(self) -> str:
        path = self.options.get("path")
        if not path:
            raise InvalidOptionError(
                "no table given: use spark.read.format('ducklake').load('main.events') or .save('main.events')"
            )
        return path

    def _change_feed(self) -> bool:
        """Whether this read is of the change feed: ``readChangeFeed=true``, or any change-feed start option.

        Raises:
            InvalidOptionError: options of the table read and of the change feed mixed (one would be ignored).
        """
        from pyspark_ducklake.options import option_as_bool, option_value

        options = dict(self.options)
        starts = ("startingSnapshot", "startingTimestamp")
        feed = option_as_bool(options, "readChangeFeed", False) or any(
            option_value(options, k) is not None for k in starts
        )
        wrong = ("snapshot", "timestamp") if feed else ("endingSnapshot", "endingTimestamp")
        for key in wrong:
            if option_value(options, key) is not None:
                raise InvalidOptionError(
                    f"option {key} does not apply to a change-feed read (startingSnapshot/endingSnapshot pick its "
                    "range)"
                    if feed
                    else f"option {key} belongs to the change feed: add readChangeFeed=true and startingSnapshot"
                )
        return feed

    def schema(self) -> StructType:
        from pyspark_ducklake.batch.reader import read_schema

        self._check(Entry.READ, Entry.STREAM_READ)  # Spark asks for the schema of reads only
        if self._change_feed():
            from pyspark_ducklake.batch.change_feed_read import change_feed_schema

            schema, self._feed_range = change_feed_schema(self.config, self.identifier, dict(self.options))
            return schema
        schema, self._snapshot = read_schema(self.config, self.identifier, dict(self.options))
        return schema

    def reader(self, schema: StructType) -> DataSourceReader:
        # No filter pushdown: PySpark 4.x keeps the partitions of the last plan that pushed filters on the relation
        # and reuses them for later plans of the DataFrame that push none, so pruning files for one query would
        # drop rows from the next one (the same holds for two scans of one relation in one plan).
        from pyspark_ducklake.batch.reader import DuckLakeBatchReader

        self._check(Entry.READ)
        if self._change_feed():
            from pyspark_ducklake.batch.change_feed_read import ChangeFeedBatchReader

            options = dict(self.options)
            return ChangeFeedBatchReader(self.config, self.identifier, options, schema, pinned=self._feed_range)
        return DuckLakeBatchReader(self.config, self.identifier, dict(self.options), schema, snapshot=self._snapshot)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        from pyspark_ducklake.batch.write_job import DuckLakeBatchWriter

        self._check(Entry.WRITE)
        return DuckLakeBatchWriter.create(self.config, self.identifier, dict(self.options), schema, overwrite)

    def streamWriter(self, schema: StructType, overwrite: bool) -> Any:
        from pyspark_ducklake.exceptions import InvalidOptionError
        from pyspark_ducklake.streaming.write_stream import DuckLakeStreamWriter

        self._check(Entry.STREAM_WRITE)
        if overwrite:
            raise InvalidOptionError("streaming writes to DuckLake append; use outputMode('append')")
        return DuckLakeStreamWriter(self.config, self.identifier, dict(self.options), schema)

    def streamReader(self, schema: StructType) -> Any:
        from pyspark_ducklake.exceptions import InvalidOptionError
        from pyspark_ducklake.streaming.change_feed_stream import DuckLakeChangeFeedReader

        self._check(Entry.STREAM_READ)
        if not self._change_feed():
            raise InvalidOptionError(
                "readStream.format('ducklake') reads the table's change feed: set option readChangeFeed=true "
                "(the table's current rows as inserts, then its changes) or startingSnapshot ('latest', 'earliest' "
                "or a snapshot id: only the changes from there)"
            )
        return DuckLakeChangeFeedReader(self.config, self.identifier, dict(self.options), schema)


def register(spark: Any) -> type[DuckLakeDataSource]:
    """Register the ``ducklake`` format with a SparkSession, capturing its ``spark.ducklake.*`` conf.

    Call it again after changing ``spark.ducklake.catalog`` / ``spark.ducklake.dataPath`` at run time.
    """
    conf = session_conf(spark)  # a misspelt spark.ducklake.* key fails here
    # A module that cannot be imported makes cloudpickle ship the class by value, conf included.
    source = type(
        "DuckLakeDataSource", (DuckLakeDataSource,), {"spark_conf": conf, "__module__": "pyspark_ducklake_registered"}
    )
    spark.dataSource.register(source)
    return source


__all__ = ["Any", "DuckLakeDataSource", "register"]
