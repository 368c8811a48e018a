"""Column names DuckLake reserves: for the inlined-data tables while data inlining is on (1.0), and every name
starting with ``_ducklake_`` (1.1)."""

from __future__ import annotations

from collections.abc import Iterable

from pyspark_ducklake.catalog.format_version import RESERVED_PREFIX, FormatVersion
from pyspark_ducklake.exceptions import InvalidIdentifierError

# DuckDB's DuckLakeUtil::IsInlinedSystemColumn on 1.0: the inlined-data tables' own columns, and the internal columns
# a flush writes next to the table's in Parquet; compared case-insensitively.
INLINED_SYSTEM_COLUMNS = (
    "row_id",
    "begin_snapshot",
    "end_snapshot",
    "_ducklake_internal_snapshot_id",
    "_ducklake_internal_row_id",
)


def inlining_reserved(names: Iterable[str], fmt: FormatVersion) -> list[str]:
    """The names among ``names`` that an inlined-data table of a catalog of format ``fmt`` cannot hold next to its
    own columns."""
    if fmt.reserves_prefix:
        return prefix_reserved(names)
    reserved = {n.lower() for n in INLINED_SYSTEM_COLUMNS}
    return [n for n in names if n.lower() in reserved]


def prefix_reserved(names: Iterable[str]) -> list[str]:
    """The names among ``names`` that start with ``_ducklake_``, case-insensitively (reserved on 1.1)."""
    return [n for n in names if n.lower().startswith(RESERVED_PREFIX)]


def check_column_names(names: Iterable[str], inlining_row_limit: int, fmt: FormatVersion) -> None:
    """Refuse reserved names as DuckDB refuses them in CREATE TABLE, ADD and RENAME COLUMN: on 1.1 every name
    starting with ``_ducklake_``; on 1.0 the inlined tables' own names while inlining is on.

    Raises:
        InvalidIdentifierError: naming the column and what to do.
    """
    names = list(names)
    if fmt.reserves_prefix:
        taken = prefix_reserved(names)
        if taken:
            raise InvalidIdentifierError(
                f"column name {taken[0]!r} is reserved by DuckLake {fmt.name} for internal use: names starting with "
                f"{RESERVED_PREFIX!r} are not allowed (whatever the case); rename the column"
            )
        return
    taken = inlining_reserved(names, fmt)
    if taken and inlining_row_limit > 0:
        raise InvalidIdentifierError(
            f"column name {taken[0]!r} is reserved by DuckLake for inlined data while data inlining is on "
            f"(data_inlining_row_limit={inlining_row_limit}); rename the column, or connect with "
            "data_inlining_row_limit=0 (with DuckDB: CALL ducklake_set_option('data_inlining_row_limit', 0))"
        )


__all__ = ["INLINED_SYSTEM_COLUMNS", "check_column_names", "inlining_reserved", "prefix_reserved"]
