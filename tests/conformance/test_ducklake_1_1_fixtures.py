"""DuckLake 1.1 lakes written by DuckDB's own 1.1 build read exactly here: every table at every snapshot, and the
change feed over every range, equal DuckDB's answers recorded when the lake was written.

The lakes (``tests/fixtures/ducklake_1_1/``, written by ``scripts/ducklake_1_1_fixtures.py`` with DuckLake's
development build of 1.1, ``1.1-dev1``) hold what 1.1 changed: the inlined tables' ``_ducklake_`` system columns and a
user column named ``row_id``, ``row_group_count``, puffin files with several cumulative deletion vectors, the
``epoch_*`` and ``bucket`` partition transforms, view column comments. Each is read as written (a DuckDB-file
catalog) and after its rows were moved into a SQLite and a PostgreSQL catalog, as DuckDB would hold them there.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pytest

import pyspark_ducklake as pdl
from pyspark_ducklake.table.change_feed import CHANGE_COLUMNS
from tests.support.catalogs import CatalogLocation
from tests.support.compare import canonical
from tests.support.duck import connect_duckdb
from tests.support.fixture_lakes import FIXTURES, FixtureLake, open_fixture

SCENARIOS = sorted(p.parent.name for p in (FIXTURES / "ducklake_1_1").glob("*/manifest.json"))


def _rows(table: pa.Table) -> Counter[tuple[Any, ...]]:
    return Counter(tuple(canonical(v) for v in r.values()) for r in table.to_pylist())


def _check_lake(fixture: FixtureLake, version: str | None = None, *, every_range: bool = True) -> None:
    """Every table at every snapshot, and its feed over every range (else over ``[first, end]`` and ``[end, end]``
    for each end: the other backends decode the same rows through the same plans)."""
    lake = fixture.connect()
    answers = fixture.answers()
    try:
        if version is None:
            (version,) = answers.execute("SELECT value FROM rows_ducklake_metadata WHERE key = 'version'").fetchone()
        assert lake.format_version == version
        for table, (first, last) in fixture.manifest["tables"].items():
            for snapshot in range(first, last + 1):
                theirs = answers.execute(f"SELECT * FROM read_{table}_{snapshot}").to_arrow_table()
                columns = [c for c in theirs.column_names if c not in ("rowid", "snapshot_id")]
                ours = lake.scan(f"main.{table}", snapshot=snapshot, columns=[*columns, "rowid", "snapshot_id"])
                ours = ours.select(["rowid", "snapshot_id", *columns])
                assert _rows(ours) == _rows(theirs), f"{fixture.manifest['scenario']}: {table} at {snapshot}"
            for end in range(first, last + 1):
                theirs = answers.execute(f"SELECT * FROM changes_{table}_{end}").to_arrow_table()
                for start in range(first, end + 1) if every_range else sorted({first, end}):
                    want = theirs.filter(pa.compute.equal(theirs.column("_start"), start)).drop(["_start"])
                    feed = lake.table_changes(f"main.{table}", start, end)
                    data = [c for c in feed.column_names if c not in CHANGE_COLUMNS]
                    got = feed.select(["_snapshot_id", "_rowid", "_change_type", *data])
                    assert _rows(got) == _rows(want), f"{fixture.manifest['scenario']}: {table} [{start}, {end}]"
    finally:
        answers.close()
        lake.close()


def test_a_1_0_lake_duckdb_2_wrote_reads_the_same_in_duckdb_1_5(tmp_path: Path) -> None:
    """DuckDB 2.0 on a 1.0 catalog (a delete that ends a whole file, files of two schema versions merged into one,
    MERGE INTO): DuckDB 1.5.5 reads the lake as DuckDB 2.0 did, at every snapshot (so do we, above)."""
    fixture = open_fixture("ducklake_1_1", "duckdb2_on_1_0", tmp_path)
    answers = fixture.answers()
    con = connect_duckdb()
    try:
        con.execute(f"ATTACH 'ducklake:{fixture.folder}/catalog.ducklake' AS lake")
        (first, last) = fixture.manifest["tables"]["t"]
        for snapshot in range(first, last + 1):
            theirs = answers.execute(f"SELECT * FROM read_t_{snapshot}").to_arrow_table()
            ours = con.execute(f"SELECT rowid, snapshot_id, * FROM lake.t AT (VERSION => {snapshot})").to_arrow_table()
            assert _rows(ours) == _rows(theirs), snapshot
    finally:
        con.close()
        answers.close()


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_duckdb_1_1_lakes_read_exactly(scenario: str, tmp_path: Path) -> None:
    _check_lake(open_fixture("ducklake_1_1", scenario, tmp_path))


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_duckdb_1_1_lakes_moved_to_sqlite_and_postgres_read_exactly(
    scenario: str, catalog: CatalogLocation, tmp_path: Path
) -> None:
    _check_lake(open_fixture("ducklake_1_1", scenario, tmp_path, catalog), every_range=False)


def _catalog_dump(path: Path) -> dict[str, Any]:
    """Every table of a DuckDB-file catalog: its columns and its rows (sorted), the version row aside."""
    con = duckdb.connect(str(path), read_only=True)
    try:
        tables = [r[0] for r in con.execute("SELECT table_name FROM duckdb_tables() ORDER BY 1").fetchall()]
        out: dict[str, Any] = {}
        for table in tables:
            columns = [r[0] for r in con.execute(f"DESCRIBE {table}").fetchall()]
            rows = con.execute(f"SELECT * FROM {table}").fetchall()
            if table == "ducklake_metadata":
                rows = [r for r in rows if r[0] not in ("version", "created_by")]
            out[table] = (columns, sorted(rows, key=repr))
        return out
    finally:
        con.close()


def test_our_migration_equals_duckdbs(tmp_path: Path) -> None:
    """The 1.0 catalog DuckDB 2.0 migrated (``AUTOMATIC_MIGRATION``), migrated by us instead: the same tables, columns
    and rows (its version row says ``1.1-dev1``, ours ``1.1``), and the lake reads the same."""
    fixture = open_fixture("ducklake_1_1", "migration", tmp_path)
    before = fixture.folder / "before.ducklake"
    lake = pdl.connect(f"ducklake:{before}")
    assert lake.format_version == "1.0"
    report = lake.migrate("1.1")
    assert report.changed and lake.format_version == "1.1"
    lake.close()
    assert _catalog_dump(before) == _catalog_dump(fixture.folder / "catalog.ducklake")
    _check_lake(FixtureLake(f"duckdb:///{before}", fixture.folder, fixture.manifest), version="1.1")
