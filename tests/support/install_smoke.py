"""Run by ``tests/integration/test_install.py`` with the python of a venv holding only the built wheel.

Imports nothing from the repository: it proves that the declared dependencies are enough to import the package, append
and read with the Python API, read through the Spark data source without ``register()`` (PySpark finds the installed
package's ``DefaultSource``), append and read through it, and commit one ``foreachBatch``
micro-batch with ``ducklake_sink``. With ``--pg CONNINFO`` it also opens a PostgreSQL catalog (the ``[postgres]``
extra) and reads it from Spark with the conf ``spark.ducklake.catalog`` set to a URL with a password, which must then
appear nowhere in the Spark UI's REST API (jobs, stages, SQL executions, environment). With ``--duckdb`` it creates,
writes and reads a DuckDB-file catalog (the ``[duckdb]`` extra) and prints the venv's DuckDB version. Prints
``smoke ok`` at the end.

    python install_smoke.py WORKDIR [--pg HOST PORT USER DBNAME] [--duckdb]
"""

from __future__ import annotations

import os
import sys


def main(argv: list[str]) -> int:
    work = os.path.abspath(argv[0])
    os.makedirs(work, exist_ok=True)
    pg = argv[argv.index("--pg") + 1 : argv.index("--pg") + 5] if "--pg" in argv else None
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

    import pyarrow as pa

    import pyspark_ducklake as pdl

    here = os.path.dirname(os.path.abspath(pdl.__file__))
    assert "site-packages" in here, f"pyspark_ducklake imported from {here}, not from the venv"

    # Python API, SQLite catalog
    catalog = f"ducklake:sqlite:{work}/lake.sqlite"
    lake = pdl.connect(catalog, f"{work}/data")
    lake.create_table("main.t", pa.schema([("id", pa.int64()), ("name", pa.string())]))
    lake.append("main.t", pa.table({"id": [1, 2], "name": ["a", "b"]}))
    assert lake.scan("main.t").sort_by("id").to_pylist() == [{"id": 1, "name": "a"}, {"id": 2, "name": "b"}]
    lake.close()

    if pg is not None:  # the [postgres] extra: psycopg2 is installed and DuckDB's libpq spelling works
        host, port, user, dbname = pg
        with pdl.connect(
            f"ducklake:postgres:dbname={dbname} host={host} port={port} user={user}", f"{work}/pgdata"
        ) as pg_lake:
            pg_lake.create_table("main.p", pa.schema([("id", pa.int64())]))
            pg_lake.append("main.p", pa.table({"id": [7]}))
            assert pg_lake.scan("main.p").to_pylist() == [{"id": 7}]

    if "--duckdb" in argv:  # the [duckdb] extra: duckdb and duckdb-engine are installed
        with pdl.connect(f"ducklake:{work}/lake.ducklake", f"{work}/duckdata") as duck_lake:
            duck_lake.create_table("main.d", pa.schema([("id", pa.int64())]))
            duck_lake.append("main.d", pa.table({"id": [3]}))
            assert duck_lake.scan("main.d").to_pylist() == [{"id": 3}]
        import duckdb

        print(f"duckdb {duckdb.__version__}")  # the test opens the file with DuckDB 1.5.5 next

    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[1]")
        .config("spark.ui.enabled", "true" if pg is not None else "false")
        .config("spark.sql.shuffle.partitions", "1")
        .config("spark.ducklake.catalog", catalog)
        .getOrCreate()
    )
    try:
        # Spark finds the installed package by itself (DefaultSource): a read without register(), lake as an option
        found = spark.read.format("ducklake").option("catalog", catalog).load("main.t")
        assert sorted(r.id for r in found.collect()) == [1, 2]
        pdl.register(spark)
        # a Spark append and read through the data source
        df = spark.createDataFrame([(3, "c"), (4, "d")], "id bigint, name string")
        df.write.format("ducklake").mode("append").save("main.t")
        got = sorted(r.id for r in spark.read.format("ducklake").load("main.t").collect())
        assert got == [1, 2, 3, 4], got

        # one foreachBatch micro-batch: a JSON file read by a file stream with Trigger.AvailableNow
        incoming = os.path.join(work, "incoming")
        os.makedirs(incoming)
        with open(os.path.join(incoming, "a.json"), "w") as f:
            f.write('{"id": 5, "name": "e"}\n{"id": 6, "name": "f"}\n')
        sink = pdl.ducklake_sink("main.t")
        query = (
            spark.readStream.schema("id bigint, name string")
            .json(incoming)
            .writeStream.foreachBatch(sink)
            .option("checkpointLocation", os.path.join(work, "checkpoint"))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination(300)
        assert query.exception() is None, query.exception()
        assert [m.rows for m in sink.metrics] == [2], sink.metrics

        if pg is not None:
            check_spark_ui_hides_passwords(spark, pdl, *pg)
    finally:
        spark.stop()

    with pdl.connect(catalog) as lake:
        ids = sorted(lake.scan("main.t").column("id").to_pylist())
    assert ids == [1, 2, 3, 4, 5, 6], ids
    print("smoke ok")
    return 0


def check_spark_ui_hides_passwords(spark: object, pdl: object, host: str, port: str, user: str, dbname: str) -> None:
    """A catalog URL with a password set as runtime conf: the read works, and the UI's REST API never shows it."""
    import urllib.request

    secret = "SmokeS3cretPw"  # the test server trusts loopback: any password connects
    conf = spark.conf  # type: ignore[attr-defined]
    conf.set("spark.ducklake.catalog", f"postgresql://{user}:{secret}@{host}:{port}/{dbname}")
    pdl.register(spark)  # type: ignore[attr-defined]
    assert spark.read.format("ducklake").load("main.p").count() == 1  # type: ignore[attr-defined]
    context = spark.sparkContext  # type: ignore[attr-defined]
    base = f"{context.uiWebUrl}/api/v1/applications/{context.applicationId}"
    shown = ""
    for endpoint in ("jobs", "stages?details=true", "sql?details=true&planDescription=true", "environment"):
        with urllib.request.urlopen(f"{base}/{endpoint}", timeout=30) as response:
            shown += response.read().decode()
    assert "spark.ducklake.catalog" in shown, "the SQL tab lists the modified conf"
    assert secret not in shown, "the Spark UI shows the catalog password"
    conf.unset("spark.ducklake.catalog")


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
