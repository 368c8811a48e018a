"""DuckDB-file catalogs (``ATTACH 'ducklake:my.ducklake'``): the engine, opening the file per transaction, and the
lock DuckDB holds on it per process.

The catalog is an ordinary DuckDB database whose ``main`` schema holds the ``ducklake_*`` tables. DuckDB locks the
file for the whole process that opens it read-write, so the engine opens it for each connection (``NullPool``) and
closes it right after: between transactions the file is free for other processes. A process that holds it (a
DuckDB session with the lake attached) shuts every other one out; that becomes :class:`CatalogLockedError` after a
short wait, never a hang.

Inside this process the connections of every engine on one file share one open database (DuckDB refuses to open a
file twice in a process, and opening and closing it from several threads at once races): the first connection opens
it, each one gets its own DuckDB connection to it, the last one to close closes it. Write transactions of this
process take a lock per file first, as ``BEGIN IMMEDIATE`` does on SQLite: DuckDB's optimistic concurrency would
otherwise let committers collide on the snapshot id and retry until one gives up.
"""

from __future__ import annotations

import os
import re
import threading
import time
from typing import TYPE_CHECKING, Any

from sqlalchemy import create_engine, event
from sqlalchemy.exc import NoSuchModuleError
from sqlalchemy.pool import NullPool

from pyspark_ducklake.exceptions import CatalogLockedError, InvalidOptionError, NotInstalledError
from pyspark_ducklake.io.extras import require_extra

if TYPE_CHECKING:
    from sqlalchemy import Engine

    from pyspark_ducklake.catalog.location import CatalogLocation

INSTALL_HINT = "pip install 'pyspark-ducklake[duckdb]'"
# How long a connection waits for another process to let go of the file (our own Spark workers hold it briefly).
LOCK_WAIT_S = 5.0
# No extension is needed to read the catalog's tables: never download or load one.
DUCKDB_CONFIG = {"autoinstall_known_extensions": False, "autoload_known_extensions": False}
# The storage version a new catalog file is written in: DuckDB 2.0 writes one DuckDB 1.5 cannot open ("version
# number 999"), so a new file is written for DuckDB 1.5 (storage version 68) unless asked otherwise. An existing file
# keeps the version it has, whichever DuckDB opens it.
DEFAULT_STORAGE_VERSION = "v1.5.0"
STORAGE_VERSION_ARG = "storage_version"  # CatalogLocation.connect_args key
_LOCK_HELD = re.compile(r"Conflicting lock is held in (.*?) \(PID (\d+)\)")
_ATTACHED_HERE = re.compile(r"Unique file handle conflict.*already attached by database \"([^\"]*)\"", re.S)


def duckdb_file_engine(location: CatalogLocation) -> Engine:
    """An engine on the DuckDB file of ``location``, opening the file per connection.

    Raises:
        NotInstalledError: duckdb or duckdb-engine is not installed, or older than the ``[duckdb]`` extra's floors.
    """
    require_extra("duckdb")
    try:
        import duckdb
        import duckdb_engine
    except ImportError as e:
        raise NotInstalledError(
            f"catalog {location.redacted()} is a DuckDB file, which needs DuckDB: {INSTALL_HINT} ({e})"
        ) from None
    try:
        engine = create_engine(location.url, poolclass=NullPool, hide_parameters=True)
    except (NoSuchModuleError, ModuleNotFoundError) as e:
        raise NotInstalledError(f"the DuckDB driver is missing: {INSTALL_HINT} ({e})") from None
    path = engine.url.database or ""
    storage_version = str(location.connect_args.get(STORAGE_VERSION_ARG) or DEFAULT_STORAGE_VERSION)

    @event.listens_for(engine, "do_connect")
    def _connect(_dialect: Any, _record: Any, _cargs: Any, _cparams: Any) -> Any:
        conn = _acquire(path, storage_version)
        try:
            conn.execute("SET TimeZone = 'UTC'")  # TIMESTAMPTZ as UTC text; without ICU DuckDB has UTC only
        except duckdb.Error:
            pass
        return duckdb_engine.ConnectionWrapper(conn)

    @event.listens_for(engine, "begin")
    def _begin(conn: Any) -> None:
        if conn.get_execution_options().get("ducklake_write", False):
            lock = _commit_lock(path)
            lock.acquire()
            conn.info.setdefault(_HELD, []).append(lock)

    # released when the connection closes: SQLAlchemy's commit event comes before the COMMIT itself
    @event.listens_for(engine, "close")
    def _close(_dbapi_connection: Any, record: Any) -> None:
        _release_commit_lock(record.info)
        _release(path)

    @event.listens_for(engine, "close_detached")
    def _close_detached(_dbapi_connection: Any) -> None:
        _release(path)

    return engine


_HELD = "ducklake_commit_lock"
_commit_locks: dict[str, threading.RLock] = {}
_commit_locks_guard = threading.Lock()


def _commit_lock(path: str) -> threading.RLock:
    with _commit_locks_guard:
        return _commit_locks.setdefault(path, threading.RLock())


def _release_commit_lock(info: dict[str, Any]) -> None:
    held = info.get(_HELD)
    while held:
        held.pop().release()


_shared_lock = threading.Lock()
_shared: dict[str, list[Any]] = {}  # path -> [the open database's first connection, connections using it]


def _acquire(path: str, storage_version: str) -> Any:
    """A new DuckDB connection to the file, opening it when no connection of this process has it open (and creating
    it in ``storage_version`` when it does not exist)."""
    import duckdb

    with _shared_lock:
        entry = _shared.get(path)
        if entry is None:
            config: dict[str, Any] = dict(DUCKDB_CONFIG)
            if not os.path.exists(path):
                config["storage_compatibility_version"] = storage_version
            try:
                root = connect_waiting(lambda: duckdb.connect(path, config=config), path)
            except duckdb.InvalidInputException as e:
                if "storage_compatibility_version" not in config or "version string" not in str(e):
                    raise
                raise InvalidOptionError(
                    f"option duckdb_storage_version={storage_version!r} is not a version the installed DuckDB "
                    f"{duckdb.__version__} can write ({e}); nothing was created"
                ) from None
            entry = _shared[path] = [root, 0]
        conn = entry[0].cursor()
        entry[1] += 1
        return conn


def _release(path: str) -> None:
    """One connection fewer; the last one closes the database, which releases DuckDB's file lock."""
    with _shared_lock:
        entry = _shared.get(path)
        if entry is None:
            return
        entry[1] -= 1
        if entry[1] <= 0:
            del _shared[path]
            entry[0].close()


def connect_waiting(connect: Any, path: str, wait_s: float = LOCK_WAIT_S) -> Any:
    """``connect()``, tried again while another process holds the file's lock, for up to ``wait_s`` seconds.

    Raises:
        CatalogLockedError: another process still holds the file.
    """
    import duckdb

    deadline = time.monotonic() + wait_s
    pause = 0.02
    while True:
        try:
            return connect()
        except duckdb.BinderException as e:
            ours = _ATTACHED_HERE.search(str(e))
            if ours is None:
                raise
            raise CatalogLockedError(
                f"the DuckDB-file catalog {path} is attached by a DuckDB connection of this process (as "
                f"{ours.group(1)!r}), and DuckDB lets one process open a file once. Detach it there (DETACH <alias>) "
                "and retry, or use a SQLite/PostgreSQL catalog to use the lake from DuckDB and here at once"
            ) from None
        except duckdb.IOException as e:
            held = _LOCK_HELD.search(str(e))
            if held is None and "could not set lock" not in str(e).lower():
                raise
            if time.monotonic() < deadline:
                time.sleep(pause)
                pause = min(pause * 2, 0.5)
                continue
            holder = f"process {held.group(2)} ({held.group(1)})" if held else "another process"
            raise CatalogLockedError(
                f"the DuckDB-file catalog {path} is held by {holder}: DuckDB locks the file for the whole process "
                "that has it open. Detach it there (DETACH <alias>, or close that DuckDB connection) and retry, or "
                "use a SQLite/PostgreSQL catalog when several processes must use the lake at once"
            ) from None
