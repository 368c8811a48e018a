"""Scratch files of one write job: what its tasks hand the driver through the lake's storage instead of their commit
messages (which Spark delivers to the driver all at once), so the driver reads them a part at a time.

Each is a Parquet file in the table's folder named for the job (``table/job_files.py``), so an aborted job's
scratch files go with its data files, and encrypted with its own key in an encrypted lake (their rows are the
table's keys). No snapshot ever references one: the commit removes them, and orphan cleanup any left behind.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from pyspark_ducklake.io.fileio import delete_files
from pyspark_ducklake.io.parquet import read_table, write_table
from pyspark_ducklake.table.job_files import JobToken

SCRATCH_ROWS = 65_536  # rows per scratch file: what a reader holds of one


@dataclass(frozen=True)
class Scratch:
    """One scratch file: its rows' range ``lo .. hi`` of the column it was sorted by."""

    path: str
    rows: int
    lo: int
    hi: int
    key: str | None = field(default=None, repr=False)  # base64 AES key (encrypted lakes)


@dataclass(frozen=True)
class ScratchPlace:
    """Where a job writes its scratch files."""

    folder: str  # ends with "/"
    job: JobToken | None
    storage_options: dict[str, Any] | None = field(default=None, repr=False, compare=False)
    encrypt: bool = False

    def write(self, rows: pa.Table, by: str | None = None) -> list[Scratch]:
        """``rows`` (sorted by the integer column ``by`` when given) as files of :data:`SCRATCH_ROWS` rows each."""
        out: list[Scratch] = []
        try:
            for start in range(0, rows.num_rows, SCRATCH_ROWS):
                part = rows.slice(start, SCRATCH_ROWS)
                lo = hi = 0
                if by is not None:
                    values = part.column(by).to_numpy()
                    lo, hi = int(values.min()), int(values.max())
                name = self.job.file_name() if self.job is not None else JobToken.new().file_name()
                written = write_table(
                    part, self.folder + name, storage_options=self.storage_options, encrypt=self.encrypt
                )
                out.append(Scratch(written.path, part.num_rows, lo, hi, written.encryption_key))
        except BaseException:
            self.remove(out)
            raise
        return out

    def read(self, s: Scratch) -> pa.Table:
        return read_table(s.path, storage_options=self.storage_options, encryption_key=s.key)

    def remove(self, files: Sequence[Scratch]) -> None:
        delete_files([s.path for s in files], self.storage_options)


@dataclass
class ScratchBuffer:
    """Rows the driver gathers a part at a time, written out whenever :data:`SCRATCH_ROWS` are held."""

    place: ScratchPlace
    by: str | None = None
    held: list[pa.Table] = field(default_factory=list)
    files: list[Scratch] = field(default_factory=list)

    def add(self, rows: pa.Table) -> None:
        if rows.num_rows:
            self.held.append(rows)
            if sum(t.num_rows for t in self.held) >= SCRATCH_ROWS:
                self.flush()

    def flush(self) -> list[Scratch]:
        if self.held:
            rows = pa.concat_tables(self.held)
            self.held = []
            if self.by is not None:
                rows = rows.take(pa.array(np.argsort(rows.column(self.by).to_numpy(), kind="stable")))
            self.files += self.place.write(rows, self.by)
        return self.files
