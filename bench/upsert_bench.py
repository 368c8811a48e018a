"""Upsert benchmark: DuckLake's upsert sink against Delta Lake's MERGE in ``foreachBatch``, on the same Spark.

A table of ``--rows`` rows (default 10,000,000; id, int, double, decimal, string, timestamp, date, boolean and a
version) is written once per engine. Then micro-batches of ``--keys`` keys each (default 1,000 and 100,000; 90%
existing ids drawn at random over the table, 10% new ids; the same batches for every engine, generated from a seed and
cached before timing) are applied, each timed on the driver as Structured Streaming would call the function:

- DuckLake: ``ducklake_sink("main.t", upsert_on=["id"], order_by="version", app_id=...)(df, batch_id)``: replaced rows
  keep their row id (a delete of the old row, the new row written), new keys inserted, one snapshot per batch;
- Delta: the documented ``foreachBatch`` upsert, ``MERGE INTO delta.`path` t USING batch s ON t.id = s.id WHEN
  MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *`` (Delta 4.4 with deletion vectors off, its default for
  a new path table).

No delta-spark release supports Spark 4.3 (see bench/sink_bench.py), so Delta runs on pyspark 4.2 from
``.cache/venv-delta`` (``bash bench/fetch_delta.sh --venv``), and DuckLake runs on that same Spark 4.2 for the
headline ratio (``ducklake-spark4.2``) as well as on the project's Spark 4.3 (``ducklake``). The streams take turns
in blocks of ``--block`` batches; load from other processes is sampled from /proc and recorded.

"Latency flat as the table grows": 1,000-key batches are also timed on a table of ``--small-table-rows`` rows
(default 1,000,000) and the medians compared with those on the big table, per engine.

Verification after the timings: every engine's table has the same row count, sum of ids and sum of versions (the
batches are applied in the same order everywhere), and DuckLake's replay of its last batch commits nothing.

    bash bench/fetch_delta.sh --venv
    python bench/upsert_bench.py --out bench/results/upsert.json
    python bench/upsert_bench.py --rows 200000 --small-table-rows 20000 --keys 100,2000 --batches 4 --out /tmp/u.json

Targets: DuckLake (Spark 4.2) batches/s >= 2x Delta's MERGE for each batch size; DuckLake's p50 on the big table
<= 1.5x its p50 on the small table.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import (  # bench/_common.py, next to this script
    DELTA_VENV,
    DELTA_VERSION,
    REPO_ROOT,
    Catalogs,
    ForeignLoad,
    WorkerProcess,
    delta_jars,
    git_commit,
    machine_info,
    serve_worker,
    spark_info,
    start_worker_spark,
)

TABLE = "main.t"
TARGETS = {"batches_per_s": 2.0, "growth": 1.5}


def batch_arrow(seed: int, keys: int, existing: int, new_start: int, version: int) -> Any:
    """The batch: ``keys`` distinct ids, 90% drawn from ``0..existing-1``, 10% new from ``new_start``."""
    import numpy as np
    import pyarrow as pa

    rng = np.random.default_rng(seed)
    new = keys // 10
    old: Any = np.unique(rng.integers(0, existing, size=(keys - new) * 2))
    old = rng.permutation(old)[: keys - new]
    ids = np.concatenate([old, np.arange(new_start, new_start + new)]).astype(np.int64)
    return pa.table({"id": ids, **_columns(ids, version)})


def _columns(ids: Any, version: int) -> dict[str, Any]:
    import decimal

    import numpy as np
    import pyarrow as pa

    base = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
    return {
        "i32": pa.array((ids % 1000 + version).astype(np.int32)),
        "amount": pa.array(ids * 0.5 + version),
        "price": pa.array([decimal.Decimal(int(i % 100_000) + version) / 1000 for i in ids], pa.decimal128(18, 3)),
        "name": pa.array([f"name-{i}-{version}" for i in ids]),
        "ts": pa.array([base + dt.timedelta(seconds=int(i) + version) for i in ids], pa.timestamp("us", tz="UTC")),
        "day": pa.array([dt.date(2026, 1, 1) + dt.timedelta(days=int(i % 365)) for i in ids], pa.date32()),
        "flag": pa.array(ids % 2 == 0),
        "version": pa.array(np.full(len(ids), version, dtype=np.int64)),
    }


class Worker:
    def __init__(self, spec: dict[str, Any]) -> None:
        self.spec = spec
        self.engine = spec["engine"]
        self.spark = start_worker_spark(spec, f"pyspark-ducklake-upsert-bench-{spec['name']}")
        self.frames: dict[str, Any] = {}
        self.sinks: dict[str, Any] = {}

    def info(self) -> dict[str, Any]:
        return spark_info(self.spark)

    def dispatch(self, c: dict[str, Any]) -> dict[str, Any]:
        return getattr(self, "cmd_" + c["cmd"])(c)

    def cmd_info(self, c: dict[str, Any]) -> dict[str, Any]:
        return self.info()

    def cmd_create(self, c: dict[str, Any]) -> dict[str, Any]:
        """The starting table of ``rows`` rows (version 0), written the engine's own fastest way."""
        from pyspark.sql import functions as F

        n, target = c["rows"], c["target"]
        df = self.spark.range(n).select(
            F.col("id"),
            (F.col("id") % 1000).cast("int").alias("i32"),
            (F.col("id") * 0.5).alias("amount"),
            ((F.col("id") % 100_000) / 1000).cast("decimal(18,3)").alias("price"),
            F.concat(F.lit("name-"), F.col("id").cast("string"), F.lit("-0")).alias("name"),
            F.timestamp_seconds(F.lit(1767225600) + F.col("id")).alias("ts"),
            F.date_add(F.lit("2026-01-01").cast("date"), (F.col("id") % 365).cast("int")).alias("day"),
            (F.col("id") % 2 == 0).alias("flag"),
            F.lit(0).cast("long").alias("version"),
        )
        t0 = time.perf_counter()
        if self.engine == "ducklake":
            import pyspark_ducklake as pdl

            pdl.write_table(df, TABLE, catalog=target["url"], data_path=target["data_path"], mode="overwrite")
        else:
            df.write.format("delta").mode("overwrite").save(target["path"])
        return {"seconds": time.perf_counter() - t0}

    def cmd_prepare(self, c: dict[str, Any]) -> dict[str, Any]:
        """Build and cache every batch of a stream before any timing."""
        t0 = time.perf_counter()
        for b in c["batches"]:
            df = self.spark.createDataFrame(
                batch_arrow(b["seed"], b["keys"], b["existing"], b["new_start"], b["version"])
            )
            df = df.cache()
            df.count()
            self.frames[f"{c['stream']}:{b['version']}"] = df
        return {"seconds": time.perf_counter() - t0}

    def _sink(self, target: dict[str, Any], app: str) -> Any:
        if app not in self.sinks:
            if self.engine == "ducklake":
                from pyspark_ducklake import ducklake_sink

                self.sinks[app] = ducklake_sink(
                    TABLE,
                    catalog=target["url"],
                    data_path=target["data_path"],
                    app_id=app,
                    upsert_on=["id"],
                    order_by="version",
                )
            else:
                path = target["path"]

                def merge(df: Any, batch_id: int) -> None:
                    # Delta's documented foreachBatch upsert (the docs' "upsert from streaming queries").
                    df.createOrReplaceTempView("batch")
                    df.sparkSession.sql(
                        f"MERGE INTO delta.`{path}` t USING batch s ON t.id = s.id "
                        "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *"
                    )

                self.sinks[app] = merge
        return self.sinks[app]

    def cmd_run(self, c: dict[str, Any]) -> dict[str, Any]:
        """Apply batches ``versions`` of a stream, each timed."""
        sink = self._sink(c["target"], c["app"])
        wall = []
        for v in c["versions"]:
            df = self.frames[f"{c['stream']}:{v}"]
            t0 = time.perf_counter()
            sink(df, v)
            wall.append(time.perf_counter() - t0)
        return {"wall": wall}

    def cmd_check(self, c: dict[str, Any]) -> dict[str, Any]:
        """Rows, sum of ids, sum of versions; DuckLake also replays its last batch (must commit nothing)."""
        from pyspark.sql import functions as F

        target = c["target"]
        out: dict[str, Any] = {}
        if self.engine == "ducklake":
            import pyspark_ducklake as pdl

            sink = self._sink(target, c["app"])
            lake = pdl.connect(target["url"])
            before = lake.current_snapshot_id()
            sink(self.frames[f"{c['stream']}:{c['last']}"], c["last"])
            out["replay_committed"] = lake.current_snapshot_id() != before
            lake.close()
            df = pdl.read_table(self.spark, TABLE, catalog=target["url"])
        else:
            df = self.spark.read.format("delta").load(target["path"])
        row = df.agg(F.count(F.lit(1)).alias("n"), F.sum("id").alias("ids"), F.sum("version").alias("v")).first()
        out.update(rows=int(row["n"]), id_sum=int(row["ids"]), version_sum=int(row["v"] or 0))
        return out


def schedule(args: argparse.Namespace, existing: int, keys: int, first_version: int) -> list[dict[str, Any]]:
    """The batches of a stream: the same for every engine (seeded); ``existing`` ids are in the table (0..n-1), and
    each batch's new ids follow them."""
    out = []
    for i in range(args.warmup + args.batches):
        version = first_version + i
        out.append(
            {
                "seed": args.seed * 1_000_003 + version,
                "keys": keys,
                "existing": existing,
                "new_start": existing,
                "version": version,
            }
        )
        existing += keys // 10
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--rows", type=int, default=10_000_000, help="rows of the big table")
    p.add_argument("--small-table-rows", type=int, default=1_000_000, help="rows of the table growth is judged on")
    p.add_argument("--keys", default="1000,100000", help="keys per batch, comma-separated sizes")
    p.add_argument("--batches", type=int, default=10, help="timed batches per size and engine")
    p.add_argument("--warmup", type=int, default=2, help="untimed batches per engine first")
    p.add_argument("--block", type=int, default=2, help="batches per turn when engines alternate")
    p.add_argument("--backend", default="sqlite", choices=["sqlite", "postgres"])
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--spark43", action=argparse.BooleanOptionalAction, default=True, help="also DuckLake on 4.3")
    p.add_argument("--delta-version", default=DELTA_VERSION)
    p.add_argument("--delta-python", default=str(DELTA_VENV / "bin" / "python"))
    p.add_argument("--driver-memory", default="4g")
    p.add_argument("--out", default=str(REPO_ROOT / "bench" / "results" / "upsert.json"))
    p.add_argument("--work-dir", default=None)
    args = p.parse_args(argv)
    sizes = [int(k) for k in args.keys.split(",") if k.strip()]

    def say(msg: str) -> None:
        print(msg, flush=True)

    if not Path(args.delta_python).exists():
        say(f"no interpreter at {args.delta_python}: run `bash bench/fetch_delta.sh --venv` first")
        return 2
    work = Path(args.work_dir or tempfile.mkdtemp(prefix="ducklake-upsert-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    say(f"work dir {work}")
    catalogs, load, machine, started = Catalogs(work, prefix="ducklake_upsertbench"), ForeignLoad(), machine_info(), 0.0
    started = time.perf_counter()
    common = {"work_dir": str(work), "driver_memory": args.driver_memory}
    env_dl = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    workers: dict[str, WorkerProcess] = {}
    results: dict[str, Any] = {}
    try:
        jars = delta_jars(args.delta_version)
        workers["delta"] = WorkerProcess(
            "delta", args.delta_python, {**common, "engine": "delta", "delta_jars": jars}, work, dict(os.environ)
        )
        workers["ducklake-spark4.2"] = WorkerProcess(
            "ducklake-spark4.2", args.delta_python, {**common, "engine": "ducklake"}, work, env_dl
        )
        if args.spark43:
            workers["ducklake"] = WorkerProcess(
                "ducklake", sys.executable, {**common, "engine": "ducklake"}, work, env_dl
            )
        for name, w in workers.items():
            say(f"  {name}: pyspark {w.info['pyspark']}, started in {w.start_seconds:.1f} s")
        for table_name, rows in (("big", args.rows), ("small", args.small_table_rows)):
            wanted = sizes if table_name == "big" else [min(sizes)]
            targets = {
                name: (
                    catalogs.new(args.backend, f"{name}-{table_name}")
                    if name != "delta"
                    else {"path": str(work / f"delta-{table_name}")}
                )
                for name in workers
            }
            for name, w in workers.items():
                secs = w.call("create", rows=rows, target=targets[name])["seconds"]
                say(f"{table_name} table, {rows:,} rows: {name} wrote it in {secs:.1f} s")
            version, existing = 1, rows
            for keys in wanted:
                stream = f"{table_name}-{keys}"
                plan = schedule(args, existing, keys, version)
                existing = plan[-1]["existing"] + keys // 10
                warm = plan[: args.warmup]
                for name, w in workers.items():
                    w.call("prepare", stream=stream, batches=plan)
                    w.call(
                        "run", stream=stream, target=targets[name], app=stream, versions=[b["version"] for b in warm]
                    )
                timed = [b["version"] for b in plan[args.warmup :]]
                walls: dict[str, list[float]] = {name: [] for name in workers}
                for at in range(0, len(timed), args.block):
                    for name, w in workers.items():
                        load.wait_quiet(10.0, own_too=True)
                        r = w.call(
                            "run", stream=stream, target=targets[name], app=stream, versions=timed[at : at + args.block]
                        )
                        walls[name] += r["wall"]
                checks = {
                    name: w.call("check", stream=stream, target=targets[name], app=stream, last=plan[-1]["version"])
                    for name, w in workers.items()
                }
                same = {(c["rows"], c["id_sum"], c["version_sum"]) for c in checks.values()}
                summary = {
                    name: {"p50_s": statistics.median(v), "batches_per_s": 1 / statistics.median(v), "walls": v}
                    for name, v in walls.items()
                }
                results[stream] = {
                    "rows": rows,
                    "keys": keys,
                    "summary": summary,
                    "checks": checks,
                    "agree": len(same) == 1,
                }
                ratio = summary["ducklake-spark4.2"]["batches_per_s"] / summary["delta"]["batches_per_s"]
                say(
                    f"{stream}: "
                    + ", ".join(f"{n} p50 {s['p50_s'] * 1000:.0f} ms" for n, s in summary.items())
                    + f"; DuckLake/Delta (Spark 4.2) {ratio:.2f}x; tables agree: {len(same) == 1}"
                )
                version += len(plan)
    finally:
        for w in workers.values():
            w.close()
        catalogs.drop_all()
        load.close()
    small_key = min(sizes)
    growth = {
        name: results[f"big-{small_key}"]["summary"][name]["p50_s"]
        / results[f"small-{small_key}"]["summary"][name]["p50_s"]
        for name in workers
    }
    ratios = {
        f"{k}": results[f"big-{k}"]["summary"]["ducklake-spark4.2"]["batches_per_s"]
        / results[f"big-{k}"]["summary"]["delta"]["batches_per_s"]
        for k in sizes
    }
    ok = all(r["agree"] for r in results.values()) and not any(
        c.get("replay_committed") for r in results.values() for c in r["checks"].values()
    )
    report = {
        "benchmark": "upsert",
        "created": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "git_commit": git_commit(),
        "command": " ".join(sys.argv),
        "machine": machine,
        "workers": {n: w.info for n, w in workers.items()},
        "config": vars(args),
        "results": results,
        "ratios_vs_delta_same_spark": ratios,
        "growth_big_over_small_p50": growth,
        "targets": TARGETS,
        "verified": ok,
        "total_seconds": time.perf_counter() - started,
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=1, default=str))
    say(f"ratios DuckLake/Delta (same Spark 4.2): {ratios}; growth big/small p50: {growth}; verified: {ok}")
    say(f"wrote {args.out}")
    return 0 if ok else 1


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        serve_worker(Worker)
    else:
        sys.exit(main())
