"""Spark reads of tables DuckDB writes with the features of issue #16: which read path each takes, and how fast.

DuckDB's ``ducklake`` extension writes one lake (SQLite catalog, local files) with these tables of the same rows:

- ``plain``: DuckDB's own Parquet files (field ids), the baseline;
- ``dv``: the same, then 10% of the rows deleted with ``write_deletion_vectors`` (puffin deletion vectors);
- ``added``: Parquet files another writer made (no field ids), hive-partitioned, registered with
  ``ducklake_add_data_files`` (read by name, partition values from the paths);
- ``variant``: ``plain`` plus a VARIANT column, which Spark's Parquet reader cannot read exactly (the fallback).

Each repetition drains (Spark's ``noop`` sink) every table through ``pdl.read_table`` (Spark's own Parquet reader
where exact, else the data source: the path taken is recorded with its reason), through
``spark.read.format("ducklake")`` (the Python data source), and, as the floor, ``spark.read.parquet`` of the table's
data files (without deletes: the least any reader of these files must do). Interleaved repetitions after a full-size
warm-up; medians; ratios ``floor_seconds / ours``; the row counts are checked against DuckDB's.

    python bench/duckdb_tables_bench.py --rows 3000000 --repeat 5 --out bench/results/duckdb_tables.json
    python bench/duckdb_tables_bench.py --rows 100000 --repeat 1 --out /tmp/t.json     # smoke check
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import ForeignLoad, git_commit, machine_info, measure  # bench/_common.py, next to this script

REPO_ROOT = Path(__file__).resolve().parents[1]
TABLES = ("plain", "dv", "added", "variant")
COLUMNS = (
    "range AS id, (range * 7919 % 1000003)::INTEGER AS i32, (hash(range) % 1000000000) / 7.0 AS dbl, "
    "(range * 104729 % 100000000000)::DECIMAL(18,3) AS amount, 'cat-' || (range % 50) AS category, "
    "repeat(md5(range::VARCHAR), 1 + range % 3) AS text, TIMESTAMP '2020-01-01' + INTERVAL (range) SECOND AS ts, "
    "DATE '2000-01-01' + (range % 10000)::INTEGER AS day, range % 3 = 0 AS flag"
)


def build_lake(work: Path, rows: int) -> dict[str, Any]:
    """Write the lake with DuckDB; returns its catalog URL, data path and DuckDB's row count per table."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    sys.path.insert(0, str(REPO_ROOT))
    from pyspark_ducklake.duckdb_attach import connect_duckdb

    catalog, data = work / "lake.sqlite", work / "data"
    con = connect_duckdb()
    con.execute(
        f"ATTACH 'ducklake:sqlite:{catalog}' AS lake (DATA_PATH '{data}', DATA_INLINING_ROW_LIMIT 0, "
        "WRITE_DELETION_VECTORS true)"
    )
    con.execute(f"CREATE TABLE lake.plain AS SELECT {COLUMNS} FROM range({rows})")
    con.execute(f"CREATE TABLE lake.dv AS SELECT {COLUMNS} FROM range({rows})")
    con.execute("DELETE FROM lake.dv WHERE id % 10 = 3")
    con.execute(
        f"CREATE TABLE lake.variant AS SELECT {COLUMNS}, {{'k': range, 's': category}}::VARIANT AS v FROM range({rows})"
    )
    ext = work / "external"
    source = con.execute(f"SELECT {COLUMNS} FROM range({rows})").to_arrow_table()
    parts = 8
    for p in range(parts):
        folder = ext / f"part={p}"
        folder.mkdir(parents=True)
        ids = source.column("id").to_numpy()
        chunk = (
            source.filter(pa.array(ids % parts == p))
            .drop_columns(["id"])
            .append_column("id", pa.array(ids[ids % parts == p]))
        )
        pq.write_table(chunk, folder / "f.parquet", row_group_size=256 * 1024)
    con.execute(f"CREATE TABLE lake.added AS SELECT {COLUMNS}, 0 AS part FROM range(0) ")
    con.execute(f"CALL ducklake_add_data_files('lake', 'added', '{ext}/part=*/*.parquet', hive_partitioning => true)")
    counts = {t: con.execute(f"SELECT count(*) FROM lake.{t}").fetchone()[0] for t in TABLES}
    files = {
        t: [r[0] for r in con.execute(f"SELECT data_file FROM ducklake_list_files('lake', '{t}')").fetchall()]
        for t in TABLES
    }
    con.close()
    return {"url": f"sqlite:///{catalog}", "data_path": str(data), "counts": counts, "files": files}


def start_spark(work: Path, driver_memory: str) -> Any:
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[2]")
        .appName("duckdb-tables-bench")
        .config("spark.driver.memory", driver_memory)
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.local.dir", str(work / "spark-local"))
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("WARN")
    return spark


def drain(df: Any) -> None:
    df.write.format("noop").mode("overwrite").save()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rows", type=int, default=3_000_000)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--driver-memory", default="4g")
    p.add_argument("--quiet-wait", type=float, default=20.0)
    p.add_argument("--out", default=str(REPO_ROOT / "bench" / "results" / "duckdb_tables.json"))
    p.add_argument("--work-dir", default=None)
    args = p.parse_args(argv)

    import pyspark_ducklake as pdl
    from pyspark_ducklake.spark_parquet_read import plan_read

    work = Path(args.work_dir or tempfile.mkdtemp(prefix="duckdb-tables-bench-"))
    load = ForeignLoad()
    t0 = time.perf_counter()
    lake = build_lake(work, args.rows)
    print(f"lake written by DuckDB in {time.perf_counter() - t0:.1f} s: {lake['counts']}", flush=True)
    spark = start_spark(work, args.driver_memory)
    pdl.register(spark)
    url, data_path = lake["url"], lake["data_path"]
    paths: dict[str, str] = {}
    operations: list[tuple[str, str, Any]] = []
    for t in TABLES:
        paths[t] = plan_read(spark, f"main.{t}", catalog=url, data_path=data_path).reason or "spark-parquet"
        operations += [
            (t, "read_table", lambda t=t: drain(pdl.read_table(spark, f"main.{t}", catalog=url, data_path=data_path))),
            (
                t,
                "data-source",
                lambda t=t: drain(
                    spark.read.format("ducklake").option("catalog", url).option("dataPath", data_path).load(f"main.{t}")
                ),
            ),
            (t, "parquet-floor", lambda t=t: drain(spark.read.parquet(*lake["files"][t]))),
        ]
    for t, path in paths.items():
        print(f"  {t}: read_table takes {path}", flush=True)
    counts = {t: pdl.read_table(spark, f"main.{t}", catalog=url, data_path=data_path).count() for t in TABLES}
    assert counts == lake["counts"], (counts, lake["counts"])
    for _, _, fn in operations:  # warm-up at full size: JIT, Python workers, footers
        fn()
    times: dict[str, list[float]] = {f"{t}.{op}": [] for t, op, _ in operations}
    for rep in range(1, args.repeat + 1):
        parts = []
        for t, op, fn in operations:
            load.wait_quiet(args.quiet_wait, own_too=True)
            m = measure(load, fn)
            times[f"{t}.{op}"].append(round(m.seconds, 3))
            parts.append(f"{t}.{op} {m.seconds:.2f}s")
        print(f"rep {rep}: " + " | ".join(parts), flush=True)
    summary = {}
    for t in TABLES:
        med = {op: statistics.median(times[f"{t}.{op}"]) for op in ("read_table", "data-source", "parquet-floor")}
        summary[t] = {
            "path": paths[t],
            "seconds": med,
            "read_table_vs_floor": round(med["parquet-floor"] / med["read_table"], 3),
            "data_source_vs_floor": round(med["parquet-floor"] / med["data-source"], 3),
        }
        print(
            f"{t:8s} read_table {med['read_table']:.2f}s ({summary[t]['read_table_vs_floor']:.2f}x floor, "
            f"{paths[t]}) | data source {med['data-source']:.2f}s ({summary[t]['data_source_vs_floor']:.2f}x) | "
            f"parquet floor {med['parquet-floor']:.2f}s",
            flush=True,
        )
    out = {
        "created": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "git_commit": git_commit(),
        "rows": args.rows,
        "repeat": args.repeat,
        "machine": machine_info(),
        "summary": summary,
        "times": times,
        "counts": lake["counts"],
    }
    Path(args.out).write_text(json.dumps(out, indent=2, default=str) + "\n")
    print(f"wrote {args.out}", flush=True)
    spark.stop()
    load.close()
    if not args.work_dir:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
