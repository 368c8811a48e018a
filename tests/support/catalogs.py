"""Where a test's catalog lives (SQLite file or PostgreSQL database) and the test PostgreSQL server.

The fixtures in ``tests/conftest.py`` build on these; tests import ``CatalogLocation`` for annotations.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, NamedTuple

from sqlalchemy import Engine, create_engine, text
from sqlalchemy.engine import make_url

REPO_ROOT = Path(__file__).resolve().parents[2]
POSTGRES_SCRIPT = REPO_ROOT / "scripts" / "postgres.sh"

Backend = Literal["sqlite", "postgres"]
BACKENDS: tuple[Backend, ...] = ("sqlite", "postgres")


@dataclass(frozen=True)
class CatalogLocation:
    """A fresh, empty catalog and data folder for one test.

    Attributes:
        backend: ``"sqlite"`` or ``"postgres"``.
        url: SQLAlchemy URL, ``sqlite:////abs/path/lake.sqlite`` or
            ``postgresql+psycopg2://postgres@127.0.0.1:54329/<fresh database>``.
        duckdb: the same catalog as DuckDB's ATTACH spells it, ``ducklake:sqlite:/abs/path/lake.sqlite`` or
            ``ducklake:postgres:dbname=<db> host=127.0.0.1 port=54329 user=postgres``.
        data_path: an empty folder for the data files: absolute, existing, ending with ``/``.
    """

    backend: Backend
    url: str
    duckdb: str
    data_path: str


class PgServer(NamedTuple):
    """The test PostgreSQL server: trust auth on loopback, superuser ``user``."""

    host: str
    port: int
    user: str

    def url(self, database: str = "postgres") -> str:
        """SQLAlchemy URL of ``database`` on this server."""
        return f"postgresql+psycopg2://{self.user}@{self.host}:{self.port}/{database}"

    def conninfo(self, database: str = "postgres") -> str:
        """libpq connection string of ``database``, as DuckDB's postgres ATTACH takes it."""
        return f"dbname={database} host={self.host} port={self.port} user={self.user}"


def start_pg_server() -> PgServer:
    """Run ``scripts/postgres.sh start`` (installs and initializes PostgreSQL when needed) and return the server."""
    proc = subprocess.run(
        ["bash", str(POSTGRES_SCRIPT), "start"],
        cwd=REPO_ROOT,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    sys.stderr.write(proc.stderr)
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        raise RuntimeError(
            f"scripts/postgres.sh start failed (exit {proc.returncode}):\n{proc.stdout}\n{proc.stderr}".rstrip()
        )
    url = make_url(lines[-1])
    assert url.host and url.port and url.username, url
    return PgServer(url.host, url.port, url.username)


def pg_admin_engine(server: PgServer) -> Engine:
    """An AUTOCOMMIT engine on the ``postgres`` database, for CREATE/DROP DATABASE."""
    return create_engine(server.url(), isolation_level="AUTOCOMMIT", pool_pre_ping=True)


def create_database(admin: Engine) -> str:
    """Create an empty database with a unique name and return the name."""
    name = f"ducklake_test_{os.getpid()}_{uuid.uuid4().hex[:12]}"
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    return name


def drop_database(admin: Engine, name: str) -> None:
    """Drop a database; FORCE (PostgreSQL 13+) terminates the connections a test left open."""
    with admin.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


def new_data_path(folder: Path) -> str:
    """Create ``folder/data/`` and return it absolute with a trailing ``/``."""
    data = folder.resolve() / "data"
    data.mkdir(parents=True, exist_ok=True)
    return f"{data}/"


def sqlite_location(folder: Path) -> CatalogLocation:
    """A SQLite catalog file (not yet created) and data folder inside ``folder``."""
    db = folder.resolve() / "lake.sqlite"
    return CatalogLocation(
        backend="sqlite",
        url=f"sqlite:///{db}",
        duckdb=f"ducklake:sqlite:{db}",
        data_path=new_data_path(folder),
    )


def postgres_location(server: PgServer, database: str, folder: Path) -> CatalogLocation:
    """The (empty) PostgreSQL database ``database`` as a catalog, with a data folder inside ``folder``."""
    return CatalogLocation(
        backend="postgres",
        url=server.url(database),
        duckdb=f"ducklake:postgres:{server.conninfo(database)}",
        data_path=new_data_path(folder),
    )


def compaction_catalog_rows(path: Path) -> dict[str, list[tuple[Any, ...]]]:
    """Every ducklake_* table of a SQLite catalog, without what differs between two writers of the same change
    (file names, sizes, times, and the order in which new files were numbered)."""
    skip = {"path", "file_size_bytes", "footer_size", "column_size_bytes", "schedule_start", "snapshot_time"}
    # New files take ids in the order groups are committed, which in DuckDB is a hash map's order.
    renumbered = {"ducklake_data_file", "ducklake_file_column_stats", "ducklake_file_partition_value"}
    engine = create_engine(f"sqlite:///{path}")
    out = {}
    with engine.connect() as conn:
        names = [r[0] for r in conn.execute(text("SELECT name FROM sqlite_master WHERE type = 'table'"))]
        for name in sorted(n for n in names if n.startswith("ducklake_") and n != "ducklake_metadata"):
            drop = skip | ({"data_file_id"} if name in renumbered else set())
            cols = [r[1] for r in conn.execute(text(f'PRAGMA table_info("{name}")')) if r[1] not in drop]
            rows = conn.execute(text(f'SELECT {", ".join(cols)} FROM "{name}"')).all()
            out[name] = sorted((tuple(r) for r in rows), key=repr)
    engine.dispose()
    return out
