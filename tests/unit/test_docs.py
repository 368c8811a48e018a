"""The documentation: the site builds with ``mkdocs build --strict``, the README stays a short entry whose links and
tour work, and what the docs state about versions and benchmark ratios is what the project files hold.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import doc_blocks
from tests.support.bad_inputs import BLOCK as BAD_INPUT_BLOCK
from tests.support.catalogs import REPO_ROOT
from tests.support.doc_blocks import heading_anchor
from tests.support.option_tables import blocks as option_blocks
from tests.support.reliability import BLOCK as RELIABILITY_BLOCK

README = REPO_ROOT / "README.md"
DOCS = REPO_ROOT / "docs"
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)|!\[[^\]]*\]\(([^)\s]+)\)")


def build_site(root: Path, site: Path) -> subprocess.CompletedProcess[str]:
    """``mkdocs build --strict`` of the project at ``root`` into ``site`` (cwd ``root``: snippets resolve there)."""
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    cmd = [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(root / "mkdocs.yml"), "-d", str(site)]
    return subprocess.run(cmd, cwd=root, capture_output=True, text=True, env=env, timeout=300)


def test_site_builds_strict(tmp_path: Path) -> None:
    proc = build_site(REPO_ROOT, tmp_path / "site")
    assert proc.returncode == 0, proc.stderr[-4000:]
    site = tmp_path / "site"
    pages = {p.stem for p in DOCS.glob("*.md")} - {"index"}
    assert all((site / page / "index.html").exists() for page in pages), sorted(
        p for p in pages if not (site / p / "index.html").exists()
    )
    api = (site / "api" / "index.html").read_text()
    # mkdocstrings rendered the docstrings: the Lake's methods and the package's functions have their entries
    for anchor in ("pyspark_ducklake.lake.Lake.append", "pyspark_ducklake.connect", "pyspark_ducklake.ducklake_sink"):
        assert f'id="{anchor}"' in api, anchor
    assert "Licensed under the Apache License" in (site / "license" / "index.html").read_text()
    assert "Changelog" in (site / "changelog" / "index.html").read_text()
    # files the pages link outside docs/ are copied into the site (scripts/mkdocs_hooks.py)
    assert (site / "repo" / "bench" / "results" / "sink.png").exists()
    assert 'href="../repo/bench/README.md.txt"' in (site / "benchmarks" / "index.html").read_text()


def test_strict_build_fails_on_a_broken_link(tmp_path: Path) -> None:
    """The strict build is a check: a copy of the docs with one link to a missing page does not build."""
    root = tmp_path / "copy"
    shutil.copytree(DOCS, root / "docs")
    for name in ("mkdocs.yml", "CHANGELOG.md", "LICENSE", "ARCHITECTURE.md"):
        shutil.copy(REPO_ROOT / name, root / name)
    shutil.copytree(REPO_ROOT / "scripts", root / "scripts")
    shutil.copytree(REPO_ROOT / "bench", root / "bench", ignore=shutil.ignore_patterns("*.json", "__pycache__"))
    shutil.copytree(REPO_ROOT / "pyspark_ducklake", root / "pyspark_ducklake")
    page = root / "docs" / "install.md"
    page.write_text(page.read_text() + "\nSee [the missing page](no-such-page.md).\n")
    proc = build_site(root, tmp_path / "site")
    assert proc.returncode != 0 and "no-such-page.md" in proc.stderr, proc.stderr[-4000:]


def test_readme_is_a_short_entry_with_contents() -> None:
    text = README.read_text()
    assert len(text.encode()) < 15 * 1024, f"README.md is {len(text.encode())} bytes; move detail into docs/"
    sections = re.findall(r"^## (.+)$", text, re.M)
    contents = text.split("## Contents", 1)[1].split("\n## ", 1)[0]
    listed = re.findall(r"\]\(#([^)]+)\)", contents)
    assert listed == [heading_anchor(s) for s in sections if s != "Contents"]
    # the two set-up commands, exactly, and CI runs the test one
    quick = text.split("## Quick start on a fresh machine", 1)[1].split("\n## ", 1)[0]
    assert "```sh\nmake demo\nmake test\n```" in quick
    assert re.search(r"^make test$", (REPO_ROOT / ".ci" / "run").read_text(), re.M)
    # every page of the site is linked from the README
    linked = set(re.findall(r"\]\(docs/([a-z0-9-]+\.md)\)", text))
    assert {p.name for p in DOCS.glob("*.md")} - {"index.md", "changelog.md", "license.md"} <= linked


def anchors_of(path: Path) -> set[str]:
    text = re.sub(r"^```.*?^```", "", path.read_text(), flags=re.M | re.S)
    return {heading_anchor(h) for h in re.findall(r"^#{1,6} (.+)$", text, re.M)}


@pytest.mark.parametrize("path", [README, *sorted(DOCS.glob("*.md"))], ids=lambda p: p.name)
def test_relative_links_resolve(path: Path) -> None:
    """Every relative link, as GitHub shows the file, names a file that exists (and a heading that exists)."""
    text = re.sub(r"^```.*?^```", "", path.read_text(), flags=re.M | re.S)
    broken = []
    for m in LINK.finditer(text):
        target = m.group(1) or m.group(2)
        if re.match(r"[a-z]+:", target):
            continue
        file, _, anchor = target.partition("#")
        dest = (path.parent / file).resolve() if file else path
        if not dest.exists() or (anchor and dest.suffix == ".md" and anchor not in anchors_of(dest)):
            broken.append(target)
    assert broken == [], f"{path.name}: broken links {broken}"


def test_generated_tables_live_in_one_page_each() -> None:
    """Each generator's markers are in exactly one page, so --write finds where to put its table."""
    names = [*option_blocks(), BAD_INPUT_BLOCK, RELIABILITY_BLOCK]
    where = {name: doc_blocks.locate(name).relative_to(REPO_ROOT).as_posix() for name in names}
    assert all(path.startswith("docs/") for path in where.values()), where


def test_compatibility_matrix_states_what_pyproject_declares() -> None:
    matrix = (DOCS / "compatibility.md").read_text().split("## Versions: what CI tests", 1)[1]
    rows = {r.split("|")[1].strip(): r for r in matrix.splitlines() if r.startswith("| ") and "---" not in r}
    pyproject = (REPO_ROOT / "pyproject.toml").read_text()
    python = re.search(r'^requires-python = "([^"]+)"', pyproject, re.M)
    assert python
    wanted = {
        "Python": [f"`{python.group(1)}`"],
        "Apache Spark (pyspark)": [_req(pyproject, "pyspark[")],
        "PyArrow": [_req(pyproject, "pyarrow")],
        "DuckDB (the test oracle)": [_req(pyproject, "duckdb==")],
        "DuckDB (`[duckdb]` extra, DuckDB-file catalogs)": [
            _req(pyproject, "duckdb>="),
            _req(pyproject, "duckdb-engine"),
        ],
        "SQLAlchemy": [_req(pyproject, "sqlalchemy")],
        "numpy": [_req(pyproject, "numpy")],
        "fsspec": [_req(pyproject, "fsspec")],
        "psycopg2 (`[postgres]`)": [_req(pyproject, "psycopg2-binary>=")],
        "s3fs (`[s3]`)": [_req(pyproject, "s3fs>=")],
        "gcsfs (`[gcs]`)": [_req(pyproject, "gcsfs>=")],
        "adlfs (`[azure]`)": [_req(pyproject, "adlfs>=")],
        "cryptography": [_req(pyproject, "cryptography")],
    }
    for component, requirements in wanted.items():
        assert component in rows, f"no matrix row for {component}"
        declared = rows[component].split("|")[2]
        for req in requirements:
            assert req in declared, f"{component}: the matrix says {declared.strip()}, pyproject.toml {req}"


def _req(pyproject: str, prefix: str) -> str:
    """The first quoted requirement in pyproject.toml starting with ``prefix``, in backticks."""
    m = re.search(r'"(' + re.escape(prefix) + r'[^"]*)"', pyproject)
    assert m, f"pyproject.toml declares no {prefix}"
    return f"`{m.group(1)}`"


def test_sink_headline_compares_like_with_like() -> None:
    """README and the benchmarks page lead with the sink vs Delta on the same Spark (the control stream of
    bench/results/sink.json), and give the mixed-version ratio only as such."""
    summary = json.loads((REPO_ROOT / "bench" / "results" / "sink.json").read_text())["summary"]
    delta = summary["small:delta"]
    control = next(v for k, v in summary.items() if k.startswith("small:ducklake") and v["spark"] == delta["spark"])
    mixed = summary["small:ducklake-sqlite"]
    assert mixed["spark"] != delta["spark"]
    times = "\N{MULTIPLICATION SIGN}"
    same = f"{control['batches_per_s'] / delta['batches_per_s']:.1f}{times}"
    other = f"{mixed['batches_per_s'] / delta['batches_per_s']:.1f}{times}"
    readme = README.read_text().split("## How fast", 1)[1].split("\n## ", 1)[0]
    first = readme.split("\n- ", 2)[1]
    assert same in first and "like with like" in first, first
    assert readme.index(same) < readme.index(other)
    assert "mixes two Spark versions" in readme
    page = (DOCS / "benchmarks.md").read_text()
    sink = page[page.index("**Structured Streaming sink vs Delta Lake") :]
    assert sink.index(same) < sink.index(other) and "mix two Spark versions" in sink


def test_readme_python_tour_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The tour's first step, run as written: each print shows what its comment says."""
    tour = README.read_text().split("## A five-minute tour", 1)[1]
    code = re.search(r"```python\n(.*?)```", tour, re.S).group(1)  # type: ignore[union-attr]
    expected = [c.split(":")[0].strip() for c in re.findall(r"^print\(.*\)\s+# (.+)$", code, re.M)]
    assert expected, "the tour's first block prints nothing to check"
    monkeypatch.chdir(tmp_path)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "README.md", "exec"), {"__name__": "readme_tour"})
    assert out.getvalue().split() == expected
