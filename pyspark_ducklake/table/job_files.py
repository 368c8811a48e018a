"""Which data files one write job wrote, told by their names alone, so a failed job's files can be found and removed.

A job (one Spark write, one micro-batch attempt) draws a :class:`JobToken`; every data file its tasks write is named
``ducklake-<uuid>.parquet`` as DuckDB names files, with a version-7 UUID whose 48-bit time is the job's start and
whose next 20 bits are the job's random token; the remaining 54 bits are random per file. When the job fails, the
driver lists the table's folder (partition folders included) and deletes the files carrying the token that no
snapshot references: this needs nothing from the tasks, which may have been killed, finished after the failure, or
never reported their files. Another writer's files never carry the token, and a committed file is never deleted.
"""

from __future__ import annotations

import hashlib
import logging
import os
import posixpath
import re
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pyspark_ducklake.catalog import reader
from pyspark_ducklake.catalog.db import Engine
from pyspark_ducklake.catalog.paths import is_inside, normalize
from pyspark_ducklake.io.fileio import delete_files, list_files

log = logging.getLogger("pyspark_ducklake.cleanup")

_TOKEN_BITS = 20  # random bits of the job identity, after the 48-bit millisecond time
_FILE_BITS = 54  # random bits per file: 74 random bits of a UUIDv7, less the token's
_NAME = re.compile(r"^ducklake-([0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12})\.parquet$")


@dataclass(frozen=True)
class JobToken:
    """The identity one write job gives its data files' names: start time in ms (48 bits) and 20 random bits."""

    millis: int
    token: int

    @classmethod
    def new(cls) -> JobToken:
        return cls(int(time.time() * 1000) & ((1 << 48) - 1), int.from_bytes(os.urandom(3), "big") >> 4)

    @classmethod
    def derived(cls, seed: str) -> JobToken:
        """The same token wherever it is derived from ``seed``: for work whose parts Spark runs from separate copies
        of the writer (a streaming batch's tasks, its commit and its abort), seeded by what they all know."""
        digest = hashlib.sha256(seed.encode()).digest()
        return cls(int.from_bytes(digest[:6], "big"), int.from_bytes(digest[6:9], "big") >> 4)

    def file_name(self) -> str:
        """A new data file name of this job: ``ducklake-<uuid7>.parquet``."""
        rand = int.from_bytes(os.urandom(7), "big") & ((1 << _FILE_BITS) - 1)
        random74 = (self.token << _FILE_BITS) | rand
        value = self.millis << 80
        value |= 0x7 << 76
        value |= ((random74 >> 62) & 0xFFF) << 64  # rand_a: the token's first 12 bits
        value |= 0b10 << 62
        value |= random74 & ((1 << 62) - 1)  # rand_b: the token's last 8 bits, then the file's own bits
        return f"ducklake-{uuid.UUID(int=value)}.parquet"

    def owns(self, path: str) -> bool:
        """Whether the file at ``path`` was named by this job (its name, not its folder, decides)."""
        match = _NAME.match(posixpath.basename(path))
        if match is None:
            return False
        value = uuid.UUID(match.group(1)).int
        random74 = (((value >> 64) & 0xFFF) << 62) | (value & ((1 << 62) - 1))
        return value >> 80 == self.millis and random74 >> _FILE_BITS == self.token


def remove_job_files(
    engine: Engine,
    data_path: str,
    table_dir: str,
    token: JobToken,
    *,
    storage_options: dict[str, Any] | None = None,
) -> list[str]:
    """Delete the data files under ``table_dir`` that ``token``'s job wrote and no snapshot references.

    Returns the files deleted. When the catalog cannot be read, nothing is deleted (a warning is logged): a commit of
    unknown outcome may reference them.
    """
    mine = [p for p, _ in list_files(table_dir, storage_options) if token.owns(p) and is_inside(p, data_path)]
    if not mine:
        return []
    try:
        with engine.connect() as conn:
            referenced = {normalize(p) for p in reader.all_referenced_paths(conn, data_path)}
    except Exception as e:
        log.warning("keeping %d files of a failed write in %s: cannot read the catalog (%s)", len(mine), table_dir, e)
        return []
    gone = [p for p in mine if normalize(p) not in referenced]
    failed = set(delete_files(gone, storage_options))
    deleted = [p for p in gone if p not in failed]
    if deleted:
        log.info("removed %d files of a failed write from %s", len(deleted), table_dir)
    return deleted


def remove_job_files_late(remove: Callable[[], list[str]], *, grace_s: float, interval_s: float = 0.5) -> int:
    """Run ``remove`` now and again every ``interval_s`` for ``grace_s`` seconds: for a caller that cannot see
    when the job's tasks stopped, the files of tasks Spark was still killing (or that finished after the failure)
    appear within Spark's kill window. Returns how many files were removed in all."""
    deadline = time.monotonic() + grace_s
    total = len(remove())
    while time.monotonic() < deadline:
        time.sleep(interval_s)
        total += len(remove())
    return total


__all__ = ["JobToken", "remove_job_files", "remove_job_files_late"]
