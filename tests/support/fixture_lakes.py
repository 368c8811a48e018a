"""Committed fixture lakes (``tests/fixtures/``): copy one to a test's folder and open it on any catalog backend.

A fixture's catalog is a DuckDB file (the DuckDB that wrote it has no SQLite or PostgreSQL scanner); its rows are
moved into a SQLite or PostgreSQL catalog here the way the library itself would hold them: the fixed tables row for
row, and the inlined-data tables decoded from DuckDB's typed columns and encoded for the target database (the text
encodings DuckDB's SQLite and PostgreSQL metadata managers use).
"""

from __future__ import annotations

import gzip
import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
from sqlalchemy import MetaData, create_engine, insert, select
from sqlalchemy.schema import CreateTable

import pyspark_ducklake as pdl
from pyspark_ducklake.catalog import reader
from pyspark_ducklake.catalog import tables as T
from pyspark_ducklake.catalog.commit_rows import inlined_table
from pyspark_ducklake.catalog.inlined_codec import encode_values
from pyspark_ducklake.catalog.inlined_tables import (
    columns_at_schema_version,
    decoded_values,
    inlined_layout,
    inlined_rows,
)
from pyspark_ducklake.catalog.types import TableSchema
from tests.support.catalogs import CatalogLocation

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


@dataclass(frozen=True)
class FixtureLake:
    """A fixture copied to a test's folder: the catalog's URL there, its manifest, and DuckDB's answers."""

    url: str
    folder: Path
    manifest: dict[str, Any]

    def answers(self) -> duckdb.DuckDBPyConnection:
        """DuckDB's recorded answers (read-only)."""
        return duckdb.connect(str(self.folder / "answers.duckdb"), read_only=True)

    def connect(self) -> pdl.Lake:
        return pdl.connect(self.url)


def copy_fixture(kind: str, name: str, dest: Path) -> Path:
    """The fixture ``kind/name`` copied into ``dest`` (its DuckDB files unpacked), its catalog's data path pointing at
    the copy's files."""
    folder = dest / name
    shutil.copytree(FIXTURES / kind / name, folder)
    for packed in folder.glob("*.gz"):
        with gzip.open(packed, "rb") as src, open(packed.with_suffix(""), "wb") as out:
            shutil.copyfileobj(src, out)
        packed.unlink()
    for catalog in folder.glob("*.ducklake"):
        con = duckdb.connect(str(catalog))
        try:
            con.execute("UPDATE ducklake_metadata SET value = ? WHERE key = 'data_path'", [f"{folder}/data/"])
        finally:
            con.close()
    return folder


def open_fixture(kind: str, name: str, dest: Path, catalog: CatalogLocation | None = None) -> FixtureLake:
    """The fixture copied into ``dest``; with ``catalog`` its rows are moved into that (empty) SQLite or PostgreSQL
    catalog, else the copy's DuckDB file is the catalog."""
    folder = copy_fixture(kind, name, dest)
    manifest = json.loads((folder / "manifest.json").read_text())
    source = f"duckdb:///{folder}/catalog.ducklake"
    if catalog is None:
        return FixtureLake(source, folder, manifest)
    move_catalog(source, catalog.url)
    return FixtureLake(catalog.url, folder, manifest)


def move_catalog(source_url: str, target_url: str) -> None:
    """Copy every catalog row of ``source_url`` into the empty database ``target_url``."""
    src = pdl.connect(source_url)
    target = create_engine(target_url)
    backend = target.dialect.name
    fmt = src.info.format
    try:
        with src.engine.connect() as s, target.begin() as t:
            fixed = T.catalog_metadata(fmt)
            fixed.create_all(t)
            for table in fixed.sorted_tables:
                rows = [dict(r._mapping) for r in s.execute(select(table))]
                if rows:
                    t.execute(insert(table), rows)
            registered = s.execute(
                select(
                    T.ducklake_inlined_data_tables.c.table_id,
                    T.ducklake_inlined_data_tables.c.table_name,
                    T.ducklake_inlined_data_tables.c.schema_version,
                )
            ).all()
            for table_id, name, version in registered:
                if not reader.has_table(s, name):
                    continue
                last = reader.latest_snapshot(s).snapshot_id
                current = reader.table_schema(s, table_id, last) if _table_live(s, table_id, last) else None
                columns = columns_at_schema_version(s, table_id, version, current or TableSchema(()))
                layout = inlined_layout(s, name, columns.columns)
                rows = inlined_rows(s, layout)
                out = inlined_table(name, TableSchema(layout.columns), backend, fmt)
                t.execute(CreateTable(out))
                values = {
                    f"c{c.column_id}": encode_values(c, decoded_values(rows, c, "duckdb", table=name), backend)
                    for c in layout.columns
                }
                batch = [
                    {
                        "row_id": r.row_id,
                        "begin_snapshot": r.begin_snapshot,
                        "end_snapshot": r.end_snapshot,
                        **{k: v[i] for k, v in values.items()},
                    }
                    for i, r in enumerate(rows)
                ]
                if batch:
                    t.execute(insert(out), batch)
            for (table_id,) in s.execute(select(T.ducklake_table.c.table_id).distinct()).all():
                name = T.inlined_delete_table_name(int(table_id))
                if reader.has_table(s, name):
                    deletes = T.inlined_delete_table(int(table_id))
                    rows = [dict(r._mapping) for r in s.execute(select(deletes))]
                    t.execute(CreateTable(T.inlined_delete_table(int(table_id), MetaData())))
                    if rows:
                        t.execute(insert(deletes), rows)
    finally:
        src.close()
        target.dispose()


def _table_live(conn: Any, table_id: int, snapshot_id: int) -> bool:
    t = T.ducklake_table
    return (
        conn.execute(select(t.c.table_id).where(t.c.table_id == table_id, reader.visible(t, snapshot_id))).first()
        is not None
    )


__all__ = ["FIXTURES", "FixtureLake", "copy_fixture", "move_catalog", "open_fixture"]
