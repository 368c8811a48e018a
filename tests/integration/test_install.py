"""A fresh ``pip install`` of the built wheel (with ``[postgres,duckdb]``) into an empty virtualenv imports and runs:
an append, a read and one ``foreachBatch`` micro-batch on a local SparkSession, a PostgreSQL catalog, a DuckDB-file
catalog (made by the newest DuckDB the extra allows, 2.x, and opened by DuckDB 1.5.5 after), and the Spark UI hiding a
catalog password (``tests/support/install_smoke.py``).

The venv is kept under ``.cache/install-venv/<key>``, the key hashing the wheel's declared dependencies and the
Python version: when they are unchanged, a run reinstalls only the wheel itself (``--no-deps``) into the venv built
from them; when they change, a new empty venv resolves them afresh. pip reuses the machine's download cache.
Measured on the 2-core test machine under load: 134 s for a first run (pyspark's 457 MB wheel already in pip's
cache; add its download otherwise), 93 s for a later run (the smoke's Spark session is most of it).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.support.catalogs import REPO_ROOT, PgServer, create_database, drop_database
from tests.support.duck import connect_duckdb

pytestmark = [pytest.mark.timeout(1800), pytest.mark.slow]

CACHE = REPO_ROOT / ".cache" / "install-venv"
SMOKE = REPO_ROOT / "tests" / "support" / "install_smoke.py"


def run(cmd: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False, **kwargs)  # type: ignore[call-overload]
    assert proc.returncode == 0, f"{' '.join(map(str, cmd))} failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-6000:]}"
    return proc


def build_wheel(out: Path) -> Path:
    """The wheel of the working tree, built from a copy (setuptools' build/ folder must not leak stale modules)."""
    src = out / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(REPO_ROOT / name, src / name)
    shutil.copytree(
        REPO_ROOT / "pyspark_ducklake", src / "pyspark_ducklake", ignore=shutil.ignore_patterns("__pycache__")
    )
    run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(out / "dist"), str(src)])
    (wheel,) = (out / "dist").glob("pyspark_ducklake-*.whl")
    return wheel


def requirements(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as z:
        (meta,) = [n for n in z.namelist() if n.endswith(".dist-info/METADATA")]
        lines = z.read(meta).decode().splitlines()
    return sorted(line for line in lines if line.startswith(("Requires-Dist:", "Requires-Python:")))


def clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "PYSPARK", "VIRTUAL_ENV"))}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


def test_the_wheel_installs_into_an_empty_venv_and_runs(tmp_path: Path, pg_server: PgServer, pg_admin: object) -> None:
    wheel = build_wheel(tmp_path)
    reqs = requirements(wheel)
    assert any(r.startswith("Requires-Dist: pyspark[sql]") for r in reqs), reqs
    key = hashlib.sha256("\n".join([sys.version, *reqs]).encode()).hexdigest()[:16]
    venv = CACHE / key
    python = venv / "bin" / "python"
    stamp = venv / ".installed"
    env = clean_env()
    if not stamp.exists():
        shutil.rmtree(venv, ignore_errors=True)
        run([sys.executable, "-m", "venv", str(venv)], env=env)
        # an empty venv: only pip; the wheel's declared dependencies are resolved from scratch
        frozen = run([str(python), "-m", "pip", "freeze", "--all"], env=env).stdout.split()
        assert [p for p in frozen if not p.lower().startswith(("pip==", "setuptools=="))] == [], frozen
        run([str(python), "-m", "pip", "install", "--quiet", f"{wheel}[postgres,duckdb]"], env=env)
        stamp.write_text("\n".join(reqs))
    else:  # same dependency set: this wheel's code only
        run([str(python), "-m", "pip", "install", "--quiet", "--no-deps", "--force-reinstall", str(wheel)], env=env)
    db = create_database(pg_admin)  # type: ignore[arg-type]
    try:
        work = tmp_path / "work"
        args = ["--pg", pg_server.host, str(pg_server.port), pg_server.user, db, "--duckdb"]
        proc = run([str(python), str(SMOKE), str(work), *args], env=env, cwd=tmp_path, timeout=900)
    finally:
        drop_database(pg_admin, db)  # type: ignore[arg-type]
    assert proc.stdout.strip().endswith("smoke ok"), proc.stdout
    # the wheel's console script (pyproject's [project.scripts]) runs the command line on a lake the smoke made
    lakes = sorted(work.rglob("*.sqlite"))
    assert lakes, "the smoke left no SQLite catalog"
    cli = run(
        [str(venv / "bin" / "pyspark-ducklake"), "--catalog", f"sqlite:///{lakes[0]}", "tables", "--json"], env=env
    )
    assert json.loads(cli.stdout), cli.stdout
    # the [duckdb] extra resolves the newest DuckDB it allows (2.x since 2026-10): the .ducklake file it made is in the
    # storage version DuckDB 1.5 reads (option duckdb_storage_version), so the test's DuckDB 1.5.5 opens the lake
    (version,) = [line.split()[1] for line in proc.stdout.splitlines() if line.startswith("duckdb ")]
    assert int(version.split(".")[0]) >= 2, f"the [duckdb] extra resolved duckdb {version}, not DuckDB 2"
    con = connect_duckdb()
    try:
        con.execute(f"ATTACH 'ducklake:{work}/lake.ducklake' AS lake")
        assert con.execute("SELECT * FROM lake.main.d").fetchall() == [(3,)]
    finally:
        con.close()
    with zipfile.ZipFile(wheel) as z:  # the license travels with the wheel
        assert any(n.endswith(".dist-info/licenses/LICENSE") for n in z.namelist()), z.namelist()
