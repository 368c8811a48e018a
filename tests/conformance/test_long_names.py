"""Names longer than the catalog database keeps as identifiers, or than a folder name holds: what DuckDB 1.5.5 does
with the same names on the same catalog, and a lake it reads.

PostgreSQL cuts identifiers at 63 bytes; each column of an inlined-data table is one, so DuckDB never inlines a
table with a longer column name (its rows go to Parquet). A schema or table name becomes a folder name, which
holds 255 bytes; DuckDB names the folder after the name and then fails every write, we shorten the folder.
"""

from __future__ import annotations

import os
from typing import Any

import pyarrow as pa
import pytest
from sqlalchemy import create_engine, text

import pyspark_ducklake as pdl
from pyspark_ducklake.catalog.format_version import V1_0, V1_1
from pyspark_ducklake.catalog.reserved import check_identifiers, inlining_obstacle
from pyspark_ducklake.catalog.types import Column
from pyspark_ducklake.exceptions import InvalidIdentifierError
from tests.support.bad_inputs import accepted_input
from tests.support.duck import attached, connect_duckdb

LONG = "c" * 100
WIDE = "é" * 40  # 40 characters, 80 bytes of UTF-8: too long on PostgreSQL
FITS = "d" * 63  # exactly PostgreSQL's 63 bytes: inlined everywhere
LONGER = "a" * 64

WHERE_ROWS_GO = """
SELECT s.schema_name, t.table_name,
       (SELECT count(*) FROM ducklake_inlined_data_tables i WHERE i.table_id = t.table_id),
       (SELECT count(*) FROM ducklake_data_file f WHERE f.table_id = t.table_id)
FROM ducklake_table t JOIN ducklake_schema s ON s.schema_id = t.schema_id
WHERE t.end_snapshot IS NULL AND s.end_snapshot IS NULL
"""


def where_rows_go(url: str) -> dict[str, dict[str, tuple[int, int]]]:
    """Per schema, per table: (inlined-data tables registered, data files)."""
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            out: dict[str, dict[str, tuple[int, int]]] = {}
            for schema, table, inlined, files in conn.execute(text(WHERE_ROWS_GO)):
                out.setdefault(schema, {})[table] = (inlined, files)
            return out
    finally:
        engine.dispose()


def q(name: str) -> str:
    return '"' + name + '"'


def test_a_column_name_longer_than_the_catalog_database_keeps_is_never_inlined_as_in_duckdb(catalog: Any) -> None:
    # On PostgreSQL such a table got an inlined-data table whose column PostgreSQL cut at 63 bytes: DuckDB then
    # failed on the lake ("INTERNAL Error: Attempted to access index 0 within vector of size 0")
    accepted_input("column-name-too-long-for-catalog")
    con = connect_duckdb()
    lake = pdl.connect(catalog.url, catalog.data_path, data_inlining_row_limit=10)
    try:
        with attached(con, catalog):
            con.execute("CREATE SCHEMA lake.duck")
            for table, name in (("t", LONG), ("u", WIDE), ("x", FITS)):
                con.execute(f"CREATE TABLE lake.duck.{table} (id BIGINT, {q(name)} BIGINT)")
                con.execute(f"INSERT INTO lake.duck.{table} VALUES (1, 2)")
            for table in ("w", "y"):  # a column added, or renamed, to a long name: no new inlined-data table
                con.execute(f"CREATE TABLE lake.duck.{table} (id BIGINT, k BIGINT)")
                con.execute(f"INSERT INTO lake.duck.{table} VALUES (1, 2)")
            # a struct's field names are no identifiers (the inlined value is text): inlined everywhere
            con.execute(f"CREATE TABLE lake.duck.z (id BIGINT, s STRUCT({q(LONG)} BIGINT))")
            con.execute(f"INSERT INTO lake.duck.z VALUES (1, {{'{LONG}': 2}})")
            con.execute(f"ALTER TABLE lake.duck.w ADD COLUMN {q(LONGER)} BIGINT")
            con.execute(f"ALTER TABLE lake.duck.y RENAME COLUMN k TO {q(LONGER)}")
            con.execute("INSERT INTO lake.duck.w VALUES (3, 4, 5)")
            con.execute("INSERT INTO lake.duck.y VALUES (3, 4)")
        for table, name in (("t", LONG), ("u", WIDE), ("x", FITS)):
            lake.create_table(f"main.{table}", pa.schema([("id", pa.int64()), (name, pa.int64())]))
            lake.append(f"main.{table}", pa.table({"id": [1], name: [2]}))
        for table in ("w", "y"):
            lake.create_table(f"main.{table}", pa.schema([("id", pa.int64()), ("k", pa.int64())]))
            lake.append(f"main.{table}", pa.table({"id": [1], "k": [2]}))
        nested = pa.table({"id": [1], "s": pa.array([{LONG: 2}], pa.struct([(LONG, pa.int64())]))})
        lake.create_table("main.z", nested.schema)
        lake.append("main.z", nested)
        lake.add_column("main.w", LONGER, pa.int64())
        lake.rename_column("main.y", "k", LONGER)
        lake.append("main.w", pa.table({"id": [3], "k": [4], LONGER: [5]}))
        lake.append("main.y", pa.table({"id": [3], LONGER: [4]}))

        placed = where_rows_go(catalog.url)
        assert placed["main"] == placed["duck"]
        if catalog.backend == "postgres":  # never inlined; the rows went to Parquet
            assert placed["main"] == {"t": (0, 1), "u": (0, 1), "x": (1, 0), "z": (1, 0), "w": (1, 1), "y": (1, 1)}
        else:
            assert placed["main"] == {"t": (1, 0), "u": (1, 0), "x": (1, 0), "z": (1, 0), "w": (2, 0), "y": (2, 0)}
        with attached(con, catalog):
            for schema in ("main", "duck"):
                for table, names in (("t", [LONG]), ("u", [WIDE]), ("x", [FITS])):
                    cols = ", ".join(q(n) for n in ["id", *names])
                    assert con.execute(f"SELECT {cols} FROM lake.{schema}.{table}").fetchall() == [(1, 2)]
                assert con.execute(f"SELECT id, s FROM lake.{schema}.z").fetchall() == [(1, {LONG: 2})]
                assert sorted(con.execute(f"SELECT * FROM lake.{schema}.w").fetchall()) == [(1, 2, None), (3, 4, 5)]
                assert sorted(con.execute(f"SELECT * FROM lake.{schema}.y").fetchall()) == [(1, 2), (3, 4)]
        for schema in ("main", "duck"):
            assert lake.scan(f"{schema}.t").to_pylist() == [{"id": 1, LONG: 2}]
            assert sorted(lake.scan(f"{schema}.w").to_pylist(), key=lambda r: r["id"])[1] == {
                "id": 3,
                "k": 4,
                LONGER: 5,
            }
    finally:
        lake.close()
        con.close()


def test_an_inlined_data_table_is_never_made_with_a_column_the_database_would_cut() -> None:
    column = Column(column_id=1, name=WIDE, type="int64")
    for fmt in (V1_0, V1_1):
        assert inlining_obstacle([column], "sqlite", fmt) is None and inlining_obstacle([column], "duckdb", fmt) is None
        assert "80 bytes, longer than the 63" in (inlining_obstacle([column], "postgresql", fmt) or "")
    with pytest.raises(InvalidIdentifierError, match=r"is 80 bytes \(UTF-8\), longer than the 63 bytes"):
        check_identifiers([FITS, WIDE], "postgresql", "inlined-data table ducklake_inlined_data_1_1")
    check_identifiers([FITS, WIDE], "sqlite", "inlined-data table ducklake_inlined_data_1_1")


def test_a_name_longer_than_a_folder_name_holds_gets_a_shortened_folder_duckdb_reads_and_writes(catalog: Any) -> None:
    # A 300-byte table name was created, then every Parquet append failed: its folder name is longer than the 255
    # bytes a filesystem takes (DuckDB fails the same way with such a table of its own)
    accepted_input("name-too-long-for-folder")
    schema = "S" * 300
    tables = [
        ("main", "T" * 300 + "a"),
        ("main", "T" * 300 + "b"),
        ("main", "é" * 200),
        ("main", "x" * 255),
        (schema, "t"),
    ]
    lake = pdl.connect(catalog.url, catalog.data_path, data_inlining_row_limit=10)
    con = connect_duckdb()
    try:
        lake.create_schema(schema)
        for i, ident in enumerate(tables):
            lake.create_table(ident, pa.schema([("id", pa.int64())]))
            lake.append(ident, pa.table({"id": list(range(i * 100, i * 100 + 30))}))  # a Parquet file
        folders = {d for d, _, files in os.walk(catalog.data_path) if files}
        assert len(folders) == len(tables)  # one each, also for names sharing their first 300 characters
        for d in folders:
            assert all(len(part.encode()) <= 255 for part in d.split("/")), d
        assert os.path.isdir(os.path.join(catalog.data_path, "main", "x" * 255))  # a name that fits is the folder
        with attached(con, catalog):
            for i, (s, t) in enumerate(tables):
                name = f"lake.{q(s)}.{q(t)}"
                assert con.execute(f"SELECT count(*), min(id) FROM {name}").fetchone() == (30, i * 100)
                con.execute(f"INSERT INTO {name} SELECT 1000 + range FROM range(20)")  # into our folder
        for i, ident in enumerate(tables):
            ids = lake.scan(ident).column("id").to_pylist()
            assert sorted(ids) == [*range(i * 100, i * 100 + 30), *range(1000, 1020)], ident
        assert {d for d, _, files in os.walk(catalog.data_path) if files} == folders
    finally:
        lake.close()
        con.close()
