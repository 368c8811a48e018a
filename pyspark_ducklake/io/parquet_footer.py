"""Rewriting the schema of a plain Parquet file we wrote, for annotations pyarrow cannot write.

pyarrow writes neither the ``INTERVAL`` converted type nor the ``VARIANT`` logical type, nor a ``TIME`` marked
``isAdjustedToUTC``; the file is written without them and its footer rewritten. The footer follows the data pages,
so they do not move, and every other footer field is re-encoded as it was.
"""

from __future__ import annotations

import struct
from collections.abc import Callable

from pyspark_ducklake.exceptions import DataFileError
from pyspark_ducklake.io import thrift_compact as tc

_NAME = 4  # SchemaElement.name
_NUM_CHILDREN = 5  # SchemaElement.num_children
_FIELD_ID = 9  # SchemaElement.field_id
_SCHEMA = 2  # FileMetaData.schema


def edit_top_level_columns(data: bytes, names: set[str], edit: Callable[[str, tc.Struct], None]) -> bytes:
    """``data`` with ``edit(name, element)`` applied to the schema element of each top-level column in ``names``.

    Raises:
        DataFileError: the file is not plain (unencrypted) Parquet, or a named column is missing; ``edit`` may raise
            it too.
    """
    start, meta = _footer(data)
    elements = _schema_elements(meta)
    found: set[str] = set()
    i = 1
    for _ in range(_children(elements[0])):
        el = elements[i]
        name_f = el.get(_NAME)
        name = bytes(name_f.value).decode() if name_f is not None else None
        if name is not None and name in names:
            edit(name, el)
            found.add(name)
        i += _subtree(elements, i)
    missing = names - found
    if missing:
        raise DataFileError(f"columns {sorted(missing)} not found in the written file's schema")
    footer = tc.encode_struct(meta)
    return data[:start] + footer + struct.pack("<I", len(footer)) + b"PAR1"


def edit_columns_by_field_id(data: bytes, ids: frozenset[int], edit: Callable[[int, tc.Struct], None]) -> bytes:
    """``data`` with ``edit(field_id, element)`` applied to every schema element (at any depth) whose field id is in
    ``ids``.

    Raises:
        DataFileError: the file is not plain (unencrypted) Parquet, or a field id is missing.
    """
    start, meta = _footer(data)
    found: set[int] = set()
    for el in _schema_elements(meta)[1:]:
        fid = el.get(_FIELD_ID)
        if fid is not None and fid.value in ids:
            edit(int(fid.value), el)
            found.add(int(fid.value))
    missing = ids - found
    if missing:
        raise DataFileError(f"field ids {sorted(missing)} not found in the written file's schema")
    footer = tc.encode_struct(meta)
    return data[:start] + footer + struct.pack("<I", len(footer)) + b"PAR1"


def _footer(data: bytes) -> tuple[int, tc.Struct]:
    if len(data) < 12 or data[-4:] != b"PAR1" or data[:4] != b"PAR1":
        raise DataFileError("not a plain (unencrypted) Parquet file")
    footer_len = struct.unpack("<I", data[-8:-4])[0]
    start = len(data) - 8 - footer_len
    meta, end = tc.decode_struct(data, start)
    if end != len(data) - 8:
        raise DataFileError("Parquet footer does not end where its length says")
    return start, meta


def _schema_elements(meta: tc.Struct) -> list[tc.Struct]:
    schema_field = meta.get(_SCHEMA)
    if schema_field is None or not isinstance(schema_field.value, tc.ListValue):
        raise DataFileError("Parquet footer has no schema")
    elements: list[tc.Struct] = schema_field.value.items
    return elements


def _children(el: tc.Struct) -> int:
    f = el.get(_NUM_CHILDREN)
    return int(f.value) if f is not None else 0


def _subtree(elements: list[tc.Struct], i: int) -> int:
    """How many elements the subtree rooted at ``elements[i]`` spans (depth-first order)."""
    count = 1
    j = i + 1
    for _ in range(_children(elements[i])):
        k = _subtree(elements, j)
        j += k
        count += k
    return count
