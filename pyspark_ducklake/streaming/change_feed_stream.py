"""``spark.readStream.format("ducklake")``: the change feed of a table as a stream, micro-batch by micro-batch.

Offsets are snapshot ids. A micro-batch (start, end] emits every change committed in snapshots start+1..end:
inserts, deletes and update pre/post images, as DuckDB's ``ducklake_table_changes`` reports them. Without a start
option the stream first emits the table's rows at the newest snapshot as inserts (as Delta's change-data-feed
stream does), in windows of row ids (``table.change_feed_initial``): those offsets carry the next row id to load.
The stream's columns are the table's columns when the query starts (those of the ``columns`` option when given);
columns added later are ignored, and a column dropped, renamed or retyped under a running query stops it with a
typed error asking for a restart (which resumes from the checkpoint with the new columns, with no gap).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
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
from pyspark.sql.types import StructType

from pyspark_ducklake.catalog import reader as R
from pyspark_ducklake.catalog.types import TableSchema
from pyspark_ducklake.exceptions import (
    CheckpointMismatchError,
    DataLossError,
    NoSuchSnapshotError,
    NoSuchTableError,
    SchemaChangedError,
)
from pyspark_ducklake.lake import Lake
from pyspark_ducklake.spark.change_feed import (
    FeedOptions,
    change_partitions,
    initial_partitions,
    names_at,
    plan_initial_load,
    read_partition,
    resolve_start,
)
from pyspark_ducklake.spark.column_option import selected_columns
from pyspark_ducklake.spark.lake_config import LakeConfig
from pyspark_ducklake.streaming.offsets import SnapshotOffset
from pyspark_ducklake.table.change_feed import change_counts, changed_snapshots
from pyspark_ducklake.table.change_feed_initial import DEFAULT_MAX_FILES, DEFAULT_MAX_ROWS, InitialLoad, next_window
from pyspark_ducklake.table.identifiers import parse_identifier
from pyspark_ducklake.table.projection import project

log = logging.getLogger("pyspark_ducklake.source")


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
        self._footers: dict[int, Any] = {}  # data file id -> its row groups' row ids (files never change)
        lake = self._planner_lake()
        # No start option: the table's rows at the newest snapshot first (the initial load), then its changes.
        self.initial_load = self.options.starting is None and self.options.starting_timestamp is None
        self._start = lake.current_snapshot_id() if self.initial_load else resolve_start(lake, self.options)
        table = lake.table(identifier)
        full = table.table_schema
        self.columns = selected_columns(options, full, identifier)  # None: every column
        self.stream_schema = project(full, self.columns).nullable()  # old rows may predate a SET NOT NULL
        self.table_uuid = str(table.entry.table_uuid)

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
        state["_footers"] = {}
        return state

    def stop(self) -> None:
        if self._planner is not None:
            self._planner.close()
            self._planner = None

    # --- offsets ------------------------------------------------------------------------------------------------
    def initialOffset(self) -> dict[str, Any]:
        if self.initial_load:
            return self._offset(self._start, initial=0)
        return self._offset(self._start - 1)

    def _offset(self, snapshot_id: int, *, initial: int | None = None) -> dict[str, Any]:
        return SnapshotOffset(snapshot_id, self.table_uuid, initial, self.identifier).to_dict()

    def _read_offset(self, offset: dict[str, Any]) -> SnapshotOffset:
        """An offset of this table (a checkpoint of another table is refused)."""
        return SnapshotOffset.from_dict(offset).check_table(self.table_uuid, self.identifier)

    def _begin(self, offset: dict[str, Any]) -> int:
        """The snapshot id of an offset of this table (a checkpoint of another table is refused)."""
        return self._read_offset(offset).snapshot_id

    def _check_table(self, lake: Lake, snapshot_id: int) -> None:
        """Fail when the streamed table is gone at ``snapshot_id`` (dropped, renamed) or is another table by now.

        Raises:
            NoSuchTableError: dropped or renamed since the query started.
            CheckpointMismatchError: a table of the same name replaced it (the checkpoint belongs to the old one).
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
            raise CheckpointMismatchError(
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
        offset = self._read_offset(start)
        lake = self._planner_lake()
        if offset.initial is not None:
            return self._initial_end(lake, offset, limit)
        begin = offset.snapshot_id
        latest = self._check_in_lake(lake, begin)
        if self._available_now is not None:
            latest = min(latest, self._available_now)
        if latest <= begin:
            return self._offset(begin)
        self._check_table(lake, latest)
        begin = self._check_data_loss(lake, begin, latest)
        return self._offset(self._end(lake, begin, latest, limit))

    def _check_in_lake(self, lake: Lake, snapshot_id: int) -> int:
        """The lake's newest snapshot, when ``snapshot_id`` (a checkpoint's offset) is not beyond it.

        Raises:
            CheckpointMismatchError: the offset is beyond the newest snapshot: a checkpoint of another lake or table.
        """
        latest = lake.current_snapshot_id()
        if snapshot_id > latest:
            raise CheckpointMismatchError(
                f"the checkpoint's offset (snapshot {snapshot_id}) is beyond the newest snapshot {latest} of "
                f"{self.identifier}: the checkpoint belongs to another lake or table; use a new checkpoint location"
            )
        return latest

    def _end(self, lake: Lake, begin: int, latest: int, limit: ReadLimit) -> int:
        """The last snapshot of the next micro-batch after ``begin``, at most ``latest``, within ``limit``."""
        if isinstance(limit, ReadMaxFiles):
            changed = self._changed(lake, begin, latest)
            if len(changed) > limit.max_files:
                return changed[max(1, limit.max_files) - 1]
        elif isinstance(limit, ReadMaxRows):
            return self._limit_rows(lake, begin, latest, limit.max_rows)
        return latest

    # --- the initial load ---------------------------------------------------------------------------------------
    def _initial_end(self, lake: Lake, offset: SnapshotOffset, limit: ReadLimit) -> dict[str, Any]:
        """The end of the next initial-load micro-batch: a window of row ids of about ``maxRowsPerTrigger`` rows
        (else :data:`DEFAULT_MAX_ROWS`) in at most ``maxFilesPerTrigger`` files (else :data:`DEFAULT_MAX_FILES`);
        the load's last window ends at the load's snapshot with nothing left to load."""
        assert offset.initial is not None
        load = self._plan_initial(lake, offset.snapshot_id)
        max_rows = limit.max_rows if isinstance(limit, ReadMaxRows) else self.options.max_rows
        end = next_window(
            load,
            offset.initial,
            max_rows=max_rows or DEFAULT_MAX_ROWS,
            max_files=self.options.max_files or DEFAULT_MAX_FILES,
        )
        return self._offset(offset.snapshot_id, initial=end)

    def _plan_initial(self, lake: Lake, snapshot_id: int) -> InitialLoad:
        """The initial load at ``snapshot_id``, planned now (files a flush or merge replaced since are not read).

        Raises:
            DataLossError: the snapshot was expired before the load finished.
        """
        with lake.engine.connect() as conn:
            try:
                R.snapshot_by_id(conn, snapshot_id)
            except NoSuchSnapshotError:
                raise DataLossError(
                    f"the change feed of {self.identifier} was loading the table's rows at snapshot {snapshot_id}, "
                    "which was expired before the load finished; start again with a new checkpoint location (or "
                    "give startingSnapshot to follow only the changes)"
                ) from None
        columns = self._names(lake, snapshot_id)
        return plan_initial_load(lake, self.schema_name, self.table_name, snapshot_id, columns, footers=self._footers)

    def _changed(self, lake: Lake, begin: int, latest: int) -> list[int]:
        """Snapshots after ``begin`` that changed the table's rows (maintenance and other tables' commits left out)."""
        with lake.engine.connect() as conn:
            entry = R.table_by_name(conn, self.schema_name, self.table_name, latest)
        return changed_snapshots(lake.engine, entry, begin + 1, latest)

    def _limit_rows(self, lake: Lake, begin: int, latest: int, max_rows: int) -> int:
        """The last snapshot to read so that about ``max_rows`` rows come out (whole snapshots, at least one)."""
        total = 0
        for snapshot in self._changed(lake, begin, latest):
            counts = change_counts(
                lake.engine,
                lake.data_path,
                self.schema_name,
                self.table_name,
                snapshot,
                snapshot,
                fmt=lake.info.format,
                storage_options=lake.storage_options,
            )
            total += sum(counts.values())
            if total >= max_rows:
                return snapshot  # soft: the snapshot that reaches the limit is read whole
        return latest

    def _check_data_loss(self, lake: Lake, begin: int, last: int) -> int:
        """Raise (or, with failOnDataLoss=false, warn) when snapshots in ``begin+1..last`` were expired; the snapshot
        to read after (ahead of a gap right after ``begin``, with failOnDataLoss=false).

        Raises:
            DataLossError: a snapshot the stream still needs was expired (never a silent gap).
        """
        with lake.engine.connect() as conn:
            gap = R.expired_between(conn, begin + 1, last)
        if gap is None:
            return begin
        first, to = gap
        after = f" (the oldest snapshot still readable after them is {to + 1})" if to < last else ""
        message = (
            f"change feed of {self.identifier} needs snapshots {first}..{to}, which were expired or cleaned up{after}"
        )
        if self.options.fail_on_data_loss:
            raise DataLossError(
                message + f"; restart with a new checkpoint from snapshot {to + 1} (or 'earliest'), or set "
                "failOnDataLoss=false to skip them"
            )
        if first == begin + 1:
            log.warning("%s; skipping to snapshot %d (failOnDataLoss=false)", message, to + 1)
            return to
        log.warning("%s; their changes are missing from this micro-batch (failOnDataLoss=false)", message)
        return begin

    # --- reading ------------------------------------------------------------------------------------------------
    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[InputPartition]:
        first = self._read_offset(start)
        until = self._read_offset(end)
        begin, last = first.snapshot_id, until.snapshot_id
        lake = self._planner_lake()
        out: list[InputPartition] = []
        if first.initial is not None:
            load_end = until.initial if last == begin else None
            if load_end is not None and load_end <= first.initial:
                return []
            out += initial_partitions(self._plan_initial(lake, begin), first.initial, load_end)
            if until.initial is not None:
                return out
        if last <= begin:
            return out
        self._check_in_lake(lake, last)  # a replayed offset of another lake's longer history is no gap of this one
        # latestOffset already failed (or, with failOnDataLoss=false, warned) for expired snapshots: skip them.
        begin = self._check_data_loss(lake, begin, last)
        while last > begin:
            planned = self._change_partitions(lake, begin + 1, last)
            # expired while it was planned, the plan may lack their changes: fail, or plan again after them
            after = self._check_data_loss(lake, begin, last)
            if after == begin:
                return out + planned
            begin = after
        return out

    def _change_partitions(self, lake: Lake, first: int, last: int) -> list[InputPartition]:
        """The tasks reading the changes of snapshots ``first..last``."""
        return change_partitions(lake, self.schema_name, self.table_name, first, last, self._names(lake, last))

    def _names(self, lake: Lake, snapshot_id: int) -> list[str] | None:
        """The names at ``snapshot_id`` of the stream's columns when the ``columns`` option picked some."""
        if self.columns is None:
            return None
        with lake.engine.connect() as conn:
            entry = R.table_by_name(conn, self.schema_name, self.table_name, snapshot_id)
            return names_at(R.table_schema(conn, entry.table_id, snapshot_id), self.stream_schema)

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


def check_stream_columns(
    lake: Lake, schema_name: str, table_name: str, stream: TableSchema, spark: StructType | None = None
) -> None:
    """Fail when a column of a running stream was dropped or retyped in the table since the stream started, or,
    given the stream's ``spark`` schema, lost the NOT NULL that schema declares.

    Raises:
        SchemaChangedError: naming the column; a restart continues from the checkpoint with the new columns.
    """
    not_null = {f.name for f in spark.fields if not f.nullable} if spark is not None else set()
    with lake.engine.connect() as conn:
        latest = R.latest_snapshot(conn).snapshot_id
        entry = R.table_by_name(conn, schema_name, table_name, latest)
        current = R.table_schema(conn, entry.table_id, latest).by_id()
    for column in stream.columns:
        now = current.get(column.column_id)
        # NOT NULL set or dropped changes nothing the feed emits (its columns are all nullable)
        if now is None or now.nullable().shape()[2:] != column.nullable().shape()[2:]:
            raise SchemaChangedError(
                f"column {column.name!r} of {schema_name}.{table_name} was dropped or changed type while the change "
                "feed was running; restart the query to continue from its checkpoint with the new columns"
            )
        if column.name in not_null and now.nulls_allowed:
            raise SchemaChangedError(
                f"column {column.name!r} of {schema_name}.{table_name} dropped NOT NULL while a stream of its rows "
                "was running; restart the query to continue from its checkpoint with the new columns"
            )
