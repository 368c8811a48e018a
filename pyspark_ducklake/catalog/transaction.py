"""The commit protocol: one database transaction per attempt, ``snapshot_id = latest + 1`` as the lock.

Each attempt reads the newest snapshot inside its transaction, inserts the next snapshot row first (its primary key
makes concurrent committers collide), re-applies the staged change against the current state, checks the snapshots
committed since the writer's base for the table-level conflicts left (drops, schema changes, creates), and commits.
Collisions are retried with exponential backoff and jitter, as the reference's ``RunCommitLoop`` does.

Row-level conflicts are checked where the change is applied: every catalog update that ends or moves planned rows
must hit exactly the rows planned (``commit_rows.py`` raises :class:`StalePlanError` otherwise). A change that can be
planned again (a predicate delete) passes ``replan``: the attempt is then retried with a plan made against the newest
snapshot, as if the operation had started after the other writer's commit.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import math
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from sqlalchemy import Connection, Engine, insert, update
from sqlalchemy.exc import DBAPIError

from pyspark_ducklake._faults import commit_starting
from pyspark_ducklake.catalog import reader
from pyspark_ducklake.catalog import tables as T
from pyspark_ducklake.catalog.corrupt import reading
from pyspark_ducklake.catalog.entries import Snapshot
from pyspark_ducklake.catalog.format_version import V1_0, FormatVersion
from pyspark_ducklake.catalog.snapshot_changes import ChangeSet
from pyspark_ducklake.exceptions import (
    CatalogUnreachableError,
    CommitConflictError,
    CommitFailedError,
    CommitStateUnknownError,
    DuckLakeError,
    InvalidOptionError,
    SkipCommit,
    StalePlanError,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RetryConfig:
    """Commit retry settings; defaults are DuckLake's (``ducklake_max_retry_count`` etc.)."""

    max_retry_count: int = 10
    retry_wait_ms: int = 100
    retry_backoff: float = 1.5
    # Seconds to keep probing an unreachable catalog (refused or lost connections) before giving up.
    reconnect_timeout: float = 60.0

    def __post_init__(self) -> None:
        if self.max_retry_count < 0:
            raise InvalidOptionError(f"option 'max_retry_count' must be >= 0, got {self.max_retry_count}")
        if self.retry_wait_ms < 0:
            raise InvalidOptionError(f"option 'retry_wait_ms' must be >= 0, got {self.retry_wait_ms}")
        if not (1.0 <= self.retry_backoff < math.inf):  # NaN and infinity would make every wait NaN or endless
            raise InvalidOptionError(f"option 'retry_backoff' must be a number >= 1.0, got {self.retry_backoff}")
        if not self.reconnect_timeout >= 0:
            raise InvalidOptionError(f"option 'reconnect_timeout' must be seconds >= 0, got {self.reconnect_timeout}")

    def wait_seconds(self, attempt: int) -> float:
        return self.retry_wait_ms / 1000.0 * random.uniform(0.5, 1.0) * self.retry_backoff**attempt


def now_utc() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


@dataclass
class CommitContext:
    """State of one commit attempt: the connection, the new snapshot and its id counters."""

    conn: Connection
    base: Snapshot
    snapshot_id: int
    schema_version: int
    next_catalog_id: int
    next_file_id: int
    data_path: str
    backend: str
    changes: ChangeSet = field(default_factory=ChangeSet)
    _schema_version_bumped: bool = False
    _table_ops: dict[str, Any] = field(default_factory=dict)
    # Files written while the attempt runs (e.g. a flush); removed when the attempt definitely failed.
    attempt_files: list[str] = field(default_factory=list)
    storage_options: dict[str, Any] | None = None
    snapshot_time: dt.datetime = field(default_factory=now_utc)
    # The snapshot the change was planned against (None: planned against the newest, inside the attempt).
    planned_snapshot_id: int | None = None
    # The catalog's format version, read in this attempt's transaction: what the rows written must look like.
    format: FormatVersion = V1_0

    def allocate_catalog_id(self) -> int:
        value = self.next_catalog_id
        self.next_catalog_id += 1
        return value

    def allocate_file_id(self) -> int:
        value = self.next_file_id
        self.next_file_id += 1
        return value

    def bump_schema_version(self) -> int:
        """The schema version of this snapshot's DDL (bumped once per snapshot, as the reference does)."""
        if not self._schema_version_bumped:
            self.schema_version += 1
            self._schema_version_bumped = True
        return self.schema_version

    @property
    def schema_changed(self) -> bool:
        return self._schema_version_bumped

    def scratch(self, key: str, factory: Callable[[], Any]) -> Any:
        """Per-attempt scratch space (e.g. table-stat accumulators), reset on every retry."""
        if key not in self._table_ops:
            self._table_ops[key] = factory()
        return self._table_ops[key]


@dataclass(frozen=True)
class CommitResult:
    """The committed snapshot (None when skipped), the attempts it took and how many were re-plans."""

    snapshot_id: int | None
    attempts: int
    skipped: bool = False
    replans: int = 0


@dataclass(frozen=True)
class Plan:
    """A change planned against ``base_snapshot_id``: what ``run_commit`` applies in each attempt."""

    apply: Callable[[CommitContext], None]
    base_snapshot_id: int | None


def extra_info_text(value: dict[str, Any] | str | None) -> str | None:
    """``commit_extra_info`` as stored: a dict as JSON with sorted keys, a string as given; either must be JSON.

    Raises:
        InvalidOptionError: a value JSON cannot hold (a datetime, a set, NaN) or a string that does not parse.
    """
    if value is None:
        return None
    advice = "pass a dict of JSON values or a JSON string"
    if isinstance(value, str):
        try:
            json.loads(value, parse_constant=_no_json_constant)
        except ValueError as e:
            raise InvalidOptionError(f"extra_info {value[:100]!r} is not JSON ({e}); {advice}") from e
        return value
    if not isinstance(value, dict):
        raise InvalidOptionError(f"extra_info must be a dict or a JSON string, not {type(value).__name__}; {advice}")
    try:
        return json.dumps(value, sort_keys=True, allow_nan=False)
    except (TypeError, ValueError) as e:
        raise InvalidOptionError(f"extra_info is not JSON ({e}); {advice} (str, numbers, bools, None, lists)") from e


def _no_json_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def run_commit(
    engine: Engine,
    apply: Callable[[CommitContext], None],
    *,
    base_snapshot_id: int | None,
    data_path: str,
    retry: RetryConfig,
    author: str | None = None,
    commit_message: str | None = None,
    commit_extra_info: dict[str, Any] | str | None = None,
    finalize: Callable[[CommitContext], None] | None = None,
    storage_options: dict[str, Any] | None = None,
    replan: Callable[[], Plan | None] | None = None,
) -> CommitResult:
    """Commit one snapshot, retrying collisions and re-planning a change whose rows moved.

    Args:
        engine: the catalog.
        apply: stages the change on the context; runs once per attempt, so it must read state from ``ctx.conn``.
        base_snapshot_id: the snapshot the change was planned against; later snapshots are conflict-checked.
        data_path: the lake's data path.
        retry: retry settings.
        author: ``ducklake_snapshot_changes.author``.
        commit_message: ``ducklake_snapshot_changes.commit_message``.
        commit_extra_info: ``ducklake_snapshot_changes.commit_extra_info`` (a dict is stored as JSON).
        finalize: runs after ``apply`` in the same attempt (table statistics and the like).
        storage_options: fsspec options for files an attempt writes (and removes when it fails).
        replan: plans the change again against the newest snapshot, after an attempt found that rows it planned to
            end or move had changed (:class:`StalePlanError`); returns None when nothing is left to do (the commit
            is then skipped). Without it such an attempt raises.

    Returns:
        The committed snapshot id, the number of attempts and re-plans.

    Raises:
        StalePlanError: rows the change planned to end or move were changed by another writer (and re-planning was
            impossible or kept failing); nothing was committed.
        CommitConflictError: a concurrent commit conflicts logically with this one; nothing was committed.
        CommitFailedError: retries were exhausted; nothing was committed.
        CommitStateUnknownError: the database failed while committing; the outcome is unknown.
    """
    extra = extra_info_text(commit_extra_info)
    backend = engine.dialect.name
    last_error: Exception | None = None
    needs_plan = False
    replans = 0
    commit_starting()
    for attempt in range(retry.max_retry_count + 1):
        if attempt:
            wait = retry.wait_seconds(attempt - 1)
            log.debug("commit attempt %d failed (%s); retrying in %.3fs", attempt, last_error, wait)
            time.sleep(wait)
        if needs_plan:
            assert replan is not None
            plan = replan()
            replans += 1
            if plan is None:
                return CommitResult(None, attempt, skipped=True, replans=replans)
            apply, base_snapshot_id, needs_plan = plan.apply, plan.base_snapshot_id, False
        try:
            conn = engine.connect().execution_options(ducklake_write=True)
        except DBAPIError as e:
            last_error = e
            wait_for_catalog(engine, retry, e)
            continue
        with conn:
            committing = False
            ctx = None
            try:
                with conn.begin():
                    _take_commit_lock(conn, backend)
                    head, fmt = reader.head_and_format(conn)
                    ctx = CommitContext(
                        conn=conn,
                        base=head,
                        snapshot_id=head.snapshot_id + 1,
                        schema_version=head.schema_version,
                        next_catalog_id=head.next_catalog_id,
                        next_file_id=head.next_file_id,
                        data_path=data_path,
                        backend=backend,
                        storage_options=storage_options,
                        planned_snapshot_id=base_snapshot_id,
                        format=fmt,
                    )
                    # The snapshot row goes first: its primary key serialises concurrent committers.
                    conn.execute(
                        insert(T.ducklake_snapshot).values(
                            snapshot_id=ctx.snapshot_id,
                            snapshot_time=ctx.snapshot_time,
                            schema_version=head.schema_version,
                            next_catalog_id=head.next_catalog_id,
                            next_file_id=head.next_file_id,
                        )
                    )
                    with reading(head.snapshot_id):
                        apply(ctx)
                        if finalize is not None:
                            finalize(ctx)
                    if ctx.changes.is_empty():
                        raise StalePlanError(
                            "the commit would change nothing (the rows it planned to change are gone); "
                            "nothing was committed"
                        )
                    if base_snapshot_id is not None and head.snapshot_id > base_snapshot_id:
                        _check_conflicts(conn, base_snapshot_id, ctx)
                    counters = (ctx.schema_version, ctx.next_catalog_id, ctx.next_file_id)
                    if counters != (head.schema_version, head.next_catalog_id, head.next_file_id):
                        conn.execute(
                            update(T.ducklake_snapshot)
                            .where(T.ducklake_snapshot.c.snapshot_id == ctx.snapshot_id)
                            .values(
                                schema_version=ctx.schema_version,
                                next_catalog_id=ctx.next_catalog_id,
                                next_file_id=ctx.next_file_id,
                            )
                        )
                    conn.execute(
                        insert(T.ducklake_snapshot_changes).values(
                            snapshot_id=ctx.snapshot_id,
                            changes_made=ctx.changes.render(),
                            author=author,
                            commit_message=commit_message,
                            commit_extra_info=extra,
                        )
                    )
                    committing = True
                return CommitResult(ctx.snapshot_id, attempt + 1, replans=replans)
            except SkipCommit:
                _discard_attempt_files(ctx)
                return CommitResult(None, attempt + 1, skipped=True, replans=replans)
            except StalePlanError as e:
                _discard_attempt_files(ctx)
                if replan is None:
                    raise
                log.debug("commit attempt %d must be planned again: %s", attempt + 1, e)
                last_error, needs_plan = e, True
            except DuckLakeError:
                _discard_attempt_files(ctx)
                raise
            except DBAPIError as e:
                if committing and not _is_contention(e):
                    # The COMMIT itself failed for a reason other than a lock or key clash: it may have landed.
                    raise CommitStateUnknownError(
                        f"the catalog failed while committing snapshot {ctx.snapshot_id if ctx else '?'}; its outcome "
                        f"is unknown (check lake.snapshots() before retrying): {e.orig}"
                    ) from e
                _discard_attempt_files(ctx)
                if not (_is_contention(e) or is_connection_error(e)):
                    raise CommitFailedError(f"commit failed: {e.orig}") from e
                last_error = e
                if not _is_contention(e):
                    wait_for_catalog(engine, retry, e)
            except BaseException:
                if not committing:
                    _discard_attempt_files(ctx)
                raise
    if isinstance(last_error, StalePlanError):
        raise StalePlanError(
            f"{last_error}; planned again {replans} times against the newest snapshot and the rows kept changing "
            f"under it (max_retry_count={retry.max_retry_count}); retry the operation, or raise option "
            "'max_retry_count'"
        ) from last_error
    if isinstance(last_error, DBAPIError) and not _is_contention(last_error):
        raise CatalogUnreachableError(
            f"the catalog connection failed in all {retry.max_retry_count + 1} commit attempts (last error: "
            f"{last_error.orig}); nothing was committed. Check the database server, then retry"
        )
    raise CommitFailedError(
        f"commit failed after exceeding max_retry_count={retry.max_retry_count} attempts because other writers "
        f"kept committing first (last error: {getattr(last_error, 'orig', last_error)}); "
        "raise option 'max_retry_count' or 'retry_wait_ms'"
    )


# pg_advisory_xact_lock key of a catalog's commits (any constant: advisory locks are per database).
COMMIT_LOCK_KEY = 0x4475636B4C616B65  # "DuckLake"
COMMIT_LOCK_TIMEOUT = "30s"  # as long as SQLite's busy timeout


def _take_commit_lock(conn: Connection, backend: str) -> None:
    """Queue this library's committers on PostgreSQL, as ``BEGIN IMMEDIATE`` does on SQLite.

    Without it concurrent committers all read the same head, all insert the same snapshot id, and all but one
    lose on its primary key and retry after a backoff, so a writer can lose every time while others stream in.
    Writers that do not take it (DuckDB) still collide on the primary key, as before.
    """
    if backend == "postgresql":
        conn.exec_driver_sql(f"SET LOCAL lock_timeout = '{COMMIT_LOCK_TIMEOUT}'")
        conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({COMMIT_LOCK_KEY})")


def _check_conflicts(conn: Connection, base_snapshot_id: int, ctx: CommitContext) -> None:
    """Raise CommitConflictError for a snapshot after the base that conflicts with ``ctx.changes``."""
    for other in reader.snapshot_changes_after(conn, base_snapshot_id):
        reason = ctx.changes.conflict_with(other.changes)
        if reason is not None:
            raise CommitConflictError(
                f"transaction conflict with snapshot {other.snapshot_id}: {reason}; "
                "re-read the table and retry the operation"
            )


def _discard_attempt_files(ctx: CommitContext | None) -> None:
    if ctx is not None and ctx.attempt_files:
        from pyspark_ducklake.io.fileio import delete_files

        delete_files(ctx.attempt_files, ctx.storage_options)
        ctx.attempt_files.clear()


# PostgreSQL SQLSTATEs of a writer that lost a race; the attempt rolled back and can simply run again:
# unique_violation (the snapshot row, or two CREATE TABLE IF NOT EXISTS), serialization_failure, deadlock_detected,
# lock_not_available.
CONTENTION_SQLSTATES = frozenset({"23505", "40001", "40P01", "55P03"})
# The server is going away or not accepting connections yet (class 08 is connection_exception): admin_shutdown,
# crash_shutdown, cannot_connect_now, too_many_connections.
CONNECTION_SQLSTATES = frozenset({"57P01", "57P02", "57P03", "53300"})
# SQLite result codes: SQLITE_BUSY and SQLITE_LOCKED (primary, also covering BUSY_SNAPSHOT etc.), and the
# extended SQLITE_CONSTRAINT_PRIMARYKEY / _UNIQUE (the snapshot row).
SQLITE_CONTENTION_CODES = frozenset({5, 6})
SQLITE_CONTENTION_EXTENDED = frozenset({1555, 2067})
# SQLITE_IOERR and SQLITE_CANTOPEN: the file (or the share it lives on) cannot be read or opened right now.
SQLITE_CONNECTION_CODES = frozenset({10, 14})
# Only for errors a driver gives no code for (psycopg2's client-side errors, sqlite3 before Python 3.11).
_CONTENTION_WORDS: tuple[str, ...] = ("unique", "primary key", "duplicate key", "conflict", "concurrent", "locked")
_CONTENTION_WORDS += ("busy", "serializ", "deadlock", "could not obtain lock")
_CONNECTION_WORDS: tuple[str, ...] = ("connection", "server closed", "terminating", "could not connect", "timeout")
_CONNECTION_WORDS += ("the database system",)


def _sqlstate(e: DBAPIError) -> str | None:
    """The PostgreSQL SQLSTATE (psycopg2's ``pgcode``, psycopg 3's ``sqlstate``), or None."""
    code = getattr(e.orig, "pgcode", None) or getattr(e.orig, "sqlstate", None)
    return code if isinstance(code, str) and code else None


def _sqlite_code(e: DBAPIError) -> int | None:
    """The SQLite extended result code (``sqlite_errorcode``, Python 3.11+), or None."""
    code = getattr(e.orig, "sqlite_errorcode", None)
    return code if isinstance(code, int) else None


def _is_contention(e: DBAPIError) -> bool:
    """Another writer won: a snapshot-id clash, a lock, or a serialisation failure (the attempt rolled back).

    Decided by the SQLSTATE (PostgreSQL) or the result code (SQLite); by the message only when the driver gives
    neither.
    """
    state = _sqlstate(e)
    if state is not None:
        return state in CONTENTION_SQLSTATES
    code = _sqlite_code(e)
    if code is not None:
        return code & 0xFF in SQLITE_CONTENTION_CODES or code in SQLITE_CONTENTION_EXTENDED
    message = str(e.orig).lower()
    return any(word in message for word in _CONTENTION_WORDS)


def is_connection_error(e: DBAPIError) -> bool:
    """The catalog went away (outage, restart): worth retrying with backoff while the attempt had not committed.

    Decided by SQLAlchemy's disconnect detection, the SQLSTATE (PostgreSQL) or the result code (SQLite); by the
    message only when the driver gives no code (psycopg2 reports refused and dropped connections without one).
    """
    if getattr(e, "connection_invalidated", False):
        return True
    state = _sqlstate(e)
    if state is not None:
        return state.startswith("08") or state in CONNECTION_SQLSTATES
    code = _sqlite_code(e)
    if code is not None:
        return code & 0xFF in SQLITE_CONNECTION_CODES
    message = str(e.orig).lower()
    return any(word in message for word in _CONNECTION_WORDS)


# Longest single wait between probes of an unreachable catalog.
RECONNECT_MAX_WAIT_S = 5.0
_T = TypeVar("_T")


def wait_for_catalog(engine: Engine, retry: RetryConfig, error: Exception) -> None:
    """After a refused or lost connection, probe the catalog with backoff until it answers again.

    Raises:
        CatalogUnreachableError: still unreachable after ``retry.reconnect_timeout`` seconds.
    """

    def probe() -> None:
        with engine.connect() as conn:
            conn.exec_driver_sql("SELECT 1")

    retry_while_unreachable(probe, retry, error)


def retry_while_unreachable(attempt: Callable[[], _T], retry: RetryConfig, error: Exception) -> _T:
    """Call ``attempt`` again, with backoff, while the catalog refuses or drops connections (``error`` was the
    first such failure); its result once it gets through.

    Waits ``retry_wait_ms x retry_backoff^n x random(0.5..1)`` (at most 5 s) between tries.

    Raises:
        CatalogUnreachableError: still unreachable after ``retry.reconnect_timeout`` seconds.
    """
    deadline = time.monotonic() + retry.reconnect_timeout
    probe = 0
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise CatalogUnreachableError(
                f"the catalog has been unreachable for {retry.reconnect_timeout:g} s (last error: "
                f"{getattr(error, 'orig', error)}); nothing was committed. Check the database server, then retry "
                "(a stream restarts from its checkpoint); option 'reconnect_timeout' sets how long to wait"
            ) from error
        time.sleep(min(retry.wait_seconds(probe), RECONNECT_MAX_WAIT_S, left))
        probe += 1
        try:
            result = attempt()
        except CatalogUnreachableError as e:
            error = e
            continue
        except DBAPIError as e:
            if not is_connection_error(e):
                raise
            error = e
            continue
        if probe > 1:
            log.warning("the catalog is reachable again after %d probes", probe)
        return result


def outcome_unknown(error: BaseException) -> bool:
    """Whether a write that failed with ``error`` may still have committed (or be committing): a COMMIT of unknown
    outcome, an unreachable catalog or a lost connection. Its files must then stay (orphans at worst)."""
    if isinstance(error, CommitStateUnknownError | CatalogUnreachableError):
        return True
    return isinstance(error, DBAPIError) and is_connection_error(error)


def run_through_outages(
    attempt: Callable[[], _T], retry: RetryConfig, on_loss: Callable[[Exception], None], what: str
) -> _T:
    """Run ``attempt``; after a lost catalog connection or a COMMIT of unknown outcome call ``on_loss(error)`` (log,
    wait for the catalog) and run it again, up to ``max_retry_count`` times. ``attempt`` must be safe to repeat (a
    sink's replay check finds a batch that did land).

    Raises:
        CatalogUnreachableError: the connection kept failing; ``what`` names the work in the message.
    """
    error: Exception | None = None
    for _ in range(max(retry.max_retry_count, 1)):
        try:
            return attempt()
        except CommitStateUnknownError as e:
            error = e
        except DBAPIError as e:
            if not is_connection_error(e):
                raise
            error = e
        on_loss(error)
    raise CatalogUnreachableError(
        f"the catalog connection kept failing during {what} ({error}); restart the query from its checkpoint once "
        "the database is stable"
    ) from error
