"""PySpark finds ``format("ducklake")`` in the development venv from any folder, without ``register()``.

PySpark's Python workers list the modules on their path with ``pkgutil.iter_modules`` and load the ``DefaultSource``
of every ``pyspark_*`` one (pyspark/sql/worker/lookup_data_sources.py). ``make install`` (and ``make demo``) install
the package with a plain ``pip install -e .``; pyproject.toml's ``package-dir`` makes that a path entry in a ``.pth``
file, which pkgutil lists, rather than setuptools' import hook, which it does not. The check runs PySpark's own
lookup with this venv's python, in an empty folder outside the checkout, with no ``PYTHONPATH``: what a script of a
user, or a Spark Connect server, started from there gets (the Connect server is checked in
tests/integration/test_spark_connect.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.support.catalogs import REPO_ROOT

LOOKUP = """
import io, json, pickle
from pyspark.serializers import read_int
from pyspark.sql.worker import lookup_data_sources

out = io.BytesIO()
lookup_data_sources._main(None, out)  # what PySpark's lookup worker writes back to the JVM
out.seek(0)
found = {}
for _ in range(read_int(out)):
    name = out.read(read_int(out)).decode()
    source = pickle.loads(out.read(read_int(out)))
    found[name] = __import__(source.__module__.split(".")[0]).__file__
print(json.dumps(found))
"""


def test_pyspark_finds_the_editable_install_from_a_folder_outside_the_checkout(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "PYSPARK"))}
    out = subprocess.run(
        [sys.executable, "-c", LOOKUP], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert out.returncode == 0, out.stderr
    found = json.loads(out.stdout.strip().splitlines()[-1])
    assert "ducklake" in found, f"PySpark's lookup found {found} from {tmp_path}"
    # the checkout's own package, through the venv's editable install
    assert Path(found["ducklake"]).resolve().is_relative_to(REPO_ROOT), found
