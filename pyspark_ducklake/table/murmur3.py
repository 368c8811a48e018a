"""Murmur3 x86 32-bit with seed 0, over whole arrays at once: the hash of DuckLake's ``bucket(N, col)`` partitions.

DuckDB's ``murmur3_32`` (ducklake ``functions/ducklake_murmur3.cpp``, Iceberg's "32-bit hash requirements") hashes
an 8-byte little-endian long for integers, booleans, dates, times, timestamps and (the IEEE bits of) floats, and the
bytes themselves for strings and blobs. A bucket is computed for every row a partitioned write holds, so both forms
run as numpy operations over all rows: the fixed form in a handful of vector operations, the variable form one
4-byte block position at a time across every value still that long (the rows sorted by length, longest first).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

_C1 = np.uint32(0xCC9E2D51)
_C2 = np.uint32(0x1B873593)
_M = np.uint32(5)
_N = np.uint32(0xE6546B64)
_F1 = np.uint32(0x85EBCA6B)
_F2 = np.uint32(0xC2B2AE35)


def _scramble(k: np.ndarray) -> np.ndarray:
    k = k * _C1
    k = (k << np.uint32(15)) | (k >> np.uint32(17))
    return k * _C2


def _mix(h: np.ndarray, k: np.ndarray) -> np.ndarray:
    h = h ^ _scramble(k)
    h = (h << np.uint32(13)) | (h >> np.uint32(19))
    return h * _M + _N


def _finish(h: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    h = h ^ lengths.astype(np.uint32)
    h ^= h >> np.uint32(16)
    h *= _F1
    h ^= h >> np.uint32(13)
    h *= _F2
    h ^= h >> np.uint32(16)
    return h.view(np.int32)


def hash_longs(values: np.ndarray) -> np.ndarray:
    """``murmur3_32`` of each value as an 8-byte little-endian long (int32 results, as DuckDB's INTEGER)."""
    words = np.ascontiguousarray(values, dtype="<i8").view("<u4").reshape(-1, 2)
    h = _mix(np.zeros(len(words), dtype=np.uint32), words[:, 0])
    h = _mix(h, words[:, 1])
    return _finish(h, np.full(len(words), 8, dtype=np.uint32))


def hash_bytes(data: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """``murmur3_32`` of the byte strings ``data[starts[i] : starts[i] + lengths[i]]`` (int32 results)."""
    n = len(starts)
    starts = starts.astype(np.int64, copy=False)
    lengths = lengths.astype(np.int64, copy=False)
    blocks = lengths >> 2
    order = np.argsort(-blocks, kind="stable")
    sorted_starts = starts[order]
    sorted_blocks = blocks[order]
    # how many (sorted) rows still have a block at each block position: a prefix, shrinking
    active = np.searchsorted(-sorted_blocks, -np.arange(int(sorted_blocks[0]) if n else 0), side="left")
    h = np.zeros(n, dtype=np.uint32)
    for j, count in enumerate(active.tolist()):
        at = sorted_starts[:count] + 4 * j
        word = data[at].astype(np.uint32)
        word |= data[at + 1].astype(np.uint32) << np.uint32(8)
        word |= data[at + 2].astype(np.uint32) << np.uint32(16)
        word |= data[at + 3].astype(np.uint32) << np.uint32(24)
        h[:count] = _mix(h[:count], word)
    out = np.empty(n, dtype=np.uint32)
    out[order] = h
    tails = lengths & 3
    has_tail = np.flatnonzero(tails)
    if len(has_tail):
        at = starts[has_tail] + 4 * blocks[has_tail]
        size = tails[has_tail]
        k = np.zeros(len(has_tail), dtype=np.uint32)
        for byte in (2, 1, 0):
            rows = np.flatnonzero(size > byte)
            k[rows] ^= data[at[rows] + byte].astype(np.uint32) << np.uint32(8 * byte)
        out[has_tail] ^= _scramble(k)
    return _finish(out, lengths)


def hash_binary_array(array: pa.Array) -> np.ndarray:
    """``murmur3_32`` of each value of a string or binary array (any value for NULL slots)."""
    if pa.types.is_string(array.type) or pa.types.is_binary(array.type):
        array, offset_type = array.view(pa.binary()), np.int32
    else:
        array, offset_type = array.cast(pa.large_binary()), np.int64
    buffers = array.buffers()
    offsets = np.frombuffer(buffers[1], dtype=offset_type)[array.offset : array.offset + len(array) + 1]
    data = np.frombuffer(buffers[2], dtype=np.uint8) if buffers[2] is not None else np.zeros(0, np.uint8)
    return hash_bytes(data, offsets[:-1], np.diff(offsets))


__all__ = ["hash_binary_array", "hash_bytes", "hash_longs"]
