"""The benchmarks' CPU accounting (bench/_common.py ``ForeignLoad``): CPU of the benchmark's own process tree, of
processes it names as its own, and of everything else, sampled in a process of its own."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
BURN = "import time\nwhile time.process_time() < 0.6: pass"  # 0.6 CPU-seconds, however loaded the machine


@pytest.fixture
def load() -> Any:
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        from _common import ForeignLoad
    finally:
        sys.path.remove(str(ROOT / "bench"))
    sampler = ForeignLoad(interval=0.1)
    yield sampler
    sampler.close()


def _detached(code: str) -> int:
    """Start ``python -c code`` outside this process tree (its parent shell exits at once); returns its pid."""
    out = subprocess.run(
        ["sh", "-c", f'{sys.executable} -c "$0" >/dev/null 2>&1 & echo $!', code], capture_output=True, text=True
    )
    return int(out.stdout.strip())


def _wait_gone(pid: int) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
    raise AssertionError(f"process {pid} still running")


def test_a_child_counts_as_own_and_an_outsider_as_foreign(load: Any) -> None:
    own0 = load.own()[0]
    subprocess.run([sys.executable, "-c", BURN], check=True)
    own1, foreign1 = load.own()[0], load.now()
    assert own1 - own0 >= 0.4
    pid = _detached(BURN)
    time.sleep(0.3)  # sampled while alive: a process that exits between samples loses at most one interval
    _wait_gone(pid)
    foreign2 = load.now()
    assert foreign2 - foreign1 >= 0.3
    assert any(key.endswith(f":{pid}") for key in load.snapshot())
    assert load.top({}, n=100)  # the busiest foreign processes are reported


def test_a_process_named_as_own_is_not_foreign(load: Any) -> None:
    pid = _detached("import time\ntime.sleep(0.5)\n" + BURN)
    load.count_as_ours(pid)
    own0 = load.own()[0]
    _wait_gone(pid)
    own1 = load.own()[0]
    assert own1 - own0 >= 0.3
    assert not any(key.endswith(f":{pid}") for key in load.snapshot())


def test_the_sampler_process_is_neither_own_nor_foreign(load: Any) -> None:
    sampler_pid = load._proc.pid
    time.sleep(1.0)
    assert not any(key.endswith(f":{sampler_pid}") for key in load.snapshot())
    own0 = load.own()[0]
    time.sleep(1.0)  # this process sleeps: the sampler's own work must not show up as ours
    assert load.own()[0] - own0 < 0.2


def test_the_sampler_ends_with_its_benchmark(load: Any) -> None:
    proc = load._proc
    load.close()
    assert proc.poll() is not None
