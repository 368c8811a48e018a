"""Reading only some columns of a table, so a column this library cannot read blocks only reads that select it.

A column of a type without an Arrow form here (one a newer DuckLake adds), or whose values have none (a HUGEINT
beyond 38 digits), raises :class:`~pyspark_ducklake.exceptions.UnsupportedTypeError` when it is read; narrowing
the schema before anything is decoded keeps the other columns readable.
"""

from __future__ import annotations

from collections.abc import Collection

from pyspark_ducklake.catalog.types import Column, TableSchema, arrow_type
from pyspark_ducklake.exceptions import UnsupportedTypeError


def project(schema: TableSchema, names: Collection[str] | None) -> TableSchema:
    """``schema`` with only the top-level columns named in ``names`` (all of them for None), in table order.

    Names that are not columns (the virtual ``rowid``, ``snapshot_id``) are ignored here.
    """
    if names is None:
        return schema
    wanted = set(names)
    return TableSchema(tuple(c for c in schema.columns if c.name in wanted))


def readable(column: Column) -> bool:
    """Whether the column's type (at every nesting level) has an Arrow form in this library."""
    try:
        arrow_type(column)
    except UnsupportedTypeError:
        return False
    return True


__all__ = ["project", "readable"]
