"""A classic Spark driver on a standalone cluster, as its own process (the test process already has a SparkContext,
and there is one per process): ``python -m tests.support.cluster_app MASTER CATALOG_JSON WORK_DIR``.

It runs the batch checks of :mod:`tests.support.session_scenarios` and the fast paths (Spark's own Parquet writer and
reader, which must be taken: the JVM is on this side) with executors on the cluster's worker, and exits 0 when all
hold; a failed check's traceback goes to stderr.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path


def main(master: str, catalog_json: str, work_dir: str) -> None:
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    from pyspark.sql import SparkSession

    from tests.support import session_scenarios as scenarios
    from tests.support.catalogs import CatalogLocation

    catalog = CatalogLocation(**json.loads(catalog_json))
    work = Path(work_dir)
    spark = (
        SparkSession.builder.master(master)
        .appName("ducklake-cluster-classic")
        .config("spark.cores.max", "2")
        .config("spark.executor.cores", "2")
        .config("spark.executor.memory", "512m")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.local.dir", str(work / "local"))
        .config("spark.sql.warehouse.dir", str(work / "warehouse"))
        .getOrCreate()
    )
    try:
        scenarios.batch_write_and_read(spark, catalog)
        scenarios.fast_paths(spark, catalog, native=True)
        executors = spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size() - 1  # minus the driver
        assert executors >= 1, "no executor ran the jobs"
    finally:
        spark.stop()


if __name__ == "__main__":
    main(*sys.argv[1:4])
