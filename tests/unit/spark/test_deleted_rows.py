"""How the fast read path spells a file's deleted positions: single positions and ranges, and when a filter is too
big (then a bitmap or the anti join takes them; tests/conformance/test_spark_deleted_rows.py reads each way against
DuckDB); the bitmap's bytes."""

from __future__ import annotations

import numpy as np
import pytest

from pyspark_ducklake.spark import deleted_rows
from pyspark_ducklake.spark.deleted_rows import FileDeletes, filter_text, position_runs, sql_string


def positions(*values: int) -> np.ndarray:
    return np.array(values, dtype=np.int64)


@pytest.mark.parametrize(
    ("given", "single", "runs"),
    [
        ((), [], []),
        ((5,), [5], []),
        ((1, 2, 3), [1, 2, 3], []),  # shorter than RUN_MIN: listed
        ((0, 1, 2, 3), [], [(0, 3)]),
        ((0, 1, 2, 3, 7, 9, 10, 11, 12, 13, 20), [7, 20], [(0, 3), (9, 13)]),
        ((2**40, 2**40 + 1, 2**40 + 2, 2**40 + 3), [], [(2**40, 2**40 + 3)]),
    ],
)
def test_positions_split_into_singles_and_ranges(
    given: tuple[int, ...], single: list[int], runs: list[tuple[int, int]]
):
    got_single, got_runs = position_runs(positions(*given))
    assert got_single.tolist() == single and got_runs == runs
    # together they are exactly the positions given
    covered = sorted([*got_single.tolist(), *(p for a, b in got_runs for p in range(a, b + 1))])
    assert covered == list(given)


def test_filter_text_names_each_file_by_its_hex_path_with_ranges_and_positions() -> None:
    path = "file:/lake/d'ata/ducklake-1.parquet"
    text = filter_text([FileDeletes(path, 100, positions(1, 10, 11, 12, 13, 50))])
    assert text == (
        f"NOT ((_metadata.file_path = {sql_string(path)} AND "
        "(_metadata.row_index BETWEEN 10 AND 13 OR _metadata.row_index IN (1, 50))))"
    )
    assert sql_string(path) == f"CAST(X'{path.encode().hex()}' AS STRING)"


def test_too_many_positions_ranges_or_files_are_no_filter(monkeypatch: pytest.MonkeyPatch) -> None:
    many = np.arange(0, 2 * deleted_rows.DELETE_FILTER_MAX + 2, 2, dtype=np.int64)  # no two consecutive
    assert filter_text([FileDeletes("a", 10**6, many)]) is None
    assert filter_text([FileDeletes("a", 10**6, many[: deleted_rows.DELETE_FILTER_MAX])]) is not None
    ranges = np.concatenate([np.arange(k * 10, k * 10 + 5) for k in range(deleted_rows.DELETE_RANGES_MAX + 1)])
    assert filter_text([FileDeletes("a", 10**6, ranges)]) is None
    one_range = np.arange(0, 10**6, dtype=np.int64)  # a million positions in one range: a cheap filter
    assert "BETWEEN 0 AND 999999" in (filter_text([FileDeletes("a", 10**6, one_range)]) or "")
    files = [FileDeletes(f"f{i}", 10, positions(1)) for i in range(deleted_rows.DELETE_FILTER_FILES_MAX + 1)]
    assert filter_text(files) is None
    assert filter_text(files[:-1]) is not None
    monkeypatch.setattr(deleted_rows, "DELETE_FILTER_MAX", 0)
    assert filter_text([FileDeletes("a", 10, positions(1))]) is None


def test_the_bitmap_holds_exactly_the_positions_seven_a_byte_each_file_from_its_start() -> None:
    rng = np.random.default_rng(16)
    files = [
        FileDeletes("a", 7, positions(0, 6)),  # one whole byte
        FileDeletes("b", 100, np.flatnonzero(rng.random(100) < 0.4).astype(np.int64)),
        FileDeletes("c", 8, positions(7)),  # the first bit of a second byte
    ]
    blob, starts = deleted_rows.deleted_bitmap(files)
    assert starts == [0, 1, 16] and len(blob) == 18
    assert max(blob) < 0x80  # every byte an ASCII character
    for f, start in zip(files, starts, strict=True):
        set_bits = [p for p in range(f.rows) if blob[start + p // 7] >> (p % 7) & 1]
        assert set_bits == f.positions.tolist()


def test_bitmap_only_for_few_files_of_few_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    rows = 7 * deleted_rows.BITMAP_MAX_BYTES
    assert deleted_rows.bitmap_fits([FileDeletes("a", rows, positions(1))])
    assert not deleted_rows.bitmap_fits([FileDeletes("a", rows + 1, positions(1))])
    files = [FileDeletes(f"f{i}", 10, positions(1)) for i in range(deleted_rows.BITMAP_FILES_MAX + 1)]
    assert not deleted_rows.bitmap_fits(files)
    assert deleted_rows.bitmap_fits(files[:-1])
    monkeypatch.setattr(deleted_rows, "BITMAP_MAX_BYTES", 0)
    assert not deleted_rows.bitmap_fits([FileDeletes("a", 1, positions(0))])
