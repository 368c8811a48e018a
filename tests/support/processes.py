"""Daemons the test scripts start in their own session (a Kafka broker, a Kafka Connect worker), stopped by pid."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path


def daemon_running(pid: int, marker: bytes, state_dir: Path) -> bool:
    """True while process ``pid`` is the daemon (its command line holds ``marker`` and its state folder), not another
    process that reused the pid."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return marker in cmdline and str(state_dir).encode() in cmdline


def stop_daemon(pid: int, marker: bytes, state_dir: Path, timeout: float = 30) -> None:
    """SIGTERM (a clean shutdown), then SIGKILL after ``timeout`` seconds."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        if not daemon_running(pid, marker, state_dir):
            return
        os.kill(pid, sig)
        deadline = time.monotonic() + timeout
        while daemon_running(pid, marker, state_dir) and time.monotonic() < deadline:
            time.sleep(0.2)
