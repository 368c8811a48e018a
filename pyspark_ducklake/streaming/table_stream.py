"""``spark.readStream.format("ducklake").load(t)`` without the change feed: the table's rows, then appended rows.

As Delta's plain table stream: the rows the table holds at the newest snapshot when the query starts (the change
feed's initial load, in row-id windows), then the rows each later snapshot appends, in the table's own columns (no
change columns). A snapshot that deletes or updates rows stops the query with :class:`RowsChangedError` naming it,
after every row appended before it was emitted; option ``skipChangeCommits`` skips such snapshots (their appended
rows too) and ``ignoreDeletes`` those that only delete (``table.row_stream``). Offsets, checkpoints, limits,
``Trigger.AvailableNow``, expired snapshots and column changes behave as in the change-feed stream it extends.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import InputPartition
from pyspark.sql.streaming.datasource import ReadLimit
from pyspark.sql.types import StructType

from pyspark_ducklake.exceptions import InvalidOptionError, RowsChangedError
from pyspark_ducklake.lake import Lake
from pyspark_ducklake.options import option_as_bool, option_value
from pyspark_ducklake.spark.change_feed import read_partition
from pyspark_ducklake.spark.lake_config import LakeConfig
from pyspark_ducklake.streaming.change_feed_stream import DuckLakeChangeFeedReader, check_stream_columns
from pyspark_ducklake.table.row_stream import APPEND, DELETE_ONLY, RowChange, row_changes

SKIP_OPTIONS = ("skipChangeCommits", "ignoreDeletes")


class DuckLakeTableStreamReader(DuckLakeChangeFeedReader):
    """The stream of a table's rows (see the module docstring)."""

    def __init__(self, config: LakeConfig, identifier: str, options: dict[str, str], schema: StructType) -> None:
        super().__init__(config, identifier, options, schema)
        self.skip_change_commits = option_as_bool(options, "skipChangeCommits", False)
        self.ignore_deletes = option_as_bool(options, "ignoreDeletes", False)
        self._kinds: dict[int, RowChange] = {}  # what each snapshot did (a snapshot never changes)

    def __getstate__(self) -> dict[str, Any]:
        state = super().__getstate__()
        state["_kinds"] = {}
        return state

    def _skips(self, change: RowChange) -> bool:
        return change.kind != APPEND and (
            self.skip_change_commits or (self.ignore_deletes and change.kind == DELETE_ONLY)
        )

    def _row_changes(self, lake: Lake, first: int, last: int) -> list[RowChange]:
        return row_changes(
            lake.engine,
            lake.data_path,
            self.schema_name,
            self.table_name,
            first,
            last,
            fmt=lake.info.format,
            storage_options=lake.storage_options,
            known=self._kinds,
        )

    def _end(self, lake: Lake, begin: int, latest: int, limit: ReadLimit) -> int:
        """As the change feed's, but stops before the first snapshot that deletes or updates rows and is not
        skipped; fails when that snapshot is the next one.

        Raises:
            RowsChangedError: the snapshot right after ``begin`` deletes or updates rows.
        """
        for change in self._row_changes(lake, begin + 1, latest):
            if change.kind == APPEND or self._skips(change):
                continue
            if change.snapshot_id == begin + 1:
                raise self._error(change)
            latest = change.snapshot_id - 1  # the rows before it first; the next micro-batch fails
            break
        return super()._end(lake, begin, latest, limit)

    def _error(self, change: RowChange) -> RowsChangedError:
        parts = [f"updated {change.updated} row(s)"] if change.updated else []
        if change.deleted:
            parts.append(f"deleted {change.deleted} row(s)")
        if change.kind != DELETE_ONLY and not change.updated:
            parts.append("appended others")
        did = " and ".join(parts)
        return RowsChangedError(
            f"snapshot {change.snapshot_id} {did} of {self.identifier}; a stream of the table's rows (readStream "
            "without readChangeFeed) emits appended rows only. Set option skipChangeCommits=true to skip snapshots "
            "that delete or update rows (their appended rows too)"
            + (", or ignoreDeletes=true to skip those that only delete" if change.kind == DELETE_ONLY else "")
            + "; the query continues from its checkpoint. Or read the change feed (option readChangeFeed=true, a "
            "new checkpoint location), which emits deletes and updates as rows"
        )

    def _change_partitions(self, lake: Lake, first: int, last: int) -> list[InputPartition]:
        """The appended rows of snapshots ``first..last``, the skipped snapshots left out."""
        skipped = [c.snapshot_id for c in self._row_changes(lake, first, last) if c.kind != APPEND]
        out: list[InputPartition] = []
        for low, high in _runs(first, last, skipped):
            out += super()._change_partitions(lake, low, high)
        return out

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        lake = self._lake()
        try:
            check_stream_columns(lake, self.schema_name, self.table_name, self.stream_schema, self.spark_schema)
        finally:
            lake.close()
        yield from read_partition(
            partition,
            self.stream_schema,
            self.spark_schema,
            storage_options=self.config.storage_options,
            rows_only=True,
        )


def _runs(first: int, last: int, skipped: list[int]) -> list[tuple[int, int]]:
    """``first..last`` without the ``skipped`` snapshots, as inclusive ranges."""
    out, low = [], first
    for s in sorted(skipped):
        if s > low:
            out.append((low, s - 1))
        low = s + 1
    if low <= last:
        out.append((low, last))
    return out


def check_skip_options(options: dict[str, str], feed: bool) -> None:
    """Refuse ``skipChangeCommits`` / ``ignoreDeletes`` on a change-feed stream, which emits deletes and updates.

    Raises:
        InvalidOptionError: naming the option.
    """
    for key in SKIP_OPTIONS:
        if feed and option_value(options, key) is not None:
            raise InvalidOptionError(
                f"option {key} applies to a stream of the table's rows (readStream without readChangeFeed or a "
                "start option); the change feed emits deletes and updates as rows: leave it out"
            )


__all__ = ["DuckLakeTableStreamReader", "check_skip_options"]
