"""Catalog locations in SQLAlchemy and DuckDB spellings."""

from __future__ import annotations

import os

import pytest

from pyspark_ducklake.catalog.catalog import normalize_data_path, uuid7
from pyspark_ducklake.catalog.location import parse_conninfo, parse_location, redact_location, render_conninfo
from pyspark_ducklake.catalog.paths import path_component
from pyspark_ducklake.exceptions import InvalidOptionError, NotADuckLakeCatalogError


def test_sqlite_spellings_agree(tmp_path: os.PathLike[str]) -> None:
    path = os.path.join(str(tmp_path), "lake.sqlite")
    a = parse_location(f"sqlite:///{path}")
    b = parse_location(f"ducklake:sqlite:{path}")
    c = parse_location(path)
    assert a.url == b.url == c.url
    assert a.duckdb_attach() == f"ducklake:sqlite:{path}"


def test_postgres_dsn_spelling() -> None:
    loc = parse_location("ducklake:postgres:dbname=lake host=127.0.0.1 password=secret")
    assert loc.backend == "postgresql"
    assert loc.conninfo == {"dbname": "lake", "host": "127.0.0.1", "password": "secret"}
    assert "secret" not in loc.redacted()
    assert loc.duckdb_attach() == "ducklake:postgres:dbname=lake host=127.0.0.1 password=secret"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("dbname=lake host=h", {"dbname": "lake", "host": "h"}),
        ("  dbname = lake   host= h ", {"dbname": "lake", "host": "h"}),
        ("password='a b' user=u", {"password": "a b", "user": "u"}),
        (r"password='it\'s \\ x'", {"password": "it's \\ x"}),
        ("password=''", {"password": ""}),
        (r"password=a\ b", {"password": "a b"}),
        ("", {}),
    ],
)
def test_libpq_connection_strings_parse_as_libpq_does(text: str, expected: dict[str, str]) -> None:
    assert parse_conninfo(text) == expected
    # rendered back (DuckDB's spelling) and parsed again: the same keywords
    assert parse_conninfo(render_conninfo(expected)) == expected


@pytest.mark.parametrize("text", ["dbname", "dbname=x password='never closed", "=x", "host=h junk", "x=a b"])
def test_malformed_libpq_strings_are_refused_without_echoing_them(text: str, tmp_path: os.PathLike[str]) -> None:
    import pyspark_ducklake as pdl
    from tests.support.bad_inputs import expect_bad_input

    with expect_bad_input("catalog-libpq-malformed", watch=[tmp_path]) as err:
        pdl.connect(f"ducklake:postgres:password=hunter2 {text}", os.path.join(str(tmp_path), "data"))
    assert "hunter2" not in str(err.value)


@pytest.mark.parametrize(
    "spelling",
    [
        "ducklake:postgres:dbname=lake host=db.example user=u password='pw with spaces'",
        "ducklake:postgresql:dbname=lake host=db.example user=u password=pw",
        "postgres:dbname=lake host=db.example user=u password=pw",
        "postgresql:dbname=lake host=db.example user=u password=pw",
        "ducklake:postgres:postgresql://u:pw@db.example/lake",
        "postgres://u:pw@db.example/lake",
        "postgresql://u:pw@db.example/lake",
        "postgresql+psycopg2://u:pw@db.example/lake",
        "postgresql://u@db.example/lake?password=pw",
    ],
)
def test_every_postgres_spelling_is_accepted(spelling: str) -> None:
    loc = parse_location(spelling)
    assert loc.backend == "postgresql"
    attach = parse_location(loc.duckdb_attach())  # DuckDB's spelling of it parses to the same keywords
    assert attach.conninfo is not None and attach.conninfo["dbname"] == "lake"
    assert attach.conninfo["host"] == "db.example" and attach.conninfo["user"] == "u"


@pytest.mark.parametrize(
    ("spelling", "secret"),
    [
        ("postgresql://u:s3cr%40t@h/db", "s3cr@t"),
        ("postgresql://u@h/db?password=s3cr3t&sslmode=disable", "s3cr3t"),
        ("ducklake:postgres:dbname=db password='my s3cr3t'", "my s3cr3t"),
        ("ducklake:postgres:dbname=db sslpassword=s3cr3t", "s3cr3t"),
        ("postgres:dbname=db PASSWORD=s3cr3t", "s3cr3t"),
        ("postgresql://u@h/db?sslpassword=s3cr3t&sslmode=require", "s3cr3t"),
    ],
)
def test_redaction_hides_every_password_spelling(spelling: str, secret: str) -> None:
    from urllib.parse import quote

    from pyspark_ducklake.catalog.location import create_catalog_engine

    loc = parse_location(spelling)
    engine = create_catalog_engine(loc)  # SQLAlchemy's repr shows a query string as it is
    for text in (loc.redacted(), repr(loc), str(loc), repr(engine), str(engine.url)):
        assert secret not in text and quote(secret, safe="") not in text
    assert "***" in loc.redacted() and "***" in repr(loc)
    assert secret in loc.secrets()
    assert loc.scrub(f"driver said: {secret} / {quote(secret, safe='')}") == "driver said: *** / ***"


@pytest.mark.parametrize(
    "bad",
    [
        "mysql://u:s3cr3t@h/db",
        "postgresql://u:s3cr3t@h:notaport/db",
        "nonsense with password=s3cr3t",
        "ducklake:postgres:dbname=db password=s3cr3t junk",
        "ducklake:postgres:password='s3cr3t",
    ],
)
def test_refused_locations_do_not_echo_the_password(bad: str) -> None:
    with pytest.raises(InvalidOptionError) as err:
        parse_location(bad)
    assert "s3cr3t" not in str(err.value)
    assert "s3cr3t" not in redact_location(bad)


@pytest.mark.parametrize("spelling", ["ducklake:sqlite:{p}", "sqlite:{p}", "sqlite:///{p}", "{p}"])
def test_sqlite_spellings(tmp_path: os.PathLike[str], spelling: str) -> None:
    path = os.path.join(str(tmp_path), "lake.sqlite")
    loc = parse_location(spelling.format(p=path))
    assert loc.url == f"sqlite:///{path}" and loc.duckdb_attach() == f"ducklake:sqlite:{path}"


def test_postgres_url_spelling() -> None:
    loc = parse_location("postgresql://u:pw@127.0.0.1:5433/lake")
    assert loc.url.startswith("postgresql+psycopg2://")
    assert "pw" not in loc.redacted()
    assert loc.duckdb_attach() == "ducklake:postgres:dbname=lake host=127.0.0.1 port=5433 user=u password=pw"


@pytest.mark.parametrize("bad", ["", "   ", "mysql://x/y", "ducklake::memory:", "not a url"])
def test_bad_locations_name_the_value(bad: str) -> None:
    with pytest.raises(InvalidOptionError):
        parse_location(bad)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("t", "t/"),
        ("..", "_./"),
        ("../../etc", "_._.._etc/"),
        ("a b'c\"; drop", "a_b_c___drop/"),
        ("", "_/"),
        (".x", "_x/"),
    ],
)
def test_path_component_stays_inside(name: str, expected: str) -> None:
    assert path_component(name) == expected
    assert "/" not in path_component(name)[:-1]


def test_uuid7_is_version_7() -> None:
    import uuid

    u = uuid.UUID(uuid7())
    assert u.version == 7
    assert uuid7() != uuid7()


def test_data_path_normalised(tmp_path: os.PathLike[str]) -> None:
    assert normalize_data_path(str(tmp_path)) == str(tmp_path) + "/"
    assert normalize_data_path("s3://bucket/x") == "s3://bucket/x/"
    with pytest.raises(InvalidOptionError):
        normalize_data_path(" ")


def test_sqlite_catalogs_use_wal_and_other_databases_are_left_alone(tmp_path: os.PathLike[str]) -> None:
    """A DuckLake catalog on SQLite is switched to WAL, so readers such as DuckDB neither wait for nor hold back a
    commit; a database that is not a catalog is never changed."""
    import sqlite3

    import pyarrow as pa

    import pyspark_ducklake as pdl

    lake_file = os.path.join(str(tmp_path), "lake.sqlite")
    with pdl.connect(f"sqlite:///{lake_file}", os.path.join(str(tmp_path), "data")) as lake:
        lake.create_table("main.t", pa.schema([("id", pa.int64())]))
    with sqlite3.connect(lake_file) as con:
        assert con.execute("PRAGMA journal_mode").fetchone() == ("wal",)

    other = os.path.join(str(tmp_path), "other.db")
    with sqlite3.connect(other) as con:
        con.execute("CREATE TABLE notes (x INTEGER)")
    with pytest.raises(NotADuckLakeCatalogError):
        pdl.connect(f"sqlite:///{other}")
    with sqlite3.connect(other) as con:
        assert con.execute("PRAGMA journal_mode").fetchone() == ("delete",)
    assert not [name for name in os.listdir(str(tmp_path)) if name.startswith("other.db-")]
