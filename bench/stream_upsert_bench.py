"""Large upsert micro-batches through ``writeStream``: the memory of the driver side, DuckLake beside Delta's MERGE.

One micro-batch of ``N`` rows (90% existing ids drawn at random, 10% new; id, int, double, decimal, string,
timestamp, date, boolean and a version) is upserted into a table of ``N`` rows (data files of 1M rows), for N in
``--rows`` (default 1M and 10M), by:

- DuckLake: ``df.writeStream.format("ducklake").option("upsertOn", "id").option("orderBy", "version")`` (Spark 4.3,
  the project's venv): the tasks pair their rows with the table and write them, ``commit()`` gets keys only;
- Delta: the documented ``foreachBatch`` upsert, ``MERGE INTO ... WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED
  THEN INSERT *`` (Delta 4.4 on Spark 4.2 from ``.cache/venv-delta``: ``bash bench/fetch_delta.sh --venv``).

Both read the batch with Spark's Parquet file source in one micro-batch (``availableNow``), on ``local[2]`` with a
2 GiB driver heap. While the stream runs, every process of the worker's tree is sampled every 20 ms (``VmRSS`` from
/proc) and sorted by what it is:

- ``commit``: DuckLake's ``commit()`` worker (``pyspark.sql.worker.python_streaming_sink_runner``), the only
  driver-side process that sees the batch's data: the number this benchmark is about;
- ``jvm``: the Spark JVM; in local mode it holds the driver *and* the executors, so for Delta, whose MERGE runs in
  the JVM, it is an upper bound of Delta's driver;
- ``tasks``: Python task workers (DuckLake's executors), summed;
- ``driver_python``: the PySpark driver process itself.

Peaks are per class over the stream; the report also gives the commit worker's peak per key. Results go to
``--out`` (JSON) and are summarised on stdout.

    bash bench/fetch_delta.sh --venv
    python bench/stream_upsert_bench.py --out bench/results/stream_upsert.json
    python bench/stream_upsert_bench.py --rows 200000 --engines ducklake --out /tmp/s.json   # a quick look
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from _common import DELTA_VENV, DELTA_VERSION, REPO_ROOT, delta_jars, git_commit, machine_info

CLASSES = ("commit", "jvm", "tasks", "driver_python")
FILE_ROWS = 1_000_000  # rows per data file of the starting table (the commit holds one file's deletes at a time)


def write_inputs(root: Path, rows: int, seed: int = 7) -> None:
    """The starting table (version 0) and the batch (version 1) as Parquet, written once per size."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    def columns(ids: Any, version: int) -> pa.Table:
        return pa.table(
            {
                "id": pa.array(ids, pa.int64()),
                "i32": pa.array((ids % 1000).astype(np.int32)),
                "amount": pa.array(ids * 0.5),
                "price": pa.array((ids % 100_000).astype(np.int32)).cast(pa.decimal128(18, 3)),
                "name": pa.array(np.char.add("name-", ids.astype(str))),
                "ts": pa.array((1_767_225_600 + ids) * 1_000_000, pa.timestamp("us", tz="UTC")),
                "day": pa.array((20_454 + ids % 365).astype(np.int32), pa.date32()),
                "flag": pa.array(ids % 2 == 0),
                "version": pa.array(np.full(len(ids), version, dtype=np.int64)),
            }
        )

    step = 1_000_000
    (root / "table").mkdir(parents=True, exist_ok=True)
    (root / "batch").mkdir(parents=True, exist_ok=True)
    for i, start in enumerate(range(0, rows, step)):
        ids = np.arange(start, min(start + step, rows), dtype=np.int64)
        pq.write_table(columns(ids, 0), root / "table" / f"part-{i:04d}.parquet")
    rng = np.random.default_rng(seed)
    existing = rng.choice(rows, size=rows - rows // 10, replace=False).astype(np.int64)
    batch = np.concatenate([existing, np.arange(rows, rows + rows // 10, dtype=np.int64)])
    rng.shuffle(batch)
    for i, start in enumerate(range(0, rows, step)):
        pq.write_table(columns(batch[start : start + step], 1), root / "batch" / f"part-{i:04d}.parquet")


# --- the worker (one engine, one size) ----------------------------------------------------------------------------


def worker(engine: str, inputs: Path, work: Path) -> None:
    sys.path.insert(0, str(REPO_ROOT / "bench"))
    from _common import start_worker_spark

    spec = {"engine": engine, "work_dir": str(work), "name": engine, "driver_memory": "2g"}
    if engine == "delta":
        spec["delta_jars"] = delta_jars(DELTA_VERSION)
    spark = start_worker_spark(spec, f"stream-upsert-{engine}")
    table = spark.read.parquet(str(inputs / "table"))
    t0 = time.perf_counter()
    if engine == "ducklake":
        import pyspark_ducklake as pdl

        url, data = f"sqlite:///{work / 'lake.sqlite'}", str(work / "data") + "/"
        pdl.write_table(
            table, "main.t", catalog=url, data_path=data, mode="overwrite", options={"targetFileRows": FILE_ROWS}
        )
    else:
        table.write.format("delta").mode("overwrite").save(str(work / "delta"))
    created = time.perf_counter() - t0
    source = spark.readStream.schema(table.schema).parquet(str(inputs / "batch"))
    print("PHASE stream", flush=True)
    t0 = time.perf_counter()
    if engine == "ducklake":
        query = (
            source.writeStream.format("ducklake")
            .option("catalog", url)
            .option("dataPath", data)
            .option("upsertOn", "id")
            .option("orderBy", "version")
            .option("checkpointLocation", str(work / "ck"))
            .trigger(availableNow=True)
            .start("main.t")
        )
    else:
        path = str(work / "delta")

        def merge(df: Any, batch_id: int) -> None:
            df.createOrReplaceTempView("batch")
            df.sparkSession.sql(
                f"MERGE INTO delta.`{path}` t USING batch s ON t.id = s.id "
                "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *"
            )

        query = (
            source.writeStream.foreachBatch(merge)
            .option("checkpointLocation", str(work / "ck"))
            .trigger(availableNow=True)
            .start()
        )
    query.awaitTermination()
    streamed = time.perf_counter() - t0
    print("PHASE done", flush=True)
    if query.exception() is not None:
        raise RuntimeError(str(query.exception()))
    if engine == "ducklake":
        check = spark.read.format("ducklake").option("catalog", url).option("dataPath", data).load("main.t")
    else:
        check = spark.read.format("delta").load(str(work / "delta"))
    rows, versions = check.selectExpr("count(*)", "sum(version)").first()
    print("RESULT " + json.dumps({"create_s": created, "stream_s": streamed, "rows": rows, "sum_version": versions}))
    spark.stop()


# --- the orchestrator ---------------------------------------------------------------------------------------------


def classify(pid: int) -> str | None:
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return None
    if "java" in cmd.split(" ")[0]:
        return "jvm"
    if "python_streaming_sink_runner" in cmd:
        return "commit"
    if "pyspark.daemon" in cmd or "pyspark.worker" in cmd:
        return "tasks"
    return None


def tree(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            ppid = int(Path(f"/proc/{d}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(d))
    out, todo = [], [root]
    while todo:
        p = todo.pop()
        out.append(p)
        todo += children.get(p, [])
    return out


def rss_mib(pid: int, field: str = "VmRSS") -> float:
    """A process's resident memory now (``VmRSS``) or its peak since it started (``VmHWM``), in MiB."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


class Sampler(threading.Thread):
    def __init__(self, root: int) -> None:
        super().__init__(daemon=True)
        self.root, self.on, self.stop = root, False, False
        self.peaks = dict.fromkeys(CLASSES, 0.0)

    def run(self) -> None:
        while not self.stop:
            if self.on:
                now = dict.fromkeys(CLASSES, 0.0)
                for pid in tree(self.root):
                    kind = "driver_python" if pid == self.root else classify(pid)
                    if kind == "commit":  # its own peak, which no sampling interval can miss
                        now[kind] = max(now[kind], rss_mib(pid, "VmHWM"))
                    elif kind is not None:
                        now[kind] += rss_mib(pid)
                for k in CLASSES:
                    self.peaks[k] = max(self.peaks[k], now[k])
            time.sleep(0.02)


def run_one(engine: str, inputs: Path, work: Path) -> dict[str, Any]:
    python = str(DELTA_VENV / "bin" / "python") if engine == "delta" else sys.executable
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
    cmd = [python, __file__, "--worker", engine, "--inputs", str(inputs), "--work", str(work)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=open(work / "stderr.log", "w"), text=True, env=env)
    sampler = Sampler(proc.pid)
    sampler.start()
    result: dict[str, Any] = {}
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith("PHASE stream"):
            sampler.on = True
        elif line.startswith("PHASE done"):
            sampler.on = False
        elif line.startswith("RESULT "):
            result = json.loads(line[7:])
    proc.wait()
    sampler.stop = True
    if proc.returncode != 0:
        tail = (work / "stderr.log").read_text()[-3000:]
        raise RuntimeError(f"{engine} worker failed ({proc.returncode}):\n{tail}")
    return {**result, "peak_mib": {k: round(v, 1) for k, v in sampler.peaks.items()}}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", default="1000000,10000000", help="batch (and table) sizes, comma-separated")
    p.add_argument("--engines", default="ducklake,delta")
    p.add_argument("--out", default=None)
    p.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    p.add_argument("--inputs", default=None, help=argparse.SUPPRESS)
    p.add_argument("--work", default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        worker(args.worker, Path(args.inputs), Path(args.work))
        return 0
    engines = [e.strip() for e in args.engines.split(",") if e.strip()]
    if "delta" in engines and not (DELTA_VENV / "bin" / "python").exists():
        p.error("Delta runs from .cache/venv-delta: run `bash bench/fetch_delta.sh --venv` first")
    report: dict[str, Any] = {"commit": git_commit(), "machine": machine_info(), "runs": []}
    for rows in [int(x) for x in args.rows.split(",")]:
        base = Path(tempfile.mkdtemp(prefix=f"stream-upsert-{rows}-"))
        try:
            write_inputs(base / "inputs", rows)
            for engine in engines:
                work = base / engine
                work.mkdir()
                run = {"engine": engine, "rows": rows, **run_one(engine, base / "inputs", work)}
                if engine == "ducklake":
                    run["commit_bytes_per_key"] = round(run["peak_mib"]["commit"] * 2**20 / rows, 1)
                report["runs"].append(run)
                print(json.dumps(run), flush=True)
        finally:
            shutil.rmtree(base, ignore_errors=True)
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
