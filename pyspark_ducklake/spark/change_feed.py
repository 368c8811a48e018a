"""The change feed as Spark reads it, in batch (``readChangeFeed``) and as a stream: its options, its Spark schema,
where it starts, and its partitions, each a Spark task reading whole data files (planned by
``table.change_feed_split``)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import InputPartition
from pyspark.sql.types import LongType, StringType, StructField, StructType, TimestampType

from pyspark_ducklake.catalog import reader as R
from pyspark_ducklake.catalog.types import TableSchema
from pyspark_ducklake.exceptions import InvalidOptionError
from pyspark_ducklake.lake import Lake
from pyspark_ducklake.options import (
    option_as_bool,
    option_as_int,
    option_value,
    parse_snapshot_id,
    parse_timestamp,
)
from pyspark_ducklake.spark.type_mapping import arrow_schema_for_spark, spark_schema, to_spark_batch
from pyspark_ducklake.table.change_feed import INSERT, change_column_names, plan_changes
from pyspark_ducklake.table.change_feed_initial import (
    InitialLoad,
    InitialPiece,
    plan_initial,
    read_window,
    window_pieces,
    with_row_groups,
)
from pyspark_ducklake.table.change_feed_split import ChangePart, execute_part, split_plan
from pyspark_ducklake.table.conform import default_array
from pyspark_ducklake.table.projection import project

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
    max_files: int | None
    fail_on_data_loss: bool

    @classmethod
    def parse(cls, options: dict[str, str]) -> FeedOptions:
        return cls(
            option_value(options, "startingSnapshot") or option_value(options, "startingVersion"),
            option_value(options, "startingTimestamp"),
            option_as_int(options, "maxSnapshotsPerTrigger", None, minimum=1),
            option_as_int(options, "maxRowsPerTrigger", None, minimum=1),
            option_as_int(options, "maxFilesPerTrigger", None, minimum=1),
            option_as_bool(options, "failOnDataLoss", True),
        )


def feed_schema(table_schema: TableSchema, columns: Sequence[str] | None = None) -> StructType:
    """The table's columns (those named in ``columns``, when given), then the change columns (renamed where the
    whole table has their names)."""
    names = change_column_names(table_schema)
    extra = [StructField(name, f.dataType, f.nullable) for name, f in zip(names, CHANGE_COLUMNS, strict=True)]
    return spark_schema(project(table_schema, columns).nullable(), extra)


def names_at(schema: TableSchema, stream: TableSchema) -> list[str]:
    """The names, in ``schema`` (the table at some snapshot), of the stream's columns it has (matched by id)."""
    ids = {c.column_id for c in stream.columns}
    return [c.name for c in schema.columns if c.column_id in ids]


def resolve_start(lake: Lake, options: FeedOptions) -> int:
    """The first snapshot whose changes the feed emits.

    ``startingTimestamp`` picks the oldest snapshot committed at or after that time, as DuckDB's ``table_changes``
    does with a start time (a time before the first snapshot starts at the oldest one, a time after the newest
    emits only what comes later); ``earliest`` is the oldest snapshot from which on none was expired (expiry by
    time leaves that the oldest of all; expired ids in between would be a gap in the feed, never read silently).

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
            return R.oldest_unbroken(conn)
        start = parse_snapshot_id(options.starting, "startingSnapshot")
        if start > latest + 1:
            raise InvalidOptionError(
                f"option startingSnapshot {start} is beyond the newest snapshot {latest} of the lake; give an "
                "existing snapshot id, 'earliest' or 'latest' (only what is committed after the query starts)"
            )
        return start


@dataclass(frozen=True)
class ChangeFeedPartition(InputPartition):
    """One Spark task's share of the feed: whole data files, planned on the driver (see ``table.change_feed_split``)."""

    part: ChangePart


def change_partitions(
    lake: Lake, schema_name: str, table_name: str, first: int, last: int, columns: Sequence[str] | None = None
) -> list[InputPartition]:
    """The changes of snapshots ``first..last`` (in the table's columns at ``last``, those named in ``columns``
    when given) as tasks of about :data:`PARTITION_ROWS` changes each, every data file read by one task only."""
    with lake.engine.connect() as conn:
        entry = R.table_by_name(conn, schema_name, table_name, last)
        plan = plan_changes(conn, entry, first, last, lake.data_path, columns, fmt=lake.info.format)
    parts = split_plan(plan, target_rows=PARTITION_ROWS, storage_options=lake.storage_options)
    return [ChangeFeedPartition(part) for part in parts]


@dataclass(frozen=True)
class InitialLoadPartition(InputPartition):
    """One piece of the initial load (a data file, or the inlined rows) limited to the row ids ``[low, high)``."""

    load: InitialLoad  # without its piece list; with its inlined rows only in the inlined piece's partition
    piece: InitialPiece
    low: int
    high: int | None


def initial_partitions(load: InitialLoad, low: int, high: int | None) -> list[InputPartition]:
    """The tasks of the initial load's window ``[low, high)`` (``high`` None: to the end), one per piece in it."""
    bare = replace(load, pieces=[], inlined=load.inlined.slice(0, 0))
    out: list[InputPartition] = []
    for piece in window_pieces(load, low, high):
        part = bare if piece.task is not None else replace(bare, inlined=load.inlined)
        out.append(InitialLoadPartition(part, piece, low, high))
    return out


def plan_initial_load(
    lake: Lake,
    schema_name: str,
    table_name: str,
    snapshot_id: int,
    columns: Sequence[str] | None = None,
    *,
    footers: dict[int, Any] | None = None,
) -> InitialLoad:
    """The table's rows at ``snapshot_id`` (those of ``columns``, names at that snapshot, when given) as the
    initial load's pieces with their row groups' row ids (see ``table.change_feed_initial``); ``footers`` keeps
    what the data files' footers said across calls."""
    with lake.engine.connect() as conn:
        entry = R.table_by_name(conn, schema_name, table_name, snapshot_id)
        load = plan_initial(conn, entry, snapshot_id, lake.data_path, fmt=lake.info.format, columns=columns)
    return with_row_groups(load, storage_options=lake.storage_options, cache=footers)


def read_partition(
    partition: InputPartition,
    stream: TableSchema | None,
    spark: StructType,
    *,
    storage_options: dict[str, Any] | None,
    rows_only: bool = False,
) -> Iterator[pa.RecordBatch]:
    """A task's changes in the stream's columns (None: the range's end snapshot's), as Arrow batches of exactly
    Spark's types, file by file; ``rows_only``: the inserted rows without the change columns (a stream of the
    table's rows)."""
    if not isinstance(partition, (ChangeFeedPartition, InitialLoadPartition)):
        return  # Spark's stand-in partition when there are none: an empty range
    target = arrow_schema_for_spark(spark)
    if isinstance(partition, InitialLoadPartition):
        at_end = partition.load.schema
        parts: Iterator[pa.Table] = iter(
            [
                read_window(
                    partition.load, partition.piece, partition.low, partition.high, storage_options=storage_options
                )
            ]
        )
    else:
        at_end = partition.part.plan.schema
        parts = execute_part(partition.part, storage_options=storage_options)
    for changes in parts:
        if stream is not None:
            changes = stream_columns(changes, at_end, stream)
        if rows_only:
            changes = inserted_rows(changes)
        for batch in changes.to_batches(max_chunksize=BATCH_ROWS):
            yield to_spark_batch(batch, target)


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


def inserted_rows(changes: pa.Table) -> pa.Table:
    """The inserted rows of ``changes`` (table columns, then the change columns) without the change columns."""
    kinds = changes.column(changes.num_columns - len(CHANGE_COLUMNS))
    rows = changes.select(range(changes.num_columns - len(CHANGE_COLUMNS)))
    inserted = pc.equal(kinds, INSERT)
    return rows if pc.all(inserted).as_py() is not False else rows.filter(inserted)
