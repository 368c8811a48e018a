"""The change feed of a range reads only the catalog rows of files written, ended or deleted from in it, yet misses
nothing: over a history mixing appends, flushes, merges, upserts, schema changes, and deletes written by this
library and by DuckDB 1.5.5 (inlined deletes and their flush, a second delete of a file that keeps the first one's
begin snapshot with per-row snapshot ids, deletion vectors), the feed of every window equals the feed of the whole
history cut to that window, row for row, commit times included.

The whole history's feed reads every file row (no file is written before its first snapshot), so it is the plan
that reads everything; DuckDB's own feed is compared with ours in ``test_table_changes.py``.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from pyspark_ducklake.lake import Lake
from tests.support.catalogs import CatalogLocation
from tests.support.duck import attached, connect_duckdb
from tests.support.history import STREAM, Churn, History

CHURN = Churn(rows_per_commit=4, flush_every=6, merge_every=17, delete_every=5, upsert_every=7, alter_every=23)


def _duckdb_deletes(con: Any, history: History, step: int) -> None:
    """DuckDB deletes a recent row (inlined, or an inlined delete of a flushed row) and two older ones."""
    top = history.next_id
    for victim in (top - 2, (step * 31) % top, (step * 17 + 3) % top):
        con.execute(f"DELETE FROM lake.main.stream WHERE id = {victim}")


def _build(catalog: CatalogLocation) -> tuple[Lake, int]:
    lake = Lake(catalog.url, catalog.data_path)
    history = History(lake, CHURN)
    con = connect_duckdb()
    head = 0
    for step, size in enumerate(range(12, 90, 12)):
        history.grow_to(size)
        with attached(con, catalog) as duck:
            if step == 3:  # from here on deletes write deletion vectors (ours and DuckDB's)
                duck.execute("CALL lake.set_option('write_deletion_vectors', true)")
            _duckdb_deletes(duck, history, step)
            if step % 2:
                duck.execute("CALL ducklake_flush_inlined_data('lake')")
        head = lake.current_snapshot_id()
    history.close()
    con.close()
    return lake, head


def _rows(feed: pa.Table) -> list[tuple[Any, ...]]:
    cols = ["id", "v", "_change_type", "_snapshot_id", "_rowid", "_commit_timestamp"]
    table = feed.select(cols)
    return sorted(zip(*(table.column(c).to_pylist() for c in cols), strict=True), key=repr)


def test_every_window_equals_the_whole_feed_cut_to_it(catalog: CatalogLocation) -> None:
    lake, head = _build(catalog)
    whole = lake.table_changes(STREAM, 1, head)
    kinds = set(whole.column("_change_type").to_pylist())
    assert kinds == {"insert", "delete", "update_preimage", "update_postimage"}
    snaps = whole.column("_snapshot_id")
    windows = 0
    for width in (0, 2, 7):
        for start in range(1, head - width + 1):
            end = start + width
            window = lake.table_changes(STREAM, start, end)
            inside = pc.and_(pc.greater_equal(snaps, start), pc.less_equal(snaps, end))
            assert _rows(window) == _rows(whole.filter(inside)), (start, end)
            windows += 1
    lake.close()
    assert windows > 200
