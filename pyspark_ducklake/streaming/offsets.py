"""Change-feed offsets: a snapshot id, stored by Spark as JSON in the checkpoint."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pyspark_ducklake.exceptions import InvalidOptionError

KEY = "snapshot_id"


@dataclass(frozen=True, order=True)
class SnapshotOffset:
    """Every change committed in snapshots up to and including ``snapshot_id`` has been emitted."""

    snapshot_id: int

    def to_dict(self) -> dict[str, int]:
        return {KEY: self.snapshot_id}

    @classmethod
    def from_dict(cls, value: dict[str, Any]) -> SnapshotOffset:
        """Raises: InvalidOptionError for an offset this source did not write (a foreign or corrupt checkpoint)."""
        try:
            return cls(int(value[KEY]))
        except (KeyError, TypeError, ValueError) as e:
            raise InvalidOptionError(
                f"checkpoint offset {value!r} was not written by the ducklake change feed (expected "
                f"{{'{KEY}': <int>}}); use a new checkpoint location for this query"
            ) from e
