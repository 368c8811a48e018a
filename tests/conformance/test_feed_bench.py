"""bench/feed_bench.py end to end at toy size, without Spark: DuckDB writes the history, our Python feed and
DuckDB's ``ducklake_table_changes`` are timed and must agree on every change type's count and sums."""

from __future__ import annotations

import importlib.util
import itertools
import json
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def bench() -> Any:
    sys.path.insert(0, str(ROOT / "bench"))  # feed_bench imports its neighbours _common and batch_bench
    try:
        spec = importlib.util.spec_from_file_location("feed_bench", ROOT / "bench" / "feed_bench.py")
        assert spec and spec.loader
        module = importlib.util.module_from_spec(spec)
        sys.modules.setdefault(spec.name, module)
        spec.loader.exec_module(module)
        return sys.modules[spec.name]
    finally:
        sys.path.remove(str(ROOT / "bench"))


def test_history_plan_mixes_every_operation(bench: Any, tmp_path: Path) -> None:
    ops = bench.plan_history(6, 100, 2, tmp_path)
    kinds = [op.kind for op in ops]
    assert kinds.count("insert") == 8 and kinds.count("update") == 3 and kinds.count("delete") == 3
    assert kinds[-1] == "flush"
    ids = [(op.lo, op.hi) for op in ops if op.kind == "insert"]
    assert all(a[1] == b[0] for a, b in itertools.pairwise(ids))  # consecutive, no id twice
    assert sorted(op.hi - op.lo for op in ops if op.kind == "insert")[:2] == [5, 5]  # inlined by DuckDB


def test_python_feed_and_duckdb_agree(bench: Any, tmp_path: Path) -> None:
    out = tmp_path / "feed.json"
    argv = ["--engines", "ducklake-python,duckdb", "--latency-commits", "0", "--inserts", "4", "--insert-rows"]
    argv += ["300", "--small-inserts", "1", "--repeat", "1", "--quiet-wait", "0", "--max-tries", "1"]
    argv += ["--work-dir", str(tmp_path / "work"), "--out", str(out), "--plot", str(tmp_path / "feed.png")]
    assert bench.main(argv) == 0
    report = json.loads(out.read_text())
    result = report["results"]["sqlite"]
    assert result["agree"]
    assert set(result["stats"]) == {"ducklake-python", "duckdb"}
    by_type = result["by_type"]
    assert set(by_type) == {"insert", "delete", "update_preimage", "update_postimage"}
    assert by_type["insert"]["rows"] == 4 * 300 + 5
    assert by_type["update_preimage"]["rows"] == by_type["update_postimage"]["rows"] > 0
    assert by_type["update_preimage"]["id"] == by_type["update_postimage"]["id"]  # the same rows, before and after
    assert by_type["update_postimage"]["i32"] == by_type["update_preimage"]["i32"] + by_type["update_preimage"]["rows"]
    assert report["history"]["ducklake-sqlite"]["inlined_snapshots"] == 1
    assert {t["engine"] for t in report["tries"]} == {"ducklake-python", "duckdb"}
    assert all(r["ratio"] > 0 for r in result["ratios"])
