"""The indexes this library adds to SQLite and PostgreSQL catalogs (``catalog/indexes.py``) change nothing for
DuckDB 1.5.5: it attaches, writes (inlined rows, files, deletes, an update, a schema change), flushes, merges,
expires and cleans up a catalog that has them, and this library reads what it wrote; a catalog DuckDB created
gets them afterwards and DuckDB goes on as before; a sink adds them when it starts; our migration to 1.1 keeps them.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pyarrow as pa

from pyspark_ducklake.__main__ import main
from pyspark_ducklake.catalog.indexes import INDEXES
from pyspark_ducklake.lake import Lake
from pyspark_ducklake.table.microbatch import MicroBatchCommitter, SinkSettings
from tests.support.catalogs import CatalogLocation
from tests.support.duck import attached, connect_duckdb

NAMES = sorted(str(i.name) for i in INDEXES)


def _present(lake: Lake) -> list[str]:
    return sorted(i.name for i in lake.indexes() if i.present)


def _duckdb_works(con: Any, catalog: CatalogLocation) -> list[tuple[Any, ...]]:
    """DuckDB writes, maintains and expires the lake; the rows it reads at the end."""
    with attached(con, catalog) as duck:
        duck.execute("CREATE TABLE lake.main.d (id BIGINT, s VARCHAR)")
        duck.execute("INSERT INTO lake.main.d VALUES (1, 'a'), (2, 'b')")  # inlined
        duck.execute("INSERT INTO lake.main.d SELECT i, 's' || i FROM range(10, 2010) t(i)")  # a file
        duck.execute("DELETE FROM lake.main.d WHERE id % 7 = 0")
        duck.execute("UPDATE lake.main.d SET s = 'u' WHERE id = 11")
        duck.execute("ALTER TABLE lake.main.d ADD COLUMN n BIGINT")
        duck.execute("INSERT INTO lake.main.d SELECT i, 't', i FROM range(3000, 4000) t(i)")
        duck.execute("CALL ducklake_flush_inlined_data('lake')")
        duck.execute("CALL ducklake_merge_adjacent_files('lake')")
        time.sleep(0.01)
        duck.execute("CALL ducklake_expire_snapshots('lake', older_than => now())")
        duck.execute("CALL ducklake_cleanup_old_files('lake', cleanup_all => true)")
        return sorted(duck.execute("SELECT id, s, n FROM lake.main.d").fetchall())


def test_duckdb_writes_expires_and_cleans_a_catalog_with_our_indexes(catalog: CatalogLocation) -> None:
    lake = Lake(catalog.url, catalog.data_path)
    assert _present(lake) == NAMES  # a catalog this library creates has them
    lake.create_table("main.ours", pa.schema([("id", pa.int64())]))
    lake.append("main.ours", pa.table({"id": list(range(100))}))
    con = connect_duckdb()
    theirs = _duckdb_works(con, catalog)
    ours = lake.scan("main.d", columns=["id", "s", "n"])
    assert sorted(zip(*(ours.column(c).to_pylist() for c in ("id", "s", "n")), strict=True)) == theirs
    assert len(theirs) == 2 + 2000 - 286 + 1000
    lake.delete("main.d", [("id", "<", 100)])  # and we go on writing after DuckDB
    with attached(con, catalog) as duck:
        assert duck.execute("SELECT count(*) FROM lake.main.d WHERE id < 100").fetchone() == (0,)
        assert duck.execute("SELECT count(*) FROM lake.main.ours").fetchone() == (100,)
    assert _present(lake) == NAMES
    con.close()
    lake.close()


def test_a_catalog_duckdb_created_gets_them_and_duckdb_goes_on(catalog: CatalogLocation) -> None:
    con = connect_duckdb()
    with attached(con, catalog) as duck:  # DuckDB creates the catalog: no index of ours
        duck.execute("CREATE TABLE lake.main.t AS SELECT i AS id FROM range(10) t(i)")
    lake = Lake(catalog.url)
    assert _present(lake) == []
    assert sorted(lake.create_indexes()) == NAMES
    assert lake.create_indexes() == []  # once is enough
    assert _present(lake) == NAMES
    assert _duckdb_works(con, catalog)
    assert lake.scan("main.t").num_rows == 10
    con.close()
    lake.close()


def test_a_sink_adds_them_when_it_starts(catalog: CatalogLocation) -> None:
    con = connect_duckdb()
    with attached(con, catalog) as duck:
        duck.execute("CREATE TABLE lake.main.t (id BIGINT)")
    con.close()
    lake = Lake(catalog.url)
    committer = MicroBatchCommitter(lake, "main.t", SinkSettings())
    assert committer.committed_snapshot("app", 0) is None
    assert _present(lake) == NAMES
    lake.close()


def test_the_cli_lists_and_creates_them(sqlite_catalog: CatalogLocation, capsys: Any) -> None:
    con = connect_duckdb()
    with attached(con, sqlite_catalog):
        pass
    con.close()
    assert main(["--catalog", sqlite_catalog.url, "indexes", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [i["name"] for i in listed] == [str(i.name) for i in INDEXES] and not any(i["present"] for i in listed)
    assert main(["--catalog", sqlite_catalog.url, "indexes", "--create"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == len(INDEXES) and all(line.endswith("\tcreated") for line in out)
    assert "ducklake_data_file (table_id, end_snapshot)" in out[0]
    assert main(["--catalog", sqlite_catalog.url, "indexes"]) == 0
    assert all(line.endswith("\tpresent") for line in capsys.readouterr().out.splitlines())


def test_our_migration_to_1_1_keeps_them(catalog: CatalogLocation) -> None:
    lake = Lake(catalog.url, catalog.data_path)
    lake.create_table("main.t", pa.schema([("id", pa.int64())]))
    lake.append("main.t", pa.table({"id": [1, 2]}))
    assert lake.migrate("1.1").changed
    assert _present(lake) == NAMES
    lake.append("main.t", pa.table({"id": list(range(3, 100))}))
    assert lake.scan("main.t").num_rows == 99
    lake.close()


def test_a_duckdb_file_catalog_gets_none(tmp_path: Any) -> None:
    lake = Lake(f"ducklake:duckdb:{tmp_path / 'lake.duckdb'}", str(tmp_path / "data"))
    assert lake.indexes() == [] and lake.create_indexes() == []
    lake.close()
