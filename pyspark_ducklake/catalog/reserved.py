"""Column names DuckLake reserves: for the inlined-data tables while data inlining is on (1.0), and every name
starting with ``_ducklake_`` (1.1). And which tables never get an inlined-data table: one with such a name, with a
name longer than the catalog database keeps as an identifier, or with a type DuckDB never inlines; its rows all go to
Parquet, as DuckDB's ``CanInlineColumns`` decides."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from pyspark_ducklake.catalog.dialects import max_identifier_bytes
from pyspark_ducklake.catalog.format_version import RESERVED_PREFIX, FormatVersion
from pyspark_ducklake.catalog.types import NEVER_INLINED_TYPES, Column
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


def too_long_for_identifiers(names: Iterable[str], backend: str) -> list[tuple[str, int, int]]:
    """``(name, its UTF-8 bytes, the limit)`` of the names longer than ``backend`` keeps as identifiers (each column
    of an inlined-data table is one; PostgreSQL cuts them at 63 bytes, and DuckDB would then find no such column)."""
    limit = max_identifier_bytes(backend)
    if limit is None:
        return []
    return [(n, len(n.encode()), limit) for n in names if len(n.encode()) > limit]


def name_obstacle(names: Sequence[str], backend: str, fmt: FormatVersion) -> str | None:
    """Why a table of columns named ``names`` (top-level) gets no inlined-data table on ``backend``, or None: a name
    inlining reserves, or one too long for an identifier (DuckDB inlines no such table either; its rows go to
    Parquet)."""
    taken = inlining_reserved(names, fmt)
    if taken:
        return f"column {taken[0]!r} has a name DuckLake reserves for inlined data"
    too_long = too_long_for_identifiers(names, backend)
    if too_long:
        name, size, limit = too_long[0]
        return (
            f"column name {_shown(name)} is {size} bytes, longer than the {limit} a {backend} identifier holds (each "
            "column of an inlined-data table is one); DuckDB inlines no such table either"
        )
    return None


def inlining_obstacle(columns: Sequence[Column], backend: str, fmt: FormatVersion) -> str | None:
    """Why a table of ``columns`` gets no inlined-data table on ``backend``, or None: :func:`name_obstacle`, or a
    type DuckDB never inlines (VARIANT, GEOMETRY, at any depth)."""
    why = name_obstacle([c.name for c in columns], backend, fmt)
    if why is not None:
        return why
    for column in columns:
        kinds = sorted({c.type.upper() for c in column.walk() if c.type in NEVER_INLINED_TYPES})
        if kinds:
            return f"column {column.name!r} holds {kinds[0]}, which DuckDB never inlines on SQLite or PostgreSQL"
    return None


def check_identifiers(names: Iterable[str], backend: str, what: str) -> None:
    """Refuse names that would become identifiers ``backend`` cuts short, before anything is written.

    Raises:
        InvalidIdentifierError: naming the name, its length in bytes and the limit.
    """
    too_long = too_long_for_identifiers(names, backend)
    if too_long:
        name, size, limit = too_long[0]
        raise InvalidIdentifierError(
            f"{what}: the name {_shown(name)} is {size} bytes (UTF-8), longer than the {limit} bytes a {backend} "
            "identifier holds; choose a shorter name (nothing was written)"
        )


def _shown(name: str) -> str:
    return repr(name) if len(name) <= 60 else repr(name[:60]) + "…"


__all__ = [
    "INLINED_SYSTEM_COLUMNS",
    "check_column_names",
    "check_identifiers",
    "inlining_obstacle",
    "inlining_reserved",
    "name_obstacle",
    "prefix_reserved",
    "too_long_for_identifiers",
]
