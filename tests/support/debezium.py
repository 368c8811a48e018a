"""Debezium's PostgreSQL connector in a real Kafka Connect worker, for the CDC tests (issue #17).

``scripts/debezium.sh`` fetches Kafka Connect and Debezium from Maven Central (``.cache/kafka/jars/``, once) and runs a
standalone worker against a broker; connectors are added and removed through its REST API. The PostgreSQL it captures
must run with ``wal_level=logical``: ``scripts/postgres.sh`` configures its clusters so, and the tests use a server of
their own (``tests.support.pg_instance``), so the suite's shared server is never restarted.

What Debezium 3.6 sends (JSON converter, schemas off), one message per row change, keyed by the primary key:
``{"before": {...} | null, "after": {...} | null, "source": {..., "lsn": n, "txId": n, ...}, "op": "r"|"c"|"u"|"d",
"ts_ms": n}``; a delete is followed by a tombstone (the key with a null value); a primary-key update is a delete of
the old key (and its tombstone) and a create of the new one. ``before`` of an update or delete holds every column only
with ``REPLICA IDENTITY FULL``, else only the key.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.support.catalogs import PgServer
from tests.support.processes import daemon_running, load_module, stop_daemon

REPO_ROOT = Path(__file__).resolve().parents[2]
DEBEZIUM_SCRIPT = REPO_ROOT / "scripts" / "debezium.sh"
_PINNING_ENV = ("CONNECT_PORT", "CONNECT_STATE_DIR", "CONNECT_BOOTSTRAP")


@dataclass(frozen=True)
class ConnectWorker:
    """A running Kafka Connect worker: ``url`` is its REST API; ``state_dir`` holds its config, offsets and log."""

    url: str
    pid: int
    state_dir: Path

    @property
    def log(self) -> Path:
        return self.state_dir / "connect.log"


def start_connect(state_dir: Path, bootstrap: str, timeout: float = 900) -> ConnectWorker:
    """Start a worker against ``bootstrap`` with its state in ``state_dir``; return once Debezium is loaded.

    Raises:
        RuntimeError: the script failed (its stderr is in the message).
    """
    state_dir.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k not in _PINNING_ENV}
    env.update(CONNECT_STATE_DIR=str(state_dir), CONNECT_BOOTSTRAP=bootstrap)
    proc = subprocess.run(
        ["bash", str(DEBEZIUM_SCRIPT), "start"],
        cwd=REPO_ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"scripts/debezium.sh start failed (exit {proc.returncode}):\n{proc.stderr}")
    return ConnectWorker(proc.stdout.strip().splitlines()[-1], int((state_dir / "connect.pid").read_text()), state_dir)


def is_running(worker: ConnectWorker) -> bool:
    """True while the worker's own process (not a reused pid) is alive."""
    return daemon_running(worker.pid, b"ConnectStandalone", worker.state_dir)


def stop_connect(worker: ConnectWorker, timeout: float = 30) -> None:
    """Stop it by its pid: SIGTERM (a clean shutdown), then SIGKILL after ``timeout`` seconds."""
    stop_daemon(worker.pid, b"ConnectStandalone", worker.state_dir, timeout)


def _rest(worker: ConnectWorker, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        worker.url + path, data=data, method=method, headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            raw = response.read()
    except urllib.error.HTTPError as e:
        raise RuntimeError(f"{method} {path}: HTTP {e.code}: {e.read().decode(errors='replace')}") from e
    return json.loads(raw) if raw else None


def postgres_connector_config(
    pg: PgServer, database: str, *, topic_prefix: str, tables: list[str], slot: str, **extra: str
) -> dict[str, str]:
    """Debezium's PostgreSQL connector for ``tables`` (``schema.table``) of ``database``: pgoutput, its own slot and
    publication, an initial snapshot, numerics as strings (not base64 bytes)."""
    return {
        "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
        "tasks.max": "1",
        "database.hostname": pg.host,
        "database.port": str(pg.port),
        "database.user": pg.user,
        "database.password": "",
        "database.dbname": database,
        "topic.prefix": topic_prefix,
        "plugin.name": "pgoutput",
        "slot.name": slot,
        "publication.name": f"{slot}_pub",
        "publication.autocreate.mode": "filtered",
        "table.include.list": ",".join(tables),
        "snapshot.mode": "initial",
        "decimal.handling.mode": "string",
        **extra,
    }


def add_connector(worker: ConnectWorker, name: str, config: dict[str, str], timeout: float = 120) -> None:
    """Create connector ``name`` and wait until it and its task run.

    Raises:
        RuntimeError: the connector or its task failed (with Connect's trace).
        TimeoutError: not running within ``timeout`` seconds.
    """
    _rest(worker, "POST", "/connectors", {"name": name, "config": config})
    deadline = time.monotonic() + timeout
    while True:
        try:
            status = _rest(worker, "GET", f"/connectors/{name}/status")
        except RuntimeError:  # 404 until the worker has it
            status = None
        if status is not None:
            states = [status["connector"]["state"], *(t["state"] for t in status.get("tasks", []))]
            if "FAILED" in states:
                traces = [t.get("trace", "") for t in [status["connector"], *status.get("tasks", [])]]
                raise RuntimeError(f"connector {name} failed: {' '.join(traces)[-3000:]}")
            if status.get("tasks") and all(s == "RUNNING" for s in states):
                return
        if time.monotonic() > deadline:
            raise TimeoutError(f"connector {name} not running within {timeout:.0f} s: {status}")
        time.sleep(0.5)


def remove_connector(worker: ConnectWorker, name: str) -> None:
    """Delete connector ``name`` (its replication slot stays: drop it with :func:`drop_slot`)."""
    _rest(worker, "DELETE", f"/connectors/{name}")


def drop_slot(pg_url: str, slot: str, timeout: float = 30) -> None:
    """Drop a replication slot once its connector has let go of it (a slot left behind keeps WAL forever): the
    example's own clean-up (``cdc_to_lake.py remove``), so the tests check it."""
    load_module(REPO_ROOT / "examples" / "cdc_postgres_to_lake" / "cdc_to_lake.py").drop_slot(pg_url, slot, timeout)
