"""GEOMETRY values as Spark 4.3's ``GeometryType(0)``.

PySpark moves a geometry through Arrow as ``struct<srid: int32 not null, wkb: binary not null>`` (field metadata
``geometry``); DuckLake keeps no SRID, so every value gets 0. A NULL geometry is a NULL struct over an empty WKB.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc


def is_spark_geometry(target: pa.DataType) -> bool:
    """Whether ``target`` is the Arrow form PySpark gives ``GeometryType``."""
    return pa.types.is_struct(target) and [f.name for f in target] == ["srid", "wkb"]


def spark_geometry(arr: pa.Array, target: pa.DataType) -> pa.Array:
    """WKB values (``binary`` or a ``geoarrow.wkb`` extension array) as ``target``."""
    wkb = arr.storage if isinstance(arr.type, pa.BaseExtensionType) else arr
    n = len(wkb)
    mask = wkb.is_null() if wkb.null_count else None
    if wkb.null_count:
        wkb = pc.fill_null(wkb, b"")
    srid = pa.array([0] * n, pa.int32())
    return pa.StructArray.from_arrays([srid, wkb.cast(pa.binary())], fields=list(target), mask=mask)


__all__ = ["is_spark_geometry", "spark_geometry"]
