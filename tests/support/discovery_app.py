"""A session that never called ``pyspark_ducklake.register`` (nor imported the package on the driver) uses
``format("ducklake")`` for a batch write and read, a change-feed ``readStream`` into a ``writeStream`` and a SQL table;
then ``spark.ducklake.*`` conf is shown to need ``register(spark)``. :func:`discover` returns what it read.

``tests/support/cluster_app.py`` runs :func:`discover` first, on the standalone cluster (its executors on the worker),
from a fresh process whose working folder is outside the repository; ``tests/integration/test_standalone_cluster.py``
checks the result against DuckDB. By hand, on a local session (prints one JSON line):

    python discovery_app.py WORKDIR CATALOG_URL DATA_PATH
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any


def discover(spark: Any, work: str, catalog: str, data_path: str) -> dict[str, object]:
    """The checks on ``spark``, a session without ``register()``; leaves it registered, without the conf it set."""
    out: dict[str, object] = {}
    assert "pyspark_ducklake" not in sys.modules
    df = spark.createDataFrame([(1, "a"), (2, "b"), (3, "c")], "id bigint, s string")
    df.write.format("ducklake").mode("append").option("catalog", catalog).option("dataPath", data_path).save(
        "main.events"
    )
    read = spark.read.format("ducklake").option("catalog", catalog).load("main.events")
    out["read"] = sorted(tuple(r) for r in read.collect())

    # the change feed as a stream, written by the data source's stream writer (executors run both)
    query = (
        spark.readStream.format("ducklake")
        .option("catalog", catalog)
        .option("startingSnapshot", "earliest")
        .load("main.events")
        .select("id", "s")
        .writeStream.format("ducklake")
        .option("catalog", catalog)
        .option("checkpointLocation", os.path.join(work, "checkpoint"))
        .trigger(availableNow=True)
        .start("main.copy")
    )
    query.awaitTermination(300)
    assert query.exception() is None, query.exception()

    spark.sql(f"CREATE TABLE events USING ducklake OPTIONS (table 'main.events', catalog '{catalog}')")
    spark.sql("INSERT INTO events VALUES (4, 'd')")
    out["sql"] = sorted(tuple(r) for r in spark.sql("SELECT * FROM events").collect())

    # spark.ducklake.* conf reaches a found data source only through register(spark)
    spark.conf.set("spark.ducklake.catalog", catalog)
    try:
        spark.read.format("ducklake").load("main.events").collect()
        out["conf_without_register"] = "read"
    except Exception as e:
        out["conf_without_register"] = "register" if "pyspark_ducklake.register(spark)" in str(e) else str(e)
    import pyspark_ducklake as pdl

    pdl.register(spark)
    out["conf_with_register"] = spark.read.format("ducklake").load("main.copy").count()
    spark.conf.unset("spark.ducklake.catalog")
    pdl.register(spark)
    return out


def main(argv: list[str]) -> int:
    work, catalog, data_path = argv
    from tests.support.app_session import local_session

    # no register(): the app checks that Spark finds the data source by itself
    spark = local_session(
        "ducklake-discovery", conf={"spark.sql.warehouse.dir": os.path.join(work, "warehouse")}, register=False
    )
    try:
        out = discover(spark, work, catalog, data_path)
    finally:
        spark.stop()
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
