"""Bad input gets a typed error that says what to do, and nothing is written.

The cases are listed once, in ``tests.support.bad_inputs.CASES`` (the "Bad input" table of docs/errors.md is rendered from
it); ``expect_bad_input`` checks the error class, the advice in the message, and that the catalog's snapshot count
and the data path's files are unchanged. Cases that need Spark or PostgreSQL are proven in
``tests/integration/test_faults_bad_input.py``.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import sqlite3
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

import pyspark_ducklake as pdl
from pyspark_ducklake import ducklake_sink
from pyspark_ducklake.exceptions import (
    CatalogUnreachableError,
    CorruptCatalogError,
    DataFileError,
    DuckLakeError,
    InvalidOptionError,
    NoSuchColumnError,
    SchemaAlreadyExistsError,
    SchemaMismatchError,
    UnsupportedTypeError,
)
from pyspark_ducklake.options import Entry, check_options
from pyspark_ducklake.spark.lake_config import LakeConfig
from tests.support.bad_inputs import (
    CASES,
    accepted_input,
    docs_table,
    expect_bad_input,
    proven_case_ids,
    render_table,
)


@pytest.fixture
def lake(tmp_path: Path) -> pdl.Lake:
    lake = pdl.connect(f"sqlite:///{tmp_path}/c.sqlite", str(tmp_path / "data"))
    lake.create_table("main.t", pa.schema([("id", pa.int64()), ("name", pa.string())]))
    lake.append("main.t", pa.table({"id": list(range(20)), "name": ["a"] * 20}))  # one Parquet file
    return lake


def parquet_files(root: str) -> list[str]:
    return [os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs if f.endswith(".parquet")]


# --- the case list, the docs and the tests agree --------------------------------------------------------------------


def test_docs_table_is_rendered_from_the_cases() -> None:
    assert docs_table() == render_table(), "docs/errors.md is stale: run python -m tests.support.bad_inputs --write"


def test_every_case_is_proven_by_a_test() -> None:
    ids = {c.id for c in CASES}
    assert len(ids) == len(CASES)
    assert proven_case_ids() == ids


def test_every_error_is_a_ducklake_error() -> None:
    for case in CASES:
        assert case.error is None or issubclass(case.error, DuckLakeError)


# --- where the lake is ----------------------------------------------------------------------------------------------


def test_unreachable_catalog(tmp_path: Path) -> None:
    with expect_bad_input("catalog-unreachable", watch=[tmp_path]) as err:
        pdl.connect("postgresql+psycopg2://nobody:hunter2@127.0.0.1:1/x", str(tmp_path / "data"))
    assert "hunter2" not in str(err.value)
    with expect_bad_input("catalog-folder-missing", watch=[tmp_path]):
        pdl.connect(f"sqlite:///{tmp_path}/no/such/dir/c.sqlite", str(tmp_path / "data"))


def test_non_ducklake_database(tmp_path: Path) -> None:
    path = tmp_path / "app.sqlite"
    with sqlite3.connect(path) as c:
        c.execute("CREATE TABLE users (id INTEGER)")
    with expect_bad_input("catalog-not-ducklake", watch=[tmp_path]):  # the database file is byte-for-byte the same
        pdl.connect(f"sqlite:///{path}", str(tmp_path / "data"))
    import duckdb

    other = duckdb.connect(str(tmp_path / "app.ducklake"))
    other.execute("CREATE TABLE users (id INTEGER)")
    other.close()
    with expect_bad_input("catalog-not-ducklake", watch=[tmp_path]):
        pdl.connect(f"ducklake:{tmp_path}/app.ducklake", str(tmp_path / "data"))


@pytest.mark.parametrize("version", ["0.3", "1.2", "2.0", "1.1-dev2"])
def test_other_format_versions_are_refused(tmp_path: Path, version: str) -> None:
    url = f"sqlite:///{tmp_path}/c.sqlite"
    pdl.connect(url, str(tmp_path / "data")).close()
    with sqlite3.connect(tmp_path / "c.sqlite") as c:
        c.execute("UPDATE ducklake_metadata SET value = ? WHERE key = 'version'", (version,))
    with expect_bad_input("catalog-other-version", watch=[tmp_path]) as err:
        pdl.connect(url)
    assert f"version {version!r}" in str(err.value)


def test_unsupported_catalogs(tmp_path: Path) -> None:
    with expect_bad_input("catalog-new-without-data-path", watch=[tmp_path]):
        pdl.connect(f"sqlite:///{tmp_path}/new.sqlite")
    with expect_bad_input("catalog-new-without-data-path", watch=[tmp_path]):
        pdl.connect(f"ducklake:{tmp_path}/new.ducklake")  # DuckDB would create an empty database: nothing is made
    with expect_bad_input("catalog-other-backend", watch=[tmp_path]):
        pdl.connect("mysql://user@localhost/db", str(tmp_path / "data"))
    with expect_bad_input("catalog-in-memory", watch=[tmp_path]):
        pdl.connect("sqlite://", str(tmp_path))


def test_missing_driver(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with expect_bad_input("catalog-driver-missing", watch=[tmp_path]):
        pdl.connect("postgresql+pg8000://user@127.0.0.1:1/x", str(tmp_path / "data"))
    monkeypatch.setitem(sys.modules, "duckdb_engine", None)  # as without pyspark-ducklake[duckdb]
    with expect_bad_input("catalog-duckdb-extra-missing", watch=[tmp_path]):
        pdl.connect(f"ducklake:{tmp_path}/lake.ducklake", str(tmp_path / "data"))


def test_data_path_mismatch(lake: pdl.Lake, tmp_path: Path) -> None:
    with expect_bad_input("data-path-mismatch", lake):
        pdl.connect(lake.location.url, str(tmp_path / "elsewhere"))


def test_data_path_the_process_cannot_write(tmp_path: Path) -> None:
    # A regular file where a folder of the data path must go: no process can write there, not even root (for
    # whom permission bits do not count).
    (tmp_path / "blocker").write_text("not a folder")
    lake = pdl.connect(f"sqlite:///{tmp_path}/c.sqlite", str(tmp_path / "blocker" / "data"))
    lake.create_table("main.t", pa.schema([("id", pa.int64())]))
    with expect_bad_input("data-path-unwritable", lake, watch=[tmp_path / "blocker"]):
        lake.append("main.t", pa.table({"id": list(range(100))}))  # above the inlining limit: a Parquet file
    assert lake.scan("main.t").num_rows == 0


def test_spark_without_a_catalog() -> None:
    with expect_bad_input("spark-no-catalog"):
        LakeConfig.resolve({}, spark_conf=lambda _key: None, environ={})


# --- tables and data ------------------------------------------------------------------------------------------------


def test_unknown_schema_and_table(lake: pdl.Lake) -> None:
    with expect_bad_input("unknown-schema", lake):
        lake.scan("nope.t")
    with expect_bad_input("unknown-schema", lake):
        lake.create_table("nope.t", pa.schema([("a", pa.int32())]))
    with expect_bad_input("unknown-table", lake) as err:
        lake.append("main.missing", pa.table({"id": [1]}))
    assert "main.missing" in str(err.value)
    with expect_bad_input("unknown-table", lake):
        lake.scan("main.missing")


@pytest.mark.parametrize(
    ("case", "data", "match"),
    [
        ("schema-mismatch-type", pa.table({"id": ["x"], "name": ["a"]}), r"column 'id' .* int64.*varchar"),
        ("schema-mismatch-column", pa.table({"id": [1], "other": ["a"]}), r"column 'other' is not in table main\.t"),
        ("schema-mismatch-type", pa.table({"id": pa.array([1.5])}), r"column 'id' .* int64.*float64"),
    ],
)
def test_incompatible_append_writes_nothing(lake: pdl.Lake, case: str, data: pa.Table, match: str) -> None:
    for batch in (data, pa.concat_tables([data] * 50)):  # inlined and Parquet-sized
        with expect_bad_input(case, lake) as err:
            lake.append("main.t", batch)
        assert isinstance(err.value, SchemaMismatchError)
        assert re.search(match, str(err.value))


def test_not_null_column(lake: pdl.Lake) -> None:
    lake.create_table("main.nn", pa.schema([pa.field("id", pa.int64(), nullable=False)]))
    for n in (2, 200):
        with expect_bad_input("not-null", lake):
            lake.append("main.nn", pa.table({"id": [1] * (n - 1) + [None]}))
    assert lake.scan("main.nn").num_rows == 0


def test_lossless_widening_is_accepted(lake: pdl.Lake) -> None:
    lake.append("main.t", pa.table({"id": pa.array([1, 2], pa.int32())}))
    assert lake.scan("main.t").column("id").type == pa.int64()


def test_integers_narrow_only_when_they_fit(lake: pdl.Lake) -> None:
    lake.create_table("main.small", pa.schema([("v", pa.int16())]))
    lake.append("main.small", pa.table({"v": [1, -5, 32767]}))  # int64 data that fits
    with pytest.raises(SchemaMismatchError, match="'v'"):
        lake.append("main.small", pa.table({"v": [40000]}))
    assert sorted(lake.scan("main.small").column(0).to_pylist()) == [-5, 1, 32767]


def test_unsupported_types_name_the_column(lake: pdl.Lake) -> None:
    with expect_bad_input("unsupported-arrow-type", lake) as err:
        lake.create_table("main.bad", pa.schema([("ok", pa.int32()), ("dur", pa.duration("s"))]))
    assert "'dur'" in str(err.value)
    with pytest.raises(UnsupportedTypeError, match=r"'big'.*maximum precision 38"):
        lake.create_table("main.bad", pa.schema([("big", pa.decimal256(60, 2))]))
    assert "main.bad" not in lake.tables()


def test_duplicates_and_bad_identifiers(lake: pdl.Lake) -> None:
    with expect_bad_input("table-exists", lake):
        lake.create_table("main.t", pa.schema([("id", pa.int64())]))
    with pytest.raises(SchemaAlreadyExistsError, match="exist_ok=True"):
        lake.create_schema("main")
    lake.create_schema("main", exist_ok=True)
    with expect_bad_input("bad-identifier", lake):
        lake.scan("a.b.c")
    with expect_bad_input("bad-identifier", lake):
        lake.create_table("main.", pa.schema([("a", pa.int32())]))
    with pytest.raises(DuckLakeError, match="give every column its own name"):
        lake.create_table("main.dup", pa.schema([("a", pa.int32()), ("a", pa.int64())]))


def test_unknown_column_and_snapshot(lake: pdl.Lake) -> None:
    with expect_bad_input("unknown-column", lake):
        lake.scan("main.t", columns=["nope"])
    with expect_bad_input("unknown-column", lake):
        lake.scan("main.t", filter=[("nope", "=", 1)])
    with expect_bad_input("unknown-column", lake):
        lake.delete("main.t", [("nope", "=", 1)])
    with pytest.raises(NoSuchColumnError):
        lake.rename_column("main.t", "nope", "x")
    with expect_bad_input("bad-filter", lake):
        lake.scan("main.t", filter=[("id", "~", 1)])
    with expect_bad_input("bad-filter", lake):
        lake.delete("main.t", [("id", "~", 1)])
    with expect_bad_input("bad-filter", lake):
        lake.delete("main.t", [("id", "=")])
    # a filtered overwrite checks its filter before it writes the new rows' file
    big = pa.table({"id": list(range(100))})
    with expect_bad_input("unknown-column", lake):
        lake.overwrite("main.t", big, filter=[("nope", "=", 1)])
    with expect_bad_input("bad-filter", lake):
        lake.overwrite("main.t", big, filter=[("id", "~", 1)])
    with expect_bad_input("narrowing-type-change", lake):
        lake.set_column_type("main.t", "id", pa.int32())
    with expect_bad_input("unknown-snapshot", lake) as err:
        lake.scan("main.t", snapshot=99)
    assert "99" in str(err.value)
    with expect_bad_input("unknown-snapshot", lake):
        lake.scan("main.t", timestamp="1990-01-01T00:00:00")


def test_a_snapshot_id_that_is_not_an_integer_is_refused_on_every_entry_point(
    lake: pdl.Lake, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # scan(snapshot=2.7) read snapshot 2; True read snapshot 1; '2' was taken where the API takes ints
    from pyspark_ducklake.__main__ import main
    from pyspark_ducklake.batch.reader import resolve_read_snapshot

    lake.append("main.t", pa.table({"id": [100], "name": ["b"]}))
    reads = (
        lambda bad: lake.scan("main.t", snapshot=bad),
        lambda bad: lake.table("main.t", snapshot=bad),
        lambda bad: lake.list_files("main.t", snapshot=bad),
        lambda bad: lake.resolve_snapshot(snapshot=bad),
        lambda bad: lake.table_changes("main.t", bad),
        lambda bad: lake.table_changes("main.t", 0, bad),
        lambda bad: lake.expire_snapshots(versions=[bad], dry_run=True),
    )
    for bad in (2.7, 2.0, True, "2", b"2", np.float64(2), np.bool_(True)):
        for read in reads:
            with expect_bad_input("snapshot-not-integer", lake) as err:
                read(bad)
            assert repr(bad) in str(err.value)
    assert lake.scan("main.t", snapshot=np.int64(2)).num_rows == 20  # NumPy's integers are integers
    # Spark options are text: "2" is a snapshot id there, "2.7" and "true" are not (the parser of the registry, and
    # of the read's pinned snapshot)
    assert resolve_read_snapshot(lake, {"versionAsOf": "2"}) == 2
    for key, bad_text in (("versionAsOf", "2.7"), ("snapshot", "true"), ("endingSnapshot", "2.0")):
        with expect_bad_input("snapshot-not-integer", lake):
            check_options({key: bad_text}, Entry.READ)
    with expect_bad_input("snapshot-not-integer", lake):
        resolve_read_snapshot(lake, {"versionAsOf": "3_000"})
    with expect_bad_input("snapshot-not-integer", lake) as err:
        check_options({"startingSnapshot": "2.7"}, Entry.READ)
    assert "'earliest' or 'latest'" in str(err.value)
    # the command line: a usage error naming the argument
    url = lake.location.url
    for args in (["changes", "main.t", "2.7"], ["changes", "main.t", "0", "true"], ["expire", "--versions", "1,2.5"]):
        assert main(["--catalog", url, *args]) == 2
        err_text = capsys.readouterr().err
        assert "as a snapshot id" in err_text and "Traceback" not in err_text, args
    assert len(lake.snapshots()) == 4


CORRUPTIONS = [
    # (what the catalog row holds, the statement that makes it so, the place the message names)
    (
        "inlined-bigint",
        "UPDATE ducklake_inlined_data_1_1 SET id = 'abc' WHERE row_id = 20",
        "ducklake_inlined_data_1_1",
    ),
    ("record-count", "UPDATE ducklake_data_file SET record_count = 'x'", "ducklake_data_file.record_count"),
    ("row-id-start", "UPDATE ducklake_data_file SET row_id_start = 2.5", "ducklake_data_file.row_id_start"),
    ("next-file-id", "UPDATE ducklake_snapshot SET next_file_id = NULL", "ducklake_snapshot.next_file_id of snapshot"),
    ("flag", "UPDATE ducklake_data_file SET path_is_relative = 'yes'", "ducklake_data_file.path_is_relative"),
    ("default", "UPDATE ducklake_column SET initial_default = 'abc' WHERE column_name = 'n'", "initial_default"),
]


@pytest.mark.parametrize(("sql", "where"), [c[1:] for c in CORRUPTIONS], ids=[c[0] for c in CORRUPTIONS])
def test_a_catalog_value_that_does_not_parse_is_a_corrupt_catalog_error_on_every_path(
    tmp_path: Path, sql: str, where: str
) -> None:
    # scan raised a bare ValueError for an inlined BIGINT holding 'abc'; a NULL next_file_id a TypeError
    lake = pdl.connect(f"sqlite:///{tmp_path}/c.sqlite", str(tmp_path / "data"))
    lake.create_table("main.t", pa.schema([("id", pa.int64())]))
    lake.append("main.t", pa.table({"id": list(range(20))}))  # a Parquet file
    lake.append("main.t", pa.table({"id": [20, 21]}))  # inlined, row ids 20 and 21
    lake.add_column("main.t", "n", pa.int64(), default=5)  # old rows read its initial default
    with sqlite3.connect(tmp_path / "c.sqlite") as db:
        db.execute(sql)
    operations = {
        "scan": lambda: lake.scan("main.t"),
        "change feed": lambda: lake.table_changes("main.t", 0),
        "flush": lambda: lake.flush_inlined_data("main.t"),
        "append": lambda: lake.append("main.t", pa.table({"id": list(range(30))})),
    }

    def snapshots() -> int:  # counted in SQL: lake.snapshots() reads the corrupt row too
        with sqlite3.connect(tmp_path / "c.sqlite") as db:
            return int(db.execute("SELECT count(*) FROM ducklake_snapshot").fetchone()[0])

    before, failed = snapshots(), []
    for name, operation in operations.items():
        try:
            operation()
        except DuckLakeError:
            failed.append(name)
            with expect_bad_input("catalog-value-corrupt", watch=[tmp_path / "data"]) as err:
                operation()
            assert where in str(err.value) and "snapshot" in str(err.value), (name, str(err.value))
            assert isinstance(err.value, CorruptCatalogError) and snapshots() == before
    assert failed, "no operation noticed the corruption"
    if "inlined" in where:  # an append does not read the inlined rows
        assert "row_id 20 (inserted by snapshot 3)" in str(err.value)
        assert failed == ["scan", "change feed", "flush"]


def test_a_table_min_max_that_does_not_parse_is_refused_on_a_write_and_ignored_by_reads(tmp_path: Path) -> None:
    # as DuckDB: its commit fails on such table statistics; file statistics are hints it ignores (file-stats-corrupt)
    accepted_input("file-stats-corrupt")
    lake = pdl.connect(f"sqlite:///{tmp_path}/c.sqlite", str(tmp_path / "data"))
    lake.create_table("main.t", pa.schema([("id", pa.int64())]))
    lake.append("main.t", pa.table({"id": list(range(20))}))
    with sqlite3.connect(tmp_path / "c.sqlite") as db:
        db.execute("UPDATE ducklake_table_column_stats SET min_value = 'abc'")
        db.execute("UPDATE ducklake_file_column_stats SET min_value = 'abc', max_value = '1e999x'")
    assert lake.scan("main.t", filter=[("id", ">", 5)]).num_rows == 14  # read, not pruned
    with expect_bad_input("catalog-value-corrupt", lake, watch=[tmp_path / "data"]) as err:
        lake.append("main.t", pa.table({"id": list(range(30))}))
    assert "ducklake_table_column_stats.min_value/max_value of table_id 1, column 'id'" in str(err.value)


def test_missing_data_file_is_a_data_file_error(lake: pdl.Lake) -> None:
    for path in parquet_files(lake.data_path):
        os.remove(path)
    with pytest.raises(DataFileError, match="is missing"):
        lake.scan("main.t")


def test_missing_columns_take_the_current_default(lake: pdl.Lake) -> None:
    lake.add_column("main.t", "country", pa.string(), default="NL")
    lake.append("main.t", pa.table({"id": [100, 101]}))
    lake.append("main.t", pa.table({"id": [102], "country": [None]}))
    got = sorted(lake.scan("main.t", filter=[("id", ">=", 100)]).to_pylist(), key=lambda r: r["id"])
    assert [r["country"] for r in got] == ["NL", "NL", None]


# --- options --------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"data_inlining_row_limit": -1}, "data_inlining_row_limit"),
        ({"max_retry_count": -1}, "max_retry_count"),
        ({"retry_backoff": 0.5}, "retry_backoff"),
        ({"retry_wait_ms": -5}, "retry_wait_ms"),
        ({"reconnect_timeout": -1}, "reconnect_timeout"),
    ],
)
def test_options_out_of_range(lake: pdl.Lake, kwargs: dict[str, object], match: str) -> None:
    with expect_bad_input("option-out-of-range", lake) as err:
        pdl.connect(lake.location.url, **kwargs)  # type: ignore[arg-type]
    assert match in str(err.value)


def test_retry_options_of_connect_are_parsed_or_refused(lake: pdl.Lake) -> None:
    for kwargs in ({"max_retry_count": "false"}, {"retry_wait_ms": "soon"}, {"max_retry_count": True}):
        with expect_bad_input("option-unparseable", lake):
            pdl.connect(lake.location.url, **kwargs)  # type: ignore[arg-type]
    for kwargs in ({"retry_backoff": float("nan")}, {"retry_backoff": "inf"}):
        with expect_bad_input("option-out-of-range", lake) as err:
            pdl.connect(lake.location.url, **kwargs)  # type: ignore[arg-type]
        assert "retry_backoff" in str(err.value)
    assert pdl.connect(lake.location.url, max_retry_count="3").retry.max_retry_count == 3


def test_sink_options_out_of_range() -> None:
    for kwargs in ({"flush_rows": 0}, {"max_retry_count": -3}, {"target_file_rows": 0}, {"flush_interval": -1}):
        with expect_bad_input("option-out-of-range"):
            ducklake_sink("main.t", **kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"max_retry_count": "ten"}, "max_retry_count to an integer: 'ten'"),
        ({"retry_backoff": "fast"}, "retry_backoff to a number: 'fast'"),
        ({"reconnect_timeout": "forever"}, "reconnect_timeout as a duration"),
        ({"data_inlining_row_limit": "lots"}, "data_inlining_row_limit to an integer"),
    ],
)
def test_unparseable_option_values(options: dict[str, str], match: str) -> None:
    with expect_bad_input("option-unparseable") as err:
        LakeConfig.resolve({"catalog": "sqlite:///lake.sqlite", **options})
    assert match in str(err.value)


def test_conflicting_options_and_partition_keys(lake: pdl.Lake) -> None:
    with expect_bad_input("option-conflict", lake):
        lake.scan("main.t", snapshot=1, timestamp="2020-01-01T00:00:00")
    with expect_bad_input("partition-transform", lake):
        lake.set_partitioning("main.t", ["bucket(id)"])
    with pytest.raises(InvalidOptionError, match=r"year\(\) needs a date or timestamp column"):
        lake.set_partitioning("main.t", ["year(id)"])


# --- accepted -------------------------------------------------------------------------------------------------------

HOSTILE = ["s p'a", 'we\'ird "name"', "semi; DROP TABLE x;--", "../escape", "ünï/cødé"]


def test_hostile_identifiers_are_stored_verbatim_and_files_stay_inside(tmp_path: Path) -> None:
    accepted_input("hostile-identifiers")
    lake = pdl.connect(f"sqlite:///{tmp_path}/c.sqlite", str(tmp_path / "data"))
    for i, name in enumerate(HOSTILE):
        lake.create_schema(name)
        lake.create_table((name, name), pa.schema([(name, pa.int64())]))
        lake.append((name, name), pa.table({name: list(range(i, i + 30))}))  # a Parquet file
        assert lake.scan((name, name)).column(name).to_pylist() == list(range(i, i + 30))
    assert sorted(lake.schemas()) == sorted(["main", *HOSTILE])
    data = os.path.realpath(lake.data_path)
    files = [os.path.realpath(p) for p in parquet_files(str(tmp_path))]
    assert len(files) == len(HOSTILE) and all(f.startswith(data + os.sep) for f in files)
    assert lake.referenced_files(parquet_files(lake.data_path)) == set(parquet_files(lake.data_path))
    with sqlite3.connect(tmp_path / "c.sqlite") as c:  # the catalog's own tables are intact
        assert c.execute("SELECT count(*) FROM ducklake_snapshot").fetchone()[0] == 1 + 3 * len(HOSTILE)


def test_unreachable_catalog_error_hides_the_password(tmp_path: Path) -> None:
    with pytest.raises(CatalogUnreachableError) as err:
        pdl.connect("postgresql+psycopg2://user:s3cr3t@127.0.0.1:1/x", str(tmp_path))
    assert "s3cr3t" not in str(err.value) and "***" in str(err.value)


# --- values: invalid UTF-8, extra_info ------------------------------------------------------------------------------


def _not_utf8(n: int, dtype: pa.DataType) -> pa.Array:
    """A string array built from raw buffers, as a foreign Arrow producer can hand it over: every third value
    is not UTF-8 (``pa.array`` refuses such bytes, buffers do not)."""
    values = [b"ok", b"\xff\xfe", b"a\xc3"] * n
    offsets = [0]
    for v in values:
        offsets.append(offsets[-1] + len(v))
    offset_type = pa.int64() if dtype == pa.large_string() else pa.int32()
    buffers = [None, pa.array(offsets, offset_type).buffers()[1], pa.py_buffer(b"".join(values))]
    return pa.Array.from_buffers(dtype, len(values), buffers)


@pytest.mark.parametrize("dtype", [pa.string(), pa.large_string()], ids=["string", "large_string"])
@pytest.mark.parametrize("rows", [1, 10], ids=["inlined", "parquet"])
def test_invalid_utf8_is_refused_before_anything_is_written(lake: pdl.Lake, dtype: pa.DataType, rows: int) -> None:
    bad = _not_utf8(rows, dtype)
    data = pa.table({"id": pa.array(range(len(bad)), pa.int64()), "name": bad})
    with expect_bad_input("invalid-utf8", lake) as err:
        lake.append("main.t", data)
    assert "column 'name'" in str(err.value) and "row 1" in str(err.value)
    nested = pa.table({"id": pa.array([0], pa.int64()), "tags": pa.ListArray.from_arrays([0, len(bad)], bad)})
    lake.create_table("main.nested", pa.schema([("id", pa.int64()), ("tags", pa.list_(pa.string()))]), exist_ok=True)
    with expect_bad_input("invalid-utf8", lake):
        lake.append("main.nested", nested)
    with expect_bad_input("invalid-utf8", lake):
        lake.overwrite("main.t", data)


@pytest.mark.parametrize(
    "extra",
    [{"at": dt.datetime(2026, 1, 1)}, {"s": {1, 2}}, {"x": float("nan")}, "not json", "{'a': 1}"],
    ids=["datetime", "set", "nan", "text", "python-repr"],
)
@pytest.mark.parametrize("rows", [1, 20], ids=["inlined", "parquet"])
def test_extra_info_that_is_not_json_writes_nothing(lake: pdl.Lake, extra: object, rows: int) -> None:
    data = pa.table({"id": list(range(rows)), "name": ["x"] * rows})
    with expect_bad_input("extra-info-not-json", lake):
        lake.append("main.t", data, extra_info=extra)  # type: ignore[arg-type]


def test_json_extra_info_is_stored(lake: pdl.Lake) -> None:
    lake.append("main.t", pa.table({"id": [1], "name": ["x"]}), extra_info={"k": [1, "é"]})
    assert json.loads(lake.snapshots()[-1].commit_extra_info or "") == {"k": [1, "é"]}
    lake.append("main.t", pa.table({"id": [2], "name": ["x"]}), extra_info='{"raw": true}')  # type: ignore[arg-type]
    assert lake.snapshots()[-1].commit_extra_info == '{"raw": true}'


def test_format_and_storage_versions(tmp_path: Path) -> None:
    for value in ("2.0", "1.1-dev1", 1.1):
        with expect_bad_input("format-version-unknown", watch=[tmp_path]):
            pdl.connect(f"sqlite:///{tmp_path}/a.sqlite", str(tmp_path / "a"), format_version=value)  # type: ignore[arg-type]
    assert not (tmp_path / "a.sqlite").exists()
    pdl.connect(f"sqlite:///{tmp_path}/c.sqlite", str(tmp_path / "c"), format_version="1.1").close()
    with expect_bad_input("format-version-mismatch", watch=[tmp_path]):
        pdl.connect(f"sqlite:///{tmp_path}/c.sqlite", format_version="1.0")
    pdl.connect(f"sqlite:///{tmp_path}/d.sqlite", str(tmp_path / "d")).close()
    with expect_bad_input("format-version-mismatch", watch=[tmp_path]) as err:
        pdl.connect(f"sqlite:///{tmp_path}/d.sqlite", format_version="1.1")
    assert "Lake.migrate('1.1')" in str(err.value)
    for value in ("v1.5", 1, "v9.9.9"):
        with expect_bad_input("duckdb-storage-version", watch=[tmp_path]):
            pdl.connect(f"ducklake:{tmp_path}/x.ducklake", str(tmp_path / "x"), duckdb_storage_version=value)  # type: ignore[arg-type]
        assert not (tmp_path / "x.ducklake").exists()


def test_migration_collision_changes_nothing(tmp_path: Path) -> None:
    lake = pdl.connect(f"sqlite:///{tmp_path}/c.sqlite", str(tmp_path / "c"), data_inlining_row_limit=10)
    lake.create_table("main.t", pa.schema([("id", pa.int64()), ("_ducklake_end_snapshot", pa.int64())]))
    lake.append("main.t", pa.table({"id": [1], "_ducklake_end_snapshot": [2]}))
    with expect_bad_input("migrate-collision", lake, watch=[tmp_path / "c.sqlite"]):
        lake.migrate("1.1")
    assert lake.format_version == "1.0"
