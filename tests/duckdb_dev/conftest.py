"""The live conformance tests against DuckLake's development build of 1.1 (``make test-duckdb-dev
DUCKDB_DEV=/path/to/duckdb``).

Collected only when named on the command line (``tests/conftest.py`` leaves this folder out of ``make test``: CI
has no such build). Here a missing or wrong build is a failure, never a skip: ``dev_build`` fails every test with
what is wrong and what to do.

- ``dev_build`` (session): the :class:`~tests.duckdb_dev.build.DevBuild` that ``DUCKDB_DEV`` names.
- ``duckdb2_python`` (session): a Python with DuckDB 2.x and pyspark (``DUCKDB2_PYTHON``; ``make test-duckdb-dev``
  makes one in ``.cache/venv-duckdb2`` by default), which runs this checkout's library through ``PYTHONPATH``.
"""

from __future__ import annotations

import os
import subprocess

import pytest

from tests.duckdb_dev.build import BuildMissingError, DevBuild, find_build

PYTHON_ENV = "DUCKDB2_PYTHON"


@pytest.fixture(scope="session")
def dev_build() -> DevBuild:
    try:
        return find_build()
    except BuildMissingError as e:
        pytest.fail(str(e), pytrace=False)


@pytest.fixture(scope="session")
def duckdb2_python() -> str:
    python = os.environ.get(PYTHON_ENV, "")
    advice = (
        f"set {PYTHON_ENV} to a Python with duckdb>=2, duckdb-engine and pyspark installed (make test-duckdb-dev "
        "makes .cache/venv-duckdb2 when it is not set)"
    )
    if not python:
        pytest.fail(f"{PYTHON_ENV} is not set: {advice}", pytrace=False)
    probe = subprocess.run(
        [python, "-c", "import duckdb, duckdb_engine, pyspark; print(duckdb.__version__)"],
        capture_output=True,
        text=True,
        check=False,
    )
    version = probe.stdout.strip()
    if probe.returncode or not version.startswith("2."):
        pytest.fail(
            f"{PYTHON_ENV}={python!r} gives duckdb {version or probe.stderr.strip()!r}: {advice}", pytrace=False
        )
    return python
