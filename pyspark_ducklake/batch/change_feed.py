"""``spark.read.format("ducklake").option("readChangeFeed", "true")``: the change feed between two snapshots."""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from pyspark_ducklake.batch.spark_types import arrow_schema_for_spark, to_spark_batch
from pyspark_ducklake.exceptions import InvalidOptionError
from pyspark_ducklake.lake import Lake, parse_identifier
from pyspark_ducklake.options import LakeConfig, _get
from pyspark_ducklake.streaming.source import (
    BATCH_ROWS,
    ChangeRange,
    FeedOptions,
    change_ranges,
    feed_schema,
    read_changes,
    resolve_start,
)


def _bounds(lake: Lake, options: dict[str, str]) -> tuple[int, int]:
    feed = FeedOptions.parse(options)
    if feed.starting is None and feed.starting_timestamp is None:
        raise InvalidOptionError(
            "readChangeFeed needs option startingSnapshot (an id or 'earliest') or startingTimestamp"
        )
    start = resolve_start(lake, feed)
    raw_end = _get(options, "endingSnapshot") or _get(options, "endingVersion")
    if raw_end is None:
        end = lake.current_snapshot_id()
    else:
        try:
            end = lake.resolve_snapshot(snapshot=int(raw_end))
        except ValueError as e:
            raise InvalidOptionError(f"could not parse option endingSnapshot to an integer: {raw_end!r}") from e
    if end < start - 1:
        raise InvalidOptionError(f"startingSnapshot {start} is after endingSnapshot {end}")
    return start, end


def change_feed_schema(config: LakeConfig, identifier: str, options: dict[str, str]) -> StructType:
    """The table's columns (at ``endingSnapshot``, else the latest) and the change columns."""
    lake = config.connect()
    try:
        raw_end = _get(options, "endingSnapshot") or _get(options, "endingVersion")
        end = _bounds(lake, options)[1] if raw_end is not None else None
        return feed_schema(lake.table(identifier, snapshot=end).table_schema)
    finally:
        lake.close()


class ChangeFeedBatchReader(DataSourceReader):
    def __init__(self, config: LakeConfig, identifier: str, options: dict[str, str], schema: StructType) -> None:
        self.config = config
        self.identifier = identifier
        self.options = options
        self.spark_schema = schema

    def partitions(self) -> list[InputPartition]:
        lake = self.config.connect()
        try:
            start, end = _bounds(lake, self.options)
            if end < start:
                return []
            schema_name, table_name = parse_identifier(self.identifier)
            return list(change_ranges(lake, schema_name, table_name, start, end, schema_snapshot=end))
        finally:
            lake.close()

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, ChangeRange)
        schema_name, table_name = parse_identifier(self.identifier)
        lake = self.config.connect()
        try:
            at = partition.last if partition.schema_snapshot is None else partition.schema_snapshot
            stream = lake.table(self.identifier, snapshot=at).table_schema
            changes = read_changes(
                lake, schema_name, table_name, partition.first, partition.last, stream, running=False
            )
        finally:
            lake.close()
        target = arrow_schema_for_spark(self.spark_schema)
        for batch in changes.to_batches(max_chunksize=BATCH_ROWS):
            yield to_spark_batch(batch, target)
