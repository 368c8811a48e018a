"""Processes of the tests: daemons the test scripts start in their own session (a Kafka broker, a Kafka Connect
worker), stopped by pid; commands a test spawns and kills (:class:`Spawned`); examples loaded as modules."""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any


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


class Spawned:
    """A command in its own session (process group), its output in a file: an example's pipeline, say, that a test
    SIGKILLs with its JVM and Python workers, as a machine failure would."""

    def __init__(self, argv: list[str], log: Path, *, cwd: Path, env: dict[str, str]) -> None:
        self.log = log
        self._out = log.open("w")
        self.proc = subprocess.Popen(
            argv,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=self._out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def output(self) -> str:
        return self.log.read_text()

    def wait(self, timeout: float) -> int:
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"{self.proc.args} did not finish in {timeout} s:\n{self.output()[-4000:]}") from None
        finally:
            self._out.close()

    def kill(self) -> None:
        """SIGKILL the whole process group."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(30)
        self._out.close()


def load_module(path: Path) -> Any:
    """A script (an example) imported as a module under its file name."""
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(spec.name, module)  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return sys.modules[spec.name]
