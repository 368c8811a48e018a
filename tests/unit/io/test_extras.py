"""The extras' floors: pyproject.toml and pyspark_ducklake/io/extras.py say the same, versions compare by release
numbers, and this venv's packages pass. An installed package older than its floor is refused at first use in a fresh
venv (tests/integration/test_install.py, which also runs every extra at its floor)."""

from __future__ import annotations

import re

import pytest

from pyspark_ducklake.io.extras import EXTRAS, require_extra, too_old
from tests.support.catalogs import REPO_ROOT


def pyproject_floors() -> dict[str, dict[str, str]]:
    """``{extra: {package: floor}}`` of pyproject's optional dependencies (tomllib is 3.11+; the package is 3.10+)."""
    text = (REPO_ROOT / "pyproject.toml").read_text()
    section = text.split("[project.optional-dependencies]", 1)[1].split("\n[", 1)[0]
    out: dict[str, dict[str, str]] = {}
    for extra, body in re.findall(r"^([A-Za-z0-9_-]+)\s*=\s*\[(.*?)\]", section, re.M | re.S):
        for package, floor in re.findall(r'"([A-Za-z0-9_.-]+)(?:\[[^\]]*\])?>=([0-9][^,"<]*)', body):
            out.setdefault(extra, {})[package] = floor
    return out


def test_pyproject_declares_the_floors_the_code_checks() -> None:
    declared = pyproject_floors()
    for extra, floors in EXTRAS.items():
        assert {f.name: f.floor for f in floors} == declared.get(extra), extra
    # every extra of a package the library imports has a floor
    for extra in ("s3", "gcs", "azure", "postgres", "duckdb"):
        assert extra in EXTRAS and declared[extra], extra


@pytest.mark.parametrize(
    ("version", "floor", "old"),
    [
        ("0.4.2", "2023.1.0", True),
        ("2022.11.0", "2023.1.0", True),
        ("2023.1.0", "2023.1.0", False),
        ("2023.12.2.post1", "2023.1.0", False),
        ("2.9.4", "2.9.5", True),
        ("2.9.10 (dt dec pq3 ext lo64)", "2.9.5", False),  # psycopg2's own spelling
        ("1.5", "1.5.0", False),
        ("1.5.0rc1", "1.5.0", False),
        ("1.4.4", "1.5.0", True),
    ],
)
def test_versions_compare_by_release_numbers(version: str, floor: str, old: bool) -> None:
    assert too_old(version, floor) is old


def test_the_test_venv_passes_every_floor() -> None:
    for extra in EXTRAS:
        require_extra(extra)
