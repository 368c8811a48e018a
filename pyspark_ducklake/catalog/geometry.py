"""DuckLake's ``geometry`` columns (issue #16 item 3) as GeoArrow WKB.

DuckDB stores ISO WKB (little-endian) in Parquet ``BYTE_ARRAY`` columns with the ``Geometry`` logical type, never
inlined, and its own Arrow read gives ``binary`` tagged ``geoarrow.wkb``; we read the same: the
``geoarrow.wkb`` extension type over ``binary`` (registered with pyarrow on first use; a type another library
registered under that name, such as geoarrow-pyarrow's, is used as it is).
"""

from __future__ import annotations

import threading

import pyarrow as pa

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


__all__ = ["GEOARROW_WKB", "WkbType", "geometry_type", "is_geometry"]
