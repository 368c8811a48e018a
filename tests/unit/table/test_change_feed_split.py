"""The decisions of ``table.change_feed_split`` (which rows pair up as updates, which are second copies) equal what
``finish_changes`` decides over all rows at once, on random keys: runs of implicit rowids that overlap each other
or not, listed keys that fall inside runs, duplicates within and across pieces, keys too wide to pack."""

from __future__ import annotations

import random

import numpy as np
import pytest

from pyspark_ducklake.table.change_feed import pair_changes
from pyspark_ducklake.table.change_feed_split import _DELETE, _DROP, _INSERT, _decide, _Keys


def _materialize(keys: list[_Keys | None]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every piece's rows as explicit (snapshot, rowid, is_insert), concatenated in piece order."""
    snaps, rowids, inserts = [], [], []
    for k in keys:
        if k is None:
            continue
        if k.run_snapshot is None:
            snaps.append(k.snaps)
            rowids.append(k.rowids)
        else:
            snaps += [np.full(k.inserts, k.run_snapshot), k.snaps]
            rowids += [np.arange(k.run_lo, k.run_lo + k.inserts), k.rowids]
        flags = np.zeros(k.rows, dtype=np.int64)
        flags[: k.inserts] = 1
        inserts.append(flags)
    cat = lambda xs: np.concatenate(xs).astype(np.int64) if xs else np.empty(0, np.int64)  # noqa: E731
    return cat(snaps), cat(rowids), cat(inserts)


def _brute_force(keys: list[_Keys | None]) -> list[dict[int, int]]:
    """Per piece, {row: fate} for the rows whose fate is not their own kind, from pair_changes over all rows."""
    snaps, rowids, inserts = _materialize(keys)
    fate = np.full(len(snaps), _DROP, dtype=np.int8)
    if len(snaps):
        order, codes = pair_changes(snaps, rowids, inserts)
        fate[order] = codes
    own = np.where(inserts == 1, _INSERT, _DELETE)
    out, base = [], 0
    for k in keys:
        rows = 0 if k is None else k.rows
        out.append({i - base: int(fate[i]) for i in range(base, base + rows) if fate[i] != own[i]})
        base += rows
    return out


def _random_keys(rng: random.Random, *, wide: bool) -> list[_Keys | None]:
    snapshots = [rng.randrange(1, 8) + (2**40 if wide else 0) for _ in range(4)]
    keys: list[_Keys | None] = []
    for _ in range(rng.randrange(1, 7)):
        if rng.random() < 0.1:
            keys.append(None)
            continue
        deletes = rng.randrange(0, 6)
        del_snaps = np.array([rng.choice(snapshots) for _ in range(deletes)], dtype=np.int64)
        del_rowids = np.array([rng.randrange(0, 30) for _ in range(deletes)], dtype=np.int64)
        if rng.random() < 0.5:  # a file of implicit rowids: its inserts are a run
            inserts = rng.randrange(0, 12)
            keys.append(
                _Keys(inserts + deletes, inserts, del_snaps, del_rowids, rng.choice(snapshots), rng.randrange(0, 25))
            )
        else:
            inserts = rng.randrange(0, 8)
            ins_snaps = np.array([rng.choice(snapshots) for _ in range(inserts)], dtype=np.int64)
            ins_rowids = np.array([rng.randrange(0, 30) for _ in range(inserts)], dtype=np.int64)
            keys.append(
                _Keys(
                    inserts + deletes,
                    inserts,
                    np.concatenate([ins_snaps, del_snaps]),
                    np.concatenate([ins_rowids, del_rowids]),
                )
            )
    return keys


@pytest.mark.parametrize("wide", [False, True])
def test_decisions_equal_deciding_over_all_rows(wide: bool) -> None:
    rng = random.Random(1234 + wide)
    seen_codes: set[int] = set()
    for case in range(400):
        keys = _random_keys(rng, wide=wide)
        at, codes = _decide(keys)
        got = [dict(zip(a.tolist(), c.tolist(), strict=True)) for a, c in zip(at, codes, strict=True)]
        assert got == _brute_force(keys), f"case {case}: {keys}"
        seen_codes.update(c for piece in got for c in piece.values())
    assert seen_codes == {_DROP, 2, 3}  # duplicates and both images of updates occurred


def test_overlapping_runs_of_one_snapshot_are_one_change_each() -> None:
    empty = np.empty(0, np.int64)
    keys: list[_Keys | None] = [_Keys(10, 10, empty, empty, 5, 100), _Keys(10, 10, empty, empty, 5, 105)]
    at, codes = _decide(keys)
    assert at[0].tolist() == [] and at[1].tolist() == [0, 1, 2, 3, 4]  # rowids 105..109 again: dropped
    assert set(codes[1].tolist()) == {_DROP}


def test_a_delete_inside_a_run_pairs_with_that_row() -> None:
    keys: list[_Keys | None] = [
        _Keys(1, 0, np.array([7]), np.array([42])),  # rowid 42 deleted at snapshot 7
        _Keys(20, 20, np.empty(0, np.int64), np.empty(0, np.int64), 7, 30),  # rowids 30..49 inserted at 7
    ]
    at, codes = _decide(keys)
    assert (at[0].tolist(), codes[0].tolist()) == ([0], [2])  # update_preimage
    assert (at[1].tolist(), codes[1].tolist()) == ([12], [3])  # update_postimage
