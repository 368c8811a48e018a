"""``format("ducklake")`` without ``register()``: PySpark finds the data source by itself in an installed package
named ``pyspark_*`` exporting ``DefaultSource`` (pyspark/sql/worker/lookup_data_sources.py, which lists the modules
on the Python workers' path).

A fresh process (``tests/support/discovery_app.py``) runs with the package on ``PYTHONPATH`` and its working folder
outside the repository, as an installed package would be found: the repository's editable install puts an import
hook on the path, which ``pkgutil.iter_modules`` does not list. The wheel installed into an empty venv is checked
the same way in ``tests/support/install_smoke.py``. Exact against DuckDB's read of the tables it wrote.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.catalogs import REPO_ROOT
from tests.support.duck import open_duckdb

pytestmark = [pytest.mark.slow]

APP = REPO_ROOT / "tests" / "support" / "discovery_app.py"


def test_format_ducklake_without_register(tmp_path: Path, pg_catalog: Any) -> None:
    # one backend: discovery does not depend on it (a subprocess with its own Spark costs 35-45 s); PostgreSQL, which
    # the executors reach over the network as on a cluster
    catalog = pg_catalog
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYSPARK", "DUCKLAKE_"))}
    env["PYTHONPATH"] = str(REPO_ROOT)
    proc = subprocess.run(
        [sys.executable, str(APP), str(tmp_path), catalog.url, catalog.data_path],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=900,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-6000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    con = open_duckdb(catalog)
    try:
        first = sorted(con.execute("SELECT * FROM lake.main.events AT (VERSION => 1)").fetchall())
        events = sorted(con.execute("SELECT * FROM lake.main.events").fetchall())
        copy = sorted(con.execute("SELECT * FROM lake.main.copy").fetchall())
    finally:
        con.close()
    assert [list(r) for r in first] == got["read"] == [[1, "a"], [2, "b"], [3, "c"]]
    assert copy == first  # readStream -> writeStream, both format("ducklake")
    assert [list(r) for r in events] == got["sql"] == [[1, "a"], [2, "b"], [3, "c"], [4, "d"]]
    assert got["conf_without_register"] == "register"
    assert got["conf_with_register"] == 3
