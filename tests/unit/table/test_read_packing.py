"""Packing a scan's files into read partitions: every file once, two partitions per core, balanced by bytes, more
partitions where one would pass 128 MB."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from pyspark_ducklake.catalog.entries import DataFileEntry
from pyspark_ducklake.table.read_packing import (
    MAX_PARTITION_BYTES,
    OPEN_COST_BYTES,
    PARTITIONS_PER_CORE,
    pack_tasks,
)
from pyspark_ducklake.table.scan import FileTask
from tests.support.hostile import examples

MB = 1024 * 1024


def _tasks(sizes: list[int]) -> list[FileTask]:
    return [
        FileTask(DataFileEntry(i, f"/lake/f{i}.parquet", 10, size, None, 0, 1, None, None, None), 1)
        for i, size in enumerate(sizes)
    ]


def _bytes(part: tuple[FileTask, ...]) -> int:
    return sum(t.file.file_size_bytes + OPEN_COST_BYTES for t in part)


def test_eight_equal_files_on_two_cores_make_four_partitions_of_two() -> None:
    parts = pack_tasks(_tasks([20 * MB] * 8), cores=2)
    assert [len(p) for p in parts] == [2, 2, 2, 2]


def test_fewer_files_than_partitions_give_one_partition_per_file() -> None:
    assert [len(p) for p in pack_tasks(_tasks([MB, 2 * MB, 3 * MB]), cores=4)] == [1, 1, 1]
    assert pack_tasks([], cores=4) == []


def test_a_large_table_gets_partitions_of_at_most_128_mb() -> None:
    parts = pack_tasks(_tasks([60 * MB] * 40), cores=1)
    assert len(parts) == -(-40 * (60 * MB + OPEN_COST_BYTES) // MAX_PARTITION_BYTES)
    assert max(_bytes(p) for p in parts) <= MAX_PARTITION_BYTES + 60 * MB


def test_many_small_files_are_packed_by_bytes() -> None:
    parts = pack_tasks(_tasks([i % 7 * MB for i in range(30)]), cores=2)
    assert len(parts) == PARTITIONS_PER_CORE * 2
    loads = [_bytes(p) for p in parts]
    assert max(loads) - min(loads) <= 6 * MB + OPEN_COST_BYTES


@settings(max_examples=examples(0.5))
@given(st.lists(st.integers(0, 300 * MB), max_size=60), st.integers(1, 16))
def test_every_file_lands_once_in_order_and_the_largest_partition_is_bounded(sizes: list[int], cores: int) -> None:
    tasks = _tasks(sizes)
    parts = pack_tasks(tasks, cores)
    placed = [t for p in parts for t in p]
    assert sorted(t.file.data_file_id for t in placed) == list(range(len(sizes)))
    for p in parts:
        ids = [t.file.data_file_id for t in p]
        assert ids == sorted(ids) and p
    if sizes:
        assert len(parts) == min(
            len(sizes), max(PARTITIONS_PER_CORE * cores, -(-sum(map(_bytes, parts)) // MAX_PARTITION_BYTES))
        )
        # greedy largest-first: no partition exceeds the mean by more than the largest file
        mean = sum(map(_bytes, parts)) / len(parts)
        assert max(map(_bytes, parts)) <= mean + max(sizes) + OPEN_COST_BYTES
