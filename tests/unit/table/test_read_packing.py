"""Packing a scan's files into read partitions: two partitions per core, balanced by bytes, more partitions where one
would pass 128 MB; a file larger than its share cut into byte ranges that tile it (each row group read once:
tests/unit/table/test_file_stream.py), files added by name mapping or encrypted never cut."""

from __future__ import annotations

import dataclasses
import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from pyspark_ducklake.catalog.entries import DataFileEntry
from pyspark_ducklake.catalog.name_mapping import MappingNode, NameMapping
from pyspark_ducklake.table.read_packing import (
    MAX_PARTITION_BYTES,
    OPEN_COST_BYTES,
    PARTITIONS_PER_CORE,
    FileSlice,
    pack_files,
    split_bytes,
)
from pyspark_ducklake.table.scan import FileTask
from tests.support.hostile import examples

MB = 1024 * 1024


def _tasks(sizes: list[int]) -> list[FileTask]:
    return [
        FileTask(DataFileEntry(i, f"/lake/f{i}.parquet", 10, size, None, 0, 1, None, None, None), 1)
        for i, size in enumerate(sizes)
    ]


def _bytes(part: tuple[FileSlice, ...]) -> int:
    total = 0
    for s in part:
        size = s.task.file.file_size_bytes
        total += (size if s.end is None else min(s.end, size)) - s.start + OPEN_COST_BYTES
    return total


def test_eight_equal_files_on_two_cores_make_four_partitions_of_two_whole_files() -> None:
    parts = pack_files(_tasks([20 * MB] * 8), cores=2)
    assert [len(p) for p in parts] == [2, 2, 2, 2]
    assert all(s.whole for p in parts for s in p)


def test_fewer_files_than_partitions_give_one_partition_per_file() -> None:
    assert [len(p) for p in pack_files(_tasks([MB, 2 * MB, 3 * MB]), cores=4)] == [1, 1, 1]
    assert pack_files([], cores=4) == []


def test_a_large_table_gets_partitions_of_at_most_128_mb() -> None:
    parts = pack_files(_tasks([60 * MB] * 40), cores=1)
    assert len(parts) == -(-40 * (60 * MB + OPEN_COST_BYTES) // MAX_PARTITION_BYTES)
    assert max(_bytes(p) for p in parts) <= MAX_PARTITION_BYTES + 60 * MB


def test_one_large_file_is_cut_into_a_range_per_partition() -> None:
    parts = pack_files(_tasks([400 * MB]), cores=2)
    assert [(s.start, s.end) for p in parts for s in p] == [
        (0, 100 * MB),
        (100 * MB, 200 * MB),
        (200 * MB, 300 * MB),
        (300 * MB, None),
    ]


def test_files_added_by_name_mapping_or_encrypted_are_never_cut() -> None:
    (task,) = _tasks([400 * MB])
    mapping = NameMapping(1, 1, (MappingNode("a", 1, False),))
    for change in ({"name_mapping": mapping}, {"encryption_key": "AAAAAAAAAAAAAAAAAAAAAA=="}):
        whole = dataclasses.replace(task, file=dataclasses.replace(task.file, **change))
        assert pack_files([whole], cores=2) == [(FileSlice(whole),)]


def test_many_small_files_are_packed_by_bytes() -> None:
    parts = pack_files(_tasks([i % 7 * MB for i in range(30)]), cores=2)
    assert len(parts) == PARTITIONS_PER_CORE * 2
    loads = [_bytes(p) for p in parts]
    assert max(loads) - min(loads) <= 6 * MB + OPEN_COST_BYTES


@settings(max_examples=examples(0.5))
@given(st.lists(st.integers(0, 600 * MB), max_size=40), st.integers(1, 16))
def test_ranges_tile_every_file_once_and_partitions_are_balanced(sizes: list[int], cores: int) -> None:
    tasks = _tasks(sizes)
    parts = pack_files(tasks, cores)
    pieces = [s for p in parts for s in p]
    for i, size in enumerate(sizes):
        mine = sorted((s.start, s.end) for s in pieces if s.task.file.data_file_id == i)
        assert mine[0][0] == 0 and mine[-1][1] is None  # from the first byte to past the last
        assert all(a[1] == b[0] for a, b in itertools.pairwise(mine))  # no gap, no overlap
        assert all(end is None or end - start == split_bytes(tasks, cores) for start, end in mine)
        assert len(mine) == max(1, -(-size // split_bytes(tasks, cores)))
    for p in parts:
        order = [(s.task.file.data_file_id, s.start) for s in p]
        assert p and order == sorted(order)
    if pieces:
        want = max(PARTITIONS_PER_CORE * cores, -(-sum(map(_bytes, parts)) // MAX_PARTITION_BYTES))
        assert len(parts) == min(len(pieces), want)
        # largest first into the lightest: no partition exceeds the mean by more than the largest piece
        mean = sum(map(_bytes, parts)) / len(parts)
        assert max(map(_bytes, parts)) <= mean + max(_bytes((s,)) for s in pieces)
