"""Table maintenance that needs both the catalog and storage: finding and removing orphan files.

Every maintenance operation (here, in :mod:`~pyspark_ducklake.table.maintenance.compaction` and
:mod:`~pyspark_ducklake.table.maintenance.expire`) returns a :class:`MaintenanceReport` of what it did, or in a dry
run would do, and logs its summary on the ``pyspark_ducklake.maintenance`` logger.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, ClassVar

from pyspark_ducklake.catalog import reader
from pyspark_ducklake.catalog.db import Engine
from pyspark_ducklake.catalog.paths import is_inside, normalize
from pyspark_ducklake.exceptions import DataFileError
from pyspark_ducklake.io.fileio import abort_upload, delete_files, file_size, incomplete_uploads, list_files
from pyspark_ducklake.io.storage import describe_error
from pyspark_ducklake.options import parse_duration

log = logging.getLogger("pyspark_ducklake.maintenance")

ORPHAN_SAFETY_AGE = dt.timedelta(hours=1)


@dataclass(frozen=True)
class MaintenanceReport:
    """What a maintenance operation did (or, with ``dry_run``, would do); ``to_dict()`` is JSON-ready."""

    operation: ClassVar[str] = "maintenance"
    dry_run: bool = False

    def summary(self) -> str:
        """One line for logs and the command line."""
        raise NotImplementedError

    def extra_dict(self) -> dict[str, Any]:
        """Derived figures added to :meth:`to_dict`."""
        return {}

    def to_dict(self) -> dict[str, Any]:
        return {"operation": self.operation, **dataclasses.asdict(self), **self.extra_dict()}

    def log(self) -> None:
        log.info("%s", self.summary())


@dataclass(frozen=True)
class OrphanReport(MaintenanceReport):
    """Parquet files under the data path that no snapshot references (written by crashed or failed attempts).

    Iterating gives the files deleted (in a dry run, the ones that would be).
    """

    operation: ClassVar[str] = "delete_orphan_files"
    orphans: tuple[str, ...] = ()
    skipped_recent: int = 0
    deleted: tuple[str, ...] = ()
    failed: tuple[str, ...] = ()
    bytes: int = 0
    # S3 multipart uploads under the data path never completed, older than the age: aborted (or would be)
    stale_uploads: tuple[str, ...] = ()

    def __iter__(self) -> Iterator[str]:
        return iter(self.orphans if self.dry_run else self.deleted)

    def __len__(self) -> int:
        return len(self.orphans if self.dry_run else self.deleted)

    def summary(self) -> str:
        verb = "would delete" if self.dry_run else "deleted"
        text = f"delete_orphan_files: {verb} {len(self)} orphan files ({self.bytes} bytes)"
        if self.skipped_recent:
            text += f"; {self.skipped_recent} unreferenced files are younger than the safety age and were kept"
        if self.failed:
            text += f"; {len(self.failed)} could not be deleted"
        if self.stale_uploads:
            text += f"; {'would abort' if self.dry_run else 'aborted'} {len(self.stale_uploads)} incomplete upload(s)"
        return text


def find_orphans(
    engine: Engine,
    data_path: str,
    *,
    older_than: dt.timedelta | float | str = ORPHAN_SAFETY_AGE,
    storage_options: dict[str, Any] | None = None,
) -> OrphanReport:
    """Files under ``data_path`` older than ``older_than`` that the catalog does not reference.

    Younger files are left alone: a writer may be about to commit them.

    Raises:
        InvalidOptionError: ``older_than`` is not a duration (a ``timedelta``, seconds or ``'1 hour'``) or negative.
    """
    older_than = parse_duration(older_than, "older_than")
    with engine.connect() as conn:
        # Catalog paths may be spelled with ./.. or doubled slashes: compare normalised spellings.
        referenced = {normalize(p) for p in reader.all_referenced_paths(conn, data_path)}
    now = dt.datetime.now(dt.timezone.utc)
    orphans: list[str] = []
    recent = 0
    for full, modified in list_files(data_path, storage_options):
        if normalize(full) in referenced or not full.endswith((".parquet", "-delete.puffin")):
            # Parquet files, like the reference, and deletion vectors (the reference leaves those): the data path
            # may hold other things
            continue
        if not is_inside(full, data_path):
            log.warning("delete_orphan_files: %s leads outside the data path (a symbolic link); kept", full)
            continue
        if modified is not None and now - modified < older_than:
            recent += 1
            continue
        orphans.append(full)
    stale = [
        (url, upload_id)
        for url, upload_id, started in incomplete_uploads(data_path, storage_options)
        if (started is None or now - started >= older_than) and is_inside(url, data_path)
    ]
    return OrphanReport(
        dry_run=True,
        orphans=tuple(orphans),
        skipped_recent=recent,
        bytes=_total_size(orphans, storage_options),
        stale_uploads=tuple(f"{url}?uploadId={upload_id}" for url, upload_id in stale),
    )


def delete_orphans(
    engine: Engine,
    data_path: str,
    *,
    older_than: dt.timedelta | float | str = ORPHAN_SAFETY_AGE,
    dry_run: bool = False,
    storage_options: dict[str, Any] | None = None,
) -> OrphanReport:
    """Delete :func:`find_orphans` (unless ``dry_run``); the report is logged."""
    report = find_orphans(engine, data_path, older_than=older_than, storage_options=storage_options)
    if not dry_run:
        failed = delete_files(list(report.orphans), storage_options) if report.orphans else []
        for upload in report.stale_uploads:
            url, _, upload_id = upload.partition("?uploadId=")
            try:
                abort_upload(url, upload_id, storage_options)
            except Exception as e:  # best effort, like the deletes
                log.warning("could not abort the incomplete upload %s: %s", upload, describe_error(e, storage_options))
                failed.append(upload)
        deleted = tuple(p for p in report.orphans if p not in set(failed))
        report = dataclasses.replace(report, dry_run=False, deleted=deleted, failed=tuple(failed))
    report.log()
    return report


def _total_size(paths: list[str], storage_options: dict[str, Any] | None) -> int:
    total = 0
    for path in paths:
        try:
            total += file_size(path, storage_options)
        except DataFileError:
            continue  # gone meanwhile
    return total
