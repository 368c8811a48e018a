"""DuckDB 1.5.5 with the ``ducklake``, ``postgres_scanner`` and ``sqlite_scanner`` extensions, the reference reader.

The loading itself lives in :mod:`pyspark_ducklake.duckdb_attach` (users get it too); this adds the test
catalog locations.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Protocol

import duckdb

from pyspark_ducklake.duckdb_attach import EXTENSIONS, connect_duckdb, extension_path, sql_identifier, sql_string
from pyspark_ducklake.duckdb_attach import attach_sql as _attach_sql


class LakeLocation(Protocol):
    """Anything with DuckDB's ATTACH spelling of a catalog and its data path (e.g. ``CatalogLocation``)."""

    @property
    def duckdb(self) -> str: ...

    @property
    def data_path(self) -> str: ...


def attach_sql(location: LakeLocation, alias: str = "lake", inlining_row_limit: int | None = None) -> str:
    """``ATTACH '<location.duckdb>' AS <alias> (DATA_PATH '<data_path>'[, DATA_INLINING_ROW_LIMIT n])``."""
    return _attach_sql(location.duckdb, location.data_path, alias, inlining_row_limit)


def open_duckdb(
    location: LakeLocation, alias: str = "lake", inlining_row_limit: int | None = None
) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB connection with the lake at ``location`` attached as ``alias``.

    On an empty catalog DuckDB creates the DuckLake tables itself. The caller closes the connection (the
    ``duckdb_lake`` fixture does it for you).
    """
    con = connect_duckdb()
    try:
        con.execute(attach_sql(location, alias, inlining_row_limit))
    except BaseException:
        con.close()
        raise
    return con


@contextlib.contextmanager
def attached(
    con: duckdb.DuckDBPyConnection,
    location: LakeLocation,
    alias: str = "lake",
    *,
    inlining_row_limit: int | None = None,
) -> Iterator[duckdb.DuckDBPyConnection]:
    """``con`` (a connection kept for many checks: loading the extensions costs about ten times an attach) with the
    lake at ``location`` attached afresh as ``alias`` (with DuckDB's ``DATA_INLINING_ROW_LIMIT`` when given),
    detached after, so nothing DuckDB cached survives and DuckDB holds no SQLite catalog file between checks."""
    con.execute(attach_sql(location, alias, inlining_row_limit))
    try:
        yield con
    finally:
        con.execute(f"DETACH {sql_identifier(alias)}")


__all__ = [
    "EXTENSIONS",
    "attach_sql",
    "attached",
    "connect_duckdb",
    "extension_path",
    "open_duckdb",
    "sql_identifier",
    "sql_string",
]
