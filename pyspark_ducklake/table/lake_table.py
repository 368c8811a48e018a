"""A table as of one snapshot: its catalog entry, columns, partitioning and sort order."""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from pyspark_ducklake.catalog.entries import TableEntry
from pyspark_ducklake.catalog.partitioning import PartitionSpec
from pyspark_ducklake.catalog.sort_order import SortOrder
from pyspark_ducklake.catalog.types import TableSchema
from pyspark_ducklake.table.identifiers import format_identifier
from pyspark_ducklake.table.partition_values import PartitionKey, resolve_keys
from pyspark_ducklake.table.sort_rows import SortKey, sort_keys


@dataclass(frozen=True)
class LakeTable:
    """A table as of one snapshot."""

    entry: TableEntry
    table_schema: TableSchema
    snapshot_id: int
    partition: PartitionSpec | None = None
    sort: SortOrder | None = None

    @property
    def name(self) -> str:
        """``schema.table`` as :func:`format_identifier` spells it (quoted when a name holds a dot or quote)."""
        return format_identifier(self.entry.schema.schema_name, self.entry.table_name)

    @property
    def table_id(self) -> int:
        return self.entry.table_id

    @property
    def schema(self) -> pa.Schema:
        return self.table_schema.arrow_schema()

    @property
    def partition_keys(self) -> tuple[PartitionKey, ...]:
        return resolve_keys(self.partition, self.table_schema)

    @property
    def partition_by(self) -> list[str]:
        """The partition keys as ``col`` / ``year(col)`` strings."""
        return [
            k.column.name if k.transform == "identity" else f"{k.transform}({k.column.name})"
            for k in self.partition_keys
        ]

    @property
    def sort_keys(self) -> tuple[SortKey, ...]:
        """The columns new rows are sorted by (``SET SORTED BY``); empty when the table has no sort order.

        Raises:
            UnsupportedSortOrderError: the sort order has a key this library cannot sort by as DuckDB does.
        """
        return sort_keys(self.sort, self.table_schema, self.name)

    @property
    def sorted_by(self) -> list[str]:
        """The sort order as ``expr ASC NULLS LAST`` strings (empty when unsorted)."""
        return [] if self.sort is None else [f.describe() for f in self.sort.fields]
