"""Rows compared by their Arrow storage: dates, times and timestamps as integers (``24:00:00``, infinities and
years beyond 9999 have no Python form, and pyarrow turns ``24:00:00`` into ``00:00`` silently)."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from tests.support.compare import canonical


def storage_type(t: pa.DataType) -> pa.DataType:
    """``t`` with every temporal type replaced by its integer storage and extension types by their storage."""
    if isinstance(t, pa.BaseExtensionType):
        return t if t.extension_name == "arrow.uuid" else storage_type(t.storage_type)
    if pa.types.is_date32(t) or pa.types.is_time32(t):
        return pa.int32()
    if pa.types.is_date64(t) or pa.types.is_time64(t) or pa.types.is_timestamp(t):
        return pa.int64()
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return pa.list_(pa.field(t.value_field.name, storage_type(t.value_type)))
    if pa.types.is_struct(t):
        return pa.struct([pa.field(f.name, storage_type(f.type)) for f in t])
    if pa.types.is_map(t):
        return pa.map_(storage_type(t.key_type), storage_type(t.item_type))
    return t


def _as_storage(col: pa.ChunkedArray) -> pa.ChunkedArray:
    t = col.type
    if isinstance(t, pa.BaseExtensionType) and t.extension_name != "arrow.uuid":
        col = pa.chunked_array([c.storage for c in col.chunks], t.storage_type)
    return col.cast(storage_type(col.type))


def raw_rows(table: pa.Table, sort_by: str = "id") -> list[tuple[Any, ...]]:
    """Rows of canonical values over the storage of each column, ordered by ``sort_by``."""
    cols = [_as_storage(table.column(i)) for i in range(table.num_columns)]
    values = []
    for c in cols:
        if isinstance(c.type, pa.BaseExtensionType):
            import uuid

            values.append(
                [None if v is None else str(uuid.UUID(bytes=v)) for v in c.cast(c.type.storage_type).to_pylist()]
            )
        else:
            values.append(c.to_pylist())
    rows = [tuple(canonical(v[r]) for v in values) for r in range(table.num_rows)]
    key = table.column_names.index(sort_by)
    return sorted(rows, key=lambda r: (r[key] is None, r[key]))
