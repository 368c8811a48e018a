"""Spark daemons for the tests, all from pyspark's own jars on 127.0.0.1: a Spark Connect server, and a standalone
cluster (a master and a worker whose executors run in JVMs and Python workers of their own).

Each daemon runs in its own session (``start_new_session``) with free ports, its log and state in a folder of the
test's temp dir (pytest keeps the last runs' folders, so a failure's logs stay), and is stopped by pid
(:mod:`tests.support.processes`). A worker's executors are its children: whatever is left of its process group when
it has stopped is killed by pid, so no JVM or Python worker outlives the test session; a test process killed before
its teardown takes its daemons with it (``PR_SET_PDEATHSIG``: they get SIGTERM).

A Connect client in the test process: ``SparkSession.builder.remote(server.url)`` sets
``SPARK_CONNECT_MODE_ENABLED`` in ``os.environ``, which makes ``pyspark.sql.functions`` build Connect columns for
every later caller in the process, the classic ``spark`` fixture's tests included; :func:`connect_mode` sets it for
a Connect test only.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pyspark

from tests.support.jvm import archive_option
from tests.support.processes import stop_daemon

SPARK_HOME = Path(pyspark.__file__).resolve().parent
CONNECT_SERVER = "org.apache.spark.sql.connect.service.SparkConnectServer"
MASTER = "org.apache.spark.deploy.master.Master"
WORKER = "org.apache.spark.deploy.worker.Worker"
CONNECT_MODE_ENV = "SPARK_CONNECT_MODE_ENABLED"
START_TIMEOUT_S = 240.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass(frozen=True)
class SparkDaemon:
    """A running Spark JVM: ``marker`` (its main class) and ``state_dir`` are on its command line."""

    name: str
    process: subprocess.Popen[bytes] = field(compare=False, repr=False)
    marker: str
    state_dir: Path

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def log(self) -> Path:
        return self.state_dir / f"{self.name}.log"

    def running(self) -> bool:
        # not exited (the Popen keeps the pid ours until it is reaped); the command line is empty while the
        # launcher script execs the JVM, so it is not asked here
        return self.process.poll() is None

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def stop(self, timeout: float = 30) -> None:
        """SIGTERM, then SIGKILL; then every process left in its process group (a worker's executors), by pid."""
        stop_daemon(self.pid, self.marker.encode(), self.state_dir, timeout)
        if self.process.poll() is None:  # caught between the launcher script and the JVM
            self.process.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout)
        for pid in _group_members(self.pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def _group_members(pgid: int) -> list[int]:
    """Processes whose process group is ``pgid`` (a daemon started in a session of its own leads that group)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[-1].split()
        if len(fields) > 2 and int(fields[2]) == pgid and int(entry.name) != pgid:
            found.append(int(entry.name))
    return found


def _environment() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in (CONNECT_MODE_ENV, "SPARK_REMOTE", "SPARK_CONNECT_MODE")}
    env["SPARK_HOME"] = str(SPARK_HOME)
    env["PYSPARK_PYTHON"] = sys.executable  # executors' Python workers import this worktree's package
    env["PYSPARK_DRIVER_PYTHON"] = sys.executable
    env["SPARK_LOCAL_IP"] = "127.0.0.1"
    env.setdefault("SPARK_LOCAL_HOSTNAME", "127.0.0.1")
    if java_options := archive_option():  # the master's and worker's JVMs: the shared class archive when made
        env["SPARK_DAEMON_JAVA_OPTS"] = java_options
    return env


def _die_with_parent() -> None:
    """In the child before exec: SIGTERM when the test process dies (a killed pytest skips its fixtures' teardown);
    the JVM's shutdown hook then stops the daemon, a worker its executors."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


PR_SET_PDEATHSIG = 1  # linux/prctl.h


def _spawn(name: str, marker: str, args: list[str], state_dir: Path) -> SparkDaemon:
    state_dir.mkdir(parents=True, exist_ok=True)
    with open(state_dir / f"{name}.log", "ab") as log:
        proc = subprocess.Popen(
            args, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=_environment(),
            start_new_session=True, cwd=state_dir,
            preexec_fn=_die_with_parent if sys.platform == "linux" else None,
        )  # fmt: skip
    return SparkDaemon(name, proc, marker, state_dir)


def _wait_for_port(daemon: SparkDaemon, port: int, timeout: float = START_TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not daemon.running():
            raise RuntimeError(f"{daemon.name} exited while starting; log {daemon.log}:\n{daemon.log_tail()}")
        with socket.socket() as s:
            s.settimeout(1)
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.5)
    daemon.stop()
    raise RuntimeError(f"{daemon.name} did not listen on port {port} in {timeout:.0f} s; log {daemon.log}")


def _wait_for_log(daemon: SparkDaemon, text: str, timeout: float = START_TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not daemon.running():
            raise RuntimeError(f"{daemon.name} exited while starting; log {daemon.log}:\n{daemon.log_tail()}")
        if text in daemon.log.read_text(errors="replace"):
            return
        time.sleep(0.5)
    daemon.stop()
    raise RuntimeError(f"{daemon.name} did not log {text!r} in {timeout:.0f} s; log {daemon.log}")


@dataclass(frozen=True)
class ConnectServer:
    daemon: SparkDaemon
    port: int

    @property
    def url(self) -> str:
        return f"sc://127.0.0.1:{self.port}"


def start_connect_server(
    state_dir: Path, master: str = "local[2]", conf: dict[str, str] | None = None
) -> ConnectServer:
    """A Spark Connect server (the driver) for ``master``, through ``spark-submit`` as ``start-connect-server.sh``
    runs it; returns once it accepts connections."""
    port = free_port()
    settings = {
        "spark.connect.grpc.binding.address": "127.0.0.1",
        "spark.connect.grpc.binding.port": str(port),
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.shuffle.partitions": "2",
        "spark.default.parallelism": "2",
        "spark.local.dir": str(state_dir / "local"),  # also puts the state folder on the command line
        "spark.sql.warehouse.dir": str(state_dir / "warehouse"),
        "spark.pyspark.python": sys.executable,
        "spark.pyspark.driver.python": sys.executable,
        **({"spark.driver.extraJavaOptions": archive_option()} if archive_option() else {}),  # start-up ~5 s shorter
        **(conf or {}),
    }
    args = [str(SPARK_HOME / "bin" / "spark-submit"), "--class", CONNECT_SERVER, "--master", master]
    for key, value in settings.items():
        args += ["--conf", f"{key}={value}"]
    daemon = _spawn("connect-server", CONNECT_SERVER, args, state_dir)
    _wait_for_port(daemon, port)
    return ConnectServer(daemon, port)


@dataclass(frozen=True)
class StandaloneCluster:
    master: SparkDaemon
    worker: SparkDaemon
    port: int

    @property
    def url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    def stop(self) -> None:
        self.worker.stop()
        self.master.stop()


def start_standalone_cluster(state_dir: Path, cores: int = 2, memory: str = "1g") -> StandaloneCluster:
    """A master and one worker (``spark-class ...Master`` / ``...Worker``); returns once the worker registered."""
    spark_class = str(SPARK_HOME / "bin" / "spark-class")
    port = free_port()
    master = _spawn(
        "master",
        MASTER,
        [spark_class, MASTER, "--host", "127.0.0.1", "--port", str(port), "--webui-port", str(free_port()),
         "--properties-file", str(_properties(state_dir / "master.conf"))],
        state_dir,
    )  # fmt: skip
    try:
        _wait_for_port(master, port)
        worker = _spawn(
            "worker",
            WORKER,
            [spark_class, WORKER, "--host", "127.0.0.1", "--webui-port", str(free_port()), "--cores", str(cores),
             "--memory", memory, "--work-dir", str(state_dir / "work"),
             "--properties-file", str(_properties(state_dir / "worker.conf")), f"spark://127.0.0.1:{port}"],
            state_dir,
        )  # fmt: skip
        try:
            _wait_for_log(worker, "Successfully registered with master")
        except BaseException:
            worker.stop()
            raise
    except BaseException:
        master.stop()
        raise
    return StandaloneCluster(master, worker, port)


def _properties(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"spark.local.dir {path.parent / 'local'}\nspark.ui.enabled false\n")
    return path


@contextlib.contextmanager
def connect_mode() -> Iterator[None]:
    """``SPARK_CONNECT_MODE_ENABLED`` set for the block only (see the module docstring)."""
    before = os.environ.get(CONNECT_MODE_ENV)
    os.environ[CONNECT_MODE_ENV] = "1"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(CONNECT_MODE_ENV, None)
        else:
            os.environ[CONNECT_MODE_ENV] = before


__all__ = [
    "ConnectServer",
    "SparkDaemon",
    "StandaloneCluster",
    "connect_mode",
    "free_port",
    "start_connect_server",
    "start_standalone_cluster",
]
