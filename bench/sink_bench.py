"""Streaming sink benchmark: DuckLake's ``foreachBatch`` sink against Delta Lake's idempotent ``foreachBatch`` writes.

Both sinks get the same micro-batches: DataFrames built before any timing from a few cached ``spark.range``-derived
templates of mixed types (ints, double, decimal, short and long strings, timestamp, date, boolean), each batch a
projection of a template with its own id range. The ``foreachBatch`` functions are called directly in a loop,
``sink(df, batch_id)``, as Structured Streaming would call them, and every call is timed on the driver:

- DuckLake: ``ducklake_sink("main.events", catalog=..., data_path=..., app_id=...)`` (one snapshot per batch; small
  batches are inlined into the catalog and flushed to Parquet at 100,000 rows), on a SQLite and a PostgreSQL catalog.
  Its commit latency is ``sink.metrics[i].commit_latency_s``: the catalog transaction alone. A profile of 30 more
  small batches (``--profile-batches``) times each step of one batch and counts the SQL statements it executes.
- Delta: ``df.write.format("delta").mode("append").option("txnAppId", app).option("txnVersion", batch_id).save(p)``,
  the documented idempotent foreachBatch write. Its "commit latency" is the whole write (Delta does not report its
  commit separately), so it is compared with DuckLake's whole-batch time too.

Workloads: small batches (default 2,000 x 100 rows), large batches (default 3 x 1,000,000 rows), and commit latency
on a catalog that already holds 100,000 snapshots against a fresh one (DuckLake only; the history is bulk-inserted
as valid empty snapshots, see ``populate_snapshots``). After each stream the last batch is delivered again (a
replay: both sinks must skip it), the rows are counted and their ids summed, and the data files are counted.

No delta-spark release supports Spark 4.3 (the newest, 4.4.0, is built for Spark 4.2.0 and fails on 4.3.0 with
``NoSuchMethodError: LogicalRDD.<init>``), so the Delta side runs in its own worker process on pyspark 4.2.0 from a
second virtualenv (``bash bench/fetch_delta.sh --venv`` makes it), while DuckLake runs on the project's pyspark
4.3.0. A control stream runs the DuckLake sink on that same Spark 4.2 too (``--control-batches``), so the Spark
version's share of any difference is visible. Every stream runs in a long-lived worker (one JVM each) and the
streams of a workload take turns in blocks of ``--block`` batches, so load from other processes on a shared machine
hits them alike; the CPU taken by processes outside the benchmark is sampled from /proc and recorded per stream.

    bash bench/fetch_delta.sh --venv
    python bench/sink_bench.py --out bench/results/sink.json --plot bench/results/sink.png
    python bench/sink_bench.py --small-batches 200 --large-rows 200000 --large-batches 2 \\
        --latency-snapshots 10000 --latency-batches 50 --backends sqlite --out /tmp/sink.json   # smoke run

Targets (ratios against Delta measured in the same run): small batches/s >= 5x Delta's; large rows/s >= 1.0x
Delta's; >= 10x fewer data files than Delta for the small-batch run; commit latency p50 with 100,000 snapshots in the
catalog <= 1.5x that of an empty catalog.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _common import (  # bench/_common.py, next to this script
    DELTA_VENV,
    DELTA_VERSION,
    REPO_ROOT,
    Catalogs,
    ForeignLoad,
    WorkerProcess,
    delta_append,
    delta_jars,
    fmt,
    git_commit,
    machine_info,
    pct,
    serve_worker,
    spark_info,
    start_worker_spark,
)

SMALL_TABLE = "main.events"
LARGE_TABLE = "main.large"
WARMUP_TABLE = "main.warmup"
TEMPLATES = 10  # cached templates the small batches are projected from

TARGETS = {
    "small_batches_per_s": 5.0,  # DuckLake / Delta, at least
    "large_rows_per_s": 1.0,  # DuckLake / Delta, at least
    "data_files": 10.0,  # Delta / DuckLake, at least
    "latency_100k": 1.5,  # big / fresh commit latency p50, at most
}


# =====================================================================================================================
# Worker side: one SparkSession per process, driven by JSON commands on stdin.
# =====================================================================================================================


def _mixed_columns(F: Any, offset_col: Any) -> list[Any]:
    """Deterministic mixed types from an ``id`` column (``offset_col`` is the id to derive everything from)."""
    idc = offset_col
    return [
        idc.alias("id"),
        ((idc * 7919) % 1_000_003).cast("int").alias("i32"),
        F.xxhash64(idc).alias("h64"),
        F.when(idc % 17 == 0, None).otherwise((F.xxhash64(idc, F.lit(1)) % 1_000_000_000) / 7.0).alias("dbl"),
        ((idc * 104_729) % 100_000_000_000).cast("decimal(18,0)").cast("decimal(18,3)").alias("amount"),
        F.concat(F.lit("cat-"), (idc % 50).cast("string")).alias("category"),
        F.when(idc % 13 == 0, None)
        .otherwise(F.substring(F.repeat(F.sha2(idc.cast("string"), 256), 2), 1, 64))
        .alias("text"),
        F.timestamp_micros(F.lit(1_600_000_000_000_000) + idc * 1_234_567).alias("ts"),
        F.date_add(F.lit(dt.date(2000, 1, 1)), (idc % 10_000).cast("int")).alias("day"),
        (idc % 3 == 0).alias("flag"),
    ]


class Frames:
    """Pre-built micro-batches: batch ``i`` holds ids ``[i*rows, (i+1)*rows)``, projected from a cached template."""

    def __init__(self, spark: Any, count: int, rows: int, partitions: int, templates: int) -> None:
        from pyspark.sql import functions as F

        self.rows = rows
        self.count = count
        k = max(1, min(templates, count))
        self.templates = []
        for t in range(k):
            base = spark.range(t * rows, (t + 1) * rows, 1, partitions)
            df = base.select(*_mixed_columns(F, F.col("id"))).cache()
            df.count()
            self.templates.append(df)
        # Batch i is template i % k with its ids shifted by a multiple of k*rows (the other columns repeat).
        self.frames = []
        for i in range(count):
            t = self.templates[i % k]
            shift = (i // k) * k * rows
            self.frames.append(
                t.select((F.col("id") + F.lit(shift)).alias("id"), *[c for c in t.columns if c != "id"]) if shift else t
            )

    def __getitem__(self, i: int) -> Any:
        return self.frames[i]

    def expected(self, n: int) -> tuple[int, int]:
        """(rows, sum of ids) of the first ``n`` batches."""
        total = n * self.rows
        return total, total * (total - 1) // 2


class Worker:
    def __init__(self, spec: dict[str, Any]) -> None:
        self.spec = spec
        self.engine = spec["engine"]
        self.spark = self._start_spark()
        self.small: Frames | None = None
        self.large: Frames | None = None
        self.sinks: dict[str, Any] = {}

    # --- setup --------------------------------------------------------------------------------------------------
    def _start_spark(self) -> Any:
        return start_worker_spark(self.spec, f"pyspark-ducklake-sink-bench-{self.spec['name']}")

    def info(self) -> dict[str, Any]:
        out = spark_info(self.spark)
        if self.engine == "ducklake":
            import sqlalchemy

            out["sqlalchemy"] = sqlalchemy.__version__
        return out

    def frames(self, kind: str) -> Frames:
        s = self.spec
        if kind == "small":
            if self.small is None:
                self.small = Frames(self.spark, s["small_count"], s["small_rows"], s["small_partitions"], TEMPLATES)
            return self.small
        if self.large is None:
            # One cached template per large batch: nothing is computed while a batch is timed.
            self.large = Frames(self.spark, s["large_count"], s["large_rows"], s["large_partitions"], s["large_count"])
        return self.large

    # --- sinks ----------------------------------------------------------------------------------------------------
    def sink(self, target: dict[str, Any], table: str, app: str) -> Callable[[Any, int], Any]:
        key = f"{target.get('url', target.get('path'))}:{table}:{app}"
        if key not in self.sinks:
            if self.engine == "ducklake":
                from pyspark_ducklake.streaming.sink import ducklake_sink

                self.sinks[key] = ducklake_sink(
                    table, catalog=target["url"], data_path=target["data_path"], app_id=app, **target.get("options", {})
                )
            else:
                path = target["path"] + "/" + table.split(".")[-1]

                def write(df: Any, batch_id: int, path: str = path, app: str = app) -> None:
                    delta_append(df, path, app, batch_id)

                self.sinks[key] = write
        return self.sinks[key]

    def cmd_warmup(self, c: dict[str, Any]) -> dict[str, Any]:
        """Untimed batches into a separate table: JIT, Python workers, catalog connections."""
        target = c["target"]
        frames = self.frames(c["kind"])
        sink = self.sink(target, WARMUP_TABLE, c.get("app", f"warmup-{c['kind']}"))
        started = time.perf_counter()
        start = c.get("start", 0)
        for i in range(start, start + c["batches"]):
            sink(frames[i % frames.count], i)
        return {"seconds": time.perf_counter() - started}

    def cmd_run(self, c: dict[str, Any]) -> dict[str, Any]:
        """Batches ``start..end-1`` of a stream, each timed; DuckLake's metrics per batch too."""
        target = c["target"]
        frames = self.frames(c["kind"])
        table = SMALL_TABLE if c["kind"] == "small" else LARGE_TABLE
        sink = self.sink(target, table, c["app"])
        wall, cpu, extra = [], [], []
        for i in range(c["start"], c["end"]):
            df = frames[i]
            t0, c0 = time.perf_counter(), time.process_time()
            sink(df, i)
            wall.append(time.perf_counter() - t0)
            cpu.append(time.process_time() - c0)
            if self.engine == "ducklake":
                m = sink.metrics[-1]  # type: ignore[attr-defined]
                extra.append(
                    {
                        "commit": m.commit_latency_s,
                        "mode": m.mode,
                        "files": m.files,
                        "flushed": m.flushed_rows,
                        "attempts": m.attempts,
                        "duration": m.duration_s,
                    }
                )
        return {"wall": wall, "driver_cpu": cpu, "metrics": extra}

    def cmd_finish(self, c: dict[str, Any]) -> dict[str, Any]:
        """Replay the last batch (must be skipped), check rows and ids, count data files."""
        target = c["target"]
        frames = self.frames(c["kind"])
        table = SMALL_TABLE if c["kind"] == "small" else LARGE_TABLE
        sink = self.sink(target, table, c["app"])
        n = c["batches"]
        exp_rows, exp_sum = frames.expected(n)
        out: dict[str, Any] = {"expected_rows": exp_rows}
        t0 = time.perf_counter()
        sink(frames[n - 1], n - 1)
        out["replay_seconds"] = time.perf_counter() - t0
        if self.engine == "ducklake":
            import pyarrow.compute as pc

            import pyspark_ducklake as pdl

            out["replay_mode"] = sink.metrics[-1].mode  # type: ignore[attr-defined]
            lake = pdl.connect(target["url"])
            try:
                data = lake.scan(table, columns=["id"])
                out["rows"] = data.num_rows
                out["id_sum"] = int(pc.sum(data.column("id")).as_py() or 0)
                out["snapshots"] = len(lake.snapshots())
                out["inlined_rows_left"] = _inlined_rows(lake, table)
            finally:
                lake.close()
            folder = Path(target["data_path"]) / Path(*table.split("."))
            files = [p for p in folder.rglob("*") if p.is_file()]
            out["data_files"] = sum(1 for p in files if p.suffix == ".parquet" and "delete" not in p.name)
            out["all_files"] = len(files)
            out["data_bytes"] = sum(p.stat().st_size for p in files)
        else:
            from pyspark.sql import functions as F

            path = Path(target["path"]) / table.split(".")[-1]
            log = path / "_delta_log"
            versions = sorted(p.name for p in log.glob("*.json"))
            out["commits"] = len(versions)
            row = (
                self.spark.read.format("delta")
                .load(str(path))
                .agg(F.count(F.lit(1)).alias("n"), F.sum("id").alias("s"))
                .first()
            )
            out["rows"] = int(row["n"])
            out["id_sum"] = int(row["s"] or 0)
            files = [p for p in path.rglob("*") if p.is_file() and "_delta_log" not in p.parts]
            out["data_files"] = sum(1 for p in files if p.suffix == ".parquet")
            out["all_files"] = len(files)
            out["data_bytes"] = sum(p.stat().st_size for p in files)
            out["log_files"] = sum(1 for p in log.rglob("*") if p.is_file())
            out["replay_mode"] = "skipped" if out["commits"] == n else f"committed ({out['commits']} commits)"
        out["ok"] = out["rows"] == exp_rows and out["id_sum"] == exp_sum and out["replay_mode"] == "skipped"
        return out

    # --- commit latency on a big catalog ------------------------------------------------------------------------
    def cmd_latency(self, c: dict[str, Any]) -> dict[str, Any]:
        """Commit latency of the same small batches into a fresh catalog and one with ``snapshots`` of history."""
        fresh, big = c["fresh"], c["big"]
        frames = self.frames("small")
        sinks = {name: self.sink(t, SMALL_TABLE, "latency") for name, t in (("fresh", fresh), ("big", big))}
        warm = c["warmup"]
        for sink in sinks.values():  # creates the table, warms the connections
            for i in range(warm):
                sink(frames[i], i)
        t0 = time.perf_counter()
        populated = populate_snapshots(big["url"], c["snapshots"])
        populate_s = time.perf_counter() - t0
        results: dict[str, dict[str, list[float]]] = {n: {"commit": [], "wall": []} for n in sinks}
        done = dict.fromkeys(sinks, 0)
        total, block = c["batches"], c["block"]
        order = ["fresh", "big"]
        turn = 0
        while any(done[n] < total for n in order):
            name = order[turn % 2]
            turn += 1
            sink = sinks[name]
            for _ in range(min(block, total - done[name])):
                i = warm + done[name]
                t1 = time.perf_counter()
                sink(frames[i], i)
                results[name]["wall"].append(time.perf_counter() - t1)
                m = sink.metrics[-1]  # type: ignore[attr-defined]
                results[name]["commit"].append(m.commit_latency_s)
                if m.mode != "inlined":
                    results[name].setdefault("modes", []).append((i, m.mode, m.flushed_rows))  # type: ignore[arg-type]
                done[name] += 1
        checks = {n: _check_catalog(t, warm + total, c["rows"]) for n, t in (("fresh", fresh), ("big", big))}
        return {"populate_seconds": populate_s, "populated": populated, "results": results, "checks": checks}

    def dispatch(self, c: dict[str, Any]) -> dict[str, Any]:
        return getattr(self, "cmd_" + c["cmd"])(c)

    def cmd_info(self, c: dict[str, Any]) -> dict[str, Any]:
        return self.info()

    def cmd_profile(self, c: dict[str, Any]) -> dict[str, Any]:
        return profile_small_batch(self, c)


def _inlined_rows(lake: Any, table: str) -> int:
    from pyspark_ducklake.catalog import reader as R

    schema, name = table.split(".")
    with lake.engine.connect() as conn:
        entry = R.table_by_name(conn, schema, name, R.latest_snapshot(conn).snapshot_id)
        return R.inlined_rows_waiting(conn, entry.table_id)[0]


def populate_snapshots(url: str, count: int, chunk: int = 10_000) -> dict[str, Any]:
    """Append ``count`` empty snapshots to a catalog in bulk (setup for the latency test, not a DuckLake write path).

    Each is a valid snapshot that changes nothing: the next id, the head's schema version and id counters
    unchanged, a ``ducklake_snapshot_changes`` row with ``changes_made`` empty, times one microsecond apart. This is
    what the catalog looks like after that many commits as far as a commit's queries go (they read the head snapshot
    and the table's current entries); the rows a real history leaves in other tables (files, stats, the inlined
    rows' version ranges) are bounded by flushes and compaction and are not added. DuckDB reads the result.
    """
    from sqlalchemy import insert

    from pyspark_ducklake.catalog import reader as R
    from pyspark_ducklake.catalog import tables as T
    from pyspark_ducklake.catalog.location import create_catalog_engine, parse_location

    engine = create_catalog_engine(parse_location(url))
    try:
        with engine.connect().execution_options(ducklake_write=True) as conn, conn.begin():
            head = R.latest_snapshot(conn)
            start = head.snapshot_id + 1
            base = dt.datetime.now(dt.timezone.utc)
            for lo in range(0, count, chunk):
                ids = range(start + lo, start + min(count, lo + chunk))
                conn.execute(
                    insert(T.ducklake_snapshot),
                    [
                        {
                            "snapshot_id": s,
                            "snapshot_time": base + dt.timedelta(microseconds=s - start),
                            "schema_version": head.schema_version,
                            "next_catalog_id": head.next_catalog_id,
                            "next_file_id": head.next_file_id,
                        }
                        for s in ids
                    ],
                )
                conn.execute(
                    insert(T.ducklake_snapshot_changes),
                    [
                        {
                            "snapshot_id": s,
                            "changes_made": "",
                            "author": None,
                            "commit_message": None,
                            "commit_extra_info": None,
                        }
                        for s in ids
                    ],
                )
        with engine.connect() as conn:
            last = R.latest_snapshot(conn).snapshot_id
    finally:
        engine.dispose()
    return {"first": start, "last": last, "count": last - start + 1}


def _check_catalog(target: dict[str, Any], batches: int, rows: int) -> dict[str, Any]:
    """Rows and snapshots of the latency table, by this package and (when importable) by DuckDB."""
    import pyspark_ducklake as pdl

    out: dict[str, Any] = {"expected_rows": batches * rows}
    lake = pdl.connect(target["url"])
    try:
        out["rows"] = lake.scan(SMALL_TABLE, columns=["id"]).num_rows
        out["snapshots"] = lake.current_snapshot_id()
    finally:
        lake.close()
    try:
        from pyspark_ducklake.duckdb_attach import attach_sql, connect_duckdb
    except ImportError:
        return out
    try:
        con = connect_duckdb()
        try:
            con.execute(attach_sql(target["duckdb"], target["data_path"], "lake", None))
            out["duckdb_rows"] = con.execute(f"SELECT count(*) FROM lake.{SMALL_TABLE}").fetchone()[0]
            out["duckdb_snapshots"] = con.execute("SELECT count(*) FROM lake.snapshots()").fetchone()[0]
        finally:
            con.close()
    except Exception as e:  # DuckDB is a cross-check only
        out["duckdb_error"] = f"{type(e).__name__}: {e}"[:500]
    return out


def profile_small_batch(worker: Worker, c: dict[str, Any]) -> dict[str, Any]:
    """Where one small DuckLake batch spends its time: each step of ``DuckLakeSink._handle``, timed separately.

    The Spark step is the sink's own for a batch that follows a small one (``collect_if_small``: one Arrow collect
    of at most ``data_inlining_row_limit + 1`` rows); the executor path (``run_tasks``, a ``mapInArrow`` job whose
    tasks hand back Arrow IPC) and a plain count are timed on the same frame for reference. ``sql_statements`` is
    what the catalog executed for the batch (SQLAlchemy's ``before_cursor_execute``).
    """
    from sqlalchemy import event

    from pyspark_ducklake.spark.type_mapping import columns_from_spark
    from pyspark_ducklake.streaming.sink import collect_if_small, run_tasks
    from pyspark_ducklake.table.microbatch import write_task

    target = c["target"]
    frames = worker.frames("small")
    sink = worker.sink(target, "main.profile", "profile")
    sink(frames[0], 0)  # creates the table
    committer = sink._get_committer(worker.spark)  # type: ignore[attr-defined]
    steps: dict[str, list[float]] = {}
    statements = [0]

    @event.listens_for(committer.lake.engine, "before_cursor_execute")
    def _count(*_: Any) -> None:
        statements[0] += 1

    def timed(name: str, fn: Callable[..., Any], *a: Any, **kw: Any) -> Any:
        t0 = time.perf_counter()
        value = fn(*a, **kw)
        steps.setdefault(name, []).append(time.perf_counter() - t0)
        return value

    for i in range(1, c["batches"] + 1):
        df = frames[i]
        t0 = time.perf_counter()
        statements[0] = 0
        incoming = timed("schema", columns_from_spark, df.schema)
        _, (plan, tplan) = timed("replay_check_and_plan", committer.prepare, "profile", i, incoming)
        small = timed("spark_collect", collect_if_small, df, plan.inline_limit)
        outputs = [timed("driver_task", write_task, plan, small)]
        m = timed(
            "commit_call",
            committer.commit,
            plan,
            tplan,
            outputs,
            app_id="profile",
            batch_id=i,
            started=time.monotonic(),
        )
        steps.setdefault("catalog_txn", []).append(m.commit_latency_s)
        steps.setdefault("total", []).append(time.perf_counter() - t0)
        steps.setdefault("sql_statements", []).append(statements[0])
        # Spark alone, for reference: the executor path and a plain count on the same frame.
        timed("spark_mapinarrow_tasks", run_tasks, df, plan)
        timed("spark_count", lambda d: d.count(), df)
    return {k: {"p50": statistics.median(v), "mean": statistics.fmean(v), "n": len(v)} for k, v in steps.items()}


def profile_line(prof: dict[str, Any]) -> str:
    """``step p50`` pairs of a profile: times in ms, the statement count as is."""
    return ", ".join(
        f"{k} {v['p50']:.0f}" if k == "sql_statements" else f"{k} {v['p50'] * 1000:.1f} ms" for k, v in prof.items()
    )


# =====================================================================================================================
# Orchestrator side: catalogs, workers, the turn-taking, statistics, output.
# =====================================================================================================================


class Stream:
    """One sink writing one workload: its worker, its target and what it measured."""

    def __init__(
        self,
        label: str,
        worker: WorkerProcess,
        target: dict[str, Any],
        kind: str,
        batches: int,
        rows: int,
        engine: str,
        spark: str,
    ) -> None:
        self.label, self.worker, self.target, self.kind = label, worker, target, kind
        self.batches, self.rows, self.engine, self.spark = batches, rows, engine, spark
        self.app = f"bench-{kind}-{uuid.uuid4().hex[:8]}"
        self.done = 0
        self.wall: list[float] = []
        self.driver_cpu: list[float] = []
        self.metrics: list[dict[str, Any]] = []
        self.elapsed = 0.0
        self.foreign_cpu = 0.0
        self.finish: dict[str, Any] = {}
        self.warmup_seconds = 0.0
        self.touches = 0

    def run_block(self, n: int, load: ForeignLoad) -> None:
        # Turn-taking leaves a worker idle for minutes, and Spark stops Python workers idle for a minute: one untimed
        # small batch into the warm-up table first, so a turn starts as warm as a running stream is.
        if self.done:
            self.worker.call("warmup", target=self.target, kind="small", batches=1, start=self.touches, app="touch")
            self.touches += 1
        end = min(self.batches, self.done + n)
        f0, t0 = load.read(), time.perf_counter()
        r = self.worker.call("run", target=self.target, kind=self.kind, app=self.app, start=self.done, end=end)
        self.elapsed += time.perf_counter() - t0
        self.foreign_cpu += load.read() - f0
        self.wall += r["wall"]
        self.driver_cpu += r["driver_cpu"]
        self.metrics += r["metrics"]
        self.done = end

    def summary(self) -> dict[str, Any]:
        # Throughput from the sum of per-batch times (excludes the orchestrator's round trips between blocks).
        busy = sum(self.wall)
        out: dict[str, Any] = {
            "label": self.label,
            "engine": self.engine,
            "spark": self.spark,
            "kind": self.kind,
            "backend": self.target.get("backend", "-"),
            "batches": self.batches,
            "rows_per_batch": self.rows,
            "seconds": busy,
            "batches_per_s": self.batches / busy if busy else float("nan"),
            "rows_per_s": self.batches * self.rows / busy if busy else float("nan"),
            "batch_p50_s": pct(self.wall, 50),
            "batch_p99_s": pct(self.wall, 99),
            "batch_max_s": max(self.wall),
            "driver_cpu_s_per_batch": statistics.fmean(self.driver_cpu) if self.driver_cpu else None,
            "foreign_cpu_share": self.foreign_cpu / (self.elapsed * (os.cpu_count() or 1)) if self.elapsed else None,
            "warmup_seconds": self.warmup_seconds,
        }
        if self.metrics:
            commits = [m["commit"] for m in self.metrics]
            out.update(
                {
                    "commit_p50_s": pct(commits, 50),
                    "commit_p99_s": pct(commits, 99),
                    "commit_max_s": max(commits),
                    "commit_latency_is": "catalog transaction (BatchMetrics.commit_latency_s)",
                    "modes": {
                        m: sum(1 for x in self.metrics if x["mode"] == m) for m in {x["mode"] for x in self.metrics}
                    },
                    "flushes": [
                        (i, m["flushed"], round(self.wall[i], 4)) for i, m in enumerate(self.metrics) if m["flushed"]
                    ],
                    "commit_attempts_max": max(m["attempts"] for m in self.metrics),
                }
            )
        else:
            out.update(
                {
                    "commit_p50_s": out["batch_p50_s"],
                    "commit_p99_s": out["batch_p99_s"],
                    "commit_latency_is": "whole write (Delta does not report its commit alone)",
                }
            )
        out.update(self.finish)
        return out

    def series(self) -> dict[str, Any]:
        return {
            "wall": [round(x, 5) for x in self.wall],
            "commit": [round(m["commit"], 6) for m in self.metrics] if self.metrics else None,
        }


def take_turns(streams: list[Stream], block: int, load: ForeignLoad, say: Callable[[str], None]) -> None:
    """Run the streams' batches in turns of ``block`` until all are done."""
    t0 = time.perf_counter()
    while any(s.done < s.batches for s in streams):
        for s in streams:
            if s.done < s.batches:
                s.run_block(block, load)
        say(
            "  "
            + ", ".join(
                f"{s.label} {s.done}/{s.batches} ({sum(s.wall) / max(1, s.done) * 1000:.0f} ms/batch)" for s in streams
            )
            + f"  [{time.perf_counter() - t0:.0f} s]"
        )


def build_report(streams: list[Stream], latency: dict[str, Any], args: argparse.Namespace) -> tuple[dict, list]:
    summaries = {f"{s.kind}:{s.label}": s.summary() for s in streams}
    targets = []
    delta_small = next((s for s in streams if s.kind == "small" and s.label == "delta"), None)
    delta_large = next((s for s in streams if s.kind == "large" and s.label == "delta"), None)
    control = next((s for s in streams if s.kind == "small" and s.label.endswith("spark4.2")), None)
    if control and delta_small:
        # The headline: like with like, the sink and Delta on the same Spark (no Delta release supports 4.3).
        me, d = summaries[f"small:{control.label}"], summaries["small:delta"]
        ratio = me["batches_per_s"] / d["batches_per_s"]
        targets.append(
            {
                "target": f"small batches/s, {control.target['backend']} vs Delta, same Spark ({d['spark']})",
                "ducklake": me["batches_per_s"],
                "delta": d["batches_per_s"],
                "ratio": ratio,
                "goal": f">= {TARGETS['small_batches_per_s']}",
                "met": ratio >= TARGETS["small_batches_per_s"],
            }
        )
    for s in streams:
        if s.engine != "ducklake" or s.label.endswith("spark4.2"):
            continue
        me = summaries[f"{s.kind}:{s.label}"]
        if s.kind == "small" and delta_small:
            d = summaries["small:delta"]
            ratio = me["batches_per_s"] / d["batches_per_s"]
            targets.append(
                {
                    "target": f"small batches/s, {s.target['backend']} vs Delta",
                    "ducklake": me["batches_per_s"],
                    "delta": d["batches_per_s"],
                    "ratio": ratio,
                    "goal": f">= {TARGETS['small_batches_per_s']}",
                    "met": ratio >= TARGETS["small_batches_per_s"],
                    "note": f"mixed Spark versions: DuckLake on {me['spark']}, Delta on {d['spark']}",
                }
            )
            ratio_f = d["data_files"] / me["data_files"] if me.get("data_files") else math.inf
            targets.append(
                {
                    "target": f"data files (small run), Delta / {s.target['backend']}",
                    "ducklake": me.get("data_files"),
                    "delta": d.get("data_files"),
                    "ratio": ratio_f,
                    "goal": f">= {TARGETS['data_files']}",
                    "met": ratio_f >= TARGETS["data_files"],
                }
            )
        if s.kind == "large" and delta_large:
            d = summaries["large:delta"]
            ratio = me["rows_per_s"] / d["rows_per_s"]
            targets.append(
                {
                    "target": f"large rows/s, {s.target['backend']} vs Delta",
                    "ducklake": me["rows_per_s"],
                    "delta": d["rows_per_s"],
                    "ratio": ratio,
                    "goal": f">= {TARGETS['large_rows_per_s']}",
                    "met": ratio >= TARGETS["large_rows_per_s"],
                }
            )
    for backend, lat in latency.items():
        ratio = lat["big"]["commit_p50_s"] / lat["fresh"]["commit_p50_s"]
        targets.append(
            {
                "target": f"commit p50 with {lat['snapshots']:,} snapshots / empty, {backend}",
                "ducklake": lat["big"]["commit_p50_s"],
                "delta": lat["fresh"]["commit_p50_s"],
                "ratio": ratio,
                "goal": f"<= {TARGETS['latency_100k']}",
                "met": ratio <= TARGETS["latency_100k"],
                "unit": "ms",
                "note": "ducklake = big catalog, delta column = fresh catalog",
            }
        )
    return summaries, targets


def print_report(streams: list[Stream], summaries: dict, latency: dict, targets: list, say: Callable) -> None:
    say("")
    say(
        "| stream | kind | Spark | batches x rows | batches/s | rows/s | batch p50 / p99 | commit p50 / p99 "
        "| data files | foreign CPU |"
    )
    say("|---|---|---|---|---:|---:|---:|---:|---:|---:|")
    for s in streams:
        m = summaries[f"{s.kind}:{s.label}"]
        say(
            f"| {s.label} | {s.kind} | {s.spark} | {s.batches:,} x {s.rows:,} | {fmt(m['batches_per_s'], digits=2)} "
            f"| {fmt(m['rows_per_s'], digits=0)} | {fmt(m['batch_p50_s'], 'ms')} / {fmt(m['batch_p99_s'], 'ms')} "
            f"| {fmt(m['commit_p50_s'], 'ms')} / {fmt(m['commit_p99_s'], 'ms')} | {fmt(m.get('data_files'))} "
            f"| {fmt((m['foreign_cpu_share'] or 0) * 100, digits=0)}% |"
        )
    if latency:
        say("")
        say("| backend | catalog | snapshots | commit p50 | commit p99 | batch p50 |")
        say("|---|---|---:|---:|---:|---:|")
        for backend, lat in latency.items():
            for name in ("fresh", "big"):
                r = lat[name]
                say(
                    f"| {backend} | {name} | {r['snapshots']:,} | {fmt(r['commit_p50_s'], 'ms', 2)} | "
                    f"{fmt(r['commit_p99_s'], 'ms', 2)} | {fmt(r['batch_p50_s'], 'ms')} |"
                )
    say("")
    say("| target | DuckLake | Delta / reference | ratio | goal | met |")
    say("|---|---:|---:|---:|---|---|")
    for t in targets:

        def v(x: Any, unit: str = t.get("unit", "")) -> str:
            if unit == "ms":
                return fmt(x, "ms", 2)
            return fmt(x, digits=2 if isinstance(x, float) and x < 100 else 0)

        say(
            f"| {t['target']} | {v(t['ducklake'])} | {v(t['delta'])} | {t['ratio']:.2f}x | {t['goal']} | "
            f"{'yes' if t['met'] else 'NO'} |"
        )


def plot(path: Path, streams: list[Stream], summaries: dict, latency: dict, report: dict) -> str | None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib is not importable: pip install matplotlib"
    colors = {
        "ducklake-sqlite": "#1f77b4",
        "ducklake-postgres": "#2ca02c",
        "delta": "#d62728",
        "ducklake-sqlite-spark4.2": "#9ecae1",
        "delta-defaults": "#ff9896",
    }
    small = [s for s in streams if s.kind == "small"]
    large = [s for s in streams if s.kind == "large"]
    fig, axes = plt.subplots(2, 3, figsize=(17, 9.5))
    fig.suptitle(
        f"Streaming sink benchmark: DuckLake foreachBatch sink vs Delta Lake {report['delta_version']} "
        f"idempotent writes ({report['machine'].get('cpus')} cores, local[2])",
        fontsize=12,
    )

    def bars(ax: Any, group: list[Stream], key: str, title: str, ylabel: str, log: bool = False) -> None:
        labels = [s.label for s in group]
        values = [s.summary()[key] or 0 for s in group]
        ax.bar(range(len(group)), values, color=[colors.get(lbl, "gray") for lbl in labels])
        ax.set_xticks(range(len(group)), labels, rotation=20, ha="right", fontsize=8)
        for i, val in enumerate(values):
            ax.text(i, val, f"{val:,.3g}", ha="center", va="bottom", fontsize=8)
        ax.set_title(title, fontsize=10)
        ax.set_ylabel(ylabel)
        if log:
            ax.set_yscale("log")

    if small:
        bars(
            axes[0][0],
            small,
            "batches_per_s",
            f"small batches ({small[0].rows} rows): batches/s (higher is better)",
            "batches/s",
        )
        ax = axes[0][1]
        width = 0.38
        for i, s in enumerate(small):
            m = s.summary()
            ax.bar(
                i - width / 2,
                m["batch_p50_s"] * 1000,
                width,
                color=colors.get(s.label, "gray"),
                label="whole batch p50" if i == 0 else None,
            )
            ax.bar(
                i + width / 2,
                m["batch_p99_s"] * 1000,
                width,
                color=colors.get(s.label, "gray"),
                alpha=0.5,
                hatch="//",
                label="whole batch p99" if i == 0 else None,
            )
            if s.metrics:
                ax.scatter(
                    [i - width / 2, i + width / 2],
                    [m["commit_p50_s"] * 1000, m["commit_p99_s"] * 1000],
                    marker="_",
                    s=300,
                    color="black",
                    zorder=3,
                    label="catalog commit p50/p99" if i == 0 else None,
                )
        ax.set_xticks(range(len(small)), [s.label for s in small], rotation=20, ha="right", fontsize=8)
        ax.set_yscale("log")
        ax.set_ylabel("ms")
        ax.set_title("small batches: latency per batch (Delta: whole write)", fontsize=10)
        ax.legend(fontsize=7)
        ax = axes[0][2]
        for s in small:
            w = s.wall
            k = 25
            xs = list(range(len(w)))
            med = [statistics.median(w[max(0, i - k) : i + k + 1]) * 1000 for i in xs]
            ax.plot(xs, med, color=colors.get(s.label, "gray"), label=s.label, lw=1.2)
        ax.set_yscale("log")
        ax.set_xlabel("batch")
        ax.set_ylabel("ms (rolling median of 51)")
        ax.set_title("small batches: batch time over the run", fontsize=10)
        ax.legend(fontsize=7)
        files = [s for s in small if s.finish.get("data_files") is not None]
        ax = axes[1][2]
        vals = [max(s.finish["data_files"], 0.5) for s in files]
        ax.bar(range(len(files)), vals, color=[colors.get(s.label, "gray") for s in files])
        for i, s in enumerate(files):
            ax.text(i, vals[i], f"{s.finish['data_files']:,}", ha="center", va="bottom", fontsize=8)
        ax.set_xticks(range(len(files)), [s.label for s in files], rotation=20, ha="right", fontsize=8)
        ax.set_yscale("log")
        ax.set_title("small-batch run: data files written (lower is better)", fontsize=10)
    if large:
        bars(
            axes[1][0],
            large,
            "rows_per_s",
            f"large batches ({large[0].rows:,} rows): rows/s (higher is better)",
            "rows/s",
        )
    ax = axes[1][1]
    if latency:
        names = list(latency)
        width = 0.2
        for j, (which, alpha) in enumerate((("fresh", 1.0), ("big", 0.6))):
            for q, (key, hatch) in enumerate((("commit_p50_s", None), ("commit_p99_s", "//"))):
                xs = [i + (j * 2 + q - 1.5) * width for i in range(len(names))]
                ys = [latency[n][which][key] * 1000 for n in names]
                ax.bar(
                    xs,
                    ys,
                    width,
                    alpha=alpha,
                    hatch=hatch,
                    color="#1f77b4" if which == "fresh" else "#ff7f0e",
                    label=f"{which} catalog {key.split('_')[1]}",
                )
        ax.set_xticks(range(len(names)), names)
        ax.set_ylabel("ms")
        snaps = next(iter(latency.values()))["snapshots"]
        ax.set_title(f"commit latency: empty catalog vs {snaps:,} snapshots", fontsize=10)
        ax.legend(fontsize=7)
    fig.tight_layout(rect=(0, 0, 1, 0.96))
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return None


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--small-batches", type=int, default=2000)
    p.add_argument("--small-rows", type=int, default=100)
    p.add_argument("--small-partitions", type=int, default=2, help="partitions per small batch (default 2)")
    p.add_argument("--large-rows", type=int, default=1_000_000)
    p.add_argument("--large-batches", type=int, default=3)
    p.add_argument("--large-partitions", type=int, default=2)
    p.add_argument("--backends", default="sqlite,postgres")
    p.add_argument("--latency-snapshots", type=int, default=100_000, help="0 skips the latency test")
    p.add_argument("--latency-batches", type=int, default=200)
    p.add_argument("--warmup-batches", type=int, default=20)
    p.add_argument("--block", type=int, default=100, help="small batches per turn when streams alternate")
    p.add_argument(
        "--control-batches",
        type=int,
        default=300,
        help="DuckLake small batches on the Delta worker's Spark 4.2 (SQLite); 0 skips",
    )
    p.add_argument(
        "--delta-defaults-batches",
        type=int,
        default=100,
        help="small batches through Delta with all its defaults (50 snapshot partitions); 0 skips",
    )
    p.add_argument("--delta-version", default=DELTA_VERSION)
    p.add_argument(
        "--delta-python",
        default=str(DELTA_VENV / "bin" / "python"),
        help="interpreter with a pyspark that delta-spark supports (default .cache/venv-delta)",
    )
    p.add_argument(
        "--delta-conf",
        action="append",
        default=None,
        help="Spark conf for the Delta worker (default spark.databricks.delta.snapshotPartitions=2)",
    )
    p.add_argument("--driver-memory", default="3g")
    p.add_argument("--profile-batches", type=int, default=30, help="small batches profiled step by step; 0 skips")
    p.add_argument("--out", default=str(REPO_ROOT / "bench" / "results" / "sink.json"))
    p.add_argument("--plot", default=None, help="PNG path (default: --out with .png)")
    p.add_argument("--work-dir", default=None)
    p.add_argument("--keep-work", action="store_true")
    args = p.parse_args(argv)
    if args.delta_conf is None:
        args.delta_conf = ["spark.databricks.delta.snapshotPartitions=2"]
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    out_path = Path(args.out)
    plot_path = Path(args.plot) if args.plot else out_path.with_suffix(".png")

    def say(msg: str) -> None:
        print(msg, flush=True)

    if not Path(args.delta_python).exists():
        say(f"no interpreter at {args.delta_python}: run `bash bench/fetch_delta.sh --venv` first")
        return 2
    jars = delta_jars(args.delta_version)
    work = Path(args.work_dir or tempfile.mkdtemp(prefix="ducklake-sink-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    say(f"work dir {work}; Delta {args.delta_version} jars: {jars}")
    catalogs = Catalogs(work)
    load = ForeignLoad()
    started = time.perf_counter()
    machine = machine_info()
    workers: list[WorkerProcess] = []
    small_count = max(
        args.small_batches,
        args.latency_batches + 10,
        args.control_batches,
        args.delta_defaults_batches,
        args.profile_batches + 1,
        args.warmup_batches,
        1,
    )
    common = {
        "work_dir": str(work),
        "driver_memory": args.driver_memory,
        "small_rows": args.small_rows,
        "small_partitions": args.small_partitions,
        "small_count": small_count,
        "large_rows": args.large_rows,
        "large_partitions": args.large_partitions,
        "large_count": max(args.large_batches, 1),
    }
    env_dl = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    streams: list[Stream] = []
    latency: dict[str, Any] = {}
    profile: dict[str, Any] = {}
    try:
        say("starting workers (one JVM each)...")
        dl = WorkerProcess("ducklake", sys.executable, {**common, "engine": "ducklake"}, work, env_dl)
        workers.append(dl)
        dw = WorkerProcess(
            "delta",
            args.delta_python,
            {**common, "engine": "delta", "delta_jars": jars, "conf": args.delta_conf},
            work,
            dict(os.environ),
        )
        workers.append(dw)
        ctl = None
        if args.control_batches:
            ctl = WorkerProcess("ducklake-spark4.2", args.delta_python, {**common, "engine": "ducklake"}, work, env_dl)
            workers.append(ctl)
        dd = None
        if args.delta_defaults_batches:
            dd = WorkerProcess(
                "delta-defaults",
                args.delta_python,
                {**common, "engine": "delta", "delta_jars": jars},
                work,
                dict(os.environ),
            )
            workers.append(dd)
        for w in workers:
            say(f"  {w.name}: pyspark {w.info['pyspark']} ({w.info['executable']}), started in {w.start_seconds:.1f} s")
        delta_target = {"name": "delta", "path": str(work / "delta")}

        # --- small batches ---
        if args.small_batches:
            say(f"small batches: {args.small_batches} x {args.small_rows} rows, turns of {args.block}")
            small = [
                Stream(
                    f"ducklake-{b}",
                    dl,
                    catalogs.new(b, "small"),
                    "small",
                    args.small_batches,
                    args.small_rows,
                    "ducklake",
                    dl.info["spark"],
                )
                for b in backends
            ]
            small.append(
                Stream(
                    "delta", dw, delta_target, "small", args.small_batches, args.small_rows, "delta", dw.info["spark"]
                )
            )
            if ctl is not None:
                t = catalogs.new("sqlite", "control")
                small.append(
                    Stream(
                        "ducklake-sqlite-spark4.2",
                        ctl,
                        t,
                        "small",
                        args.control_batches,
                        args.small_rows,
                        "ducklake",
                        ctl.info["spark"],
                    )
                )
            if dd is not None:
                small.append(
                    Stream(
                        "delta-defaults",
                        dd,
                        {"name": "delta-defaults", "path": str(work / "delta-def")},
                        "small",
                        args.delta_defaults_batches,
                        args.small_rows,
                        "delta",
                        dd.info["spark"],
                    )
                )
            for s in small:
                s.warmup_seconds = s.worker.call("warmup", target=s.target, kind="small", batches=args.warmup_batches)[
                    "seconds"
                ]
            say("  warm-up done: " + ", ".join(f"{s.label} {s.warmup_seconds:.1f} s" for s in small))
            take_turns(small, args.block, load, say)
            for s in small:
                s.finish = s.worker.call("finish", target=s.target, kind="small", app=s.app, batches=s.batches)
                say(f"  {s.label}: {s.finish}")
            streams += small

        # --- large batches ---
        if args.large_batches:
            say(f"large batches: {args.large_batches} x {args.large_rows:,} rows, taking turns batch by batch")
            large = [
                Stream(
                    f"ducklake-{b}",
                    dl,
                    catalogs.new(b, "large"),
                    "large",
                    args.large_batches,
                    args.large_rows,
                    "ducklake",
                    dl.info["spark"],
                )
                for b in backends
            ]
            large.append(
                Stream(
                    "delta",
                    dw,
                    {"name": "delta", "path": str(work / "delta-large")},
                    "large",
                    args.large_batches,
                    args.large_rows,
                    "delta",
                    dw.info["spark"],
                )
            )
            for s in large:
                s.warmup_seconds = s.worker.call("warmup", target=s.target, kind="large", batches=1)["seconds"]
            say("  warm-up done: " + ", ".join(f"{s.label} {s.warmup_seconds:.1f} s" for s in large))
            take_turns(large, 1, load, say)
            for s in large:
                s.finish = s.worker.call("finish", target=s.target, kind="large", app=s.app, batches=s.batches)
                say(f"  {s.label}: {s.finish}")
            streams += large

        # --- commit latency with a long history ---
        if args.latency_snapshots:
            for b in backends:
                say(
                    f"commit latency, {b}: {args.latency_batches} batches into an empty catalog and into one with "
                    f"{args.latency_snapshots:,} snapshots, alternating in turns of 25"
                )
                fresh, big = catalogs.new(b, "latfresh"), catalogs.new(b, "latbig")
                f0, t0 = load.read(), time.perf_counter()
                r = dl.call(
                    "latency",
                    fresh=fresh,
                    big=big,
                    snapshots=args.latency_snapshots,
                    batches=args.latency_batches,
                    block=25,
                    warmup=10,
                    rows=args.small_rows,
                )
                elapsed = time.perf_counter() - t0
                entry: dict[str, Any] = {
                    "snapshots": args.latency_snapshots,
                    "populate_seconds": r["populate_seconds"],
                    "populated": r["populated"],
                    "checks": r["checks"],
                    "foreign_cpu_share": (load.read() - f0) / (elapsed * (os.cpu_count() or 1)),
                }
                for name in ("fresh", "big"):
                    res = r["results"][name]
                    entry[name] = {
                        "snapshots": r["checks"][name]["snapshots"],
                        "commit_p50_s": pct(res["commit"], 50),
                        "commit_p99_s": pct(res["commit"], 99),
                        "commit_mean_s": statistics.fmean(res["commit"]),
                        "batch_p50_s": pct(res["wall"], 50),
                        "batch_p99_s": pct(res["wall"], 99),
                        "non_inlined": res.get("modes", []),
                        "commit": [round(x, 6) for x in res["commit"]],
                    }
                latency[b] = entry
                say(
                    f"  populated {r['populated']['count']:,} snapshots in {r['populate_seconds']:.1f} s; commit p50 "
                    f"fresh {entry['fresh']['commit_p50_s'] * 1000:.2f} ms, "
                    f"big {entry['big']['commit_p50_s'] * 1000:.2f} ms; checks {r['checks']}"
                )

        # --- where a small DuckLake batch spends its time ---
        if args.profile_batches:
            for b in backends:
                t = catalogs.new(b, "profile")
                profile[b] = dl.call("profile", target=t, batches=args.profile_batches)
                say(f"profile of one small batch, {b}: " + profile_line(profile[b]))
    finally:
        for w in workers:
            w.close()
        catalogs.drop_all()
        if not args.keep_work:
            shutil.rmtree(work, ignore_errors=True)

    summaries, targets = build_report(streams, latency, args)
    report = {
        "benchmark": "bench/sink_bench.py",
        "created": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "git_commit": git_commit(),
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "machine": {
            **machine,
            "loadavg_end": os.getloadavg(),
            "foreign_cpu_top": load.by_command(10),
        },
        "delta_version": args.delta_version,
        "delta_jars": jars,
        "workers": {w.name: w.info for w in workers},
        "config": dict(vars(args)),
        "notes": [
            "DuckLake commit latency = the catalog transaction (BatchMetrics.commit_latency_s); Delta's = the whole "
            "write call, which includes its Spark job and log commit. batch_p50/p99 is the whole foreachBatch call "
            "for both.",
            "batches/s and rows/s are computed from the sum of the per-batch times of each stream.",
            "No delta-spark release supports Spark 4.3: Delta runs on pyspark 4.2.0 (.cache/venv-delta), DuckLake on "
            "the project's pyspark; ducklake-sqlite-spark4.2 is DuckLake on the Delta worker's Spark, as a control.",
            "The latency test's history is bulk-inserted empty snapshots (populate_snapshots), not sink commits.",
            "foreign_cpu_share = CPU used by processes outside the benchmark / (wall time x cores) while the "
            "stream ran.",
        ],
        "summary": summaries,
        "targets": targets,
        "latency": latency,
        "profile": profile,
        "series": {f"{s.kind}:{s.label}": s.series() for s in streams},
        "total_seconds": time.perf_counter() - started,
    }
    print_report(streams, summaries, latency, targets, say)
    if profile:
        say("")
        say(
            "profile of a small DuckLake batch (p50 ms): "
            + "; ".join(f"{b}: " + profile_line(prof) for b, prof in profile.items())
        )
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text(json.dumps(report, indent=1, default=str) + "\n")
    problem = plot(plot_path, streams, summaries, latency, report)
    say(f"\nwrote {out_path}" + (f" and {plot_path}" if problem is None else f" (no plot: {problem})"))
    say(f"total {report['total_seconds'] / 60:.1f} min")
    bad = [s.label + ":" + s.kind for s in streams if not s.finish.get("ok")]
    if bad:
        say(f"CHECK FAILED for {bad}")
        return 1
    return 0


if __name__ == "__main__":
    if "--worker" in sys.argv[1:]:
        serve_worker(Worker)
    else:
        sys.exit(main())
