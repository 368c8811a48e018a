"""Counting what the catalog is asked, deterministically: statements, the rows each read returns, and on SQLite the
work the database did for them (virtual-machine steps, which a full table scan makes grow with the table).

The shape tests and the history benchmark compare these counts on lakes of different history lengths: work that
grows with history shows as rows returned, statements run or (SQLite) steps taken that grow with it.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Engine, event

# Not catalog work: transaction control, PostgreSQL's read snapshot and commit lock, SQLite's table probes.
_CONTROL = ("BEGIN", "COMMIT", "ROLLBACK", "SET ", "SELECT PG_ADVISORY_XACT_LOCK", "PRAGMA", "SAVEPOINT", "RELEASE")
STEP = 10  # SQLite virtual-machine instructions per progress-handler call


@dataclass
class Query:
    """One statement the catalog ran, and the rows it returned (-1: a write)."""

    sql: str
    rows: int
    steps: int = 0  # SQLite steps from its start until the next statement (its fetches included)
    statement: str = ""  # as sent to the database, with its parameters: a read can be run again (replay)
    parameters: Any = None

    def table(self) -> str:
        """The first table the statement names (after FROM, INTO or UPDATE)."""
        words = self.sql.replace("(", " ").split()
        for i, word in enumerate(words[:-1]):
            if word.upper() in ("FROM", "INTO", "UPDATE"):
                return words[i + 1].strip('"').split(".")[-1]
        return "?"


@dataclass
class Queries:
    """What the catalog ran while counting."""

    all: list[Query] = field(default_factory=list)
    steps: int = 0  # SQLite only: virtual-machine instructions, in units of STEP (0 on other databases)
    _paused: bool = False

    @property
    def reads(self) -> list[Query]:
        return [q for q in self.all if q.rows >= 0]

    @property
    def statements(self) -> int:
        return len(self.all)

    @property
    def rows(self) -> int:
        """Rows returned by every read."""
        return sum(q.rows for q in self.reads)

    def by_table(self) -> dict[str, int]:
        """Rows returned per table read (the statement's first table)."""
        out: dict[str, int] = {}
        for q in self.reads:
            out[q.table()] = out.get(q.table(), 0) + q.rows
        return out

    def shape(self) -> tuple[int, dict[str, int]]:
        """``(statements, rows per table)``: what must not grow with history."""
        return self.statements, self.by_table()

    def summary(self) -> str:
        lines = [
            f"{self.statements} statements, {self.rows} rows read, {self.steps * STEP} SQLite steps (rows, steps:)"
        ]
        lines += [f"  {q.rows:>7} {q.steps * STEP:>7}  {q.sql[:200]}" for q in self.all]
        return "\n".join(lines)


@contextmanager
def counting(engine: Engine | None = None) -> Iterator[Queries]:
    """Count the catalog statements ``engine`` (None: every engine, those a call opens for itself too) runs inside
    the block, the rows each read returns and (SQLite) the virtual-machine steps they take, fetching included.

    The rows of a read are counted by running ``SELECT count(*)`` over it on the same connection, with the same
    parameters and in the same transaction, right after it ran, so nothing depends on how its caller fetches them.
    """
    seen = Queries()
    hooked: list[Any] = []

    current: list[Query | None] = [None]  # the statement the steps are counted for (None: a control statement)

    def tick() -> int:
        if not seen._paused:
            seen.steps += 1
            query = current[0]
            if query is not None:
                query.steps += 1
        return 0

    def before(conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, executemany: bool) -> None:
        dbapi = conn.connection.dbapi_connection
        if isinstance(dbapi, sqlite3.Connection) and not any(h is dbapi for h in hooked):
            dbapi.set_progress_handler(tick, STEP)
            hooked.append(dbapi)
        sql = " ".join(statement.split())
        current[0] = (
            None if sql.upper().startswith(_CONTROL) else Query(sql, -1, statement=statement, parameters=parameters)
        )

    def after(conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, executemany: bool) -> None:
        query = current[0]
        if query is None:
            return
        sql = query.sql
        if sql.upper().startswith(("SELECT", "WITH")) and not executemany:
            counter = conn.connection.dbapi_connection.cursor()
            seen._paused = True
            try:
                counter.execute(f"SELECT count(*) FROM ({statement}) AS counted", parameters)
                query.rows = int(counter.fetchone()[0])
            finally:
                counter.close()
                seen._paused = False
        seen.all.append(query)

    target: Any = Engine if engine is None else engine
    event.listen(target, "before_cursor_execute", before)
    event.listen(target, "after_cursor_execute", after)
    try:
        yield seen
    finally:
        event.remove(target, "before_cursor_execute", before)
        event.remove(target, "after_cursor_execute", after)
        for dbapi in hooked:
            try:
                dbapi.set_progress_handler(None, STEP)
            except sqlite3.ProgrammingError:
                pass  # closed already
