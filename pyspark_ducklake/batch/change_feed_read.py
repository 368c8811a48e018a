"""``spark.read.format("ducklake").option("readChangeFeed", "true")``: the change feed between two snapshots."""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from pyspark_ducklake.exceptions import InvalidOptionError
from pyspark_ducklake.lake import Lake
from pyspark_ducklake.options import option_value, parse_snapshot_id, parse_timestamp
from pyspark_ducklake.spark.change_feed import (
    FeedOptions,
    change_partitions,
    feed_schema,
    read_partition,
    resolve_start,
)
from pyspark_ducklake.spark.column_option import selected_columns
from pyspark_ducklake.spark.lake_config import LakeConfig
from pyspark_ducklake.table.identifiers import parse_identifier


def _bounds(lake: Lake, options: dict[str, str], pinned: tuple[int | None, int] | None = None) -> tuple[int, int]:
    feed = FeedOptions.parse(options)
    if feed.starting is None and feed.starting_timestamp is None:
        raise InvalidOptionError(
            "readChangeFeed needs option startingSnapshot (an id or 'earliest') or startingTimestamp"
        )
    start = pinned[0] if pinned is not None and pinned[0] is not None else resolve_start(lake, feed)
    end = pinned[1] if pinned is not None else _end(lake, options)
    if end < start - 1:
        raise InvalidOptionError(f"startingSnapshot {start} is after endingSnapshot {end}")
    return start, end


def _end(lake: Lake, options: dict[str, str]) -> int:
    """The range's last snapshot: ``endingSnapshot``, the newest at or before ``endingTimestamp``, or the latest."""
    raw_end = option_value(options, "endingSnapshot")
    raw_time = option_value(options, "endingTimestamp")
    if raw_end is not None and raw_time is not None:
        raise InvalidOptionError("options endingSnapshot and endingTimestamp both pick the end; give only one")
    if raw_time is not None:
        return lake.resolve_snapshot(timestamp=parse_timestamp(raw_time, "endingTimestamp"))
    if raw_end is not None:
        return lake.resolve_snapshot(snapshot=parse_snapshot_id(raw_end, "endingSnapshot"))
    return lake.current_snapshot_id()


def change_feed_schema(
    config: LakeConfig, identifier: str, options: dict[str, str]
) -> tuple[StructType, tuple[int | None, int]]:
    """The table's columns (at ``endingSnapshot``, else the latest) and the change columns, with the range's start
    (None when the options do not give one yet) and end resolved now, so every query of the DataFrame reads them."""
    lake = config.connect(keep_engine=True)
    try:
        end = _end(lake, options)
        feed = FeedOptions.parse(options)
        start: int | None = None
        if feed.starting is not None or feed.starting_timestamp is not None:
            start = resolve_start(lake, feed)
        if option_value(options, "endingSnapshot") is not None or option_value(options, "endingTimestamp") is not None:
            _bounds(lake, options, (start, end))  # a range that cannot be read fails at load()
        schema = lake.table(identifier, snapshot=end).table_schema
        return feed_schema(schema, selected_columns(options, schema, identifier)), (start, end)
    finally:
        lake.close()


class ChangeFeedBatchReader(DataSourceReader):
    """The changes of one range: ``pinned`` (start, end) when the DataFrame's load resolved them."""

    def __init__(
        self,
        config: LakeConfig,
        identifier: str,
        options: dict[str, str],
        schema: StructType,
        *,
        pinned: tuple[int | None, int] | None = None,
    ) -> None:
        self.config = config
        self.identifier = identifier
        self.options = options
        self.spark_schema = schema
        self.pinned = pinned

    def partitions(self) -> list[InputPartition]:
        lake = self.config.connect(keep_engine=True)
        try:
            start, end = _bounds(lake, self.options, self.pinned)
            if end < start:
                return []
            schema_name, table_name = parse_identifier(self.identifier)
            columns = selected_columns(
                self.options, lake.table(self.identifier, snapshot=end).table_schema, self.identifier
            )
            return change_partitions(lake, schema_name, table_name, start, end, columns)
        finally:
            lake.close()

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """The task's files, read without the catalog: the columns are the range's end snapshot's."""
        yield from read_partition(partition, None, self.spark_schema, storage_options=self.config.storage_options)
