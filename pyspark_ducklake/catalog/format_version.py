"""The DuckLake format versions this library reads and writes, and what each changes in the catalog.

A catalog's version is its ``ducklake_metadata`` row ``version``. DuckDB 1.5 writes and reads ``1.0`` only; DuckDB
2.0 creates ``1.1`` catalogs and keeps ``1.0`` ones at ``1.0`` unless asked to migrate them. DuckLake's development
builds of 1.1 write ``1.1-dev1``, which is the same catalog layout (the reference's ``DuckLakeVersion::V1_1_DEV_1``).

The version is a value the layers pass down (:class:`FormatVersion`): each difference between versions is one
property here, so no code elsewhere compares version strings.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark_ducklake.exceptions import InvalidOptionError, UnsupportedSpecVersionError

# The prefix DuckLake 1.1 reserves for its own column names (DuckLakeInlinedColNames::PREFIX).
RESERVED_PREFIX = "_ducklake_"


@dataclass(frozen=True)
class FormatVersion:
    """A DuckLake catalog format version: ``tag`` as stored, ``release`` as ``(major, minor)``."""

    tag: str
    release: tuple[int, int]

    @property
    def name(self) -> str:
        """``1.0`` or ``1.1`` (a development tag is named for its release)."""
        return f"{self.release[0]}.{self.release[1]}"

    @property
    def row_group_counts(self) -> bool:
        """``ducklake_data_file`` and ``ducklake_delete_file`` end in a ``row_group_count`` column."""
        return self.release >= (1, 1)

    @property
    def view_column_tags(self) -> bool:
        """The catalog has ``ducklake_view_column_tag`` (comments on a view's columns)."""
        return self.release >= (1, 1)

    @property
    def epoch_transforms(self) -> bool:
        """Tables may be partitioned by ``epoch_year``, ``epoch_month``, ``epoch_day`` and ``epoch_hour``."""
        return self.release >= (1, 1)

    @property
    def multi_snapshot_deletion_vectors(self) -> bool:
        """One puffin delete file may hold a data file's deletes of several snapshots (a cumulative blob each)."""
        return self.release >= (1, 1)

    @property
    def inlined_system_columns(self) -> tuple[str, str, str]:
        """The first three columns of every ``ducklake_inlined_data_<table_id>_<schema_version>`` table."""
        prefix = RESERVED_PREFIX if self.release >= (1, 1) else ""
        return (f"{prefix}row_id", f"{prefix}begin_snapshot", f"{prefix}end_snapshot")

    @property
    def reserves_prefix(self) -> bool:
        """Every user column whose name starts with ``_ducklake_`` is refused, inlining on or off (1.1); on 1.0 only
        the inlined tables' own column names are, and only while inlining is on."""
        return self.release >= (1, 1)

    def __str__(self) -> str:
        return self.tag


V1_0 = FormatVersion("1.0", (1, 0))
V1_1 = FormatVersion("1.1", (1, 1))
V1_1_DEV1 = FormatVersion("1.1-dev1", (1, 1))

# Every tag a catalog may carry that this library reads and writes, and the versions it creates.
KNOWN = {v.tag: v for v in (V1_0, V1_1, V1_1_DEV1)}
CREATABLE = {v.tag: v for v in (V1_0, V1_1)}
DEFAULT = V1_0  # what DuckDB 1.5 and 2.0 both open


def catalog_format(tag: str, where: str) -> FormatVersion:
    """The version of a catalog whose ``ducklake_metadata.version`` row is ``tag``.

    Raises:
        UnsupportedSpecVersionError: a version this library does not know; the message names it and ``where``.
    """
    found = KNOWN.get(tag.strip())
    if found is None:
        raise UnsupportedSpecVersionError(
            f"catalog {where} is DuckLake format version {tag!r}; this pyspark-ducklake reads and writes "
            f"{', '.join(KNOWN)}. A newer catalog needs a newer pyspark-ducklake; an older one (0.x) must first be "
            "migrated by DuckDB (ATTACH ... (AUTOMATIC_MIGRATION true))"
        )
    return found


def requested_format(value: str | FormatVersion, option: str = "format_version") -> FormatVersion:
    """The version asked for by ``option`` (``"1.0"`` or ``"1.1"``) for a new catalog or a migration.

    Raises:
        InvalidOptionError: any other value; the message lists the valid ones.
    """
    if isinstance(value, FormatVersion):
        return value
    found = CREATABLE.get(str(value).strip())
    if found is None:
        raise InvalidOptionError(
            f"option {option}={value!r} is not a DuckLake format version this library creates; use one of "
            f"{', '.join(repr(v) for v in CREATABLE)} ('1.0' opens in DuckDB 1.5 and 2.0; '1.1' only in DuckDB 2.0)"
        )
    return found


__all__ = [
    "CREATABLE",
    "DEFAULT",
    "KNOWN",
    "RESERVED_PREFIX",
    "V1_0",
    "V1_1",
    "V1_1_DEV1",
    "FormatVersion",
    "catalog_format",
    "requested_format",
]
