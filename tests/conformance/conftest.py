"""Fixtures of the conformance tests."""

from __future__ import annotations

import pytest

from tests.support.catalogs import PgServer


@pytest.fixture(scope="session")
def pg_url(pg_server: PgServer) -> str:
    """SQLAlchemy URL of the test PostgreSQL server (``scripts/postgres.sh``); tests create databases on it."""
    return pg_server.url()
