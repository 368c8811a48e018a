"""DuckLake 1.1's ``row_group_count``: the number of row groups a catalog row records for a data or Parquet delete
file, checked against the file's footer whenever the file is read (the footer is parsed for the read anyway).

A catalog row that disagrees with its file means the file was replaced after the row was written (or the row is
wrong): its ``row_id_start``, ``record_count`` and statistics cannot be trusted either, so the read stops with a
typed error instead of returning rows the catalog does not describe. NULL (a 1.0 catalog's files, a migrated
catalog's older files, deletion vectors) records nothing and is not checked.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark_ducklake.exceptions import RowGroupCountError


@dataclass(frozen=True)
class RecordedRowGroups:
    """A file's ``row_group_count`` as its catalog row records it: ``catalog_table`` (``ducklake_data_file`` or
    ``ducklake_delete_file``) and ``file_id`` (that row's ``data_file_id`` or ``delete_file_id``) say which row."""

    count: int
    catalog_table: str
    file_id: int


def check_row_groups(path: str, footer_count: int, recorded: RecordedRowGroups | None) -> None:
    """Raise when ``recorded`` (if any) disagrees with the ``footer_count`` row groups of the file at ``path``.

    Raises:
        RowGroupCountError: naming the file, both numbers and the catalog row.
    """
    if recorded is None or recorded.count == footer_count:
        return
    kind = "delete file" if recorded.catalog_table == "ducklake_delete_file" else "data file"
    id_column = "delete_file_id" if kind == "delete file" else "data_file_id"
    raise RowGroupCountError(
        f"{kind} {path} has {footer_count} row group(s) in its footer, but its catalog row in "
        f"{recorded.catalog_table} ({id_column} {recorded.file_id}) records row_group_count {recorded.count}: the "
        "file was replaced after the catalog row was written, or the row is wrong; restore the file the catalog "
        "describes, or time-travel to a snapshot that does not need it"
    )


__all__ = ["RecordedRowGroups", "check_row_groups"]
