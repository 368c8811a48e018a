"""``spark.readStream.format("ducklake")``: the change feed of a table as a stream, micro-batch by micro-batch.

Offsets are snapshot ids. A micro-batch (start, end] emits every change committed in snapshots start+1..end:
inserts, deletes and update pre/post images, as DuckDB's ``ducklake_table_changes`` reports them. The stream's
columns are the table's columns when the query starts; columns added later are ignored, and a column dropped,
renamed or retyped under a running query stops it with a typed error asking for a restart (which resumes from the
checkpoint with the new columns, with no gap).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxFiles,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import LongType, StringType, StructField, StructType, TimestampType

from pyspark_ducklake.batch.spark_types import arrow_schema_for_spark, spark_schema, to_spark_batch
from pyspark_ducklake.catalog import reader as R
from pyspark_ducklake.catalog.types import TableSchema
from pyspark_ducklake.exceptions import (
    DataLossError,
    InvalidOptionError,
    NoSuchSnapshotError,
    NoSuchTableError,
    SchemaChangedError,
)
from pyspark_ducklake.lake import Lake, parse_identifier
from pyspark_ducklake.lake_config import LakeConfig
from pyspark_ducklake.options import option_as_bool, option_as_int, option_value, parse_int, parse_timestamp
from pyspark_ducklake.streaming.offsets import SnapshotOffset
from pyspark_ducklake.table.change_split import ChangePart, execute_part, split_plan
from pyspark_ducklake.table.changes import change_column_names, changed_snapshots, count_changes, plan_changes
from pyspark_ducklake.table.conform import default_array

log = logging.getLogger("pyspark_ducklake.source")

# Never null, and declared so: Spark then skips a null check per value when it takes the rows in. The commit time
# is null for a snapshot the catalog holds no time for.
CHANGE_COLUMNS = [
    StructField("_change_type", StringType(), False),
    StructField("_snapshot_id", LongType(), False),
    StructField("_rowid", LongType(), False),
    StructField("_commit_timestamp", TimestampType(), True),
]
BATCH_ROWS = 65_536
# Changes per Spark task: a feed of more is cut into several tasks, each reading whole data files (balanced by the
# rows they hand to Spark and decode).
PARTITION_ROWS = 1_000_000


@dataclass(frozen=True)
class FeedOptions:
    starting: str | None
    starting_timestamp: str | None
    max_snapshots: int | None
    max_rows: int | None
    fail_on_data_loss: bool

    @classmethod
    def parse(cls, options: dict[str, str]) -> FeedOptions:
        return cls(
            option_value(options, "startingSnapshot") or option_value(options, "startingVersion"),
            option_value(options, "startingTimestamp"),
            option_as_int(options, "maxSnapshotsPerTrigger", None, minimum=1),
            option_as_int(options, "maxRowsPerTrigger", None, minimum=1),
            option_as_bool(options, "failOnDataLoss", True),
        )


def feed_schema(table_schema: TableSchema) -> StructType:
    """The table's columns, then the change columns (renamed where the table has their names)."""
    names = change_column_names(table_schema)
    extra = [StructField(name, f.dataType, f.nullable) for name, f in zip(names, CHANGE_COLUMNS, strict=True)]
    return spark_schema(table_schema, extra)


def resolve_start(lake: Lake, options: FeedOptions) -> int:
    """The first snapshot whose changes the feed emits.

    ``startingTimestamp`` picks the oldest snapshot committed at or after that time, as DuckDB's ``table_changes``
    does with a start time (a time before the first snapshot starts at the oldest one, a time after the newest
    emits only what comes later); ``earliest`` is the oldest snapshot not expired.

    Raises:
        InvalidOptionError: both options, a value that does not parse, or a snapshot id beyond the newest.
    """
    if options.starting is not None and options.starting_timestamp is not None:
        raise InvalidOptionError("options startingSnapshot and startingTimestamp both pick a start; give only one")
    with lake.engine.connect() as conn:
        latest = R.latest_snapshot(conn).snapshot_id
        if options.starting_timestamp is not None:
            when = parse_timestamp(options.starting_timestamp, "startingTimestamp")
            first = R.first_snapshot_from(conn, when)
            return latest + 1 if first is None else first.snapshot_id
        value = (options.starting or "latest").strip().lower()
        if value == "latest":
            return latest + 1
        if value == "earliest":
            return R.oldest_snapshot(conn).snapshot_id
        start = parse_int(options.starting, "startingSnapshot", minimum=0)
        if start > latest + 1:
            raise InvalidOptionError(
                f"option startingSnapshot {start} is beyond the newest snapshot {latest} of the lake; give an "
                "existing snapshot id, 'earliest' or 'latest' (only what is committed after the query starts)"
            )
        return start


@dataclass(frozen=True)
class ChangeFeedPartition(InputPartition):
    """One Spark task's share of the feed: whole data files, planned on the driver (see ``table.change_split``)."""

    part: ChangePart


def change_partitions(lake: Lake, schema_name: str, table_name: str, first: int, last: int) -> list[InputPartition]:
    """The changes of snapshots ``first..last`` (in the table's columns at ``last``) as tasks of about
    :data:`PARTITION_ROWS` changes each, every data file read by one task only."""
    with lake.engine.connect() as conn:
        entry = R.table_by_name(conn, schema_name, table_name, last)
        plan = plan_changes(conn, entry, first, last, lake.data_path)
    parts = split_plan(plan, target_rows=PARTITION_ROWS, storage_options=lake.storage_options)
    return [ChangeFeedPartition(part) for part in parts]


def read_partition(
    partition: InputPartition,
    stream: TableSchema | None,
    spark: StructType,
    *,
    storage_options: dict[str, Any] | None,
) -> Iterator[pa.RecordBatch]:
    """A task's changes in the stream's columns (None: the range's end snapshot's), as Arrow batches of exactly
    Spark's types, file by file."""
    if not isinstance(partition, ChangeFeedPartition):
        return  # Spark's stand-in partition when there are none: an empty range
    target = arrow_schema_for_spark(spark)
    at_end = partition.part.plan.schema
    for changes in execute_part(partition.part, storage_options=storage_options):
        if stream is not None:
            changes = stream_columns(changes, at_end, stream)
        for batch in changes.to_batches(max_chunksize=BATCH_ROWS):
            yield to_spark_batch(batch, target)


class DuckLakeChangeFeedReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """The change-feed stream reader (see the module docstring)."""

    def __init__(self, config: LakeConfig, identifier: str, options: dict[str, str], schema: StructType) -> None:
        self.config = config
        self.identifier = identifier
        self.schema_name, self.table_name = parse_identifier(identifier)
        self.options = FeedOptions.parse(options)
        self.spark_schema = schema
        self._available_now: int | None = None
        self._planner: Lake | None = None
        lake = self._planner_lake()
        table = lake.table(identifier)
        self.stream_schema = table.table_schema
        self.table_uuid = str(table.entry.table_uuid)
        self._start = resolve_start(lake, self.options)

    def _lake(self) -> Lake:
        return self.config.connect()

    def _planner_lake(self) -> Lake:
        """The lake of the offset and planning calls, kept for the query's life (one engine, cached statements)."""
        if self._planner is None:
            self._planner = self._lake()
        return self._planner

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_planner"] = None  # an engine does not travel to the executors; read() opens its own
        return state

    def stop(self) -> None:
        if self._planner is not None:
            self._planner.close()
            self._planner = None

    # --- offsets ------------------------------------------------------------------------------------------------
    def initialOffset(self) -> dict[str, Any]:
        return self._offset(self._start - 1)

    def _offset(self, snapshot_id: int) -> dict[str, Any]:
        return SnapshotOffset(snapshot_id, self.table_uuid).to_dict()

    def _begin(self, offset: dict[str, Any]) -> int:
        """The snapshot id of an offset of this table (a checkpoint of another table is refused)."""
        return SnapshotOffset.from_dict(offset).check_table(self.table_uuid, self.identifier).snapshot_id

    def _check_table(self, lake: Lake, snapshot_id: int) -> None:
        """Fail when the streamed table is gone at ``snapshot_id`` (dropped, renamed) or is another table by now.

        Raises:
            NoSuchTableError: dropped or renamed since the query started.
            InvalidOptionError: a table of the same name replaced it (the checkpoint belongs to the old one).
        """
        with lake.engine.connect() as conn:
            try:
                entry = R.table_by_name(conn, self.schema_name, self.table_name, snapshot_id)
            except NoSuchTableError:
                raise NoSuchTableError(
                    f"table {self.identifier} was dropped or renamed (snapshot {snapshot_id}) while its change feed "
                    "was running; if it was renamed, restart the query with its new name (the checkpoint stays "
                    "valid for it)"
                ) from None
        if str(entry.table_uuid) != self.table_uuid:
            raise InvalidOptionError(
                f"table {self.identifier} was dropped and created again while its change feed was running; the "
                "checkpoint belongs to the old table: use a new checkpoint location to follow the new one"
            )

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.options.max_snapshots is not None:
            return ReadMaxFiles(self.options.max_snapshots)
        if self.options.max_rows is not None:
            return ReadMaxRows(self.options.max_rows)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._available_now = self._planner_lake().current_snapshot_id()

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        begin = self._begin(start)
        lake = self._planner_lake()
        latest = lake.current_snapshot_id()
        if begin > latest:
            raise InvalidOptionError(
                f"the checkpoint's offset (snapshot {begin}) is beyond the newest snapshot {latest} of "
                f"{self.identifier}: the checkpoint belongs to another lake or table; use a new checkpoint location"
            )
        if self._available_now is not None:
            latest = min(latest, self._available_now)
        if latest <= begin:
            return self._offset(begin)
        self._check_table(lake, latest)
        begin = self._check_data_loss(lake, begin)
        if isinstance(limit, ReadMaxFiles):
            changed = self._changed(lake, begin, latest)
            if len(changed) > limit.max_files:
                return self._offset(changed[max(1, limit.max_files) - 1])
        elif isinstance(limit, ReadMaxRows):
            return self._offset(self._limit_rows(lake, begin, latest, limit.max_rows))
        return self._offset(latest)

    def _changed(self, lake: Lake, begin: int, latest: int) -> list[int]:
        """Snapshots after ``begin`` that changed the table's rows (maintenance and other tables' commits left out)."""
        with lake.engine.connect() as conn:
            entry = R.table_by_name(conn, self.schema_name, self.table_name, latest)
        return changed_snapshots(lake.engine, entry, begin + 1, latest)

    def _limit_rows(self, lake: Lake, begin: int, latest: int, max_rows: int) -> int:
        """The last snapshot to read so that about ``max_rows`` rows come out (whole snapshots, at least one)."""
        total = 0
        for snapshot in self._changed(lake, begin, latest):
            total += count_changes(
                lake.engine,
                lake.data_path,
                self.schema_name,
                self.table_name,
                snapshot,
                snapshot,
                storage_options=lake.storage_options,
            )
            if total >= max_rows:
                return snapshot  # soft: the snapshot that reaches the limit is read whole
        return latest

    def _check_data_loss(self, lake: Lake, begin: int) -> int:
        """Raise (or, with failOnDataLoss=false, skip ahead) when snapshots after ``begin`` were expired."""
        with lake.engine.connect() as conn:
            try:
                R.snapshot_by_id(conn, begin + 1)
                return begin
            except NoSuchSnapshotError:
                pass
            later = [s.snapshot_id for s in R.snapshot_changes_after(conn, begin)]
        if not later:
            return begin
        first = min(later)
        message = (
            f"change feed of {self.identifier} needs snapshots {begin + 1}..{first - 1}, which were expired or "
            "cleaned up"
        )
        if self.options.fail_on_data_loss:
            raise DataLossError(message + "; restart from a later snapshot, or set failOnDataLoss=false to skip them")
        log.warning("%s; skipping to snapshot %d (failOnDataLoss=false)", message, first)
        return first - 1

    # --- reading ------------------------------------------------------------------------------------------------
    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[InputPartition]:
        begin = self._begin(start)
        last = self._begin(end)
        if last <= begin:
            return []
        lake = self._planner_lake()
        # latestOffset already failed (or, with failOnDataLoss=false, warned) for expired snapshots: skip them.
        begin = self._check_data_loss(lake, begin)
        if last <= begin:
            return []
        return change_partitions(lake, self.schema_name, self.table_name, begin + 1, last)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        lake = self._lake()
        try:
            check_stream_columns(lake, self.schema_name, self.table_name, self.stream_schema)
        finally:
            lake.close()
        yield from read_partition(
            partition, self.stream_schema, self.spark_schema, storage_options=self.config.storage_options
        )

    def commit(self, end: dict[str, Any]) -> None:
        self._begin(end)  # validates the checkpoint's offset; nothing to release


def check_stream_columns(lake: Lake, schema_name: str, table_name: str, stream: TableSchema) -> None:
    """Fail when a column of a running stream was dropped or retyped in the table since the stream started.

    Raises:
        SchemaChangedError: naming the column; a restart continues from the checkpoint with the new columns.
    """
    with lake.engine.connect() as conn:
        latest = R.latest_snapshot(conn).snapshot_id
        entry = R.table_by_name(conn, schema_name, table_name, latest)
        current = R.table_schema(conn, entry.table_id, latest).by_id()
    for column in stream.columns:
        now = current.get(column.column_id)
        if now is None or now.shape()[2:] != column.shape()[2:]:
            raise SchemaChangedError(
                f"column {column.name!r} of {schema_name}.{table_name} was dropped or changed type while the change "
                "feed was running; restart the query to continue from its checkpoint with the new columns"
            )


def stream_columns(raw: pa.Table, at_end: TableSchema, stream: TableSchema) -> pa.Table:
    """Changes read in the columns of ``at_end`` (the range's last snapshot), in the stream's columns (matched by
    column id; columns added after the range are filled in), plus the change columns."""
    # by position: a table column may share a change column's name
    end_at = {c.column_id: i for i, c in enumerate(at_end.columns)}
    arrays = []
    for column in stream.columns:
        then = end_at.get(column.column_id)
        if then is None:
            arrays.append(pa.chunked_array([default_array(column, raw.num_rows)]))  # added after these snapshots
        else:
            arrays.append(raw.column(then))
    arrays.extend(raw.column(i) for i in range(len(at_end.columns), raw.num_columns))
    return pa.Table.from_arrays(arrays, names=[*stream.names(), *change_column_names(stream)])
