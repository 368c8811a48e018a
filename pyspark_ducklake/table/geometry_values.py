"""GEOMETRY values on their way into a table: every accepted Arrow form turned into checked, normalised WKB.

A GEOMETRY column (or a GEOMETRY inside a list, struct or map) takes ``geoarrow.wkb`` (ours or another library's,
without a CRS), plain ``binary`` / ``large_binary`` / ``binary_view`` holding WKB, and ``struct<srid, wkb>``, the
form PySpark gives Spark's ``GeometryType`` (SRID 0 only). Every value is checked and rewritten as little-endian ISO
WKB (:mod:`pyspark_ducklake.io.wkb`), what DuckDB keeps; a malformed one is an :class:`InvalidGeometryError` naming
the column, and nothing is written. DuckLake keeps no CRS, so a non-zero SRID or an Arrow CRS is refused
(:class:`UnsupportedTypeError`) rather than silently dropped.
"""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.compute as pc

from pyspark_ducklake.catalog.geometry import geometry_type
from pyspark_ducklake.catalog.types import Column
from pyspark_ducklake.exceptions import UnsupportedTypeError
from pyspark_ducklake.io.parquet import flatten_struct
from pyspark_ducklake.io.wkb import is_wkb_type, normalize_array


def geometry_in(column: Column) -> bool:
    """Whether the column is a GEOMETRY or holds one in a nested field."""
    return any(c.type == "geometry" for c in column.walk())


def geometry_values(col: pa.Array | pa.ChunkedArray, column: Column, where: str) -> pa.Array:
    """``col`` with every value at a GEOMETRY position as normalised ``geoarrow.wkb``; other positions unchanged
    (the caller's cast and checks handle them, and refuse a type that is no geometry form).

    Raises:
        InvalidGeometryError: a value that is not WKB DuckDB reads.
        UnsupportedTypeError: a non-zero SRID or an Arrow CRS.
    """
    arr = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    return _convert(arr, column, where)


def _convert(arr: pa.Array, column: Column, where: str) -> pa.Array:
    t = arr.type
    if column.type == "geometry":
        wkb = _wkb_storage(arr, where)
        if wkb is None:
            return arr
        normalized, _ = normalize_array(wkb, where)
        return pa.ExtensionArray.from_storage(geometry_type(), normalized)
    mask = arr.is_null() if arr.null_count else None
    if column.type == "struct" and pa.types.is_struct(t):
        children = {c.name: c for c in column.children}
        fields, arrays = [], []
        for f, values in zip(t, flatten_struct(arr), strict=True):
            child = children.get(f.name)
            if child is not None and geometry_in(child):
                values = _convert(values, child, f"{where}.{f.name}")
                f = pa.field(f.name, values.type, f.nullable, f.metadata)
            fields.append(f)
            arrays.append(values)
        return pa.StructArray.from_arrays(arrays, fields=fields, mask=mask)
    if column.type == "list" and (pa.types.is_list(t) or pa.types.is_large_list(t)):
        offsets, values = _rebased(arr)
        values = _convert(values, column.children[0], f"{where}.element")
        lists = pa.LargeListArray if pa.types.is_large_list(t) else pa.ListArray
        return lists.from_arrays(offsets, values, mask=mask)
    if column.type == "map" and pa.types.is_map(t):
        offsets, keys = _rebased(arr, arr.keys)
        _, items = _rebased(arr, arr.items)
        keys = _convert(keys, column.children[0], f"{where}.key")
        items = _convert(items, column.children[1], f"{where}.value")
        return pa.MapArray.from_arrays(offsets, keys, items, mask=mask)
    return arr


def _rebased(arr: pa.Array, values: pa.Array | None = None) -> tuple[pa.Array, pa.Array]:
    """Offsets from 0 and the values the lists of ``arr`` (sliced or not) use."""
    offsets = arr.offsets
    first, last = offsets[0].as_py(), offsets[-1].as_py()
    base = arr.values if values is None else values
    return pc.subtract(offsets, pa.scalar(first, offsets.type)), base.slice(first, last - first)


def _wkb_storage(arr: pa.Array, where: str) -> pa.Array | None:
    """The WKB bytes of a geometry form (binary), or None for a type that is no geometry form."""
    t = arr.type
    if is_wkb_type(t):
        _check_no_crs(t, where)
        arr, t = arr.storage, t.storage_type
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_binary_view(t):
        return arr.cast(pa.binary())
    if pa.types.is_null(t):
        return pa.nulls(len(arr), pa.binary())
    if pa.types.is_struct(t) and sorted(f.name for f in t) == ["srid", "wkb"]:
        srid = arr.field("srid")
        present = pc.and_(arr.is_valid(), srid.is_valid())
        bad = pc.filter(srid, pc.and_(present, pc.not_equal(srid, 0)))
        if len(bad):
            raise UnsupportedTypeError(
                f"{where} holds a geometry with SRID {bad[0].as_py()}, and DuckLake keeps no SRID or CRS: set it to 0 "
                "first (e.g. st_setsrid(col, 0) in Spark) if the coordinates need no CRS to be read"
            )
        wkb = arr.field("wkb").cast(pa.binary())
        return pc.if_else(arr.is_valid(), wkb, pa.scalar(None, pa.binary()))
    return None


def _check_no_crs(t: pa.DataType, where: str) -> None:
    serialize = getattr(t, "__arrow_ext_serialize__", None)
    try:
        meta = json.loads(serialize() or b"{}") if serialize is not None else {}
    except ValueError:
        meta = {}
    if isinstance(meta, dict) and meta.get("crs"):
        raise UnsupportedTypeError(
            f"{where} is geoarrow.wkb with a CRS ({str(meta['crs'])[:60]}), and DuckLake keeps no SRID or CRS: use the "
            "type without it (pyspark_ducklake's geometry type, or plain binary WKB)"
        )


__all__ = ["geometry_in", "geometry_values"]
