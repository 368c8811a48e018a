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
        # The scan schema() planned at that snapshot (when small) and the options it was planned with: the first
        # query's reader takes it, so a read asks the catalog once (batch/reader.py).
        self._plan: tuple[dict[str, str], Any] | None = None

    def _check(self, *entries: Entry) -> None:
        check_options(dict(self.options), *entries)

    @property
    def config(self) -> LakeConfig:
        if self._config is None:
            self._config = LakeConfig.resolve(dict(self.options), self.spark_conf.get)
        return self._config

    @property
    def identifier(self) -> str:
        """The table: ``load()``/``save()``'s path or option ``table`` (a SQL table's ``OPTIONS (table ...)``).

        Raises:
            InvalidOptionError: neither given, or the two differ.
        """
        from pyspark_ducklake.spark.sql_table import NO_TABLE_HINT

        path, table = self.options.get("path"), self.options.get("table")
        if path and table and path != table:
            raise InvalidOptionError(
                f"two tables given: path {path!r} and option table {table!r}; give one (load()/save()'s argument "
                "or option table)"
            )
        if not (path or table):
            raise InvalidOptionError(NO_TABLE_HINT)
        return str(path or table)

    def _use_table_options(self, schema: StructType, entry: Entry) -> StructType:
        """Take a SQL table's options from ``schema`` (where CREATE TABLE left them, see spark/sql_table.py) under
        the query's own, and return the schema without them.

        Raises:
            InvalidOptionError: a change-feed read of a SQL table created over the table itself (its columns are
                the table's; create one with OPTIONS (readChangeFeed 'true', ...) for the feed).
        """
        from pyspark_ducklake.spark.sql_table import merged_options, stored_table_options, without_table_options

        stored = stored_table_options(schema)
        if stored is None:
            return schema
        if entry is Entry.WRITE and (_feed_options(stored) or any(k.lower() == "metadata" for k in stored)):
            raise InvalidOptionError(
                "this SQL table reads a change feed or the lake's metadata and cannot be written: INSERT into a table "
                "created over the rows, CREATE TABLE events USING ducklake OPTIONS (table 'main.events', ...)"
            )
        self._check(entry)  # the query's own options (WITH (...)) are checked as given
        query_feed = _feed_options(dict(self.options))
        merged = merged_options(stored, dict(self.options), entry)
        for key in list(self.options):
            del self.options[key]
        self.options.update(merged)
        self._config = None
        if entry is Entry.READ and query_feed and not _feed_options(stored):
            raise InvalidOptionError(
                "a SQL table's columns are fixed when it is created, so a change-feed read of it cannot add the "
                "feed's columns: create a table for the feed, CREATE TABLE events_changes USING ducklake OPTIONS "
                "(table 'main.events', readChangeFeed 'true', startingSnapshot '1'), or read it with "
                "spark.read.format('ducklake').option('readChangeFeed', 'true')"
            )
        schema = without_table_options(schema)
        if entry is Entry.READ and "columns" not in self.options and not _feed_options(stored):
            if "metadata" not in self.options:
                # the columns of CREATE TABLE time: a column the DuckLake table gained later is not read
                options: Any = self.options  # a list, not "a, b": a name may hold a comma
                options["columns"] = [f.name for f in schema.fields]
        return schema

    def _metadata(self) -> str | None:
        """The option ``metadata``'s kind (``snapshots``, ``table_info``, ``files``), None for a read of rows.

        Raises:
            InvalidOptionError: an unknown kind, or the change feed asked for too.
        """
        from pyspark_ducklake.batch.metadata_read import check_listing_options, metadata_kind

        kind = metadata_kind(dict(self.options))
        if kind is not None and _feed_options(dict(self.options)):
            raise InvalidOptionError("option metadata reads the lake's metadata, not the change feed: give one")
        check_listing_options(dict(self.options), kind)
        return kind

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
        from pyspark_ducklake.spark.sql_table import is_create_table, table_options, with_table_options

        if not is_create_table(self.options):
            return self._schema()
        # CREATE TABLE ... USING ducklake: the only time Spark shows the table's OPTIONS (spark/sql_table.py)
        given = table_options(self.options)
        for key in list(self.options):
            del self.options[key]
        self.options.update(given)
        # a table's write options (data_inlining_row_limit...) are kept for INSERT; its reads skip them
        return with_table_options(self._schema(Entry.READ, Entry.WRITE), given)

    def _schema(self, *entries: Entry) -> StructType:
        from pyspark_ducklake.batch.reader import read_schema

        self._check(*(entries or (Entry.READ, Entry.STREAM_READ)))  # Spark asks for the schema of reads only
        kind = self._metadata()
        if kind is not None:
            from pyspark_ducklake.batch.metadata_read import metadata_schema

            return metadata_schema(kind)
        _ = self.identifier
        if self._change_feed():
            from pyspark_ducklake.batch.change_feed_read import change_feed_schema

            schema, self._feed_range = change_feed_schema(self.config, self.identifier, dict(self.options))
            return schema
        schema, self._snapshot, plan = read_schema(self.config, self.identifier, dict(self.options))
        self._plan = None if plan is None else (dict(self.options), plan)
        return schema

    def reader(self, schema: StructType) -> DataSourceReader:
        # No filter pushdown: PySpark 4.x keeps the partitions of the last plan that pushed filters on the relation
        # and reuses them for later plans of the DataFrame that push none, so pruning files for one query would
        # drop rows from the next one (the same holds for two scans of one relation in one plan).
        from pyspark_ducklake.batch.reader import DuckLakeBatchReader

        schema = self._use_table_options(schema, Entry.READ)
        self._check(Entry.READ)
        kind = self._metadata()
        if kind is not None:
            from pyspark_ducklake.batch.metadata_read import MetadataReader, metadata_table

            table = self.options.get("path") or self.options.get("table")
            return MetadataReader(metadata_table(self.config, kind, table, dict(self.options)))
        _ = self.identifier  # no table (a SQL table Spark passed no OPTIONS) fails before the catalog is looked for
        if self._change_feed():
            from pyspark_ducklake.batch.change_feed_read import ChangeFeedBatchReader

            options = dict(self.options)
            return ChangeFeedBatchReader(self.config, self.identifier, options, schema, pinned=self._feed_range)
        carried, self._plan = self._plan, None  # Spark pickles this instance into the read's tasks next
        plan = carried[1] if carried is not None and carried[0] == dict(self.options) else None
        return DuckLakeBatchReader(
            self.config, self.identifier, dict(self.options), schema, snapshot=self._snapshot, plan=plan
        )

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        from pyspark_ducklake.batch.write_job import DuckLakeBatchWriter

        if self.options.get("path") or self.options.get("table"):
            from pyspark_ducklake.spark.sql_table import without_table_options

            # a DataFrame write names its table: options in the schema came with columns read from a SQL table
            schema = without_table_options(schema)
        else:
            schema = self._use_table_options(schema, Entry.WRITE)
        self._check(Entry.WRITE)
        _ = self.identifier
        return DuckLakeBatchWriter.create(self.config, self.identifier, dict(self.options), schema, overwrite)

    def streamWriter(self, schema: StructType, overwrite: bool) -> Any:
        from pyspark_ducklake.exceptions import InvalidOptionError
        from pyspark_ducklake.streaming.write_stream import DuckLakeStreamWriter

        self._check(Entry.STREAM_WRITE)
        if overwrite:
            raise InvalidOptionError("streaming writes to DuckLake append; use outputMode('append')")
        return DuckLakeStreamWriter(self.config, self.identifier, dict(self.options), schema)

    def streamReader(self, schema: StructType) -> Any:
        from pyspark_ducklake.streaming.change_feed_stream import DuckLakeChangeFeedReader
        from pyspark_ducklake.streaming.table_stream import DuckLakeTableStreamReader, check_skip_options

        self._check(Entry.STREAM_READ)
        feed = self._change_feed()
        check_skip_options(dict(self.options), feed)
        if not feed:  # the table's rows, then the rows later snapshots append (as Delta's table stream)
            return DuckLakeTableStreamReader(self.config, self.identifier, dict(self.options), schema)
        return DuckLakeChangeFeedReader(self.config, self.identifier, dict(self.options), schema)


def _feed_options(options: dict[str, str]) -> bool:
    """Whether ``options`` ask for the change feed (``readChangeFeed`` or a ``starting...`` option)."""
    from pyspark_ducklake.options import option_as_bool, option_value

    starts = ("startingSnapshot", "startingTimestamp")
    return option_as_bool(options, "readChangeFeed", False) or any(option_value(options, k) for k in starts)


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
