"""Table maintenance that needs both the catalog and storage: finding and removing orphan files."""

from __future__ import annotations

import datetime as dt
import logging
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Engine

from pyspark_ducklake.catalog import reader
from pyspark_ducklake.io.fileio import delete_files, filesystem

log = logging.getLogger(__name__)

ORPHAN_SAFETY_AGE = dt.timedelta(hours=1)


@dataclass(frozen=True)
class OrphanReport:
    """Files under the data path that no snapshot references (written by crashed or failed attempts)."""

    orphans: tuple[str, ...]
    skipped_recent: int
    deleted: tuple[str, ...] = ()
    dry_run: bool = True


def find_orphans(
    engine: Engine,
    data_path: str,
    *,
    older_than: dt.timedelta = ORPHAN_SAFETY_AGE,
    storage_options: dict[str, Any] | None = None,
) -> OrphanReport:
    """Files under ``data_path`` older than ``older_than`` that the catalog does not reference.

    Younger files are left alone: a writer may be about to commit them.
    """
    with engine.connect() as conn:
        referenced = reader.all_referenced_paths(conn, data_path)
    fs, root = filesystem(data_path, storage_options)
    prefix = data_path[: len(data_path) - len(root)] if data_path.endswith(root) else ""
    now = dt.datetime.now(dt.timezone.utc)
    orphans: list[str] = []
    recent = 0
    for path, info in sorted(fs.find(root, detail=True).items()):
        full = prefix + path if prefix and not path.startswith(prefix) else path
        if full in referenced or path in referenced:
            continue
        modified = _mtime(info)
        if modified is not None and now - modified < older_than:
            recent += 1
            continue
        orphans.append(full)
    return OrphanReport(tuple(orphans), recent)


def delete_orphans(
    engine: Engine,
    data_path: str,
    *,
    older_than: dt.timedelta = ORPHAN_SAFETY_AGE,
    dry_run: bool = False,
    storage_options: dict[str, Any] | None = None,
) -> OrphanReport:
    report = find_orphans(engine, data_path, older_than=older_than, storage_options=storage_options)
    if dry_run or not report.orphans:
        return report
    failed = set(delete_files(list(report.orphans), storage_options))
    deleted = tuple(p for p in report.orphans if p not in failed)
    log.info("deleted %d orphan files under %s", len(deleted), data_path)
    return OrphanReport(report.orphans, report.skipped_recent, deleted, False)


def _mtime(info: dict[str, Any]) -> dt.datetime | None:
    for key in ("mtime", "LastModified", "last_modified", "updated"):
        value = info.get(key)
        if value is None:
            continue
        if isinstance(value, dt.datetime):
            return value if value.tzinfo else value.replace(tzinfo=dt.timezone.utc)
        try:
            return dt.datetime.fromtimestamp(float(value), dt.timezone.utc)
        except (TypeError, ValueError):
            continue
    return None
