"""Fixtures for the whole suite.

- Tests under ``tests/unit``, ``tests/integration`` and ``tests/conformance`` get the marker of their folder.
- ``pg_server`` (session): starts the test PostgreSQL via ``scripts/postgres.sh start``; a ``PgServer(host, port,
  user)``.
- ``catalog``: a fresh, empty ``CatalogLocation(backend, url, duckdb, data_path)``, once per backend (ids ``sqlite``
  and ``postgres``); ``sqlite_catalog`` and ``pg_catalog`` give one backend only. A PostgreSQL catalog is a new
  database, dropped after the test.
- ``duckdb_lake``: ``open_duckdb(location, alias="lake", inlining_row_limit=None)``, a DuckDB connection with the
  lake attached, closed after the test (``tests.support.duck.open_duckdb`` is the same without the clean-up).
- ``spark`` (session, created only when requested): local[2] SparkSession, UTC, 2 shuffle partitions, no UI.
- ``connect_spark``: a Spark Connect client (``SparkSession.builder.remote``) of a local[2] Connect server, one per
  worker (``connect_session``, session scope; ``tests.support.spark_daemons``).

Hypothesis profiles (property-based tests, ``tests/property``), chosen by ``HYPOTHESIS_PROFILE``:

- ``ci`` (default): derandomized (the same examples on every run), no example database, about a minute for the
  whole property suite; each test takes a share of it with ``settings(max_examples=examples(share))``
  (``tests.support.hostile.examples``).
- ``fuzz`` (``make fuzz``): random, 50 times the examples, failures kept in ``.hypothesis/`` and replayed first.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from hypothesis import HealthCheck, settings

from tests.support.catalogs import (
    CatalogLocation,
    PgServer,
    create_database,
    drop_database,
    pg_admin_engine,
    postgres_location,
    sqlite_location,
    start_pg_server,
)

if TYPE_CHECKING:
    import duckdb
    from pyspark.sql import SparkSession
    from sqlalchemy import Engine

TESTS_DIR = Path(__file__).resolve().parent
FOLDER_MARKERS = ("unit", "integration", "conformance", "property")
# Run only when named on the command line (`make test-duckdb-dev`): the live conformance tests against DuckLake's
# 1.1 development build, a DuckDB shell CI does not have (tests/duckdb_dev/conftest.py).
NAMED_ONLY = TESTS_DIR / "duckdb_dev"

# Lakes and DuckDB make examples slow and fixtures are shared across them on purpose; neither is a problem here.
_RELAXED = [HealthCheck.too_slow, HealthCheck.function_scoped_fixture, HealthCheck.data_too_large]
settings.register_profile(
    "ci", derandomize=True, database=None, max_examples=100, deadline=None, suppress_health_check=_RELAXED
)
settings.register_profile("fuzz", max_examples=5000, deadline=None, suppress_health_check=_RELAXED)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """Leave out ``tests/duckdb_dev`` unless a command-line argument names it or a path inside it."""
    if collection_path != NAMED_ONLY:
        return None
    for arg in config.args:
        named = Path(config.invocation_params.dir, arg.split("::")[0]).resolve()
        if named == NAMED_ONLY or NAMED_ONLY in named.parents:
            return None
    return True


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        try:
            folder = item.path.resolve().relative_to(TESTS_DIR).parts[0]
        except ValueError:
            continue
        if folder in FOLDER_MARKERS and not any(item.get_closest_marker(m) for m in FOLDER_MARKERS):
            item.add_marker(getattr(pytest.mark, folder))


# --- PostgreSQL -------------------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def pg_server() -> PgServer:
    """The test PostgreSQL on 127.0.0.1 (installed and started on first use; left running for other test runs)."""
    try:
        return start_pg_server()
    except Exception as e:
        pytest.fail(f"could not start the test PostgreSQL: {e}", pytrace=False)


@pytest.fixture(scope="session")
def pg_admin(pg_server: PgServer) -> Iterator[Engine]:
    """AUTOCOMMIT SQLAlchemy engine on the server's ``postgres`` database."""
    engine = pg_admin_engine(pg_server)
    yield engine
    engine.dispose()


# --- catalogs ---------------------------------------------------------------------------------------------------


def _sqlite_catalog(tmp_path_factory: pytest.TempPathFactory) -> CatalogLocation:
    return sqlite_location(tmp_path_factory.mktemp("lake"))


def _pg_catalog(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[CatalogLocation]:
    # Looked up lazily so that SQLite-only runs never start PostgreSQL.
    server: PgServer = request.getfixturevalue("pg_server")
    admin: Engine = request.getfixturevalue("pg_admin")
    database = create_database(admin)
    try:
        yield postgres_location(server, database, tmp_path_factory.mktemp("lake"))
    finally:
        drop_database(admin, database)


@pytest.fixture(params=["sqlite", "postgres"], ids=["sqlite", "postgres"])
def catalog(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[CatalogLocation]:
    """A fresh, empty catalog on each backend."""
    if request.param == "sqlite":
        yield _sqlite_catalog(tmp_path_factory)
    else:
        yield from _pg_catalog(request, tmp_path_factory)


@pytest.fixture
def sqlite_catalog(tmp_path_factory: pytest.TempPathFactory) -> CatalogLocation:
    """A fresh SQLite catalog (the file does not exist yet)."""
    return _sqlite_catalog(tmp_path_factory)


@pytest.fixture
def pg_catalog(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[CatalogLocation]:
    """A fresh, empty PostgreSQL database as catalog."""
    yield from _pg_catalog(request, tmp_path_factory)


# --- DuckDB -----------------------------------------------------------------------------------------------------


@pytest.fixture
def duckdb_lake() -> Iterator[Callable[..., duckdb.DuckDBPyConnection]]:
    """``open_duckdb(location, alias="lake", inlining_row_limit=None)``; connections are closed after the test."""
    from tests.support.duck import LakeLocation, open_duckdb

    opened: list[duckdb.DuckDBPyConnection] = []

    def factory(
        location: LakeLocation, alias: str = "lake", inlining_row_limit: int | None = None
    ) -> duckdb.DuckDBPyConnection:
        con = open_duckdb(location, alias=alias, inlining_row_limit=inlining_row_limit)
        opened.append(con)
        return con

    yield factory
    for con in opened:
        con.close()


# --- Spark ------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkSession]:
    """One local[2] SparkSession for the whole run (start-up costs 10-20 s)."""
    # Python workers must run the venv's interpreter (pyarrow, this package); set before the JVM starts.
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    from tests.support.jvm import archive_option

    folder = tmp_path_factory.mktemp("spark")
    builder = SparkSession.builder
    if java_options := archive_option():  # the shared class archive when made: a start-up about 5 s shorter
        builder = builder.config("spark.driver.extraJavaOptions", java_options)
    session = (
        builder.master("local[2]")
        .appName("pyspark-ducklake-tests")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.warehouse.dir", str(folder / "warehouse"))
        .config("spark.local.dir", str(folder / "local"))
        .getOrCreate()
    )
    yield session
    session.stop()


CONNECT_SERVER_CONF = ("spark.ducklake.s3.region", "connect-server-region")


@pytest.fixture(scope="session")
def connect_session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkSession]:
    """A Spark Connect client of a local[2] Connect server started from pyspark's own jars (one per xdist worker;
    the Connect tests share an xdist group, so one run starts one). Use it through ``connect_spark``."""
    from pyspark.sql import SparkSession

    from tests.support.spark_daemons import connect_mode, start_connect_server

    try:
        # a spark.ducklake.* setting the server starts with (an S3 region: no test lake is on S3), which register()
        # must find in the session's conf
        server = start_connect_server(
            tmp_path_factory.mktemp("connect-server"), conf={CONNECT_SERVER_CONF[0]: CONNECT_SERVER_CONF[1]}
        )
    except Exception as e:
        pytest.fail(f"could not start the Spark Connect server: {e}", pytrace=False)
    try:
        with connect_mode():
            session = SparkSession.builder.remote(server.url).create()
        yield session
        with connect_mode():
            session.stop()
    finally:
        server.daemon.stop()


@pytest.fixture
def connect_spark(connect_session: SparkSession) -> Iterator[SparkSession]:
    """The Connect client, with Spark Connect mode on for the test only (``tests.support.spark_daemons``); its
    ``spark.ducklake.*`` conf must be left as found, as for ``spark``."""
    from tests.support.spark_daemons import connect_mode

    with connect_mode():
        before = _lake_conf(connect_session)
        yield connect_session
        after = _lake_conf(connect_session)
    leaked = sorted(k for k in after.keys() | before.keys() if after.get(k) != before.get(k))
    if leaked:
        with connect_mode():
            for key in leaked:
                if key in before:
                    connect_session.conf.set(key, before[key])
                else:
                    connect_session.conf.unset(key)
        pytest.fail(f"the test changed Spark conf {', '.join(leaked)} and left it so; unset it")


def _lake_conf(session: SparkSession) -> dict[str, str]:
    return {k: v for k, v in session.conf.getAll.items() if k.lower().startswith("spark.ducklake.")}


@pytest.fixture(autouse=True)
def _no_leaked_lake_conf(request: pytest.FixtureRequest) -> Iterator[None]:
    """A test using the shared SparkSession must leave its ``spark.ducklake.*`` conf as it found it: a leaked
    catalog or data path sends later tests on the same worker to another lake (``register`` captures the conf).
    One conf read before and after each Spark test; a leak fails the test that leaked and is cleaned up."""
    if "spark" not in request.fixturenames:
        yield
        return
    session: SparkSession = request.getfixturevalue("spark")
    before = _lake_conf(session)
    yield
    after = _lake_conf(session)
    leaked = sorted(k for k in after.keys() | before.keys() if after.get(k) != before.get(k))
    if not leaked:
        return
    for key in leaked:
        if key in before:
            session.conf.set(key, before[key])
        else:
            session.conf.unset(key)
    import pyspark_ducklake as pdl

    pdl.register(session)
    pytest.fail(f"the test changed Spark conf {', '.join(leaked)} and left it so; unset it (and register again)")
