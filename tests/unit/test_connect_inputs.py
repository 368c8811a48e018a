"""``connect()`` arguments nobody listed: misspelt keywords, and data paths spelled relative, with ``~``, a trailing
slash, ``file://`` or an unknown protocol. Real SQLite catalogs; DuckDB reads what was written."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pyarrow as pa
import pytest

import pyspark_ducklake as pdl
from pyspark_ducklake.exceptions import InvalidOptionError
from tests.support.bad_inputs import expect_bad_input
from tests.support.catalogs import CatalogLocation
from tests.support.duck import open_duckdb


@pytest.mark.parametrize(
    ("keyword", "suggestion"),
    [("max_retry_cont", "max_retry_count"), ("datapath", "data_path"), ("storage_option", "storage_options")],
)
def test_misspelt_connect_keyword_names_the_right_one(tmp_path: Path, keyword: str, suggestion: str) -> None:
    """It was Python's bare TypeError ("got an unexpected keyword argument")."""
    catalog = tmp_path / "c.sqlite"
    with expect_bad_input("option-unknown", watch=[tmp_path]) as err:
        pdl.connect(f"sqlite:///{catalog}", str(tmp_path / "data"), **{keyword: 3})
    assert f"did you mean {suggestion!r}" in str(err.value)
    assert not catalog.exists()


def test_data_path_spellings_reach_the_same_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))
    for n, (given, folder) in enumerate(
        [
            ("rel/data", tmp_path / "rel" / "data"),
            ("~/home-data", tmp_path / "home-data"),
            (f"file://{tmp_path}/url-data/", tmp_path / "url-data"),
            (f"{tmp_path}/slash-data//", tmp_path / "slash-data"),
        ]
    ):
        url = f"sqlite:///{tmp_path}/c{n}.sqlite"
        lake = pdl.connect(url, given, data_inlining_row_limit=0)
        lake.create_table("main.t", pa.schema([("id", pa.int64())]))
        lake.append("main.t", pa.table({"id": [n]}))
        assert lake.data_path == f"{folder}/"
        assert any(p.suffix == ".parquet" for p in folder.rglob("*")), given
        for again in (given, str(folder), f"file://{folder}", f"{folder}/"):
            assert pdl.connect(url, again).data_path == lake.data_path  # the same folder, however spelt
        location = CatalogLocation("sqlite", url, f"ducklake:sqlite:{tmp_path}/c{n}.sqlite", lake.data_path)
        con = open_duckdb(location)
        try:
            assert con.execute("SELECT id FROM lake.main.t").fetchall() == [(n,)]
        finally:
            con.close()


def test_data_path_with_an_unknown_protocol_is_refused_before_the_catalog_is_made(tmp_path: Path) -> None:
    """It made the catalog, recorded foo://… in it, and failed at the first write (leaving the empty lake)."""
    catalog = tmp_path / "c.sqlite"
    for data_path in ("foo://bucket/lake", "", "   "):
        with pytest.raises(InvalidOptionError, match="data_path"):
            pdl.connect(f"sqlite:///{catalog}", data_path)
        assert not catalog.exists()
    assert os.listdir(tmp_path) == []


def test_nul_in_an_app_id_or_author_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    """On PostgreSQL the sink's commit failed with psycopg2's bare ValueError after its Parquet files were written
    (and left behind); refused when the sink or lake is made now, on every backend."""
    from pyspark_ducklake.streaming.sink import ducklake_sink

    with pytest.raises(InvalidOptionError, match="option app_id must not contain a NUL character"):
        ducklake_sink("main.t", catalog=f"sqlite:///{tmp_path}/c.sqlite", app_id="a\x00b")
    with pytest.raises(InvalidOptionError, match="option author must not contain a NUL character"):
        pdl.connect(f"sqlite:///{tmp_path}/c.sqlite", str(tmp_path / "data"), author="x\x00y")
    with pytest.raises(InvalidOptionError, match=r"option catalog must not contain a NUL character \(\\x00\)$"):
        ducklake_sink("main.t", catalog="postgresql://u:secret@host/db\x00")
    assert os.listdir(tmp_path) == []


def test_opening_a_missing_sqlite_catalog_without_data_path_creates_no_file(tmp_path: Path) -> None:
    path = tmp_path / "lake.sqlite"
    with pytest.raises(InvalidOptionError, match="is new: pass data_path"):
        pdl.connect(f"sqlite:///{path}")
    assert not path.exists()


def test_a_reader_polling_a_catalog_another_process_creates_never_loses_it(tmp_path: Path) -> None:
    """A monitor polling ``connect(url)`` while a pipeline runs ``connect(url, data_path)`` on the same new file.

    Connecting used to delete the empty file it had just made: when the creator had opened that file in between, the
    creator's catalog went into a deleted file and its next connection found "no such table: ducklake_metadata".
    """
    for round_ in range(10):
        path = tmp_path / f"lake{round_}.sqlite"
        url = f"sqlite:///{path}"
        stop = threading.Event()

        def poll(url: str = url, stop: threading.Event = stop) -> None:
            while not stop.is_set():
                try:
                    pdl.connect(url).close()
                except InvalidOptionError:  # not created yet
                    pass

        pollers = [threading.Thread(target=poll) for _ in range(2)]
        for t in pollers:
            t.start()
        try:
            with pdl.connect(url, str(tmp_path / f"data{round_}")) as lake:
                lake.create_table("t", pa.schema([("id", pa.int64())]))
                assert lake.data_inlining_row_limit() == 10
        finally:
            stop.set()
            for t in pollers:
                t.join()
        with pdl.connect(url) as lake:
            assert lake.tables() == ["main.t"]
