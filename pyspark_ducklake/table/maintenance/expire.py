"""Expiring snapshots and deleting the files they leave behind, as the reference's ``ducklake_expire_snapshots``
and ``ducklake_cleanup_old_files`` do.

Expiring removes snapshot rows (never the newest) and then, like ``DuckLakeMetadataManager::DeleteSnapshots``, the
metadata only they referenced: data and delete files no remaining snapshot can see leave the catalog and are
scheduled for deletion, dropped tables that no remaining snapshot can see lose all their rows (and inlined tables),
and so do schemas, views, tags and macros. It writes no snapshot. Time travel to an expired snapshot, and a change
feed that needs one, fail from then on.

Cleaning up deletes the files in ``ducklake_files_scheduled_for_deletion`` that were scheduled before a cut-off
(default: the catalog's ``delete_older_than`` option, else two days), then their rows. Readers still working on an
old snapshot keep their files until then.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from pyspark_ducklake.catalog import expiry, reader
from pyspark_ducklake.catalog.db import Connection, DBAPIError, Engine
from pyspark_ducklake.catalog.paths import is_inside, normalize
from pyspark_ducklake.catalog.transaction import now_utc
from pyspark_ducklake.exceptions import CommitFailedError, DataFileError, InvalidOptionError
from pyspark_ducklake.io.fileio import delete_files, file_size
from pyspark_ducklake.options import parse_duration, parse_snapshot_id
from pyspark_ducklake.table.maintenance.orphans import MaintenanceReport, log

DEFAULT_DELETE_OLDER_THAN = "2 days"  # the reference's default for ducklake_cleanup_old_files
When = dt.datetime | dt.date | dt.timedelta | str


def parse_interval(text: str, *, name: str) -> dt.timedelta:
    """A DuckDB-style interval such as ``'2 days'``, ``'1 week'`` or ``'1 hour 30 minutes'``.

    Raises:
        InvalidOptionError: not an interval.
    """
    return parse_duration(text, name, unit=None, what="an interval")


def cutoff_time(when: When, *, name: str) -> dt.datetime:
    """An aware cut-off time from a datetime (naive means UTC), a date (its midnight, UTC), an ISO string, or an
    age before now (a ``timedelta`` or interval text such as ``'7 days'``).

    Raises:
        InvalidOptionError: an unparseable string, a negative or too large age, or another type (a bare number
            would be ambiguous: seconds, hours or a snapshot id?).
    """
    if isinstance(when, str):
        try:
            when = dt.datetime.fromisoformat(when.strip())
        except ValueError:
            try:
                when = parse_duration(when, name, unit=None, what="an ISO time or an interval")
            except InvalidOptionError as e:
                if not str(e).startswith("could not parse"):
                    raise  # an interval, but negative or too large
                raise InvalidOptionError(
                    f"could not parse option {name} as an ISO timestamp or an interval ('7 days'): {when!r}"
                ) from None
    if isinstance(when, dt.timedelta):
        age = parse_duration(when, name)  # never negative: a negative age would reach into the future
        try:
            return now_utc() - age
        except OverflowError:  # older than year 1: nothing is
            return dt.datetime.min.replace(tzinfo=dt.timezone.utc)
    if isinstance(when, dt.datetime):
        return when if when.tzinfo is not None else when.replace(tzinfo=dt.timezone.utc)
    if isinstance(when, dt.date):
        return dt.datetime.combine(when, dt.time(), dt.timezone.utc)
    raise InvalidOptionError(
        f"option {name} must be a datetime, a timedelta, an ISO time or an interval such as '7 days', got {when!r}"
    )


@dataclass(frozen=True)
class ExpireReport(MaintenanceReport):
    """Snapshots expired (or, in a dry run, that would be) and what that scheduled for deletion."""

    operation: ClassVar[str] = "expire_snapshots"
    snapshots: tuple[int, ...] = ()
    files_scheduled: tuple[str, ...] = ()
    bytes_scheduled: int = 0
    tables_removed: tuple[int, ...] = ()
    not_found: tuple[int, ...] = ()

    def summary(self) -> str:
        missing = ""
        if self.not_found:
            listed = ", ".join(str(s) for s in self.not_found[:20]) + (", ..." if len(self.not_found) > 20 else "")
            missing = f"; no snapshot {listed} (never existed or already expired)"
        if not self.snapshots:
            return "expire_snapshots: no snapshot to expire" + missing
        verb = "would expire" if self.dry_run else "expired"
        ids = ", ".join(str(s) for s in self.snapshots[:20]) + (", ..." if len(self.snapshots) > 20 else "")
        return (
            f"expire_snapshots: {verb} {len(self.snapshots)} snapshots ({ids}); "
            f"{len(self.files_scheduled)} files ({self.bytes_scheduled} bytes) scheduled for deletion" + missing
        )


@dataclass(frozen=True)
class CleanupReport(MaintenanceReport):
    """Files scheduled for deletion that were deleted (or, in a dry run, would be)."""

    operation: ClassVar[str] = "cleanup_old_files"
    files: tuple[str, ...] = ()
    bytes: int = 0
    missing: tuple[str, ...] = ()  # already gone from storage: only their rows were removed
    failed: tuple[str, ...] = ()  # could not be deleted: their rows stay for the next run
    still_referenced: tuple[str, ...] = ()  # a data or delete file row still points at them: kept
    outside_data_path: tuple[str, ...] = ()  # the catalog points outside the data path: never deleted, rows kept
    cutoff: str | None = None

    def summary(self) -> str:
        verb = "would delete" if self.dry_run else "deleted"
        text = f"cleanup_old_files: {verb} {len(self.files)} files ({self.bytes} bytes)"
        if self.cutoff:
            text += f" scheduled before {self.cutoff}"
        for label, items in (
            ("already missing", self.missing),
            ("could not be deleted", self.failed),
            ("still referenced, kept", self.still_referenced),
            ("outside the data path, never deleted", self.outside_data_path),
        ):
            if items:
                text += f"; {len(items)} {label}"
        return text


def expire_snapshots(
    engine: Engine,
    data_path: str,
    *,
    older_than: When | None = None,
    versions: Sequence[int] | None = None,
    dry_run: bool = False,
) -> ExpireReport:
    """Expire the snapshots committed before ``older_than``, or those in ``versions``, in one catalog transaction.

    With neither, the catalog's ``expire_older_than`` option (an interval) applies, and without it nothing happens,
    as in the reference. The newest snapshot is never expired. A dry run makes the same changes and rolls them back.

    Raises:
        InvalidOptionError: both criteria, an unparseable value, or ``versions`` naming the current snapshot.
        CommitFailedError: the catalog refused the change; nothing was expired.
    """
    if older_than is not None and versions is not None:
        raise InvalidOptionError("expire_snapshots: pass either older_than or versions, not both")
    try:
        with engine.connect().execution_options(ducklake_write=True) as conn:
            transaction = conn.begin()
            try:
                report = _expire(conn, data_path, older_than, versions, dry_run)
            except BaseException:
                transaction.rollback()
                raise
            if dry_run:
                transaction.rollback()
            else:
                transaction.commit()
    except DBAPIError as e:
        raise CommitFailedError(f"expire_snapshots failed, nothing was expired: {e.orig}; run it again") from e
    report.log()
    return report


def _expire(
    conn: Connection, data_path: str, older_than: When | None, versions: Sequence[int] | None, dry_run: bool
) -> ExpireReport:
    rows = expiry.snapshot_times(conn)
    latest = rows[-1].snapshot_id if rows else None
    not_found: tuple[int, ...] = ()
    if versions is not None:
        wanted = _snapshot_ids(versions)
        if latest in wanted:
            raise InvalidOptionError(
                f"cannot expire snapshot {latest}: it is the current snapshot of the lake; expire older ones"
            )
        existing = {r.snapshot_id for r in rows}
        chosen = sorted(wanted & existing)
        not_found = tuple(sorted(wanted - existing))
    else:
        if older_than is None:
            configured = reader.metadata_value(conn, "expire_older_than")
            if not configured:
                return ExpireReport(dry_run=dry_run)
            older_than = parse_interval(configured, name="expire_older_than")
        cutoff = cutoff_time(older_than, name="older_than")
        chosen = [
            r.snapshot_id
            for r in rows
            if r.snapshot_id != latest and r.snapshot_time is not None and r.snapshot_time < cutoff
        ]
    if not chosen:
        return ExpireReport(dry_run=dry_run, not_found=not_found)
    removed = expiry.remove_snapshots(conn, data_path, chosen)
    return ExpireReport(
        dry_run=dry_run,
        snapshots=tuple(chosen),
        files_scheduled=removed.files_scheduled,
        bytes_scheduled=removed.bytes_scheduled,
        tables_removed=removed.tables_removed,
        not_found=not_found,
    )


def _snapshot_ids(versions: Sequence[int]) -> set[int]:
    """The snapshot ids of ``versions`` (a list of ints).

    Raises:
        InvalidOptionError: not a list, or an item that is not a snapshot id.
    """
    if isinstance(versions, (str, bytes, int)) or not isinstance(versions, Iterable):
        raise InvalidOptionError(f"option versions must be a list of snapshot ids such as [3, 4], got {versions!r}")
    return {parse_snapshot_id(v, "versions", text=False) for v in versions}


def cleanup_old_files(
    engine: Engine,
    data_path: str,
    *,
    older_than: When | None = None,
    cleanup_all: bool = False,
    dry_run: bool = False,
    storage_options: dict[str, Any] | None = None,
) -> CleanupReport:
    """Delete the files scheduled for deletion before ``older_than`` (or all of them with ``cleanup_all``).

    Without either, the catalog's ``delete_older_than`` option applies (default two days). A scheduled file that a
    data or delete file row still references is kept. Files are deleted first, then their rows; a file that cannot
    be deleted keeps its row for the next run. A row pointing outside the data path (``..`` segments, an absolute
    path elsewhere, a symbolic link out) is never acted on: it is reported in ``outside_data_path``, logged, and kept.

    Raises:
        InvalidOptionError: both ``older_than`` and ``cleanup_all``, or an unparseable value.
    """
    if older_than is not None and cleanup_all:
        raise InvalidOptionError("cleanup_old_files: pass either older_than or cleanup_all, not both")
    with engine.connect() as conn:
        cutoff: dt.datetime | None = None
        if not cleanup_all:
            if older_than is None:
                configured = reader.metadata_value(conn, "delete_older_than") or DEFAULT_DELETE_OLDER_THAN
                older_than = parse_interval(configured, name="delete_older_than")
            cutoff = cutoff_time(older_than, name="older_than")
        rows = expiry.scheduled_files(conn)
        referenced = reader.all_referenced_paths(conn, data_path, include_scheduled=False)
    due = [
        (r, reader.resolve(data_path, r.path, r.path_is_relative))
        for r in rows
        if cutoff is None or (r.schedule_start is not None and r.schedule_start < cutoff)
    ]
    # A catalog is not trusted input: only files inside the data path are ever deleted.
    outside = tuple(p for _, p in due if not is_inside(p, data_path))
    for path in outside:
        log.warning("cleanup_old_files: %s is scheduled for deletion but lies outside the data path; kept", path)
    due = [(r, normalize(p)) for r, p in due if is_inside(p, data_path)]
    referenced = {normalize(p) for p in referenced}
    kept = tuple(p for _, p in due if p in referenced)
    due = [(r, p) for r, p in due if p not in referenced]
    sizes: dict[str, int] = {}
    for _, path in due:
        try:
            sizes[path] = file_size(path, storage_options)
        except DataFileError:
            continue  # already gone: only the row is left to remove
    failed: set[str] = set()
    if not dry_run and due:
        failed = set(delete_files(list(sizes), storage_options))
        done = [r for r, p in due if p not in failed]
        with engine.connect().execution_options(ducklake_write=True) as conn, conn.begin():
            expiry.unschedule(conn, done)
    deleted = [p for p in sizes if p not in failed]
    report = CleanupReport(
        dry_run=dry_run,
        files=tuple(deleted),
        bytes=sum(sizes[p] for p in deleted),
        missing=tuple(p for _, p in due if p not in sizes),
        failed=tuple(sorted(failed)),
        still_referenced=kept,
        outside_data_path=outside,
        cutoff=None if cutoff is None else cutoff.isoformat(),
    )
    report.log()
    return report
