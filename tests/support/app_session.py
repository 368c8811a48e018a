"""The local SparkSession of the tests' subprocess apps (``python -m tests.support.<name>_app``): local[2], no UI,
two shuffle partitions, UTC, ``pdl.register`` called (unless ``register=False``: an app that checks Spark finds
the data source without it)."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import Any


def local_session(app_name: str, *, conf: Mapping[str, str] | None = None, register: bool = True) -> Any:
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.master("local[2]")
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
    )
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    if register:
        import pyspark_ducklake as pdl

        pdl.register(spark)
    return spark
