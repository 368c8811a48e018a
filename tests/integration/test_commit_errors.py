"""The commit protocol tells a lost race, a lost connection and a real failure apart by the database's own codes.

Every error here is provoked from a real PostgreSQL or SQLite database and classified by
``catalog.transaction._is_contention`` (retry at once) and ``is_connection_error`` (wait for the catalog, then retry):
by SQLSTATE on PostgreSQL and by result code on SQLite, never by words that happen to be in a message (a table
called ``connection_log`` or a value called ``unique`` must not make an error look retryable).
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Connection, Engine, create_engine, text
from sqlalchemy.exc import DBAPIError

import pyspark_ducklake as pdl
from pyspark_ducklake.catalog.transaction import RetryConfig, _is_contention, is_connection_error, run_commit
from pyspark_ducklake.exceptions import CommitFailedError
from tests.support.catalogs import PgServer, create_database, drop_database

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def pg(pg_server: PgServer, pg_admin: Engine) -> Iterator[Engine]:
    database = create_database(pg_admin)
    engine = create_engine(
        f"postgresql+psycopg2://{pg_server.user}@{pg_server.host}:{pg_server.port}/{database}", pool_pre_ping=False
    )
    yield engine
    engine.dispose()
    drop_database(pg_admin, database)


@pytest.fixture
def lite(tmp_path: Path) -> Iterator[Engine]:
    engine = create_engine(f"sqlite:///{tmp_path / 'x.sqlite'}", connect_args={"timeout": 0.05})
    yield engine
    engine.dispose()


def provoke(engine: Engine, setup: str, failing: str) -> DBAPIError:
    with engine.connect() as conn:
        for statement in filter(None, (s.strip() for s in setup.split(";"))):
            conn.execute(text(statement))
        conn.commit()
        with pytest.raises(DBAPIError) as caught:
            conn.execute(text(failing))
        conn.rollback()
    return caught.value


def kinds(e: DBAPIError) -> tuple[bool, bool]:
    return _is_contention(e), is_connection_error(e)


CONTENTION = (True, False)
CONNECTION = (False, True)
NEITHER = (False, False)


# --- PostgreSQL -------------------------------------------------------------------------------------------------


def test_pg_unique_violation_is_contention(pg: Engine) -> None:
    e = provoke(pg, "CREATE TABLE s (id BIGINT PRIMARY KEY); INSERT INTO s VALUES (1)", "INSERT INTO s VALUES (1)")
    assert e.orig.pgcode == "23505" and kinds(e) == CONTENTION


def test_pg_not_null_violation_is_not_contention(pg: Engine) -> None:
    e = provoke(pg, "CREATE TABLE s (id BIGINT NOT NULL)", "INSERT INTO s VALUES (NULL)")
    assert e.orig.pgcode == "23502" and kinds(e) == NEITHER


def test_pg_lock_timeout_is_contention(pg: Engine) -> None:
    with pg.connect() as holder:
        holder.execute(text("CREATE TABLE s (id BIGINT)"))
        holder.commit()
        holder.execute(text("LOCK TABLE s IN ACCESS EXCLUSIVE MODE"))
        e = provoke(pg, "SET lock_timeout = '50ms'", "SELECT * FROM s")
        holder.rollback()
    assert e.orig.pgcode == "55P03" and kinds(e) == CONTENTION


def test_pg_serialization_failure_is_contention(pg: Engine) -> None:
    with pg.connect() as setup:
        setup.execute(text("CREATE TABLE s (id BIGINT PRIMARY KEY, v BIGINT)"))
        setup.execute(text("INSERT INTO s VALUES (1, 0)"))
        setup.commit()
    with pg.connect() as first, pg.connect() as second:
        first.execute(text("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ"))
        first.execute(text("SELECT * FROM s")).all()
        second.execute(text("UPDATE s SET v = 1"))
        second.commit()
        with pytest.raises(DBAPIError) as caught:
            first.execute(text("UPDATE s SET v = 2"))
    assert caught.value.orig.pgcode == "40001" and kinds(caught.value) == CONTENTION


def test_pg_deadlock_is_contention(pg: Engine) -> None:
    with pg.connect() as setup:
        setup.execute(text("CREATE TABLE s (id BIGINT PRIMARY KEY, v BIGINT)"))
        setup.execute(text("INSERT INTO s VALUES (1, 0), (2, 0)"))
        setup.commit()
    errors: list[DBAPIError] = []

    def lock_then(conn: Connection, first: int, second: int, ready: threading.Barrier) -> None:
        conn.execute(text(f"UPDATE s SET v = 1 WHERE id = {first}"))
        ready.wait()
        try:
            conn.execute(text(f"UPDATE s SET v = 1 WHERE id = {second}"))
        except DBAPIError as e:
            errors.append(e)
        conn.rollback()

    ready = threading.Barrier(2)
    with pg.connect() as a, pg.connect() as b:
        threads = [
            threading.Thread(target=lock_then, args=(a, 1, 2, ready)),
            threading.Thread(target=lock_then, args=(b, 2, 1, ready)),
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=30)
    assert len(errors) == 1 and errors[0].orig.pgcode == "40P01" and kinds(errors[0]) == CONTENTION


def test_pg_missing_table_named_like_a_connection_is_neither(pg: Engine) -> None:
    e = provoke(pg, "", "SELECT * FROM connection_log")
    assert e.orig.pgcode == "42P01" and kinds(e) == NEITHER  # the message says "connection"


def test_pg_error_whose_message_says_unique_is_neither(pg: Engine) -> None:
    e = provoke(pg, "", "DO $$ BEGIN RAISE EXCEPTION 'unique deadlock conflict on connection'; END $$")
    assert e.orig.pgcode == "P0001" and kinds(e) == NEITHER


def test_pg_terminated_backend_is_a_connection_error(pg: Engine) -> None:
    with pg.connect() as victim:
        pid = victim.execute(text("SELECT pg_backend_pid()")).scalar()
        with pg.connect() as killer:
            killer.execute(text(f"SELECT pg_terminate_backend({pid})"))
        time.sleep(0.2)
        with pytest.raises(DBAPIError) as caught:
            victim.execute(text("SELECT 1"))
    assert kinds(caught.value) == CONNECTION


def test_pg_refused_connection_is_a_connection_error(pg_server: PgServer) -> None:
    engine = create_engine(f"postgresql+psycopg2://{pg_server.user}@127.0.0.1:1/postgres")
    with pytest.raises(DBAPIError) as caught:
        engine.connect()
    assert caught.value.orig.pgcode is None and kinds(caught.value) == CONNECTION  # no code: the message decides


# --- SQLite -----------------------------------------------------------------------------------------------------


def test_sqlite_primary_key_and_unique_clashes_are_contention(lite: Engine) -> None:
    pk = provoke(lite, "CREATE TABLE s (id BIGINT PRIMARY KEY); INSERT INTO s VALUES (1)", "INSERT INTO s VALUES (1)")
    unique = provoke(lite, "CREATE TABLE u (id BIGINT UNIQUE); INSERT INTO u VALUES (1)", "INSERT INTO u VALUES (1)")
    assert pk.orig.sqlite_errorname == "SQLITE_CONSTRAINT_PRIMARYKEY" and kinds(pk) == CONTENTION
    assert unique.orig.sqlite_errorname == "SQLITE_CONSTRAINT_UNIQUE" and kinds(unique) == CONTENTION


def test_sqlite_not_null_violation_is_not_contention(lite: Engine) -> None:
    e = provoke(lite, "CREATE TABLE s (id BIGINT NOT NULL)", "INSERT INTO s VALUES (NULL)")
    assert e.orig.sqlite_errorname == "SQLITE_CONSTRAINT_NOTNULL" and kinds(e) == NEITHER


def test_sqlite_busy_is_contention(lite: Engine, tmp_path: Path) -> None:
    provoke(lite, "CREATE TABLE s (id BIGINT)", "SELECT * FROM nothing")
    holder = sqlite3.connect(tmp_path / "x.sqlite", isolation_level=None)
    try:
        holder.execute("BEGIN IMMEDIATE")
        e = provoke(lite, "", "INSERT INTO s VALUES (1)")
    finally:
        holder.close()
    assert e.orig.sqlite_errorname == "SQLITE_BUSY" and kinds(e) == CONTENTION


def test_sqlite_unopenable_file_is_a_connection_error(tmp_path: Path) -> None:
    engine = create_engine(f"sqlite:///{tmp_path / 'gone' / 'x.sqlite'}")
    with pytest.raises(DBAPIError) as caught:
        engine.connect()
    assert caught.value.orig.sqlite_errorname == "SQLITE_CANTOPEN" and kinds(caught.value) == CONNECTION


def test_sqlite_missing_table_named_like_a_connection_is_neither(lite: Engine) -> None:
    e = provoke(lite, "", "SELECT * FROM connection_log")
    assert e.orig.sqlite_errorname == "SQLITE_ERROR" and kinds(e) == NEITHER


# --- what the commit loop does with them ------------------------------------------------------------------------


def test_commit_that_breaks_a_constraint_fails_at_once(catalog: Any, caplog: pytest.LogCaptureFixture) -> None:
    lake = pdl.connect(catalog.url, catalog.data_path)
    with lake.engine.connect() as conn:
        conn.execute(text("CREATE TABLE probe (id BIGINT NOT NULL)"))
        conn.commit()
    before = lake.current_snapshot_id()

    def apply(ctx: Any) -> None:
        ctx.conn.execute(text("INSERT INTO probe VALUES (NULL)"))

    caplog.set_level(logging.DEBUG, "pyspark_ducklake.catalog.transaction")
    started = time.monotonic()
    with pytest.raises(CommitFailedError, match=r"(?i)null"):
        run_commit(
            lake.engine,
            apply,
            base_snapshot_id=None,
            data_path=lake.data_path,
            retry=RetryConfig(max_retry_count=5, retry_wait_ms=2000),
        )
    assert time.monotonic() - started < 2  # not retried: a constraint, not a lost race
    assert not [r for r in caplog.records if r.getMessage().startswith("commit attempt")]
    assert lake.current_snapshot_id() == before
    lake.close()
