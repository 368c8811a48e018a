"""The vectorised murmur3_32 against a plain-Python transcription of the reference (ducklake_murmur3.hpp) and the
hash values Iceberg's spec lists (Appendix B), which DuckDB reproduces."""

from __future__ import annotations

import struct

import numpy as np
import pyarrow as pa
import pytest

from pyspark_ducklake.table.murmur3 import hash_binary_array, hash_bytes, hash_longs

_M = 0xFFFFFFFF


def reference(data: bytes) -> int:
    """DuckLakeMurmur3::Hash, seed 0, one byte string at a time."""

    def scramble(k: int) -> int:
        k = (k * 0xCC9E2D51) & _M
        k = ((k << 15) | (k >> 17)) & _M
        return (k * 0x1B873593) & _M

    h = 0
    blocks = len(data) // 4
    for i in range(blocks):
        h ^= scramble(struct.unpack_from("<I", data, 4 * i)[0])
        h = ((h << 13) | (h >> 19)) & _M
        h = (h * 5 + 0xE6546B64) & _M
    tail = data[4 * blocks :]
    if tail:
        h ^= scramble(int.from_bytes(tail, "little"))
    h ^= len(data)
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & _M
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & _M
    h ^= h >> 16
    return h - (1 << 32) if h >= 1 << 31 else h


def test_icebergs_spec_values() -> None:
    # int/long 34, date 2017-11-16 (17486 days), time 22:31:08 and timestamp 2017-11-16T22:31:08 in microseconds
    longs = [34, 17486, 81068000000, 1510871468000000]
    assert hash_longs(np.array(longs, dtype=np.int64)).tolist() == [2017239379, -653330422, -662762989, -2047944441]
    assert hash_binary_array(pa.array(["iceberg"])).tolist() == [1210000089]
    assert hash_binary_array(pa.array([b"\x00\x01\x02\x03"])).tolist() == [-188683207]


def test_longs_equal_the_reference() -> None:
    rng = np.random.default_rng(7)
    values = np.concatenate(
        [np.array([0, 1, -1, 2**63 - 1, -(2**63)], dtype=np.int64), rng.integers(-(2**63), 2**63 - 1, 2000)]
    )
    assert hash_longs(values).tolist() == [reference(struct.pack("<q", int(v))) for v in values]
    assert hash_longs(np.array([], dtype=np.int64)).tolist() == []


@pytest.mark.parametrize("large", [False, True])
def test_strings_of_every_length_and_tail_equal_the_reference(large: bool) -> None:
    rng = np.random.default_rng(11)
    values = [bytes(rng.integers(0, 256, n, dtype=np.uint8)) for n in [*range(40), 1000, 4097, 5, 0]]
    values += [b"\x00" * 7, "ünï/cødé😀".encode(), b"\xff\xff\xff\xff\xff"]
    array = pa.array(values, pa.large_binary() if large else pa.binary())
    expected = [reference(v) for v in values]
    assert hash_binary_array(array).tolist() == expected
    assert hash_binary_array(array.slice(3, 20)).tolist() == expected[3:23]  # an array's offset is honoured
    texts = pa.array(["", "a", "ab", "abc", "abcd", "iceberg", "é" * 9], pa.large_string() if large else pa.string())
    assert hash_binary_array(texts).tolist() == [reference(t.encode()) for t in texts.to_pylist()]


def test_null_slots_and_empty_arrays() -> None:
    array = pa.array(["x", None, "", None, "yz"])
    got = hash_binary_array(array).tolist()
    assert [got[0], got[2], got[4]] == [reference(b"x"), reference(b""), reference(b"yz")]
    assert hash_binary_array(pa.array([], pa.string())).tolist() == []
    assert hash_binary_array(pa.array([None, None], pa.string())).tolist() == [reference(b"")] * 2
    data = np.frombuffer(b"abcdefgh", dtype=np.uint8)
    assert hash_bytes(data, np.array([1, 0]), np.array([6, 8])).tolist() == [
        reference(b"bcdefg"),
        reference(b"abcdefgh"),
    ]
