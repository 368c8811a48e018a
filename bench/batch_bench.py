"""Spark batch write and read: DuckLake (SQLite and PostgreSQL catalogs) against Spark's own Parquet, same data.

One DataFrame of mixed types is generated deterministically from ``spark.range``, cached and materialised before any
timing, so generation is not measured. Each repetition then times, in wall-clock seconds on the driver:

- ``write``: ``df.write.mode("overwrite").parquet(dir)`` against
  ``df.write.format("ducklake").mode("overwrite").save("main.bench")`` (the Python data source) and against
  ``pdl.write_table(df, "main.bench_native", mode="overwrite")`` (Spark's own Parquet writer), on each backend;
- ``read``: ``spark.read.parquet(dir)`` against ``spark.read.format("ducklake").load("main.bench")`` and against
  ``pdl.read_table(spark, "main.bench")`` (Spark's own Parquet reader), each drained into Spark's ``noop`` sink,
  which pulls every column of every row through the scan (a plain ``count()`` would let Parquet answer from its
  footers);
- the floor controls (``floor_source.py``): the fastest Python data source write and read PySpark allows, knowing
  nothing of DuckLake, the reader over the DuckLake table's own files: what the API costs, so that
  ``floor / ducklake`` is our own cost;
- per column type (``--no-column-reads`` skips them): one column alone through ``spark.read.parquet(dir)``, the
  floor reader and the data source's ``columns`` option (first backend only).

The median of the repetitions is reported with rows/s and the ratio ``parquet_seconds / ducklake_seconds`` (1.0 = as
fast as plain Parquet; the project's target is >= 0.8), and for the data source ``floor_seconds / ducklake_seconds``
(the target is >= 0.95). After the last repetition the result is checked: row counts
and an order-independent hash of all columns agree between the source, the Parquet copy and the DuckLake table, and
DuckDB's ``ducklake`` extension counts the same rows (so a benchmark can never "win" by writing nothing).

The machine may be shared: the CPU used by processes outside this benchmark is sampled from ``/proc`` during every
measurement, each measurement waits for the machine to go idle first, and one during which other processes took more
than ``--max-contention`` of the CPU is redone (up to ``--max-tries`` times); the JSON keeps every attempt.

    python bench/batch_bench.py --rows 5000000 --repeat 3 --backends sqlite,postgres --out bench/results/batch.json
    python bench/batch_bench.py --rows 200000 --repeat 1            # smoke check, about a minute
"""

from __future__ import annotations

import argparse
import datetime as dt
import functools
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import floor_source  # bench/floor_source.py, next to this script
from _common import ForeignLoad, Measurement, git_commit, machine_info, measure  # bench/_common.py, next to this script

REPO_ROOT = Path(__file__).resolve().parents[1]
TABLE = "main.bench"
NATIVE_TABLE = "main.bench_native"
OPERATIONS = ("write", "write-native", "read", "read-native")
TARGET_RATIO = 0.8
FLOOR_TARGET_RATIO = 0.95  # the data source against the floor controls (issue #20 item 4)
# One column of each type the DataFrame has: bigint, int, double, string, timestamp, decimal(18,3), date, boolean,
# array<int>.
TYPE_COLUMNS = ("id", "i32", "dbl", "text", "ts", "amount", "day", "flag", "tags")
BACKENDS = ("sqlite", "postgres")


# --- catalogs -------------------------------------------------------------------------------------------------------


@dataclass
class Catalog:
    backend: str
    url: str
    data_path: str
    cleanup: Callable[[], None] = field(default=lambda: None)


def sqlite_catalog(work: Path) -> Catalog:
    folder = work / "lake-sqlite"
    (folder / "data").mkdir(parents=True)
    return Catalog("sqlite", f"sqlite:///{folder / 'lake.sqlite'}", f"{folder / 'data'}/")


def postgres_catalog(work: Path) -> Catalog:
    """A fresh database on the project's test PostgreSQL (``scripts/postgres.sh``), dropped by ``cleanup``."""
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    script = REPO_ROOT / "scripts" / "postgres.sh"
    subprocess.run(["bash", str(script), "start"], check=True, stdout=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    admin_url = subprocess.run(["bash", str(script), "url"], check=True, capture_output=True, text=True).stdout.strip()
    admin = create_engine(admin_url, isolation_level="AUTOCOMMIT")
    name = f"ducklake_bench_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))

    def drop() -> None:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()

    folder = work / "lake-postgres"
    (folder / "data").mkdir(parents=True)
    url = make_url(admin_url).set(database=name).render_as_string(hide_password=False)
    return Catalog("postgres", url, f"{folder / 'data'}/", drop)


# --- Spark ----------------------------------------------------------------------------------------------------------


def start_spark(args: argparse.Namespace, work: Path) -> Any:
    # Workers must run this interpreter (pyarrow, pyspark_ducklake); set before the JVM starts.
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.master(args.master)
        .appName("pyspark-ducklake-batch-bench")
        .config("spark.driver.memory", args.driver_memory)
        .config("spark.sql.shuffle.partitions", str(args.partitions))
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.warehouse.dir", str(work / "warehouse"))
        .config("spark.local.dir", str(work / "spark-local"))
    )
    for kv in args.conf:
        key, _, value = kv.partition("=")
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    import pyspark_ducklake

    pyspark_ducklake.register(spark)
    floor_source.register(spark)
    return spark


def source_frame(spark: Any, rows: int, partitions: int, with_array: bool) -> Any:
    """Deterministic mixed types: ints, double, decimal, short and long strings, timestamp, date, boolean, array."""
    from pyspark.sql import functions as F

    idc = F.col("id")
    cols = [
        idc.alias("id"),
        ((idc * 7919) % 1_000_003).cast("int").alias("i32"),
        F.xxhash64(idc).alias("h64"),
        F.when(idc % 17 == 0, None).otherwise((F.xxhash64(idc, F.lit(1)) % 1_000_000_000) / 7.0).alias("dbl"),
        ((idc * 104_729) % 100_000_000_000).cast("decimal(18,0)").cast("decimal(18,3)").alias("amount"),
        F.concat(F.lit("cat-"), (idc % 50).cast("string")).alias("category"),
        F.when(idc % 13 == 0, None)
        .otherwise(F.expr("substr(repeat(sha2(cast(id as string), 256), 2), 1, cast(id % 97 as int))"))
        .alias("text"),
        F.timestamp_micros(F.lit(1_600_000_000_000_000) + idc * 1_234_567).alias("ts"),
        F.date_add(F.lit(dt.date(2000, 1, 1)), (idc % 10_000).cast("int")).alias("day"),
        (idc % 3 == 0).alias("flag"),
    ]
    if with_array:
        cols.append(
            F.expr(
                "slice(array(cast(id % 100 as int), cast(id % 7 as int), cast(id % 11 as int)), 1, cast(id % 4 as int))"
            ).alias("tags")
        )
    return spark.range(0, rows, 1, partitions).select(*cols)


def table_hash(df: Any) -> tuple[int, int]:
    """(row count, XOR of a 64-bit hash of every row): order-independent, covers every column."""
    from pyspark.sql import functions as F

    row = df.agg(F.count(F.lit(1)).alias("n"), F.bit_xor(F.xxhash64(*df.columns)).alias("h")).first()
    return int(row["n"]), int(row["h"] or 0)


# --- timing ---------------------------------------------------------------------------------------------------------


def ducklake_writer(df: Any, catalog: Catalog, options: dict[str, str]) -> Any:
    w = (
        df.write.format("ducklake")
        .mode("overwrite")
        .option("catalog", catalog.url)
        .option("dataPath", catalog.data_path)
    )
    for k, v in options.items():
        w = w.option(k, v)
    return w


def ducklake_reader(spark: Any, catalog: Catalog) -> Any:
    return spark.read.format("ducklake").option("catalog", catalog.url).option("dataPath", catalog.data_path)


def write_ducklake(df: Any, catalog: Catalog, options: dict[str, str]) -> None:
    ducklake_writer(df, catalog, options).save(TABLE)


def read_ducklake(spark: Any, catalog: Catalog) -> None:
    drain(ducklake_reader(spark, catalog).load(TABLE))


def write_native(df: Any, catalog: Catalog, options: dict[str, str], table: str = NATIVE_TABLE) -> None:
    """``pdl.write_table``: Spark writes the Parquet files; it must not fall back to the data source."""
    import pyspark_ducklake as pdl

    outcome = pdl.write_table(
        df, table, mode="overwrite", catalog=catalog.url, data_path=catalog.data_path, options=options
    )
    if not outcome.native:
        raise SystemExit(f"the native write fell back to the data source: {outcome.reason}")


def native_frame(spark: Any, catalog: Catalog, table: str = TABLE) -> Any:
    """``pdl.read_table``: Spark reads the Parquet files; it must not fall back to the data source."""
    from pyspark_ducklake.spark_parquet_read import plan_read

    read = plan_read(spark, table, catalog=catalog.url, data_path=catalog.data_path)
    if not read.native:
        raise SystemExit(f"the native read fell back to the data source: {read.reason}")
    return read.dataframe(spark)


def read_native(spark: Any, catalog: Catalog) -> None:
    drain(native_frame(spark, catalog))


def table_files(catalog: Catalog, table: str = TABLE) -> list[str]:
    """The table's current data files (for the floor reader)."""
    import pyspark_ducklake as pdl

    lake = pdl.connect(catalog.url, data_path=catalog.data_path)
    try:
        return [str(p) for p in lake.list_files(table).column("data_file").to_pylist()]
    finally:
        lake.close()


def floor_frame(spark: Any, files: list[str], schema: Any) -> Any:
    """The floor reader over ``files``, reading (and decoding) only ``schema``'s columns, packed for the cores
    our reader packs for."""
    from pyspark_ducklake.table.read_packing import default_cores

    return (
        spark.read.format("floor-read")
        .schema(schema)
        .option("paths", json.dumps(files))
        .option("cores", str(default_cores()))
        .load()
    )


def write_floor(df: Any, folder: Path) -> None:
    df.write.format("floor-write").mode("overwrite").save(str(folder))


def drain(df: Any) -> None:
    """Pull every column of every row through the scan without writing anything."""
    df.write.format("noop").mode("overwrite").save()


def dir_size(path: Path) -> tuple[int, int]:
    files = [p for p in path.rglob("*.parquet") if p.is_file()]
    return len(files), sum(p.stat().st_size for p in files)


def live_files(catalog: Catalog, table: str = TABLE) -> tuple[int, int]:
    """(files, bytes) of the table's current data files, from the catalog."""
    from sqlalchemy import create_engine, text

    engine = create_engine(catalog.url)
    try:
        with engine.connect() as conn:
            n, size = conn.execute(
                text(
                    "SELECT count(*), coalesce(sum(f.file_size_bytes), 0) FROM ducklake_data_file f "
                    "JOIN ducklake_table t ON t.table_id = f.table_id AND t.end_snapshot IS NULL "
                    "WHERE f.end_snapshot IS NULL AND t.table_name = :name"
                ),
                {"name": table.split(".")[1]},
            ).one()
        return int(n), int(size)
    finally:
        engine.dispose()


def duckdb_check(catalog: Catalog, table: str = TABLE) -> dict[str, Any]:
    import pyspark_ducklake as pdl
    from pyspark_ducklake.duckdb_attach import open_in_duckdb

    lake = pdl.connect(catalog.url)
    try:
        con = open_in_duckdb(lake)
        try:
            n, ids, texts = con.execute(f"SELECT count(*), sum(id), count(text) FROM lake.{table}").fetchone()
        finally:
            con.close()
    finally:
        lake.close()
    return {"rows": int(n), "sum_id": int(ids), "non_null_text": int(texts)}


# --- report ---------------------------------------------------------------------------------------------------------


def spark_machine_info(spark: Any) -> dict[str, Any]:
    """The machine as every benchmark records it (bench/_common.py), with the versions this one reads through."""
    import pyarrow
    import pyspark

    try:
        import duckdb

        duckdb_version = duckdb.__version__
    except ImportError:
        duckdb_version = None
    return {
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        **machine_info(),
        "pyspark": pyspark.__version__,
        "pyarrow": pyarrow.__version__,
        "duckdb": duckdb_version,
        "java": spark.sparkContext._jvm.java.lang.System.getProperty("java.version"),
        "git_commit": git_commit(),
    }


def summarize(
    rows: int, times: dict[str, list[float]], cpu_times: dict[str, list[float]], backends: list[str]
) -> list[dict[str, Any]]:
    def med(name: str) -> float:
        return statistics.median(times[name])

    def med_cpu(name: str) -> float:
        return statistics.median(cpu_times[name])

    out = []
    for op in ("write", "read"):  # the floor controls against Parquet
        base, floor = med(f"parquet.{op}"), med(f"floor.{op}")
        out.append(
            {
                "backend": "-",
                "operation": f"floor-{op}",
                "parquet_seconds": round(base, 3),
                "ducklake_seconds": round(floor, 3),
                "parquet_rows_per_second": round(rows / base),
                "ducklake_rows_per_second": round(rows / floor),
                "ratio": round(base / floor, 3),
                "meets_target": None,
                "floor_seconds": round(floor, 3),
                "ratio_to_floor": 1.0,
                "parquet_cpu_seconds": round(med_cpu(f"parquet.{op}"), 2),
                "ducklake_cpu_seconds": round(med_cpu(f"floor.{op}"), 2),
                "cpu_ratio": round(med_cpu(f"parquet.{op}") / med_cpu(f"floor.{op}"), 3),
            }
        )
    for op in OPERATIONS:
        peer = op.split("-")[0]
        base = med(f"parquet.{peer}")
        base_cpu = med_cpu(f"parquet.{peer}")
        # the data source against the floor of any data source; the native paths are not data sources
        floor = med(f"floor.{op}") if op in ("write", "read") else None
        for b in backends:
            ours = med(f"ducklake-{b}.{op}")
            ours_cpu = med_cpu(f"ducklake-{b}.{op}")
            ratio = base / ours
            out.append(
                {
                    "backend": b,
                    "operation": op,
                    "parquet_seconds": round(base, 3),
                    "ducklake_seconds": round(ours, 3),
                    "parquet_rows_per_second": round(rows / base),
                    "ducklake_rows_per_second": round(rows / ours),
                    "ratio": round(ratio, 3),
                    "meets_target": ratio >= TARGET_RATIO,
                    "floor_seconds": None if floor is None else round(floor, 3),
                    "ratio_to_floor": None if floor is None else round(floor / ours, 3),
                    "parquet_cpu_seconds": round(base_cpu, 2),
                    "ducklake_cpu_seconds": round(ours_cpu, 2),
                    "cpu_ratio": round(base_cpu / ours_cpu, 3) if ours_cpu else None,
                }
            )
    return out


def summarize_columns(
    rows: int, times: dict[str, list[float]], backend: str, columns: list[tuple[str, str]]
) -> list[dict[str, Any]]:
    """Per column type: one column through Parquet, the floor reader and the data source's ``columns`` option."""
    out = []
    for name, type_ in columns:
        base = statistics.median(times[f"parquet.read[{name}]"])
        floor = statistics.median(times[f"floor.read[{name}]"])
        ours = statistics.median(times[f"ducklake-{backend}.read[{name}]"])
        out.append(
            {
                "column": name,
                "type": type_,
                "backend": backend,
                "parquet_seconds": round(base, 3),
                "floor_seconds": round(floor, 3),
                "ducklake_seconds": round(ours, 3),
                "floor_rows_per_second": round(rows / floor),
                "ducklake_rows_per_second": round(rows / ours),
                "floor_ratio": round(base / floor, 3),
                "ratio": round(base / ours, 3),
                "ratio_to_floor": round(floor / ours, 3),
                "meets_floor_target": floor / ours >= FLOOR_TARGET_RATIO,
            }
        )
    return out


def print_table(rows: int, summary: list[dict[str, Any]], columns: list[dict[str, Any]]) -> None:
    head = (
        f"{'backend':<9} {'op':<12} {'parquet s':>10} {'ducklake s':>11} {'parquet rows/s':>15} "
        f"{'ducklake rows/s':>16} {'ratio':>6} {'target':>7} {'/floor':>7} {'cpu-s pq':>9} {'cpu-s dl':>9} "
        f"{'cpu ratio':>10}"
    )
    print(
        f"\n{rows:,} rows; medians; ratio = parquet_seconds / ducklake_seconds (target >= {TARGET_RATIO}); "
        f"/floor = floor_seconds / ducklake_seconds (target >= {FLOOR_TARGET_RATIO}); the floor rows are the "
        "controls against Parquet; cpu-s = CPU seconds of the benchmark's own processes"
    )
    print(head)
    print("-" * len(head))
    for r in summary:
        target = "" if r["meets_target"] is None else ("ok" if r["meets_target"] else "BELOW")
        to_floor = "" if r["ratio_to_floor"] is None else f"{r['ratio_to_floor']:.2f}"
        print(
            f"{r['backend']:<9} {r['operation']:<12} {r['parquet_seconds']:>10.2f} {r['ducklake_seconds']:>11.2f} "
            f"{r['parquet_rows_per_second']:>15,} {r['ducklake_rows_per_second']:>16,} {r['ratio']:>6.2f} "
            f"{target:>7} {to_floor:>7} {r['parquet_cpu_seconds']:>9.1f} "
            f"{r['ducklake_cpu_seconds']:>9.1f} {r['cpu_ratio'] or 0:>10.2f}"
        )
    if not columns:
        return
    head = (
        f"{'column':<8} {'type':<14} {'parquet s':>10} {'floor s':>8} {'ducklake s':>11} {'floor rows/s':>13} "
        f"{'ducklake rows/s':>16} {'floor/pq':>9} {'dl/pq':>6} {'/floor':>7} {'target':>7}"
    )
    print(f"\none column alone ({columns[0]['backend']} catalog): parquet, the floor reader, the columns option")
    print(head)
    print("-" * len(head))
    for r in columns:
        print(
            f"{r['column']:<8} {r['type']:<14} {r['parquet_seconds']:>10.2f} {r['floor_seconds']:>8.2f} "
            f"{r['ducklake_seconds']:>11.2f} {r['floor_rows_per_second']:>13,} {r['ducklake_rows_per_second']:>16,} "
            f"{r['floor_ratio']:>9.2f} {r['ratio']:>6.2f} {r['ratio_to_floor']:>7.2f} "
            f"{'ok' if r['meets_floor_target'] else 'BELOW':>7}"
        )


def parse_kv(items: list[str]) -> dict[str, str]:
    out = {}
    for kv in items:
        k, sep, v = kv.partition("=")
        if not sep:
            raise SystemExit(f"expected key=value, got {kv!r}")
        out[k] = v
    return out


def rotated(items: list[Any], by: int) -> list[Any]:
    """``items`` starting at the ``by``-th (modulo their number)."""
    k = by % len(items) if items else 0
    return items[k:] + items[:k]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--rows", type=int, default=5_000_000, help="rows of the test DataFrame (default 5,000,000)")
    p.add_argument("--repeat", type=int, default=3, help="timed repetitions; the median is reported (default 3)")
    p.add_argument("--backends", default="sqlite,postgres", help="comma-separated catalog backends: sqlite,postgres")
    p.add_argument("--partitions", type=int, default=8, help="partitions of the DataFrame = write tasks (default 8)")
    p.add_argument("--master", default="local[2]", help="Spark master (default local[2])")
    p.add_argument("--driver-memory", default="6g", help="spark.driver.memory (holds the cached DataFrame)")
    p.add_argument("--no-array", action="store_true", help="leave out the array<int> column")
    p.add_argument("--no-column-reads", action="store_true", help="skip the reads of one column of each type (faster)")
    p.add_argument(
        "--column-reads-only",
        action="store_true",
        help="time only the reads of one column of each type (the whole-table operations run once, untimed)",
    )
    p.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help="extra Spark conf (repeatable)")
    p.add_argument(
        "--ducklake-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra option for the DuckLake writer, e.g. targetFileRows=500000 (repeatable)",
    )
    p.add_argument("--workdir", default=None, help="scratch folder (default: a new temporary folder, removed after)")
    p.add_argument("--keep", action="store_true", help="keep the scratch folder and the PostgreSQL database")
    p.add_argument("--out", default=None, help="write the results as JSON to this file")
    p.add_argument(
        "--max-contention",
        type=float,
        default=0.1,
        help="redo a measurement during which other processes used more than this share of the CPU (default 0.1)",
    )
    p.add_argument("--max-tries", type=int, default=4, help="tries per measurement when contended (default 4)")
    p.add_argument(
        "--quiet-wait",
        type=float,
        default=120.0,
        help="before each measurement wait up to this many seconds for other processes to go idle",
    )
    args = p.parse_args(argv)
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    if not backends or any(b not in BACKENDS for b in backends):
        p.error(f"--backends must be a comma-separated subset of {','.join(BACKENDS)}")
    if args.column_reads_only and args.no_column_reads:
        p.error("--column-reads-only and --no-column-reads exclude each other")
    if args.repeat < 1 or args.rows < 1 or args.max_tries < 1:
        p.error("--rows, --repeat and --max-tries must be >= 1")
    writer_options = parse_kv(args.ducklake_option)
    parse_kv(args.conf)

    # `kill <pid>` still drops the PostgreSQL database and removes the scratch folder.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    work = Path(args.workdir or tempfile.mkdtemp(prefix="ducklake-bench-")).resolve()
    work.mkdir(parents=True, exist_ok=True)
    catalogs: list[Catalog] = []
    spark = None
    load = ForeignLoad()
    try:
        for b in backends:
            catalogs.append(sqlite_catalog(work) if b == "sqlite" else postgres_catalog(work))
        t0 = time.perf_counter()
        spark = start_spark(args, work)
        print(f"spark up in {time.perf_counter() - t0:.1f} s; scratch {work}", flush=True)

        t0 = time.perf_counter()
        df = source_frame(spark, args.rows, args.partitions, not args.no_array).cache()
        n = df.count()
        assert n == args.rows, (n, args.rows)
        print(
            f"source: {n:,} rows x {len(df.columns)} columns cached in {time.perf_counter() - t0:.1f} s "
            f"({df.rdd.getNumPartitions()} partitions)",
            flush=True,
        )
        print("schema: " + ", ".join(f"{name} {t}" for name, t in df.dtypes), flush=True)

        # Warm-up (not timed): JIT, Python workers, catalog creation.
        warm_rows = max(20_000, min(args.rows // 10, 500_000))
        small = source_frame(spark, warm_rows, 2, not args.no_array).cache()
        small.count()
        small.write.mode("overwrite").parquet(str(work / "warmup.parquet"))
        drain(spark.read.parquet(str(work / "warmup.parquet")))
        write_floor(small, work / "warmup-floor")
        for c in catalogs:
            ducklake_writer(small, c, writer_options).save("main.warmup")
            drain(ducklake_reader(spark, c).load("main.warmup"))
            write_native(small, c, writer_options, "main.warmup_native")
            drain(native_frame(spark, c, "main.warmup"))
        warm_schema = ducklake_reader(spark, catalogs[0]).load("main.warmup").schema
        drain(floor_frame(spark, table_files(catalogs[0], "main.warmup"), warm_schema))
        small.unpersist()

        # The floor reader reads the data source's own files: written once here, untimed; the timed overwrites
        # write the same rows into new files and keep these (time travel).
        write_ducklake(df, catalogs[0], writer_options)
        files = table_files(catalogs[0])
        # The floor is handed the schema the data source reports for the table, not the DataFrame's: Spark infers
        # NOT NULL for columns computed from spark.range's id (id, i32, ts, day, flag), the table declares every
        # column nullable (as Delta does), and a NOT NULL column spares the JVM its null checks on every value.
        table_schema = ducklake_reader(spark, catalogs[0]).load(TABLE).schema
        parquet_dir = work / "parquet"
        floor_dir = work / "floor-write"
        operations: list[tuple[str, Callable[[], object]]] = [
            ("parquet.write", lambda: df.write.mode("overwrite").parquet(str(parquet_dir))),
            ("parquet.read", lambda: drain(spark.read.parquet(str(parquet_dir)))),
            ("floor.write", functools.partial(write_floor, df, floor_dir)),
            ("floor.read", lambda: drain(floor_frame(spark, files, table_schema))),
        ]
        for c in catalogs:
            operations.append((f"ducklake-{c.backend}.write", functools.partial(write_ducklake, df, c, writer_options)))
            operations.append(
                (f"ducklake-{c.backend}.write-native", functools.partial(write_native, df, c, writer_options))
            )
            operations.append((f"ducklake-{c.backend}.read", functools.partial(read_ducklake, spark, c)))
            operations.append((f"ducklake-{c.backend}.read-native", functools.partial(read_native, spark, c)))
        if args.column_reads_only:
            # the files every later read and check needs, written once and untimed
            for _, fn in operations:
                fn()
            operations = []
        from pyspark.sql.types import StructType

        type_columns = [] if args.no_column_reads else [(n, t) for n, t in df.dtypes if n in TYPE_COLUMNS]
        first = catalogs[0]
        column_groups: list[list[tuple[str, Callable[[], object]]]] = []
        for name, _ in type_columns:
            one = StructType([table_schema[name]])
            column_groups.append(
                [
                    (f"parquet.read[{name}]", lambda n=name: drain(spark.read.parquet(str(parquet_dir)).select(n))),
                    (f"floor.read[{name}]", lambda s=one: drain(floor_frame(spark, files, s))),
                    (
                        f"ducklake-{first.backend}.read[{name}]",
                        lambda n=name: drain(ducklake_reader(spark, first).option("columns", n).load(TABLE)),
                    ),
                ]
            )
        # Interleaved: every repetition runs every operation once. The reads of one column take turns going first
        # (repetition r starts the column's readers at the r-th), so no reader always runs right after another one.
        # A measurement during which other processes took more than --max-contention of the CPU is redone (at most
        # --max-tries times).
        attempts: list[dict[str, Any]] = []
        names = [name for name, _ in operations] + [name for group in column_groups for name, _ in group]
        times: dict[str, list[float]] = {name: [] for name in names}
        cpu_times: dict[str, list[float]] = {name: [] for name in names}
        contended_used = 0
        for rep in range(1, args.repeat + 1):
            parts = []
            turn = [op for group in column_groups for op in rotated(group, rep - 1)]
            for name, fn in operations + turn:
                tries: list[Measurement] = []
                for _ in range(args.max_tries):
                    waited = load.wait_quiet(args.quiet_wait, own_too=True)
                    m = measure(load, fn)
                    tries.append(m)
                    attempts.append(
                        {
                            "repetition": rep,
                            "operation": name,
                            "seconds": round(m.seconds, 3),
                            "cpu_seconds": round(m.cpu_seconds, 2),
                            "cpu_seconds_by_command": m.cpu_by_command,
                            "foreign_cpu_share": round(m.foreign_share, 3),
                            "foreign_top": m.foreign_top,
                            "waited_for_quiet_seconds": round(max(waited, 0.0), 1),
                            "contended": m.foreign_share > args.max_contention,
                        }
                    )
                    if m.foreign_share <= args.max_contention:
                        break
                    print(
                        f"  rep {rep} {name}: {m.seconds:.2f} s with {m.foreign_share:.0%} foreign CPU "
                        f"{m.foreign_top}: redo",
                        flush=True,
                    )
                best = min(tries, key=lambda t: t.foreign_share)
                contended_used += best.foreign_share > args.max_contention
                times[name].append(round(best.seconds, 3))
                cpu_times[name].append(round(best.cpu_seconds, 2))
                parts.append(
                    f"{name} {best.seconds:.2f} s ({best.cpu_seconds:.1f} cpu-s)"
                    + (" (CONTENDED)" if best.foreign_share > args.max_contention else "")
                )
            print(f"rep {rep}: " + " | ".join(parts), flush=True)
        if contended_used:
            print(
                f"WARNING: {contended_used} measurement(s) in the medians ran while other processes used more than "
                f"{args.max_contention:.0%} of the CPU",
                flush=True,
            )

        # Correctness, once, outside the timings.
        expected = table_hash(df)
        verification: dict[str, Any] = {"source": {"rows": expected[0], "hash": expected[1]}}
        got = table_hash(spark.read.parquet(str(parquet_dir)))
        files, size = dir_size(parquet_dir)
        verification["parquet"] = {"rows": got[0], "hash": got[1], "files": files, "bytes": size, "ok": got == expected}
        got = table_hash(spark.read.parquet(str(floor_dir)))
        verification["floor-write"] = {"rows": got[0], "hash": got[1], "ok": got == expected}
        got = table_hash(floor_frame(spark, table_files(catalogs[0]), table_schema))
        verification["floor-read"] = {"rows": got[0], "hash": got[1], "ok": got == expected}
        sum_id = args.rows * (args.rows - 1) // 2
        non_null_text = args.rows - (args.rows + 12) // 13
        want_duck = {"rows": args.rows, "sum_id": sum_id, "non_null_text": non_null_text}
        for c in catalogs:
            # The data source's table through both readers, and the natively written table through DuckDB too.
            got = table_hash(ducklake_reader(spark, c).load(TABLE))
            got_native = table_hash(native_frame(spark, c))
            got_written = table_hash(native_frame(spark, c, NATIVE_TABLE))
            duck = duckdb_check(c)
            duck_native = duckdb_check(c, NATIVE_TABLE)
            files, size = live_files(c)
            native_files, native_size = live_files(c, NATIVE_TABLE)
            ok = got == got_native == got_written == expected and duck == duck_native == want_duck
            verification[f"ducklake-{c.backend}"] = {
                "rows": got[0],
                "hash": got[1],
                "native_read_hash": got_native[1],
                "native_write_hash": got_written[1],
                "duckdb": duck,
                "duckdb_native_write": duck_native,
                "files": files,
                "bytes": size,
                "native_write_files": native_files,
                "native_write_bytes": native_size,
                "ok": ok,
            }
        all_ok = all(v.get("ok", True) for v in verification.values())
        print("verification: " + ("ok" if all_ok else "FAILED") + " " + json.dumps(verification), flush=True)

        backend_names = [c.backend for c in catalogs]
        summary = [] if args.column_reads_only else summarize(args.rows, times, cpu_times, backend_names)
        column_summary = summarize_columns(args.rows, times, first.backend, type_columns)
        print_table(args.rows, summary, column_summary)
        result = {
            "benchmark": "batch",
            "command": " ".join([Path(sys.argv[0]).as_posix(), *sys.argv[1:]]) if argv is None else argv,
            "config": {
                "rows": args.rows,
                "repeat": args.repeat,
                "backends": [c.backend for c in catalogs],
                "partitions": args.partitions,
                "master": args.master,
                "driver_memory": args.driver_memory,
                "columns": dict(df.dtypes),
                "spark_conf": parse_kv(args.conf),
                "ducklake_options": writer_options,
                "read_sink": "noop",
                "target_ratio": TARGET_RATIO,
                "floor_target_ratio": FLOOR_TARGET_RATIO,
                "column_reads": [n for n, _ in type_columns],
                "max_contention": args.max_contention,
            },
            "machine": spark_machine_info(spark),
            "times_seconds": times,
            "cpu_seconds": cpu_times,
            "attempts": attempts,
            "contended_measurements_in_medians": contended_used,
            "summary": summary,
            "columns": column_summary,
            "verification": verification,
            "verified": all_ok,
        }
        if args.out:
            out = Path(args.out)
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(json.dumps(result, indent=2) + "\n")
            print(f"wrote {out}")
        df.unpersist()
        return 0 if all_ok else 1
    finally:
        load.close()
        if spark is not None:
            try:
                spark.stop()
            except Exception as e:  # the JVM may already be gone (interrupted run); clean up regardless
                print(f"could not stop Spark: {e}", file=sys.stderr)
        if not args.keep:
            for c in catalogs:
                try:
                    c.cleanup()
                except Exception as e:  # clean-up must not hide the benchmark's own error
                    print(f"could not drop the {c.backend} catalog: {e}", file=sys.stderr)
            shutil.rmtree(work, ignore_errors=True)
        else:
            print(f"kept {work}" + "".join(f"; {c.backend} catalog {c.url}" for c in catalogs))


if __name__ == "__main__":
    sys.exit(main())
