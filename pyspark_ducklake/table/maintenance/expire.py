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

from pyspark_ducklake._faults import expire_batch_committed
from pyspark_ducklake.catalog import expiry, reader
from pyspark_ducklake.catalog.db import Connection, DBAPIError, Engine
from pyspark_ducklake.catalog.paths import is_inside, normalize
from pyspark_ducklake.catalog.transaction import now_utc
from pyspark_ducklake.exceptions import CommitFailedError, DataFileError, InvalidOptionError
from pyspark_ducklake.io.fileio import delete_files, file_size
from pyspark_ducklake.options import parse_duration, parse_int, parse_snapshot_id
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
    """Snapshots expired (or, in a dry run, that would be) and what that scheduled for deletion.

    The expired ids are kept as ranges (``snapshot_ranges``, first and last of each run of consecutive ids), so a
    report of a million snapshots stays small; :attr:`snapshots` lists them. ``batches``: the database transactions
    it took (each commits its snapshots: an interrupted run keeps the batches before it).
    """

    operation: ClassVar[str] = "expire_snapshots"
    snapshot_ranges: tuple[tuple[int, int], ...] = ()
    expired: int = 0
    files_scheduled: tuple[str, ...] = ()
    bytes_scheduled: int = 0
    tables_removed: tuple[int, ...] = ()
    not_found: tuple[int, ...] = ()
    batches: int = 0
    complete: bool = True  # False: a run limited by max_batches stopped with snapshots left to expire

    @property
    def snapshots(self) -> tuple[int, ...]:
        """The expired snapshot ids, ascending."""
        return tuple(i for first, last in self.snapshot_ranges for i in range(first, last + 1))

    def extra_dict(self) -> dict[str, Any]:
        # the ids themselves while few; a long run is told by its ranges alone
        return {"snapshots": list(self.snapshots)} if self.expired <= LISTED_IDS else {}

    def summary(self) -> str:
        missing = ""
        if self.not_found:
            listed = ", ".join(str(s) for s in self.not_found[:20]) + (", ..." if len(self.not_found) > 20 else "")
            missing = f"; no snapshot {listed} (never existed or already expired)"
        if not self.expired:
            return "expire_snapshots: no snapshot to expire" + missing
        verb = "would expire" if self.dry_run else "expired"
        shown = []
        for first, last in self.snapshot_ranges[:20]:
            shown.append(str(first) if first == last else f"{first}..{last}")
        ids = ", ".join(shown) + (", ..." if len(self.snapshot_ranges) > 20 else "")
        more = "" if self.complete else "; more are due: run it again"
        return (
            f"expire_snapshots: {verb} {self.expired} snapshots ({ids}); "
            f"{len(self.files_scheduled)} files ({self.bytes_scheduled} bytes) scheduled for deletion" + missing + more
        )


LISTED_IDS = 10_000  # ExpireReport.to_dict() lists the expired ids up to this many
DEFAULT_BATCH_SIZE = 1000  # snapshots expired per database transaction


class _Ranges:
    """Ascending snapshot ids kept as runs of consecutive ids."""

    def __init__(self) -> None:
        self.runs: list[list[int]] = []
        self.count = 0

    def add(self, ids: Sequence[int]) -> None:
        for i in ids:
            if self.runs and self.runs[-1][1] + 1 == i:
                self.runs[-1][1] = i
            else:
                self.runs.append([i, i])
            self.count += 1

    def frozen(self) -> tuple[tuple[int, int], ...]:
        return tuple((a, b) for a, b in self.runs)


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
    batch_size: int = DEFAULT_BATCH_SIZE,
    max_batches: int | None = None,
) -> ExpireReport:
    """Expire the snapshots committed before ``older_than``, or those in ``versions``, ``batch_size`` at a time.

    With neither, the catalog's ``expire_older_than`` option (an interval) applies, and without it nothing happens,
    as in the reference. The newest snapshot is never expired. Each batch is one catalog transaction, oldest
    snapshots first, which removes its snapshots and what only they referenced: writers wait at most one batch, an
    interrupted run keeps the batches it committed (running it again finishes the job), and memory holds one batch,
    not the history. ``max_batches`` stops after that many (the report says whether more are due). A dry run makes
    the same changes in one transaction and rolls it back.

    Raises:
        InvalidOptionError: both criteria, an unparseable value, ``versions`` naming the current snapshot, or a
            batch size or count below 1.
        CommitFailedError: the catalog refused a batch; the batches before it stay expired, nothing of it does.
    """
    if older_than is not None and versions is not None:
        raise InvalidOptionError("expire_snapshots: pass either older_than or versions, not both")
    batch_size = parse_int(batch_size, "batch_size", minimum=1)
    if max_batches is not None:
        max_batches = parse_int(max_batches, "max_batches", minimum=1)
    wanted = None if versions is None else sorted(_snapshot_ids(versions))
    cutoff: dt.datetime | None = None
    if wanted is None:
        with engine.connect() as conn:
            if older_than is None:
                configured = reader.metadata_value(conn, "expire_older_than")
                if not configured:
                    return _logged(ExpireReport(dry_run=dry_run))
                older_than = parse_interval(configured, name="expire_older_than")
        cutoff = cutoff_time(older_than, name="older_than")
    run = _Run(data_path, cutoff, wanted, batch_size, dry_run)
    try:
        if dry_run:
            with engine.connect().execution_options(ducklake_write=True) as conn:
                transaction = conn.begin()
                try:
                    while run.batch(conn) and (max_batches is None or run.batches < max_batches):
                        pass
                finally:
                    transaction.rollback()
        else:
            more = True
            while more and (max_batches is None or run.batches < max_batches):
                with engine.connect().execution_options(ducklake_write=True) as conn, conn.begin():
                    more = run.batch(conn)
                if more:
                    expire_batch_committed(run.batches)
            run.complete = not more
    except DBAPIError as e:
        done = (
            f"{run.ids.count} snapshots expired in {run.batches} earlier batches stay expired; "
            if run.ids.count
            else ""
        )
        raise CommitFailedError(
            f"expire_snapshots failed: {e.orig}; {done}nothing of the failed batch was expired; run it again"
        ) from e
    return _logged(run.report())


def _logged(report: ExpireReport) -> ExpireReport:
    report.log()
    return report


class _Run:
    """One expiry, batch by batch: what is expired so far, and where the next batch starts."""

    def __init__(
        self, data_path: str, cutoff: dt.datetime | None, wanted: list[int] | None, batch_size: int, dry_run: bool
    ) -> None:
        self.data_path = data_path
        self.cutoff = cutoff
        self.wanted = wanted
        self.batch_size = batch_size
        self.dry_run = dry_run
        self.after = -1  # the next batch considers snapshots after this id
        self.ids = _Ranges()
        self.files: list[str] = []
        self.bytes = 0
        self.tables: list[int] = []
        self.not_found: list[int] = []
        self.batches = 0
        self.complete = True

    def batch(self, conn: Connection) -> bool:
        """Expire the next batch in the caller's transaction; False when nothing was left to consider.

        Raises:
            InvalidOptionError: ``versions`` names the current snapshot.
        """
        latest = reader.latest_snapshot(conn).snapshot_id
        if self.wanted is not None:
            pending = [i for i in self.wanted if i > self.after][: self.batch_size]
            if not pending:
                return False
            if latest in pending:
                raise InvalidOptionError(
                    f"cannot expire snapshot {latest}: it is the current snapshot of the lake; expire older ones"
                )
            existing = expiry.existing_snapshots(conn, pending)
            self.not_found += [i for i in pending if i not in existing]
            chosen = [i for i in pending if i in existing]
            self.after = pending[-1]
        else:
            assert self.cutoff is not None
            rows = expiry.snapshots_before(conn, self.cutoff, after=self.after, limit=self.batch_size)
            if not rows:
                return False
            self.after = int(rows[-1].snapshot_id)
            chosen = [
                int(r.snapshot_id)
                for r in rows
                if r.snapshot_id != latest and r.snapshot_time is not None and r.snapshot_time < self.cutoff
            ]
        if chosen:
            removed = expiry.remove_snapshots(conn, self.data_path, chosen)
            self.ids.add(chosen)
            self.files += removed.files_scheduled
            self.bytes += removed.bytes_scheduled
            self.tables += removed.tables_removed
        self.batches += 1
        return True

    def report(self) -> ExpireReport:
        return ExpireReport(
            dry_run=self.dry_run,
            snapshot_ranges=self.ids.frozen(),
            expired=self.ids.count,
            files_scheduled=tuple(self.files),
            bytes_scheduled=self.bytes,
            tables_removed=tuple(self.tables),
            not_found=tuple(self.not_found),
            batches=self.batches,
            complete=self.complete,
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
    batch_size: int = DEFAULT_BATCH_SIZE,
) -> CleanupReport:
    """Delete the files scheduled for deletion before ``older_than`` (or all of them with ``cleanup_all``).

    Without either, the catalog's ``delete_older_than`` option applies (default two days). A scheduled file that a
    data or delete file row still references is kept. Files are deleted first, then their rows; a file that cannot
    be deleted keeps its row for the next run. A row pointing outside the data path (``..`` segments, an absolute
    path elsewhere, a symbolic link out) is never acted on: it is reported in ``outside_data_path``, logged, and kept.
    The scheduled rows are worked through ``batch_size`` at a time (memory holds one batch).

    Raises:
        InvalidOptionError: both ``older_than`` and ``cleanup_all``, an unparseable value, or a batch size below 1.
    """
    if older_than is not None and cleanup_all:
        raise InvalidOptionError("cleanup_old_files: pass either older_than or cleanup_all, not both")
    batch_size = parse_int(batch_size, "batch_size", minimum=1)
    cutoff: dt.datetime | None = None
    if not cleanup_all:
        if older_than is None:
            with engine.connect() as conn:
                configured = reader.metadata_value(conn, "delete_older_than") or DEFAULT_DELETE_OLDER_THAN
            older_than = parse_interval(configured, name="delete_older_than")
        cutoff = cutoff_time(older_than, name="older_than")
    deleted: list[str] = []
    nbytes = 0
    missing: list[str] = []
    failed: set[str] = set()
    kept: list[str] = []
    outside: list[str] = []
    after: int | None = None
    while True:
        with engine.connect() as conn:
            rows = expiry.scheduled_files(conn, after=after, limit=batch_size)
            if not rows:
                break
            numbered = [int(r.data_file_id) for r in rows if r.data_file_id is not None]
            after = max([-1 if after is None else after, *numbered])
            due = [
                (r, reader.resolve(data_path, r.path, r.path_is_relative))
                for r in rows
                if cutoff is None or (r.schedule_start is not None and r.schedule_start < cutoff)
            ]
            # A catalog is not trusted input: only files inside the data path are ever deleted.
            for _, path in due:
                if not is_inside(path, data_path):
                    log.warning(
                        "cleanup_old_files: %s is scheduled for deletion but lies outside the data path; kept", path
                    )
                    outside.append(path)
            due = [(r, normalize(p)) for r, p in due if is_inside(p, data_path)]
            referenced = {normalize(p) for p in reader.referenced_among(conn, data_path, [p for _, p in due])}
        kept += [p for _, p in due if p in referenced]
        due = [(r, p) for r, p in due if p not in referenced]
        sizes: dict[str, int] = {}
        for _, path in due:
            try:
                sizes[path] = file_size(path, storage_options)
            except DataFileError:
                continue  # already gone: only the row is left to remove
        batch_failed: set[str] = set()
        if not dry_run and due:
            batch_failed = set(delete_files(list(sizes), storage_options))
            done = [r for r, p in due if p not in batch_failed]
            with engine.connect().execution_options(ducklake_write=True) as conn, conn.begin():
                expiry.unschedule(conn, done)
        failed |= batch_failed
        gone = [p for p in sizes if p not in batch_failed]
        deleted += gone
        nbytes += sum(sizes[p] for p in gone)
        missing += [p for _, p in due if p not in sizes]
        if len(numbered) < batch_size:
            break
    report = CleanupReport(
        dry_run=dry_run,
        files=tuple(deleted),
        bytes=nbytes,
        missing=tuple(missing),
        failed=tuple(sorted(failed)),
        still_referenced=tuple(kept),
        outside_data_path=tuple(outside),
        cutoff=None if cutoff is None else cutoff.isoformat(),
    )
    report.log()
    return report
