"""Architecture rules: catalog/ and io/ work without pyspark; io/ knows nothing of SQL or the catalog."""

from __future__ import annotations

import ast
import pathlib
import subprocess
import sys

PACKAGE = pathlib.Path(__file__).resolve().parents[2] / "pyspark_ducklake"

BLOCK_PYSPARK = """
import importlib.abc, sys
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "pyspark" or name.startswith("pyspark."):
            raise ImportError("pyspark is blocked in this test")
        return None
sys.meta_path.insert(0, Block())
import pyspark_ducklake, pyspark_ducklake.lake
import pyspark_ducklake.catalog.catalog, pyspark_ducklake.catalog.writer, pyspark_ducklake.catalog.reader
import pyspark_ducklake.catalog.transaction, pyspark_ducklake.io.parquet, pyspark_ducklake.io.fileio
assert not any(m == "pyspark" or m.startswith("pyspark.") for m in sys.modules)
print("ok")
"""


def test_core_imports_without_pyspark() -> None:
    out = subprocess.run([sys.executable, "-c", BLOCK_PYSPARK], capture_output=True, text=True, cwd=PACKAGE.parent)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


def imported_modules(path: pathlib.Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def test_dependencies_point_one_way() -> None:
    for path in (PACKAGE / "catalog").glob("*.py"):
        mods = imported_modules(path)
        assert not any(
            m.startswith(("pyspark_ducklake.table", "pyspark_ducklake.batch", "pyspark_ducklake.streaming"))
            or m.split(".")[0] == "pyspark"
            for m in mods
        ), path
    for path in (PACKAGE / "io").glob("*.py"):
        mods = imported_modules(path)
        assert not any(
            m.startswith("pyspark_ducklake.catalog") or m.split(".")[0] in ("pyspark", "sqlalchemy") for m in mods
        ), path
