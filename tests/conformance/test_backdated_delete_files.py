"""Time travel across a delete file DuckDB backdates: what a snapshot showed when it was the newest is what it shows
later, through the Python API (``rowid`` included) and the Spark data source.

DuckDB 1.5.5 (and DuckLake's 1.1 build) flushing the inlined deletes of a data file that a rewrite ended meanwhile
writes one more delete file for the ended file, begun at the deletes' snapshot and holding only those deletes, next
to the file's delete file of that time. Both are visible at the snapshots between: the rows there are the union of
their deletes. Reading only the newer one brought rows back that were deleted or updated long before (we did that,
and DuckDB still does: it reads the table at that snapshot with the old versions of updated rows).

The oracle is DuckDB reading each snapshot while it was the newest, before the flush; the change feed of each
snapshot is the difference between DuckDB's reads of it and of the one before (by ``rowid``: an insert, a delete, or
an update's pre- and post-image; nothing at the maintenance snapshots).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

import pyspark_ducklake as pdl
from tests.support.compare import canonical_rows
from tests.support.duck import attached, connect_duckdb

HISTORY = [
    "CREATE TABLE t(id BIGINT, s VARCHAR)",
    "INSERT INTO t VALUES (1, 'a'), (2, 'b'), (3, 'c'), (5, 'e')",
    "UPDATE t SET s = 'u' WHERE id = 1",
    "DELETE FROM t WHERE id = 2",
    "CALL ducklake_flush_inlined_data('lake')",  # one file of every version, a delete file ending the old ones
    "DELETE FROM t WHERE id = 3",  # an inlined delete of a row of that file
    "UPDATE t SET s = 'v' WHERE id = 5",
    "CALL ducklake_rewrite_data_files('lake', 't', delete_threshold => 0)",  # ends the file and its delete file
    "INSERT INTO t VALUES (4, 'd')",
    "CALL ducklake_flush_inlined_data('lake')",  # the backdated delete file of the ended file
    "DELETE FROM t WHERE id = 1",
]


def changes_between(before: list[tuple[Any, ...]], after: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """``(change_type, rowid, id, s)`` of the rows (``(rowid, id, s)``) that differ between two reads."""
    old, new = {r[0]: r for r in before}, {r[0]: r for r in after}
    out = [("insert", *new[k]) for k in new.keys() - old.keys()]
    out += [("delete", *old[k]) for k in old.keys() - new.keys()]
    for k in old.keys() & new.keys():
        if old[k] != new[k]:
            out += [("update_preimage", *old[k]), ("update_postimage", *new[k])]
    return sorted(out)


@pytest.fixture(scope="module")
def duck() -> Iterator[Any]:
    con = connect_duckdb()
    yield con
    con.close()


def test_every_snapshot_reads_as_when_it_was_newest(
    catalog: Any, duck: Any, spark: Any, tmp_path_factory: pytest.TempPathFactory
) -> None:
    seen: dict[int, list[tuple[Any, ...]]] = {}
    with attached(duck, catalog, inlining_row_limit=10) as con:
        for statement in HISTORY:
            con.execute(statement.replace(" t(", " lake.t(").replace(" t ", " lake.t "))
            snapshot = con.execute("SELECT max(snapshot_id) FROM lake.snapshots()").fetchone()[0]
            seen[snapshot] = canonical_rows(con.execute("SELECT rowid, id, s FROM lake.t").to_arrow_table())
        backdated = con.execute(
            "SELECT count(*) FROM (SELECT data_file_id FROM __ducklake_metadata_lake.ducklake_delete_file "
            "GROUP BY data_file_id, begin_snapshot <= 6 AND coalesce(end_snapshot, 99) > 6 HAVING count(*) > 1)"
        ).fetchone()[0]
    assert backdated == 1, "the history gives one data file two delete files visible at once"

    lake = pdl.connect(catalog.url)
    try:
        for snapshot, expected in seen.items():
            if snapshot < 2:
                continue
            got = lake.scan(("main", "t"), snapshot=snapshot, columns=["rowid", "id", "s"])
            assert canonical_rows(got) == expected, f"Python API at snapshot {snapshot}"
            feed = lake.table_changes(("main", "t"), snapshot, snapshot).to_pylist()
            changes = sorted((r["_change_type"], r["_rowid"], r["id"], r["s"]) for r in feed)
            assert changes == changes_between(seen.get(snapshot - 1, []), expected), f"feed at {snapshot}"
    finally:
        lake.close()

    for snapshot, expected in seen.items():
        if snapshot < 2:
            continue
        df = spark.read.format("ducklake").option("catalog", catalog.url).option("versionAsOf", snapshot).load("main.t")
        got = sorted(tuple(r) for r in df.collect())
        assert got == sorted(r[1:] for r in expected), f"Spark at snapshot {snapshot}"  # Spark shows no rowid
