"""Every table of a lake at every snapshot, and ``ducklake_table_changes`` over every range: the build's answers
against this library's reads, compared as multisets of canonical rows (``tests/support/compare.py``)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

import duckdb
import pyarrow as pa
from sqlalchemy import create_engine, text

import pyspark_ducklake as pdl
from pyspark_ducklake.duckdb_attach import sql_identifier, sql_string
from pyspark_ducklake.table.change_feed import CHANGE_COLUMNS
from tests.support.compare import canonical

FEED = ["_snapshot_id", "_rowid", "_change_type"]
_FOREVER = 1 << 62


@dataclass(frozen=True)
class TableLife:
    """A table under one name: its id and the snapshots (that still exist) at which it had that name."""

    table_id: int
    schema: str
    name: str
    snapshots: tuple[int, ...]

    @property
    def sql_name(self) -> str:
        return f"lake.{sql_identifier(self.schema)}.{sql_identifier(self.name)}"

    def ranges(self) -> list[tuple[int, int]]:
        return [(a, b) for i, a in enumerate(self.snapshots) for b in self.snapshots[i:]]


def table_lives(catalog_url: str) -> list[TableLife]:
    """Every table (dropped ones too) of the catalog under each of its names, with the snapshots it lived through."""
    engine = create_engine(catalog_url)
    try:
        with engine.connect() as conn:
            snapshots = [int(r[0]) for r in conn.execute(text("SELECT snapshot_id FROM ducklake_snapshot"))]
            rows = conn.execute(
                text(
                    "SELECT t.table_id, s.schema_name, t.table_name, t.begin_snapshot, t.end_snapshot "
                    "FROM ducklake_table t JOIN ducklake_schema s ON s.schema_id = t.schema_id "
                    "ORDER BY t.table_id, t.begin_snapshot"
                )
            ).all()
    finally:
        engine.dispose()
    lives: dict[tuple[int, str, str], list[int]] = {}
    for table_id, schema, name, begin, end in rows:
        stop = _FOREVER if end is None else int(end)
        alive = [s for s in snapshots if int(begin) <= s < stop]
        lives.setdefault((int(table_id), str(schema), str(name)), []).extend(alive)
    return [TableLife(k[0], k[1], k[2], tuple(sorted(set(v)))) for k, v in lives.items() if v]


def questions(lives: list[TableLife], *, feed: bool = True) -> dict[str, str]:
    """The build's questions: ``read_<id>_<name index>_<snapshot>`` and ``changes_<...>_<end>`` (all starts, in
    ``_start``), and ``table_info`` (``ducklake_table_info``: each table's files and delete files, counted)."""
    out: dict[str, str] = {"table_info": "SELECT * FROM ducklake_table_info('lake')"}
    for n, life in enumerate(lives):
        for s in life.snapshots:
            out[f"read_{n}_{s}"] = f"SELECT rowid, snapshot_id, * FROM {life.sql_name} AT (VERSION => {s})"
        if not feed:
            continue
        for end in life.snapshots:
            parts = [
                f"SELECT {start} AS _start, * FROM ducklake_table_changes('lake', {sql_string(life.schema)}, "
                f"{sql_string(life.name)}, {start}, {end})"
                for start in life.snapshots
                if start <= end
            ]
            out[f"changes_{n}_{end}"] = " UNION ALL ".join(parts)
    return out


def rewrite_snapshots(lake: pdl.Lake) -> dict[int, set[int]]:
    """``{table_id: snapshots}`` of each table's ``rewrite_delete`` snapshots (``ducklake_rewrite_data_files``)."""
    out: dict[int, set[int]] = {}
    for info in lake.snapshots():
        for table_id in info.changes.rewrite_delete:
            out.setdefault(int(table_id), set()).add(info.snapshot_id)
    return out


def backdated_snapshots(catalog_url: str, life: TableLife) -> set[int]:
    """The table's snapshots at which a data file has two delete files visible: DuckDB's flush of the inlined
    deletes of a file a rewrite ended meanwhile writes the second, begun at the deletes' snapshot (DuckDB 1.5.5 and
    the 1.1 build alike). The build then reads only it there and shows rows deleted or updated before; we read the
    union (``tests/conformance/test_backdated_delete_files.py`` checks ours against what DuckDB showed while those
    snapshots were the newest)."""
    engine = create_engine(catalog_url)
    try:
        with engine.connect() as conn:
            rows = conn.execute(
                text("SELECT data_file_id, begin_snapshot, end_snapshot FROM ducklake_delete_file WHERE table_id = :t"),
                {"t": life.table_id},
            ).all()
    finally:
        engine.dispose()
    out = set()
    for s in life.snapshots:
        visible = Counter(int(f) for f, b, e in rows if int(b) <= s < (_FOREVER if e is None else int(e)))
        if any(n > 1 for n in visible.values()):
            out.add(s)
    return out


def without_rewrite_updates(feed: Counter[tuple[Any, ...]], rewrites: set[int]) -> Counter[tuple[Any, ...]]:
    """DuckDB's feed without the ``update_preimage``/``update_postimage`` pair of equal values it reports for every
    row ``ducklake_rewrite_data_files`` rewrote (DuckDB 1.5.5 and the 1.1 build alike; ``table/change_feed.py``
    lists it among DuckDB's reports this library does not copy). Rows are ``(snapshot, rowid, change_type,
    *values)``."""
    pairs: dict[tuple[Any, ...], dict[str, tuple[Any, ...]]] = {}
    for row in feed:
        if row[0] in rewrites and row[2] in ("update_preimage", "update_postimage"):
            pairs.setdefault((row[0], row[1]), {})[row[2]] = row
    out = Counter(feed)
    for pair in pairs.values():
        pre, post = pair.get("update_preimage"), pair.get("update_postimage")
        if pre is not None and post is not None and pre[3:] == post[3:] and feed[pre] == feed[post] == 1:
            del out[pre], out[post]
    return out


def with_updates_paired(feed: Counter[tuple[Any, ...]]) -> Counter[tuple[Any, ...]]:
    """DuckDB's feed with an ``insert`` relabelled ``update_postimage`` where the same snapshot has an
    ``update_preimage`` of its rowid and no postimage: DuckDB's ``ducklake_table_changes`` pairs insertions and
    deletions in two joins, and the 1.1 build's ``ducklake_table_deletions`` loses rows of a puffin file of several
    snapshots under a filter on ``snapshot_id`` (``WHERE snapshot_id = 5`` finds none, on its own lakes too), so
    one join pairs them and the other does not."""
    labels: dict[tuple[Any, Any], set[str]] = {}
    for row in feed:
        labels.setdefault((row[0], row[1]), set()).add(row[2])
    out: Counter[tuple[Any, ...]] = Counter()
    for row, n in feed.items():
        kinds = labels[(row[0], row[1])]
        if row[2] == "insert" and "update_preimage" in kinds and "update_postimage" not in kinds:
            row = (row[0], row[1], "update_postimage", *row[3:])
        out[row] += n
    return out


def without_rows_ended_twice(
    ours: Counter[tuple[Any, ...]], theirs: Counter[tuple[Any, ...]]
) -> tuple[Counter[tuple[Any, ...]], Counter[tuple[Any, ...]]]:
    """Both feeds without the rows whose rowid ends twice or more in the range (in ours): DuckDB maps a data file's
    deleted positions to snapshots by rowid, so where a file holds several versions of one row (an inlined row
    updated twice, then flushed) it reports each of their deletions at one snapshot (DuckDB 1.5.5 and the 1.1 build
    alike, on its own lakes too; ``table/change_feed.py`` lists it). Ranges that end such a row once compare it."""
    ended = Counter(r[1] for r in ours.elements() if r[2] in ("delete", "update_preimage"))
    twice = {rowid for rowid, n in ended.items() if n > 1}
    if not twice:
        return ours, theirs
    return _without(ours, twice), _without(theirs, twice)


def updated_at_insert(ours: Counter[tuple[Any, ...]], theirs: Counter[tuple[Any, ...]]) -> set[Any]:
    """The rowids DuckDB reports as an update of equal values at the snapshot that inserted them (where ours, over
    the table's whole life, has the insert): a plain delete file on a data file whose rows carry their own
    snapshots (flush or merge output) is reported at each row's insert snapshot (as an update there when the range
    holds it, else as a delete dated before the range) and not at its own: DuckDB 1.5.5 and the 1.1 build alike, on
    their own lakes too (DuckDB writes such delete files itself); ``table/change_feed.py`` lists it. Their feed is
    left out of every range of the table (their rows are compared at every snapshot)."""
    inserted = {(r[0], r[1]) for r in ours if r[2] == "insert"}
    return {key[1] for key in _equal_update_pairs(theirs) if key in inserted}


def _equal_update_pairs(feed: Counter[tuple[Any, ...]]) -> dict[tuple[Any, Any], tuple[Any, ...]]:
    """``{(snapshot, rowid): pre-image}`` of the update pairs whose pre- and post-image hold the same values."""
    pairs: dict[tuple[Any, Any], dict[str, tuple[Any, ...]]] = {}
    for row in feed:
        if row[2] in ("update_preimage", "update_postimage"):
            pairs.setdefault((row[0], row[1]), {})[row[2]] = row
    return {
        key: pair["update_preimage"]
        for key, pair in pairs.items()
        if len(pair) == 2 and pair["update_preimage"][3:] == pair["update_postimage"][3:]
    }


def _without(feed: Counter[tuple[Any, ...]], rowids: set[Any]) -> Counter[tuple[Any, ...]]:
    return Counter({r: n for r, n in feed.items() if r[1] not in rowids})


def _rows(table: pa.Table) -> Counter[tuple[Any, ...]]:
    return Counter(tuple(canonical(v) for v in r.values()) for r in table.to_pylist())


def _diff(ours: Counter[tuple[Any, ...]], theirs: Counter[tuple[Any, ...]]) -> str:
    only_ours, only_theirs = ours - theirs, theirs - ours
    return f"{sum(only_ours.values())} rows only ours {list(only_ours)[:3]}, {sum(only_theirs.values())} only theirs {list(only_theirs)[:3]}"


def differences(
    lake: pdl.Lake, answers: duckdb.DuckDBPyConnection, lives: list[TableLife], *, feed: bool = True
) -> list[str]:
    """Where this library's reads differ from the build's answers (empty: none)."""
    out: list[str] = []
    theirs_info = answers.execute("SELECT * FROM table_info").to_arrow_table()
    ours_info = _rows(lake.table_info().select(theirs_info.column_names))
    if ours_info != _rows(theirs_info):
        out.append(f"table_info: {_diff(ours_info, _rows(theirs_info))}")
    rewrites = rewrite_snapshots(lake) if feed else {}
    for n, life in enumerate(lives):
        ident = (life.schema, life.name)
        backdated = backdated_snapshots(lake.location.url, life)
        resurrected: set[Any] = set()  # rowids the build shows again at those snapshots: their feed is left out
        for s in life.snapshots:
            theirs = answers.execute(f"SELECT * FROM read_{n}_{s}").to_arrow_table()
            columns = [c for c in theirs.column_names if c not in ("rowid", "snapshot_id")]
            try:
                ours = lake.scan(ident, snapshot=s, columns=[*columns, "rowid", "snapshot_id"])
            except Exception as e:  # a difference to report, with the others
                out.append(f"{life.schema}.{life.name} at {s}: we fail: {type(e).__name__}: {e}")
                continue
            a, b = _rows(ours.select(["rowid", "snapshot_id", *columns])), _rows(theirs)
            if s in backdated:  # the build's read is known to add rows back; it must not lack any of ours
                resurrected |= {row[0] for row in b - a}
                if a - b:
                    out.append(f"{life.schema}.{life.name} at {s} (backdated delete file): {_diff(a, b)}")
                continue
            if a != b:
                out.append(f"{life.schema}.{life.name} at {s}: {_diff(a, b)}")
        if not feed:
            continue
        first, last = life.snapshots[0], life.snapshots[-1]
        try:
            whole = _feeds(lake, answers, n, life, first, last, rewrites.get(life.table_id, set()))
        except Exception as e:  # a difference to report, with the others
            out.append(f"{life.schema}.{life.name} feed [{first}, {last}]: we fail: {type(e).__name__}: {e}")
            continue
        skipped = updated_at_insert(*whole) | resurrected
        for end in life.snapshots:
            for start in (s for s in life.snapshots if s <= end):
                try:
                    a, b = _feeds(lake, answers, n, life, start, end, rewrites.get(life.table_id, set()))
                except Exception as e:
                    out.append(f"{life.schema}.{life.name} feed [{start}, {end}]: we fail: {type(e).__name__}: {e}")
                    continue
                a, b = _without(a, skipped), _without(b, skipped)
                if a != b:
                    out.append(f"{life.schema}.{life.name} feed [{start}, {end}]: {_diff(a, b)}")
    return out


def _feeds(
    lake: pdl.Lake,
    answers: duckdb.DuckDBPyConnection,
    n: int,
    life: TableLife,
    start: int,
    end: int,
    rewrites: set[int],
) -> tuple[Counter[tuple[Any, ...]], Counter[tuple[Any, ...]]]:
    """Our feed and the build's over ``[start, end]``, each ``(snapshot, rowid, change_type, *values)``, without
    what DuckDB is known to report differently in a range (see the functions above)."""
    theirs = answers.execute(
        f"SELECT * EXCLUDE (_start) FROM changes_{n}_{end} WHERE _start = {start}"
    ).to_arrow_table()
    got = lake.table_changes((life.schema, life.name), start, end)
    data = [c for c in got.column_names if c not in CHANGE_COLUMNS]
    return without_rows_ended_twice(
        _rows(got.select([*FEED, *data])),
        without_rewrite_updates(with_updates_paired(_rows(theirs)), rewrites),
    )


__all__ = ["TableLife", "differences", "questions", "table_lives"]
