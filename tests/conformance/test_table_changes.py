"""The change feed (``pyspark_ducklake.table.change_feed``) against DuckDB's ``ducklake_table_changes``.

Randomized, seeded histories of one table written by DuckDB and by this library in turn: inlined and Parquet
inserts, deletes of inlined and Parquet rows (inlined deletes and delete files), UPDATEs, flushes, merges and
ADD COLUMN from both sides, appends, deletes and overwrites from ours.

* ``test_feed_equals_duckdb``: the feed equals DuckDB's row for row on random ranges. The generator keeps out of
  the situations where DuckDB 1.5.5 itself reports wrong rows (see the module doc of ``table/change_feed.py``): a
  plain delete file on a flushed or merged file, a second delete-file row for one data file, an overwrite of a
  file with inlined deletes, an inlined row updated (two versions of it flushed into one file), and
  ``ducklake_rewrite_data_files``.
* ``test_feed_equals_model``: with those situations allowed, each snapshot's feed is what the operation did to
  the rows (kept by the test, since DuckDB's own time travel goes wrong too once its flush merges into delete
  files this library ended), and a range's feed is the union of its snapshots' feeds.

Both generators also keep out of two DuckDB bugs that are not about the change feed: merge_adjacent_files drops
the row ids of a big UPDATE's file (the rows get new rowids), and rewrite_data_files fails after an ADD COLUMN.
"""

from __future__ import annotations

import datetime as dt
import itertools
import random
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pytest
from sqlalchemy import select

import pyspark_ducklake as pdl
from pyspark_ducklake.catalog import reader
from pyspark_ducklake.catalog import tables as T
from pyspark_ducklake.exceptions import InvalidOptionError, NoSuchSnapshotError, NoSuchTableError
from pyspark_ducklake.io.parquet import read_schema
from pyspark_ducklake.table.change_feed import (
    CHANGE_COLUMNS,
    change_counts,
    changed_snapshots,
    feed_schema,
    plan_changes,
    table_changes,
)
from pyspark_ducklake.table.change_feed_split import execute_part, split_plan
from pyspark_ducklake.table.scan import execute_file_task, plan_scan
from tests.support.compare import canonical
from tests.support.duck import attach_sql, connect_duckdb

LIMIT = 5  # inlining row limit of both writers
BASE = ("id", "v", "n")


@dataclass
class LiveFile:
    data_file_id: int
    ids: list[int]
    embedded: bool  # carries _ducklake_internal_snapshot_id (flushed or merged)
    moved_rows: bool  # carries _ducklake_internal_row_id but no snapshot ids, and a row_id_start (a big UPDATE)
    delete_rows: int  # ducklake_delete_file rows ever written for it
    live_delete: bool  # has a current delete file
    inlined_deletes: bool


class History:
    """Table ``main.t`` written by DuckDB and this library in turn, with random operations.

    ``states`` is the model: the table's rows (``id -> (v, n)``) after every snapshot, kept from what each
    operation did; ids are unique, so an id stands for a row.
    """

    def __init__(self, con: Any, catalog: Any, seed: int, *, clean: bool) -> None:
        self.catalog, self.rng, self.clean = catalog, random.Random(seed), clean
        self.con = con  # a DuckDB connection with the extensions loaded (loading them takes a second)
        self.con.execute(attach_sql(catalog, "lake", LIMIT))
        self.stale = False
        self.next_id = 0
        self.added = 0
        self.log: list[str] = []
        self.model: dict[int, tuple[str, int]] = {}
        self.duck().execute("CREATE TABLE lake.main.t (id BIGINT, v VARCHAR, n INTEGER)")
        self.lake = pdl.connect(catalog.url, data_inlining_row_limit=LIMIT)
        self.states: dict[int, dict[int, tuple[str, int]]] = {self.lake.current_snapshot_id(): {}}

    # --- connections -----------------------------------------------------------------------------------------
    def duck(self) -> Any:
        if self.stale:
            # DuckDB caches the catalog (for instance the inlined tables our flush drops): attach afresh.
            self.con.execute("DETACH lake")
            self.con.execute(attach_sql(self.catalog, "lake", LIMIT))
            self.stale = False
        return self.con

    def lib(self) -> pdl.Lake:
        self.stale = True
        return self.lake

    def close(self) -> None:
        self.con.execute("DETACH lake")
        self.lake.close()

    # --- state -----------------------------------------------------------------------------------------------
    def state(self) -> tuple[list[int], list[LiveFile]]:
        """Live inlined ids, and the data files (with their live ids) at the latest snapshot."""
        with self.lake.engine.connect() as conn:
            snap = reader.latest_snapshot(conn).snapshot_id
            entry = reader.table_by_name(conn, "main", "t", snap)
            plan = plan_scan(conn, entry, snap, self.lake.data_path, fmt=self.lake.info.format)
            x = T.ducklake_delete_file
            rows = Counter(r[0] for r in conn.execute(select(x.c.data_file_id).where(x.c.table_id == entry.table_id)))
        inlined = plan.inlined.data.column("id").to_pylist() if plan.inlined is not None else []
        files = []
        for task in plan.files:
            ids = execute_file_task(task, plan.schema).column("id").to_pylist()
            names = read_schema(task.file.path).names
            embedded = "_ducklake_internal_snapshot_id" in names
            moved = "_ducklake_internal_row_id" in names and not embedded and task.file.row_id_start is not None
            files.append(
                LiveFile(
                    task.file.data_file_id,
                    [i for i in ids if i in self.model],
                    embedded,
                    moved,
                    rows[task.file.data_file_id],
                    task.file.delete_file is not None,
                    bool(task.inlined_deleted_positions),
                )
            )
        return [i for i in inlined if i in self.model], files

    def new_rows(self, n: int) -> list[int]:
        first = self.next_id
        self.next_id += n
        return list(range(first, first + n))

    def pick(self, ids: list[int], lo: int, hi: int) -> list[int]:
        k = min(len(ids), self.rng.randint(lo, hi))
        return sorted(self.rng.sample(ids, k))

    def sql(self, statement: str, ids: list[int] | None = None) -> None:
        if ids is not None:
            statement = statement.replace("{ids}", ", ".join(map(str, ids)))
        self.duck().execute(statement)

    # --- operations (each updates the model) -------------------------------------------------------------------
    def duck_insert(self, big: bool) -> None:
        ids = self.new_rows(self.rng.randint(LIMIT + 1, LIMIT + 15) if big else self.rng.randint(1, LIMIT))
        self.sql(
            f"INSERT INTO lake.main.t (id, v, n) SELECT i, 'd' || i, (i % 7)::INTEGER FROM range({ids[0]}, {ids[-1] + 1}) r(i)"
        )
        self.model.update({i: (f"d{i}", i % 7) for i in ids})

    def duck_delete(self, ids: list[int]) -> None:
        if ids:
            self.sql("DELETE FROM lake.main.t WHERE id IN ({ids})", ids)
            for i in ids:
                del self.model[i]

    def duck_update(self, ids: list[int], big: bool) -> None:
        if not ids:
            return
        if big:
            self.sql("UPDATE lake.main.t SET v = v || 'U', n = n * 2 WHERE id IN ({ids})", ids)
            self.model.update({i: (self.model[i][0] + "U", self.model[i][1] * 2) for i in ids})
        else:
            self.sql("UPDATE lake.main.t SET v = v || 'u', n = n + 1 WHERE id IN ({ids})", ids)
            self.model.update({i: (self.model[i][0] + "u", self.model[i][1] + 1) for i in ids})

    def duck_delete_small(self) -> None:
        self.duck_delete(self.pick(sorted(self.model), 1, LIMIT))

    def duck_update_small(self) -> None:
        inlined, files = self.state()
        # Updating an inlined row keeps both versions inline; flushed into one file, DuckDB then reports both
        # deletions at one snapshot (it maps deleted rows to snapshots by rowid).
        self.duck_update(
            self.pick([i for f in files for i in f.ids] + ([] if self.clean else inlined), 1, LIMIT), False
        )

    def _big_target(self) -> LiveFile | None:
        _, files = self.state()
        # DuckDB writes a plain delete file for a file's first deletion: wrong snapshots on flushed/merged files.
        ok = [f for f in files if len(f.ids) > LIMIT and (not self.clean or not f.embedded or f.live_delete)]
        return self.rng.choice(ok) if ok else None

    def duck_delete_big(self) -> None:
        f = self._big_target()
        if f is not None:
            self.duck_delete(self.pick(f.ids, LIMIT + 1, len(f.ids)))

    def duck_update_big(self) -> None:
        f = self._big_target()
        if f is not None:
            self.duck_update(self.pick(f.ids, LIMIT + 1, len(f.ids)), True)

    def duck_flush(self) -> None:
        self.sql("CALL ducklake_flush_inlined_data('lake')")

    def duck_merge(self) -> None:
        _, files = self.state()
        # DuckDB merges a big UPDATE's file as if its row_id_start were right and drops its row ids: the rows
        # get new rowids (DuckDB's own reads too).
        if not any(f.moved_rows for f in files):
            self.sql("CALL ducklake_merge_adjacent_files('lake')")

    def duck_rewrite(self) -> None:
        # After an ADD COLUMN, DuckDB's rewrite fails on the older (empty) inlined-data table.
        if not self.added:
            self.sql("CALL ducklake_rewrite_data_files('lake', 't', delete_threshold => 0.0)")

    def duck_add_column(self) -> None:
        self.added += 1
        k = self.added
        self.sql(f"ALTER TABLE lake.main.t ADD COLUMN {f'c{k} INTEGER DEFAULT {k * 10}' if k % 2 else f'c{k} VARCHAR'}")

    def lib_rows(self, n: int) -> pa.Table:
        ids = self.new_rows(n)
        return pa.table(
            {
                "id": pa.array(ids, pa.int64()),
                "v": [f"p{i}" for i in ids],
                "n": pa.array([i % 5 for i in ids], pa.int32()),
            }
        )

    def lib_append(self, big: bool) -> None:
        rows = self.lib_rows(self.rng.randint(LIMIT + 1, LIMIT + 15) if big else self.rng.randint(1, LIMIT))
        self.lib().append("main.t", rows)
        self.model.update({r["id"]: (r["v"], r["n"]) for r in rows.to_pylist()})

    def lib_delete(self) -> None:
        inlined, files = self.state()
        # A second delete file for one data file makes DuckDB repeat earlier deletions.
        ok = [f for f in files if f.ids and (not self.clean or (not f.embedded and f.delete_rows == 0))]
        ids = self.pick(inlined + [i for f in self.rng.sample(ok, min(2, len(ok))) for i in f.ids], 1, 8)
        if ids:
            self.lib().delete("main.t", [("id", "in", ids)])
            for i in ids:
                del self.model[i]

    def lib_overwrite(self) -> None:
        _, files = self.state()
        if self.clean and any(f.inlined_deletes for f in files):
            return  # DuckDB loses or repeats the deletes of an ended file that has inlined deletes
        rows = self.lib_rows(self.rng.choice([3, LIMIT + 4]))
        self.lib().overwrite("main.t", rows)
        self.model = {r["id"]: (r["v"], r["n"]) for r in rows.to_pylist()}

    def lib_flush(self) -> None:
        self.lib().flush_inlined_data("main.t")

    def lib_add_column(self) -> None:
        self.added += 1
        k = self.added
        self.lib().add_column("main.t", f"c{k}", pa.int32(), default=k * 10 if k % 2 else None)

    def step(self) -> None:
        ops: dict[str, tuple[float, Any]] = {
            "duck_insert_small": (2, lambda: self.duck_insert(big=False)),
            "duck_insert_big": (2, lambda: self.duck_insert(big=True)),
            "duck_delete_small": (2, self.duck_delete_small),
            "duck_update_small": (1.5, self.duck_update_small),
            "duck_delete_big": (1.5, self.duck_delete_big),
            "duck_update_big": (0.7, self.duck_update_big),
            "duck_flush": (1, self.duck_flush),
            "duck_merge": (0.8, self.duck_merge),
            "duck_add_column": (0.4, self.duck_add_column),
            "lib_append_small": (1.5, lambda: self.lib_append(big=False)),
            "lib_append_big": (1.5, lambda: self.lib_append(big=True)),
            "lib_delete": (2, self.lib_delete),
            "lib_overwrite": (0.5, self.lib_overwrite),
            "lib_flush": (0.8, self.lib_flush),
            "lib_add_column": (0.4, self.lib_add_column),
        }
        if not self.clean:
            ops["duck_rewrite"] = (0.8, self.duck_rewrite)
        name = self.rng.choices(list(ops), [w for w, _ in ops.values()])[0]
        ops[name][1]()
        self.record(name)

    def record(self, name: str) -> None:
        """Remember the model's rows at the operation's snapshot (operations that changed nothing made none)."""
        snapshot = self.lake.current_snapshot_id()
        if snapshot not in self.states:
            self.states[snapshot] = dict(self.model)
            self.log.append(f"{snapshot}:{name}")

    def snapshots(self) -> list[int]:
        return [r[0] for r in self.duck().execute("SELECT snapshot_id FROM lake.snapshots() ORDER BY 1").fetchall()]

    # --- feeds -----------------------------------------------------------------------------------------------
    def duck_feed(self, start: int, end: int) -> Counter[tuple[Any, ...]]:
        t = (
            self.duck()
            .execute(f"SELECT * FROM ducklake_table_changes('lake', 'main', 't', {start}, {end})")
            .to_arrow_table()
        )
        return Counter(tuple(canonical(v) for v in r.values()) for r in t.to_pylist())

    def our_feed(self, start: int, end: int, columns: tuple[str, ...] | None = None) -> Counter[tuple[Any, ...]]:
        return self._counted(
            table_changes(self.lake.engine, self.lake.data_path, "main", "t", start, end, fmt=self.lake.info.format),
            columns,
        )

    def parts_feed(self, start: int, end: int, columns: tuple[str, ...] | None = None) -> Counter[tuple[Any, ...]]:
        """The feed as Spark's readers get it: cut into parts of one file each, decided before any is read."""
        with self.lake.engine.connect() as conn:
            table = reader.table_by_name(conn, "main", "t", end)
            plan = plan_changes(conn, table, start, end, self.lake.data_path, fmt=self.lake.info.format)
        tables = [t for part in split_plan(plan, target_rows=1) for t in execute_part(part)]
        return self._counted(pa.concat_tables(tables) if tables else feed_schema(plan.schema).empty_table(), columns)

    def _counted(self, t: pa.Table, columns: tuple[str, ...] | None) -> Counter[tuple[Any, ...]]:
        cols = [c for c in t.column_names if c not in CHANGE_COLUMNS] if columns is None else list(columns)
        t = t.select(["_snapshot_id", "_rowid", "_change_type", *cols])
        return Counter(tuple(canonical(v) for v in r.values()) for r in t.to_pylist())


def _diff(a: Counter[Any], b: Counter[Any]) -> str:
    return f"ours only: {sorted((a - b).elements(), key=repr)[:6]}\nduckdb only: {sorted((b - a).elements(), key=repr)[:6]}"


@pytest.fixture(scope="module")
def duck() -> Iterator[Any]:
    """One DuckDB connection with the extensions loaded, shared by the tests (each attaches its own lake)."""
    con = connect_duckdb()
    # Under load, DuckDB's multi-threaded deletion scan now and then tags rows of a delete file with the file's
    # begin_snapshot instead of their own snapshot ids; one thread keeps the reference deterministic.
    con.execute("SET threads = 1")
    yield con
    con.close()


def _build(con: Any, catalog: Any, seed: int, *, clean: bool, ops: int) -> History:
    h = History(con, catalog, seed, clean=clean)
    try:
        h.duck_insert(big=True)
        h.record("duck_insert_big")
        h.duck_insert(big=False)
        h.record("duck_insert_small")
        for _ in range(ops):
            h.step()
    except BaseException:
        h.close()
        raise
    return h


@pytest.mark.parametrize("seed", [11, 23])
def test_feed_equals_duckdb(duck: Any, catalog: Any, seed: int) -> None:
    h = _build(duck, catalog, seed, clean=True, ops=15)
    try:
        snaps = [s for s in h.snapshots() if s >= 1]
        last = snaps[-1]
        rng = random.Random(seed)
        ranges = {(1, last), (last, last), (snaps[len(snaps) // 2], last)}
        while len(ranges) < 10:
            a, b = sorted(rng.sample(snaps, 2))
            ranges.add((a, b))
        for start, end in sorted(ranges):
            ours, theirs = h.our_feed(start, end), h.duck_feed(start, end)
            assert ours == theirs, f"[{start}, {end}] after {h.log}\n{_diff(ours, theirs)}"
            parts = h.parts_feed(start, end)
            assert parts == theirs, f"parts [{start}, {end}] after {h.log}\n{_diff(parts, theirs)}"
        # The streaming helpers agree with the feed. changed_snapshots may name a few more: DuckDB records a flush
        # of inlined deletes alone as deleted_from_table (no inline_flush).
        full = table_changes(h.lake.engine, h.lake.data_path, "main", "t", 1, last, fmt=h.lake.info.format)
        changed = changed_snapshots(h.lake.engine, 1, 1, last)
        assert set(full.column("_snapshot_id").to_pylist()) <= set(changed)
        made = h.duck().execute(
            "SELECT snapshot_id, changes_made FROM __ducklake_metadata_lake.ducklake_snapshot_changes"
        )
        maintenance = {s for s, c in made.fetchall() if "inline_flush" in c or "merge_adjacent" in c}
        assert not set(changed) & maintenance
        for start, end in [(1, last), sorted(rng.sample(snaps, 2))]:
            kinds: Counter[str] = Counter()
            for row, n in h.duck_feed(start, end).items():
                kinds[row[2]] += n  # DuckDB's columns: snapshot_id, rowid, change_type, ...
            assert change_counts(
                h.lake.engine, h.lake.data_path, "main", "t", start, end, fmt=h.lake.info.format
            ) == dict(kinds)
    finally:
        h.close()


@pytest.mark.parametrize("seed", [5])
def test_feed_equals_model(duck: Any, sqlite_catalog: Any, seed: int) -> None:
    """Also where DuckDB's own feed is wrong, each snapshot's feed is what the operation did to the rows, and a
    range's feed is the union of its snapshots' feeds."""
    # One backend: the semantics do not depend on it (test_feed_equals_duckdb covers both catalogs).
    h = _build(duck, sqlite_catalog, seed, clean=False, ops=16)
    try:
        snaps = sorted(h.states)
        per_snapshot: dict[int, Counter[tuple[Any, ...]]] = {}
        rowids: dict[int, int] = {}
        for before, s in itertools.pairwise(snaps):
            old_rows, new_rows = h.states[before], h.states[s]
            expected: Counter[tuple[Any, ...]] = Counter()
            for i in old_rows.keys() | new_rows.keys():
                old, new = old_rows.get(i), new_rows.get(i)
                if old == new:
                    continue
                if old is not None and new is not None:
                    expected.update([(s, "update_preimage", i, *old), (s, "update_postimage", i, *new)])
                elif old is not None:
                    expected[(s, "delete", i, *old)] += 1
                else:
                    expected[(s, "insert", i, *new)] += 1
            feed = table_changes(h.lake.engine, h.lake.data_path, "main", "t", s, s, fmt=h.lake.info.format)
            ours = Counter(
                zip(
                    feed.column("_snapshot_id").to_pylist(),
                    feed.column("_change_type").to_pylist(),
                    *[feed.column(c).to_pylist() for c in BASE],
                    strict=False,
                )
            )
            assert ours == expected, f"snapshot {s} after {h.log}\n{_diff(ours, expected)}"
            for i, r in zip(feed.column("id").to_pylist(), feed.column("_rowid").to_pylist(), strict=False):
                assert rowids.setdefault(i, r) == r, f"id {i} has rowids {rowids[i]} and {r}"
            per_snapshot[s] = h.our_feed(s, s, BASE)
            assert h.parts_feed(s, s, BASE) == per_snapshot[s], f"parts of snapshot {s} after {h.log}"
        rng = random.Random(seed)
        for _ in range(6):
            a, b = sorted(rng.sample(snaps[1:], 2))
            union = sum((per_snapshot[s] for s in snaps if a <= s <= b), Counter())
            assert h.our_feed(a, b, BASE) == union, f"[{a}, {b}] after {h.log}"
            assert h.parts_feed(a, b, BASE) == union, f"parts [{a}, {b}] after {h.log}"
    finally:
        h.close()


# --- edge cases --------------------------------------------------------------------------------------------------


def _small_lake(catalog: Any) -> tuple[pdl.Lake, dict[str, int]]:
    lake = pdl.connect(catalog.url, catalog.data_path, data_inlining_row_limit=LIMIT)
    lake.create_table("main.t", pa.schema([("id", pa.int64()), ("v", pa.string())]))
    snaps = {"append": lake.append("main.t", pa.table({"id": pa.array([1, 2, 3], pa.int64()), "v": ["a", "b", "c"]}))}
    snaps["delete"] = lake.delete("main.t", [("id", "=", 2)])
    flushed = lake.flush_inlined_data("main.t")
    assert flushed is not None
    snaps["flush"] = flushed
    lake.add_column("main.t", "w", pa.int32(), default=9)
    snaps["alter"] = lake.current_snapshot_id()
    return lake, snaps


def test_edge_cases(sqlite_catalog: Any) -> None:
    lake, snaps = _small_lake(sqlite_catalog)
    feed = lambda a, b: table_changes(lake.engine, lake.data_path, "main", "t", a, b, fmt=lake.info.format)  # noqa: E731

    full = feed(snaps["append"], snaps["alter"])
    assert full.column_names == ["id", "v", "w", *CHANGE_COLUMNS]
    assert full.schema.field("_commit_timestamp").type == pa.timestamp("us", tz="UTC")
    assert [(r["_snapshot_id"], r["_rowid"], r["_change_type"], r["id"], r["w"]) for r in full.to_pylist()] == [
        (snaps["append"], 0, "insert", 1, 9),
        (snaps["append"], 1, "insert", 2, 9),
        (snaps["append"], 2, "insert", 3, 9),
        (snaps["delete"], 1, "delete", 2, 9),
    ]
    times = {s.snapshot_id: s.snapshot.snapshot_time for s in lake.snapshots()}
    assert [t.astimezone(dt.timezone.utc) for t in full.column("_commit_timestamp").to_pylist()] == [
        times[s] for s in full.column("_snapshot_id").to_pylist()
    ]
    # A range holding only a flush (and an ALTER): empty, in the end snapshot's columns.
    only_flush = feed(snaps["flush"], snaps["flush"])
    assert only_flush.num_rows == 0 and only_flush.column_names == ["id", "v", *CHANGE_COLUMNS]
    flush_and_alter = feed(snaps["flush"], snaps["alter"])
    assert flush_and_alter.num_rows == 0 and flush_and_alter.schema == full.schema
    assert changed_snapshots(lake.engine, 1, 0, snaps["alter"]) == [snaps["append"], snaps["delete"]]
    assert changed_snapshots(lake.engine, 1, snaps["flush"], snaps["alter"]) == []
    assert changed_snapshots(lake.engine, 1, 5, 2) == []
    # Time bounds: the snapshots committed within them.
    by_time = table_changes(
        lake.engine, lake.data_path, "main", "t", times[snaps["delete"]], times[snaps["alter"]], fmt=lake.info.format
    )
    assert by_time.column("_change_type").to_pylist() == ["delete"]

    with pytest.raises(InvalidOptionError, match="after its end"):
        feed(snaps["delete"], snaps["append"])
    with pytest.raises(NoSuchSnapshotError, match="999"):
        feed(snaps["append"], 999)
    with pytest.raises(NoSuchTableError):
        table_changes(
            lake.engine, lake.data_path, "main", "nope", snaps["append"], snaps["alter"], fmt=lake.info.format
        )
    with pytest.raises(NoSuchTableError):
        feed(0, 0)  # before the table was created
    lake.close()


def test_flush_only_range_is_empty_for_duckdb_too(duck: Any, catalog: Any) -> None:
    """DuckDB's flush (which also turns inlined deletes into delete files) changes nothing logically either."""
    con = duck
    con.execute(attach_sql(catalog, "lake", LIMIT))
    try:
        con.execute("CREATE TABLE lake.main.t (id BIGINT, v VARCHAR)")
        con.execute("INSERT INTO lake.main.t SELECT i, 'x' FROM range(20) r(i)")
        con.execute("INSERT INTO lake.main.t VALUES (100, 'i'), (101, 'j')")
        con.execute("DELETE FROM lake.main.t WHERE id IN (3, 100)")  # an inlined delete and an ended inlined row
        con.execute("CALL ducklake_flush_inlined_data('lake')")
        flush = con.execute("SELECT max(snapshot_id) FROM lake.snapshots()").fetchone()[0]
        assert (
            con.execute(
                f"SELECT count(*) FROM ducklake_table_changes('lake', 'main', 't', {flush}, {flush})"
            ).fetchone()[0]
            == 0
        )
    finally:
        con.execute("DETACH lake")
    lake = pdl.connect(catalog.url)
    assert table_changes(lake.engine, lake.data_path, "main", "t", flush, flush, fmt=lake.info.format).num_rows == 0
    assert flush not in changed_snapshots(lake.engine, 1, 0, flush)
    assert (
        sum(change_counts(lake.engine, lake.data_path, "main", "t", 2, flush, fmt=lake.info.format).values())
        == 20 + 2 + 2
    )
    lake.close()


def test_every_type_through_the_feed(duck: Any, catalog: Any) -> None:
    """All column types, nested ones included, as inserts, deletes and updates, inlined and in Parquet, across
    ADD/RENAME/retype/DROP COLUMN, a flush and a merge: equal to DuckDB's feed."""
    from tests.conformance.test_duckdb_writes_we_read import BROAD_DDL, broad_insert

    con = duck
    con.execute(attach_sql(catalog, "lake", 10))
    try:
        for sql in [
            BROAD_DDL,
            broad_insert(0, 5),  # inlined
            broad_insert(5, 60),  # Parquet
            "DELETE FROM lake.main.t WHERE id IN (1, 10, 11)",  # an inlined row, inlined deletes of Parquet rows
            "DELETE FROM lake.main.t WHERE id BETWEEN 30 AND 45",  # a delete file
            "UPDATE lake.main.t SET s = 'updated', i32 = -1 WHERE id IN (2, 20)",
            "ALTER TABLE lake.main.t ADD COLUMN extra VARCHAR DEFAULT 'dflt'",
            "INSERT INTO lake.main.t (id, extra) VALUES (500, 'new'), (501, NULL)",
            "ALTER TABLE lake.main.t RENAME COLUMN s TO label",
            "ALTER TABLE lake.main.t ALTER COLUMN i32 TYPE BIGINT",
            "ALTER TABLE lake.main.t DROP COLUMN u16",
            "CALL ducklake_flush_inlined_data('lake')",
            "DELETE FROM lake.main.t WHERE id IN (3, 500, 50)",
        ]:
            con.execute(sql)
        last = con.execute("SELECT max(snapshot_id) FROM lake.snapshots()").fetchone()[0]
        lake = pdl.connect(catalog.url)
        for start, end in [(1, last), (2, 6), (4, 8), (7, last), (last - 1, last)]:
            t = con.execute(f"SELECT * FROM ducklake_table_changes('lake', 'main', 't', {start}, {end})")
            theirs = Counter(tuple(canonical(v) for v in r.values()) for r in t.to_arrow_table().to_pylist())
            feed = table_changes(lake.engine, lake.data_path, "main", "t", start, end, fmt=lake.info.format)
            cols = [c for c in feed.column_names if c not in CHANGE_COLUMNS]
            feed = feed.select(["_snapshot_id", "_rowid", "_change_type", *cols])
            ours = Counter(tuple(canonical(v) for v in r.values()) for r in feed.to_pylist())
            assert ours == theirs, f"[{start}, {end}]\n{_diff(ours, theirs)}"
        lake.close()
    finally:
        con.execute("DETACH lake")
