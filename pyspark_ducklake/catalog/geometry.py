"""DuckLake's ``geometry`` columns (issue #16 item 3) as GeoArrow WKB.

DuckDB stores ISO WKB (little-endian) in Parquet ``BYTE_ARRAY`` columns with the ``Geometry`` logical type, never
inlined, and its own Arrow read gives ``binary`` tagged ``geoarrow.wkb``; we read the same: the
``geoarrow.wkb`` extension type over ``binary`` (registered with pyarrow on first use; a type another library
registered under that name, such as geoarrow-pyarrow's, is used as it is).
"""

from __future__ import annotations

import json
import math
import threading

import pyarrow as pa

from pyspark_ducklake.io.wkb import GeoSummary

GEOARROW_WKB = "geoarrow.wkb"


class WkbType(pa.ExtensionType):
    """``geoarrow.wkb`` on ``binary`` storage, with no CRS (DuckLake keeps none)."""

    def __init__(self) -> None:
        super().__init__(pa.binary(), GEOARROW_WKB)

    def __arrow_ext_serialize__(self) -> bytes:
        return b"{}"

    @classmethod
    def __arrow_ext_deserialize__(cls, storage_type: pa.DataType, serialized: bytes) -> WkbType:
        return cls()


_lock = threading.Lock()
_registered = False


def geometry_type() -> pa.DataType:
    """The Arrow type of a DuckLake ``geometry`` column."""
    global _registered
    if not _registered:
        with _lock:
            if not _registered:
                try:
                    pa.register_extension_type(WkbType())
                except pa.ArrowKeyError:
                    pass  # registered already (by us in another import, or by geoarrow-pyarrow)
                _registered = True
    return WkbType()


def is_geometry(dtype: pa.DataType) -> bool:
    """Whether ``dtype`` is a GeoArrow WKB type (ours or another library's)."""
    return isinstance(dtype, pa.BaseExtensionType) and dtype.extension_name == GEOARROW_WKB


def spark_geometry_srid(f: pa.Field) -> int | None:
    """The SRID of a field in the Arrow form PySpark gives Spark's ``GeometryType`` (``struct<srid, wkb>``, the
    ``wkb`` field's metadata saying ``geometry: true`` and the SRID), or None for any other field."""
    t = f.type
    if not pa.types.is_struct(t) or sorted(x.name for x in t) != ["srid", "wkb"]:
        return None
    meta = t.field("wkb").metadata or {}
    if meta.get(b"geometry") != b"true":
        return None
    try:
        return int(meta.get(b"srid", b"0"))
    except ValueError:
        return None


_BOUNDS = ("xmin", "xmax", "ymin", "ymax", "zmin", "zmax", "mmin", "mmax")


def geo_stats_text(summary: GeoSummary) -> str:
    """DuckDB 1.5.5's ``extra_stats`` text of a geometry column: ``{"bbox": {...}, "types": [...]}``, each bound
    printed as C's ``%f`` (``std::to_string``) or ``null`` when no coordinate has it, the type names sorted."""
    bounds = ", ".join(
        f'"{name}": {"null" if math.isinf(v) else f"{v:f}"}' for name, v in zip(_BOUNDS, summary.bbox, strict=True)
    )
    types = ", ".join(f'"{t}"' for t in sorted(summary.types))
    return f'{{"bbox": {{{bounds}}}, "types": [{types}]}}'


def parse_geo_stats(text: str | None) -> GeoSummary | None:
    """The summary in a geometry column's ``extra_stats`` (ours or DuckDB's); None when absent or unreadable."""
    if not text:
        return None
    try:
        doc = json.loads(text)
        box = doc.get("bbox") or {}
        bbox = tuple(
            float(box[name]) if isinstance(box.get(name), (int, float)) else (math.inf if k % 2 == 0 else -math.inf)
            for k, name in enumerate(_BOUNDS)
        )
        types = frozenset(t for t in doc.get("types") or [] if isinstance(t, str))
    except (ValueError, AttributeError, TypeError):
        return None
    return GeoSummary(types, bbox)


__all__ = [
    "GEOARROW_WKB",
    "WkbType",
    "geo_stats_text",
    "geometry_type",
    "is_geometry",
    "parse_geo_stats",
    "spark_geometry_srid",
]
