"""DuckDB 1.5.5 with the ``ducklake``, ``postgres_scanner`` and ``sqlite_scanner`` extensions, the reference reader.

The ``duckdb-extension-*`` wheels ship only the ``.duckdb_extension`` files and do not register them in
``~/.duckdb``, so they are loaded by path with auto-install and auto-load off (shared/ducklake-format.md, section 1):
nothing is downloaded at test time.
"""

from __future__ import annotations

import importlib.util
import os
from typing import Protocol

import duckdb

EXTENSIONS: tuple[tuple[str, str], ...] = (
    ("duckdb_extension_ducklake", "ducklake"),
    ("duckdb_extension_postgres_scanner", "postgres_scanner"),
    ("duckdb_extension_sqlite_scanner", "sqlite_scanner"),
)


class LakeLocation(Protocol):
    """Anything with DuckDB's ATTACH spelling of a catalog and its data path (e.g. ``CatalogLocation``)."""

    @property
    def duckdb(self) -> str: ...

    @property
    def data_path(self) -> str: ...


def extension_path(package: str, name: str) -> str:
    """The ``.duckdb_extension`` file inside an installed ``duckdb-extension-*`` wheel."""
    spec = importlib.util.find_spec(package)
    if spec is None or spec.origin is None:
        raise ImportError(f"{package} is not installed (run `make install`)")
    folder = os.path.dirname(spec.origin)
    return os.path.join(folder, "extensions", "v" + duckdb.__version__, f"{name}.duckdb_extension")


def connect_duckdb(database: str = ":memory:") -> duckdb.DuckDBPyConnection:
    """A DuckDB connection with the three extensions LOADed from their wheels, and the session time zone UTC."""
    con = duckdb.connect(database, config={"autoinstall_known_extensions": False, "autoload_known_extensions": False})
    try:
        for package, name in EXTENSIONS:
            con.execute(f"LOAD {sql_string(extension_path(package, name))}")
        # TIMESTAMPTZ values render and fetch in UTC, whatever the machine's zone.
        con.execute("SET TimeZone = 'UTC'")
    except BaseException:
        con.close()
        raise
    return con


def attach_sql(location: LakeLocation, alias: str = "lake", inlining_row_limit: int | None = None) -> str:
    """``ATTACH '<location.duckdb>' AS <alias> (DATA_PATH '<data_path>'[, DATA_INLINING_ROW_LIMIT n])``."""
    options = [f"DATA_PATH {sql_string(location.data_path)}"]
    if inlining_row_limit is not None:
        options.append(f"DATA_INLINING_ROW_LIMIT {int(inlining_row_limit)}")
    return f"ATTACH {sql_string(location.duckdb)} AS {sql_identifier(alias)} ({', '.join(options)})"


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


def sql_string(value: str) -> str:
    """A single-quoted SQL string literal."""
    return "'" + value.replace("'", "''") + "'"


def sql_identifier(name: str) -> str:
    """A double-quoted SQL identifier."""
    return '"' + name.replace('"', '""') + '"'
