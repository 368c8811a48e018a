"""How long a lake keeps its history, and keeping to it on a schedule: what a long-running stream configures.

The lake's retention is two settings of the catalog, DuckLake's own (DuckDB's ``set_option`` writes the same rows,
and its ``ducklake_expire_snapshots``/``ducklake_cleanup_old_files`` without arguments follow them):

* ``expire_older_than``: snapshots committed longer ago than this are expired (none are while it is unset), as
  Delta's ``delta.logRetentionDuration`` bounds its log;
* ``delete_older_than``: files the expired snapshots left are deleted this long after they were scheduled for
  deletion (default two days), as Delta's ``delta.deletedFileRetentionDuration`` keeps them for readers still
  reading an old snapshot.

:func:`apply_retention` expires and cleans up once by them (``pyspark-ducklake retention --apply`` from cron);
a sink given ``expire_older_than`` or ``retention_interval`` does it after a commit every ``retention_interval``
(:class:`RetentionSchedule`), a bounded number of expiry batches at a time. A change-feed stream whose next
snapshots were expired meanwhile fails with ``DataLossError`` (or, with ``failOnDataLoss=false``, skips ahead with a
warning): never a silent gap.
"""

from __future__ import annotations

import datetime as dt
import time
from dataclasses import dataclass
from typing import Any

from pyspark_ducklake.catalog import expiry, reader
from pyspark_ducklake.catalog.db import Engine
from pyspark_ducklake.exceptions import DuckLakeError, InvalidOptionError
from pyspark_ducklake.options import parse_interval as parse_age
from pyspark_ducklake.table.maintenance.expire import (
    DEFAULT_BATCH_SIZE,
    DEFAULT_DELETE_OLDER_THAN,
    CleanupReport,
    ExpireReport,
    cleanup_old_files,
    expire_snapshots,
    parse_interval,
)
from pyspark_ducklake.table.maintenance.orphans import log

EXPIRE_OLDER_THAN = "expire_older_than"
DELETE_OLDER_THAN = "delete_older_than"
RETENTION_INTERVAL_DEFAULT = 3600.0  # seconds between a sink's retention runs
RUN_BATCHES = 20  # expiry batches one scheduled run does at most (the next run goes on where it stopped)


@dataclass(frozen=True)
class Retention:
    """The lake's retention settings as the catalog holds them (None: not set)."""

    expire_older_than: str | None
    delete_older_than: str | None

    def to_dict(self) -> dict[str, Any]:
        return {
            EXPIRE_OLDER_THAN: self.expire_older_than,
            DELETE_OLDER_THAN: self.delete_older_than,
            "delete_older_than_default": DEFAULT_DELETE_OLDER_THAN,
        }

    def summary(self) -> str:
        expire = self.expire_older_than or "not set (snapshots are kept for ever)"
        delete = self.delete_older_than or f"not set ({DEFAULT_DELETE_OLDER_THAN})"
        return f"expire_older_than: {expire}; delete_older_than: {delete}"


def retention(engine: Engine) -> Retention:
    """The lake's retention settings."""
    with engine.connect() as conn:
        return Retention(reader.metadata_value(conn, EXPIRE_OLDER_THAN), reader.metadata_value(conn, DELETE_OLDER_THAN))


def set_retention(
    engine: Engine, *, expire_older_than: str | None = None, delete_older_than: str | None = None
) -> Retention:
    """Set the lake's retention (an interval such as ``'7 days'``; ``''`` unsets it, as in DuckDB), as DuckDB's
    ``CALL lake.set_option('expire_older_than', '7 days')`` does: lake-wide, no snapshot.

    Raises:
        InvalidOptionError: a value that is not an interval; nothing is set.
    """
    given = {EXPIRE_OLDER_THAN: expire_older_than, DELETE_OLDER_THAN: delete_older_than}
    for name, value in given.items():
        if value is not None:
            if not isinstance(value, str):
                raise InvalidOptionError(f"option {name} must be an interval such as '7 days', got {value!r}")
            if value.strip():
                parse_interval(value, name=name)
    with engine.connect().execution_options(ducklake_write=True) as conn, conn.begin():
        for name, value in given.items():
            if value is not None:
                expiry.set_global_option(conn, name, value.strip())
    return retention(engine)


def apply_retention(
    engine: Engine,
    data_path: str,
    *,
    expire_older_than: dt.timedelta | str | None = None,
    delete_older_than: dt.timedelta | str | None = None,
    storage_options: dict[str, Any] | None = None,
    batch_size: int = DEFAULT_BATCH_SIZE,
    max_batches: int | None = None,
    dry_run: bool = False,
) -> tuple[ExpireReport, CleanupReport]:
    """Expire the snapshots older than ``expire_older_than`` (default: the lake's setting; unset: none), then delete
    the files scheduled longer ago than ``delete_older_than`` (default: the lake's setting, else two days).

    Raises:
        InvalidOptionError: an unparseable interval (given or stored).
        CommitFailedError: the catalog refused an expiry batch (the earlier ones stay expired).
    """
    expired = expire_snapshots(
        engine, data_path, older_than=expire_older_than, batch_size=batch_size, max_batches=max_batches, dry_run=dry_run
    )
    cleaned = cleanup_old_files(
        engine, data_path, older_than=delete_older_than, storage_options=storage_options, dry_run=dry_run
    )
    return expired, cleaned


@dataclass(frozen=True)
class RetentionSpec:
    """A sink's retention: every ``interval`` seconds, expire and clean up by these ages (None: the lake's)."""

    interval: float = RETENTION_INTERVAL_DEFAULT
    expire_older_than: dt.timedelta | None = None
    delete_older_than: dt.timedelta | None = None


def retention_spec(parsed: dict[str, object]) -> RetentionSpec | None:
    """The retention among parsed sink options, or None (the sink leaves history alone): on when
    ``expire_older_than`` or ``retention_interval`` is given."""
    expire = parsed.get(EXPIRE_OLDER_THAN)
    interval = parsed.get("retention_interval")
    if expire is None and interval is None:
        if parsed.get(DELETE_OLDER_THAN) is not None:
            raise InvalidOptionError(
                "option delete_older_than sets how long a sink's retention keeps deleted files: give "
                "expire_older_than or retention_interval too (retention is off without them)"
            )
        return None
    return RetentionSpec(
        RETENTION_INTERVAL_DEFAULT if interval is None else float(interval),  # type: ignore[arg-type]
        _age(expire, EXPIRE_OLDER_THAN),
        _age(parsed.get(DELETE_OLDER_THAN), DELETE_OLDER_THAN),
    )


def _age(value: object, name: str) -> dt.timedelta | None:
    return None if value is None else parse_age(value, name)


class RetentionSchedule:
    """Runs a sink's retention after a commit when it is due: the first time right away, then every interval; a
    run that stopped after :data:`RUN_BATCHES` expiry batches with more due goes on after the next commit. A failed
    run is logged and tried again at the next interval: retention never fails the stream."""

    def __init__(self, spec: RetentionSpec) -> None:
        self.spec = spec
        self.next_run = 0.0  # monotonic time
        self.last: tuple[ExpireReport, CleanupReport] | None = None

    def after_commit(self, engine: Engine, data_path: str, storage_options: dict[str, Any] | None) -> None:
        now = time.monotonic()
        if now < self.next_run:
            return
        self.next_run = now + self.spec.interval
        try:
            self.last = apply_retention(
                engine,
                data_path,
                expire_older_than=self.spec.expire_older_than,
                delete_older_than=self.spec.delete_older_than,
                storage_options=storage_options,
                max_batches=RUN_BATCHES,
            )
        except DuckLakeError as e:
            log.warning("retention run failed (tried again in %.0f s): %s", self.spec.interval, e)
            return
        if not self.last[0].complete:
            self.next_run = now  # more snapshots are due: go on after the next commit
