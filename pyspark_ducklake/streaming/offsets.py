"""Change-feed offsets: a snapshot id, how far the initial load has come, and the table they belong to, stored by
Spark as JSON in the checkpoint."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pyspark_ducklake.exceptions import CheckpointMismatchError, InvalidOptionError

KEY = "snapshot_id"
TABLE_KEY = "table_uuid"
NAME_KEY = "table"
INITIAL_KEY = "initial_rowid"


@dataclass(frozen=True)
class SnapshotOffset:
    """Every change committed in snapshots up to and including ``snapshot_id`` has been emitted; or, while
    ``initial`` is set, the initial load of the table's rows at ``snapshot_id`` has emitted those with row ids below
    ``initial`` (and no change after ``snapshot_id`` yet).

    ``table_uuid`` is the streamed table's ``ducklake_table.table_uuid``: snapshot ids are the lake's, so without it
    a checkpoint of one table, reused for another table of the same lake, would silently skip that table's earlier
    changes. Offsets written before it was added have none and are accepted as they are. ``table`` is the table's
    name when the offset was written, for messages only (a table renamed under a stream keeps its checkpoint).
    """

    snapshot_id: int
    table_uuid: str | None = None
    initial: int | None = None
    table: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {KEY: self.snapshot_id}
        if self.initial is not None:
            out[INITIAL_KEY] = self.initial
        if self.table_uuid is not None:
            out[TABLE_KEY] = self.table_uuid
        if self.table is not None:
            out[NAME_KEY] = self.table
        return out

    @classmethod
    def from_dict(cls, value: dict[str, Any]) -> SnapshotOffset:
        """Raises: InvalidOptionError for an offset this source did not write (a foreign or corrupt checkpoint)."""
        try:
            snapshot = _int(value[KEY])
            table = value.get(TABLE_KEY)
            if table is not None and not isinstance(table, str):
                raise TypeError(table)
            name = value.get(NAME_KEY)
            if name is not None and not isinstance(name, str):
                raise TypeError(name)
            initial = value.get(INITIAL_KEY)
            return cls(snapshot, table, None if initial is None else _int(initial), name)
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise InvalidOptionError(
                f"checkpoint offset {value!r} was not written by the ducklake change feed (expected "
                f"{{'{KEY}': <int>, '{TABLE_KEY}': <str>}}); use a new checkpoint location for this query"
            ) from e

    def check_table(self, table_uuid: str, identifier: str) -> SnapshotOffset:
        """This offset, when it belongs to the table with ``table_uuid`` (or names no table).

        Raises:
            CheckpointMismatchError: the checkpoint was written for another table; the message names both.
        """
        if self.table_uuid is not None and self.table_uuid != table_uuid:
            written = f"table {self.table}" if self.table is not None else "another table"
            raise CheckpointMismatchError(
                f"the checkpoint's offset (snapshot {self.snapshot_id}) was written for {written} (table_uuid "
                f"{self.table_uuid}), not for {identifier} (table_uuid {table_uuid}): the checkpoint belongs to "
                "another lake or table; use a new checkpoint location"
            )
        return self


def _int(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise TypeError(value)
    return int(value)
