"""A classic Spark driver on a standalone cluster, as its own process (the test process already has a SparkContext,
and there is one per process): ``python -m tests.support.cluster_app MASTER PG_CATALOG_JSON SQLITE_CATALOG_JSON
DISCOVERY_CATALOG_JSON WORK_DIR``, run from a working folder outside the repository.

With executors on the cluster's worker, it first finds ``format("ducklake")`` without ``register()`` (before the
package is imported on this side: :func:`tests.support.discovery_app.discover`, its result in
``WORK_DIR/discovery.json``), then runs every check of :mod:`tests.support.session_scenarios`: the batch checks and
the fast paths (Spark's own Parquet writer and reader, which must be taken: the JVM is on this side) on the
PostgreSQL catalog (reached by the executors over TCP), the sink, ``writeStream`` and the change feed on the SQLite
catalog (a file path the executors open). It exits 0 when all hold; a failed check's traceback goes to stderr.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path


def main(master: str, catalog_json: str, sqlite_json: str, discovery_json: str, work_dir: str) -> None:
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    from pyspark.sql import SparkSession

    from tests.support.catalogs import CatalogLocation
    from tests.support.discovery_app import discover
    from tests.support.jvm import archive_option

    catalog = CatalogLocation(**json.loads(catalog_json))
    sqlite = CatalogLocation(**json.loads(sqlite_json))
    found = CatalogLocation(**json.loads(discovery_json))
    work = Path(work_dir)
    builder = SparkSession.builder
    if java_options := archive_option():  # the shared class archive when made: a start-up about 5 s shorter
        builder = builder.config("spark.driver.extraJavaOptions", java_options)
        builder = builder.config("spark.executor.extraJavaOptions", java_options)
    spark = (
        builder.master(master)
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
        # no register() yet, nor the package imported here: Spark must find the data source by itself
        discovered = discover(spark, str(work / "discovery"), found.url, found.data_path)
        (work / "discovery.json").write_text(json.dumps(discovered))

        from tests.support import session_scenarios as scenarios

        scenarios.batch_write_and_read(spark, catalog)
        scenarios.fast_paths(spark, catalog, native=True)
        scenarios.sink_streams(spark, sqlite, work / "sink")
        scenarios.change_feed(spark, sqlite, work / "feed")
        executors = spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size() - 1  # minus the driver
        assert executors >= 1, "no executor ran the jobs"
    finally:
        spark.stop()


if __name__ == "__main__":
    main(*sys.argv[1:6])
