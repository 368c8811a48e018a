"""CDC pipeline latency: PostgreSQL commit -> visible in the lake, through Debezium, Kafka and the upsert sink.

The pipeline is the one of ``examples/cdc_postgres_to_lake/cdc_to_lake.py`` (PostgreSQL with ``wal_level=logical`` ->
Debezium's PostgreSQL connector in a Kafka Connect worker -> the Kafka broker -> Spark Structured Streaming ->
``ducklake_sink(upsert_on=[key], delete_when="op = 'd'", order_by="lsn")``), run in this process, with the services
of the project's scripts. For each ``--trigger`` interval, on a fresh database, connector and lake:

1. a warm-up: a random workload until the lake equals PostgreSQL (Debezium's snapshot done, Spark's code paths hot);
2. the measurement: the example's random workload (inserts, updates, deletes, key changes on both tables) at
   ``--rate`` changes per second, and beside it ``--probes`` probe inserts at ``--probe-rate`` per second, each in its
   own transaction; a probe's commit time is the wall clock when PostgreSQL's COMMIT returned;
3. a poller beside them asks the catalog for its newest snapshot every ``--poll`` seconds and notes the wall clock at
   which each snapshot was first visible to a reader;
4. after the lake has every probe, the change feed says which snapshot first held each probe; that snapshot's first
   visible time minus the probe's commit time is its latency (``p50_seconds``...). The same with the snapshot's
   ``_commit_timestamp`` (taken when the sink's catalog transaction starts, so a little early) is reported beside it
   (``by_snapshot_time``).

Where the time goes: the probes' Debezium events are read back from Kafka after each phase, and each probe's latency
is split at Debezium's ``ts_ms`` (when the connector handled the change) and the Kafka record's timestamp (when Kafka
Connect's producer sent it): ``capture`` (commit -> Debezium), ``to_kafka`` (Debezium -> Kafka), ``stream`` (Kafka
-> visible in the lake: the trigger's wait, the Spark micro-batch and the sink's commit).

Both clocks are this machine's. The foreign CPU share counts Kafka and Kafka Connect as foreign (daemons
of the project's scripts, not children of this process): it says how busy the machine was, not who else used it.
Lake tables equal PostgreSQL's at the end (checked).

    make bench-cdc
    python bench/cdc_bench.py --triggers 0,1 --probes 300 --out bench/results/cdc.json

Target (issue #17): a p50 reported; no peer is measured (Delta has no upsert sink to compare against one-to-one; the
upsert benchmark compares the apply step with Delta's MERGE).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from _common import REPO_ROOT, ForeignLoad, git_commit, machine_info, pct  # bench/_common.py, next to this script

EXAMPLE = REPO_ROOT / "examples" / "cdc_postgres_to_lake" / "cdc_to_lake.py"
# Probe ids are negative: the workload's new keys are one above the largest key it saw, which a positive probe id
# inserted before it looked would make collide with later probes.


def probe_id(i: int) -> int:
    return -1 - i


def load_example() -> Any:
    import importlib.util

    spec = importlib.util.spec_from_file_location("cdc_to_lake", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["cdc_to_lake"] = module
    spec.loader.exec_module(module)
    return module


def say(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


def probe_inserts(example: Any, server_url: str, names: Any, count: int, rate: float) -> dict[int, float]:
    """``count`` inserts into ``customers``, one per transaction, ``rate`` per second: id -> commit wall time."""
    import sqlalchemy as sa

    db = example.engine(server_url, names)
    committed: dict[int, float] = {}
    try:
        started = time.monotonic()
        for i in range(count):
            key = probe_id(i)
            with db.begin() as conn:
                conn.execute(sa.text("INSERT INTO customers(id, name) VALUES (:k, :n)"), {"k": key, "n": f"probe {i}"})
            committed[key] = time.time()
            ahead = (i + 1) / rate - (time.monotonic() - started)
            if ahead > 0:
                time.sleep(ahead)
    finally:
        db.dispose()
    return committed


def wait_equal(example: Any, server_url: str, names: Any, args: Any, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while diff := example.differences(server_url, names, args.catalog, args.data_path):
        if time.monotonic() > deadline:
            raise SystemExit(f"the lake did not catch up with PostgreSQL in {timeout:.0f} s: {diff[:3]}")
        time.sleep(0.5)


class SnapshotPoller:
    """Notes when each snapshot first became visible to a reader of the catalog, polling every ``interval`` s."""

    def __init__(self, catalog: str, interval: float) -> None:
        import pyspark_ducklake as pdl

        self.visible_at: dict[int, float] = {}
        self._stop = threading.Event()
        self._lake = pdl.connect(catalog)
        self._last = self._lake.current_snapshot_id()
        self._thread = threading.Thread(target=self._run, args=(interval,), daemon=True)
        self._thread.start()

    def _run(self, interval: float) -> None:
        while not self._stop.wait(interval):
            newest, now = self._lake.current_snapshot_id(), time.time()
            for s in range(self._last + 1, newest + 1):
                self.visible_at[s] = now
            self._last = max(self._last, newest)

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self._lake.close()


def probe_latencies(
    catalog: str, data_path: str, committed: dict[int, float], visible_at: dict[int, float]
) -> tuple[dict[int, float], list[float], dict[str, Any]]:
    """Each probe's first visible time (wall clock, by id) and its latency to its snapshot's timestamp, from the
    change feed, and the snapshots the measurement made."""
    import pyarrow.compute as pc

    import pyspark_ducklake as pdl

    with pdl.connect(catalog, data_path) as lake:
        first = min(s.snapshot_id for s in lake.snapshots())
        feed = lake.table_changes("main.customers", first, columns=["id"])
    inserts = feed.filter(pc.and_(pc.equal(feed["_change_type"], "insert"), pc.less(feed["id"], 0)))
    seen: dict[int, tuple[int, dt.datetime]] = {}
    for row in inserts.to_pylist():
        key, snap, at = row["id"], row["_snapshot_id"], row["_commit_timestamp"]
        if key in committed and (key not in seen or snap < seen[key][0]):
            seen[key] = (snap, at)
    missing = sorted(set(committed) - set(seen))
    if missing:
        raise SystemExit(f"{len(missing)} probes never appeared in the change feed, e.g. {missing[:3]}")
    unseen = sorted({s for s, _ in seen.values()} - set(visible_at))
    if unseen:
        raise SystemExit(f"the poller never saw snapshots {unseen[:5]} (did it stop early?)")
    visible = [visible_at[seen[k][0]] for k in committed]
    stamped = [seen[k][1].timestamp() - committed[k] for k in committed]
    snapshots = sorted({s for s, _ in seen.values()})
    per = round(len(committed) / len(snapshots), 2)
    info = {"snapshots_with_probes": len(snapshots), "probes_per_snapshot": per}
    return dict(zip(committed, visible, strict=True)), stamped, info


def probe_events(example: Any, base: argparse.Namespace, names: Any) -> dict[int, tuple[float, float]]:
    """Each probe's Debezium ``ts_ms`` and Kafka record timestamp (seconds), read back from its topic."""
    from pyspark.sql import functions as F

    spark = example.build_spark(base.spark_jars, "local[2]")
    try:
        events = (
            spark.read.format("kafka")
            .option("kafka.bootstrap.servers", base.bootstrap)
            .option("subscribe", names.topic(example.TABLES[0]))
            .option("startingOffsets", "earliest")
            .load()
        )
        value = F.from_json(F.col("value").cast("string"), "after STRUCT<id: BIGINT>, ts_ms BIGINT")
        rows = (
            events.select(value.alias("v"), F.unix_micros("timestamp").alias("kafka_us"))
            .where(F.col("v.after.id") < 0)
            .select(F.col("v.after.id").alias("id"), F.col("v.ts_ms").alias("ts_ms"), "kafka_us")
            .collect()
        )
    finally:
        spark.stop()
    return {r["id"]: (r["ts_ms"] / 1e3, r["kafka_us"] / 1e6) for r in rows}


def stages(committed: dict[int, float], events: dict[int, tuple[float, float]], visible: dict[int, float]) -> dict:
    """Median seconds of each stage of a probe's way into the lake."""
    keys = [k for k in committed if k in events and k in visible]
    split = {
        "capture": [events[k][0] - committed[k] for k in keys],
        "to_kafka": [events[k][1] - events[k][0] for k in keys],
        "stream": [visible[k] - events[k][1] for k in keys],
    }
    return {f"{name}_p50_seconds": round(statistics.median(v), 3) for name, v in split.items() if v} | {
        "probes_split": len(keys)
    }


def micro_batch_phases() -> dict[str, dict[str, float]]:
    """Per running query, the median of each phase of its recent micro-batches that had rows (Spark's progress
    ``durationMs``: ``addBatch`` is the sink, ``triggerExecution`` the whole batch), in milliseconds."""
    from pyspark.sql import SparkSession

    out: dict[str, dict[str, float]] = {}
    for q in SparkSession.builder.getOrCreate().streams.active:
        recent = [p for p in q.recentProgress if p.numInputRows]
        phases = sorted({k for p in recent for k in p.durationMs})
        out[q.name] = {k: statistics.median(p.durationMs.get(k, 0) for p in recent) for k in phases} | {
            "batches": len(recent)
        }
    return out


def run_phase(example: Any, base: argparse.Namespace, trigger: float, work: Path, index: int) -> dict[str, Any]:
    tag = f"bench{os.getpid()}_{index}"
    names = example.Names(tag)
    lake_dir = work / f"lake-{index}"
    args = example.parse_args(
        [
            "pipeline", "--tag", tag, "--lake", str(lake_dir),
            "--postgres", base.postgres, "--bootstrap", base.bootstrap,
            "--trigger-seconds", str(trigger), "--max-per-batch", str(base.max_per_batch),
            "--inline-limit", str(base.inline_limit),
        ]
    )  # fmt: skip
    args.connect = base.connect
    args.spark_jars = base.spark_jars
    example.create_database(args.postgres, names)
    example.add_connector(args.connect, args.postgres, names)
    stop, done = threading.Event(), {}
    pipeline = threading.Thread(target=lambda: done.setdefault("rc", example.run_pipeline(args, until=stop)))
    try:
        say(f"trigger {trigger:g} s: warm-up")
        pipeline.start()
        example.workload(args.postgres, names, base.warmup_ops, base.rate, 1)
        wait_equal(example, args.postgres, names, args, 600)
        say(f"trigger {trigger:g} s: {base.probes} probes at {base.probe_rate:g}/s beside {base.rate:g} changes/s")
        load = ForeignLoad()
        f0, t0 = load.read(), time.monotonic()
        background_stop = threading.Event()
        counts: dict[str, int] = {}
        background = threading.Thread(
            target=lambda: counts.update(
                example.workload(args.postgres, names, 10**9, base.rate, 2 + index, background_stop)
            ),
            daemon=True,
        )
        poller = SnapshotPoller(args.catalog, base.poll)
        try:
            background.start()
            committed = probe_inserts(example, args.postgres, names, base.probes, base.probe_rate)
            background_stop.set()
            background.join()
            elapsed = time.monotonic() - t0
            foreign = (load.read() - f0) / (elapsed * (os.cpu_count() or 1))
            load.close()
            wait_equal(example, args.postgres, names, args, 600)
            phases = micro_batch_phases()
        finally:
            poller.close()
    finally:
        stop.set()
        pipeline.join()
        example.remove(args.connect, args.postgres, names)  # connector, replication slot, database
    if done.get("rc"):
        raise SystemExit(f"the pipeline failed (trigger {trigger:g} s)")
    visible, stamped, snaps = probe_latencies(args.catalog, args.data_path, committed, poller.visible_at)
    latencies = [visible[k] - committed[k] for k in committed]
    split = stages(committed, probe_events(example, base, names), visible)
    result = {
        "trigger_seconds": trigger,
        "probes": len(latencies),
        "background_changes": counts,
        "measure_seconds": round(elapsed, 1),
        "foreign_cpu_share": round(foreign, 3),
        "p50_seconds": round(statistics.median(latencies), 3),
        "p90_seconds": round(pct(latencies, 90), 3),
        "p99_seconds": round(pct(latencies, 99), 3),
        "max_seconds": round(max(latencies), 3),
        "min_seconds": round(min(latencies), 3),
        "by_snapshot_time": {
            "p50_seconds": round(statistics.median(stamped), 3),
            "p90_seconds": round(pct(stamped, 90), 3),
            "p99_seconds": round(pct(stamped, 99), 3),
        },
        "poll_seconds": base.poll,
        "stages": split,
        "micro_batch_ms": phases,
        **snaps,
    }
    say(
        f"trigger {trigger:g} s: p50 {result['p50_seconds']} s, p90 {result['p90_seconds']} s, "
        f"p99 {result['p99_seconds']} s over {len(latencies)} probes; stages (p50): {split}; "
        f"micro-batches (p50 ms): {phases}"
    )
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--triggers", default="0,1", help="micro-batch intervals to measure, seconds, comma-separated")
    parser.add_argument("--probes", type=int, default=300, help="probe inserts per interval")
    parser.add_argument("--probe-rate", type=float, default=5, help="probe inserts per second")
    parser.add_argument("--rate", type=float, default=100, help="background changes per second")
    parser.add_argument("--warmup-ops", type=int, default=1000, help="changes of the warm-up")
    parser.add_argument("--max-per-batch", type=int, default=5000, help="maxOffsetsPerTrigger of the Kafka source")
    parser.add_argument("--inline-limit", type=int, default=1000, help="the sink's data_inlining_row_limit")
    parser.add_argument("--poll", type=float, default=0.02, help="seconds between the visibility poller's reads")
    parser.add_argument("--out", help="write the results as JSON here")
    args = parser.parse_args(argv)
    example = load_example()
    triggers = [float(x) for x in args.triggers.split(",") if x.strip()]
    started = time.monotonic()
    args.postgres = example.script("postgres", "start")
    args.bootstrap = example.script("kafka", "start")
    args.connect = example.script("debezium", "start", env={"CONNECT_BOOTSTRAP": args.bootstrap})
    args.spark_jars = example.script("kafka", "spark-jars")
    with tempfile.TemporaryDirectory(prefix="cdc-bench-") as tmp:
        phases = [run_phase(example, args, t, Path(tmp), i) for i, t in enumerate(triggers)]
    out = {
        "benchmark": "bench/cdc_bench.py",
        "created": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "git_commit": git_commit(),
        "command": "python " + " ".join([os.path.relpath(__file__, REPO_ROOT), *(argv or sys.argv[1:])]),
        "machine": machine_info(),
        "config": {k: v for k, v in vars(args).items() if k not in ("postgres", "bootstrap", "connect", "spark_jars")},
        "phases": phases,
        "total_seconds": round(time.monotonic() - started, 1),
    }
    if args.out:
        Path(args.out).write_text(json.dumps(out, indent=2) + "\n")
        say(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
