"""Well-known binary (WKB) geometries: checked, rewritten in the form DuckDB keeps, and summarised for statistics.

DuckDB 1.5.5 reads ISO WKB (types 1-7, +1000 Z, +2000 M, +3000 ZM) and EWKB (flags ``0x80000000`` Z,
``0x40000000`` M, ``0x20000000`` SRID) in either byte order, and gives back little-endian ISO WKB without the SRID;
a ``GEOMETRY`` Parquet column holding big-endian or EWKB values reads in DuckDB as that ISO form. So we write the ISO
form too: the bytes DuckDB's ``ST_AsWKB`` returns are then the bytes we store and read back. DuckDB refuses
(``Invalid Input Error``) what :func:`normalize` refuses here: truncated or trailing bytes, an unknown type or byte
order, a MULTIPOINT of non-points (and so on), parts whose Z/M differ from their parent's.

:class:`GeoSummary` is what DuckDB's Parquet writer keeps per column chunk and DuckLake records as ``extra_stats``:
the set of top-level geometry types (``point``, ``linestring_z``, ...) and the bounding box of every coordinate,
each ordinate's NaN left out (``POINT EMPTY`` is ``POINT(NaN NaN)``: its type counts, its coordinates do not).
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from pyspark_ducklake.exceptions import InvalidGeometryError, UnsupportedTypeError

TYPE_NAMES = ("point", "linestring", "polygon", "multipoint", "multilinestring", "multipolygon", "geometrycollection")
_SUFFIX = {(False, False): "", (True, False): "_z", (False, True): "_m", (True, True): "_zm"}
_EWKB_Z, _EWKB_M, _EWKB_SRID = 0x80000000, 0x40000000, 0x20000000
_MULTI_PART = {4: 1, 5: 2, 6: 3}  # MULTIPOINT holds POINTs, MULTILINESTRING LINESTRINGs, MULTIPOLYGON POLYGONs
_EMPTY = (math.inf, -math.inf)
_SMALL = 64  # coordinates (numbers) up to which a run is read with struct, beyond with numpy
# little-endian ISO points, the common case, are summarised for a whole array at once: header -> (type, width)
_POINT_HEADERS = {
    b"\x01" + struct.pack("<I", 1): ("point", 2),
    b"\x01" + struct.pack("<I", 1001): ("point_z", 3),
    b"\x01" + struct.pack("<I", 2001): ("point_m", 3),
    b"\x01" + struct.pack("<I", 3001): ("point_zm", 4),
}


@dataclass(frozen=True)
class GeoSummary:
    """Top-level geometry type names and the bounding box ``(xmin, xmax, ymin, ymax, zmin, zmax, mmin, mmax)``; an
    ordinate without any value has ``inf, -inf``."""

    types: frozenset[str] = frozenset()
    bbox: tuple[float, ...] = _EMPTY * 4

    def merge(self, other: GeoSummary) -> GeoSummary:
        return GeoSummary(self.types | other.types, widen(self.bbox, other.bbox))


def widen(a: tuple[float, ...] | list[float], b: tuple[float, ...] | list[float]) -> tuple[float, ...]:
    """The bounding box holding both ``a`` and ``b`` (minima at even places, maxima at odd)."""
    return tuple(min(x, y) if k % 2 == 0 else max(x, y) for k, (x, y) in enumerate(zip(a, b, strict=True)))


class _Reader:
    """One WKB value: reads it, writes its little-endian ISO form to ``out``, widens ``bounds``."""

    def __init__(self, data: bytes, bounds: list[float]) -> None:
        self.data = data
        self.pos = 0
        self.out = bytearray()
        self.bounds = bounds

    def fail(self, what: str) -> InvalidGeometryError:
        return InvalidGeometryError(f"{what} at byte {self.pos}")

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise self.fail(f"the WKB ends early (wanted {n} more bytes of {len(self.data)})")
        chunk = self.data[self.pos : self.pos + n]
        self.pos += n
        return chunk

    def u32(self, big: bool) -> int:
        value: int = struct.unpack(">I" if big else "<I", self.take(4))[0]
        return value

    def geometry(self, parent: tuple[bool, bool] | None, allowed: int | None) -> str:
        order = self.take(1)[0]
        if order not in (0, 1):
            self.pos -= 1
            raise self.fail(f"byte order {order} is neither 0 (big-endian) nor 1 (little-endian)")
        big = order == 0
        start = self.pos
        code = self.u32(big)
        has_z, has_m = bool(code & _EWKB_Z), bool(code & _EWKB_M)
        if code & _EWKB_SRID:
            srid = struct.unpack(">i" if big else "<i", self.take(4))[0]
            if srid != 0:  # DuckDB would drop it silently; we refuse rather than lose the CRS unseen
                raise UnsupportedTypeError(
                    f"an EWKB geometry has SRID {srid}, and DuckLake keeps no SRID or CRS: write it without one "
                    "(e.g. shapely's to_wkb(g, include_srid=False)) if the coordinates need no CRS to be read"
                )
        iso = code & 0x0FFFFFFF
        kind, dims = iso % 1000, iso // 1000
        if dims > 3 or not 1 <= kind <= 7:
            self.pos = start
            raise self.fail(f"geometry type {code} is not one DuckDB reads (1-7, ISO +1000/+2000/+3000 or EWKB flags)")
        has_z, has_m = has_z or dims in (1, 3), has_m or dims in (2, 3)
        if parent is not None and (has_z, has_m) != parent:
            self.pos = start
            raise self.fail("a part's Z/M dimensions differ from its parent geometry's")
        if allowed is not None and kind != allowed:
            self.pos = start
            raise self.fail(f"a {TYPE_NAMES[allowed - 1]} part was expected, not a {TYPE_NAMES[kind - 1]}")
        self.out += b"\x01" + struct.pack("<I", kind + 1000 * (has_z + 2 * has_m))
        width = 2 + has_z + has_m
        if kind == 1:
            self.coords(1, width, big, has_z, has_m)
        elif kind == 2:
            self.coords(self.count(big), width, big, has_z, has_m)
        elif kind == 3:
            for _ in range(self.count(big)):
                self.coords(self.count(big), width, big, has_z, has_m)
        else:
            for _ in range(self.count(big)):
                self.geometry((has_z, has_m), _MULTI_PART.get(kind))
        return TYPE_NAMES[kind - 1] + _SUFFIX[(has_z, has_m)]

    def count(self, big: bool) -> int:
        n = self.u32(big)
        if n > len(self.data):  # each item takes at least a byte: a count beyond the value's size is a lie
            self.pos -= 4
            raise self.fail(f"a count of {n} is more than the WKB holds")
        self.out += struct.pack("<I", n)
        return n

    def coords(self, n: int, width: int, big: bool, has_z: bool, has_m: bool) -> None:
        raw = self.take(8 * n * width)
        if not n:
            return
        slots = [(0, 0), (1, 1)] + ([(2, 2)] if has_z else []) + ([(width - 1, 3)] if has_m else [])
        if n * width <= _SMALL:  # a few numbers: plain Python beats numpy's per-call cost
            flat = struct.unpack(f"{'>' if big else '<'}{n * width}d", raw)
            if big:
                self.out += struct.pack(f"<{n * width}d", *flat)
            else:
                self.out += raw
            for col, slot in slots:
                present = [v for v in flat[col::width] if v == v]  # NaN != NaN: left out
                if present:
                    self.bounds[2 * slot] = min(self.bounds[2 * slot], *present)
                    self.bounds[2 * slot + 1] = max(self.bounds[2 * slot + 1], *present)
            return
        values = np.frombuffer(raw, ">f8" if big else "<f8").reshape(n, width)
        self.out += raw if not big else values.astype("<f8").tobytes()
        for col, slot in slots:
            v = values[:, col]
            v = v[~np.isnan(v)]
            if len(v):
                self.bounds[2 * slot] = min(self.bounds[2 * slot], float(v.min()))
                self.bounds[2 * slot + 1] = max(self.bounds[2 * slot + 1], float(v.max()))


def normalize(value: bytes) -> tuple[bytes, str, list[float]]:
    """The little-endian ISO WKB of ``value``, its type name and its bounds (as in :class:`GeoSummary`).

    Raises:
        InvalidGeometryError: not WKB DuckDB reads (see the module docstring); says which byte.
    """
    bounds = list(_EMPTY * 4)
    reader = _Reader(value, bounds)
    name = reader.geometry(None, None)
    if reader.pos != len(value):
        raise reader.fail(f"{len(value) - reader.pos} bytes follow the geometry")
    return bytes(reader.out), name, bounds


def is_wkb_type(dtype: pa.DataType) -> bool:
    """Whether ``dtype`` is a GeoArrow WKB extension type (``geoarrow.wkb``, ours or another library's)."""
    return isinstance(dtype, pa.BaseExtensionType) and dtype.extension_name == "geoarrow.wkb"


def summarize(values: pa.Array) -> GeoSummary:
    """The :class:`GeoSummary` of WKB ``values`` (already checked: see :func:`normalize_array`)."""
    return normalize_array(values, "a geometry column")[1]


def normalize_array(values: pa.Array, where: str) -> tuple[pa.Array, GeoSummary]:
    """``values`` (binary) as little-endian ISO WKB, NULLs kept, and their summary.

    Raises:
        InvalidGeometryError: a value that is not WKB DuckDB reads; ``where`` names the column, the message the row.
        UnsupportedTypeError: an EWKB value with a non-zero SRID.
    """
    storage = values.storage if isinstance(values, pa.ExtensionArray) else values
    storage = storage.cast(pa.binary())
    types: set[str] = set()
    bounds: tuple[float, ...] = _EMPTY * 4
    rest = np.ones(len(storage), dtype=bool) if len(storage) else np.zeros(0, dtype=bool)
    if storage.null_count:
        rest &= storage.is_valid().to_numpy(zero_copy_only=False)
    if len(storage):
        bounds = _points_at_once(storage, rest, types)
    out: list[bytes | None] | None = None
    todo = np.flatnonzero(rest)
    every = storage.to_pylist() if len(todo) else []
    for i in todo:
        v = every[i]
        try:
            norm, name, b = normalize(v)
        except InvalidGeometryError as e:
            raise InvalidGeometryError(
                f"{where}, value {i}: {e}; pass ISO or extended WKB (e.g. shapely's to_wkb, ST_AsWKB): nothing was "
                "written"
            ) from None
        except UnsupportedTypeError as e:
            raise UnsupportedTypeError(f"{where}, value {i}: {e}") from None
        if norm != v:
            if out is None:
                out = list(every)
            out[i] = norm
        types.add(name)
        bounds = widen(bounds, b)
    result = pa.array(out, pa.binary()) if out is not None else storage
    return result, GeoSummary(frozenset(types), tuple(bounds))


def _points_at_once(storage: pa.BinaryArray, rest: np.ndarray, types: set[str]) -> tuple[float, ...]:
    """Summarise the little-endian ISO points of ``storage`` with numpy, clearing them from ``rest`` (the values
    still to walk one by one); adds their type names to ``types`` and returns their bounding box."""
    bounds: tuple[float, ...] = _EMPTY * 4
    offsets_buf, data_buf = storage.buffers()[1], storage.buffers()[2]
    if data_buf is None:
        return bounds
    offsets = np.frombuffer(offsets_buf, np.int32)[storage.offset : storage.offset + len(storage) + 1]
    data = np.frombuffer(data_buf, np.uint8)
    lengths = np.diff(offsets)
    starts = offsets[:-1]
    for header, (name, width) in _POINT_HEADERS.items():
        hit = rest & (lengths == 5 + 8 * width)
        if not hit.any():
            continue
        where = np.flatnonzero(hit)
        head = data[starts[where, None] + np.arange(5)]
        match = (head == np.frombuffer(header, np.uint8)).all(axis=1)
        where = where[match]
        if not len(where):
            continue
        body = data[starts[where, None] + np.arange(5, 5 + 8 * width)]
        coords = np.ascontiguousarray(body).view("<f8").reshape(len(where), width)
        box = list(_EMPTY * 4)
        slots = [(0, 0), (1, 1)] + ([(2, 2)] if name.endswith(("_z", "_zm")) else [])
        if name.endswith(("_m", "_zm")):
            slots.append((width - 1, 3))
        for col, slot in slots:
            v = coords[:, col]
            v = v[~np.isnan(v)]
            if len(v):
                box[2 * slot], box[2 * slot + 1] = float(v.min()), float(v.max())
        bounds = widen(bounds, box)
        types.add(name)
        rest[where] = False
    return bounds


__all__ = ["TYPE_NAMES", "GeoSummary", "is_wkb_type", "normalize", "normalize_array", "summarize", "widen"]
