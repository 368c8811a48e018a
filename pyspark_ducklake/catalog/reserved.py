"""Column names DuckLake reserves for the inlined-data tables while data inlining is on."""

from __future__ import annotations

from collections.abc import Iterable

from pyspark_ducklake.exceptions import InvalidIdentifierError

# DuckDB's DuckLakeUtil::IsInlinedSystemColumn: the inlined-data tables' own columns, and the internal columns a
# flush writes next to the table's in Parquet; compared case-insensitively.
INLINED_SYSTEM_COLUMNS = (
    "row_id",
    "begin_snapshot",
    "end_snapshot",
    "_ducklake_internal_snapshot_id",
    "_ducklake_internal_row_id",
)


def inlining_reserved(names: Iterable[str]) -> list[str]:
    """The names among ``names`` that an inlined-data table cannot hold next to its own columns."""
    reserved = {n.lower() for n in INLINED_SYSTEM_COLUMNS}
    return [n for n in names if n.lower() in reserved]


def check_column_names(names: Iterable[str], inlining_row_limit: int) -> None:
    """Refuse reserved names while inlining is on, as DuckDB refuses them in CREATE TABLE, ADD and RENAME COLUMN.

    Raises:
        InvalidIdentifierError: naming the column and what to do.
    """
    taken = inlining_reserved(names)
    if taken and inlining_row_limit > 0:
        raise InvalidIdentifierError(
            f"column name {taken[0]!r} is reserved by DuckLake for inlined data while data inlining is on "
            f"(data_inlining_row_limit={inlining_row_limit}); rename the column, or connect with "
            "data_inlining_row_limit=0 (with DuckDB: CALL ducklake_set_option('data_inlining_row_limit', 0))"
        )


__all__ = ["INLINED_SYSTEM_COLUMNS", "check_column_names", "inlining_reserved"]
