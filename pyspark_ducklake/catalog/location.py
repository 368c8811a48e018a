"""Catalog locations: SQLAlchemy URLs and DuckDB's ``ducklake:`` spellings, resolved to an engine."""

from __future__ import annotations

import os
import re
import sqlite3
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, NoSuchModuleError
from sqlalchemy.pool import NullPool

from pyspark_ducklake.exceptions import InvalidOptionError, NotInstalledError

SQLITE_BUSY_TIMEOUT_MS = 30_000


@dataclass(frozen=True)
class CatalogLocation:
    """Where a catalog lives: a SQLAlchemy URL plus driver arguments (a libpq DSN for ``ducklake:postgres:``)."""

    url: str
    connect_args: dict[str, Any] = field(default_factory=dict, hash=False, compare=False)

    @property
    def backend(self) -> str:
        return make_url(self.url).get_backend_name()

    def duckdb_attach(self) -> str:
        """The same catalog as DuckDB's ``ATTACH`` spells it."""
        url = make_url(self.url)
        if url.get_backend_name() == "sqlite":
            return f"ducklake:sqlite:{url.database}"
        if "dsn" in self.connect_args:
            return f"ducklake:postgres:{self.connect_args['dsn']}"
        parts = {
            "dbname": url.database,
            "host": url.host,
            "port": url.port,
            "user": url.username,
            "password": url.password,
        }
        conninfo = " ".join(f"{k}={v}" for k, v in parts.items() if v is not None)
        return f"ducklake:postgres:{conninfo}"

    def redacted(self) -> str:
        """The URL with any password hidden, for messages and logs."""
        if "dsn" in self.connect_args:
            dsn = " ".join(
                "password=***" if p.startswith("password=") else p for p in str(self.connect_args["dsn"]).split()
            )
            return f"ducklake:postgres:{dsn}"
        return make_url(self.url).render_as_string(hide_password=True)


def redact_location(location: str) -> str:
    """A catalog location as the user spelled it, with any password hidden (for reprs, messages and logs)."""
    try:
        return parse_location(location).redacted()
    except Exception:
        # not parseable: hide anything that looks like a password rather than echo it
        text = re.sub(r"password=\S*", "password=***", location)
        return re.sub(r"(://[^:/@\s]*:)[^@\s]*@", r"\1***@", text)


def parse_location(location: str) -> CatalogLocation:
    """Parse a catalog location.

    Accepts SQLAlchemy URLs (``sqlite:///lake.sqlite``, ``postgresql+psycopg2://user@host/db``) and DuckDB's
    spellings (``ducklake:sqlite:lake.sqlite``, ``ducklake:postgres:dbname=db host=127.0.0.1``); a bare path
    ending in ``.sqlite``/``.db`` means a SQLite catalog.

    Raises:
        InvalidOptionError: the location is empty or not a supported catalog.
    """
    if not location or not location.strip():
        raise InvalidOptionError("catalog location is empty; pass e.g. 'sqlite:///lake.sqlite'")
    loc = location.strip()
    if loc.startswith("ducklake:"):
        loc = loc[len("ducklake:") :]
        if loc.startswith("sqlite:") and not loc.startswith("sqlite://"):
            return CatalogLocation(f"sqlite:///{os.path.abspath(loc[len('sqlite:') :])}")
        if loc.startswith(("postgres:", "postgresql:")) and "://" not in loc:
            dsn = loc.split(":", 1)[1]
            return CatalogLocation("postgresql+psycopg2://", {"dsn": dsn})
        if "://" not in loc:
            raise InvalidOptionError(
                f"catalog {location!r} is a DuckDB-file catalog, which needs DuckDB itself; "
                "use a SQLite ('ducklake:sqlite:lake.sqlite') or PostgreSQL catalog"
            )
    if loc.startswith("postgres://"):
        loc = "postgresql+psycopg2://" + loc[len("postgres://") :]
    if loc.startswith("postgresql://"):
        loc = "postgresql+psycopg2://" + loc[len("postgresql://") :]
    if "://" not in loc:
        if loc.endswith((".sqlite", ".db", ".sqlite3")):
            return CatalogLocation(f"sqlite:///{os.path.abspath(loc)}")
        raise InvalidOptionError(
            f"catalog {location!r} is not a catalog URL; use 'sqlite:///path.sqlite', "
            "'postgresql+psycopg2://user@host/db' or DuckDB's 'ducklake:sqlite:path' / 'ducklake:postgres:dbname=...'"
        )
    try:
        url = make_url(loc)
    except ArgumentError as e:
        raise InvalidOptionError(f"catalog {location!r} is not a valid URL: {e}") from e
    if url.get_backend_name() not in ("sqlite", "postgresql"):
        raise InvalidOptionError(
            f"catalog backend {url.get_backend_name()!r} is not supported; "
            "DuckLake catalogs here are sqlite or postgresql"
        )
    if url.get_backend_name() == "sqlite" and url.database in (None, "", ":memory:"):
        raise InvalidOptionError(
            f"catalog {location!r} is an in-memory SQLite database, which vanishes between connections; "
            "give a file, e.g. 'sqlite:///lake.sqlite'"
        )
    if url.get_backend_name() == "sqlite":
        url = url.set(database=os.path.abspath(url.database or ""))
    return CatalogLocation(url.render_as_string(hide_password=False))


def create_catalog_engine(location: CatalogLocation) -> Engine:
    """An engine for the catalog; SQLite write transactions take the lock up front (``BEGIN IMMEDIATE``), PostgreSQL
    reads see one snapshot (``REPEATABLE READ``).

    Raises:
        NotInstalledError: the database driver is not installed.
    """
    backend = location.backend
    kwargs: dict[str, Any] = {"connect_args": dict(location.connect_args)}
    if backend == "sqlite":
        kwargs["connect_args"].setdefault("timeout", SQLITE_BUSY_TIMEOUT_MS / 1000)
        kwargs["connect_args"]["check_same_thread"] = False
        kwargs["poolclass"] = NullPool
    else:
        kwargs["pool_pre_ping"] = True
    try:
        engine = create_engine(location.url, **kwargs)
    except (NoSuchModuleError, ModuleNotFoundError) as e:
        raise NotInstalledError(
            f"the driver for {backend} catalogs is missing: pip install 'pyspark-ducklake[postgres]' ({e})"
        ) from e
    if backend == "sqlite":
        _sqlite_explicit_transactions(engine)
    else:
        _postgres_consistent_reads(engine)
    return engine


def _postgres_consistent_reads(engine: Engine) -> None:
    # A read runs several queries (files, delete files, inlined rows): in READ COMMITTED a commit landing between
    # them (a flush moving rows from the catalog into a file) tears the read. Commits keep READ COMMITTED: they read
    # after taking the commit lock, and must see what was committed up to then.
    @event.listens_for(engine, "begin")
    def _begin(conn: Any) -> None:
        if not conn.get_execution_options().get("ducklake_write", False):
            conn.exec_driver_sql("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")


def _sqlite_explicit_transactions(engine: Engine) -> None:
    # pysqlite's implicit BEGIN defers locking until the first write, which turns concurrent commits into
    # deadlocks; take the lock at BEGIN for connections that will write.
    @event.listens_for(engine, "connect")
    def _connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None
        cur = dbapi_connection.cursor()
        cur.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
        # WAL: readers (DuckDB too) neither block nor wait for a commit; in the default rollback journal a reader
        # sees a new snapshot up to a second late and holds commits back. Only for a DuckLake catalog (never
        # another application's database or an empty file); persistent, so set once per file; when the switch
        # cannot get its lock the catalog keeps working in its current mode.
        cur.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'ducklake_snapshot'")
        if cur.fetchone() is not None:
            try:
                cur.execute("PRAGMA journal_mode=WAL")
            except sqlite3.OperationalError:
                pass
        cur.close()

    @event.listens_for(engine, "begin")
    def _begin(conn: Any) -> None:
        immediate = conn.get_execution_options().get("ducklake_write", False)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")
