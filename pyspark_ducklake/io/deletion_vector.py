"""Deletion vectors: the ``format='puffin'`` delete files DuckDB writes with ``write_deletion_vectors`` on.

A file with one deletion vector is one bare Iceberg ``deletion-vector-v1`` blob, not a Puffin container (what
DuckDB 1.5 always writes, ducklake-format-2.md §2.2)::

    u32 BE  length of magic + bitmap         4 bytes  magic D1 D3 39 64
    bitmap: Roaring "portable 64-bit" serialization of the deleted row positions
    u32 BE  CRC-32 of magic + bitmap

The 64-bit format is a u64 LE count of 32-bit bitmaps, each a u32 LE key (position >> 32) followed by a 32-bit
Roaring bitmap in the portable format (https://github.com/RoaringBitmap/RoaringFormatSpec). Decoding and encoding
are pure Python over numpy (no compiled dependency on Spark executors); every blob is checked (length, magic, CRC,
structure, positions within the data file) and a bad one raises :class:`DeletionVectorError` naming the file.
Puffin files are never encrypted, even in an encrypted lake (§3.1).

DuckLake 1.1 keeps a data file's deletes of several snapshots in one file: a Puffin container
(:mod:`pyspark_ducklake.io.puffin`) of one such blob per snapshot, each **cumulative** (every position deleted as of
that snapshot), with the properties ``referenced-data-file``, ``cardinality`` and ``ducklake-snapshot-id``. Its
catalog row begins at the first blob's snapshot and counts the largest cardinality. A reader at snapshot ``S`` sees
the positions of the blobs up to ``S`` (the reference's ``ScanDeletionVectorFile``: each position is tagged with the
first snapshot whose blob holds it, as a Parquet delete file's ``_ducklake_internal_snapshot_id``).
"""

from __future__ import annotations

import re
import struct
import zlib
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pyspark_ducklake.exceptions import DataFileError, DeletionVectorError
from pyspark_ducklake.io import puffin
from pyspark_ducklake.io.fileio import ensure_parent, filesystem

PARQUET = "parquet"
PUFFIN = "puffin"
MAGIC = b"\xd1\xd3\x39\x64"
SERIAL_COOKIE_NO_RUNCONTAINER = 12346  # what DuckDB writes: it does not run-optimize its bitmaps
SERIAL_COOKIE = 12347
NO_OFFSET_THRESHOLD = 4
MAX_ARRAY_CARDINALITY = 4096
BITMAP_BYTES = 8192
_MIN_BLOB = 4 + 4 + 8 + 4  # length, magic, empty 64-bit bitmap, CRC
BLOB_TYPE = "deletion-vector-v1"
SNAPSHOT_PROPERTY = "ducklake-snapshot-id"  # DuckLake 1.1's: the snapshot a blob's deletes are as of
_DIGITS = re.compile(r"[0-9]+")
_MAX_SNAPSHOT = 2**63 - 1


def delete_file_format(value: str | None, path: str) -> str:
    """``parquet`` or ``puffin`` for a ``ducklake_delete_file.format`` value, matched case-insensitively as DuckDB
    does; NULL (rows of writers that left it out) is Parquet.

    Raises:
        DataFileError: any other format (DuckDB: ``Unknown delete file format``).
    """
    if value is None:
        return PARQUET
    low = value.lower()
    if low in (PARQUET, PUFFIN):
        return low
    raise DataFileError(
        f"Unknown delete file format {value[:40]!r} for delete file {path}: DuckLake delete files are 'parquet' or "
        "'puffin'; the catalog row is damaged or written by a newer DuckLake, read the table with a matching DuckDB"
    )


class _Reader:
    """Bounds-checked little-endian reads over one blob; a short read is a truncated blob."""

    def __init__(self, buf: memoryview, path: str) -> None:
        self.buf, self.pos, self.path = buf, 0, path

    def fail(self, what: str) -> DeletionVectorError:
        return _error(self.path, what)

    def take(self, n: int) -> memoryview:
        if n < 0 or self.pos + n > len(self.buf):
            raise self.fail(f"its bitmap is truncated (needs {n} more bytes at offset {self.pos + 8})")
        out = self.buf[self.pos : self.pos + n]
        self.pos += n
        return out

    def u32(self) -> int:
        return int(struct.unpack("<I", self.take(4))[0])

    def u64(self) -> int:
        return int(struct.unpack("<Q", self.take(8))[0])

    def u16s(self, count: int) -> np.ndarray:
        return np.frombuffer(self.take(2 * count), dtype="<u2")


def _error(path: str, what: str) -> DeletionVectorError:
    return DeletionVectorError(
        f"deletion vector {path} is corrupt: {what}. Reading on would give a wrong answer; restore the file or "
        "time-travel to a snapshot before the delete that wrote it"
    )


def decode(blob: bytes, path: str, *, row_count: int | None = None) -> np.ndarray:
    """The deleted positions of a deletion-vector blob, sorted and unique, as int64.

    Raises:
        DeletionVectorError: the blob's length, magic, CRC or bitmap is wrong, or (with ``row_count``) a position
            lies beyond the data file's rows.
    """
    size = len(blob)
    if size < _MIN_BLOB:
        raise _error(path, f"it is {size} bytes, shorter than any deletion vector ({_MIN_BLOB})")
    (length,) = struct.unpack_from(">I", blob, 0)
    if length != size - 8:
        raise _error(path, f"its header says {length} bytes of magic and bitmap, the file holds {size - 8}")
    if blob[4:8] != MAGIC:
        raise _error(path, "magic bytes mismatch (not an Iceberg deletion-vector-v1 blob)")
    (crc,) = struct.unpack_from(">I", blob, size - 4)
    view = memoryview(blob)
    if zlib.crc32(view[4 : size - 4]) != crc:
        raise _error(path, "CRC-32 mismatch")
    r = _Reader(view[8 : size - 4], path)
    parts = []
    last_key = -1
    for _ in range(r.u64()):
        key = r.u32()
        if key <= last_key:
            raise r.fail("its 32-bit bitmaps are not in ascending key order")
        if key >= 1 << 31:
            raise r.fail(f"a 32-bit bitmap's key {key} puts positions beyond 2^63")
        last_key = key
        low = _decode_32(r)
        parts.append(low.astype(np.int64) | (np.int64(key) << np.int64(32)) if key else low.astype(np.int64))
    if r.pos != len(r.buf):
        raise r.fail(f"{len(r.buf) - r.pos} bytes follow the bitmap")
    positions = np.concatenate(parts) if parts else np.empty(0, np.int64)
    if len(positions) > 1 and not bool(np.all(positions[1:] > positions[:-1])):
        raise r.fail("its positions are not strictly ascending")
    if row_count is not None and len(positions) and int(positions[-1]) >= row_count:
        raise _error(path, f"it deletes position {int(positions[-1])} of a data file of {row_count} rows")
    return positions


def _decode_32(r: _Reader) -> np.ndarray:
    """One 32-bit Roaring bitmap in the portable format, as sorted uint32 values."""
    cookie = r.u32()
    if cookie & 0xFFFF == SERIAL_COOKIE:
        n = (cookie >> 16) + 1
        runs = np.unpackbits(np.frombuffer(r.take((n + 7) // 8), np.uint8), bitorder="little")[:n].astype(bool)
        offsets = n >= NO_OFFSET_THRESHOLD
    elif cookie == SERIAL_COOKIE_NO_RUNCONTAINER:
        n = r.u32()
        if n > 1 << 16:
            raise r.fail(f"a 32-bit bitmap claims {n} containers (at most 65536)")
        runs = np.zeros(n, dtype=bool)
        offsets = True
    else:
        raise r.fail(f"unknown Roaring cookie {cookie & 0xFFFF}")
    headers = r.u16s(2 * n).reshape(n, 2)
    keys = headers[:, 0].astype(np.uint32)
    cards = headers[:, 1].astype(np.int64) + 1
    if offsets:
        r.take(4 * n)  # containers follow each other: the offsets only serve random access
    out = []
    for i in range(n):
        card = int(cards[i])
        if runs[i]:
            count = int(r.u16s(1)[0])
            pairs = r.u16s(2 * count).reshape(count, 2).astype(np.int64)
            starts, lengths = pairs[:, 0], pairs[:, 1] + 1
            if count and int((starts + lengths).max()) > 1 << 16:
                raise r.fail("a run container runs past its 65536 values")
            total = int(lengths.sum())
            base = np.repeat(starts - np.concatenate(([0], np.cumsum(lengths)[:-1])), lengths)
            values = base + np.arange(total, dtype=np.int64)
        elif card <= MAX_ARRAY_CARDINALITY:
            values = r.u16s(card).astype(np.int64)
        else:
            bits = np.unpackbits(np.frombuffer(r.take(BITMAP_BYTES), np.uint8), bitorder="little")
            values = np.flatnonzero(bits)
        if len(values) != card:
            raise r.fail(f"container {i} holds {len(values)} values, its header says {card}")
        out.append(values.astype(np.uint32) | (keys[i] << np.uint32(16)))
    return np.concatenate(out) if out else np.empty(0, np.uint32)


def encode(positions: Any) -> bytes:
    """A deletion-vector-v1 blob holding ``positions`` (any order, repeats allowed), byte for byte as DuckDB 1.5.5
    writes it: array containers up to 4096 values, bitmap containers above, no run containers.

    Raises:
        ValueError: a position is negative.
    """
    p = sorted_unique(positions)
    if len(p) and int(p[0]) < 0:
        raise ValueError(f"a deletion vector cannot hold the negative position {int(p[0])}")
    high = p >> np.int64(32)
    cuts = np.flatnonzero(np.diff(high)) + 1
    groups = np.split(p, cuts) if len(p) else []
    body = [MAGIC, struct.pack("<Q", len(groups))]
    for group in groups:
        body.append(struct.pack("<I", int(group[0] >> np.int64(32))))
        body.append(_encode_32((group & np.int64(0xFFFFFFFF)).astype(np.uint32)))
    data = b"".join(body)
    return struct.pack(">I", len(data)) + data + struct.pack(">I", zlib.crc32(data))


def sorted_unique(positions: Any) -> np.ndarray:
    """``positions`` as a sorted int64 array without repeats (numpy's ``unique`` hashes: 10x slower on 10M)."""
    p = np.asarray(positions, dtype=np.int64)
    if len(p) > 1 and not bool(np.all(p[1:] > p[:-1])):
        p = np.sort(p)
        p = p[np.concatenate(([True], p[1:] != p[:-1]))]
    return p


def _encode_32(values: np.ndarray) -> bytes:
    keys = values >> np.uint32(16)
    cuts = np.flatnonzero(np.diff(keys)) + 1
    containers = np.split(values, cuts)
    n = len(containers)
    headers = np.empty((n, 2), dtype="<u2")
    blobs = []
    for i, c in enumerate(containers):
        headers[i] = (int(c[0]) >> 16, len(c) - 1)
        low = (c & np.uint32(0xFFFF)).astype("<u2")
        if len(c) <= MAX_ARRAY_CARDINALITY:
            blobs.append(low.tobytes())
        else:
            bits = np.zeros(1 << 16, dtype=np.uint8)
            bits[low] = 1
            blobs.append(np.packbits(bits, bitorder="little").tobytes())
    start = 8 + 8 * n
    sizes = np.array([len(b) for b in blobs], dtype=np.int64)
    offsets = (start + np.concatenate(([0], np.cumsum(sizes)[:-1]))).astype("<u4") if n else np.empty(0, "<u4")
    head = struct.pack("<II", SERIAL_COOKIE_NO_RUNCONTAINER, n)
    return head + headers.tobytes() + offsets.tobytes() + b"".join(blobs)


def decode_file(buf: bytes, path: str, *, row_count: int | None = None) -> tuple[np.ndarray, np.ndarray | None]:
    """``(positions, snapshots)`` of a puffin delete file, read as the reference reads it.

    A bare blob: its positions, and ``snapshots`` None (they were deleted at the catalog row's ``begin_snapshot``).
    A Puffin container whose blobs carry ``ducklake-snapshot-id``: every position of every blob, sorted, each with
    the earliest snapshot whose blob holds it (so the deletes as of ``S`` are those with a snapshot up to ``S``);
    one whose blobs carry none: the union of its blobs, ``snapshots`` None.

    Raises:
        DeletionVectorError: a blob or the container is damaged or lies: an unknown blob type, a snapshot property
            that is not a whole number, a ``cardinality`` the bitmap disagrees with, blobs with and without a
            snapshot mixed, no blob at all, or (with ``row_count``) a position beyond the data file's rows.
    """
    if not puffin.is_container(buf):
        return decode(buf, path, row_count=row_count), None
    blobs = puffin.read_blobs(buf, path)
    if not blobs:
        raise puffin.corrupt(path, "it does not contain any deletion vectors")
    labels = [f"blob {i + 1} of {len(blobs)}" for i in range(len(blobs))]
    for blob, label in zip(blobs, labels, strict=True):
        if blob.type != BLOB_TYPE:
            raise puffin.corrupt(path, f"{label} is of type {blob.type[:60]!r}; a delete file holds {BLOB_TYPE} blobs")
    snapshots = [_snapshot_of(blob, label, path) for blob, label in zip(blobs, labels, strict=True)]
    if any(s is None for s in snapshots) and any(s is not None for s in snapshots):
        raise puffin.corrupt(path, "it mixes deletion vectors with and without a snapshot")
    vectors = [_blob_positions(buf, blob, label, path, row_count) for blob, label in zip(blobs, labels, strict=True)]
    if snapshots[0] is None:
        return sorted_unique(np.concatenate(vectors)), None
    tags = [np.full(len(v), s, dtype=np.int64) for v, s in zip(vectors, snapshots, strict=True)]
    positions, tagged = np.concatenate(vectors), np.concatenate(tags)
    order = np.lexsort((tagged, positions))
    positions, tagged = positions[order], tagged[order]
    first = np.ones(len(positions), dtype=bool)
    first[1:] = positions[1:] != positions[:-1]
    return positions[first], tagged[first]


def _snapshot_of(blob: puffin.Blob, label: str, path: str) -> int | None:
    value = blob.properties.get(SNAPSHOT_PROPERTY)
    if value is None:
        return None
    if not isinstance(value, str) or not _DIGITS.fullmatch(value) or int(value) > _MAX_SNAPSHOT:
        raise puffin.corrupt(path, f"{label} has an invalid {SNAPSHOT_PROPERTY} property {str(value)[:40]!r}")
    return int(value)


def _blob_positions(buf: bytes, blob: puffin.Blob, label: str, path: str, row_count: int | None) -> np.ndarray:
    positions = decode(buf[blob.offset : blob.offset + blob.length], f"{path} ({label})", row_count=row_count)
    claimed = blob.properties.get("cardinality")
    if claimed is not None and (
        not isinstance(claimed, str) or not _DIGITS.fullmatch(claimed) or int(claimed) != len(positions)
    ):
        raise puffin.corrupt(
            path, f"{label} says its cardinality is {str(claimed)[:40]!r}, its bitmap holds {len(positions)}"
        )
    return positions


def encode_history(positions: Any, snapshots: Any, data_file_path: str) -> tuple[bytes, int, int]:
    """A delete file of ``positions`` deleted at ``snapshots`` (one each), byte for byte as DuckLake 1.1 writes it:
    one snapshot is a bare blob; several are a Puffin container of one cumulative blob per snapshot, ascending.

    Returns:
        The file's bytes, its ``footer_size`` (0 for a bare blob) and its ``delete_count`` (every position).

    Raises:
        ValueError: no position, a negative one, one listed twice, or ``positions`` and ``snapshots`` of other
            lengths.
    """
    p = np.asarray(positions, dtype=np.int64)
    s = np.asarray(snapshots, dtype=np.int64)
    if len(p) != len(s) or not len(p):
        raise ValueError(f"a deletion vector history needs one snapshot per position, got {len(p)} and {len(s)}")
    if len(sorted_unique(p)) != len(p):
        raise ValueError("a deletion vector history lists a position twice")
    steps = np.unique(s)
    if len(steps) == 1:
        return encode(p), 0, len(p)
    blobs = []
    for step in steps.tolist():
        held = p[s <= step]
        properties = {
            "referenced-data-file": data_file_path,
            "cardinality": str(len(held)),
            SNAPSHOT_PROPERTY: str(step),
        }
        blobs.append((BLOB_TYPE, encode(held), properties))
    data, footer_size = puffin.write_container(blobs)
    return data, footer_size, len(p)


def read_deletion_vector(
    path: str, storage_options: dict[str, Any] | None = None, *, row_count: int | None = None
) -> tuple[np.ndarray, np.ndarray | None]:
    """``(positions, snapshots)`` of the puffin delete file at ``path`` (see :func:`decode_file`).

    Raises:
        DataFileError: the file is missing or unreadable.
        DeletionVectorError: the file is not a valid deletion vector, or deletes beyond ``row_count``.
    """
    fs, p = filesystem(path, storage_options)
    try:
        with fs.open(p, "rb") as f:
            blob = f.read()
    except FileNotFoundError as e:
        raise DataFileError(
            f"delete file {path} is missing: the lake's files were removed or moved; restore the file or "
            "time-travel to a snapshot that does not need it"
        ) from e
    except OSError as e:
        raise DataFileError(f"delete file {path} cannot be read: {e}") from e
    return decode_file(blob, path, row_count=row_count)


@dataclass(frozen=True)
class WrittenDeletionVector:
    """A deletion vector written for a commit; the fields ``ducklake_delete_file`` takes (as ``WrittenFile``)."""

    path: str
    record_count: int  # delete_count: every deleted position (the largest blob of a history)
    file_size_bytes: int
    footer_size: int = 0  # DuckDB records 0 for a bare blob; payload + 16 for a Puffin container
    # in an encrypted lake DuckDB gives a DV's row a key it never uses (DVs stay plaintext); kept out of repr
    encryption_key: str | None = field(default=None, repr=False)
    row_group_count: int | None = None  # DuckLake 1.1 leaves it NULL for puffin files


def write_deletion_vector(
    positions: Any, path: str, *, storage_options: dict[str, Any] | None = None
) -> WrittenDeletionVector:
    """Write ``positions`` as a deletion vector at ``path`` (one bare blob).

    Raises:
        DataFileError: the store refused the write (no file is left behind).
    """
    blob = encode(positions)
    _write_file(blob, path, storage_options)
    return WrittenDeletionVector(path, len(sorted_unique(positions)), len(blob))


def write_deletion_vector_history(
    positions: Any,
    snapshots: Any,
    path: str,
    *,
    data_file_path: str,
    storage_options: dict[str, Any] | None = None,
) -> WrittenDeletionVector:
    """Write a data file's deletes of several snapshots (``snapshots[i]`` deleted ``positions[i]``) at ``path`` as
    DuckLake 1.1 does (:func:`encode_history`); ``data_file_path`` is each blob's ``referenced-data-file``.

    Raises:
        DataFileError: the store refused the write (no file is left behind).
    """
    data, footer_size, count = encode_history(positions, snapshots, data_file_path)
    _write_file(data, path, storage_options)
    return WrittenDeletionVector(path, count, len(data), footer_size)


def _write_file(data: bytes, path: str, storage_options: dict[str, Any] | None) -> None:
    fs, p = filesystem(path, storage_options)
    try:
        ensure_parent(path, storage_options)
        with fs.open(p, "wb") as f:
            f.write(data)
    except Exception as e:  # any store failure: no half-written file may stay behind
        try:
            if fs.exists(p):
                fs.rm_file(p)
        except Exception:  # best effort; maintenance removes orphans later
            pass
        raise DataFileError(
            f"could not write deletion vector {path}: {e}; check that the data path is reachable and writable "
            "and retry: nothing was committed"
        ) from e
