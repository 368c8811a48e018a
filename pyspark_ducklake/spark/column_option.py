"""The ``columns`` read option (batch reads, the change feed batch and stream): which of a table's columns to read."""

from __future__ import annotations

from pyspark_ducklake.catalog.types import TableSchema
from pyspark_ducklake.options import option_value, parse_column_names
from pyspark_ducklake.table.projection import resolve_names


def selected_columns(options: dict[str, str], schema: TableSchema, identifier: str) -> list[str] | None:
    """The table's names of the columns the ``columns`` option selects, or None (every column).

    Raises:
        InvalidOptionError: an empty or repeated name.
        NoSuchColumnError: a name the table lacks (naming the closest).
    """
    value = option_value(options, "columns")
    if value is None:
        return None
    return resolve_names(schema, parse_column_names(value, "columns"), identifier)


__all__ = ["selected_columns"]
