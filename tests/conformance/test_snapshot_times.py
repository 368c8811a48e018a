"""Snapshots by time (time travel's ``timestamp``, a change feed's start and end times, a stream's
``startingTimestamp``) are found by the catalog database, not by reading every snapshot into Python, and find what
reading them all finds: also on SQLite, where the times are text in several spellings (DuckDB's ``+00``, ISO
``T...+00:00``, naive UTC, another offset)."""

from __future__ import annotations

import datetime as dt

from sqlalchemy import text, update

from pyspark_ducklake.catalog import reader
from pyspark_ducklake.catalog import tables as T
from pyspark_ducklake.exceptions import NoSuchSnapshotError
from pyspark_ducklake.lake import Lake
from tests.support.catalogs import CatalogLocation
from tests.support.history import Churn, History
from tests.support.query_count import counting

SPELLINGS = ["{:%Y-%m-%dT%H:%M:%S.%f}+00:00", "{:%Y-%m-%d %H:%M:%S.%f}", "{:%Y-%m-%d %H:%M:%S.%f}+00"]


def test_times_are_found_as_a_walk_over_every_snapshot_finds_them(catalog: CatalogLocation) -> None:
    lake = Lake(catalog.url, catalog.data_path)
    history = History(lake, Churn(rows_per_commit=2, flush_every=7, merge_every=0))
    history.grow_to(40)
    history.close()
    # a second apart, as a stream committing every second leaves them; on SQLite in other writers' spellings too
    # (and one +02 offset, which must still compare as the UTC time it is)
    start = dt.datetime(2026, 3, 1, 12, 0, tzinfo=dt.timezone.utc)
    s_table = T.ducklake_snapshot
    with lake.engine.begin() as conn:
        for s in range(lake.current_snapshot_id() + 1):
            when = start + dt.timedelta(seconds=s, microseconds=s)
            conn.execute(update(s_table).where(s_table.c.snapshot_id == s).values(snapshot_time=when))
            if catalog.backend == "sqlite" and s % 3 == 1:
                spelled = SPELLINGS[s % 3 - 1 if s % 9 else 2].format(when.replace(tzinfo=None))
                if s % 9 == 7:
                    spelled = (when + dt.timedelta(hours=2)).replace(tzinfo=None).isoformat(sep=" ") + "+02"
                conn.execute(
                    text("UPDATE ducklake_snapshot SET snapshot_time = :t WHERE snapshot_id = :s"),
                    {"t": spelled, "s": s},
                )
    every = [(s.snapshot_id, s.snapshot.snapshot_time) for s in lake.snapshots()]
    probes = sorted(
        {
            t + d
            for _, t in every
            if t is not None
            for d in (dt.timedelta(0), dt.timedelta(microseconds=1), -dt.timedelta(microseconds=1))
        }
    )
    probes += [every[0][1] - dt.timedelta(days=3), every[-1][1] + dt.timedelta(days=3)]  # type: ignore[operator]
    with lake.engine.connect() as conn:
        for when in probes:
            at = [s for s, t in every if t is not None and t <= when]
            try:
                found: int | None = reader.snapshot_at_time(conn, when).snapshot_id
            except NoSuchSnapshotError:
                found = None
            assert found == (at[-1] if at else None), when
            after = [s for s, t in every if t is not None and t >= when]
            first = reader.first_snapshot_from(conn, when)
            assert (first.snapshot_id if first else None) == (after[0] if after else None), when
    middle = every[20][1]
    assert middle is not None
    with counting(lake.engine) as queries:
        changes = lake.table_changes("main.stream", middle, every[-1][1])
    assert changes.num_rows > 0
    # the bounds' lookups read a page of 8 each, not every snapshot (as they did), then the range's
    assert queries.by_table()["ducklake_snapshot"] <= 8 + 8 + 2 * 21, queries.summary()
    assert lake.scan("main.stream", timestamp=middle).num_rows == lake.scan("main.stream", snapshot=20).num_rows
    lake.close()
