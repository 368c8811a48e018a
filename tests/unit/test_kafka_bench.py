"""The arithmetic of bench/kafka_bench.py on a real table: when each event became visible, and the exactly-once check.

The benchmark's figures come from these functions, so they are checked here on a small DuckLake table read through
DuckDB (as the benchmark reads it), with poll and commit times made up so that every latency is known.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import pyspark_ducklake as pdl

ROOT = Path(__file__).resolve().parents[2]
COLUMNS = ("id", "produced_at", "kafka_partition", "kafka_offset", "batch_id")


@pytest.fixture(scope="module")
def bench() -> Any:
    sys.path.insert(0, str(ROOT / "bench"))  # kafka_bench imports its neighbour _common
    try:
        spec = importlib.util.spec_from_file_location("kafka_bench", ROOT / "bench" / "kafka_bench.py")
        assert spec and spec.loader
        module = importlib.util.module_from_spec(spec)
        sys.modules.setdefault(spec.name, module)
        spec.loader.exec_module(module)
        return sys.modules[spec.name]
    finally:
        sys.path.remove(str(ROOT / "bench"))


def test_visible_times_take_the_first_poll_that_saw_each_batch(bench: Any) -> None:
    polls = [(9.0, 10.0, -1, 0), (10.0, 11.0, 1, 20), (11.0, 12.0, 1, 20), (12.5, 13.0, 4, 50), (13.0, 14.0, 5, 60)]
    assert bench.visible_times(list(reversed(polls))) == {0: 11.0, 1: 11.0, 2: 13.0, 3: 13.0, 4: 13.0, 5: 14.0}


def make_pipe(bench: Any, tmp_path: Path, batches: list[list[int]], app: str) -> Any:
    """A DuckLake table written as the sink writes it: one snapshot per batch, ``app_id``/``batch_id`` recorded."""
    catalog = f"sqlite:///{tmp_path}/lake.sqlite"
    lake = pdl.connect(catalog, f"{tmp_path}/data/")
    lake.create_table("main.latency", pa.schema([(c, pa.int64()) for c in COLUMNS]))
    for batch_id, ids in enumerate(batches):
        rows = {
            "id": ids,
            "produced_at": [100_000_000 + i * 10_000 for i in ids],  # event i produced at 100 s + i * 10 ms
            "kafka_partition": [0] * len(ids),
            "kafka_offset": ids,
            "batch_id": [batch_id] * len(ids),
        }
        lake.append("main.latency", pa.table(rows), extra_info={"app_id": app, "batch_id": batch_id})
    lake.close()
    target = {"table": "main.latency", "url": catalog, "duckdb": f"ducklake:sqlite:{tmp_path}/lake.sqlite"}
    target["data_path"] = f"{tmp_path}/data/"
    return bench.Pipe("ducklake", "latency", None, target, topic="t", checkpoint="c", app=app)


def test_latencies_and_exactly_once(bench: Any, tmp_path: Path) -> None:
    # Batch 0 holds the untimed events 0..9; the measured events 10..29 arrive in batches 1 and 2.
    pipe = make_pipe(bench, tmp_path, [list(range(10)), list(range(10, 20)), list(range(20, 30))], app="bench-app")
    pipe.produced = 30
    pipe.measured = [bench.Produced(10, 20, 100.1, 100.29)]
    pipe.records = [
        {"batch": 0, "start": 99.0, "end": 100.5},
        {"batch": 1, "start": 100.5, "end": 101.0},
        {"batch": 2, "start": 101.0, "end": 102.0},
        {"batch": 2, "start": 110.0, "end": 110.1},  # a replay: not a commit
    ]
    pipe.rows = {0: 10, 1: 10, 2: 10}
    pipe.polls = [(100.0, 100.6, 0, 10), (101.0, 101.5, 1, 20), (102.0, 102.25, 2, 30)]

    got = bench.latencies(pipe)
    # Visible: batch 1 at 101.5 s for events produced at 100.10..100.19 s; batch 2 at 102.25 s for 100.20..100.29 s.
    visible = sorted(
        [101.5 - (100 + i / 100) for i in range(10, 20)] + [102.25 - (100 + i / 100) for i in range(20, 30)]
    )
    committed = sorted(
        [101.0 - (100 + i / 100) for i in range(10, 20)] + [102.0 - (100 + i / 100) for i in range(20, 30)]
    )
    assert got["events"] == 20 and got["batches"] == 2
    assert got["visible"]["max_s"] == pytest.approx(visible[-1])
    assert got["visible"]["p50_s"] == pytest.approx(bench.pct(visible, 50))
    assert got["committed"]["p50_s"] == pytest.approx(bench.pct(committed, 50))
    assert got["committed"]["max_s"] == pytest.approx(committed[-1])
    assert len(got["cdf_visible"]) == 101 and got["cdf_visible"][-1] == pytest.approx(visible[-1], abs=1e-4)

    check = bench.verify(pipe)
    assert check["ok"] and (check["rows"], check["commits"], check["batches_with_rows"]) == (30, 3, 3)
    pipe.produced = 31  # one event the table lacks
    assert not bench.verify(pipe)["ok"]


def test_a_batch_committed_twice_fails_the_check(bench: Any, tmp_path: Path) -> None:
    pipe = make_pipe(bench, tmp_path, [[0, 1], [2, 3]], app="bench-app")
    pipe.produced = 4
    assert bench.verify(pipe)["ok"]
    with pdl.connect(f"sqlite:///{tmp_path}/lake.sqlite") as lake:  # batch 1 again, as a sink without its check would
        rows = {
            "id": [2, 3],
            "produced_at": [0, 0],
            "kafka_partition": [0, 0],
            "kafka_offset": [2, 3],
            "batch_id": [1, 1],
        }
        lake.append("main.latency", pa.table(rows), extra_info={"app_id": "bench-app", "batch_id": 1})
    check = bench.verify(pipe)
    assert not check["ok"] and check["rows"] == 6 and check["commits"] == 3
