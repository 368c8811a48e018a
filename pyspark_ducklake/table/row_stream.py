"""What a stream of a table's rows (``readStream`` without the change feed, as Delta's plain table stream) may pass.

Such a stream emits the rows the table holds when it starts, then the rows each later snapshot appends. A snapshot
that deletes or updates rows cannot be told as appended rows: like Delta's, the stream stops there unless told to
skip such snapshots (``skipChangeCommits``: any that deletes or updates, its appended rows too; ``ignoreDeletes``:
those that only delete). Maintenance (flush, merge, compaction), schema changes and other tables' commits change no
rows and pass. What a snapshot did comes from ``changes_made``; one that says it deleted is counted (delete files and
internal row columns only, as ``change_counts`` reads), since DuckDB records some flushes as plain deletes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pyspark_ducklake.catalog import reader
from pyspark_ducklake.catalog.db import Engine
from pyspark_ducklake.catalog.format_version import FormatVersion
from pyspark_ducklake.table.change_feed import DELETE, INSERT, UPDATE_PREIMAGE, change_counts, classify

APPEND = "append"  # rows appended, none deleted
DELETE_ONLY = "delete"  # rows deleted, none appended
UPDATE = "update"  # rows updated, or deleted and appended in one snapshot


@dataclass(frozen=True)
class RowChange:
    """One snapshot that changed the table's rows: its kind and, for the others than appends, how many rows it
    deleted and updated (as the change feed counts them: an updated row is no deleted one)."""

    snapshot_id: int
    kind: str
    deleted: int = 0
    updated: int = 0


def row_changes(
    engine: Engine,
    data_path: str,
    schema_name: str,
    table_name: str,
    start: int,
    end: int,
    *,
    fmt: FormatVersion,
    storage_options: dict[str, Any] | None = None,
    known: dict[int, RowChange] | None = None,
) -> list[RowChange]:
    """The snapshots in ``[start, end]`` that changed the table's rows, oldest first, with what they did; ``known``
    keeps the results across calls (a snapshot never changes).

    Raises:
        NoSuchTableError: the table does not exist at ``end``.
    """
    cache = {} if known is None else known
    with engine.connect() as conn:
        table = reader.table_by_name(conn, schema_name, table_name, end)
        rows = reader.snapshot_changes_between(conn, start, end)
    out = []
    for snapshot_id, recorded, made in sorted(rows):
        if snapshot_id in cache:
            out.append(cache[snapshot_id])
            continue
        changes = classify(made, table.table_id, known=recorded)
        if not changes.logical:
            continue
        found = RowChange(snapshot_id, APPEND)
        if changes.deleted:
            counts = change_counts(
                engine,
                data_path,
                schema_name,
                table_name,
                snapshot_id,
                snapshot_id,
                fmt=fmt,
                storage_options=storage_options,
            )
            found = _kind(snapshot_id, counts)
        cache[snapshot_id] = found
        out.append(found)
    return out


def _kind(snapshot_id: int, counts: dict[str, int]) -> RowChange:
    deleted, updated = counts.get(DELETE, 0), counts.get(UPDATE_PREIMAGE, 0)
    if updated or (deleted and counts.get(INSERT, 0)):
        return RowChange(snapshot_id, UPDATE, deleted, updated)
    if deleted:
        return RowChange(snapshot_id, DELETE_ONLY, deleted)
    return RowChange(snapshot_id, APPEND)


__all__ = ["APPEND", "DELETE_ONLY", "UPDATE", "RowChange", "row_changes"]
