"""DuckDB-file catalog locations and the missing-extra error (no DuckDB lake needed)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from pyspark_ducklake.catalog.location import parse_location, redact_location
from pyspark_ducklake.exceptions import InvalidOptionError


@pytest.mark.parametrize(
    "spelling",
    ["ducklake:{p}", "ducklake:duckdb:{p}", "{p}", "duckdb:{p}", "duckdb:///{p}", "DuckLake:{p}"],
)
def test_spellings_of_a_duckdb_file(tmp_path, spelling: str) -> None:
    path = str(tmp_path / "it's a lake.ducklake")
    loc = parse_location(spelling.format(p=path))
    assert loc.backend == "duckdb"
    assert loc.duckdb_attach() == f"ducklake:{path}"
    assert redact_location(spelling.format(p=path)) == f"ducklake:{path}"


def test_relative_path_is_made_absolute(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert parse_location("ducklake:my.ducklake").duckdb_attach() == f"ducklake:{tmp_path}/my.ducklake"


@pytest.mark.parametrize(
    "spelling", ["ducklake::memory:", "duckdb::memory:", "ducklake:  ", "duckdb:///:memory:", "ducklake:md:lake"]
)
def test_in_memory_duckdb_is_refused(spelling: str) -> None:
    with pytest.raises(InvalidOptionError):
        parse_location(spelling)


def test_without_the_extra_the_error_names_it(tmp_path) -> None:
    code = textwrap.dedent(
        f"""
        import sys
        sys.modules["duckdb_engine"] = None  # as if pyspark-ducklake[duckdb] were not installed
        import pyspark_ducklake as pdl
        from pyspark_ducklake.exceptions import NotInstalledError
        try:
            pdl.connect({"ducklake:" + str(tmp_path / "x.ducklake")!r}, data_path={str(tmp_path / "f")!r})
        except NotInstalledError as e:
            print("NotInstalledError:", e)
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.startswith("NotInstalledError:") and "pip install 'pyspark-ducklake[duckdb]'" in out
    assert not (tmp_path / "x.ducklake").exists()
