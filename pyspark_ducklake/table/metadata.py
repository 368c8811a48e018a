"""A lake's metadata as Arrow tables with the columns and types of DuckDB's ``ducklake_snapshots()``,
``ducklake_table_info()`` and ``ducklake_list_files()`` (DuckDB 1.5.5; checked against the extension in
tests/conformance/test_metadata_tables.py). ``Lake.snapshots_table`` / ``table_info`` / ``list_files`` and the Spark
option ``metadata`` read them.

DuckDB's unsigned sizes (``UBIGINT``) are ``int64`` here (Spark has no unsigned type; a size never reaches 2^63) and
its ``UUID`` is text.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Sequence

import pyarrow as pa

from pyspark_ducklake.catalog.entries import DataFileEntry, FileTotals, SnapshotInfo, TableEntry
from pyspark_ducklake.catalog.snapshot_changes import ChangeSet

SNAPSHOTS_SCHEMA = pa.schema(
    [
        ("snapshot_id", pa.int64()),
        ("snapshot_time", pa.timestamp("us", tz="UTC")),
        ("schema_version", pa.int64()),
        ("changes", pa.map_(pa.string(), pa.list_(pa.string()))),
        ("author", pa.string()),
        ("commit_message", pa.string()),
        ("commit_extra_info", pa.string()),
    ]
)
TABLE_INFO_SCHEMA = pa.schema(
    [
        ("table_name", pa.string()),
        ("schema_id", pa.int64()),
        ("table_id", pa.int64()),
        ("table_uuid", pa.string()),
        ("file_count", pa.int64()),
        ("file_size_bytes", pa.int64()),
        ("delete_file_count", pa.int64()),
        ("delete_file_size_bytes", pa.int64()),
    ]
)
FILES_SCHEMA = pa.schema(
    [
        ("data_file", pa.string()),
        ("data_file_size_bytes", pa.int64()),
        ("data_file_footer_size", pa.int64()),
        ("data_file_encryption_key", pa.binary()),
        ("delete_file", pa.string()),
        ("delete_file_size_bytes", pa.int64()),
        ("delete_file_footer_size", pa.int64()),
        ("delete_file_encryption_key", pa.binary()),
    ]
)
# The Spark option `metadata`'s values and their tables.
KINDS = {"snapshots": SNAPSHOTS_SCHEMA, "table_info": TABLE_INFO_SCHEMA, "files": FILES_SCHEMA}

_PLAIN = re.compile(r"[a-z_][a-z0-9_]*")
# DuckDB's ids per key, in the order ducklake_snapshots() lists them (after the created names)
_ID_KEYS = (
    ("tables_dropped", "dropped_tables"),
    ("tables_altered", "altered_tables"),
    ("tables_inserted_into", "inserted_into"),
    ("tables_deleted_from", "deleted_from"),
    ("views_dropped", "dropped_views"),
    ("views_altered", "altered_views"),
    ("inlined_insert", "inlined_insert"),
    ("inlined_delete", "inlined_delete"),
    ("flushed_inlined", "inline_flush"),
    ("merge_adjacent", "merge_adjacent"),
    ("rewrite_delete", "rewrite_delete"),
)


def _name(name: str) -> str:
    """A name as DuckDB's ``SQLIdentifier::ToString`` shows it: bare when plain lowercase, else double-quoted.
    (DuckDB also quotes reserved keywords; a schema or table named like one is shown bare here.)"""
    return name if _PLAIN.fullmatch(name) else '"' + name.replace('"', '""') + '"'


def changes_map(changes: ChangeSet) -> list[tuple[str, list[str]]]:
    """``ducklake_snapshots()``'s ``changes``: DuckDB's keys in DuckDB's order, ids ascending; created tables and
    views as ``schema.table`` with each part quoted as DuckDB quotes it."""
    out: list[tuple[str, list[str]]] = []
    if changes.created_schemas:
        out.append(("schemas_created", list(changes.created_schemas)))  # DuckDB shows schema names as they are
    if changes.dropped_schemas:
        out.append(("schemas_dropped", [str(i) for i in sorted(changes.dropped_schemas)]))
    if changes.created_tables:
        out.append(("tables_created", [f"{_name(s)}.{_name(t)}" for s, t in changes.created_tables]))
    if changes.created_views:
        out.append(("views_created", [f"{_name(s)}.{_name(t)}" for s, t in changes.created_views]))
    for key, attr in _ID_KEYS:
        ids = getattr(changes, attr)
        if ids:
            out.append((key, [str(i) for i in sorted(ids)]))
    return out


def snapshots_table(snapshots: Sequence[SnapshotInfo]) -> pa.Table:
    """``ducklake_snapshots()`` of ``snapshots``."""
    return pa.Table.from_pylist(
        [
            {
                "snapshot_id": s.snapshot_id,
                "snapshot_time": s.snapshot.snapshot_time,
                "schema_version": s.snapshot.schema_version,
                "changes": changes_map(s.changes),
                "author": s.author,
                "commit_message": s.commit_message,
                "commit_extra_info": s.commit_extra_info,
            }
            for s in snapshots
        ],
        schema=SNAPSHOTS_SCHEMA,
    )


def table_info_table(tables: Sequence[tuple[TableEntry, FileTotals]]) -> pa.Table:
    """``ducklake_table_info()``: per table, its data files and delete files and their sizes."""
    rows = [
        {
            "table_name": t.table_name,
            "schema_id": t.schema.schema_id,
            "table_id": t.table_id,
            "table_uuid": t.table_uuid,
            "file_count": totals.file_count,
            "file_size_bytes": totals.file_size_bytes,
            "delete_file_count": totals.delete_file_count,
            "delete_file_size_bytes": totals.delete_file_size_bytes,
        }
        for t, totals in tables
    ]
    return pa.Table.from_pylist(rows, schema=TABLE_INFO_SCHEMA)


def _key(text: str | None) -> bytes | None:
    return None if text is None else base64.b64decode(text)


def files_table(files: Sequence[DataFileEntry]) -> pa.Table:
    """``ducklake_list_files()``: one row per data file, with its live delete file."""
    rows = []
    for f in files:
        d = f.delete_file
        rows.append(
            {
                "data_file": f.path,
                "data_file_size_bytes": f.file_size_bytes,
                "data_file_footer_size": f.footer_size,
                "data_file_encryption_key": _key(f.encryption_key),
                "delete_file": None if d is None else d.path,
                "delete_file_size_bytes": None if d is None else d.file_size_bytes,
                "delete_file_footer_size": None if d is None else d.footer_size,
                "delete_file_encryption_key": None if d is None else _key(d.encryption_key),
            }
        )
    return pa.Table.from_pylist(rows, schema=FILES_SCHEMA)


__all__ = [
    "FILES_SCHEMA",
    "KINDS",
    "SNAPSHOTS_SCHEMA",
    "TABLE_INFO_SCHEMA",
    "changes_map",
    "files_table",
    "snapshots_table",
    "table_info_table",
]
