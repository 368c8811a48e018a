"""A small, generic reader/writer of Thrift's compact protocol, enough to edit a Parquet footer in place.

Nothing here knows Parquet's IDL: a struct decodes to an ordered list of :class:`Field` (id, wire type, value),
so fields this module was never told about survive a decode → encode round trip unchanged. The encoder writes
exactly what Apache Thrift's C++ ``TCompactProtocol`` writes (short field headers when the id delta is 1..15,
short list headers below 15 elements), and the decoder remembers where the input used the long forms anyway, so
``encode_struct(decode_struct(b)) == b`` for any footer a standard writer produced.

Value representation by wire type:

* ``BOOL_TRUE``/``BOOL_FALSE`` (a struct field): ``bool`` (the value lives in the field header);
* ``BYTE``: ``int`` (signed 8 bit); ``I16``/``I32``/``I64``: ``int`` (zigzag varints); ``DOUBLE``: ``float``;
* ``BINARY``: ``bytes`` (strings too: the protocol does not tell them apart);
* ``LIST``/``SET``: :class:`ListValue`; ``MAP``: :class:`MapValue`; ``STRUCT``: :class:`Struct`.
"""

from __future__ import annotations

import struct as _struct
from dataclasses import dataclass, field
from typing import Any

from pyspark_ducklake.exceptions import ThriftDecodeError

STOP = 0
BOOL_TRUE = 1
BOOL_FALSE = 2
BYTE = 3
I16 = 4
I32 = 5
I64 = 6
DOUBLE = 7
BINARY = 8
LIST = 9
SET = 10
MAP = 11
STRUCT = 12

_INT_TYPES = (I16, I32, I64)


@dataclass
class Field:
    """One field of a struct: its id, wire type and value; ``long_header`` if the input spelled the id in full."""

    id: int
    type: int
    value: Any
    long_header: bool = False


@dataclass
class Struct:
    """A struct's fields in wire order."""

    fields: list[Field] = field(default_factory=list)

    def get(self, field_id: int) -> Field | None:
        for f in self.fields:
            if f.id == field_id:
                return f
        return None

    def set(self, field_id: int, type_: int, value: Any) -> None:
        """Replace field ``field_id`` or insert it in id order (keeping short headers where they were possible)."""
        existing = self.get(field_id)
        if existing is not None:
            existing.type = type_
            existing.value = value
            return
        pos = len(self.fields)
        for i, f in enumerate(self.fields):
            if f.id > field_id:
                pos = i
                break
        self.fields.insert(pos, Field(field_id, type_, value))


@dataclass
class ListValue:
    """A list or set: element wire type, elements; ``long_header`` if a short size was spelled in full."""

    elem_type: int
    items: list[Any] = field(default_factory=list)
    long_header: bool = False


@dataclass
class MapValue:
    """A map: key and value wire types, entries in wire order."""

    key_type: int
    value_type: int
    items: list[tuple[Any, Any]] = field(default_factory=list)


# --- decoding -----------------------------------------------------------------------------------------------------


class _Reader:
    def __init__(self, data: bytes | memoryview, pos: int = 0) -> None:
        self.data = memoryview(data)
        self.pos = pos

    def byte(self) -> int:
        if self.pos >= len(self.data):
            raise ThriftDecodeError("unexpected end of data")
        b = self.data[self.pos]
        self.pos += 1
        return b

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise ThriftDecodeError("unexpected end of data")
        out = bytes(self.data[self.pos : self.pos + n])
        self.pos += n
        return out

    def varint(self) -> int:
        shift = 0
        out = 0
        while True:
            b = self.byte()
            out |= (b & 0x7F) << shift
            if not b & 0x80:
                return out
            shift += 7
            if shift > 70:
                raise ThriftDecodeError("varint too long")

    def zigzag(self) -> int:
        n = self.varint()
        return (n >> 1) ^ -(n & 1)

    def value(self, t: int, depth: int) -> Any:
        if depth > 64:
            raise ThriftDecodeError("nesting too deep")
        if t in (BOOL_TRUE, BOOL_FALSE):
            # an element of a collection: one byte, 1 = true (C++ writes 1/2, some writers 1/0)
            return self.byte() == BOOL_TRUE
        if t == BYTE:
            b = self.byte()
            return b - 256 if b > 127 else b
        if t in _INT_TYPES:
            return self.zigzag()
        if t == DOUBLE:
            return _struct.unpack("<d", self.take(8))[0]
        if t == BINARY:
            return self.take(self.varint())
        if t in (LIST, SET):
            head = self.byte()
            size = head >> 4
            elem = head & 0x0F
            long_header = False
            if size == 15:
                size = self.varint()
                long_header = size < 15
            return ListValue(elem, [self.value(elem, depth + 1) for _ in range(size)], long_header)
        if t == MAP:
            size = self.varint()
            if size == 0:
                return MapValue(0, 0, [])
            kv = self.byte()
            k, v = kv >> 4, kv & 0x0F
            items = []
            for _ in range(size):
                key = self.value(k, depth + 1)
                items.append((key, self.value(v, depth + 1)))
            return MapValue(k, v, items)
        if t == STRUCT:
            return self.struct(depth + 1)
        raise ThriftDecodeError(f"unknown compact type {t}")

    def struct(self, depth: int = 0) -> Struct:
        fields: list[Field] = []
        last = 0
        while True:
            head = self.byte()
            if head == STOP:
                return Struct(fields)
            t = head & 0x0F
            delta = head >> 4
            long_header = delta == 0
            fid = self.zigzag() if long_header else last + delta
            if t in (BOOL_TRUE, BOOL_FALSE):
                value: Any = t == BOOL_TRUE
            else:
                value = self.value(t, depth)
            fields.append(Field(fid, t, value, long_header))
            last = fid


def decode_struct(data: bytes | memoryview, pos: int = 0) -> tuple[Struct, int]:
    """Decode one struct starting at ``pos``; returns it and the offset just past it."""
    r = _Reader(data, pos)
    s = r.struct()
    return s, r.pos


# --- encoding -----------------------------------------------------------------------------------------------------


def _varint(n: int, out: bytearray) -> None:
    if n < 0:
        raise ValueError("varint of a negative number")
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return


def _zigzag(n: int, out: bytearray) -> None:
    _varint((n << 1) ^ (n >> 63) if -(1 << 63) <= n < (1 << 63) else _raise_range(n), out)


def _raise_range(n: int) -> int:
    raise ValueError(f"{n} does not fit a 64-bit integer")


def _encode_value(t: int, v: Any, out: bytearray) -> None:
    if t in (BOOL_TRUE, BOOL_FALSE):
        out.append(BOOL_TRUE if v else BOOL_FALSE)
    elif t == BYTE:
        out.append(v & 0xFF)
    elif t in _INT_TYPES:
        _zigzag(int(v), out)
    elif t == DOUBLE:
        out += _struct.pack("<d", v)
    elif t == BINARY:
        b = v.encode() if isinstance(v, str) else bytes(v)
        _varint(len(b), out)
        out += b
    elif t in (LIST, SET):
        n = len(v.items)
        if n < 15 and not v.long_header:
            out.append((n << 4) | v.elem_type)
        else:
            out.append(0xF0 | v.elem_type)
            _varint(n, out)
        for item in v.items:
            _encode_value(v.elem_type, item, out)
    elif t == MAP:
        _varint(len(v.items), out)
        if v.items:
            out.append((v.key_type << 4) | v.value_type)
            for key, value in v.items:
                _encode_value(v.key_type, key, out)
                _encode_value(v.value_type, value, out)
    elif t == STRUCT:
        _encode_struct(v, out)
    else:
        raise ValueError(f"unknown compact type {t}")


def _encode_struct(s: Struct, out: bytearray) -> None:
    last = 0
    for f in s.fields:
        t = f.type
        if t in (BOOL_TRUE, BOOL_FALSE):
            t = BOOL_TRUE if f.value else BOOL_FALSE
        delta = f.id - last
        if 0 < delta <= 15 and not f.long_header:
            out.append((delta << 4) | t)
        else:
            out.append(t)
            _zigzag(f.id, out)
        if t not in (BOOL_TRUE, BOOL_FALSE):
            _encode_value(t, f.value, out)
        last = f.id
    out.append(STOP)


def encode_struct(s: Struct) -> bytes:
    out = bytearray()
    _encode_struct(s, out)
    return bytes(out)


__all__ = [
    "BINARY",
    "BOOL_FALSE",
    "BOOL_TRUE",
    "BYTE",
    "DOUBLE",
    "I16",
    "I32",
    "I64",
    "LIST",
    "MAP",
    "SET",
    "STRUCT",
    "Field",
    "ListValue",
    "MapValue",
    "Struct",
    "ThriftDecodeError",
    "decode_struct",
    "encode_struct",
]
