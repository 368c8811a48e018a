"""DuckLake's development build of 1.1 as the oracle: a DuckDB shell (``DUCKDB_DEV``) run as a subprocess.

The shell is DuckDB v2.0 with the ``ducklake`` extension of DuckLake 1.1 linked in (no sqlite or postgres scanner),
so every lake here has a DuckDB-file catalog. Two facts shape the helpers:

* it attaches a ``.ducklake`` file in DuckDB's newest storage version, upgrading it, after which the tests' DuckDB
  1.5.5 (and so this library, in the test venv) can no longer open it: it reads our lakes ``READ_ONLY`` (which
  leaves the file as it is), and its own lakes are copied into DuckDB 1.5's storage (:meth:`DevBuild.convert`)
  before we open them;
* it tags the catalogs it creates with its development tag (``1.1-dev1``) and refuses a catalog tagged ``1.1``
  ("Unsupported ducklake_version"), which this library writes: :func:`tag_for_build` re-tags ours before the build
  reads them (the catalog layout of both tags is the same).

Its answers (a table at a snapshot, ``ducklake_table_changes`` over a range) are written by the shell into a DuckDB
database of storage version v1.5.0, which the tests' DuckDB 1.5.5 opens (:meth:`DevBuild.answers`).
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import duckdb
from sqlalchemy import create_engine, text

from pyspark_ducklake.catalog.format_version import KNOWN
from pyspark_ducklake.duckdb_attach import sql_string

ENV = "DUCKDB_DEV"
STORAGE_1_5 = "v1.5.0"  # DuckDB 1.5's storage version: the tests' DuckDB 1.5.5 opens it


class BuildMissingError(RuntimeError):
    """``DUCKDB_DEV`` is unset, or does not name a DuckDB shell with DuckLake 1.1 linked in."""


@dataclass(frozen=True)
class DevBuild:
    """The shell at ``path``: DuckDB ``version``, which creates catalogs tagged ``tag``."""

    path: str
    version: str
    tag: str

    def run(self, sql: str, *, cwd: Path | None = None) -> str:
        """Run ``sql`` (stopping at the first error); its CSV output without header.

        Raises:
            AssertionError: the shell failed, with the SQL and its error.
        """
        done = subprocess.run(
            [self.path, "-batch", "-bail", "-csv", "-noheader"],
            input=sql,
            text=True,
            capture_output=True,
            cwd=cwd,
            check=False,
        )
        if done.returncode or "Error" in done.stderr:
            raise AssertionError(f"the 1.1 build failed ({done.returncode}): {done.stderr.strip()}\n--- sql ---\n{sql}")
        return done.stdout

    def rows(self, sql: str) -> list[list[str]]:
        return [line.split(",") for line in self.run(sql).splitlines() if line]

    def answers(self, attach: str, questions: Mapping[str, str], folder: Path) -> duckdb.DuckDBPyConnection:
        """Each question's rows as a table of that name in ``folder/answers.duckdb`` (v1.5.0 storage), asked with
        the lake attached by ``attach``; the database opened read-only by the tests' DuckDB."""
        path = folder / "answers.duckdb"
        if path.exists():
            path.unlink()
        sql = [attach, f"ATTACH {sql_string(str(path))} AS answers (STORAGE_VERSION '{STORAGE_1_5}');"]
        sql += [f"CREATE TABLE answers.{name} AS {query};" for name, query in questions.items()]
        self.run("\n".join(sql) + "\n")
        return duckdb.connect(str(path), read_only=True)

    def convert(self, source: Path, target: Path) -> None:
        """Copy the DuckDB database ``source`` (a catalog in the build's storage) into ``target`` in v1.5.0 storage."""
        if target.exists():
            target.unlink()
        self.run(
            f"ATTACH {sql_string(str(source))} AS src (READ_ONLY);\n"
            f"ATTACH {sql_string(str(target))} AS dst (STORAGE_VERSION '{STORAGE_1_5}');\n"
            "COPY FROM DATABASE src TO dst;\n"
        )


def attach_sql(catalog: Path, data_path: str | None = None, *, alias: str = "lake", options: str = "") -> str:
    """``ATTACH 'ducklake:<catalog>' AS <alias> (...)``; ``READ_ONLY`` among ``options`` for a lake of ours."""
    opts = [f"DATA_PATH {sql_string(data_path)}"] if data_path is not None else []
    opts += [options] if options else []
    inside = f" ({', '.join(opts)})" if opts else ""
    return f"ATTACH {sql_string('ducklake:' + str(catalog))} AS {alias}{inside};\n"


def tag_for_build(catalog_url: str, build: DevBuild) -> None:
    """Set a 1.1 catalog's ``version`` row to the tag the build writes (it refuses ``1.1``)."""
    engine = create_engine(catalog_url)
    try:
        with engine.begin() as conn:
            conn.execute(text("UPDATE ducklake_metadata SET value = :tag WHERE key = 'version'"), {"tag": build.tag})
    finally:
        engine.dispose()


def find_build() -> DevBuild:
    """The build ``DUCKDB_DEV`` names, checked: a DuckDB shell with the ducklake extension that creates DuckLake 1.1
    catalogs this library reads.

    Raises:
        BuildMissingError: unset, not an executable, or not such a shell (the message says which and what to do).
    """
    path = os.environ.get(ENV, "")
    advice = (
        f"set {ENV} to a DuckDB shell with DuckLake 1.1's ducklake extension linked in (DuckLake's development "
        "build; docs/compatibility.md), e.g. make test-duckdb-dev DUCKDB_DEV=/path/to/duckdb"
    )
    if not path:
        raise BuildMissingError(f"{ENV} is not set: {advice}")
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        raise BuildMissingError(f"{ENV}={path!r} is not an executable file: {advice}")
    probe = DevBuild(os.path.abspath(path), "?", "?")
    try:
        (version,) = probe.rows("SELECT library_version || ' ' || source_id FROM pragma_version();")
        with tempfile.TemporaryDirectory() as tmp:
            (tag,) = probe.rows(
                attach_sql(Path(tmp) / "probe.ducklake", f"{tmp}/data/")
                + "SELECT value FROM __ducklake_metadata_lake.ducklake_metadata WHERE key = 'version';"
            )
    except (AssertionError, OSError, ValueError) as e:
        raise BuildMissingError(f"{ENV}={path!r} does not run DuckLake: {e}; {advice}") from e
    if tag[0] not in KNOWN or not tag[0].startswith("1.1"):
        raise BuildMissingError(
            f"{ENV}={path!r} (DuckDB {version[0]}) creates DuckLake {tag[0]!r} catalogs, not a 1.1 this library "
            f"reads ({', '.join(KNOWN)}): {advice}"
        )
    return DevBuild(probe.path, version[0], tag[0])


__all__ = [
    "ENV",
    "STORAGE_1_5",
    "BuildMissingError",
    "DevBuild",
    "attach_sql",
    "find_build",
    "tag_for_build",
]
