"""Batch reads: the driver packs the data files into a few partitions (plus one for inlined rows); executors stream
each file a row group at a time (table/file_stream.py) as Arrow batches of exactly Spark's types.

A read asks the catalog once: the scan planned when the DataFrame is loaded (``schema()``, which pins the snapshot)
travels with the pickled data source to ``partitions()`` when it is small (:data:`CARRIED_PLAN_FILES`,
:data:`CARRIED_PLAN_INLINED_BYTES`); a larger one is planned again there, at the same snapshot, so the data source
Spark ships to every planning step stays small. The reader never pickles it into its tasks."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from pyspark_ducklake.catalog import reader as R
from pyspark_ducklake.catalog.types import TableSchema
from pyspark_ducklake.exceptions import DuckLakeError, InvalidOptionError, SchemaMismatchError
from pyspark_ducklake.options import option_value, parse_snapshot_id
from pyspark_ducklake.spark.column_option import selected_columns
from pyspark_ducklake.spark.lake_config import LakeConfig
from pyspark_ducklake.spark.type_mapping import arrow_schema_for_spark, spark_schema, to_spark_batch
from pyspark_ducklake.table.file_stream import stream_file_task
from pyspark_ducklake.table.identifiers import parse_identifier
from pyspark_ducklake.table.projection import project
from pyspark_ducklake.table.read_packing import FileSlice, default_cores, pack_files
from pyspark_ducklake.table.scan import ScanPlan, plan_scan, table_columns

SNAPSHOT_OPTIONS = ("snapshot", "versionAsOf")
TIMESTAMP_OPTIONS = ("timestamp", "timestampAsOf")
# A row group is one Arrow batch to Spark (DuckDB's and our files: 122,880 rows); larger ones, and whole files read
# by name or position, are cut at this many rows.
MAX_BATCH_ROWS = 262_144
# A scan planned at load() is carried to partitions() only up to these sizes (it is pickled with the data source).
CARRIED_PLAN_FILES = 1_000
CARRIED_PLAN_INLINED_BYTES = 1 << 20


def _first(options: dict[str, str], keys: tuple[str, ...]) -> tuple[str, str] | None:
    for k in keys:
        v = option_value(options, k)
        if v is not None:
            return k, v
    return None


def resolve_read_snapshot(lake: Any, options: dict[str, str]) -> int:
    """The snapshot a read pins: ``snapshot``/``versionAsOf``, ``timestamp``/``timestampAsOf``, or the latest."""
    snap = _first(options, SNAPSHOT_OPTIONS)
    ts = _first(options, TIMESTAMP_OPTIONS)
    if snap is not None and ts is not None:
        raise InvalidOptionError(f"options {snap[0]} and {ts[0]} both pick a snapshot; give only one")
    if snap is not None:
        return int(lake.resolve_snapshot(snapshot=parse_snapshot_id(snap[1], snap[0])))
    if ts is not None:
        try:
            when = dt.datetime.fromisoformat(ts[1])
        except ValueError as e:
            raise InvalidOptionError(f"could not parse option {ts[0]} as an ISO timestamp: {ts[1]!r}") from e
        return int(lake.resolve_snapshot(timestamp=when))
    return int(lake.current_snapshot_id())


def _table(conn: Any, identifier: str, options: dict[str, str], snapshot: int) -> tuple[Any, TableSchema, Any]:
    """The table's catalog entry and schema at the snapshot, and the columns the options select."""
    schema_name, table_name = parse_identifier(identifier)
    entry = R.table_by_name(conn, schema_name, table_name, snapshot)
    full = R.table_schema(conn, entry.table_id, snapshot)
    return entry, full, selected_columns(options, full, identifier)


def read_schema(
    config: LakeConfig, identifier: str, options: dict[str, str]
) -> tuple[StructType, int, ScanPlan | None]:
    """The Spark schema of the table at the snapshot the options pick, that snapshot, and its scan when it is
    small enough to carry to ``partitions()`` (None otherwise, or when planning it failed: ``partitions()`` then
    plans again and raises there, when the DataFrame is first used, as before plans were carried)."""
    lake = config.connect(keep_engine=True)
    try:
        snapshot = resolve_read_snapshot(lake, options)
        with lake.engine.connect() as conn:
            entry, full, columns = _table(conn, identifier, options, snapshot)
            try:
                plan: ScanPlan | None = plan_scan(
                    conn, entry, snapshot, lake.data_path, fmt=lake.info.format, columns=columns, full=full
                )
            except DuckLakeError:
                plan = None
    finally:
        lake.close()
    if plan is None:
        return spark_schema(project(full, columns)), snapshot, None
    return spark_schema(plan.schema), snapshot, plan if _carriable(plan) else None


def _carriable(plan: ScanPlan) -> bool:
    inlined = plan.inlined.data.nbytes if plan.inlined is not None else 0
    return len(plan.files) <= CARRIED_PLAN_FILES and inlined <= CARRIED_PLAN_INLINED_BYTES


@dataclass(frozen=True)
class FilesPartition(InputPartition):
    """Data files (or byte ranges of them) one Spark task reads, one after the other."""

    slices: tuple[FileSlice, ...]
    schema: TableSchema


@dataclass(frozen=True)
class InlinedPartition(InputPartition):
    ipc: bytes


class DuckLakeBatchReader(DataSourceReader):
    """Reads a table pinned at one snapshot: ``snapshot`` (resolved when the DataFrame was loaded), else the one
    the options pick when Spark plans the read. ``plan``: the scan planned when the DataFrame was loaded (used when
    it is of that snapshot; never pickled with the reader)."""

    def __init__(
        self,
        config: LakeConfig,
        identifier: str,
        options: dict[str, str],
        schema: StructType,
        *,
        snapshot: int | None = None,
        plan: ScanPlan | None = None,
    ) -> None:
        self.config = config
        self.identifier = identifier
        self.options = options
        self.spark_schema = schema
        self.snapshot = snapshot
        self._plan = plan

    def __getstate__(self) -> dict[str, Any]:
        # Spark pickles the reader into every task before partitions() runs: the carried plan stays behind
        return {**self.__dict__, "_plan": None}

    def _scan(self) -> ScanPlan:
        plan, self._plan = self._plan, None
        if plan is not None and self.snapshot is not None and plan.snapshot_id == self.snapshot:
            return plan
        lake = self.config.connect(keep_engine=True)
        try:
            snapshot = self.snapshot if self.snapshot is not None else resolve_read_snapshot(lake, self.options)
            with lake.engine.connect() as conn:
                entry, full, columns = _table(conn, self.identifier, self.options, snapshot)
                return plan_scan(
                    conn, entry, snapshot, lake.data_path, fmt=lake.info.format, columns=columns, full=full
                )
        finally:
            lake.close()

    def partitions(self) -> list[InputPartition]:
        plan = self._scan()
        snapshot = plan.snapshot_id
        if self.spark_schema is not None and spark_schema(plan.schema) != self.spark_schema:
            raise SchemaMismatchError(
                f"table {self.identifier} changed between planning and reading (snapshot {snapshot}); "
                "run the read again"
            )
        self.snapshot = snapshot
        parts: list[InputPartition] = [
            FilesPartition(pieces, plan.schema) for pieces in pack_files(plan.files, default_cores())
        ]
        if plan.inlined is not None and plan.inlined.data.num_rows:
            data = table_columns(plan.inlined.data, plan.schema)
            sink = pa.BufferOutputStream()
            with pa.ipc.new_stream(sink, data.schema) as w:
                w.write_table(data)
            parts.append(InlinedPartition(sink.getvalue().to_pybytes()))
        return parts or [InlinedPartition(b"")]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        target = arrow_schema_for_spark(self.spark_schema)
        if isinstance(partition, InlinedPartition):
            if partition.ipc:
                yield from _spark_batches(pa.ipc.open_stream(partition.ipc).read_all(), target)
            return
        assert isinstance(partition, FilesPartition)
        storage_options = self.config.storage_options
        for piece in partition.slices:
            rows_of = stream_file_task(
                piece.task, partition.schema, storage_options=storage_options, byte_range=(piece.start, piece.end)
            )
            for rows in rows_of:
                yield from _spark_batches(rows, target)


def _spark_batches(rows: pa.Table, target: pa.Schema) -> Iterator[pa.RecordBatch]:
    if not rows.num_rows:
        return
    if rows.num_rows <= MAX_BATCH_ROWS and all(c.num_chunks == 1 for c in rows.columns):
        yield to_spark_batch(rows, target)  # a row group: its arrays as they are, no slicing
        return
    for batch in rows.to_batches(max_chunksize=MAX_BATCH_ROWS):
        if batch.num_rows:
            yield to_spark_batch(batch, target)
