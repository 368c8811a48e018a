"""DuckLake 1.1 catalogs: what we create, and the migration of a 1.0 catalog DuckDB 1.5.5 wrote.

DuckDB 1.5.5 is the oracle of the 1.0 side (the lake it writes, and that it refuses the migrated catalog); the 1.1
side is checked against DuckDB 2.0's layout (the reference's ``DuckLakeMetadataManagerV1_1`` and ``MigrateV10``):
the same tables and columns whether the catalog was created at 1.1 or migrated to it.
"""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from sqlalchemy import create_engine, inspect, text

import pyspark_ducklake as pdl
from pyspark_ducklake.__main__ import main as cli
from pyspark_ducklake.exceptions import InvalidIdentifierError, InvalidOptionError, MigrationError
from tests.support.catalogs import CatalogLocation
from tests.support.duck import connect_duckdb, open_duckdb

INLINED = re.compile(r"ducklake_inlined_(data_\d+_\d+|delete_\d+)")
NEW_NAMES = ["_ducklake_row_id", "_ducklake_begin_snapshot", "_ducklake_end_snapshot"]


def _layout(url: str) -> dict[str, list[str]]:
    """Every table of the catalog with its columns, in order."""
    engine = create_engine(url)
    try:
        insp = inspect(engine)
        return {t: [c["name"] for c in insp.get_columns(t)] for t in sorted(insp.get_table_names())}
    finally:
        engine.dispose()


def _fixed(layout: dict[str, list[str]]) -> dict[str, list[str]]:
    return {t: cols for t, cols in layout.items() if not INLINED.fullmatch(t)}


def _version(url: str) -> str:
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            return str(conn.execute(text("SELECT value FROM ducklake_metadata WHERE key = 'version'")).scalar_one())
    finally:
        engine.dispose()


def _duckdb_lake(catalog: CatalogLocation) -> None:
    """A 1.0 lake written by DuckDB 1.5.5: inlined rows in two schema versions, a Parquet file, deletes of both."""
    con = open_duckdb(catalog, inlining_row_limit=10)
    try:
        con.execute("CREATE TABLE lake.t(id INT, s VARCHAR)")
        con.execute("INSERT INTO lake.t VALUES (1, 'a'), (2, 'b')")
        con.execute("ALTER TABLE lake.t ADD COLUMN x INT")
        con.execute("INSERT INTO lake.t VALUES (3, 'c', 3)")
        con.execute("INSERT INTO lake.t SELECT i, 's' || i, i FROM range(100, 150) r(i)")
        con.execute("DELETE FROM lake.t WHERE id IN (1, 120)")
    finally:
        con.close()


def test_a_new_1_1_catalog_has_the_1_1_layout_and_row_group_counts(catalog: CatalogLocation) -> None:
    lake = pdl.connect(catalog.url, catalog.data_path, format_version="1.1", data_inlining_row_limit=10)
    lake.create_table("main.t", pa.schema([("id", pa.int64()), ("row_id", pa.string())]))
    lake.append("main.t", pa.table({"id": [1, 2], "row_id": ["a", "b"]}))  # inlined; row_id is a free name on 1.1
    lake.append("main.t", pa.table({"id": list(range(100, 400)), "row_id": ["x"] * 300}))
    lake.delete("main.t", [("id", "in", [2, 150, 151])])
    assert lake.format_version == "1.1" and _version(catalog.url) == "1.1"
    layout = _layout(catalog.url)
    assert layout["ducklake_data_file"][-1] == "row_group_count"
    assert layout["ducklake_delete_file"][-1] == "row_group_count"
    assert layout["ducklake_view_column_tag"] == [
        "view_id",
        "column_name",
        "begin_snapshot",
        "end_snapshot",
        "key",
        "value",
    ]
    inlined = [cols for t, cols in layout.items() if INLINED.fullmatch(t) and "data" in t]
    assert inlined == [[*NEW_NAMES, "id", "row_id"]]
    assert sorted(r["id"] for r in lake.scan("main.t").to_pylist()) == [
        1,
        *[i for i in range(100, 400) if i not in (150, 151)],
    ]
    # row_group_count is the footer's, on every data and delete file we wrote
    engine = create_engine(catalog.url)
    with engine.connect() as conn:
        files = conn.execute(text("SELECT path, row_group_count FROM ducklake_data_file")).all()
        deletes = conn.execute(text("SELECT path, format, row_group_count FROM ducklake_delete_file")).all()
    engine.dispose()
    table_dir = Path(catalog.data_path) / "main" / "t"
    assert files and deletes
    for path, count in files:
        assert count == pq.ParquetFile(table_dir / path).metadata.num_row_groups
    for path, fmt, count in deletes:
        assert count == (pq.ParquetFile(table_dir / path).metadata.num_row_groups if fmt == "parquet" else None)


def test_a_1_1_catalog_keeps_its_version_and_refuses_a_mismatch(catalog: CatalogLocation) -> None:
    pdl.connect(catalog.url, catalog.data_path, format_version="1.1").close()
    assert pdl.connect(catalog.url).format_version == "1.1"
    assert pdl.connect(catalog.url, format_version="1.1").format_version == "1.1"
    with pytest.raises(InvalidOptionError, match="cannot be downgraded"):
        pdl.connect(catalog.url, format_version="1.0")
    with pytest.raises(InvalidOptionError, match=r"'1\.0', '1\.1'"):
        pdl.connect(catalog.url, format_version="2.0")


def test_1_1_reserves_every_ducklake_prefixed_name(catalog: CatalogLocation) -> None:
    lake = pdl.connect(catalog.url, catalog.data_path, format_version="1.1", data_inlining_row_limit=0)
    for name in ("_ducklake_x", "_DuckLake_Row_Id"):
        with pytest.raises(InvalidIdentifierError, match=r"reserved by DuckLake 1\.1"):
            lake.create_table("main.bad", pa.schema([("id", pa.int64()), (name, pa.int64())]))
    lake.create_table("main.t", pa.schema([("id", pa.int64())]))
    with pytest.raises(InvalidIdentifierError, match=r"reserved by DuckLake 1\.1"):
        lake.add_column("main.t", "_ducklake_y", pa.int64())
    with pytest.raises(InvalidIdentifierError, match=r"reserved by DuckLake 1\.1"):
        lake.rename_column("main.t", "id", "_ducklake_id")
    assert [s.snapshot_id for s in lake.snapshots()] == [0, 1]  # nothing committed by the refusals
    # on 1.0 the prefix alone is not reserved, as in DuckDB 1.5
    other = Path(catalog.data_path).parent / "v10"
    lake10 = pdl.connect(f"sqlite:///{other}.sqlite", str(other), data_inlining_row_limit=10)
    lake10.create_table("main.t", pa.schema([("id", pa.int64()), ("_ducklake_x", pa.int64())]))


def test_migrating_a_duckdb_lake_renames_adds_and_reads_the_same(catalog: CatalogLocation, tmp_path: Path) -> None:
    _duckdb_lake(catalog)
    lake = pdl.connect(catalog.url)
    before, feed = lake.scan("main.t").sort_by("id"), lake.table_changes("main.t", 0)
    dry = lake.migrate("1.1", dry_run=True)
    assert dry.dry_run and dry.to_version == "1.1" and _version(catalog.url) == "1.0"
    assert dry.steps[-1] == "set version 1.1" and sum("rename" in s for s in dry.steps) == 6
    done = lake.migrate("1.1")
    assert done.steps == dry.steps and lake.format_version == "1.1" and _version(catalog.url) == "1.1"
    assert lake.migrate("1.1").steps == ()  # already there: nothing to do
    # the layout is the one a new 1.1 catalog has (and DuckDB 2.0's MigrateV10 gives)
    fresh = CatalogLocation("sqlite", f"sqlite:///{tmp_path}/fresh.sqlite", "", str(tmp_path / "fresh") + "/")
    pdl.connect(fresh.url, fresh.data_path, format_version="1.1").close()
    assert _fixed(_layout(catalog.url)) == _fixed(_layout(fresh.url))
    inlined = [cols for t, cols in _layout(catalog.url).items() if INLINED.fullmatch(t) and "data" in t]
    assert len(inlined) == 2 and all(cols[:3] == NEW_NAMES for cols in inlined)
    # the same rows and feed, and writes go on in the 1.1 layout
    assert lake.scan("main.t").sort_by("id") == before
    assert lake.table_changes("main.t", 0) == feed
    lake.append("main.t", pa.table({"id": [7], "s": ["g"], "x": [7]}))
    lake.delete("main.t", [("id", "=", 3)])
    lake.flush_inlined_data("main.t")
    ids = sorted(r["id"] for r in lake.scan("main.t").to_pylist())
    assert ids == [2, 7, *[i for i in range(100, 150) if i != 120]]
    # DuckDB 1.5.5 opens only 1.0: the migrated lake is closed to it, as DuckDB 2.0's migration leaves it
    with pytest.raises(duckdb.Error, match=r"catalog version is 1\.1"):
        open_duckdb(catalog).close()
    with pytest.raises(MigrationError, match="cannot be downgraded"):
        lake.migrate("1.0")


def test_a_column_colliding_with_a_new_name_refuses_the_migration(catalog: CatalogLocation) -> None:
    con = open_duckdb(catalog, inlining_row_limit=10)
    try:
        con.execute('CREATE TABLE lake.t(id INT, "_ducklake_row_id" INT)')  # a free name on 1.0
        con.execute("INSERT INTO lake.t VALUES (1, 10)")
    finally:
        con.close()
    lake = pdl.connect(catalog.url)
    layout = _layout(catalog.url)
    with pytest.raises(MigrationError, match=r"has a column '_ducklake_row_id'.*rename the column and flush"):
        lake.migrate("1.1")
    assert _layout(catalog.url) == layout and _version(catalog.url) == "1.0" and lake.format_version == "1.0"
    con = open_duckdb(catalog)  # DuckDB 1.5.5 still opens it
    try:
        assert con.execute("SELECT * FROM lake.t").fetchall() == [(1, 10)]
    finally:
        con.close()


def test_a_failed_migration_leaves_the_catalog_at_1_0(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/c.sqlite"
    lake = pdl.connect(url, str(tmp_path / "data"), data_inlining_row_limit=10)
    lake.create_table("main.t", pa.schema([("id", pa.int64())]))
    lake.append("main.t", pa.table({"id": [1, 2]}))
    with sqlite3.connect(tmp_path / "c.sqlite") as c:  # the last step (the version row) fails
        c.execute(
            "CREATE TRIGGER no_version BEFORE UPDATE ON ducklake_metadata BEGIN SELECT RAISE(ABORT, 'denied'); END"
        )
    layout = _layout(url)
    with pytest.raises(MigrationError, match=r"refused the migration.*denied.*nothing was changed"):
        lake.migrate("1.1")
    assert _layout(url) == layout and _version(url) == "1.0"
    assert lake.scan("main.t").column("id").to_pylist() == [1, 2]


def test_the_cli_migrates_and_says_what_it_did(tmp_path: Path, capsys: Any) -> None:
    url = f"sqlite:///{tmp_path}/c.sqlite"
    pdl.connect(url, str(tmp_path / "data")).close()
    assert cli(["--catalog", url, "migrate", "--to", "1.1", "--dry-run"]) == 0
    assert "would migrate (dry run) the catalog from DuckLake 1.0 to 1.1" in capsys.readouterr().out
    assert _version(url) == "1.0"
    assert cli(["--catalog", url, "migrate", "--to", "1.1", "--json"]) == 0
    out = capsys.readouterr().out
    assert '"to_version": "1.1"' in out and '"dry_run": false' in out and _version(url) == "1.1"
    assert cli(["--catalog", url, "migrate", "--to", "1.0"]) == 2  # argparse: no downgrade target exists


def test_duckdb_file_catalogs_at_1_1_created_and_migrated(tmp_path: Path) -> None:
    """A DuckDB-file catalog: one we create at 1.1 and one DuckDB 1.5.5 made that we migrate read and write alike."""
    con = connect_duckdb()
    try:
        con.execute(f"ATTACH 'ducklake:{tmp_path}/theirs.ducklake' AS lake (DATA_INLINING_ROW_LIMIT 10)")
        con.execute("CREATE TABLE lake.t(id BIGINT, s VARCHAR)")
        con.execute("INSERT INTO lake.t VALUES (1, 'a'), (2, 'b')")
        con.execute("INSERT INTO lake.t SELECT i, 's' || i FROM range(100, 130) r(i)")
    finally:
        con.close()
    theirs = pdl.connect(f"ducklake:{tmp_path}/theirs.ducklake")
    before = theirs.scan("main.t").sort_by("id")
    assert theirs.migrate("1.1").changed and theirs.format_version == "1.1"
    assert theirs.scan("main.t").sort_by("id") == before
    ours = pdl.connect(f"ducklake:{tmp_path}/ours.ducklake", str(tmp_path / "ours"), format_version="1.1")
    for lake in (theirs, ours):
        if lake is ours:
            lake.create_table("main.t", pa.schema([("id", pa.int64()), ("s", pa.string())]))
        lake.append("main.t", pa.table({"id": [3], "s": ["c"]}))  # inlined, into the 1.1 layout
        lake.append("main.t", pa.table({"id": list(range(200, 220)), "s": ["x"] * 20}))
        lake.delete("main.t", [("id", "in", [3, 205])])
        lake.flush_inlined_data("main.t")
        ids = sorted(lake.scan("main.t").column("id").to_pylist())
        assert 3 not in ids and 205 not in ids and 219 in ids
        lake.close()
