"""The packages of the optional extras and the oldest version of each that the code works with.

pyproject.toml declares the same floors (``tests/unit/io/test_extras.py`` checks that the two agree). pip can still
end up with an older one, resolving an extra beside packages that exclude every newer release (s3fs 0.4.2 from 2020
beside a new boto3: each S3 write then fails on the executors with a ``TypeError`` deep in botocore), or a package
installed some other way. Where an extra is first used (a filesystem opened, a catalog engine created), its installed
version is checked: one older than the floor is a :class:`NotInstalledError` saying which version to install. A
missing package is left to the import, whose error says which extra to install.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from importlib import metadata

from pyspark_ducklake.exceptions import NotInstalledError


@dataclass(frozen=True)
class Floor:
    """One package of an extra: the names pip installs it under, its floor and why that version."""

    distributions: tuple[str, ...]
    floor: str
    why: str

    @property
    def name(self) -> str:
        return self.distributions[0]


EXTRAS: dict[str, tuple[Floor, ...]] = {
    # 2023.3.0: the first S3FileSystem taking endpoint_url (the ducklake.s3.endpoint_url setting); older ones pass it
    # to the botocore session, which refuses it (0.4.2, what pip picks beside a too-new boto3, on every write)
    "s3": (Floor(("s3fs",), "2023.3.0", "s3:// data paths"),),
    # gcsfs pins fsspec to its own version: 2023.1.0 is the first beside the core's fsspec floor
    "gcs": (Floor(("gcsfs",), "2023.1.0", "gs:// data paths"),),
    # 2022.7.0: the first to take the account from abfss://container@account.dfs.core.windows.net/ URLs
    "azure": (Floor(("adlfs",), "2022.7.0", "az://, abfs://, abfss:// data paths"),),
    # 2.9.5: the first with Python 3.11 wheels (2.9.0 fails to import there)
    "postgres": (Floor(("psycopg2-binary", "psycopg2"), "2.9.5", "PostgreSQL catalogs"),),
    # duckdb 1.5.0: the first to open DuckLake 1.0 files; duckdb-engine 0.7.0: the first for SQLAlchemy 2
    "duckdb": (
        Floor(("duckdb",), "1.5.0", "DuckDB-file catalogs"),
        Floor(("duckdb-engine",), "0.7.0", "DuckDB-file catalogs"),
    ),
}


def release(version: str) -> tuple[int, ...]:
    """The release numbers of a version string (``2023.12.2.post1`` -> ``(2023, 12, 2)``); pre-release tags count
    as their release."""
    m = re.match(r"\s*v?(\d+(?:\.\d+)*)", version)
    return tuple(int(p) for p in m.group(1).split(".")) if m else ()


def too_old(version: str, floor: str) -> bool:
    """Whether ``version`` is older than ``floor`` (release numbers compared, missing parts as 0)."""
    have, need = release(version), release(floor)
    width = max(len(have), len(need))
    return have + (0,) * (width - len(have)) < need + (0,) * (width - len(need))


def installed_version(floor: Floor) -> tuple[str, str] | None:
    """The first of the floor's distributions that is installed, and its version; None when none is."""
    for name in floor.distributions:
        try:
            return name, metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return None


@functools.cache
def require_extra(extra: str) -> None:
    """Check the installed versions of ``extra``'s packages (once per process).

    Raises:
        NotInstalledError: a package older than the floor, naming its version and the one to install.
    """
    for floor in EXTRAS[extra]:
        found = installed_version(floor)
        if found is None:
            continue  # missing: the import says which extra to install
        name, version = found
        if too_old(version, floor.floor):
            raise NotInstalledError(
                f"{name} {version} is installed, but {floor.why} need {name} >= {floor.floor}: "
                f"pip install '{name}>={floor.floor}' (or pip install --upgrade 'pyspark-ducklake[{extra}]')"
            )


__all__ = ["EXTRAS", "Floor", "installed_version", "release", "require_extra", "too_old"]
