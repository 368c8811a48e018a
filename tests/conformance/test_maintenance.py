"""Maintenance against DuckDB's: merge_adjacent_files, expire_snapshots, cleanup_old_files, orphans.

* Ours, then DuckDB reads: after our merge, expiry and clean-up DuckDB reads every remaining snapshot exactly as
  before (``rowid`` and ``snapshot_id`` included), its ``table_changes`` equals ours and what it reported before,
  and it keeps writing into the result (insert, delete, update, flush, its own merge), which we read back.
* The same operation on a copy of one SQLite catalog, by DuckDB and by us, leaves the same catalog rows.
* DuckDB's own merge, expiry and clean-up, then we read every remaining snapshot and the change feed as DuckDB does.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import shutil
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import pyspark_ducklake as pdl
from pyspark_ducklake.exceptions import CommitConflictError, InvalidOptionError, NoSuchSnapshotError, NoSuchTableError
from pyspark_ducklake.table.change_feed import CHANGE_COLUMNS
from pyspark_ducklake.table.maintenance.compaction import rewrite_group
from tests.support.catalogs import compaction_catalog_rows
from tests.support.compare import canonical, canonical_rows
from tests.support.data import BROAD_SCHEMA, broad_rows
from tests.support.duck import attach_sql, connect_duckdb


@pytest.fixture(scope="module")
def duck() -> Iterator[Any]:
    """One DuckDB connection with the extensions loaded; each test attaches its lake as ``lake``."""
    con = connect_duckdb()
    yield con
    con.close()


@contextlib.contextmanager
def attached(con: Any, catalog: Any, inlining_row_limit: int | None = None) -> Iterator[Any]:
    con.execute(attach_sql(catalog, "lake", inlining_row_limit))
    try:
        yield con
    finally:
        con.execute("DETACH lake")


SMALL = pa.schema([("id", pa.int64()), ("k", pa.string()), ("v", pa.float64())])


def small_rows(start: int, n: int, k: str = "a") -> pa.Table:
    ids = list(range(start, start + n))
    return pa.table({"id": ids, "k": [k] * n, "v": [i / 4 for i in ids]}, schema=SMALL)


def duck_snapshots(con: Any) -> list[int]:
    return [r[0] for r in con.execute("SELECT snapshot_id FROM lake.snapshots() ORDER BY 1").fetchall()]


def columns_at(lake: pdl.Lake, table: str, snapshots: list[int]) -> dict[int, list[str]]:
    """The table's columns at each snapshot where it exists."""
    out = {}
    for s in snapshots:
        try:
            out[s] = lake.table(f"main.{table}", snapshot=s).schema.names
        except (NoSuchTableError, NoSuchSnapshotError):
            continue
    return out


def duck_history(con: Any, table: str, columns: dict[int, list[str]]) -> dict[int, list[tuple[Any, ...]]]:
    """DuckDB's rows at each snapshot, with rowid and snapshot_id, in one query."""
    if not columns:
        return {}
    sql = " UNION ALL BY NAME ".join(
        f"SELECT {s} AS at_snapshot, rowid, snapshot_id, * FROM lake.main.{table} AT (VERSION => {s})" for s in columns
    )
    rows = con.execute(sql).to_arrow_table()
    return {
        s: sorted(
            canonical_rows(rows.filter(pc.field("at_snapshot") == s).select(["rowid", "snapshot_id", *names])),
            key=repr,
        )
        for s, names in columns.items()
    }


def our_history(lake: pdl.Lake, table: str, columns: dict[int, list[str]]) -> dict[int, list[tuple[Any, ...]]]:
    return {
        s: sorted(
            canonical_rows(lake.scan(f"main.{table}", snapshot=s, columns=["rowid", "snapshot_id", *names])), key=repr
        )
        for s, names in columns.items()
    }


def duck_feed(con: Any, table: str, start: int, end: int) -> Counter[tuple[Any, ...]]:
    t = con.execute(f"SELECT * FROM ducklake_table_changes('lake', 'main', '{table}', {start}, {end})").to_arrow_table()
    return Counter(tuple(canonical(v) for v in r.values()) for r in t.to_pylist())


def our_feed(lake: pdl.Lake, table: str, start: int, end: int) -> Counter[tuple[Any, ...]]:
    t = lake.table_changes(f"main.{table}", start, end)
    cols = [c for c in t.column_names if c not in CHANGE_COLUMNS]
    t = t.select(["_snapshot_id", "_rowid", "_change_type", *cols])
    return Counter(tuple(canonical(v) for v in r.values()) for r in t.to_pylist())


def build_history(lake: pdl.Lake, duck: Any, catalog: Any, columns: list[str] | None = None) -> None:
    """Two tables whose files are every kind merge meets: ours, DuckDB's, flushed, deleted from, two schema
    versions, partitions. ``m`` has the broad schema's ``columns`` (all by default)."""
    names = columns or BROAD_SCHEMA.names

    def broad(start: int, n: int) -> pa.Table:
        return broad_rows(start, n).select(names)

    lake.create_table("main.m", pa.schema([BROAD_SCHEMA.field(n) for n in names]))
    for i in range(2):
        lake.append("main.m", broad(i * 20, 20))
    lake.append("main.m", broad(100, 3))  # inlined, then flushed: a file with internal row and snapshot ids
    lake.flush_inlined_data("main.m")
    lake.append("main.m", broad(200, 20))
    lake.delete("main.m", [("id", "=", 205)])  # this file has a delete file: merge leaves it alone
    lake.create_table("main.p", SMALL, partition_by=["k"])
    for i in range(2):
        lake.append("main.p", pa.concat_tables([small_rows(i * 20, 6, "a"), small_rows(i * 20 + 6, 6, "b")]))
    with attached(duck, catalog, 5) as con:
        con.execute("INSERT INTO lake.main.m (id, s) SELECT 300 + i, 'duck' || i FROM range(12) t(i)")
        con.execute("ALTER TABLE lake.main.m ADD COLUMN extra INTEGER")
        con.execute("INSERT INTO lake.main.m (id, extra) SELECT 400 + i, i FROM range(12) t(i)")
        con.execute("INSERT INTO lake.main.p SELECT 100 + i, 'a', i FROM range(8) t(i)")
    lake.append("main.m", pa.table({"id": list(range(500, 512)), "extra": list(range(12))}))


def test_our_maintenance_reads_identically_in_duckdb(duck: Any, catalog: Any) -> None:
    lake = pdl.connect(catalog.url, catalog.data_path, data_inlining_row_limit=5)
    # Some of the broad schema's types, to keep the many reads quick; test_same_catalog_rows_as_duckdb has them all.
    build_history(lake, duck, catalog, ["id", "i8", "u64", "f64", "d38", "tstz", "s", "u", "li", "st", "mp"])
    with attached(duck, catalog) as con:
        snaps = duck_snapshots(con)
        cols = {t: columns_at(lake, t, snaps) for t in ("m", "p")}
        before = {t: duck_history(con, t, cols[t]) for t in ("m", "p")}
        feeds = {t: duck_feed(con, t, 1, snaps[-1]) for t in ("m", "p")}

    dry = lake.merge_adjacent_files(dry_run=True)
    assert lake.current_snapshot_id() == snaps[-1]  # a dry run changes nothing
    report = lake.merge_adjacent_files()
    assert [(g.table, g.sources) for g in report.groups] == [(g.table, g.sources) for g in dry.groups]
    # m: ours x2 + flushed + DuckDB's insert (schema version 1; the file with a delete file is skipped), then
    # DuckDB's and ours after ADD COLUMN. p: one group per partition (a: ours x2 + DuckDB's, b: ours x2).
    assert sorted((g.table, len(g.sources)) for g in report.groups) == [
        ("main.m", 2),
        ("main.m", 4),
        ("main.p", 2),
        ("main.p", 3),
    ]
    merged = report.snapshot_id
    assert merged == snaps[-1] + 1
    assert lake.snapshots()[-1].changes_made == "merge_adjacent:1,merge_adjacent:2"
    assert all(Path(p).exists() for g in report.groups for p in g.sources)  # scheduled, not yet deleted
    assert lake.merge_adjacent_files().files_created == 0  # nothing left to merge

    with attached(duck, catalog, 5) as con:
        for t in ("m", "p"):
            cols[t][merged] = cols[t][snaps[-1]]
            now = duck_history(con, t, cols[t])
            assert now == {**before[t], merged: before[t][snaps[-1]]}, f"DuckDB reads {t} differently after our merge"
            assert our_history(lake, t, cols[t]) == now
            assert duck_feed(con, t, 1, merged) == feeds[t]
            assert our_feed(lake, t, 1, merged) == feeds[t]
        # DuckDB keeps writing into the merged files: insert, delete, update, flush, and its own merge.
        con.execute("INSERT INTO lake.main.m (id, s) SELECT 700 + i, 'later' || i FROM range(30) t(i)")
        con.execute("DELETE FROM lake.main.m WHERE id IN (3, 24, 301, 505)")
        con.execute("UPDATE lake.main.m SET s = 'upd' WHERE id IN (7, 510)")
        con.execute("INSERT INTO lake.main.m (id) VALUES (800), (801)")
        con.execute("CALL ducklake_flush_inlined_data('lake')")
        con.execute("INSERT INTO lake.main.p SELECT 200 + i, 'b', i FROM range(8) t(i)")
        con.execute("CALL ducklake_merge_adjacent_files('lake')")
        later = duck_snapshots(con)[len(snaps) :]
        for t in ("m", "p"):
            later_cols = columns_at(lake, t, later)
            assert our_history(lake, t, later_cols) == duck_history(con, t, later_cols)
        assert our_feed(lake, "m", 1, later[-1]) == duck_feed(con, "m", 1, later[-1])
        times = dict(con.execute("SELECT snapshot_id, snapshot_time FROM lake.snapshots()").fetchall())
    # We write after DuckDB's maintenance too. (A delete file on a merged file is left out here: DuckDB's change
    # feed reports such deletes at the rows' insert snapshot, see table/change_feed.py.)
    lake.append("main.m", pa.table({"id": [900, 901], "extra": [9, 9]}))
    lake.delete("main.m", [("id", "=", 900)])

    # Expire the older half of the history, then delete every scheduled file.
    snaps = [s.snapshot_id for s in lake.snapshots()]
    cut = snaps[len(snaps) // 2]
    remaining = [s for s in snaps if s >= cut]
    cols = {t: columns_at(lake, t, remaining) for t in ("m", "p")}
    with attached(duck, catalog) as con:
        expected = {t: duck_history(con, t, cols[t]) for t in ("m", "p")}
    with pytest.raises(InvalidOptionError, match="current snapshot"):
        lake.expire_snapshots(versions=[snaps[-1]])
    assert lake.expire_snapshots(older_than=times[cut], dry_run=True).snapshots == tuple(s for s in snaps if s < cut)
    assert [s.snapshot_id for s in lake.snapshots()] == snaps  # the dry run rolled back
    expired = lake.expire_snapshots(older_than=times[cut])
    assert expired.snapshots == tuple(s for s in snaps if s < cut)
    with pytest.raises(NoSuchSnapshotError):
        lake.scan("main.m", snapshot=snaps[0])
    cleaned = lake.cleanup_old_files(cleanup_all=True)
    assert cleaned.files and all(not Path(p).exists() for p in cleaned.files)
    assert lake.cleanup_old_files(cleanup_all=True).files == ()
    assert list(lake.delete_orphan_files(older_than=dt.timedelta(0), dry_run=True)) == []  # nothing unreferenced
    with attached(duck, catalog) as con:
        assert duck_snapshots(con) == remaining
        for t in ("m", "p"):
            assert duck_history(con, t, cols[t]) == expected[t]
            assert our_history(lake, t, cols[t]) == expected[t]
            assert our_feed(lake, t, cut, remaining[-1]) == duck_feed(con, t, cut, remaining[-1])
        con.execute("INSERT INTO lake.main.m (id) SELECT 1000 + i FROM range(20) t(i)")  # DuckDB still writes
        con.execute("DELETE FROM lake.main.m WHERE id = 1001")
        last = columns_at(lake, "m", duck_snapshots(con)[-1:])
        final = duck_history(con, "m", last)
    assert our_history(lake, "m", last) == final
    lake.close()


def test_same_catalog_rows_as_duckdb(duck: Any, sqlite_catalog: Any, tmp_path: Path) -> None:
    catalog = sqlite_catalog
    lake = pdl.connect(catalog.url, catalog.data_path, data_inlining_row_limit=5)
    build_history(lake, duck, catalog)
    with attached(duck, catalog) as con:  # a dropped table: expiry removes it once no snapshot sees it
        con.execute("CREATE TABLE lake.main.gone AS SELECT i AS id FROM range(50) t(i)")
        con.execute("DROP TABLE lake.main.gone")
    lake.overwrite("main.p", small_rows(0, 30, "c"))  # ends files, which expiry schedules for deletion
    lake.append("main.p", small_rows(50, 20, "c"))
    lake.close()
    db = Path(catalog.url.removeprefix("sqlite:///"))

    def twin(name: str) -> Any:
        copy = tmp_path / name
        shutil.copy(db, copy)
        return dataclasses.replace(catalog, url=f"sqlite:///{copy}", duckdb=f"ducklake:sqlite:{copy}")

    ours, theirs = twin("ours.sqlite"), twin("theirs.sqlite")
    with attached(duck, theirs) as con:
        created = con.execute("CALL ducklake_merge_adjacent_files('lake')").fetchall()
        last = duck_snapshots(con)[-1]
        con.execute("CALL ducklake_expire_snapshots('lake', versions => [2, 3, 4, 5])")
        # (older_than is not used on this side: on SQLite DuckDB compares snapshot times as text, which expires
        # every snapshot of the same day; our expiry compares times.)
        con.execute(f"CALL ducklake_expire_snapshots('lake', versions => {list(range(last - 2))})")
    lake = pdl.connect(ours.url)
    report = lake.merge_adjacent_files()
    assert sorted((f"main.{t}", n) for _, t, n, _ in created) == sorted(
        (g.table, len(g.sources)) for g in report.groups
    )
    assert lake.expire_snapshots(versions=[2, 3, 4, 5], batch_size=3).snapshots == (2, 3, 4, 5)
    when = next(s.snapshot.snapshot_time for s in lake.snapshots() if s.snapshot_id == last - 2)
    # the same snapshots as versions 0..last-3, a few per transaction (DuckDB expires them in one)
    expired = lake.expire_snapshots(older_than=when, batch_size=2)
    assert expired.batches > 2
    assert expired.snapshots == tuple(s for s in range(last - 2) if s not in (2, 3, 4, 5))
    assert expired.tables_removed and expired.files_scheduled  # the dropped table; the overwritten files
    lake.close()
    mine, theirs_rows = (
        compaction_catalog_rows(tmp_path / "ours.sqlite"),
        compaction_catalog_rows(tmp_path / "theirs.sqlite"),
    )
    assert mine.keys() == theirs_rows.keys()
    for name in mine:
        assert mine[name] == theirs_rows[name], f"{name} differs from DuckDB's"


def test_duckdb_maintenance_we_read(duck: Any, catalog: Any) -> None:
    with attached(duck, catalog, 5) as con:
        con.execute("CREATE TABLE lake.main.d (id BIGINT, s VARCHAR)")
        for i in range(4):
            con.execute(f"INSERT INTO lake.main.d SELECT {i * 20} + i, 'r' || i FROM range(20) t(i)")
        con.execute("INSERT INTO lake.main.d VALUES (500, 'inlined')")
        con.execute("DELETE FROM lake.main.d WHERE id IN (3, 500)")
        con.execute("UPDATE lake.main.d SET s = 'u' WHERE id IN (21, 62)")
        con.execute("CALL ducklake_merge_adjacent_files('lake')")
        con.execute("INSERT INTO lake.main.d SELECT 100 + i, 'x' FROM range(20) t(i)")
        snaps = duck_snapshots(con)
        half = len(snaps) // 2
        con.execute(f"CALL ducklake_expire_snapshots('lake', versions => {snaps[:half]})")
        con.execute("CALL ducklake_cleanup_old_files('lake', cleanup_all => true)")
        lake = pdl.connect(catalog.url)
        remaining = duck_snapshots(con)
        cols = columns_at(lake, "d", remaining)
        history = duck_history(con, "d", cols)
        feed = duck_feed(con, "d", remaining[0], remaining[-1])
    assert remaining == snaps[half:]
    assert our_history(lake, "d", cols) == history
    assert our_feed(lake, "d", remaining[0], remaining[-1]) == feed
    assert list(lake.delete_orphan_files(older_than=dt.timedelta(0), dry_run=True)) == []
    assert lake.cleanup_old_files(cleanup_all=True).files == ()  # DuckDB's clean-up left nothing scheduled
    lake.close()


def test_merge_conflicts_with_a_concurrent_delete(sqlite_catalog: Any) -> None:
    lake = pdl.connect(sqlite_catalog.url, sqlite_catalog.data_path, data_inlining_row_limit=0)
    lake.create_table("main.c", SMALL)
    for i in range(3):
        lake.append("main.c", small_rows(i * 10, 10))
    before = lake.scan("main.c")
    written: list[str] = []

    def rewrite(groups: list[Any]) -> list[Any]:
        out = [rewrite_group(g) for g in groups]
        written.extend(m.written.path for m in out)
        lake.delete("main.c", [("id", "=", 5)])  # lands while the merge is being written
        return out

    with pytest.raises(
        CommitConflictError, match=r"main\.c being merged were deleted from or compacted by another writer"
    ):
        lake.merge_adjacent_files("main.c", rewrite=rewrite)
    assert written and not any(Path(p).exists() for p in written)  # the merged file was removed
    assert "merge_adjacent" not in (lake.snapshots()[-1].changes_made or "")
    # The file that now has a delete file is skipped; the other two still merge.
    assert lake.merge_adjacent_files("main.c").files_processed == 2
    assert lake.scan("main.c").sort_by("id") == before.filter(pa.compute.field("id") != 5).sort_by("id")
    lake.close()


def test_merge_leaves_files_that_ever_had_deletes_delete_files_or_inlined(duck: Any, catalog: Any) -> None:
    """DuckDB 1.5.5 never merges a file that had deletes: a delete file (live or ended with its rows flushed) or
    a deletion still inlined in ``ducklake_inlined_delete_<table_id>``; the candidates are picked in SQL."""
    lake = pdl.connect(catalog.url, catalog.data_path, data_inlining_row_limit=5)
    lake.create_table("main.d", SMALL)
    for start in range(0, 80, 20):
        lake.append("main.d", small_rows(start, 20))  # over the limit: four Parquet files
    with attached(duck, catalog, inlining_row_limit=5):
        duck.execute("DELETE FROM lake.main.d WHERE id = 3")  # DuckDB inlines a one-row delete from the first file
    lake.delete("main.d", [("id", "in", list(range(20, 30)))])  # a delete file on the second
    files = {f["data_file"]: f["delete_file"] for f in lake.list_files("main.d").to_pylist()}
    assert len(files) == 4 and sum(d is not None for d in files.values()) == 1
    with lake.engine.connect() as conn:
        inlined = conn.exec_driver_sql(f"SELECT count(*) FROM ducklake_inlined_delete_{lake.table('main.d').table_id}")
        assert inlined.scalar_one() == 1
    report = lake.merge_adjacent_files("main.d")
    assert report.files_processed == 2 and report.files_created == 1  # the third and fourth files only
    assert sorted(report.groups[0].sources) == sorted(list(files)[2:])
    assert lake.merge_adjacent_files("main.d").files_created == 0
    expected = sorted(i for i in range(80) if i != 3 and not 20 <= i < 30)
    assert sorted(lake.scan("main.d").column("id").to_pylist()) == expected
    with attached(duck, catalog):
        assert sorted(r[0] for r in duck.execute("SELECT id FROM lake.main.d").fetchall()) == expected
    lake.close()
