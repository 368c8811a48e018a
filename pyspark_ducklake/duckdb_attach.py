"""Optional: open the same lake in DuckDB (``duckdb`` and ``duckdb-extension-ducklake`` installed).

Nothing in this library needs DuckDB; this is for users and examples that want to query a lake with DuckDB's
``ducklake`` extension. The extension wheels ship only ``.duckdb_extension`` files, so they are loaded by path
with auto-install and auto-load off: nothing is downloaded.
"""

from __future__ import annotations

import importlib.util
import os
from typing import Any

from pyspark_ducklake.exceptions import NotInstalledError

EXTENSIONS: tuple[tuple[str, str], ...] = (
    ("duckdb_extension_ducklake", "ducklake"),
    ("duckdb_extension_postgres_scanner", "postgres_scanner"),
    ("duckdb_extension_sqlite_scanner", "sqlite_scanner"),
)


def sql_string(value: str) -> str:
    """A single-quoted SQL string literal."""
    return "'" + value.replace("'", "''") + "'"


def sql_identifier(name: str) -> str:
    """A double-quoted SQL identifier."""
    return '"' + name.replace('"', '""') + '"'


def extension_path(package: str, name: str) -> str:
    """The ``.duckdb_extension`` file inside an installed ``duckdb-extension-*`` wheel.

    Raises:
        NotInstalledError: the wheel is not installed.
    """
    import duckdb

    spec = importlib.util.find_spec(package)
    if spec is None or spec.origin is None:
        raise NotInstalledError(
            f"{package} is not installed: pip install {package.replace('_', '-')}=={duckdb.__version__}"
        )
    return os.path.join(
        os.path.dirname(spec.origin), "extensions", "v" + duckdb.__version__, f"{name}.duckdb_extension"
    )


def connect_duckdb(database: str = ":memory:") -> Any:
    """A DuckDB connection with the ducklake, postgres_scanner and sqlite_scanner extensions loaded, in UTC.

    Raises:
        NotInstalledError: duckdb or an extension wheel is missing.
    """
    try:
        import duckdb
    except ImportError as e:
        raise NotInstalledError(
            "duckdb is not installed: pip install duckdb==1.5.5 duckdb-extension-ducklake==1.5.5"
        ) from e
    con = duckdb.connect(database, config={"autoinstall_known_extensions": False, "autoload_known_extensions": False})
    try:
        for package, name in EXTENSIONS:
            con.execute(f"LOAD {sql_string(extension_path(package, name))}")
        con.execute("SET TimeZone = 'UTC'")
    except BaseException:
        con.close()
        raise
    return con


def attach_sql(attach: str, data_path: str, alias: str = "lake", inlining_row_limit: int | None = None) -> str:
    """``ATTACH '<attach>' AS <alias> (DATA_PATH '<data_path>'[, DATA_INLINING_ROW_LIMIT n])``."""
    options = [f"DATA_PATH {sql_string(data_path)}"]
    if inlining_row_limit is not None:
        options.append(f"DATA_INLINING_ROW_LIMIT {int(inlining_row_limit)}")
    return f"ATTACH {sql_string(attach)} AS {sql_identifier(alias)} ({', '.join(options)})"


def open_in_duckdb(lake: Any, alias: str = "lake") -> Any:
    """A DuckDB connection with ``lake`` (a :class:`pyspark_ducklake.Lake`) attached as ``alias``.

    For an ``s3://`` data path it also loads ``httpfs`` (the ``duckdb-extension-httpfs`` wheel) and creates a
    temporary S3 secret from the lake's storage options and the ``AWS_*`` environment; for ``az://`` / ``abfss://``
    it loads ``azure`` (the ``duckdb-extension-azure`` wheel) and creates an Azure secret the same way. A ``gs://``
    lake needs a GCS secret (HMAC keys) the caller creates.
    """
    con = connect_duckdb()
    try:
        if lake.data_path.startswith(("s3://", "s3a://")):
            add_s3_secret(con, lake.storage_options)
        elif lake.data_path.startswith(("az://", "abfs://", "abfss://")):
            add_azure_secret(con, lake.storage_options)
        con.execute(attach_sql(lake.location.duckdb_attach(), lake.data_path, alias))
    except BaseException:
        con.close()
        raise
    return con


def add_s3_secret(con: Any, storage_options: dict[str, Any] | None = None, name: str = "ducklake_s3") -> None:
    """Load ``httpfs`` into ``con`` and create a temporary S3 secret from s3fs options and the environment.

    Raises:
        NotInstalledError: the ``duckdb-extension-httpfs`` wheel is missing.
    """
    from pyspark_ducklake.io.storage import duckdb_secret_params

    con.execute(f"LOAD {sql_string(extension_path('duckdb_extension_httpfs', 'httpfs'))}")
    params = ["TYPE s3", *(f"{k} {sql_string(v)}" for k, v in duckdb_secret_params(storage_options).items())]
    con.execute(f"CREATE OR REPLACE TEMPORARY SECRET {sql_identifier(name)} ({', '.join(params)})")


def add_azure_secret(con: Any, storage_options: dict[str, Any] | None = None, name: str = "ducklake_azure") -> None:
    """Load ``azure`` into ``con`` and create a temporary Azure secret from adlfs options and ``AZURE_STORAGE_*``.

    Raises:
        NotInstalledError: the ``duckdb-extension-azure`` wheel is missing.
    """
    from pyspark_ducklake.io.object_stores import duckdb_azure_secret_params

    con.execute(f"LOAD {sql_string(extension_path('duckdb_extension_azure', 'azure'))}")
    params = ["TYPE azure", *(f"{k} {sql_string(v)}" for k, v in duckdb_azure_secret_params(storage_options).items())]
    con.execute(f"CREATE OR REPLACE TEMPORARY SECRET {sql_identifier(name)} ({', '.join(params)})")
