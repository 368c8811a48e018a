"""Hash buckets of upsert keys: equal keys (as DuckDB compares them) fall in the same bucket in every process.

The driver of a large ``writeStream`` upsert batch resolves keys that several tasks hold bucket range by bucket range
(``table/staged_upsert.py``), so it never holds every key at once. The hash is computed on :func:`upsert.key_table`'s
normalised columns (floats as the bits of their canonical value, so NaN equals NaN and -0.0 equals 0.0), with no
per-process seed: numpy's arithmetic on fixed-width values, CRC-32 on variable-width ones.
"""

from __future__ import annotations

import zlib

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

BUCKETS = 4096
_CHUNK = 65_536  # variable-width values hashed this many at a time


def _mix(h: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser: every input bit moves every output bit (uint64 arithmetic wraps)."""
    h = h.astype(np.uint64, copy=True)
    h ^= h >> np.uint64(30)
    h *= np.uint64(0xBF58476D1CE4E5B9)
    h ^= h >> np.uint64(27)
    h *= np.uint64(0x94D049BB133111EB)
    h ^= h >> np.uint64(31)
    return h


def _fixed_width(arr: pa.Array) -> np.ndarray:
    """A fixed-width column as uint64 words, one row per value (decimals: two or four words)."""
    t = arr.type
    if pa.types.is_boolean(t):
        return np.asarray(arr.cast(pa.uint8()).to_numpy(zero_copy_only=False), dtype=np.uint64)[:, None]
    if pa.types.is_decimal(t):
        width = t.byte_width // 8
        words = np.frombuffer(arr.buffers()[1], dtype=np.uint64)
        return words[arr.offset * width : (arr.offset + len(arr)) * width].reshape(len(arr), width)
    width = t.bit_width
    signed = {8: np.int8, 16: np.int16, 32: np.int32, 64: np.int64}[width]
    values = np.frombuffer(arr.buffers()[1], dtype=signed)[arr.offset : arr.offset + len(arr)]
    return values.astype(np.int64).view(np.uint64)[:, None]


def _variable_width(arr: pa.Array) -> np.ndarray:
    """CRC-32 of each value's bytes (strings as UTF-8), with its length in the high word."""
    if pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type):
        arr = arr.cast(pa.large_binary())
    out = np.empty(len(arr), dtype=np.uint64)
    for start in range(0, len(arr), _CHUNK):
        values = arr.slice(start, _CHUNK).to_pylist()
        out[start : start + len(values)] = [(len(v) << 32) | zlib.crc32(v) for v in values]
    return out[:, None]


def _words(arr: pa.Array) -> np.ndarray:
    """A column as uint64 words to hash, by its type."""
    if isinstance(arr.type, pa.ExtensionType):  # UUID and the like: their storage
        arr = arr.storage
    t = arr.type
    if pa.types.is_dictionary(t):
        arr = arr.dictionary_decode()
        t = arr.type
    if pa.types.is_decimal(t) and t.byte_width < 16:
        return _fixed_width(arr.cast(pa.decimal128(t.precision, t.scale)))
    if pa.types.is_integer(t) or pa.types.is_boolean(t) or pa.types.is_decimal(t):
        return _fixed_width(arr)
    if pa.types.is_date(t) or pa.types.is_time(t) or pa.types.is_timestamp(t) or pa.types.is_duration(t):
        return _fixed_width(arr.view(pa.int32() if t.bit_width == 32 else pa.int64()))
    if pa.types.is_fixed_size_binary(t):
        return _variable_width(arr.cast(pa.binary()))
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_string(t) or pa.types.is_large_string(t):
        return _variable_width(arr)
    # anything else (intervals): its Python value's repr, which is the same in every process
    return _variable_width(pa.array([repr(v) for v in arr.to_pylist()], pa.string()))


def key_hash(keys: pa.Table) -> np.ndarray:
    """A 64-bit hash per row of normalised key columns (no NULLs)."""
    h = np.zeros(keys.num_rows, dtype=np.uint64)
    for col in keys.columns:
        words = _words(col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col)
        for j in range(words.shape[1]):
            h = _mix(h ^ _mix(words[:, j] + np.uint64(0x9E3779B97F4A7C15)))
    return h


def key_buckets(keys: pa.Table) -> np.ndarray:
    """The bucket (0 .. BUCKETS-1) of each row of normalised key columns, as int32."""
    return (key_hash(keys) % np.uint64(BUCKETS)).astype(np.int32)


def bucket_ranges(counts: np.ndarray, most: int) -> list[tuple[int, int]]:
    """Consecutive bucket ranges ``(first, last)`` holding at most ``most`` rows each (a bucket over it alone)."""
    out: list[tuple[int, int]] = []
    first, held = 0, 0
    for b, n in enumerate(counts.tolist()):
        if held and held + n > most:
            out.append((first, b - 1))
            first, held = b, 0
        held += n
    out.append((first, len(counts) - 1))
    return out


def in_range(buckets: pa.Array | pa.ChunkedArray, first: int, last: int) -> pa.Array:
    """Which rows' buckets lie in ``first .. last``."""
    return pc.and_(pc.greater_equal(buckets, first), pc.less_equal(buckets, last))
