"""Catalog locations in SQLAlchemy and DuckDB spellings."""

from __future__ import annotations

import os

import pytest

from pyspark_ducklake.catalog.catalog import normalize_data_path, uuid7
from pyspark_ducklake.catalog.location import parse_location
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
    assert loc.connect_args["dsn"] == "dbname=lake host=127.0.0.1 password=secret"
    assert "secret" not in loc.redacted()
    assert loc.duckdb_attach() == "ducklake:postgres:dbname=lake host=127.0.0.1 password=secret"


def test_postgres_url_spelling() -> None:
    loc = parse_location("postgresql://u:pw@127.0.0.1:5433/lake")
    assert loc.url.startswith("postgresql+psycopg2://")
    assert "pw" not in loc.redacted()
    assert loc.duckdb_attach() == "ducklake:postgres:dbname=lake host=127.0.0.1 port=5433 user=u password=pw"


@pytest.mark.parametrize("bad", ["", "   ", "mysql://x/y", "ducklake:/tmp/cat.ducklake", "not a url"])
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
