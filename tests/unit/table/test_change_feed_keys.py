"""The feed's keys packed where each part is read (``part_key``) decide exactly what the keys of the concatenation
decide: the same order, update pairs, second copies dropped, commit times; on random parts with duplicates within and
across parts, update pairs split across parts, and values that do not fit the packing (then the feed falls back)."""

from __future__ import annotations

import datetime as dt
import random

import numpy as np
import pyarrow as pa
import pytest

from pyspark_ducklake.catalog.entries import SchemaEntry, TableEntry
from pyspark_ducklake.catalog.types import Column, TableSchema
from pyspark_ducklake.table.change_feed import (
    CHANGE_ROWID,
    CHANGE_SNAPSHOT,
    CHANGE_TYPE,
    DELETE,
    INSERT,
    ChangePlan,
    commit_times_of,
    finish_changes,
    key_row_bits,
    pair_changes,
    part_key,
)

_SCHEMA = TableSchema((Column(1, "v", "int64"),))
_TABLE = TableEntry(1, "u", SchemaEntry(0, "main", "", True), "t", "", True, 0)


def _part(rng: random.Random, snapshots: list[int], rowids: int) -> pa.Table:
    n = rng.randrange(0, 40)
    kinds = [rng.choice((INSERT, DELETE)) for _ in range(n)]
    return pa.table(
        {
            "v": pa.array([rng.randrange(-5, 5) if rng.random() < 0.9 else None for _ in range(n)], pa.int64()),
            CHANGE_TYPE: pa.array(kinds, pa.string()),
            CHANGE_SNAPSHOT: pa.array([rng.choice(snapshots) for _ in range(n)], pa.int64()),
            CHANGE_ROWID: pa.array([rng.randrange(rowids) for _ in range(n)], pa.int64()),
        }
    )


def _plan(end: int, snapshots: list[int]) -> ChangePlan:
    base = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
    times = {s: base + dt.timedelta(seconds=i) for i, s in enumerate(snapshots[:-1])}  # the last one: no time
    return ChangePlan(_TABLE, _SCHEMA, 0, end, commit_times=times)


@pytest.mark.parametrize("seed", range(60))
@pytest.mark.parametrize("ordered", [True, False])
def test_keys_from_the_parts_decide_as_the_concatenation(seed: int, ordered: bool) -> None:
    rng = random.Random(seed)
    end = rng.choice((9, 2**20, 2**40))
    snapshots = sorted({rng.randrange(0, end + 1) for _ in range(4)} | {end})
    parts: list[pa.Table | None] = [
        None if rng.random() < 0.1 else _part(rng, snapshots, rng.choice((8, 50))) for _ in range(rng.randrange(1, 7))
    ]
    plan = _plan(end, snapshots)
    keys = [part_key(p, end) for p in parts]
    assert all(k is not None for p, k in zip(parts, keys, strict=True) if p is not None)
    with_keys = finish_changes(parts, plan, ordered=ordered, keys=keys)
    without = finish_changes(parts, plan, ordered=ordered)
    assert with_keys.equals(without, check_metadata=True)
    versions = {
        (p.column(CHANGE_TYPE)[i].as_py(), p.column(CHANGE_SNAPSHOT)[i].as_py(), p.column(CHANGE_ROWID)[i].as_py())
        for p in parts
        if p is not None
        for i in range(p.num_rows)
    }
    assert with_keys.num_rows == len(versions)  # second copies dropped, nothing else


def test_packed_keys_pair_as_the_unpacked_sort() -> None:
    """The packed path of pair_changes equals its lexsort path (values too wide to pack), shifted alike."""
    rng = np.random.default_rng(3)
    for _ in range(200):
        n = int(rng.integers(0, 60))
        snaps = rng.integers(0, 6, n)
        rowids = rng.integers(0, 12, n)
        inserts = rng.integers(0, 2, n)
        packed = pair_changes(snaps, rowids, inserts)
        wide = pair_changes(snaps + 2**45, rowids + 2**40, inserts)
        np.testing.assert_array_equal(packed[0], wide[0])
        np.testing.assert_array_equal(packed[1], wide[1])


def test_a_part_that_does_not_fit_falls_back() -> None:
    end = 2**40
    bits = key_row_bits(end)
    assert bits is not None
    fits = pa.table(
        {
            "v": pa.array([1, 2], pa.int64()),
            CHANGE_TYPE: pa.array([DELETE, INSERT]),
            CHANGE_SNAPSHOT: pa.array([end, end], pa.int64()),
            CHANGE_ROWID: pa.array([2 ** (bits - 1) - 1] * 2, pa.int64()),
        }
    )
    wide = fits.set_column(3, CHANGE_ROWID, pa.array([2 ** (bits - 1), 5], pa.int64()))
    negative = fits.set_column(3, CHANGE_ROWID, pa.array([-1, 5], pa.int64()))
    beyond = fits.set_column(2, CHANGE_SNAPSHOT, pa.array([2 ** (62 - bits), end], pa.int64()))
    assert part_key(fits, end) is not None
    for part in (wide, negative, beyond):
        assert part_key(part, end) is None
    assert key_row_bits(2**61) is None
    parts: list[pa.Table | None] = [fits, wide, negative]
    out = finish_changes(parts, _plan(end, [end, end + 1]), keys=[part_key(p, end) for p in parts])
    assert out.equals(finish_changes(parts, _plan(end, [end, end + 1])))
    # rowid -1, 5 (its second insert dropped), the pair of 2**(bits-1)-1, then 2**(bits-1)
    assert out.column("_rowid").to_pylist() == [-1, 5, 2 ** (bits - 1) - 1, 2 ** (bits - 1) - 1, 2 ** (bits - 1)]
    assert out.column("_change_type").to_pylist() == [
        "delete",
        "insert",
        "update_preimage",
        "update_postimage",
        "delete",
    ]


def test_commit_times_by_lookup_equal_the_binary_search() -> None:
    base = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
    times = {3: base, 5: base + dt.timedelta(seconds=1), 2**30: base + dt.timedelta(seconds=2)}
    near = np.array([3, 3, 4, 5, 6, 5], dtype=np.int64)  # 4 and 6 have no time: null
    assert commit_times_of(near, times).to_pylist() == [base, base, None, times[5], None, times[5]]
    far = np.array([3, 2**30, 7], dtype=np.int64)  # a span too wide for a lookup table: the binary search
    assert commit_times_of(far, times).to_pylist() == [base, times[2**30], None]
    assert commit_times_of(np.empty(0, np.int64), times).to_pylist() == []
    assert commit_times_of(near, {}).null_count == len(near)
