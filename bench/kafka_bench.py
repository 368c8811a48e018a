"""End-to-end Kafka benchmark: Kafka -> Spark Structured Streaming -> DuckLake, against the same pipeline into Delta.

Both pipelines are the same query on the same local broker (``scripts/kafka.sh start``): ``readStream.format("kafka")``
on a topic of keyed JSON events, ``from_json`` to typed columns plus the Kafka partition and offset, 1-second
processing-time triggers, and a ``foreachBatch`` function that adds the micro-batch id as a column and writes:

- DuckLake: ``ducklake_sink("main.<phase>", catalog=..., app_id=...)`` with its defaults (one idempotent snapshot per
  batch; batches up to 1,000 rows inlined into the catalog), on the project's pyspark;
- Delta: ``df.write.format("delta").mode("append").option("txnAppId", app).option("txnVersion", batch_id)
  .save(path)``, Delta's documented idempotent foreachBatch write, with ``spark.databricks.delta.snapshotPartitions=2``
  as in ``bench/sink_bench.py``. No delta-spark release supports Spark 4.3, so Delta runs on pyspark 4.2 from
  ``.cache/venv-delta`` (``bash bench/fetch_delta.sh --venv``), with Spark's Kafka source for that Spark version
  (``PYTHON=.cache/venv-delta/bin/python scripts/kafka.sh spark-jars``).

Each pipeline runs in its own worker process (one JVM, ``local[2]``); they take turns (A B B A ...), never run at
once, and each turn starts with a few untimed events so that it starts warm. Phases:

1. warm-up: ``--warmup-events`` through a table of their own, untimed.
2. latency: ``--events`` per sink produced at ``--rate`` events/s, in ``--rounds`` turns. Each event carries its
   produce time (``produced_at``, epoch microseconds, taken just before ``producer.produce``). A separate process
   polls the table with DuckDB every ``--poll-ms`` (``SELECT max(batch_id), count(*)`` through the ``ducklake``
   extension, or ``delta_scan`` of the ``delta`` extension); an event's latency is the end of the first poll that saw
   its micro-batch minus its produce time: *produce to visible in DuckDB*. The end of its ``foreachBatch`` call gives
   *produce to committed* as well.
3. throughput: ``--max-events`` per sink, produced as fast as the producer goes while the pipeline runs
   (``maxOffsetsPerTrigger`` ``--max-offsets``); throughput = events / (last batch committed - first event produced).
4. exactly once: DuckDB reads every table and must find each produced event once (count, distinct ids, distinct
   Kafka partition/offset) in one commit per micro-batch; then the last batch of each throughput pipeline is run
   again (its ``commits/<n>`` removed from the checkpoint, the query restarted) and must change nothing.

    bash bench/fetch_delta.sh --venv && .venv/bin/pip install duckdb-extension-delta==1.5.5   # once (make does it)
    python bench/kafka_bench.py --out bench/results/kafka.json                   # full run, 6-15 minutes
    python bench/kafka_bench.py --events 6000 --rate 1000 --rounds 1 --max-events 30000 --warmup-events 3000 \\
        --out /tmp/kafka.json                                                      # smoke run, about 4 minutes

Targets (same run, same broker): throughput >= 1.0x Delta's; DuckLake p50 latency (to visible in DuckDB) <= 2 s.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import datetime as dt
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
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
    tail_file,
)

KAFKA_SCRIPT = REPO_ROOT / "scripts" / "kafka.sh"
EVENT_SCHEMA = "id BIGINT, kind STRING, amount DOUBLE, ts TIMESTAMP, produced_at BIGINT"
KINDS = ("click", "view", "buy")
ENGINES = ("ducklake", "delta")
TARGETS = {"throughput": 1.0, "latency_p50_s": 2.0}  # DuckLake / Delta events/s at least; DuckLake p50 at most


# =====================================================================================================================
# Worker side: one SparkSession with Spark's Kafka source, running streaming queries on command.
# =====================================================================================================================


@dataclass
class Pipeline:
    query: Any
    records: list[dict[str, Any]]
    rows: dict[int, int]
    start_args: dict[str, Any]


def _number(value: str) -> Any:
    """A command-line option value as int or float when it is one."""
    for kind in (int, float):
        try:
            return kind(value)
        except ValueError:
            pass
    return value


class Worker:
    def __init__(self, spec: dict[str, Any]) -> None:
        self.spec = spec
        self.engine = spec["engine"]
        self.spark = self._start_spark()
        self.pipelines: dict[str, Pipeline] = {}

    def _start_spark(self) -> Any:
        return start_worker_spark(
            self.spec,
            f"pyspark-ducklake-kafka-bench-{self.engine}",
            jars=[self.spec["kafka_jars"]],
            conf={"spark.sql.shuffle.partitions": "2", "spark.sql.streaming.numRecentProgressUpdates": "100000"},
        )

    def info(self) -> dict[str, Any]:
        return {**spark_info(self.spark), "kafka_jars": [Path(j).name for j in self.spec["kafka_jars"].split(",")]}

    def dispatch(self, c: dict[str, Any]) -> Any:
        return getattr(self, "cmd_" + c["cmd"])(c)

    def _writer(self, target: dict[str, Any], app: str) -> Any:
        """The write of one micro-batch (``(df, batch_id) -> extra metrics``), idempotent per ``(app, batch_id)``."""
        if self.engine == "ducklake":
            from pyspark_ducklake import ducklake_sink

            options = {k: _number(v) for k, v in (kv.split("=", 1) for kv in self.spec.get("ducklake_options", []))}
            sink: Any = ducklake_sink(
                target["table"], catalog=target["url"], data_path=target["data_path"], app_id=app, **options
            )

            def write(df: Any, batch_id: int) -> dict[str, Any]:
                sink(df, batch_id)
                m = sink.last
                return {"mode": m.mode, "rows": m.rows, "files": m.files, "commit_s": m.commit_latency_s}

            return write

        def write_delta(df: Any, batch_id: int) -> dict[str, Any]:
            delta_append(df, target["path"], app, batch_id)
            return {}

        return write_delta

    def cmd_start(self, c: dict[str, Any]) -> dict[str, Any]:
        """Start (or restart from its checkpoint) the pipeline ``label``: Kafka -> typed columns -> foreachBatch."""
        from pyspark.sql import functions as F

        label = c["label"]
        old = self.pipelines.get(label)
        if old is not None and old.query.isActive:
            raise RuntimeError(f"pipeline {label} is running")
        records: list[dict[str, Any]] = old.records if old else []
        write = self._writer(c["target"], c["app"])

        def handle(df: Any, batch_id: int) -> None:
            t0 = time.time()
            extra = write(df.withColumn("batch_id", F.lit(batch_id).cast("long")), batch_id)
            records.append({"batch": batch_id, "start": t0, "end": time.time(), **extra})

        events = (
            self.spark.readStream.format("kafka")
            .option("kafka.bootstrap.servers", c["bootstrap"])
            .option("subscribe", c["topic"])
            .option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", c["max_offsets"])
            .load()
            .select(
                F.from_json(F.col("value").cast("string"), EVENT_SCHEMA).alias("e"),
                F.col("partition").alias("kafka_partition"),
                F.col("offset").alias("kafka_offset"),
            )
            .select("e.*", "kafka_partition", "kafka_offset")
        )
        query = (
            events.writeStream.foreachBatch(handle)
            .option("checkpointLocation", c["checkpoint"])
            .trigger(processingTime=f"{c['trigger_seconds']} seconds")
            .start()
        )
        self.pipelines[label] = Pipeline(query, records, old.rows if old else {}, c)
        return {"id": str(query.id)}

    def cmd_status(self, c: dict[str, Any]) -> dict[str, Any]:
        """How far the pipeline got: the Kafka messages its committed batches consumed, summed over partitions."""
        p = self.pipelines[c["label"]]
        last = p.query.lastProgress
        consumed = 0
        if last is not None:
            end = last["sources"][0]["endOffset"]
            end = json.loads(end) if isinstance(end, str) else end
            consumed = sum(int(o) for parts in (end or {}).values() for o in parts.values())
        failure = p.query.exception()
        return {
            "active": p.query.isActive,
            "consumed": consumed,
            "batches": len(p.records),
            "error": str(failure) if failure is not None else None,
        }

    def cmd_stop(self, c: dict[str, Any]) -> dict[str, Any]:
        p = self.pipelines[c["label"]]
        for prog in p.query.recentProgress:
            if prog["numInputRows"]:
                p.rows[int(prog["batchId"])] = int(prog["numInputRows"])
        p.query.stop()
        failure = p.query.exception()
        return {
            "records": p.records,
            "rows": p.rows,
            "error": str(failure) if failure is not None else None,
        }

    def cmd_replay(self, c: dict[str, Any]) -> dict[str, Any]:
        """Make Spark run the last committed batch again: remove its ``commits/<n>``, restart, wait for it, stop."""
        p = self.pipelines[c["label"]]
        commits = Path(p.start_args["checkpoint"]) / "commits"
        last = max(int(f.name) for f in commits.iterdir() if f.name.isdigit())
        (commits / str(last)).unlink()
        (commits / f".{last}.crc").unlink(missing_ok=True)
        seen = len(p.records)
        self.cmd_start(p.start_args)
        p = self.pipelines[c["label"]]
        deadline = time.monotonic() + c.get("timeout", 300)
        while not any(r["batch"] == last for r in p.records[seen:]):
            if not p.query.isActive or time.monotonic() > deadline:
                raise RuntimeError(f"batch {last} was not run again: {p.query.exception()}")
            time.sleep(0.2)
        while True:  # until Spark has recorded it in its commit log
            prog = p.query.lastProgress
            if prog is not None and int(prog["batchId"]) >= last:
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"batch {last} did not complete")
            time.sleep(0.2)
        p.query.stop()
        return {"batch": last, "record": next(r for r in p.records[seen:] if r["batch"] == last)}

    def cmd_info(self, c: dict[str, Any]) -> dict[str, Any]:
        return self.info()


# =====================================================================================================================
# The DuckDB poller: a process of its own that reads the table every few milliseconds.
# =====================================================================================================================


def duckdb_source(target: dict[str, Any]) -> tuple[Any, str]:
    """A DuckDB connection and the FROM clause that reads the table of ``target`` (DuckLake or Delta)."""
    from pyspark_ducklake.duckdb_attach import attach_sql, connect_duckdb, extension_path, sql_string

    con = connect_duckdb()
    if target["engine"] == "ducklake":
        con.execute(attach_sql(target["duckdb"], target["data_path"], "lake"))
        return con, f"lake.{target['table']}"
    con.execute(f"LOAD {sql_string(extension_path('duckdb_extension_delta', 'delta'))}")
    return con, f"delta_scan({sql_string(target['path'])})"


def poll_main(spec: dict[str, Any]) -> None:
    """Write ``<start> <end> <max batch_id> <rows>`` (epoch seconds) for every poll until terminated."""
    con, source = duckdb_source(spec["target"])
    sql = f"SELECT max(batch_id), count(*) FROM {source}"
    interval = spec["interval"]
    with open(spec["out"], "a", buffering=1) as out:
        while True:
            t0 = time.time()
            try:
                top, rows = con.execute(sql).fetchone()
                out.write(f"{t0:.6f} {time.time():.6f} {-1 if top is None else top} {rows}\n")
            except Exception as e:  # the table does not exist yet
                out.write(f"# {t0:.6f} {type(e).__name__}: {str(e).splitlines()[0][:200]}\n")
            time.sleep(max(0.0, interval - (time.time() - t0)))


class Poller:
    """``kafka_bench.py --poll``: DuckDB reading one table in a loop, its polls in a file."""

    def __init__(self, target: dict[str, Any], out: Path, interval: float, env: dict[str, str]) -> None:
        self.out = out
        spec = {"target": target, "out": str(out), "interval": interval}
        self._err = out.with_suffix(".err").open("w")
        self.proc = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), "--poll", json.dumps(spec)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=self._err,
            env=env,
            cwd=str(REPO_ROOT),
        )

    def polls(self) -> list[tuple[float, float, int, int]]:
        try:
            lines = self.out.read_text().splitlines()
        except OSError:
            return []
        out = []
        for line in lines:
            if line and not line.startswith("#"):
                t0, t1, top, rows = line.split()
                out.append((float(t0), float(t1), int(top), int(rows)))
        return out

    def wait_for(self, rows: int, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            polls = self.polls()
            if polls and polls[-1][3] >= rows:
                return
            if self.proc.poll() is not None:
                raise RuntimeError(f"the DuckDB poller died:\n{tail_file(self.out.with_suffix('.err'))}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"DuckDB did not see {rows:,} rows in {timeout:.0f} s: {polls[-1:]}")
            time.sleep(0.1)

    def stop(self) -> list[tuple[float, float, int, int]]:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
        self._err.close()
        return self.polls()


# =====================================================================================================================
# Orchestrator side: the broker, the producer, the pipelines' turns, statistics, output.
# =====================================================================================================================


def kafka_script(*args: str, python: str | None = None, state: Path | None = None) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("KAFKA_PORT", "KAFKA_CONTROLLER_PORT", "KAFKA_STATE_DIR")}
    if python:
        env["PYTHON"] = python
    if state:
        env["KAFKA_STATE_DIR"] = str(state)
    proc = subprocess.run(
        ["bash", str(KAFKA_SCRIPT), *args], env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL
    )
    if proc.returncode != 0:
        raise RuntimeError(f"scripts/kafka.sh {' '.join(args)} failed:\n{proc.stderr}")
    return proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else ""


@dataclass
class Produced:
    first_id: int
    count: int
    first_t: float
    last_t: float


class EventProducer:
    """Keyed JSON events with their produce time, through one idempotent confluent-kafka producer."""

    def __init__(self, bootstrap: str) -> None:
        from confluent_kafka import Producer

        self.bootstrap = bootstrap
        self.producer = Producer(
            {"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all", "linger.ms": 5}
        )
        self.failed = 0

    def create_topic(self, topic: str, partitions: int) -> None:
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)])[topic].result(30)

    def _delivered(self, err: Any, _msg: Any) -> None:
        if err is not None:
            self.failed += 1

    def send(self, topic: str, first_id: int, count: int, rate: float) -> Produced:
        """Produce ids ``first_id..first_id+count-1`` at ``rate`` per second (0: as fast as possible), then flush."""
        started = time.monotonic()
        first_t = time.time()
        for i in range(count):
            if rate > 0:
                ahead = i / rate - (time.monotonic() - started)
                if ahead > 0:
                    time.sleep(ahead)
            event_id = first_id + i
            now = time.time()
            value = json.dumps(
                {
                    "id": event_id,
                    "kind": KINDS[event_id % 3],
                    "amount": round((event_id * 7919) % 100_000 / 100, 2),
                    "ts": dt.datetime.fromtimestamp(now, dt.timezone.utc).isoformat(timespec="milliseconds"),
                    "produced_at": int(now * 1_000_000),
                }
            )
            while True:
                try:
                    self.producer.produce(topic, key=str(event_id), value=value, on_delivery=self._delivered)
                    break
                except BufferError:  # local queue full: let deliveries drain
                    self.producer.poll(0.05)
            self.producer.poll(0)
        last_t = time.time()
        if self.producer.flush(120) or self.failed:
            raise RuntimeError(f"{self.failed} events failed or were not delivered to {topic}")
        return Produced(first_id, count, first_t, last_t)


@dataclass
class Pipe:
    """One pipeline of one engine in one phase: its topic, table, checkpoint, and what went through it."""

    engine: str
    phase: str
    worker: WorkerProcess
    target: dict[str, Any]
    topic: str
    checkpoint: str
    app: str
    produced: int = 0
    measured: list[Produced] = field(default_factory=list)
    polls: list[tuple[float, float, int, int]] = field(default_factory=list)
    records: list[dict[str, Any]] = field(default_factory=list)
    rows: dict[int, int] = field(default_factory=dict)
    rounds: list[dict[str, Any]] = field(default_factory=list)
    checks: dict[str, Any] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return f"{self.phase}-{self.engine}"

    def start(self, bootstrap: str, args: argparse.Namespace) -> None:
        self.worker.call(
            "start",
            label=self.label,
            topic=self.topic,
            bootstrap=bootstrap,
            target=self.target,
            checkpoint=self.checkpoint,
            app=self.app,
            max_offsets=args.max_offsets,
            trigger_seconds=args.trigger_seconds,
        )

    def wait_committed(self, timeout: float) -> None:
        """Until the pipeline's committed batches have consumed every event produced into its topic."""
        deadline = time.monotonic() + timeout
        while True:
            st = self.worker.call("status", label=self.label)
            if st["consumed"] >= self.produced:
                return
            if st["error"] or not st["active"]:
                raise RuntimeError(f"{self.label} stopped: {st['error']}\n{tail_file(self.worker.log_path)}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"{self.label}: {st['consumed']:,} of {self.produced:,} events in {timeout:.0f} s")
            time.sleep(0.25)

    def stop(self) -> None:
        r = self.worker.call("stop", label=self.label)
        if r["error"]:
            raise RuntimeError(f"{self.label} failed: {r['error']}")
        self.records = r["records"]
        self.rows.update({int(k): v for k, v in r["rows"].items()})

    def produce(self, producer: EventProducer, count: int, rate: float) -> Produced:
        p = producer.send(self.topic, self.produced, count, rate)
        self.produced += count
        return p

    def batch_ends(self) -> dict[int, float]:
        """When each batch's foreachBatch call first returned (a replay's second call is not a commit)."""
        ends: dict[int, float] = {}
        for r in self.records:
            ends.setdefault(r["batch"], r["end"])
        return ends

    def batch_series(self) -> list[dict[str, Any]]:
        """Every foreachBatch call: batch id, seconds, rows (from Spark's progress) and the sink's own figures."""
        return [
            {
                **{k: round(v, 4) if isinstance(v, float) else v for k, v in r.items() if k not in ("start", "end")},
                "at": round(r["start"], 3),
                "seconds": round(r["end"] - r["start"], 4),
                "input_rows": self.rows.get(r["batch"]),
            }
            for r in self.records
        ]

    def poller_target(self) -> dict[str, Any]:
        return {"engine": self.engine, **self.target}


def visible_times(polls: list[tuple[float, float, int, int]]) -> dict[int, float]:
    """The end of the first poll that saw each batch id (batches of one query commit in order)."""
    seen: dict[int, float] = {}
    top = -1
    for _t0, t1, batch, _rows in sorted(polls, key=lambda p: p[1]):
        for b in range(top + 1, batch + 1):
            seen[b] = t1
        top = max(top, batch)
    return seen


def read_table(target: dict[str, Any], engine: str, sql: str) -> list[tuple[Any, ...]]:
    """Run ``sql`` with ``{t}`` replaced by the table, in DuckDB (the same reader for both engines)."""
    con, source = duckdb_source({"engine": engine, **target})
    try:
        return con.execute(sql.format(t=source)).fetchall()
    finally:
        con.close()


def latencies(pipe: Pipe) -> dict[str, Any]:
    """Per-event latency of the measured events: produce to visible in DuckDB, and produce to committed."""
    import numpy as np

    rows = read_table(pipe.target, pipe.engine, "SELECT id, batch_id, produced_at FROM {t}")
    ids = np.array([r[0] for r in rows], dtype=np.int64)
    batches = np.array([r[1] for r in rows], dtype=np.int64)
    produced = np.array([r[2] for r in rows], dtype=np.float64) / 1e6
    mask = np.zeros(len(ids), dtype=bool)
    for m in pipe.measured:
        mask |= (ids >= m.first_id) & (ids < m.first_id + m.count)
    seen, ends = visible_times(pipe.polls), pipe.batch_ends()
    missing = sorted({int(b) for b in batches[mask] if int(b) not in seen or int(b) not in ends})
    if missing:
        raise RuntimeError(f"{pipe.label}: no visibility or commit time for batches {missing[:10]}")
    vis = np.array([seen[int(b)] for b in batches[mask]]) - produced[mask]
    com = np.array([ends[int(b)] for b in batches[mask]]) - produced[mask]
    out: dict[str, Any] = {"events": int(mask.sum()), "batches": len(set(batches[mask].tolist()))}
    for name, values in (("visible", vis), ("committed", com)):
        v = values.tolist()
        out[name] = {
            "p50_s": pct(v, 50),
            "p90_s": pct(v, 90),
            "p99_s": pct(v, 99),
            "max_s": max(v),
            "mean_s": float(np.mean(values)),
        }
    out["cdf_visible"] = [round(pct(vis.tolist(), q), 4) for q in range(101)]
    sizes = [pipe.rows.get(int(b), 0) for b in sorted(set(batches[mask].tolist()))]
    out["rows_per_batch_p50"] = pct([float(s) for s in sizes], 50)
    polls = [t1 - t0 for t0, t1, _, _ in pipe.polls]
    out["poll_query_p50_s"] = pct(polls, 50)
    return out


def verify(pipe: Pipe) -> dict[str, Any]:
    """Every event produced into the pipeline's topic is in its table once, with one commit per micro-batch."""
    n, ids, positions, lo, hi, batches = read_table(
        pipe.target,
        pipe.engine,
        "SELECT count(*), count(DISTINCT id), count(DISTINCT (kafka_partition, kafka_offset)), min(id), max(id), "
        "count(DISTINCT batch_id) FROM {t}",
    )[0]
    out: dict[str, Any] = {
        "produced": pipe.produced,
        "rows": n,
        "distinct_ids": ids,
        "distinct_offsets": positions,
        "min_id": lo,
        "max_id": hi,
        "batches_with_rows": batches,
    }
    if pipe.engine == "ducklake":
        import pyspark_ducklake as pdl

        lake = pdl.connect(pipe.target["url"])
        try:
            infos = [json.loads(s.commit_extra_info) for s in lake.snapshots() if s.commit_extra_info]
        finally:
            lake.close()
        out["commits"] = sum(1 for i in infos if i.get("app_id") == pipe.app)
    else:
        out["commits"] = len(list((Path(pipe.target["path"]) / "_delta_log").glob("*.json")))
    out["ok"] = (n, ids, positions, lo, hi, out["commits"]) == (
        pipe.produced,
        pipe.produced,
        pipe.produced,
        0,
        pipe.produced - 1,
        batches,
    )
    return out


class Bench:
    def __init__(self, args: argparse.Namespace, work: Path, say: Any) -> None:
        self.args, self.work, self.say = args, work, say
        self.load = ForeignLoad()
        self.catalogs = Catalogs(work, prefix="ducklake_kafkabench")
        self.workers: dict[str, WorkerProcess] = {}
        self.pipes: dict[tuple[str, str], Pipe] = {}
        self.broker_state = work / "kafka"
        self.bootstrap = ""
        self.producer: EventProducer | None = None
        self.env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}

    # --- set-up -----------------------------------------------------------------------------------------------------
    def start(self) -> None:
        a = self.args
        jars = delta_jars(a.delta_version)
        kafka_jars = {"ducklake": kafka_script("spark-jars", python=sys.executable)}
        kafka_jars["delta"] = kafka_script("spark-jars", python=a.delta_python)
        self.say(f"Spark's Kafka source: {kafka_jars}")
        self.bootstrap = kafka_script("start", state=self.broker_state)
        self.load.count_as_ours(int((self.broker_state / "broker.pid").read_text()))
        self.say(f"broker {self.bootstrap} (state {self.broker_state})")
        self.producer = EventProducer(self.bootstrap)
        lake = self.catalogs.new(a.backend, "kafka")
        common = {"work_dir": str(self.work), "driver_memory": a.driver_memory}
        specs = {
            "ducklake": (
                sys.executable,
                {
                    **common,
                    "engine": "ducklake",
                    "kafka_jars": kafka_jars["ducklake"],
                    "ducklake_options": a.ducklake_option,
                },
            ),
            "delta": (
                a.delta_python,
                {
                    **common,
                    "engine": "delta",
                    "kafka_jars": kafka_jars["delta"],
                    "delta_jars": jars,
                    "conf": a.delta_conf,
                },
            ),
        }
        self.say("starting the workers (one JVM each)...")
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            futures = {
                e: pool.submit(WorkerProcess, e, py, spec, self.work, self.env, Path(__file__))
                for e, (py, spec) in specs.items()
            }
            for e, f in futures.items():
                self.workers[e] = f.result()
        for e, w in self.workers.items():
            self.say(f"  {e}: pyspark {w.info['pyspark']} ({w.info['executable']}), started in {w.start_seconds:.1f} s")
        for engine in ENGINES:
            for phase in ("warmup", "latency", "throughput"):
                if engine == "ducklake":
                    target = {"table": f"main.{phase}", "url": lake["url"], "duckdb": lake["duckdb"]}
                    target["data_path"] = lake["data_path"]
                else:
                    target = {"path": str(self.work / "delta" / phase)}
                pipe = Pipe(
                    engine,
                    phase,
                    self.workers[engine],
                    target,
                    topic=f"{phase}-{engine}",
                    checkpoint=str(self.work / "checkpoints" / f"{phase}-{engine}"),
                    app=f"kafka-bench-{phase}-{engine}-{uuid.uuid4().hex[:8]}",
                )
                self.producer.create_topic(pipe.topic, a.partitions)
                self.pipes[(engine, phase)] = pipe

    def close(self) -> None:
        for w in self.workers.values():
            w.close()
        self.producer = None  # its client goes with it, before the broker (else it logs reconnect attempts)
        try:
            kafka_script("stop", state=self.broker_state)
        except RuntimeError as e:
            self.say(f"could not stop the broker: {e}")
        self.catalogs.drop_all()

    # --- phases ---------------------------------------------------------------------------------------------------
    def order(self, r: int) -> list[str]:
        return list(ENGINES) if r % 2 == 0 else list(reversed(ENGINES))

    def turn(self, pipe: Pipe) -> None:
        """Start the pipeline and send a few untimed events through it, so the measured part starts warm."""
        assert self.producer is not None
        pipe.start(self.bootstrap, self.args)
        pipe.produce(self.producer, self.args.touch_events, 0)
        pipe.wait_committed(self.args.timeout)

    def warmup(self) -> None:
        assert self.producer is not None
        for engine in ENGINES:
            pipe = self.pipes[(engine, "warmup")]
            t0 = time.perf_counter()
            pipe.start(self.bootstrap, self.args)
            pipe.produce(self.producer, self.args.warmup_events, 0)
            pipe.wait_committed(self.args.timeout)
            pipe.stop()
            self.say(f"  warm-up {engine}: {pipe.produced:,} events in {time.perf_counter() - t0:.1f} s")

    def latency_round(self, pipe: Pipe, count: int) -> None:
        assert self.producer is not None
        self.turn(pipe)
        n_poll = len(pipe.rounds)
        poller = Poller(
            pipe.poller_target(), self.work / f"polls-{pipe.label}-{n_poll}.txt", self.args.poll_ms / 1000, self.env
        )
        try:
            poller.wait_for(pipe.produced, self.args.timeout)
            f0, t0 = self.load.read(), time.perf_counter()
            produced = pipe.produce(self.producer, count, self.args.rate)
            pipe.measured.append(produced)
            pipe.wait_committed(self.args.timeout)
            poller.wait_for(pipe.produced, self.args.timeout)
            elapsed = time.perf_counter() - t0
            foreign = self.load.read() - f0
        finally:
            pipe.polls += poller.stop()
        pipe.stop()
        rate = count / max(produced.last_t - produced.first_t, 1e-9)
        pipe.rounds.append(
            {
                "events": count,
                "produce_rate": rate,
                "seconds": elapsed,
                "foreign_cpu_share": foreign / (elapsed * (os.cpu_count() or 1)),
            }
        )
        self.say(
            f"  latency {pipe.engine}: {count:,} events at {rate:,.0f}/s, all visible {elapsed:.1f} s after the first; "
            f"foreign CPU {pipe.rounds[-1]['foreign_cpu_share']:.0%}"
        )

    def throughput_round(self, pipe: Pipe, count: int) -> None:
        assert self.producer is not None
        self.turn(pipe)
        f0, t0 = self.load.read(), time.perf_counter()
        first_batch = pipe.worker.call("status", label=pipe.label)["batches"]
        produced = pipe.produce(self.producer, count, 0)
        pipe.wait_committed(self.args.timeout)
        elapsed = time.perf_counter() - t0
        foreign = self.load.read() - f0
        pipe.stop()
        batches = pipe.records[first_batch:]
        last_end = max(r["end"] for r in batches)
        seconds = last_end - produced.first_t
        pipe.rounds.append(
            {
                "events": count,
                "seconds": seconds,
                "events_per_s": count / seconds,
                "produce_seconds": produced.last_t - produced.first_t,
                "batches": len(batches),
                "batch_p50_s": pct([r["end"] - r["start"] for r in batches], 50),
                "foreign_cpu_share": foreign / (elapsed * (os.cpu_count() or 1)),
            }
        )
        r = pipe.rounds[-1]
        self.say(
            f"  throughput {pipe.engine}: {count:,} events in {seconds:.1f} s = {r['events_per_s']:,.0f}/s "
            f"({r['batches']} batches, produced in {r['produce_seconds']:.1f} s); foreign CPU "
            f"{r['foreign_cpu_share']:.0%}"
        )

    def replay(self, pipe: Pipe) -> dict[str, Any]:
        before = verify(pipe)
        r = pipe.worker.call("replay", label=pipe.label, timeout=self.args.timeout)
        after = verify(pipe)
        out = {"batch": r["batch"], "record": r["record"], "before": before, "after": after}
        out["ok"] = before == after and before["ok"] and r["record"].get("mode", "skipped") == "skipped"
        return out

    def run(self) -> None:
        a = self.args
        self.say(f"warm-up: {a.warmup_events:,} events per sink")
        self.warmup()
        per_round = a.events // a.rounds
        self.say(f"latency: {per_round * a.rounds:,} events per sink at {a.rate:,.0f}/s in {a.rounds} turns each")
        for r in range(a.rounds):
            for engine in self.order(r):
                self.latency_round(self.pipes[(engine, "latency")], per_round)
        per_round = a.max_events // a.rounds
        self.say(f"throughput: {per_round * a.rounds:,} events per sink, as fast as possible, in {a.rounds} turns")
        for r in range(a.rounds):
            for engine in self.order(r):
                self.throughput_round(self.pipes[(engine, "throughput")], per_round)
        self.say("exactly once: every table read by DuckDB; the last batch of each throughput pipeline run again")
        for pipe in self.pipes.values():
            pipe.checks["verify"] = verify(pipe)
        for engine in ENGINES:
            pipe = self.pipes[(engine, "throughput")]
            pipe.checks["replay"] = self.replay(pipe)
            pipe.checks["verify"] = pipe.checks["replay"]["after"]
        for pipe in self.pipes.values():
            self.say(f"  {pipe.label}: {pipe.checks['verify']}")
            if "replay" in pipe.checks:
                rp = pipe.checks["replay"]
                self.say(f"    replay of batch {rp['batch']}: {rp['record']}; unchanged: {rp['ok']}")

    # --- report -----------------------------------------------------------------------------------------------------
    def summary(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for engine in ENGINES:
            lat = self.pipes[(engine, "latency")]
            thr = self.pipes[(engine, "throughput")]
            events = sum(r["events"] for r in thr.rounds)
            seconds = sum(r["seconds"] for r in thr.rounds)
            out[engine] = {
                "spark": self.workers[engine].info["spark"],
                "latency": latencies(lat),
                "latency_rounds": lat.rounds,
                "throughput_events_per_s": events / seconds,
                "throughput_rounds": thr.rounds,
                "exactly_once": all(
                    p.checks["verify"]["ok"] and p.checks.get("replay", {"ok": True})["ok"]
                    for p in self.pipes.values()
                    if p.engine == engine
                ),
                "checks": {p.phase: p.checks for p in self.pipes.values() if p.engine == engine},
                "batches": {phase: self.pipes[(engine, phase)].batch_series() for phase in ("latency", "throughput")},
            }
        return out


def targets_of(summary: dict[str, Any]) -> list[dict[str, Any]]:
    dl, de = summary["ducklake"], summary["delta"]
    ratio = dl["throughput_events_per_s"] / de["throughput_events_per_s"]
    p50 = dl["latency"]["visible"]["p50_s"]
    return [
        {
            "target": "end-to-end throughput, DuckLake / Delta",
            "ducklake": dl["throughput_events_per_s"],
            "delta": de["throughput_events_per_s"],
            "ratio": ratio,
            "goal": f">= {TARGETS['throughput']}",
            "met": ratio >= TARGETS["throughput"],
        },
        {
            "target": "p50 latency, produce to visible in DuckDB (s)",
            "ducklake": p50,
            "delta": de["latency"]["visible"]["p50_s"],
            "ratio": p50 / de["latency"]["visible"]["p50_s"],
            "goal": f"DuckLake <= {TARGETS['latency_p50_s']} s",
            "met": p50 <= TARGETS["latency_p50_s"],
        },
        {
            "target": "exactly once (counts equal produced, one commit per batch, replay changes nothing)",
            "ducklake": dl["exactly_once"],
            "delta": de["exactly_once"],
            "ratio": None,
            "goal": "both",
            "met": dl["exactly_once"] and de["exactly_once"],
        },
    ]


def print_report(summary: dict[str, Any], targets: list[dict[str, Any]], args: argparse.Namespace, say: Any) -> None:
    say("")
    say(
        f"| sink | Spark | throughput (events/s) | latency to visible p50 / p90 / p99 | to committed p50 / p99 "
        f"| rows per batch at {args.rate:,.0f}/s | exactly once |"
    )
    say("|---|---|---:|---:|---:|---:|---|")
    for engine, s in summary.items():
        v, c = s["latency"]["visible"], s["latency"]["committed"]
        say(
            f"| {engine} | {s['spark']} | {fmt(s['throughput_events_per_s'], digits=0)} "
            f"| {v['p50_s']:.2f} / {v['p90_s']:.2f} / {v['p99_s']:.2f} s | {c['p50_s']:.2f} / {c['p99_s']:.2f} s "
            f"| {fmt(s['latency']['rows_per_batch_p50'], digits=0)} | {'yes' if s['exactly_once'] else 'NO'} |"
        )
    say("")
    say("| target | DuckLake | Delta | ratio | goal | met |")
    say("|---|---:|---:|---:|---|---|")
    for t in targets:
        cells = [
            t["target"],
            *(fmt(t[k], digits=2) if isinstance(t[k], float) else str(t[k]) for k in ("ducklake", "delta")),
            "-" if t["ratio"] is None else f"{t['ratio']:.2f}",
            t["goal"],
            "yes" if t["met"] else "NO",
        ]
        say("| " + " | ".join(cells) + " |")


def plot(path: Path, summary: dict[str, Any], report: dict[str, Any]) -> str | None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib is not importable: pip install matplotlib"
    colors = {"ducklake": "#1f77b4", "delta": "#d62728"}
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(13, 4.8))
    cfg = report["config"]
    fig.suptitle(
        f"Kafka -> Spark -> lake, 1 s triggers ({report['machine'].get('cpus')} cores, local[2]): DuckLake sink vs "
        f"Delta Lake {report['delta_version']} idempotent foreachBatch",
        fontsize=11,
    )
    for engine, s in summary.items():
        cdf = s["latency"]["cdf_visible"]
        ax1.plot(
            cdf, range(len(cdf)), label=f"{engine} (Spark {s['spark']}), p50 {cdf[50]:.2f} s", color=colors[engine]
        )
    ax1.axvline(TARGETS["latency_p50_s"], color="gray", ls=":", lw=1)
    ax1.set_xlabel("seconds from produce to visible in DuckDB")
    ax1.set_ylabel("percent of events")
    ax1.set_title(f"latency at {cfg['rate']:,.0f} events/s", fontsize=10)
    ax1.legend(fontsize=8, loc="lower right")
    labels, values, cols = [], [], []
    for engine, s in summary.items():
        for i, r in enumerate(s["throughput_rounds"]):
            labels.append(f"{engine}\nturn {i + 1}")
            values.append(r["events_per_s"])
            cols.append(colors[engine])
    ax2.bar(range(len(values)), values, color=cols)
    ax2.set_xticks(range(len(values)), labels, fontsize=8)
    for i, v in enumerate(values):
        ax2.text(i, v, f"{v:,.0f}", ha="center", va="bottom", fontsize=8)
    ax2.set_ylabel("events/s, first produced to last committed")
    ax2.set_title(f"throughput, {cfg['max_events']:,} events per sink as fast as possible", fontsize=10)
    fig.tight_layout(rect=(0, 0, 1, 0.93))
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return None


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--events", type=int, default=200_000, help="latency phase: events per sink")
    p.add_argument("--rate", type=float, default=2000, help="latency phase: events produced per second")
    p.add_argument("--max-events", type=int, default=600_000, help="throughput phase: events per sink")
    p.add_argument("--rounds", type=int, default=2, help="turns per sink in each phase (A B B A ...)")
    p.add_argument("--warmup-events", type=int, default=20_000)
    p.add_argument("--touch-events", type=int, default=500, help="untimed events at the start of each turn")
    p.add_argument("--max-offsets", type=int, default=50_000, help="maxOffsetsPerTrigger of the Kafka source")
    p.add_argument("--trigger-seconds", type=float, default=1.0)
    p.add_argument("--partitions", type=int, default=2, help="partitions of each topic")
    p.add_argument("--poll-ms", type=float, default=100, help="DuckDB poll interval")
    p.add_argument("--backend", default="sqlite", choices=("sqlite", "postgres"), help="DuckLake catalog")
    p.add_argument("--driver-memory", default="1536m")
    p.add_argument("--timeout", type=float, default=600, help="seconds any one wait may take")
    p.add_argument("--delta-version", default=DELTA_VERSION)
    p.add_argument("--delta-python", default=str(DELTA_VENV / "bin" / "python"))
    p.add_argument("--delta-conf", action="append", default=None, help="Spark conf for the Delta worker")
    p.add_argument(
        "--ducklake-option", action="append", default=[], help="ducklake_sink option KEY=VALUE (default: none)"
    )
    p.add_argument("--out", default=str(REPO_ROOT / "bench" / "results" / "kafka.json"))
    p.add_argument("--plot", default=None, help="PNG path (default: --out with .png)")
    p.add_argument("--work-dir", default=None)
    p.add_argument("--keep-work", action="store_true")
    args = p.parse_args(argv)
    if args.delta_conf is None:
        args.delta_conf = ["spark.databricks.delta.snapshotPartitions=2"]
    out_path = Path(args.out)
    plot_path = Path(args.plot) if args.plot else out_path.with_suffix(".png")

    def say(msg: str) -> None:
        print(msg, flush=True)

    if not Path(args.delta_python).exists():
        say(f"no interpreter at {args.delta_python}: run `bash bench/fetch_delta.sh --venv` first")
        return 2
    work = Path(args.work_dir or tempfile.mkdtemp(prefix="ducklake-kafka-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    say(f"work dir {work}")
    started = time.perf_counter()
    machine = machine_info()
    bench = Bench(args, work, say)
    try:
        bench.start()
        bench.run()
        summary = bench.summary()
    finally:
        bench.close()
        if not args.keep_work:
            shutil.rmtree(work, ignore_errors=True)
    targets = targets_of(summary)
    report = {
        "benchmark": "bench/kafka_bench.py",
        "created": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "git_commit": git_commit(),
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "machine": {
            **machine,
            "loadavg_end": os.getloadavg(),
            "foreign_cpu_top": bench.load.by_command(10),
        },
        "delta_version": args.delta_version,
        "workers": {e: w.info for e, w in bench.workers.items()},
        "config": dict(vars(args)),
        "notes": [
            "latency visible = end of the first DuckDB poll that saw the event's micro-batch - produced_at (set by "
            "the producer just before produce()); committed = end of the batch's foreachBatch call - produced_at.",
            "throughput = events of a turn / (last batch of the turn committed - first event of the turn produced), "
            "summed over turns.",
            "No delta-spark release supports Spark 4.3: Delta runs on pyspark 4.2 (.cache/venv-delta) with Spark's "
            "Kafka source for 4.2; DuckLake on the project's pyspark.",
            "foreign_cpu_share = CPU used by processes outside the benchmark (the broker counts as ours) / "
            "(wall time x cores) during the turn.",
        ],
        "summary": summary,
        "targets": targets,
        "total_seconds": time.perf_counter() - started,
    }
    print_report(summary, targets, args, say)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text(json.dumps(report, indent=1, default=str) + "\n")
    problem = plot(plot_path, summary, report)
    say(f"\nwrote {out_path}" + (f" and {plot_path}" if problem is None else f" (no plot: {problem})"))
    say(f"total {report['total_seconds'] / 60:.1f} min")
    if not targets[-1]["met"]:
        say("CHECK FAILED: exactly once does not hold")
        return 1
    return 0


if __name__ == "__main__":
    if "--worker" in sys.argv[1:]:
        serve_worker(Worker)
    elif "--poll" in sys.argv[1:]:
        # Every poll is on disk already (line-buffered): leave at once, without DuckDB's teardown.
        signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
        poll_main(json.loads(sys.argv[sys.argv.index("--poll") + 1]))
    else:
        sys.exit(main())
