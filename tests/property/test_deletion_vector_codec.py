"""Property: random sets of row positions round-trip through our deletion-vector codec, and agree with pyroaring's
``BitMap64`` (the reference Roaring implementation) both ways, run containers included.

Positions are drawn to reach every container kind: sparse arrays, dense bitmaps (over 4096 values under one 16-bit
key), full and nearly full containers, long runs, and keys beyond 32 bits (several 32-bit bitmaps).
"""

from __future__ import annotations

import struct
import zlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyroaring import BitMap64

from pyspark_ducklake.exceptions import DeletionVectorError
from pyspark_ducklake.io.deletion_vector import decode, decode_file, encode, encode_history
from tests.support.hostile import examples


@st.composite
def position_sets(draw: st.DrawFn) -> list[int]:
    parts: list[np.ndarray] = []
    for _ in range(draw(st.integers(0, 4))):
        base = draw(st.sampled_from([0, 65536, 65536 * 7, 2**32 - 70000, 2**32, 2**40]))
        kind = draw(st.sampled_from(["sparse", "dense", "run", "full"]))
        seed = draw(st.integers(0, 2**32 - 1))
        rng = np.random.default_rng(seed)
        if kind == "sparse":
            parts.append(base + rng.integers(0, 200000, draw(st.integers(1, 300))))
        elif kind == "dense":
            parts.append(base + rng.integers(0, 65536, draw(st.integers(4000, 20000))))
        elif kind == "run":
            start = draw(st.integers(0, 100000))
            parts.append(base + np.arange(start, start + draw(st.integers(1, 140000))))
        else:
            parts.append(base + np.arange(65536 * draw(st.integers(0, 3)), 65536 * 4))
    extra = draw(st.lists(st.integers(0, 2**34), max_size=20))
    parts.append(np.array(extra, dtype=np.int64))
    merged = np.sort(np.concatenate(parts).astype(np.int64))
    return merged[np.concatenate(([True], merged[1:] != merged[:-1]))].tolist() if len(merged) else []


def framed(bitmap: bytes) -> bytes:
    data = b"\xd1\xd3\x39\x64" + bitmap
    return struct.pack(">I", len(data)) + data + struct.pack(">I", zlib.crc32(data))


@settings(max_examples=examples(1.0))
@given(position_sets(), st.booleans())
def test_positions_round_trip_and_agree_with_pyroaring(positions: list[int], run_optimize: bool) -> None:
    ours = encode(positions)
    assert decode(ours, "x").tolist() == positions
    assert list(BitMap64.deserialize(ours[8:-4])) == positions
    theirs = BitMap64(positions)
    if run_optimize:
        theirs.run_optimize()  # run containers and the 12347 cookie, with and without offsets
    assert decode(framed(theirs.serialize()), "x").tolist() == positions


@settings(max_examples=examples(0.5))
@given(position_sets(), st.data())
def test_any_bitmap_damage_is_refused_or_decodes_to_a_valid_set(positions: list[int], data: st.DataObject) -> None:
    """A bitmap damaged under a correct CRC (a forger, not bit rot) never crashes nor yields unsorted positions."""
    blob = encode(positions or [0])
    body = bytearray(blob[8:-4])
    at = data.draw(st.integers(0, len(body) - 1))
    body[at] ^= data.draw(st.integers(1, 255))
    damaged = framed(bytes(body))
    try:
        got = decode(damaged, "x")
    except DeletionVectorError as e:
        assert "deletion vector x is corrupt" in str(e)
        return
    assert bool(np.all(np.diff(got) > 0)) and (len(got) == 0 or int(got[0]) >= 0)


def test_a_forged_key_beyond_int64_is_refused() -> None:
    """Found by the fuzz profile: a 32-bit bitmap keyed 2^31 or above gave negative positions."""
    blob = encode([5])
    body = bytearray(blob[8:-4])
    body[11] = 0x80  # the first bitmap's key, u32 little-endian after the u64 count: 0x80000000
    with pytest.raises(DeletionVectorError, match="beyond 2\\^63"):
        decode(framed(bytes(body)), "x")


def test_crc_catches_bit_rot() -> None:
    blob = bytearray(encode(range(0, 100000, 3)))
    blob[40] ^= 0x10
    with pytest.raises(DeletionVectorError, match="CRC-32 mismatch"):
        decode(bytes(blob), "x")


@settings(max_examples=examples(0.3))
@given(st.lists(st.tuples(st.integers(1, 50), st.lists(st.integers(0, 2**33), max_size=40)), min_size=1, max_size=6))
def test_a_history_reads_at_every_snapshot_what_was_deleted_up_to_it(deltas: list[tuple[int, list[int]]]) -> None:
    """DuckLake 1.1's puffin history: each position tagged with its first deleting snapshot, written (one blob per
    snapshot, or a bare blob for one) and read back: at every snapshot the union of the deletes up to it."""
    first: dict[int, int] = {}
    for snapshot, positions in deltas:
        for p in positions:
            first[p] = min(first.get(p, snapshot), snapshot)
    if not first:
        return
    ordered = sorted(first)
    data, footer_size, count = encode_history(ordered, [first[p] for p in ordered], "/d/f.parquet")
    assert count == len(first) and (footer_size == 0) == (len(set(first.values())) == 1)
    positions, snapshots = decode_file(data, "x")
    assert positions.tolist() == ordered
    got = [first[p] for p in ordered] if snapshots is None else snapshots.tolist()
    for s in range(52):
        expected = sorted(p for p, at in first.items() if at <= s)
        assert sorted(p for p, at in zip(ordered, got, strict=True) if at <= s) == expected
