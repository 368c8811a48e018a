"""Run the documentation's code blocks as written (the rule: ``tests/support/doc_blocks.py``), one Spark session for all.

Started by ``tests/integration/test_docs_run.py`` with its working folder an empty one: Spark's JVM and its Python
workers keep the folder they start in, so every page runs there (a relative ``sqlite:///lake.sqlite`` is then the
same file for the driver and the workers), emptied before each page. Between pages the session is put back as it
was: streams stopped, Spark SQL tables and views dropped, ``spark.ducklake.*`` conf unset and the format registered
again without it, the environment restored. A page stops at its first failing block (the next ones build on it).
Prints one JSON line: ``[{"where": "docs/spark.md:7", "error": null | "traceback", "seconds": 1.2}, ...]`` for the
blocks run.

    python doc_run.py WORKDIR SPARK_STATE_DIR [PAGE ...]     (pages relative to the repository; default: all)
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import traceback
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO_ROOT))

from tests.support.app_session import local_session  # noqa: E402
from tests.support.doc_blocks import CodeBlock, code_blocks  # noqa: E402
from tests.support.jvm import archive_option  # noqa: E402


def session(state: Path) -> Any:
    """The one SparkSession: the pages' ``SparkSession.builder...getOrCreate()`` get it."""
    conf = {"spark.sql.warehouse.dir": str(state / "warehouse"), "spark.local.dir": str(state / "local")}
    if java_options := archive_option():  # the shared class archive when made: a start-up about 5 s shorter
        conf["spark.driver.extraJavaOptions"] = java_options
    spark = local_session("ducklake-docs", conf=conf, register=False)
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def reset(spark: Any, work: Path, environ: dict[str, str]) -> None:
    """The session, the folder and the environment as before any page."""
    import pyspark_ducklake as pdl

    for query in spark.streams.active:
        query.stop()
    for table in spark.catalog.listTables():
        kind = "VIEW" if table.tableType in ("VIEW", "TEMPORARY") else "TABLE"
        name = table.name if table.isTemporary else f"`{table.database}`.`{table.name}`"
        spark.sql(f"DROP {kind} IF EXISTS {name}")
    for key in list(spark.conf.getAll):
        if key.lower().startswith("spark.ducklake."):
            spark.conf.unset(key)
    pdl.register(spark)
    os.environ.clear()
    os.environ.update(environ)
    for entry in work.iterdir():
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()


def run_block(block: CodeBlock, namespace: dict[str, Any], work: Path) -> None:
    if block.kind == "python":
        exec(compile(block.text, block.where, "exec"), namespace)
        return
    # the command line, as a shell runs it, with this venv's commands first on the PATH
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}"}
    proc = subprocess.run(
        ["bash", "-e", "-c", block.text], cwd=work, env=env, capture_output=True, text=True, timeout=300, check=False
    )
    sys.stdout.write(proc.stdout)
    if proc.returncode != 0:
        raise RuntimeError(f"exit {proc.returncode}:\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}")


def main(argv: list[str]) -> int:
    work, state, *pages = argv
    work_dir = Path(work)
    blocks = [b for b in code_blocks() if b.kind in ("python", "cli") and (not pages or b.page in pages)]
    spark = session(Path(state))
    environ = dict(os.environ)
    results: list[dict[str, Any]] = []
    for page in dict.fromkeys(b.page for b in blocks):
        reset(spark, work_dir, environ)
        namespace: dict[str, Any] = {"__name__": "__doc__", "spark": spark}
        for block in (b for b in blocks if b.page == page):
            print(f"--- {block.where}", flush=True)
            started = time.monotonic()
            try:
                run_block(block, namespace, work_dir)
                error = None
            except BaseException:
                error = traceback.format_exc()[-6000:]
            results.append({"where": block.where, "error": error, "seconds": round(time.monotonic() - started, 1)})
            if error is not None:
                break
    reset(spark, work_dir, environ)
    spark.stop()
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
