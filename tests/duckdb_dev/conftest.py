"""The live conformance tests against DuckLake's development build of 1.1 (``make test-duckdb-dev
DUCKDB_DEV=/path/to/duckdb``).

Collected only when named on the command line (``tests/conftest.py`` leaves this folder out of ``make test``: CI
has no such build). Here a missing or wrong build is a failure, never a skip: ``dev_build`` fails every test with
what is wrong and what to do.

- ``dev_build`` (session): the :class:`~tests.duckdb_dev.build.DevBuild` that ``DUCKDB_DEV`` names.
"""

from __future__ import annotations

import pytest

from tests.duckdb_dev.build import BuildMissingError, DevBuild, find_build


@pytest.fixture(scope="session")
def dev_build() -> DevBuild:
    try:
        return find_build()
    except BuildMissingError as e:
        pytest.fail(str(e), pytrace=False)
