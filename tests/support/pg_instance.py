"""A PostgreSQL server of its own, for fault tests that stop and start it while a stream writes.

``scripts/postgres.sh`` runs it with ``DUCKLAKE_PG_BASE`` (cluster folder) and ``DUCKLAKE_PG_PORT`` (a free port), so
the suite's shared server is never stopped. The cluster stays in ``.cache/postgres-faults/`` between runs (initdb once);
the server is stopped when the test ends.
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
from pathlib import Path

from sqlalchemy.engine import make_url

from tests.support.catalogs import POSTGRES_SCRIPT, REPO_ROOT, PgServer

FAULTS_BASE = REPO_ROOT / ".cache" / "postgres-faults"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PgInstance:
    """Start, stop and restart one PostgreSQL cluster on a fixed port."""

    def __init__(self, base: Path = FAULTS_BASE, port: int | None = None) -> None:
        self.base = base
        self.port = port or free_port()
        self.stopped_at: float | None = None

    def _run(self, command: str) -> str:
        env = {**os.environ, "DUCKLAKE_PG_BASE": str(self.base), "DUCKLAKE_PG_PORT": str(self.port)}
        proc = subprocess.run(
            ["bash", str(POSTGRES_SCRIPT), command],
            cwd=REPO_ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        if proc.returncode != 0:
            raise RuntimeError(f"postgres.sh {command} failed ({proc.returncode}): {proc.stderr[-2000:]}")
        return proc.stdout.strip()

    def start(self) -> PgServer:
        url = make_url(self._run("start").splitlines()[-1])
        assert url.host and url.port and url.username, url
        if url.port != self.port:  # left running on another port by an earlier, interrupted run: move it
            self._run("stop")
            url = make_url(self._run("start").splitlines()[-1])
        assert url.port == self.port, f"the fault-test PostgreSQL came up on {url.port}, not {self.port}"
        status = self._run("status")
        assert str(self.base) in status, status  # ours, not a server outside our folder
        return PgServer(url.host or "127.0.0.1", self.port, url.username or "postgres")

    def stop(self) -> None:
        self._run("stop")
        self.stopped_at = time.monotonic()
