"""Bad input gets a typed error that says what to do, and nothing is written."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pyarrow as pa
import pytest

import pyspark_ducklake as pdl
from pyspark_ducklake.exceptions import (
    CatalogUnreachableError,
    DuckLakeError,
    InvalidIdentifierError,
    InvalidOptionError,
    NoSuchColumnError,
    NoSuchSchemaError,
    NoSuchSnapshotError,
    NoSuchTableError,
    NotADuckLakeCatalogError,
    SchemaAlreadyExistsError,
    SchemaMismatchError,
    TableAlreadyExistsError,
    UnsupportedSpecVersionError,
    UnsupportedTypeError,
)


@pytest.fixture
def lake(tmp_path: Path) -> pdl.Lake:
    lake = pdl.connect(f"sqlite:///{tmp_path}/c.sqlite", str(tmp_path / "data"))
    lake.create_table("main.t", pa.schema([("id", pa.int64()), ("name", pa.string())]))
    return lake


def parquet_files(root: str) -> list[str]:
    return [os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs if f.endswith(".parquet")]


def test_every_error_is_a_ducklake_error() -> None:
    for cls in (CatalogUnreachableError, InvalidOptionError, SchemaMismatchError, UnsupportedTypeError):
        assert issubclass(cls, DuckLakeError)


def test_unknown_schema_and_table(lake: pdl.Lake) -> None:
    with pytest.raises(NoSuchSchemaError, match="create_schema"):
        lake.scan("nope.t")
    with pytest.raises(NoSuchTableError, match=r"main\.missing"):
        lake.append("main.missing", pa.table({"id": [1]}))
    with pytest.raises(NoSuchSchemaError):
        lake.create_table("nope.t", pa.schema([("a", pa.int32())]))


@pytest.mark.parametrize(
    ("data", "match"),
    [
        (pa.table({"id": ["x"], "name": ["a"]}), r"column 'id' .* int64.*varchar"),
        (pa.table({"id": [1], "other": ["a"]}), r"column 'other' is not in table main\.t"),
        (pa.table({"id": pa.array([1.5])}), r"column 'id' .* int64.*float64"),
    ],
)
def test_incompatible_append_writes_nothing(lake: pdl.Lake, data: pa.Table, match: str) -> None:
    before = lake.current_snapshot_id()
    big = pa.concat_tables([data] * 50)
    for batch in (data, big):
        with pytest.raises(SchemaMismatchError, match=match):
            lake.append("main.t", batch)
    assert lake.current_snapshot_id() == before
    assert parquet_files(lake.data_path) == []


def test_not_null_column(tmp_path: Path) -> None:
    lake = pdl.connect(f"sqlite:///{tmp_path}/c.sqlite", str(tmp_path / "data"))
    lake.create_table("main.nn", pa.schema([pa.field("id", pa.int64(), nullable=False)]))
    with pytest.raises(SchemaMismatchError, match="NOT NULL"):
        lake.append("main.nn", pa.table({"id": [1, None]}))
    assert lake.scan("main.nn").num_rows == 0


def test_lossless_widening_is_accepted(lake: pdl.Lake) -> None:
    lake.append("main.t", pa.table({"id": pa.array([1, 2], pa.int32())}))
    assert lake.scan("main.t").column("id").type == pa.int64()


def test_integers_narrow_only_when_they_fit(tmp_path: Path) -> None:
    lake = pdl.connect(f"sqlite:///{tmp_path}/c.sqlite", str(tmp_path / "data"))
    lake.create_table("main.small", pa.schema([("v", pa.int16())]))
    lake.append("main.small", pa.table({"v": [1, -5, 32767]}))  # int64 data that fits
    with pytest.raises(SchemaMismatchError, match="'v'"):
        lake.append("main.small", pa.table({"v": [40000]}))
    assert sorted(lake.scan("main.small").column(0).to_pylist()) == [-5, 1, 32767]


def test_unsupported_types_name_the_column(lake: pdl.Lake) -> None:
    with pytest.raises(UnsupportedTypeError, match="'dur'"):
        lake.create_table("main.bad", pa.schema([("ok", pa.int32()), ("dur", pa.duration("s"))]))
    with pytest.raises(UnsupportedTypeError, match="'big'"):
        lake.create_table("main.bad", pa.schema([("big", pa.decimal256(60, 2))]))
    assert "main.bad" not in lake.tables()


def test_duplicates(lake: pdl.Lake) -> None:
    with pytest.raises(TableAlreadyExistsError):
        lake.create_table("main.t", pa.schema([("id", pa.int64())]))
    with pytest.raises(SchemaAlreadyExistsError):
        lake.create_schema("main")
    lake.create_schema("main", exist_ok=True)
    with pytest.raises(InvalidIdentifierError):
        lake.create_table("main.dup", pa.schema([("a", pa.int32()), ("a", pa.int64())]))
    with pytest.raises(InvalidIdentifierError):
        lake.scan("a.b.c")


def test_unknown_column_and_snapshot(lake: pdl.Lake) -> None:
    with pytest.raises(NoSuchColumnError, match="nope"):
        lake.scan("main.t", columns=["nope"])
    with pytest.raises(NoSuchSnapshotError, match="99"):
        lake.scan("main.t", snapshot=99)
    with pytest.raises(NoSuchSnapshotError):
        lake.scan("main.t", timestamp="1990-01-01T00:00:00")
    with pytest.raises(NoSuchColumnError):
        lake.rename_column("main.t", "nope", "x")
    with pytest.raises(SchemaMismatchError, match="lossless"):
        lake.set_column_type("main.t", "id", pa.int32())


def test_unreachable_catalog(tmp_path: Path) -> None:
    with pytest.raises(CatalogUnreachableError, match="cannot open catalog"):
        pdl.connect(f"sqlite:///{tmp_path}/no/such/dir/c.sqlite", str(tmp_path))
    with pytest.raises(CatalogUnreachableError) as err:
        pdl.connect("postgresql+psycopg2://nobody:hunter2@127.0.0.1:1/x", str(tmp_path))
    assert "hunter2" not in str(err.value)


def test_non_ducklake_database(tmp_path: Path) -> None:
    path = tmp_path / "app.sqlite"
    with sqlite3.connect(path) as c:
        c.execute("CREATE TABLE users (id INTEGER)")
    with pytest.raises(NotADuckLakeCatalogError, match="no DuckLake catalog"):
        pdl.connect(f"sqlite:///{path}", str(tmp_path))


def test_new_catalog_needs_data_path(tmp_path: Path) -> None:
    with pytest.raises(InvalidOptionError, match="data_path"):
        pdl.connect(f"sqlite:///{tmp_path}/new.sqlite")


@pytest.mark.parametrize("version", ["0.3", "1.1", "2.0"])
def test_other_format_versions_are_refused(tmp_path: Path, version: str) -> None:
    url = f"sqlite:///{tmp_path}/c.sqlite"
    pdl.connect(url, str(tmp_path / "data")).close()
    with sqlite3.connect(tmp_path / "c.sqlite") as c:
        c.execute("UPDATE ducklake_metadata SET value = ? WHERE key = 'version'", (version,))
    with pytest.raises(UnsupportedSpecVersionError, match=rf"version {version}.*supports 1\.0"):
        pdl.connect(url)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"data_inlining_row_limit": -1}, "data_inlining_row_limit"),
        ({"max_retry_count": -1}, "max_retry_count"),
        ({"retry_backoff": 0.5}, "retry_backoff"),
        ({"retry_wait_ms": -5}, "retry_wait_ms"),
    ],
)
def test_bad_options(tmp_path: Path, kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(InvalidOptionError, match=match):
        pdl.connect(f"sqlite:///{tmp_path}/c.sqlite", str(tmp_path), **kwargs)  # type: ignore[arg-type]


def test_more_bad_input(lake: pdl.Lake, tmp_path: Path) -> None:
    from pyspark_ducklake.exceptions import DataFileError

    with pytest.raises(InvalidOptionError, match="in-memory"):
        pdl.connect("sqlite://", str(tmp_path))
    with pytest.raises(NoSuchColumnError, match="'nope'"):
        lake.scan("main.t", filter=[("nope", "=", 1)])
    with pytest.raises(NoSuchColumnError, match="'nope'"):
        lake.delete("main.t", [("nope", "=", 1)])
    with pytest.raises(InvalidOptionError, match="does not match the lake's data path"):
        pdl.connect(lake.location.url, str(tmp_path / "elsewhere"))
    lake.append("main.t", pa.table({"id": list(range(50))}))
    for path in parquet_files(lake.data_path):
        os.remove(path)
    with pytest.raises(DataFileError, match="is missing"):
        lake.scan("main.t")


def test_missing_columns_take_the_current_default(lake: pdl.Lake) -> None:
    lake.add_column("main.t", "country", pa.string(), default="NL")
    lake.append("main.t", pa.table({"id": [1, 2]}))
    lake.append("main.t", pa.table({"id": [3], "country": [None]}))
    got = sorted(lake.scan("main.t").to_pylist(), key=lambda r: r["id"])
    assert [r["country"] for r in got] == ["NL", "NL", None]
