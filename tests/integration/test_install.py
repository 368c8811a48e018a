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

import contextlib
import hashlib
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest

from tests.support.catalogs import REPO_ROOT, PgServer, create_database, drop_database
from tests.support.duck import connect_duckdb

pytestmark = [pytest.mark.timeout(1800), pytest.mark.slow]

CACHE = REPO_ROOT / ".cache" / "install-venv"
SMOKE = REPO_ROOT / "tests" / "support" / "install_smoke.py"


# No byte-compiling of what pip installs (pyspark's thousands of modules: half of the fresh install's time); Python
# compiles the modules a run imports as it imports them. A module that does not compile fails pip neither way.
PIP_INSTALL = ["-m", "pip", "install", "--quiet", "--no-compile"]


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
        run([str(python), *PIP_INSTALL, f"{wheel}[postgres,duckdb]"], env=env)
        stamp.write_text("\n".join(reqs))
    else:  # same dependency set: this wheel's code only
        run([str(python), *PIP_INSTALL, "--no-deps", "--force-reinstall", str(wheel)], env=env)
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


FLOORS_SMOKE = REPO_ROOT / "tests" / "support" / "floors_smoke.py"
# A release just below each floor, each one pip can pick (s3fs 0.4.2 is what it picked beside boto3 1.44.8).
# psycopg2-binary has none on Python 3.11 (2.9.5 is its first wheel there), so PostgreSQL is run at its floor only.
BELOW = {"s3": "s3fs==0.4.2", "gcs": "gcsfs==2022.11.0", "azure": "adlfs==2022.4.0", "duckdb": "duckdb==1.4.4"}


def overlay(python: Path, folder: Path, packages: list[str], env: dict[str, str]) -> Path:
    """``packages`` alone (no dependencies) in ``folder``, to put first on ``PYTHONPATH``; kept with the venv."""
    stamp = folder / ".installed"
    if not stamp.exists() or stamp.read_text() != "\n".join(packages):
        shutil.rmtree(folder, ignore_errors=True)
        run([str(python), *PIP_INSTALL, "--no-deps", "--target", str(folder), *packages], env=env)
        stamp.write_text("\n".join(packages))
    return folder


def test_the_extras_run_at_their_floors_and_older_ones_are_refused(
    tmp_path: Path, pg_server: PgServer, pg_admin: object
) -> None:
    """One fresh venv holds the package and every extra at the floor pyproject.toml declares (pyspark left out: the
    extras are used below Spark). Each extra's use runs there against a real service (moto, gcp-storage-emulator,
    Azurite, the test PostgreSQL, a DuckDB file): Parquet written, a delete file, a read, an orphan listing. gcsfs
    and s3fs pin fsspec to their own version, so gcsfs runs at its floor with its fsspec from a folder put first on
    the path; a folder of releases just below the floors, put there the same way, makes the first use of each extra
    fail with NotInstalledError naming the version to install (the check reads only the package's metadata)."""
    from pyspark_ducklake.io.extras import EXTRAS
    from tests.support.emulators import start_azurite, start_gcs, stop
    from tests.support.s3 import start_s3_server, stop_s3_server

    floors = {extra: {f.name: f.floor for f in found} for extra, found in EXTRAS.items()}
    wheel = build_wheel(tmp_path)
    core = [r.split(":", 1)[1].strip() for r in requirements(wheel) if r.startswith("Requires-Dist:")]
    core = [r for r in core if "extra ==" not in r and not r.startswith("pyspark")]
    in_venv = ["s3", "azure", "postgres", "duckdb"]  # gcsfs: below
    at_floors = {name: floor for extra in in_venv for name, floor in floors[extra].items()}
    pins = [f"{name}=={floor}" for name, floor in at_floors.items()]
    pins.append(f"gcsfs=={floors['s3']['s3fs']}")  # gcsfs's dependencies, beside s3fs's fsspec
    key = hashlib.sha256("\n".join([sys.version, *core, *pins]).encode()).hexdigest()[:16]
    venv = CACHE / f"floors-{key}"
    python = venv / "bin" / "python"
    env = clean_env()
    if not (venv / ".installed").exists():
        shutil.rmtree(venv, ignore_errors=True)
        run([sys.executable, "-m", "venv", str(venv)], env=env)
        run([str(python), *PIP_INSTALL, *core, *pins], env=env)
        (venv / ".installed").write_text("\n".join(pins))
    run([str(python), *PIP_INSTALL, "--no-deps", "--force-reinstall", str(wheel)], env=env)
    gcs_floor = f"gcsfs=={floors['gcs']['gcsfs']}"
    at_floor = overlay(python, venv / "gcs-floor", [gcs_floor, gcs_floor.replace("gcsfs", "fsspec")], env)
    below = overlay(python, venv / "below", sorted(BELOW.values()), env)

    with contextlib.ExitStack() as stack:
        db = create_database(pg_admin)  # type: ignore[arg-type]
        stack.callback(drop_database, pg_admin, db)
        s3 = start_s3_server(tmp_path)
        stack.callback(stop_s3_server, s3)
        gcs = start_gcs(tmp_path)
        stack.callback(stop, gcs)
        (tmp_path / "azurite").mkdir()
        azure = start_azurite(tmp_path / "azurite")
        stack.callback(stop, azure)
        stores = {"s3": (s3, "s3"), "gcs": (gcs, "gs"), "azure": (azure, "az")}
        spec: dict[str, Any] = {
            extra: {"data_path": f"{scheme}://{server.create_bucket(f'{extra}-lake')}/lake/",
                    "storage_options": server.storage_options()}
            for extra, (server, scheme) in stores.items()
        }  # fmt: skip
        spec["postgres"], spec["duckdb"] = pg_server.url(db), True

        def smoke(mode: str, work: str, extras: list[str], path: Path | None = None) -> dict[str, Any]:
            given = {k: v for k, v in spec.items() if k in extras}
            run_env = {**env, "PYTHONPATH": str(path)} if path else env
            proc = run([str(python), str(FLOORS_SMOKE), mode, str(tmp_path / work), json.dumps(given)], env=run_env)
            return json.loads(proc.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]

        lake = {"ids": [1, 3, 4, 5], "files": 2, "orphans": 0}  # two appends, a delete file, nothing stray
        got = smoke("check", "floors", in_venv)
        assert got.pop("versions") == {"fsspec": floors["s3"]["s3fs"], **at_floors}  # s3fs pins its fsspec
        assert got == dict.fromkeys(in_venv, lake)
        got = smoke("check", "gcs-floor", ["gcs"], at_floor)
        assert got["gcs"] == lake and got["versions"] == {"fsspec": floors["gcs"]["gcsfs"], **floors["gcs"]}

        refused = smoke("refuse", "below", list(BELOW), below)
        for extra, release in BELOW.items():
            name, version = release.split("==")
            floor = floors[extra][name]
            assert refused[extra].startswith(f"{name} {version} is installed"), refused[extra]
            assert f"pip install '{name}>={floor}'" in refused[extra], refused[extra]
