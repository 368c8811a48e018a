"""VARIANT columns in the Parquet files we write: unshredded, annotated and counted as DuckDB does.

pyarrow 26 cannot write Parquet's ``VARIANT`` logical type, and DuckDB reads an unannotated
``struct<metadata, value>`` as a variant OBJECT holding two blobs. So the column is written as the group DuckDB
writes for an unshredded variant (``required binary metadata; optional binary value``, the field id on the group
only), and the footer is then rewritten to annotate the group ``VARIANT(1)``. SQL NULL is written as variant null
(``value = 00``), as DuckDB writes it. The file's statistics for the column are one row, as DuckDB's for a file
where nothing is shredded: ``value_count`` = rows, ``null_count`` = 0, no min/max.
"""

from __future__ import annotations

import struct
from typing import Any

import pyarrow as pa

from pyspark_ducklake.exceptions import DataFileError
from pyspark_ducklake.io import thrift_compact as tc
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
    """Rewrite a plain Parquet file's footer so the top-level groups ``names`` carry the ``VARIANT(1)`` logical
    type (data pages do not move; every other footer field is re-encoded as it was).

    Raises:
        DataFileError: the file is not plain Parquet, or a named group is missing.
    """
    if len(data) < 12 or data[-4:] != b"PAR1" or data[:4] != b"PAR1":
        raise DataFileError("not a plain (unencrypted) Parquet file")
    footer_len = struct.unpack("<I", data[-8:-4])[0]
    start = len(data) - 8 - footer_len
    meta, end = tc.decode_struct(data, start)
    if end != len(data) - 8:
        raise DataFileError("Parquet footer does not end where its length says")
    schema_field = meta.get(2)
    if schema_field is None or not isinstance(schema_field.value, tc.ListValue):
        raise DataFileError("Parquet footer has no schema")
    elements: list[tc.Struct] = schema_field.value.items
    found: set[str] = set()
    i = 1
    for _ in range(_children(elements[0])):
        el = elements[i]
        name_f = el.get(4)
        name = bytes(name_f.value).decode() if name_f is not None else None
        if name in names:
            variant = tc.Struct([tc.Field(1, tc.BYTE, _SPEC_VERSION)])
            el.set(_LOGICAL_TYPE, tc.STRUCT, tc.Struct([tc.Field(_VARIANT, tc.STRUCT, variant)]))
            found.add(name)
        i += _subtree(elements, i)
    missing = names - found
    if missing:
        raise DataFileError(f"columns {sorted(missing)} not found in the written file's schema")
    footer = tc.encode_struct(meta)
    return data[:start] + footer + struct.pack("<I", len(footer)) + b"PAR1"


def _children(el: tc.Struct) -> int:
    f = el.get(5)
    return int(f.value) if f is not None else 0


def _subtree(elements: list[tc.Struct], i: int) -> int:
    count = 1
    j = i + 1
    for _ in range(_children(elements[i])):
        k = _subtree(elements, j)
        j += k
        count += k
    return count


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
