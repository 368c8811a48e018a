"""Which micro-batch each streaming writer last committed to each table (the idempotency record).

Kept in its own catalog table, ``pyspark_ducklake_app_progress``, keyed by (app_id, table_id) and updated in the
same database transaction as the snapshot it describes, so the check is one primary-key lookup however many
snapshots exist (Delta Lake keeps the same record as ``txn`` actions). DuckDB ignores the table; DuckDB users see
the same facts in ``commit_extra_info`` of ``snapshots()``.
"""

from __future__ import annotations

from sqlalchemy import BigInteger, Column, Connection, Engine, MetaData, String, Table, insert, select, update
from sqlalchemy.exc import DBAPIError
from sqlalchemy.schema import CreateTable

from pyspark_ducklake.catalog import dialects
from pyspark_ducklake.catalog.reader import latest_snapshot

PROGRESS_TABLE = "pyspark_ducklake_app_progress"

_md = MetaData()
app_progress = Table(
    PROGRESS_TABLE,
    _md,
    Column("app_id", String, primary_key=True),
    Column("table_id", BigInteger, primary_key=True, autoincrement=False),
    Column("batch_id", BigInteger, nullable=False),
    Column("snapshot_id", BigInteger, nullable=False),
)


def ensure_progress_table(engine: Engine) -> None:
    """Create the progress table unless it exists.

    PostgreSQL's ``CREATE TABLE IF NOT EXISTS`` is not atomic against a concurrent creator (a second sink starting
    at the same moment gets a unique violation on ``pg_type``), so a failure is fine when the table now exists.
    """
    try:
        with engine.connect().execution_options(ducklake_write=True) as conn, conn.begin():
            conn.execute(CreateTable(app_progress, if_not_exists=True))
    except DBAPIError:
        with engine.connect() as conn:
            if not dialects.has_table(conn, PROGRESS_TABLE):
                raise


def last_batch(conn: Connection, app_id: str, table_id: int) -> tuple[int, int] | None:
    """``(batch_id, snapshot_id)`` of the app's last committed batch into the table, or None."""
    p = app_progress
    row = conn.execute(
        select(p.c.batch_id, p.c.snapshot_id).where(p.c.app_id == app_id, p.c.table_id == table_id)
    ).first()
    return None if row is None else (int(row.batch_id), int(row.snapshot_id))


def record_batch(conn: Connection, app_id: str, table_id: int, batch_id: int, snapshot_id: int) -> None:
    p = app_progress
    changed = dialects.changed_rows(
        conn,
        update(p)
        .where(p.c.app_id == app_id, p.c.table_id == table_id)
        .values(batch_id=batch_id, snapshot_id=snapshot_id),
    )
    if not changed:
        conn.execute(insert(p).values(app_id=app_id, table_id=table_id, batch_id=batch_id, snapshot_id=snapshot_id))


def record_unchanged(engine: Engine, app_id: str, table_id: int, batch_id: int) -> int:
    """Record a batch that changed nothing, so its replay is skipped unread; it makes no snapshot (DuckDB makes none
    for a change of nothing), so it is recorded against the newest one, in a transaction of its own. A later batch
    already recorded stays.

    Returns:
        The snapshot it was recorded against.
    """
    with engine.connect().execution_options(ducklake_write=True) as conn, conn.begin():
        snapshot = latest_snapshot(conn).snapshot_id
        last = last_batch(conn, app_id, table_id)
        if last is None or last[0] < batch_id:
            record_batch(conn, app_id, table_id, batch_id, snapshot)
        return snapshot
