"""The main demo: a Spark stream into a DuckLake table on the embedded default (SQLite catalog, local files).

Run with ``make demo``. A rate source feeds ``foreachBatch(ducklake_sink("main.events"))`` for a few micro-batches:
small batches are inlined into the catalog, and once 1,000 rows wait there they are flushed to Parquet inside a
batch's own snapshot. Then Spark reads the table back (now and at an earlier snapshot), the Python API lists the
snapshots with their batch ids, and DuckDB (when installed) counts the same rows.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lake", default=os.path.join(HERE, "..", "demo-lake"))
    parser.add_argument("--batches", type=int, default=8, help="micro-batches to run before stopping")
    parser.add_argument("--rows-per-second", type=int, default=300)
    args = parser.parse_args()
    root = os.path.abspath(args.lake)
    shutil.rmtree(root, ignore_errors=True)
    os.makedirs(root)
    catalog, data_path = f"sqlite:///{root}/catalog.sqlite", f"{root}/data"

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    import pyspark_ducklake as pdl

    spark = (
        SparkSession.builder.master("local[2]")
        .appName("ducklake-demo")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.ducklake.catalog", catalog)
        .config("spark.ducklake.dataPath", data_path)
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    pdl.register(spark)
    print(f"lake: catalog {catalog}, data {data_path}/")

    events = (
        spark.readStream.format("rate")
        .option("rowsPerSecond", args.rows_per_second)
        .load()
        .select(
            F.col("value").alias("id"),
            F.col("timestamp").alias("at"),
            F.when(F.col("value") % 3 == 0, "buy").otherwise("click").alias("kind"),
        )
    )
    sink = pdl.ducklake_sink("main.events", flush_rows=1_000)
    query = (
        events.writeStream.foreachBatch(sink)
        .option("checkpointLocation", f"{root}/checkpoint")
        .trigger(processingTime="1 second")
        .start()
    )
    while len(sink.metrics) < args.batches and query.isActive:  # type: ignore[attr-defined]
        time.sleep(0.2)
    query.stop()
    for m in sink.metrics:  # type: ignore[attr-defined]
        print(
            f"  batch {m.batch_id:>2}: {m.rows:>4} rows {m.mode:<8} flushed {m.flushed_rows:>5}  "
            f"snapshot {m.snapshot_id}  commit {m.commit_latency_s * 1000:6.1f} ms"
        )

    table = spark.read.format("ducklake").load("main.events")
    total = table.count()
    lake = pdl.connect(catalog)
    snaps = [s for s in lake.snapshots() if s.commit_extra_info]
    middle = snaps[len(snaps) // 2]
    then = spark.read.format("ducklake").option("snapshot", middle.snapshot_id).load("main.events").count()
    print(f"Spark reads {total} rows now, {then} at snapshot {middle.snapshot_id}")
    table.groupBy("kind").count().orderBy("kind").show()
    print("snapshots:")
    for s in lake.snapshots():
        extra = json.loads(s.commit_extra_info) if s.commit_extra_info else ""
        print(f"  {s.snapshot_id:>3}  {s.changes_made:<45} {extra}")

    from pyspark_ducklake.duckdb_attach import open_in_duckdb
    from pyspark_ducklake.exceptions import NotInstalledError

    try:
        con = open_in_duckdb(lake)
    except NotInstalledError as e:
        print(f"(DuckDB is optional; {e})")
    else:
        duck = con.execute("SELECT count(*) FROM lake.main.events").fetchone()[0]
        print(f"DuckDB reads {duck} rows")
        assert duck == total, f"DuckDB read {duck} rows, Spark {total}"
        con.close()
    spark.stop()


if __name__ == "__main__":
    main()
