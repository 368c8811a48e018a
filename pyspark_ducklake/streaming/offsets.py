"""Change-feed offsets: a snapshot id and the table it belongs to, stored by Spark as JSON in the checkpoint."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pyspark_ducklake.exceptions import InvalidOptionError

KEY = "snapshot_id"
TABLE_KEY = "table_uuid"


@dataclass(frozen=True, order=True)
class SnapshotOffset:
    """Every change committed in snapshots up to and including ``snapshot_id`` has been emitted.

    ``table_uuid`` is the streamed table's ``ducklake_table.table_uuid``: snapshot ids are the lake's, so without it
    a checkpoint of one table, reused for another table of the same lake, would silently skip that table's earlier
    changes. Offsets written before it was added have none and are accepted as they are.
    """

    snapshot_id: int
    table_uuid: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {KEY: self.snapshot_id}
        if self.table_uuid is not None:
            out[TABLE_KEY] = self.table_uuid
        return out

    @classmethod
    def from_dict(cls, value: dict[str, Any]) -> SnapshotOffset:
        """Raises: InvalidOptionError for an offset this source did not write (a foreign or corrupt checkpoint)."""
        try:
            snapshot = value[KEY]
            if isinstance(snapshot, bool) or not isinstance(snapshot, (int, str)):
                raise TypeError(snapshot)
            table = value.get(TABLE_KEY)
            if table is not None and not isinstance(table, str):
                raise TypeError(table)
            return cls(int(snapshot), table)
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise InvalidOptionError(
                f"checkpoint offset {value!r} was not written by the ducklake change feed (expected "
                f"{{'{KEY}': <int>, '{TABLE_KEY}': <str>}}); use a new checkpoint location for this query"
            ) from e

    def check_table(self, table_uuid: str, identifier: str) -> SnapshotOffset:
        """This offset, when it belongs to the table with ``table_uuid`` (or names no table).

        Raises:
            InvalidOptionError: the checkpoint was written for another table.
        """
        if self.table_uuid is not None and self.table_uuid != table_uuid:
            raise InvalidOptionError(
                f"the checkpoint's offset (snapshot {self.snapshot_id}) was written for another table than "
                f"{identifier} (table_uuid {self.table_uuid}, this table's is {table_uuid}): the checkpoint belongs "
                "to another lake or table; use a new checkpoint location"
            )
        return self
