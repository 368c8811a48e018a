"""VARIANT columns in the Parquet files we write: unshredded, annotated and counted as DuckDB does.

pyarrow 26 cannot write Parquet's ``VARIANT`` logical type, and DuckDB reads an unannotated
``struct<metadata, value>`` as a variant OBJECT holding two blobs. So the column is written as the group DuckDB
writes for an unshredded variant (``required binary metadata; optional binary value``, the field id on the group
only), and the footer is then rewritten to annotate the group ``VARIANT(1)``. SQL NULL is written as variant null
(``value = 00``), as DuckDB writes it. The file's statistics for the column are one row, as DuckDB's for a file
where nothing is shredded: ``value_count`` = rows, ``null_count`` = 0, no min/max.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from pyspark_ducklake.io import thrift_compact as tc
from pyspark_ducklake.io.parquet_footer import edit_top_level_columns
from pyspark_ducklake.io.variant import PARQUET_TYPE, is_variant_type, parquet_form

_SPEC_VERSION = 1
_LOGICAL_TYPE = 10  # SchemaElement.logicalType
_VARIANT = 16  # LogicalType.VARIANT


def variant_columns(table: pa.Table) -> list[str]:
    """Names of the top-level VARIANT columns of a table about to be written."""
    return [f.name for f in table.schema if is_variant_type(f.type)]


def to_parquet_form(table: pa.Table, names: list[str]) -> pa.Table:
    """``table`` with its VARIANT columns as the unshredded Parquet group (metadata, value)."""
    if not names:
        return table
    columns = []
    fields = []
    for f, col in zip(table.schema, table.columns, strict=True):
        if f.name in names:
            columns.append(parquet_form(col))
            fields.append(pa.field(f.name, PARQUET_TYPE, f.nullable, f.metadata))
        else:
            columns.append(col)
            fields.append(f)
    return pa.Table.from_arrays(columns, schema=pa.schema(fields, table.schema.metadata))


def mark_variant_columns(data: bytes, names: set[str]) -> bytes:
    """Rewrite a plain Parquet file's footer so the top-level groups ``names`` carry the ``VARIANT(1)`` logical type.

    Raises:
        DataFileError: the file is not plain Parquet, or a named group is missing.
    """

    def mark(_name: str, el: tc.Struct) -> None:
        variant = tc.Struct([tc.Field(1, tc.BYTE, _SPEC_VERSION)])
        el.set(_LOGICAL_TYPE, tc.STRUCT, tc.Struct([tc.Field(_VARIANT, tc.STRUCT, variant)]))

    return edit_top_level_columns(data, names, mark)


def collapse_stats(schema: pa.Schema, names: list[str], described: list[Any], rows: int) -> list[Any]:
    """Per-leaf statistics with each VARIANT column's two leaves replaced by one row for the column (its field
    id, their total size, ``rows`` values, no NULLs, no min/max), as DuckDB records an unshredded file."""
    if not names:
        return described
    from pyspark_ducklake.io.parquet import LeafStats, field_id, leaf_fields

    out: list[Any] = []
    at = 0
    for f in schema:
        n = len(leaf_fields(pa.schema([f])))
        part = described[at : at + n]
        at += n
        if f.name in names:
            fid = field_id(f)
            size = sum(s.column_size_bytes for s in part)
            out.append(LeafStats(fid if fid is not None else -1, size, rows, 0))
        else:
            out.extend(part)
    return out
