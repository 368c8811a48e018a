"""Architecture rules: the floors of ARCHITECTURE.md, checked by import-linter (contracts in pyproject.toml), the
core importing without pyspark, and no module reaching for another module's private names."""

from __future__ import annotations

import ast
import pathlib
import shutil
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "pyspark_ducklake"
LINT_IMPORTS = pathlib.Path(sys.executable).with_name("lint-imports")

BLOCK_PYSPARK = """
import importlib.abc, sys
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "pyspark" or name.startswith("pyspark."):
            raise ImportError("pyspark is blocked in this test")
        return None
sys.meta_path.insert(0, Block())
import pyspark_ducklake, pyspark_ducklake.lake
import pyspark_ducklake.catalog.catalog, pyspark_ducklake.catalog.commit_rows, pyspark_ducklake.catalog.reader
import pyspark_ducklake.catalog.transaction, pyspark_ducklake.io.parquet, pyspark_ducklake.io.fileio
assert not any(m == "pyspark" or m.startswith("pyspark.") for m in sys.modules)
print("ok")
"""


def test_core_imports_without_pyspark() -> None:
    out = subprocess.run([sys.executable, "-c", BLOCK_PYSPARK], capture_output=True, text=True, cwd=PACKAGE.parent)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


def lint_imports(root: pathlib.Path) -> subprocess.CompletedProcess[str]:
    # PYTHONPATH first: the package is found in `root` (a copy in the test below), not the editable install
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(root)}
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache"], capture_output=True, text=True, cwd=root, env=env, timeout=300
    )


def test_import_contracts_are_kept() -> None:
    out = lint_imports(ROOT)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "0 broken" in out.stdout


def test_import_contracts_catch_an_import_up_a_floor(tmp_path: pathlib.Path) -> None:
    """lint-imports fails on a copy of the package where catalog/ imports lake.py."""
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    shutil.copytree(PACKAGE, tmp_path / "pyspark_ducklake", ignore=shutil.ignore_patterns("__pycache__"))
    paths = tmp_path / "pyspark_ducklake" / "catalog" / "paths.py"
    paths.write_text(paths.read_text() + "\nfrom pyspark_ducklake.lake import Lake  # noqa\n")
    out = lint_imports(tmp_path)
    assert out.returncode != 0
    assert "pyspark_ducklake.catalog.paths -> pyspark_ducklake.lake" in out.stdout


def private_names_imported(path: pathlib.Path) -> list[str]:
    """``from pyspark_ducklake.x import _name`` and ``alias._name`` where alias is a package module."""
    tree = ast.parse(path.read_text())
    found: list[str] = []
    modules: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("pyspark_ducklake"):
            for a in node.names:
                if a.name.startswith("_") and not a.name.startswith("__"):
                    found.append(f"{node.module}.{a.name}")
                modules.add(a.asname or a.name)
        elif isinstance(node, ast.Import):
            modules.update(a.asname for a in node.names if a.name.startswith("pyspark_ducklake") and a.asname)
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in modules
            and node.attr.startswith("_")
            and not node.attr.startswith("__")
        ):
            found.append(f"{node.value.id}.{node.attr}")
    return found


def test_no_module_imports_another_modules_private_names() -> None:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        names = private_names_imported(path)
        if names:
            found[path.relative_to(PACKAGE).as_posix()] = sorted(names)
    assert found == {}


def test_every_exception_class_is_in_exceptions_py() -> None:
    import importlib
    import inspect

    strays = []
    for path in sorted(PACKAGE.rglob("*.py")):
        name = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        if name.endswith("__main__"):
            continue
        module = importlib.import_module(name)
        for cls_name, cls in vars(module).items():
            if (
                inspect.isclass(cls)
                and issubclass(cls, BaseException)
                and cls.__module__ == name
                and name != "pyspark_ducklake.exceptions"
                and not cls_name.startswith("_")  # a module's own control-flow signal, never raised out of it
            ):
                strays.append(f"{name}.{cls_name}")
    assert strays == []
