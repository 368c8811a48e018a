"""Windows of the change feed's initial load (``next_window``): bounded by rows and files, covering every row id once,
and not collapsed by a piece that spans the whole row-id range (inlined rows, a merged file)."""

from __future__ import annotations

import pyarrow as pa

from pyspark_ducklake.catalog.types import TableSchema
from pyspark_ducklake.table.change_feed_initial import (
    DEFAULT_MAX_FILES,
    DEFAULT_MAX_ROWS,
    InitialLoad,
    InitialPiece,
    next_window,
    window_pieces,
)


def load(*ranges: tuple[int, int, int]) -> InitialLoad:
    """A load of pieces ``(low, high, rows)``; only their row-id ranges matter to the windows."""
    pieces = sorted((InitialPiece(None, low, high, rows) for low, high, rows in ranges), key=lambda p: p.low)
    return InitialLoad(None, TableSchema(()), 5, None, pieces, pa.table({}))  # type: ignore[arg-type]


def windows(plan: InitialLoad, **bounds: int) -> list[tuple[int, int | None]]:
    out: list[tuple[int, int | None]] = []
    low = 0
    while True:
        high = next_window(
            plan,
            low,
            max_rows=bounds.get("max_rows", DEFAULT_MAX_ROWS),
            max_files=bounds.get("max_files", DEFAULT_MAX_FILES),
        )
        out.append((low, high))
        if high is None:
            return out
        assert high > low
        low = high


def rows_in(plan: InitialLoad, low: int, high: int | None) -> int:
    """Rows of contiguous pieces (one row per row id) in ``[low, high)``."""
    end = high if high is not None else plan.end
    return sum(max(0, min(p.high, end) - max(p.low, low)) for p in plan.pieces)


def test_one_big_file_is_cut_into_bounded_windows() -> None:
    plan = load((0, 5_500_000, 5_500_000))
    cuts = windows(plan)
    assert len(cuts) == 6
    assert all(rows_in(plan, lo, hi) <= DEFAULT_MAX_ROWS for lo, hi in cuts)
    assert sum(rows_in(plan, lo, hi) for lo, hi in cuts) == 5_500_000


def test_many_small_files_are_bounded_by_the_file_count() -> None:
    plan = load(*((i * 10, i * 10 + 10, 10) for i in range(2500)))
    cuts = windows(plan)
    assert [len(window_pieces(plan, lo, hi)) for lo, hi in cuts] == [DEFAULT_MAX_FILES, DEFAULT_MAX_FILES, 500]
    cuts = windows(plan, max_files=7, max_rows=25)
    assert all(rows_in(plan, lo, hi) <= 25 for lo, hi in cuts)
    assert sum(rows_in(plan, lo, hi) for lo, hi in cuts) == 25_000


def test_a_piece_spanning_every_row_id_does_not_collapse_the_windows() -> None:
    """The inlined rows (ids 0..2 and 263) and three files: with one file a window, four windows, not 264."""
    plan = load((0, 264, 4), (3, 63, 60), (63, 163, 100), (163, 263, 100))
    cuts = windows(plan, max_files=1)
    assert cuts == [(0, 3), (3, 63), (63, 163), (163, None)]


def test_an_empty_load_is_one_window() -> None:
    assert windows(load()) == [(0, None)]
    assert next_window(load((0, 10, 10)), 10, max_rows=1, max_files=1) is None
