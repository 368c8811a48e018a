"""The Puffin container (https://iceberg.apache.org/puffin-spec/) as DuckLake 1.1 writes and reads it.

A DuckLake 1.1 delete file that holds a data file's deletion vectors of several snapshots is a Puffin file::

    PFA1  blob 1 ... blob N  PFA1  footer payload (JSON, UTF-8)  u32 LE payload size  u32 LE flags (0)  PFA1

Only the container lives here: the blobs are opaque byte ranges with the footer's metadata (``type``,
``properties``); :mod:`pyspark_ducklake.io.deletion_vector` gives them their meaning. Reading checks everything the
reference reader checks (``storage/ducklake_puffin.cpp``: magic, flags, payload size, footer magic, the JSON,
each blob's type, offset and length within the blob section) and raises :class:`DeletionVectorError` naming the
file and what is wrong. Writing produces the reference writer's bytes: the payload is yyjson's compact output,
keys in insertion order.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pyspark_ducklake.exceptions import DeletionVectorError

MAGIC = b"PFA1"
_TAIL = 4 + 4 + 4  # payload size, flags, magic
FOOTER_OVERHEAD = len(MAGIC) + _TAIL  # the footer's bytes besides its payload (the catalog's footer_size adds them)
MIN_FILE_SIZE = len(MAGIC) + FOOTER_OVERHEAD  # an empty container: magic, then a footer with an empty payload
_COMPRESSED_FOOTER = 1  # flags byte 0, bit 0: the payload is LZ4-compressed


@dataclass(frozen=True)
class Blob:
    """One blob of a container: its byte range in the file and its footer metadata."""

    type: str
    offset: int
    length: int
    properties: Mapping[str, Any]


def is_container(buf: bytes) -> bool:
    """Whether ``buf`` is a Puffin container (rather than a bare blob), decided as the reference reader decides."""
    return len(buf) >= MIN_FILE_SIZE and buf[: len(MAGIC)] == MAGIC


def read_blobs(buf: bytes, path: str) -> list[Blob]:
    """The blobs a Puffin container's footer lists, in its order.

    Raises:
        DeletionVectorError: the footer is damaged or lies (the message names ``path`` and what is wrong).
    """
    size = len(buf)
    if not is_container(buf):
        raise corrupt(path, f"no leading {MAGIC.decode()} magic, or shorter than {MIN_FILE_SIZE} bytes")
    if buf[-len(MAGIC) :] != MAGIC:
        raise corrupt(path, "trailing magic mismatch")
    payload_size, flags = struct.unpack_from("<II", buf, size - _TAIL)
    if flags & _COMPRESSED_FOOTER:
        raise corrupt(path, "its footer is compressed, which DuckLake does not write or read")
    if flags:
        raise corrupt(path, f"unsupported footer flags {flags:#x}")
    if payload_size > size - MIN_FILE_SIZE:
        raise corrupt(path, f"footer payload size {payload_size} out of range (the file has {size} bytes)")
    payload_start = size - _TAIL - payload_size
    section_end = payload_start - len(MAGIC)
    if buf[section_end:payload_start] != MAGIC:
        raise corrupt(path, "footer magic mismatch")
    root = _parse_payload(buf[payload_start : size - _TAIL], path)
    listed = root.get("blobs") if isinstance(root, dict) else None
    if not isinstance(listed, list):
        raise corrupt(path, 'its footer has no "blobs" list')
    return [_blob(meta, section_end, path) for meta in listed]


def _parse_payload(payload: bytes, path: str) -> Any:
    def refuse(constant: str) -> Any:
        raise ValueError(f"{constant} is not JSON")

    def first_wins(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in pairs:
            out.setdefault(key, value)  # yyjson's lookup finds a repeated key's first value
        return out

    try:
        return json.loads(payload.decode("utf-8"), parse_constant=refuse, object_pairs_hook=first_wins)
    except ValueError as e:  # UnicodeDecodeError and JSONDecodeError too
        raise corrupt(path, f"failed to parse its footer payload ({e})") from None


def _blob(meta: Any, section_end: int, path: str) -> Blob:
    kind = meta.get("type") if isinstance(meta, dict) else None
    if not isinstance(kind, str):
        raise corrupt(path, "a blob without a type")
    offset, length = meta.get("offset"), meta.get("length")
    if not (_is_int(offset) and _is_int(length)):
        raise corrupt(path, f"blob of type {kind!r} without an integer offset/length")
    if offset < len(MAGIC) or length < 0 or length > section_end or offset > section_end - length:
        raise corrupt(
            path, f"blob offset/length out of range ({offset}+{length} outside the blob section 4..{section_end})"
        )
    properties = meta.get("properties")
    return Blob(kind, offset, length, properties if isinstance(properties, dict) else {})


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def corrupt(path: str, what: str) -> DeletionVectorError:
    """The error for a damaged Puffin file: names the file and what is wrong, as the reference's messages do."""
    return DeletionVectorError(
        f'Puffin file "{path}" is corrupt - {what}. Reading on would give a wrong answer; restore the file or '
        "time-travel to a snapshot before the delete that wrote it"
    )


def write_container(blobs: Sequence[tuple[str, bytes, Mapping[str, str]]]) -> tuple[bytes, int]:
    """A Puffin file of ``blobs`` (each ``(type, bytes, properties)``, written back to back after the leading magic)
    and its footer's size (payload + :data:`FOOTER_OVERHEAD`, what DuckLake records as ``footer_size``).

    Each blob's metadata is the reference writer's: ``type``, ``fields`` (empty), ``snapshot-id`` and
    ``sequence-number`` (-1, as Iceberg's spec asks of deletion vectors), ``offset``, ``length``, ``properties``;
    the file's properties are ``created-by: ducklake``.
    """
    parts = [MAGIC]
    at = len(MAGIC)
    entries = []
    for kind, data, properties in blobs:
        entries.append(
            "{"
            f'"type":{_json_string(kind)},"fields":[],"snapshot-id":-1,"sequence-number":-1,'
            f'"offset":{at},"length":{len(data)},"properties":{_json_object(properties)}'
            "}"
        )
        parts.append(data)
        at += len(data)
    payload = ('{"blobs":[' + ",".join(entries) + '],"properties":{"created-by":"ducklake"}}').encode("utf-8")
    parts += [MAGIC, payload, struct.pack("<II", len(payload), 0), MAGIC]
    return b"".join(parts), len(payload) + FOOTER_OVERHEAD


def _json_object(properties: Mapping[str, str]) -> str:
    return "{" + ",".join(f"{_json_string(k)}:{_json_string(v)}" for k, v in properties.items()) + "}"


_SHORT_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}


def _json_string(text: str) -> str:
    """``text`` as yyjson writes a string by default: UTF-8 kept, ``/`` kept, ``"`` ``\\`` and the five short
    control escapes, every other control character as ``\\u00XX`` in upper-case hex (Python's ``json`` writes
    lower case)."""
    out = []
    for ch in text:
        if ch in _SHORT_ESCAPES:
            out.append(_SHORT_ESCAPES[ch])
        elif ord(ch) < 0x20:
            out.append(f"\\u{ord(ch):04X}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


__all__ = [
    "FOOTER_OVERHEAD",
    "MAGIC",
    "MIN_FILE_SIZE",
    "Blob",
    "corrupt",
    "is_container",
    "read_blobs",
    "write_container",
]
