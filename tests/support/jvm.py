"""Faster start-up for the Spark driver JVMs that fault tests start again and again (the crash soak: 21 drivers).

A JVM started with ``-XX:ArchiveClassesAtExit`` dumps the classes it loaded; later JVMs map that archive instead of
loading and verifying Spark's classes one by one, which roughly halves a driver's start-up. ``-XX:TieredStopAtLevel=1``
skips the optimising compiler, which short-lived drivers never profit from. The archive belongs to one JDK and one
Spark build, so its name carries both; the JVM ignores an archive that does not match (``-Xshare:auto``).
"""

from __future__ import annotations

import hashlib
import os
import shlex
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

from tests.support.catalogs import REPO_ROOT

ARCHIVE_DIR = REPO_ROOT / ".cache" / "jvm"
FAST_START = "-XX:TieredStopAtLevel=1"


def archive_path() -> Path:
    import pyspark

    java = (
        shutil.which("java", path=os.path.join(os.environ["JAVA_HOME"], "bin")) if "JAVA_HOME" in os.environ else None
    )
    java = java or shutil.which("java") or "java"
    key = f"{os.path.realpath(java)}|{pyspark.__version__}|{pyspark.__file__}"
    return ARCHIVE_DIR / f"spark-{pyspark.__version__}-{hashlib.sha1(key.encode()).hexdigest()[:12]}.jsa"


def driver_java_options(create: Callable[[str], subprocess.CompletedProcess[str]]) -> str:
    """Java options for a short-lived driver: the shared class archive (made once by ``create``) and C1 only.

    ``create(java_options)`` must run one driver to a clean exit with those options (the JVM writes the archive
    as it exits). When that fails, drivers just start without the archive.
    """
    path = archive_path()
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.stem}.{os.getpid()}.tmp")
        proc = create(f"-XX:ArchiveClassesAtExit={tmp} {FAST_START}")
        if proc.returncode == 0 and tmp.exists():
            os.replace(tmp, path)
        else:
            tmp.unlink(missing_ok=True)
            return FAST_START
    return f"-XX:SharedArchiveFile={path} -Xshare:auto {FAST_START}"


def existing_archive_options() -> str:
    """Java options for a short-lived driver that does not make the archive: the archive if another driver made it
    (``driver_java_options``), and C1 only."""
    return f"{archive_option()} {FAST_START}".strip()


def archive_option() -> str:
    """The archive's Java option if another driver made it, else ``""``: for a JVM that lives long (the tests'
    SparkSession, the docs' session, a cluster's driver), which starts about 5 s sooner with it and keeps the
    optimising compiler. In ``make test`` the crash-recovery test makes it in the first minute (xdist hands out its
    group, the fault tests', among the first work units)."""
    path = archive_path()
    return f"-XX:SharedArchiveFile={path} -Xshare:auto" if path.exists() else ""


def spark_submit_env(java_options: str) -> dict[str, str]:
    """Environment entries that give the Spark driver JVM of a program ``java_options`` without changing the program
    (an example a test runs as a user would): pyspark passes PYSPARK_SUBMIT_ARGS to spark-submit."""
    return {"PYSPARK_SUBMIT_ARGS": f"--driver-java-options {shlex.quote(java_options)} pyspark-shell"}
