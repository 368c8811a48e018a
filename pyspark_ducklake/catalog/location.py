"""Catalog locations: SQLAlchemy URLs and DuckDB's ``ducklake:`` spellings, resolved to an engine."""

from __future__ import annotations

import os
import re
import sqlite3
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import quote, quote_plus

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError, NoSuchModuleError
from sqlalchemy.pool import NullPool

from pyspark_ducklake.catalog.duckdb_file import STORAGE_VERSION_ARG, duckdb_file_engine
from pyspark_ducklake.exceptions import InvalidOptionError, NotInstalledError
from pyspark_ducklake.io.extras import require_extra

SQLITE_BUSY_TIMEOUT_MS = 30_000


# libpq keywords whose value is a secret
SECRET_KEYS = frozenset({"password", "sslpassword"})
# Environment variables libpq reads a password from: scrubbed from error texts too.
SECRET_ENV = ("PGPASSWORD", "PGSSLPASSWORD")
HIDDEN = "***"


def parse_conninfo(text: str) -> dict[str, str]:
    """libpq's ``keyword=value`` connection string (``dbname=lake host=db password='a b\'c'``) as a dict.

    Values may be single-quoted (``\'`` and ``\\`` escape inside), spaces around ``=`` are allowed, as in libpq's
    ``conninfo_parse``.

    Raises:
        InvalidOptionError: a malformed string; the message never repeats the string (it may hold a password).
    """
    out: dict[str, str] = {}
    i, n = 0, len(text)
    while True:
        while i < n and text[i].isspace():
            i += 1
        if i >= n:
            return out
        start = i
        while i < n and not text[i].isspace() and text[i] != "=":
            i += 1
        key = text[start:i]
        while i < n and text[i].isspace():
            i += 1
        if i >= n or text[i] != "=" or not key:
            raise InvalidOptionError(
                f"libpq connection string: expected keyword=value at character {start + 1} (after {len(out)} "
                "keywords); quote values with spaces: password='a b'"
            )
        i += 1
        while i < n and text[i].isspace():
            i += 1
        value: list[str] = []
        if i < n and text[i] == "'":
            i += 1
            while True:
                if i >= n:
                    raise InvalidOptionError(f"libpq connection string: the quoted value of {key!r} is not closed")
                if text[i] == "\\" and i + 1 < n:
                    value.append(text[i + 1])
                    i += 2
                elif text[i] == "'":
                    i += 1
                    break
                else:
                    value.append(text[i])
                    i += 1
        else:
            while i < n and not text[i].isspace():
                if text[i] == "\\" and i + 1 < n:
                    value.append(text[i + 1])
                    i += 2
                else:
                    value.append(text[i])
                    i += 1
        out[key] = "".join(value)


def render_conninfo(params: dict[str, Any], *, hide_secrets: bool = False) -> str:
    """A libpq connection string from keywords (values quoted where libpq needs it)."""

    def quote(value: Any) -> str:
        text = str(value)
        if text and not any(c.isspace() or c in "'\\" for c in text):
            return text
        return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"

    return " ".join(
        f"{k}={HIDDEN if hide_secrets and k.lower() in SECRET_KEYS else quote(v)}"
        for k, v in params.items()
        if v is not None
    )


@dataclass(frozen=True, repr=False)
class CatalogLocation:
    """Where a catalog lives: a SQLAlchemy URL, or (DuckDB's ``postgres:`` spelling) libpq keywords that are passed
    to the driver as they are."""

    url: str
    connect_args: dict[str, Any] = field(default_factory=dict, hash=False)

    def __repr__(self) -> str:
        return f"CatalogLocation({self.redacted()!r})"

    __str__ = __repr__

    @property
    def backend(self) -> str:
        return make_url(self.url).get_backend_name()

    @property
    def conninfo(self) -> dict[str, str] | None:
        """The libpq keywords of a ``postgres:`` location (None for a URL)."""
        return dict(self.connect_args["conninfo"]) if "conninfo" in self.connect_args else None

    def driver_args(self) -> dict[str, Any]:
        """Keyword arguments for the DBAPI ``connect()`` (libpq keywords go to psycopg2 as they are)."""
        args = {k: v for k, v in self.connect_args.items() if k != "conninfo"}
        args.update(self.connect_args.get("conninfo", {}))
        return args

    def duckdb_attach(self) -> str:
        """The same catalog as DuckDB's ``ATTACH`` spells it."""
        url = make_url(self.url)
        if url.get_backend_name() == "duckdb":
            return f"ducklake:{url.database}"
        if url.get_backend_name() == "sqlite":
            return f"ducklake:sqlite:{url.database}"
        if self.conninfo is not None:
            return f"ducklake:postgres:{render_conninfo(self.conninfo)}"
        parts: dict[str, Any] = {
            "dbname": url.database,
            "host": url.host,
            "port": url.port,
            "user": url.username,
            "password": url.password,
        }
        for key, value in [*url.query.items(), *self.connect_args.items()]:
            parts.setdefault(key, value if isinstance(value, str) else ",".join(value))
        return f"ducklake:postgres:{render_conninfo(parts)}"

    def redacted(self) -> str:
        """The location with every password hidden, for messages, logs and reprs."""
        if self.backend == "duckdb":
            return self.duckdb_attach()  # a file path holds no password; shown as the user spells it
        if self.conninfo is not None:
            return f"ducklake:postgres:{render_conninfo(self.conninfo, hide_secrets=True)}"
        url = make_url(self.url)
        query = {k: (HIDDEN if k.lower() in SECRET_KEYS else v) for k, v in url.query.items()}
        text = url.set(query=query).render_as_string(hide_password=True).replace("%2A%2A%2A", HIDDEN)
        hidden = [f"{k}={HIDDEN}" for k in self.connect_args if k.lower() in SECRET_KEYS]
        return text + (f" ({', '.join(hidden)})" if hidden else "")

    def secrets(self) -> list[str]:
        """Every password this location (or libpq's environment) holds, as it could appear in a driver's message."""
        found: list[str] = []
        if self.conninfo is not None:
            found += [v for k, v in self.conninfo.items() if k.lower() in SECRET_KEYS]
        else:
            url = make_url(self.url)
            found += [url.password] if url.password else []
            for k, v in url.query.items():
                if k.lower() in SECRET_KEYS:
                    found += [v] if isinstance(v, str) else list(v)
            found += [str(v) for k, v in self.connect_args.items() if k.lower() in SECRET_KEYS]
        found += [os.environ[v] for v in SECRET_ENV if os.environ.get(v)]
        found += [quote(s, safe="") for s in found] + [quote_plus(s) for s in found]  # as a URL would carry it
        return sorted({s for s in found if s}, key=len, reverse=True)

    def scrub(self, text: str) -> str:
        """``text`` with this location's passwords replaced by ``***``."""
        for secret in self.secrets():
            text = text.replace(secret, HIDDEN)
        return text


_PASSWORD_KEYWORD = re.compile(r"((?:ssl)?password\s*=\s*)('(?:[^'\\]|\\.)*'?|\S*)", re.IGNORECASE)
_URL_USERINFO = re.compile(r"(://[^:/@\s]*:)[^@\s]*@")


def redact_location(location: str) -> str:
    """A catalog location as the user spelled it, with any password hidden (for reprs, messages and logs)."""
    try:
        return parse_location(location).redacted()
    except Exception:
        return redact_text(location)


def redact_text(text: str) -> str:
    """``text`` with anything that looks like a password hidden: ``user:pw@`` in URLs, ``password=`` keywords and
    query parameters (quoted or not)."""
    text = _PASSWORD_KEYWORD.sub(lambda m: m.group(1) + HIDDEN, text)
    return _URL_USERINFO.sub(r"\1" + HIDDEN + "@", text)


def with_storage_version(location: CatalogLocation, storage_version: str | None) -> CatalogLocation:
    """``location`` whose new DuckDB file (if it is a DuckDB-file catalog) is written in ``storage_version``; other
    backends have no storage version and are returned as they are."""
    if storage_version is None or location.backend != "duckdb":
        return location
    return replace(location, connect_args={**location.connect_args, STORAGE_VERSION_ARG: storage_version})


def parse_location(location: str) -> CatalogLocation:
    """Parse a catalog location.

    Accepts SQLAlchemy URLs (``sqlite:///lake.sqlite``, ``postgresql+psycopg2://user@host/db``, ``postgres://...``)
    and DuckDB's spellings, with or without ``ducklake:``: ``ducklake:sqlite:lake.sqlite``, ``sqlite:lake.sqlite``,
    ``ducklake:postgres:dbname=db host=127.0.0.1`` (a libpq connection string, keywords or URI), ``postgres:...``,
    ``postgresql:...``, and DuckDB-file catalogs: ``ducklake:my.ducklake`` (any file after ``ducklake:``, as DuckDB
    takes it), ``ducklake:duckdb:my.ducklake``, ``duckdb:my.ducklake``, ``duckdb:///my.ducklake``. A bare path
    ending in ``.sqlite``/``.db``/``.sqlite3`` means a SQLite catalog, one ending in ``.ducklake`` a DuckDB file.

    Raises:
        InvalidOptionError: the location is empty or not a supported catalog (the message hides any password).
    """
    if not isinstance(location, str) or not location.strip():
        raise InvalidOptionError("catalog location is empty; pass e.g. 'sqlite:///lake.sqlite'")
    shown = redact_text(location.strip())
    loc = location.strip()
    if loc.lower().startswith("ducklake:"):
        loc = loc[len("ducklake:") :]
        if not loc.lower().startswith(("sqlite:", "postgres:", "postgresql:", "duckdb:")) and "://" not in loc:
            return duckdb_file_location(loc, shown)  # DuckDB's ATTACH 'ducklake:my.ducklake': a DuckDB database file
    lower = loc.lower()
    if lower.startswith("duckdb:") and not lower.startswith("duckdb://"):
        return duckdb_file_location(loc[len("duckdb:") :], shown)
    if lower.startswith("sqlite:") and not lower.startswith("sqlite://"):
        path = loc[len("sqlite:") :]
        if not path or path == ":memory:":
            raise InvalidOptionError(
                f"catalog {shown!r} is an in-memory SQLite database, which vanishes between connections; "
                "give a file, e.g. 'sqlite:///lake.sqlite'"
            )
        return CatalogLocation(f"sqlite:///{os.path.abspath(os.path.expanduser(path))}")
    if lower.startswith(("postgres:", "postgresql:")) and not lower.startswith(("postgres://", "postgresql://")):
        rest = loc.split(":", 1)[1]
        if rest.lower().startswith(("postgres://", "postgresql://")):
            loc = rest  # libpq takes a URI as its connection string too
        else:
            return CatalogLocation("postgresql+psycopg2://", {"conninfo": parse_conninfo(rest)})
    lower = loc.lower()
    for scheme in ("postgres://", "postgresql://"):
        if lower.startswith(scheme):
            loc = "postgresql+psycopg2://" + loc[len(scheme) :]
    if "://" not in loc:
        if loc.endswith(DUCKDB_FILE_SUFFIX):
            return duckdb_file_location(loc, shown)
        if loc.endswith((".sqlite", ".db", ".sqlite3")):
            return CatalogLocation(f"sqlite:///{os.path.abspath(loc)}")
        raise InvalidOptionError(
            f"catalog {shown!r} is not a catalog URL; use 'sqlite:///path.sqlite', "
            "'postgresql+psycopg2://user@host/db' or DuckDB's 'ducklake:my.ducklake' / 'ducklake:sqlite:path' / "
            "'ducklake:postgres:dbname=...'"
        )
    try:
        url = make_url(loc)
        url.port  # noqa: B018 - a port that is not a number fails here, not at connect time
    except (ArgumentError, ValueError) as e:
        raise InvalidOptionError(f"catalog {shown!r} is not a valid URL ({type(e).__name__})") from None
    if url.get_backend_name() == "duckdb":
        return duckdb_file_location(url.database or "", shown)
    if url.get_backend_name() not in ("sqlite", "postgresql"):
        raise InvalidOptionError(
            f"catalog backend {url.get_backend_name()!r} is not supported; "
            "DuckLake catalogs here are sqlite, postgresql or a DuckDB file ('ducklake:my.ducklake')"
        )
    if url.get_backend_name() == "sqlite" and url.database in (None, "", ":memory:"):
        raise InvalidOptionError(
            f"catalog {shown!r} is an in-memory SQLite database, which vanishes between connections; "
            "give a file, e.g. 'sqlite:///lake.sqlite'"
        )
    if url.get_backend_name() == "sqlite":
        url = url.set(database=os.path.abspath(url.database or ""))
        return CatalogLocation(url.render_as_string(hide_password=False))
    # Secrets leave the query string, which SQLAlchemy shows in reprs: the password becomes the URL's own (hidden as
    # ***), sslpassword a driver argument.
    query = dict(url.query)
    secret = {k.lower(): query.pop(k) for k in list(query) if k.lower() in SECRET_KEYS}
    extra: dict[str, Any] = {}
    for key, value in secret.items():
        text = value if isinstance(value, str) else value[-1]
        if key == "password":
            url = url.set(password=text)
        else:
            extra[key] = text
    url = url.set(query=query)
    return CatalogLocation(url.render_as_string(hide_password=False), extra)


DUCKDB_FILE_SUFFIX = ".ducklake"


def duckdb_file_location(path: str, shown: str) -> CatalogLocation:
    """A DuckDB-file catalog (``ATTACH 'ducklake:my.ducklake'``): the file, made absolute.

    Raises:
        InvalidOptionError: no path, or DuckDB's in-memory database.
    """
    if path.lower().startswith(("md:", "motherduck:")):
        raise InvalidOptionError(
            f"catalog {shown!r} is a MotherDuck database, which needs DuckDB itself; use a local DuckDB file, "
            "SQLite or PostgreSQL catalog"
        )
    if not path.strip() or path.strip() == ":memory:" or path.lower().startswith(":memory:"):
        raise InvalidOptionError(
            f"catalog {shown!r} is an in-memory DuckDB database, which vanishes between connections; "
            "give a file, e.g. 'ducklake:my.ducklake'"
        )
    return CatalogLocation(URL.create("duckdb", database=os.path.abspath(os.path.expanduser(path))).render_as_string())


def create_catalog_engine(location: CatalogLocation) -> Engine:
    """An engine for the catalog; SQLite write transactions take the lock up front (``BEGIN IMMEDIATE``), PostgreSQL
    reads see one snapshot (``REPEATABLE READ``), a DuckDB file is opened per transaction (its lock is per process).

    Raises:
        NotInstalledError: the database driver is not installed, or older than the ``[postgres]`` extra's floor.
    """
    backend = location.backend
    if backend == "duckdb":
        return duckdb_file_engine(location)
    if make_url(location.url).get_driver_name() == "psycopg2":
        require_extra("postgres")
    # hide_parameters: a failed statement's error would quote its values (files' encryption keys, inlined rows)
    kwargs: dict[str, Any] = {"connect_args": location.driver_args(), "hide_parameters": True}
    if backend == "sqlite":
        kwargs["connect_args"].setdefault("timeout", SQLITE_BUSY_TIMEOUT_MS / 1000)
        kwargs["connect_args"]["check_same_thread"] = False
        kwargs["poolclass"] = NullPool
        # Named binds: SQLAlchemy's qmark rewrite misreads a quoted column named like "%(" as a placeholder.
        kwargs["paramstyle"] = "named"
    else:
        kwargs["pool_pre_ping"] = True
    try:
        engine = create_engine(location.url, **kwargs)
    except (NoSuchModuleError, ModuleNotFoundError) as e:
        raise NotInstalledError(
            f"the driver for {backend} catalogs is missing: pip install 'pyspark-ducklake[postgres]' "
            f"({location.scrub(str(e))})"
        ) from None
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
