"""Every catalog spelling (SQLAlchemy URLs and DuckDB's) works wherever a catalog is accepted, on a real SQLite file
and a real PostgreSQL database: ``connect()``, the command line (``--catalog`` and ``DUCKLAKE_CATALOG``), the Spark
option and conf, and ``ducklake_sink``. ``ducklake:postgres:<libpq string>`` failed with a TypeError before."""

from __future__ import annotations

import functools
import os
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

import pyspark_ducklake as pdl
from pyspark_ducklake.__main__ import main
from tests.support.catalogs import CatalogLocation, PgServer, create_database, drop_database, new_data_path

pytestmark = pytest.mark.timeout(300)


def sqlite_spellings(path: str) -> list[str]:
    return [f"sqlite:///{path}", f"ducklake:sqlite:{path}", f"sqlite:{path}", path]


def postgres_spellings(server: PgServer, db: str) -> list[str]:
    h, p, u = server.host, server.port, server.user
    # trust auth: the server accepts any password, so each spelling carries one to parse and hide
    return [
        server.url(db),
        f"postgresql://{u}:pw@{h}:{p}/{db}",
        f"postgres://{u}@{h}:{p}/{db}?password=pw&application_name=ducklake",
        f"ducklake:postgres:{server.conninfo(db)}",
        f"ducklake:postgresql:dbname='{db}' host = {h} port={p} user={u} password='p w \\' x'",
        f"postgres:{server.conninfo(db)} password=pw",
        f"postgresql:{server.conninfo(db)}",
        f"ducklake:postgres:postgresql://{u}:pw@{h}:{p}/{db}",
    ]


@pytest.fixture(params=["sqlite", "postgres"])
def spelled(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[list[str], str]]:
    """(spellings of one fresh catalog, its data path)."""
    folder = tmp_path_factory.mktemp("lake")
    if request.param == "sqlite":
        yield sqlite_spellings(str(folder.resolve() / "lake.sqlite")), new_data_path(folder)
        return
    server: PgServer = request.getfixturevalue("pg_server")
    admin = request.getfixturevalue("pg_admin")
    db = create_database(admin)
    try:
        yield postgres_spellings(server, db), new_data_path(folder)
    finally:
        drop_database(admin, db)


def test_every_spelling_opens_the_same_catalog(spelled: tuple[list[str], str]) -> None:
    spellings, data_path = spelled
    with pdl.connect(spellings[0], data_path) as lake:
        lake.create_table("main.t", pa.schema([("id", pa.int64())]))
    for i, spelling in enumerate(spellings):
        with pdl.connect(spelling) as lake:
            lake.append("main.t", pa.table({"id": [i]}))
            assert sorted(lake.scan("main.t").column("id").to_pylist()) == list(range(i + 1))
            assert "pw" not in repr(lake.location) and "p w" not in lake.location.redacted()
            # DuckDB's spelling of it opens the same catalog again
            with pdl.connect(lake.location.duckdb_attach()) as again:
                assert again.current_snapshot_id() == lake.current_snapshot_id()


def test_every_spelling_works_on_the_command_line(
    spelled: tuple[list[str], str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    spellings, data_path = spelled
    with pdl.connect(spellings[0], data_path) as lake:
        lake.create_table("main.t", pa.schema([("id", pa.int64())]))
    for spelling in spellings:
        assert main(["--catalog", spelling, "tables"]) == 0
        assert capsys.readouterr().out.strip() == "main.t"
        monkeypatch.setenv("DUCKLAKE_CATALOG", spelling)
        assert main(["tables"]) == 0
        out = capsys.readouterr()
        assert out.out.strip() == "main.t" and "pw" not in out.out + out.err


@pytest.fixture
def duckdb_spelled(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[list[str], str]]:
    """DuckDB's spellings only (the SQLAlchemy URLs are exercised through Spark everywhere else)."""
    server: PgServer = request.getfixturevalue("pg_server")
    admin = request.getfixturevalue("pg_admin")
    db = create_database(admin)
    sqlite = str(tmp_path.resolve() / "lake.sqlite")
    try:
        pg = [s for s in postgres_spellings(server, db) if s.startswith(("ducklake:", "postgres:"))]
        yield [f"ducklake:sqlite:{sqlite}", f"sqlite:{sqlite}", *pg], new_data_path(tmp_path)
    finally:
        drop_database(admin, db)


def test_duckdb_spellings_in_spark_options_conf_environment_and_sink(
    spark: SparkSession, duckdb_spelled: tuple[list[str], str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every DuckDB spelling as the Spark option (a write each, and a read each: the driver and the executors parse
    it; the reads in one Spark job, a union tagged by spelling). The conf, ``ducklake_sink`` and ``DUCKLAKE_CATALOG``
    hand the same string to the same parser: they take the first SQLite spelling and the quoted libpq one (a quote and
    a space inside the password), not all six; every spelling's parse is test_every_spelling_opens_the_same_catalog's
    and the command line's subject."""
    spellings, data_path = duckdb_spelled
    everywhere = {
        next(s for s in spellings if "sqlite" in s),
        next(s for s in spellings if "password='p w" in s),
    }
    assert len(everywhere) == 2
    pdl.register(spark)

    def backend(spelling: str) -> str:
        return "sqlite" if "sqlite" in spelling else "postgres"

    lakes: dict[str, int] = {}
    for spelling in spellings:
        key = backend(spelling)
        if key not in lakes:
            with pdl.connect(spelling, data_path + key) as lake:
                lake.create_table("main.t", pa.schema([("id", pa.int64())]))
            lakes[key] = 0
        expected = lakes[key]
        df = spark.createDataFrame([(expected,)], "id bigint")
        # Spark option
        df.write.format("ducklake").mode("append").option("catalog", spelling).save("main.t")
        lakes[key] = expected + 1
        if spelling not in everywhere:
            continue
        # Spark conf, captured by register()
        spark.conf.set("spark.ducklake.catalog", spelling)
        try:
            pdl.register(spark)
            assert spark.read.format("ducklake").load("main.t").count() == expected + 1
        finally:
            spark.conf.unset("spark.ducklake.catalog")
            pdl.register(spark)
        # ducklake_sink, with the catalog as an argument and from the environment
        sink = pdl.ducklake_sink("main.t", catalog=spelling, app_id=f"a{expected}")
        sink(spark.createDataFrame([(expected + 100,)], "id bigint"), 0)  # type: ignore[operator]
        monkeypatch.setenv("DUCKLAKE_CATALOG", spelling)
        env_sink = pdl.ducklake_sink("main.t", app_id=f"b{expected}")
        env_sink(spark.createDataFrame([(expected + 200,)], "id bigint"), 0)  # type: ignore[operator]
        monkeypatch.delenv("DUCKLAKE_CATALOG")
        with pdl.connect(spelling) as lake:
            ids = lake.scan("main.t").column("id").to_pylist()
            lake.delete("main.t", [("id", ">=", 100)])  # the reads below see only the Spark option's rows
        assert sorted(ids)[-2:] == [expected + 100, expected + 200]

    # every spelling's read of its backend's table: each row the option wrote through any spelling of it
    reads = [
        spark.read.format("ducklake").option("catalog", s).load("main.t").select(F.lit(i).alias("spelling"), "id")
        for i, s in enumerate(spellings)
    ]
    got: dict[int, list[int]] = {i: [] for i in range(len(spellings))}
    for row in functools.reduce(lambda a, b: a.unionByName(b), reads).collect():
        got[row.spelling].append(row.id)
    assert {i: sorted(ids) for i, ids in got.items()} == {
        i: list(range(lakes[backend(s)])) for i, s in enumerate(spellings)
    }


def test_environment_catalog_for_read_table(
    spark: SparkSession, sqlite_catalog: CatalogLocation, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pdl.connect(sqlite_catalog.duckdb, sqlite_catalog.data_path) as lake:
        lake.create_table("main.t", pa.schema([("id", pa.int64())]))
        lake.append("main.t", pa.table({"id": [1, 2]}))
    monkeypatch.setenv("DUCKLAKE_CATALOG", "sqlite:" + sqlite_catalog.duckdb.split(":", 2)[2])
    assert os.environ["DUCKLAKE_CATALOG"].startswith("sqlite:/")
    assert pdl.read_table(spark, "main.t").count() == 2  # type: ignore[attr-defined]
