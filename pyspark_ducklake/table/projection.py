"""Reading only some columns of a table, so a column this library cannot read blocks only reads that select it.

A column of a type without an Arrow form here (one a newer DuckLake adds), or whose values have none (a HUGEINT
beyond 38 digits), raises :class:`~pyspark_ducklake.exceptions.UnsupportedTypeError` when it is read; narrowing
the schema before anything is decoded keeps the other columns readable.
"""

from __future__ import annotations

import difflib
from collections.abc import Collection, Sequence

from pyspark_ducklake.catalog.types import Column, TableSchema, arrow_type, find_folded
from pyspark_ducklake.exceptions import NoSuchColumnError, UnsupportedTypeError


def project(schema: TableSchema, names: Collection[str] | None) -> TableSchema:
    """``schema`` with only the top-level columns named in ``names`` (all of them for None), in table order.

    Names that are not columns (the virtual ``rowid``, ``snapshot_id``) are ignored here.
    """
    if names is None:
        return schema
    wanted = set(names)
    kept = [(i, c) for i, c in enumerate(schema.columns) if c.name in wanted]
    base = schema.positions
    return TableSchema(tuple(c for _, c in kept), tuple(base[i] if base else i for i, _ in kept))


def resolve_names(schema: TableSchema, names: Sequence[str], table_name: str) -> list[str]:
    """The table's own spelling of each of ``names``: as given, else the one equal ignoring case (DuckDB's names
    are case-insensitive).

    Raises:
        NoSuchColumnError: a name that is no column of the table; names the closest one.
    """
    known = schema.names()
    out = []
    for name in names:
        found = name if name in known else find_folded(known, name)
        if found is None:
            close = difflib.get_close_matches(name.lower(), [k.lower() for k in known], n=1, cutoff=0.5)
            hint = f"; did you mean {known[[k.lower() for k in known].index(close[0])]!r}?" if close else ""
            raise NoSuchColumnError(f"column {name!r} is not in {table_name} (columns: {known}){hint}")
        out.append(found)
    return out


def readable(column: Column) -> bool:
    """Whether the column's type (at every nesting level) has an Arrow form in this library."""
    try:
        arrow_type(column)
    except UnsupportedTypeError:
        return False
    return True


__all__ = ["project", "readable", "resolve_names"]
