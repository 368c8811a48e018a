"""Snapshot listings bounded in SQL: ``Lake.snapshots(limit=, since=)``, ``snapshots_table`` and the CLI's
``snapshots --limit N --since ID`` return what DuckDB's ``ducklake_snapshots()`` lists, cut as asked, and the
catalog returns only those rows; a limit below 1 or a negative id is a typed error, an id beyond the newest lists
nothing."""

from __future__ import annotations

import json
from typing import Any

import pytest

from pyspark_ducklake.__main__ import main
from pyspark_ducklake.exceptions import InvalidOptionError
from pyspark_ducklake.lake import Lake
from tests.support.bad_inputs import expect_bad_input
from tests.support.catalogs import CatalogLocation
from tests.support.duck import attached, connect_duckdb
from tests.support.history import Churn, History
from tests.support.query_count import counting


def _lake(catalog: CatalogLocation) -> tuple[Lake, int]:
    lake = Lake(catalog.url, catalog.data_path)
    history = History(lake, Churn(rows_per_commit=2, flush_every=9, merge_every=0))
    head = history.grow_to(40)
    history.close()
    return lake, head


def test_limit_and_since_cut_the_listing_in_sql(catalog: CatalogLocation) -> None:
    lake, head = _lake(catalog)
    every = [s.snapshot_id for s in lake.snapshots()]
    assert every == list(range(head + 1))

    def ids(**kw: Any) -> list[int]:
        with counting(lake.engine) as queries:
            listed = [s.snapshot_id for s in lake.snapshots(**kw)]
        assert queries.rows == len(listed), queries.summary()  # the database returned only these
        return listed

    assert ids(limit=5) == every[-5:]
    assert ids(since=30) == every[30:]
    assert ids(since=10, limit=3) == [10, 11, 12]
    assert ids(since=head) == [head]
    assert ids(since=head + 1) == [] and ids(since=10**12, limit=1) == []
    assert ids(limit=10**6) == every
    with attached(connect_duckdb(), catalog) as con:
        theirs = con.execute(
            "SELECT snapshot_id, changes, commit_extra_info FROM ducklake_snapshots('lake') ORDER BY 1 DESC LIMIT 4"
        ).fetchall()
    table = lake.snapshots_table(limit=4)
    ours = [(r["snapshot_id"], dict(r["changes"]), r["commit_extra_info"]) for r in table.to_pylist()]
    assert sorted(ours) == sorted(theirs)
    lake.close()


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"limit": 0}, "option limit must be >= 1, got 0"),
        ({"limit": -3}, "option limit must be >= 1, got -3"),
        ({"limit": True}, "could not parse option limit to an integer: True"),
        ({"since": -1}, "option since must be >= 0, got -1"),
        ({"since": 1.5}, "could not parse option since as a snapshot id: 1.5"),
        ({"since": "3"}, "as an int, not text"),
    ],
)
def test_bad_bounds_are_typed_errors(sqlite_catalog: CatalogLocation, kw: dict[str, Any], message: str) -> None:
    lake = Lake(sqlite_catalog.url, sqlite_catalog.data_path)
    if "must be >=" in message:
        with expect_bad_input("snapshot-listing-bounds", lake):
            lake.snapshots(**kw)
    with pytest.raises(InvalidOptionError, match=message):
        lake.snapshots(**kw)
    with pytest.raises(InvalidOptionError, match=message):
        lake.snapshots_table(**kw)
    lake.close()


def test_the_cli_lists_a_page(sqlite_catalog: CatalogLocation, capsys: Any) -> None:
    lake, head = _lake(sqlite_catalog)
    lake.close()
    url = sqlite_catalog.url

    def listed(*flags: str) -> list[int]:
        assert main(["--catalog", url, "snapshots", "--json", *flags]) == 0
        return [s["snapshot_id"] for s in json.loads(capsys.readouterr().out)]

    assert listed("--limit", "3") == [head - 2, head - 1, head]
    assert listed("--since", "5", "--limit", "2") == [5, 6]
    assert listed("--since", str(head + 1)) == []
    assert main(["--catalog", url, "snapshots", "--limit", "2"]) == 0
    assert [int(line.split("\t")[0]) for line in capsys.readouterr().out.splitlines()] == [head - 1, head]
    for bad in (["--limit", "0"], ["--limit", "-1"], ["--since", "-2"]):
        assert main(["--catalog", url, "snapshots", *bad]) == 2
        assert f"argument {bad[0]}" in capsys.readouterr().err
