"""Run by ``tests/integration/test_discovery.py`` in a fresh process: a new SparkSession that never calls
``pyspark_ducklake.register`` (nor imports the package on the driver) uses ``format("ducklake")`` for a batch write
and read, a change-feed ``readStream`` into a ``writeStream``, a SQL table, and the catalog from the environment;
then shows that ``spark.ducklake.*`` conf needs ``register(spark)``. Prints one JSON line of what it read.

    python discovery_app.py WORKDIR CATALOG_URL DATA_PATH
"""

from __future__ import annotations

import json
import os
import sys


def main(argv: list[str]) -> int:
    work, catalog, data_path = argv
    from tests.support.app_session import local_session

    # no register(): the app checks that Spark finds the data source by itself
    spark = local_session(
        "ducklake-discovery", conf={"spark.sql.warehouse.dir": os.path.join(work, "warehouse")}, register=False
    )
    out: dict[str, object] = {}
    try:
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
    finally:
        spark.stop()
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
