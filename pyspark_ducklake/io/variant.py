"""VARIANT values: the Parquet variant binary encoding, un-shredding, and the Arrow form this library uses.

A variant is a pair of binaries: ``metadata`` (a dictionary of object keys) and ``value`` (a self-describing
value whose objects name their keys by index into that dictionary), as the Parquet variant spec defines them
(parquet-format ``VariantEncoding.md``). DuckDB writes VARIANT columns *shredded* (``VariantShredding.md``): beside
``metadata`` and ``value`` a ``typed_value`` column holds the values of one type as plain Parquet columns, object
fields and list elements recursively; :func:`unshred` rebuilds the unshredded pair from them.

In Arrow a variant is ``struct<value: binary not null, metadata: binary not null>`` whose ``metadata`` field is
tagged ``{"variant": "true"}``: the form PySpark 4 converts to and from ``VariantType`` (``VARIANT_TYPE``). pyarrow
26 has no variant type of its own.

A top-level variant null (``value = 00``) reads as SQL NULL: DuckDB writes SQL NULL as variant null and answers
``v IS NULL`` true for both, so the two cannot be told apart after a write (nested nulls stay variant nulls).
"""

from __future__ import annotations

import datetime as dt
import decimal
import itertools
import struct
import uuid
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from pyspark_ducklake.exceptions import InvalidVariantError

VARIANT_MARKER = {b"variant": b"true"}
VARIANT_TYPE = pa.struct(
    [
        pa.field("value", pa.binary(), nullable=False),
        pa.field("metadata", pa.binary(), nullable=False, metadata=VARIANT_MARKER),
    ]
)
VARIANT_NULL = b"\x00"
EMPTY_METADATA = b"\x11\x00\x00"  # version 1, sorted, 1-byte offsets, no keys: what DuckDB writes for scalars

# basic types (the low 2 bits of a value's header byte)
_PRIMITIVE, _SHORT_STRING, _OBJECT, _ARRAY = 0, 1, 2, 3
# primitive type ids (the high 6 bits)
NULL, TRUE, FALSE, INT8, INT16, INT32, INT64, DOUBLE = 0, 1, 2, 3, 4, 5, 6, 7
DECIMAL4, DECIMAL8, DECIMAL16, DATE, TIMESTAMP, TIMESTAMP_NTZ, FLOAT, BINARY = 8, 9, 10, 11, 12, 13, 14, 15
STRING, TIME_NTZ, TIMESTAMP_NANOS, TIMESTAMP_NTZ_NANOS, UUID = 16, 17, 18, 19, 20
# bytes after the header of fixed-size primitives
_FIXED_SIZE = {
    NULL: 0,
    TRUE: 0,
    FALSE: 0,
    INT8: 1,
    INT16: 2,
    INT32: 4,
    INT64: 8,
    DOUBLE: 8,
    DECIMAL4: 5,
    DECIMAL8: 9,
    DECIMAL16: 17,
    DATE: 4,
    TIMESTAMP: 8,
    TIMESTAMP_NTZ: 8,
    FLOAT: 4,
    TIME_NTZ: 8,
    TIMESTAMP_NANOS: 8,
    TIMESTAMP_NTZ_NANOS: 8,
    UUID: 16,
}
_EPOCH = dt.datetime(1970, 1, 1)
_EPOCH_DATE = dt.date(1970, 1, 1)
MAX_DEPTH = 300  # nesting beyond this is refused (a malicious value would otherwise exhaust the stack)


def is_variant_type(t: pa.DataType) -> bool:
    """Whether ``t`` is the Arrow form of a variant (PySpark's: two binaries, ``metadata`` tagged variant)."""
    if not pa.types.is_struct(t) or t.num_fields != 2:
        return False
    names = {t.field(i).name: t.field(i) for i in range(2)}
    if set(names) != {"value", "metadata"}:
        return False
    meta = names["metadata"].metadata or {}
    return bool(meta.get(b"variant") == b"true") and all(_is_binary(f.type) for f in names.values())


def _is_binary(t: pa.DataType) -> bool:
    return bool(pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_binary_view(t))


# --- metadata ---------------------------------------------------------------------------------------------------


class Metadata:
    """A metadata dictionary; keys missing from it can be appended (then :meth:`encode` writes a new one).

    ``cache`` shares the parsed keys between rows with the same bytes (most rows of a column); they are copied
    before a key is appended.
    """

    def __init__(self, raw: bytes, cache: dict[bytes, tuple[list[str], dict[str, int]]] | None = None) -> None:
        self.raw = raw
        parsed = cache.get(raw) if cache is not None else None
        if parsed is None:
            keys = parse_metadata(raw)
            parsed = (keys, {k: i for i, k in enumerate(keys)})
            if cache is not None:
                cache[raw] = parsed
        self.keys, self.index = parsed
        self.changed = False

    def id_of(self, key: str) -> int:
        i = self.index.get(key)
        if i is None:
            if not self.changed:  # copy on write: the parsed keys may be shared
                self.keys, self.index = list(self.keys), dict(self.index)
            i = len(self.keys)
            self.keys.append(key)
            self.index[key] = i
            self.changed = True
        return i

    def encode(self) -> bytes:
        return self.raw if not self.changed else encode_metadata(self.keys)


def parse_metadata(raw: bytes) -> list[str]:
    """The keys of a metadata dictionary.

    Raises:
        InvalidVariantError: not a version-1 metadata dictionary, truncated, or keys that are not UTF-8.
    """
    if len(raw) < 1:
        raise InvalidVariantError("variant metadata is empty")
    header = raw[0]
    if header & 0x0F != 1:
        raise InvalidVariantError(f"variant metadata version {header & 0x0F} is not 1")
    size = (header >> 6) + 1
    count = _uint(raw, 1, size)
    offsets_at = 1 + size
    data_at = offsets_at + (count + 1) * size
    if data_at > len(raw):
        raise InvalidVariantError("variant metadata is truncated")
    offsets = [_uint(raw, offsets_at + i * size, size) for i in range(count + 1)]
    keys = []
    for a, b in itertools.pairwise(offsets):
        if not 0 <= a <= b or data_at + b > len(raw):
            raise InvalidVariantError("variant metadata has an offset out of range")
        try:
            keys.append(raw[data_at + a : data_at + b].decode("utf-8"))
        except UnicodeDecodeError as e:
            raise InvalidVariantError("variant metadata has a key that is not UTF-8") from e
    return keys


def encode_metadata(keys: list[str]) -> bytes:
    """A metadata dictionary of ``keys`` in this order (flagged sorted when they are sorted and unique)."""
    blobs = [k.encode("utf-8") for k in keys]
    total = sum(len(b) for b in blobs)
    size = _width(max(total, len(keys)))
    is_sorted = all(a < b for a, b in itertools.pairwise(blobs))
    out = bytearray([1 | (0x10 if is_sorted else 0) | ((size - 1) << 6)])
    out += len(keys).to_bytes(size, "little")
    offset = 0
    out += offset.to_bytes(size, "little")
    for b in blobs:
        offset += len(b)
        out += offset.to_bytes(size, "little")
    for b in blobs:
        out += b
    return bytes(out)


# --- reading values ---------------------------------------------------------------------------------------------


def _uint(buf: bytes, pos: int, size: int) -> int:
    if pos + size > len(buf):
        raise InvalidVariantError("variant value is truncated")
    return int.from_bytes(buf[pos : pos + size], "little")


def _width(n: int) -> int:
    """Bytes needed for an unsigned ``n`` (1..4)."""
    return 1 if n < 0x100 else 2 if n < 0x10000 else 3 if n < 0x1000000 else 4


def _container(buf: bytes, pos: int) -> tuple[int, int, int, int, int]:
    """``(kind, count, id_size, offset_size, header_end)`` of the object or array at ``pos``."""
    b = buf[pos]
    kind, vh = b & 3, b >> 2
    offset_size = (vh & 3) + 1
    if kind == _OBJECT:
        id_size = ((vh >> 2) & 3) + 1
        large = (vh >> 4) & 1
    else:
        id_size = 0
        large = (vh >> 2) & 1
    count_size = 4 if large else 1
    count = _uint(buf, pos + 1, count_size)
    return kind, count, id_size, offset_size, pos + 1 + count_size


def object_fields(buf: bytes, pos: int = 0) -> Iterator[tuple[int, int]]:
    """``(field id, position of its value)`` of the object at ``pos``, in stored (key) order."""
    _, count, id_size, offset_size, at = _container(buf, pos)
    offsets_at = at + count * id_size
    data_at = offsets_at + (count + 1) * offset_size
    for i in range(count):
        fid = _uint(buf, at + i * id_size, id_size)
        yield fid, data_at + _uint(buf, offsets_at + i * offset_size, offset_size)


def array_elements(buf: bytes, pos: int = 0) -> Iterator[int]:
    """The position of each element of the array at ``pos``."""
    _, count, _, offset_size, at = _container(buf, pos)
    data_at = at + (count + 1) * offset_size
    for i in range(count):
        yield data_at + _uint(buf, at + i * offset_size, offset_size)


def value_size(buf: bytes, pos: int = 0) -> int:
    """The number of bytes of the value at ``pos``.

    Raises:
        InvalidVariantError: an unknown type or a truncated value.
    """
    if pos >= len(buf):
        raise InvalidVariantError("variant value is truncated")
    b = buf[pos]
    kind, vh = b & 3, b >> 2
    if kind == _SHORT_STRING:
        return 1 + vh
    if kind == _PRIMITIVE:
        if vh in _FIXED_SIZE:
            return 1 + _FIXED_SIZE[vh]
        if vh in (BINARY, STRING):
            return 5 + _uint(buf, pos + 1, 4)
        raise InvalidVariantError(f"variant value has unknown primitive type {vh}")
    _, count, id_size, offset_size, at = _container(buf, pos)
    last = at + count * id_size + count * offset_size
    data_at = last + offset_size
    return data_at + _uint(buf, last, offset_size) - pos


def decode(metadata: bytes, value: bytes) -> Any:
    """The Python value of a variant: None, bool, int, float, Decimal, str, bytes, date, datetime (aware UTC for
    timestamps with a zone), time, UUID, dict (keys in key order) or list. Nanosecond timestamps are given as
    ``("timestamp_nanos" | "timestamp_ntz_nanos", nanoseconds since the epoch)``.

    Raises:
        InvalidVariantError: malformed bytes (a field id beyond the dictionary, a truncated value, trailing bytes).
    """
    keys = parse_metadata(bytes(metadata))
    value = bytes(value)  # PySpark's VariantVal holds bytearrays
    try:
        out = _decode(keys, value, 0, 0)
        end = value_size(value, 0)
    except (IndexError, struct.error, ValueError) as e:
        if isinstance(e, InvalidVariantError):
            raise
        raise InvalidVariantError(f"variant value is malformed: {e}") from e
    if end != len(value):
        raise InvalidVariantError(f"variant value has {len(value) - end} bytes after its end")
    return out


def _decode(keys: list[str], buf: bytes, pos: int, depth: int) -> Any:
    if depth > MAX_DEPTH:
        raise InvalidVariantError(f"variant value is nested deeper than {MAX_DEPTH} levels")
    if pos >= len(buf):
        raise InvalidVariantError("variant value is truncated")
    b = buf[pos]
    kind, vh = b & 3, b >> 2
    if kind == _SHORT_STRING:
        return _text(buf, pos + 1, vh)
    if kind == _OBJECT:
        out = {}
        for fid, at in object_fields(buf, pos):
            if fid >= len(keys):
                raise InvalidVariantError(f"variant object field id {fid} is beyond the metadata's {len(keys)} keys")
            out[keys[fid]] = _decode(keys, buf, at, depth + 1)
        return out
    if kind == _ARRAY:
        return [_decode(keys, buf, at, depth + 1) for at in array_elements(buf, pos)]
    return _primitive(buf, pos + 1, vh)


def _text(buf: bytes, pos: int, n: int) -> str:
    if pos + n > len(buf):
        raise InvalidVariantError("variant string is truncated")
    try:
        return buf[pos : pos + n].decode("utf-8")
    except UnicodeDecodeError as e:
        raise InvalidVariantError("variant string is not UTF-8") from e


def _int(buf: bytes, pos: int, n: int) -> int:
    if pos + n > len(buf):
        raise InvalidVariantError("variant value is truncated")
    return int.from_bytes(buf[pos : pos + n], "little", signed=True)


def _primitive(buf: bytes, pos: int, t: int) -> Any:
    if t == NULL:
        return None
    if t in (TRUE, FALSE):
        return t == TRUE
    if t in (INT8, INT16, INT32, INT64):
        return _int(buf, pos, _FIXED_SIZE[t])
    if t == DOUBLE:
        return struct.unpack_from("<d", buf, pos)[0]
    if t == FLOAT:
        return struct.unpack_from("<f", buf, pos)[0]
    if t in (DECIMAL4, DECIMAL8, DECIMAL16):
        scale = buf[pos]
        unscaled = _int(buf, pos + 1, _FIXED_SIZE[t] - 1)
        return decimal.Decimal(f"{unscaled}E-{scale}")  # exact: scaleb rounds to the context's 28 digits
    if t == DATE:
        return _EPOCH_DATE + dt.timedelta(days=_int(buf, pos, 4))
    if t in (TIMESTAMP, TIMESTAMP_NTZ):
        ts = _EPOCH + dt.timedelta(microseconds=_int(buf, pos, 8))
        return ts.replace(tzinfo=dt.timezone.utc) if t == TIMESTAMP else ts
    if t in (TIMESTAMP_NANOS, TIMESTAMP_NTZ_NANOS):
        return ("timestamp_nanos" if t == TIMESTAMP_NANOS else "timestamp_ntz_nanos", _int(buf, pos, 8))
    if t == TIME_NTZ:
        us = _int(buf, pos, 8)
        return (dt.datetime.min + dt.timedelta(microseconds=us)).time()
    if t in (BINARY, STRING):
        n = _uint(buf, pos, 4)
        if pos + 4 + n > len(buf):
            raise InvalidVariantError("variant value is truncated")
        return buf[pos + 4 : pos + 4 + n] if t == BINARY else _text(buf, pos + 4, n)
    if t == UUID:
        if pos + 16 > len(buf):
            raise InvalidVariantError("variant value is truncated")
        return uuid.UUID(bytes=buf[pos : pos + 16])
    raise InvalidVariantError(f"variant value has unknown primitive type {t}")


# --- writing values ---------------------------------------------------------------------------------------------


def encode_object(fields: dict[str, bytes], metadata: Metadata) -> bytes:
    """An object of already-encoded field values, keys resolved (or appended) in ``metadata``."""
    names = sorted(fields)
    ids = [metadata.id_of(n) for n in names]
    values = [fields[n] for n in names]
    total = sum(map(len, values))
    if total < 0x100 and len(names) < 0x100 and (not ids or max(ids) < 0x100):  # the common case: 1-byte sizes
        offsets = [0]
        for v in values:
            offsets.append(offsets[-1] + len(v))
        return bytes([_OBJECT, len(names), *ids, *offsets]) + b"".join(values)
    offset_size = _width(total)
    id_size = _width(max(ids, default=0))
    large = len(names) > 0xFF
    out = bytearray([_OBJECT | ((offset_size - 1) << 2) | ((id_size - 1) << 4) | (int(large) << 6)])
    out += len(names).to_bytes(4 if large else 1, "little")
    for i in ids:
        out += i.to_bytes(id_size, "little")
    return _with_offsets(out, values, offset_size)


def encode_array(elements: list[bytes]) -> bytes:
    """An array of already-encoded elements."""
    total = sum(len(v) for v in elements)
    offset_size = _width(total)
    large = len(elements) > 0xFF
    out = bytearray([_ARRAY | ((offset_size - 1) << 2) | (int(large) << 4)])
    out += len(elements).to_bytes(4 if large else 1, "little")
    return _with_offsets(out, elements, offset_size)


def _with_offsets(out: bytearray, values: list[bytes], offset_size: int) -> bytes:
    """``out`` (an object's or array's header) followed by the values' offsets, the end offset and the values."""
    offset = 0
    for v in values:
        out += offset.to_bytes(offset_size, "little")
        offset += len(v)
    out += offset.to_bytes(offset_size, "little")
    for v in values:
        out += v
    return bytes(out)


_HEADERS = [bytes([t << 2]) for t in range(64)]


def _header(t: int) -> bytes:
    return _HEADERS[t]


def encode_string(s: str) -> bytes:
    data = s.encode("utf-8")
    if len(data) < 64:  # a short string, as DuckDB writes them
        return bytes([(len(data) << 2) | _SHORT_STRING]) + data
    return _header(STRING) + len(data).to_bytes(4, "little") + data


def encode_int(v: int) -> bytes:
    """The narrowest integer type holding ``v``."""
    for t, n in ((INT8, 1), (INT16, 2), (INT32, 4), (INT64, 8)):
        if -(1 << (8 * n - 1)) <= v < (1 << (8 * n - 1)):
            return _header(t) + v.to_bytes(n, "little", signed=True)
    raise InvalidVariantError(f"integer {v} does not fit a variant int64")


def encode_decimal(unscaled: int, scale: int, precision: int) -> bytes:
    t, n = (DECIMAL4, 4) if precision <= 9 else (DECIMAL8, 8) if precision <= 18 else (DECIMAL16, 16)
    return _header(t) + bytes([scale]) + unscaled.to_bytes(n, "little", signed=True)


def _unscaled(value: decimal.Decimal, scale: int) -> int:
    """The integer of ``value`` at ``scale`` digits after the point, exactly (38 digits exceed the default context,
    so not ``scaleb``)."""
    sign, digits, exponent = value.as_tuple()
    n = int("".join(map(str, digits))) if digits else 0
    shift = int(exponent) + scale
    n = n * 10**shift if shift >= 0 else n // 10**-shift
    return -n if sign else n


def encode_python(value: Any, metadata: Metadata | None = None) -> bytes:
    """A Python value (as :func:`decode` returns them) as a variant value; object keys go into ``metadata``."""
    md = metadata if metadata is not None else Metadata(EMPTY_METADATA)
    if value is None:
        return VARIANT_NULL
    if isinstance(value, bool):
        return _header(TRUE if value else FALSE)
    if isinstance(value, int):
        return encode_int(value)
    if isinstance(value, float):
        return _header(DOUBLE) + struct.pack("<d", value)
    if isinstance(value, decimal.Decimal):
        exponent = value.as_tuple().exponent
        if not isinstance(exponent, int):
            raise InvalidVariantError(f"decimal {value} has no variant encoding")
        scale = max(-exponent, 0)
        unscaled = _unscaled(value, scale)
        precision = max(len(str(abs(unscaled))), scale, 1)
        if precision > 38:
            raise InvalidVariantError(f"decimal {value} has more than 38 digits")
        return encode_decimal(unscaled, scale, precision)
    if isinstance(value, str):
        return encode_string(value)
    if isinstance(value, bytes | bytearray):
        return _header(BINARY) + len(value).to_bytes(4, "little") + bytes(value)
    if isinstance(value, dt.datetime):
        if value.tzinfo is not None:
            us = (value.astimezone(dt.timezone.utc).replace(tzinfo=None) - _EPOCH) // dt.timedelta(microseconds=1)
            return _header(TIMESTAMP) + us.to_bytes(8, "little", signed=True)
        us = (value - _EPOCH) // dt.timedelta(microseconds=1)
        return _header(TIMESTAMP_NTZ) + us.to_bytes(8, "little", signed=True)
    if isinstance(value, dt.date):
        return _header(DATE) + (value - _EPOCH_DATE).days.to_bytes(4, "little", signed=True)
    if isinstance(value, dt.time):
        us = ((value.hour * 60 + value.minute) * 60 + value.second) * 1_000_000 + value.microsecond
        return _header(TIME_NTZ) + us.to_bytes(8, "little", signed=True)
    if isinstance(value, uuid.UUID):
        return _header(UUID) + value.bytes
    if isinstance(value, dict):
        return encode_object({str(k): encode_python(v, md) for k, v in value.items()}, md)
    if isinstance(value, list | tuple):
        return encode_array([encode_python(v, md) for v in value])
    raise InvalidVariantError(f"{type(value).__name__} value {value!r} has no variant encoding")


def from_python(value: Any) -> tuple[bytes, bytes]:
    """``(metadata, value)`` of a Python value (dict keys become the metadata's sorted dictionary)."""
    keys: set[str] = set()
    _collect_keys(value, keys)
    md = Metadata(encode_metadata(sorted(keys)))
    encoded = encode_python(value, md)
    return md.encode(), encoded


def _collect_keys(value: Any, keys: set[str]) -> None:
    if isinstance(value, dict):
        for k, v in value.items():
            keys.add(str(k))
            _collect_keys(v, keys)
    elif isinstance(value, list | tuple):
        for v in value:
            _collect_keys(v, keys)


# --- un-shredding -----------------------------------------------------------------------------------------------


def unshred(arr: pa.Array | pa.ChunkedArray) -> pa.StructArray:
    """A VARIANT column as stored in Parquet (``metadata``, ``value`` and, when shredded, ``typed_value``) in
    :data:`VARIANT_TYPE`; a NULL group or a top-level variant null is SQL NULL.

    Raises:
        InvalidVariantError: the file's variant column is not what the spec allows (no ``metadata``, a
            ``typed_value`` of an unknown type, malformed bytes).
    """
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks() if arr.num_chunks != 1 else arr.chunk(0)
    t = arr.type
    if is_variant_type(t) or not pa.types.is_struct(t):
        if is_variant_type(t):
            return _from_pairs(arr.field("metadata").to_pylist(), arr.field("value").to_pylist(), arr.is_valid())
        raise InvalidVariantError(f"a VARIANT column is stored as {t}, not as a variant group")
    names = [t.field(i).name for i in range(t.num_fields)]
    if "metadata" not in names:
        raise InvalidVariantError(f"a VARIANT column is stored without 'metadata' ({t})")
    raw_meta = arr.field("metadata").to_pylist()
    cache: dict[bytes, tuple[list[str], dict[str, int]]] = {}
    metas = [Metadata(m if m is not None else EMPTY_METADATA, cache) for m in raw_meta]
    values = _rebuild(arr, metas)
    return _from_pairs([m.encode() for m in metas], values, arr.is_valid())


def _from_pairs(metadata: list[Any], values: list[Any], valid: pa.BooleanArray) -> pa.StructArray:
    ok = valid.to_pylist()
    keep = [bool(o) and v is not None and bytes(v) != VARIANT_NULL for o, v in zip(ok, values, strict=True)]
    out_values = [bytes(v) if k else b"" for v, k in zip(values, keep, strict=True)]
    out_meta = [bytes(m) if k and m is not None else EMPTY_METADATA for m, k in zip(metadata, keep, strict=True)]
    mask = pa.array([not k for k in keep], pa.bool_())
    return pa.StructArray.from_arrays(
        [pa.array(out_values, pa.binary()), pa.array(out_meta, pa.binary())],
        fields=list(VARIANT_TYPE),
        mask=mask if not all(keep) else None,
    )


def _rebuild(group: pa.StructArray, metas: list[Metadata]) -> list[bytes | None]:
    """Each row's value bytes of a (value, typed_value) group; None where both are NULL (a missing field)."""
    t = group.type
    names = [t.field(i).name for i in range(t.num_fields)]
    values: list[bytes | None] = group.field("value").to_pylist() if "value" in names else [None] * len(group)
    if "typed_value" not in names:
        return values
    typed = group.field("typed_value")
    tt = typed.type
    if pa.types.is_struct(tt):
        return _rebuild_object(typed, values, metas)
    if pa.types.is_list(tt) or pa.types.is_large_list(tt):
        return _rebuild_array(typed, values, metas)
    encoded = encode_typed(typed)
    return [e if e is not None else v for e, v in zip(encoded, values, strict=True)]


def _rebuild_object(typed: pa.StructArray, values: list[bytes | None], metas: list[Metadata]) -> list[bytes | None]:
    tt = typed.type
    shredded = {tt.field(i).name: _rebuild(typed.field(i), metas) for i in range(tt.num_fields)}
    valid = typed.is_valid().to_pylist()
    out: list[bytes | None] = []
    for i, ok in enumerate(valid):
        if not ok:
            out.append(values[i])
            continue
        md = metas[i]
        fields: dict[str, bytes] = {}
        for name, col in shredded.items():
            item = col[i]
            if item is not None:
                fields[name] = item
        residual = values[i]
        if residual is not None:  # a partially shredded object: the fields not shredded
            if residual[0] & 3 != _OBJECT:
                raise InvalidVariantError("a partially shredded variant object has a residual that is not an object")
            for fid, at in object_fields(residual):
                if fid >= len(md.keys):
                    raise InvalidVariantError(f"variant object field id {fid} is beyond the metadata's keys")
                key = md.keys[fid]
                if key in fields:
                    raise InvalidVariantError(f"variant field {key!r} is both shredded and in the residual value")
                fields[key] = residual[at : at + value_size(residual, at)]
        out.append(encode_object(fields, md))
    return out


def _rebuild_array(typed: pa.ListArray, values: list[bytes | None], metas: list[Metadata]) -> list[bytes | None]:
    offsets = typed.offsets.to_pylist()
    owner = []
    for i in range(len(typed)):
        owner.extend([metas[i]] * (offsets[i + 1] - offsets[i]))
    start = offsets[0]
    child = typed.values.slice(start, offsets[-1] - start)
    elements = _rebuild(child, owner)
    valid = typed.is_valid().to_pylist()
    out: list[bytes | None] = []
    for i, ok in enumerate(valid):
        if not ok:
            out.append(values[i])
            continue
        items = elements[offsets[i] - start : offsets[i + 1] - start]
        out.append(encode_array([e if e is not None else VARIANT_NULL for e in items]))
    return out


def encode_typed(arr: pa.Array) -> list[bytes | None]:
    """Each value of a shredded primitive column as a variant value (None where NULL).

    Raises:
        InvalidVariantError: a type the variant spec does not shred.
    """
    t = arr.type
    if isinstance(t, pa.BaseExtensionType):
        if t.extension_name == "arrow.uuid":
            return [None if b is None else _header(UUID) + b for b in arr.storage.to_pylist()]
        arr, t = arr.storage, t.storage_type
    if pa.types.is_boolean(t):
        return [None if v is None else _header(TRUE if v else FALSE) for v in arr.to_pylist()]
    if pa.types.is_integer(t):
        kind = {1: (INT8, 1), 2: (INT16, 2), 4: (INT32, 4), 8: (INT64, 8)}[t.bit_width // 8]
        return [
            None if v is None else _header(kind[0]) + v.to_bytes(kind[1], "little", signed=True)
            for v in arr.to_pylist()
        ]
    if pa.types.is_float64(t):
        return [None if v is None else _header(DOUBLE) + struct.pack("<d", v) for v in arr.to_pylist()]
    if pa.types.is_float32(t):
        return [None if v is None else _header(FLOAT) + struct.pack("<f", v) for v in arr.to_pylist()]
    if pa.types.is_decimal(t):
        return [
            None if v is None else encode_decimal(_unscaled(v, t.scale), t.scale, t.precision) for v in arr.to_pylist()
        ]
    if pa.types.is_date32(t):
        return _fixed(arr.cast(pa.int32()), DATE, 4)
    if pa.types.is_time(t):
        return _fixed(arr.cast(pa.int64()) if t.unit == "us" else _time_us(arr), TIME_NTZ, 8)
    if pa.types.is_timestamp(t):
        ints = arr.cast(pa.int64())
        if t.unit == "ns":
            return _fixed(ints, TIMESTAMP_NANOS if t.tz else TIMESTAMP_NTZ_NANOS, 8)
        if t.unit != "us":
            ints = pc.multiply(ints, {"s": 1_000_000, "ms": 1_000}[t.unit])
        return _fixed(ints, TIMESTAMP if t.tz else TIMESTAMP_NTZ, 8)
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return [None if v is None else encode_string(v) for v in arr.to_pylist()]
    if _is_binary(t):
        return [None if v is None else _header(BINARY) + len(v).to_bytes(4, "little") + v for v in arr.to_pylist()]
    if pa.types.is_fixed_size_binary(t) and t.byte_width == 16:
        return [None if v is None else _header(UUID) + v for v in arr.to_pylist()]
    raise InvalidVariantError(f"a shredded variant column has typed_value of type {t}, which the spec does not allow")


def _time_us(arr: pa.Array) -> pa.Array:
    ints = arr.cast(pa.int64())
    unit = arr.type.unit
    return (
        pc.multiply(ints, 1_000_000)
        if unit == "s"
        else pc.multiply(ints, 1000)
        if unit == "ms"
        else (pc.divide(ints, 1000))
    )


def _fixed(ints: pa.Array, t: int, n: int) -> list[bytes | None]:
    head = _header(t)
    return [None if v is None else head + v.to_bytes(n, "little", signed=True) for v in ints.to_pylist()]


def repeated_string(text: str, n: int) -> pa.StructArray:
    """``n`` copies of the VARCHAR variant holding ``text`` (a VARIANT column's default, as DuckDB reads it)."""
    return pa.StructArray.from_arrays(
        [pa.array([encode_string(text)] * n, pa.binary()), pa.array([EMPTY_METADATA] * n, pa.binary())],
        fields=list(VARIANT_TYPE),
    )


# --- values from Arrow for writing -------------------------------------------------------------------------------


def variant_column(arr: pa.Array | pa.ChunkedArray, where: str) -> pa.StructArray:
    """Values for a VARIANT column from the Arrow data given to a write, checked, in :data:`VARIANT_TYPE`.

    Accepted: the variant struct (``value`` and ``metadata`` binaries, with or without PySpark's tag, in either
    order) and an all-NULL column; ``where`` names the column in errors. SQL NULL stays NULL here; it is written as
    variant null, as DuckDB writes it.

    Raises:
        InvalidVariantError: another type, or a value whose bytes are not a valid variant (the row is named).
    """
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks() if arr.num_chunks != 1 else arr.chunk(0)
    t = arr.type
    if pa.types.is_null(t):
        return pa.nulls(len(arr), VARIANT_TYPE)
    names = [t.field(i).name for i in range(t.num_fields)] if pa.types.is_struct(t) else []
    if sorted(names) != ["metadata", "value"] or not all(_is_binary(t.field(i).type) for i in range(2)):
        raise InvalidVariantError(
            f"{where} is VARIANT, the data has {t}; give struct<value: binary, metadata: binary> (a "
            "variant's bytes, as PySpark's VariantVal or pyspark_ducklake.io.variant.from_python give them)"
        )
    metas = arr.field("metadata").cast(pa.binary()).to_pylist()
    values = arr.field("value").cast(pa.binary()).to_pylist()
    valid = arr.is_valid().to_pylist()
    for i, (ok, m, v) in enumerate(zip(valid, metas, values, strict=True)):
        if not ok:
            continue
        if m is None or v is None:
            raise InvalidVariantError(f"{where}, row {i}: a variant needs both metadata and value; nothing was written")
        try:
            decode(m, v)
        except InvalidVariantError as e:
            raise InvalidVariantError(f"{where}, row {i}: {e}; nothing was written") from None
    return pa.StructArray.from_arrays(
        [pa.array([v or b"" for v in values], pa.binary()), pa.array([m or b"" for m in metas], pa.binary())],
        fields=list(VARIANT_TYPE),
        mask=pa.array([not o for o in valid], pa.bool_()) if not all(valid) else None,
    )


def parquet_form(arr: pa.Array | pa.ChunkedArray) -> pa.StructArray:
    """A variant column as DuckDB writes it unshredded: ``metadata``, then ``value``, SQL NULL as variant null."""
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks() if arr.num_chunks != 1 else arr.chunk(0)
    valid = arr.is_valid()
    metas = pc.if_else(valid, arr.field("metadata"), pa.scalar(EMPTY_METADATA, pa.binary()))
    values = pc.if_else(valid, arr.field("value"), pa.scalar(VARIANT_NULL, pa.binary()))
    return pa.StructArray.from_arrays(
        [metas, values], fields=[pa.field("metadata", pa.binary(), False), pa.field("value", pa.binary(), True)]
    )


PARQUET_TYPE = pa.struct([pa.field("metadata", pa.binary(), False), pa.field("value", pa.binary(), True)])
