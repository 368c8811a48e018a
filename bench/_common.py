"""Helpers shared by the benchmarks: worker processes, foreign CPU load, catalogs, Delta jars, statistics.

The Spark-facing side of each benchmark runs in worker processes, one SparkSession each, driven by JSON lines
(:class:`WorkerProcess` on the orchestrator's side, :func:`serve_worker` on the worker's): Delta Lake has no release
for the project's Spark, so its worker runs on another interpreter (``.cache/venv-delta``, ``bench/fetch_delta.sh``).
"""

from __future__ import annotations

import json
import math
import os
import platform
import subprocess
import sys
import threading
import time
import traceback
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
DELTA_VENV = REPO_ROOT / ".cache" / "venv-delta"
DELTA_JARS_DIR = REPO_ROOT / ".cache" / "jars" / "delta"
DELTA_VERSION = "4.4.0"


def start_worker_spark(
    spec: dict[str, Any], app_name: str, jars: list[str] | None = None, conf: dict[str, str] | None = None
) -> Any:
    """The SparkSession of a benchmark worker.

    ``spec["master"]`` (default ``local[2]``) and ``spec["driver_memory"]`` (default 2g), UI off, UTC, scratch
    folders in ``spec["work_dir"]`` named after ``spec["name"]``; with ``spec["engine"] == "delta"`` Delta's jars
    (``spec["delta_jars"]``) and session extension; ``jars`` and ``conf`` added, then ``spec["conf"]``
    (``KEY=VALUE`` strings) last.
    """
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    s = spec
    work = Path(s["work_dir"])
    b = (
        SparkSession.builder.master(s.get("master", "local[2]"))
        .appName(app_name)
        .config("spark.driver.memory", s.get("driver_memory", "2g"))
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.warehouse.dir", str(work / f"warehouse-{s['name']}"))
        .config("spark.local.dir", str(work / f"spark-local-{s['name']}"))
    )
    all_jars = list(jars or [])
    if s["engine"] == "delta":
        all_jars.append(s["delta_jars"])
        b = b.config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension").config(
            "spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog"
        )
    if all_jars:
        b = b.config("spark.jars", ",".join(all_jars))
    for key, value in (conf or {}).items():
        b = b.config(key, value)
    for kv in s.get("conf", []):
        key, _, value = kv.partition("=")
        b = b.config(key, value)
    spark = b.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def spark_info(spark: Any) -> dict[str, Any]:
    """Versions and the relevant conf of a worker's SparkSession, for the report."""
    import pyarrow
    import pyspark

    return {
        "python": sys.version.split()[0],
        "executable": sys.executable,
        "pyspark": pyspark.__version__,
        "spark": spark.version,
        "pyarrow": pyarrow.__version__,
        "conf": {
            k: v
            for k, v in spark.sparkContext.getConf().getAll()
            if k.startswith(("spark.databricks", "spark.master", "spark.driver.memory", "spark.jars"))
        },
    }


def delta_append(df: Any, path: str, app: str, batch_id: int) -> None:
    """Delta's documented idempotent foreachBatch write: a ``(txnAppId, txnVersion)`` already committed is skipped."""
    df.write.format("delta").mode("append").option("txnAppId", app).option("txnVersion", batch_id).save(path)


def serve_worker(make_worker: Callable[[dict[str, Any]], Any]) -> None:
    """The worker side of :class:`WorkerProcess`: build the worker from the first JSON line (its spec), then read
    one JSON command per line from stdin and answer one JSON line on the original stdout.

    The worker has ``info()``, ``dispatch(command)`` and a ``spark`` session, stopped at the end.
    """
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # anything else printed (and the JVM's stdout) goes to stderr
    sys.stdout = sys.stderr
    spec = json.loads(sys.stdin.readline())
    try:
        worker = make_worker(spec)
        proto.write(json.dumps({"ok": True, "info": worker.info()}) + "\n")
    except BaseException:
        proto.write(json.dumps({"ok": False, "error": traceback.format_exc()}) + "\n")
        return
    for line in sys.stdin:
        c = json.loads(line)
        if c["cmd"] == "quit":
            break
        try:
            result = worker.dispatch(c)
            proto.write(json.dumps({"ok": True, "result": result}, default=str) + "\n")
        except BaseException:
            proto.write(json.dumps({"ok": False, "error": traceback.format_exc()}) + "\n")
    worker.spark.stop()


class _Sampler:
    """The sampling itself (see :class:`ForeignLoad`), in the sampler process: every ``interval`` seconds, the CPU of
    every process in ``/proc``, split into the process tree of ``root`` (the benchmark's own) and the rest."""

    def __init__(self, root: int, interval: float) -> None:
        self.root = root
        self.interval = interval
        self.cpu_seconds = 0.0
        self.own_cpu_seconds = 0.0  # CPU of this benchmark's process tree: driver, JVM, Python workers
        self.own_by_command: dict[str, float] = {}  # the same by command name ("java", "python", ...)
        self.by_process: dict[str, float] = {}
        # processes the benchmark started outside its own tree (a daemon such as the Kafka broker): ours too
        self.also_ours: set[int] = set()
        self._last: dict[int, float] | None = None
        self._tick = os.sysconf("SC_CLK_TCK")
        self._lock = threading.Lock()
        self.sample()
        threading.Thread(target=self._run, daemon=True, name="foreign-load").start()

    def _processes(self) -> dict[int, tuple[int, str, float]]:
        """pid -> (ppid, command name, user + system CPU seconds)."""
        out = {}
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat") as f:
                    raw = f.read()
            except OSError:
                continue
            comm = raw[raw.index("(") + 1 : raw.rindex(")")]
            rest = raw[raw.rindex(")") + 2 :].split()
            out[int(entry)] = (int(rest[1]), comm, (int(rest[11]) + int(rest[12])) / self._tick)
        return out

    def sample(self) -> None:
        with self._lock:
            self._sample_locked()

    def _sample_locked(self) -> None:
        procs = self._processes()
        procs.pop(os.getpid(), None)  # the sampler is neither the benchmark's nor foreign
        children: dict[int, list[int]] = {}
        for pid, (ppid, *_) in procs.items():
            children.setdefault(ppid, []).append(pid)
        ours, todo = set(), [self.root, *self.also_ours]
        while todo:
            pid = todo.pop()
            ours.add(pid)
            todo.extend(children.get(pid, ()))
        cpu = {pid: c for pid, (_, _, c) in procs.items()}
        if self._last is not None:
            for pid, c in cpu.items():
                # CPU since the last sample (all of it for a process started since); a process that exits
                # loses at most one interval.
                delta = c - self._last.get(pid, 0.0)
                if delta <= 0:
                    continue
                ppid, comm, _ = procs[pid]
                if pid in ours:
                    self.own_cpu_seconds += delta
                    self.own_by_command[comm] = self.own_by_command.get(comm, 0.0) + delta
                # Kernel threads (children of kthreadd, pid 2) mostly do this benchmark's own I/O, and the
                # PostgreSQL server also serves this benchmark's catalog: neither counts as foreign.
                elif pid != 2 and ppid != 2 and not comm.startswith("postgres"):
                    self.cpu_seconds += delta
                    key = f"{comm}:{pid}"
                    self.by_process[key] = self.by_process.get(key, 0.0) + delta
        self._last = cpu

    def _run(self) -> None:
        while True:  # until the process ends: its stdin closed (see _serve_sampler)
            time.sleep(self.interval)
            self.sample()

    def answer(self, request: dict[str, Any]) -> Any:
        cmd = request["cmd"]
        if cmd == "ours":
            with self._lock:
                self.also_ours.add(int(request["pid"]))
            return None
        if cmd == "own":
            self.sample()
        with self._lock:
            if cmd == "now":
                return self.cpu_seconds
            if cmd == "own":
                return [self.own_cpu_seconds, dict(self.own_by_command)]
            if cmd == "snapshot":
                return dict(self.by_process)
        raise ValueError(f"unknown sampler request {request!r}")


def _serve_sampler(root: int, interval: float) -> None:
    """The sampler process: one JSON request per line on stdin, one JSON answer per line; ends with stdin."""
    sampler = _Sampler(root, interval)
    for line in sys.stdin:
        print(json.dumps(sampler.answer(json.loads(line))), flush=True)


class ForeignLoad:
    """CPU used by processes outside this benchmark's process tree, sampled from /proc in a sampler process.

    The machine may be shared (other test runs start their own Spark); a measurement taken while something else
    burns CPU is not comparable, so each one records the foreign CPU share and contended ones are redone.
    PostgreSQL server processes are not counted as foreign: they serve this benchmark's own catalog too.

    The sampling runs in a process of its own (its CPU counted neither as ours nor as foreign), not in a thread of
    the benchmark: a thread parsing ``/proc`` every quarter second holds the GIL the measured Python code needs.
    """

    def __init__(self, interval: float = 0.25) -> None:
        self.available = os.path.isdir("/proc/self") and hasattr(os, "sysconf")
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[str] | None = None
        if self.available:
            self._proc = subprocess.Popen(
                [sys.executable, str(Path(__file__).resolve()), "--sample-load", str(os.getpid()), str(interval)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
                bufsize=1,
            )

    def _ask(self, cmd: str, **kw: Any) -> Any:
        assert self._proc and self._proc.stdin and self._proc.stdout
        with self._lock:
            self._proc.stdin.write(json.dumps({"cmd": cmd, **kw}) + "\n")
            self._proc.stdin.flush()
            line = self._proc.stdout.readline()
        if not line:
            raise RuntimeError("the CPU sampler process ended")
        return json.loads(line)

    def count_as_ours(self, pid: int) -> None:
        """Count ``pid`` and its children as the benchmark's own (a daemon it started, such as a Kafka broker)."""
        if self.available:
            self._ask("ours", pid=pid)

    def now(self) -> float:
        """Foreign CPU seconds so far."""
        return float(self._ask("now")) if self.available else 0.0

    def read(self) -> float:
        """Foreign CPU seconds so far (the same as :meth:`now`)."""
        return self.now()

    def snapshot(self) -> dict[str, float]:
        """Foreign CPU seconds so far by ``"command:pid"``."""
        return dict(self._ask("snapshot")) if self.available else {}

    def by_command(self, n: int = 10) -> dict[str, float]:
        """Foreign CPU seconds so far by command name, the ``n`` busiest."""
        totals: dict[str, float] = {}
        for key, v in self.snapshot().items():
            comm = key.rsplit(":", 1)[0]
            totals[comm] = totals.get(comm, 0.0) + v
        return {k: round(v, 2) for k, v in sorted(totals.items(), key=lambda kv: -kv[1])[:n]}

    def own(self) -> tuple[float, dict[str, float]]:
        """CPU seconds of this benchmark's own processes so far, in total and by command name (sampled now)."""
        if not self.available:
            return 0.0, {}
        total, by_command = self._ask("own")
        return float(total), dict(by_command)

    def top(self, since: dict[str, float], n: int = 3) -> dict[str, float]:
        """The foreign processes that used the most CPU seconds since the :meth:`snapshot` ``since``."""
        deltas = {k: v - since.get(k, 0.0) for k, v in self.snapshot().items()}
        return {k: round(v, 2) for k, v in sorted(deltas.items(), key=lambda kv: -kv[1])[:n] if v >= 0.05}

    def wait_quiet(
        self, max_wait: float, window: float = 3.0, threshold: float = 0.1, *, own_too: bool = False
    ) -> float:
        """Wait until foreign processes used < ``threshold`` cores over ``window`` seconds; returns the wait.

        ``own_too``: this benchmark's own processes as well, so a JVM still collecting garbage or finishing a job
        after the previous measurement (it runs on, on the same cores) does not slow the next one.
        """
        if not self.available:
            return 0.0

        def used() -> float:
            return self.now() + (self.own()[0] if own_too else 0.0)

        t0 = time.perf_counter()
        while True:
            before = used()
            time.sleep(window)
            if (used() - before) / window < threshold or time.perf_counter() - t0 >= max_wait:
                return time.perf_counter() - t0 - window

    def close(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            assert self._proc.stdin
            self._proc.stdin.close()
            try:
                self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._proc.kill()


@dataclass
class Measurement:
    seconds: float
    foreign_share: float  # foreign CPU seconds / (cores x wall seconds)
    foreign_top: dict[str, float]  # "comm:pid" -> CPU seconds of the busiest foreign processes
    cpu_seconds: float  # CPU used by this benchmark's own processes (JVM, Python workers, driver)
    cpu_by_command: dict[str, float]  # the same split by command name: "java" (Spark), "python" (workers, driver)


def measure(load: ForeignLoad, fn: Callable[[], object]) -> Measurement:
    cores = os.cpu_count() or 1
    own0, by_command0 = load.own()
    f0, by0, t0 = load.now(), load.snapshot(), time.perf_counter()
    fn()
    elapsed = time.perf_counter() - t0
    own1, by_command1 = load.own()
    split = {k: round(v - by_command0.get(k, 0.0), 2) for k, v in by_command1.items()}
    return Measurement(
        elapsed,
        (load.now() - f0) / (cores * elapsed),
        load.top(by0),
        own1 - own0,
        {k: v for k, v in split.items() if v >= 0.01},
    )


class WorkerProcess:
    """A worker subprocess (one SparkSession) spoken to with JSON lines."""

    def __init__(
        self,
        name: str,
        python: str,
        spec: dict[str, Any],
        log_dir: Path,
        env: dict[str, str],
        script: Path | None = None,
    ) -> None:
        """Start ``python script --worker`` (default script: the benchmark being run) and send it ``spec``."""
        self.name = name
        self.log_path = log_dir / f"worker-{name}.log"
        self._log = open(self.log_path, "w")
        self.proc = subprocess.Popen(
            [python, str((script or Path(sys.argv[0])).resolve()), "--worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            text=True,
            bufsize=1,
            env=env,
            cwd=str(REPO_ROOT),
        )
        t0 = time.perf_counter()
        self.info = self._request({"name": name, **spec})
        self.start_seconds = time.perf_counter() - t0
        self.info["start_seconds"] = self.start_seconds

    def _request(self, message: dict[str, Any]) -> Any:
        assert self.proc.stdin and self.proc.stdout
        self.proc.stdin.write(json.dumps(message) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"worker {self.name} died; see {self.log_path}:\n{tail_file(self.log_path)}")
        answer = json.loads(line)
        if not answer["ok"]:
            raise RuntimeError(f"worker {self.name} failed:\n{answer['error']}")
        return answer.get("info", answer.get("result"))

    def call(self, cmd: str, **kw: Any) -> Any:
        return self._request({"cmd": cmd, **kw})

    def close(self) -> None:
        try:
            if self.proc.poll() is None and self.proc.stdin:
                self.proc.stdin.write(json.dumps({"cmd": "quit"}) + "\n")
                self.proc.stdin.flush()
                self.proc.wait(timeout=120)
        except Exception:
            self.proc.kill()
        self._log.close()


def tail_file(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


class Catalogs:
    """Fresh catalogs: SQLite files, or databases on the project's test PostgreSQL (dropped at the end)."""

    def __init__(self, work: Path, prefix: str = "ducklake_sinkbench") -> None:
        self.work = work
        self.prefix = prefix
        self._admin: Any = None
        self._admin_url = ""
        self._dbs: list[str] = []

    def new(self, backend: str, label: str) -> dict[str, Any]:
        folder = self.work / f"lake-{label}-{backend}"
        (folder / "data").mkdir(parents=True)
        data_path = f"{folder / 'data'}/"
        if backend == "sqlite":
            path = folder / "lake.sqlite"
            return {
                "name": f"ducklake-{backend}",
                "backend": backend,
                "url": f"sqlite:///{path}",
                "duckdb": f"ducklake:sqlite:{path}",
                "data_path": data_path,
            }
        from sqlalchemy import create_engine, text
        from sqlalchemy.engine import make_url

        if self._admin is None:
            script = REPO_ROOT / "scripts" / "postgres.sh"
            subprocess.run(
                ["bash", str(script), "start"], check=True, stdout=subprocess.DEVNULL, stdin=subprocess.DEVNULL
            )
            self._admin_url = subprocess.run(
                ["bash", str(script), "url"], check=True, capture_output=True, text=True
            ).stdout.strip()
            self._admin = create_engine(self._admin_url, isolation_level="AUTOCOMMIT")
        name = f"{self.prefix}_{os.getpid()}_{label}_{uuid.uuid4().hex[:6]}"
        with self._admin.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{name}"'))
        self._dbs.append(name)
        url = make_url(self._admin_url).set(database=name)
        conninfo = f"dbname={name} host={url.host} port={url.port} user={url.username}"
        return {
            "name": f"ducklake-{backend}",
            "backend": backend,
            "url": url.render_as_string(hide_password=False),
            "duckdb": f"ducklake:postgres:{conninfo}",
            "data_path": data_path,
        }

    def drop_all(self) -> None:
        if self._admin is None:
            return
        from sqlalchemy import text

        with self._admin.connect() as conn:
            for name in self._dbs:
                conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        self._admin.dispose()


def pct(values: list[float], q: float) -> float:
    """Percentile by linear interpolation (q in 0..100)."""
    if not values:
        return float("nan")
    s = sorted(values)
    k = (len(s) - 1) * q / 100
    lo, hi = math.floor(k), math.ceil(k)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def git_commit() -> str | None:
    """The short commit of the checkout this benchmark runs from, or None outside a git checkout."""
    try:
        out = subprocess.run(
            ["git", "-C", str(REPO_ROOT), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=False,
        )
    except OSError:
        return None
    return out.stdout.strip() or None


def machine_info() -> dict[str, Any]:
    info: dict[str, Any] = {
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "python": sys.version.split()[0],
        "hostname": platform.node(),
    }
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    info["cpu_model"] = line.split(":", 1)[1].strip()
                    break
        with open("/proc/meminfo") as f:
            info["mem_gib"] = round(int(f.readline().split()[1]) / 1024 / 1024, 1)
    except OSError:
        pass
    try:
        java = subprocess.run(["java", "-version"], capture_output=True, text=True, timeout=30)
        info["java"] = java.stderr.splitlines()[0] if java.stderr else None
    except (OSError, subprocess.SubprocessError):
        info["java"] = None
    try:
        pg = subprocess.run(
            ["bash", str(REPO_ROOT / "scripts" / "postgres.sh"), "status"], capture_output=True, text=True, timeout=60
        )
        info["postgres"] = pg.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        pass
    info["loadavg_start"] = os.getloadavg()
    info["fresh_memory_s_per_gib"] = fresh_memory_cost()
    return info


def fresh_memory_cost(mib: int = 256, idle: float = 2.0) -> dict[str, float]:
    """Seconds per GiB to write memory the process has just been given (one byte per 4 KiB page), in transparent huge
    pages as numpy asks for them (``huge_after_idle``, after ``idle`` seconds without allocating;
    ``huge_at_once``, again at once) and in plain pages (``small``).

    Measured on this project's machine (a virtual machine) on 2026-11-28, idle: after a 2 s pause 1.3-1.6 s/GiB
    in huge pages (2.6 s/GiB for a 1 GiB numpy array, 1,024 faults), 0.13 s/GiB again at once, 0.65-1.4 s/GiB in
    plain pages; under load 4-10 s/GiB. Readers that allocate hundreds of MiB per read (the feed benchmark's) slow
    by seconds on such days. The JSON keeps the figures so results from different days can be told apart (see
    bench/README.md, "Slow days").
    """
    import mmap

    n = mib << 20

    def touch(huge: bool) -> float:
        region = mmap.mmap(-1, n, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        if huge and hasattr(mmap, "MADV_HUGEPAGE"):
            region.madvise(mmap.MADV_HUGEPAGE)
        t0 = time.perf_counter()
        memoryview(region)[::4096] = b"\1" * (n // 4096)  # write one byte per page
        seconds = time.perf_counter() - t0
        region.close()
        return round(seconds * (1024 / mib), 3)

    time.sleep(idle)
    after_idle = touch(True)
    return {"huge_after_idle": after_idle, "huge_at_once": touch(True), "small": touch(False)}


def delta_jars(version: str) -> str:
    jars = [DELTA_JARS_DIR / f"delta-spark_2.13-{version}.jar", DELTA_JARS_DIR / f"delta-storage-{version}.jar"]
    if not all(j.exists() for j in jars):
        out = subprocess.run(
            ["bash", str(REPO_ROOT / "bench" / "fetch_delta.sh")],
            check=True,
            capture_output=True,
            text=True,
            env={**os.environ, "DELTA_VERSION": version},
        ).stdout
        return out.strip().splitlines()[-1]
    return ",".join(str(j) for j in jars)


def fmt(x: Any, unit: str = "", digits: int = 1) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    if unit == "ms":
        return f"{x * 1000:.{digits}f} ms"
    if isinstance(x, float):
        return f"{x:,.{digits}f}"
    return f"{x:,}"


if __name__ == "__main__" and sys.argv[1:2] == ["--sample-load"]:
    _serve_sampler(int(sys.argv[2]), float(sys.argv[3]))
