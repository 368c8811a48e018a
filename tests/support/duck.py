"""DuckDB 1.5.5 with the ``ducklake``, ``postgres_scanner`` and ``sqlite_scanner`` extensions, the reference reader.

The loading itself lives in :mod:`pyspark_ducklake.duckdb_attach` (users get it too); this adds the test
catalog locations, and :func:`connect_duckdb` checks the extensions' signatures once per process, not per connection.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Protocol

import duckdb

from pyspark_ducklake import duckdb_attach
from pyspark_ducklake.duckdb_attach import EXTENSIONS, extension_path, sql_identifier, sql_string
from pyspark_ducklake.duckdb_attach import attach_sql as _attach_sql

_signatures_checked = False


def connect_duckdb() -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB with the same extension files loaded, in UTC.

    The first connection of a process is the package's own (``duckdb_attach.connect_duckdb``), whose ``LOAD`` checks
    each file's signature: DuckDB's RSA check over the whole file, 0.5 s for the three (110 MB) on every connection,
    which the suite opens thousands of. Later connections load the files it checked with ``allow_unsigned_extensions``,
    which skips only that check (DuckDB still refuses a file built for another version or platform)."""
    global _signatures_checked
    if not _signatures_checked:
        con = duckdb_attach.connect_duckdb()
        _signatures_checked = True
        return con
    config = {"autoinstall_known_extensions": False, "autoload_known_extensions": False}
    con = duckdb.connect(config={**config, "allow_unsigned_extensions": True})
    try:
        con.execute(
            "; ".join(f"LOAD {sql_string(extension_path(*ext))}" for ext in EXTENSIONS) + "; SET TimeZone = 'UTC'"
        )
    except BaseException:
        con.close()
        raise
    return con


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
    """``con`` (a connection kept for many checks: loading the extensions costs more than an attach) with the
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
