"""Concurrent writers on one table: operations per second, latency, conflicts raised and retries.

For each catalog backend and each writer count (1, 4, 12 by default) it runs the load of ``tests/support/load.py``
for ``--seconds``: that many writer processes appending (inlined and Parquet), deleting and overwriting ranges of their
own rows through the Python API, beside one maintenance process (flush, merge, expiry, clean-up). Every run ends with
the exact check of the load test (the table holds the union of the writers' rows, here and in DuckDB); a run that
fails it, or in which a writer's operation raised, makes the exit status 1.

    .venv/bin/python bench/concurrency_bench.py --out bench/results/concurrency.json     # make bench-concurrency
    .venv/bin/python bench/concurrency_bench.py --seconds 15 --writers 1,4 --backends sqlite   # smoke check
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import ForeignLoad, git_commit, machine_info  # bench/_common.py, next to this script

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository: tests.support.load runs the load
from tests.support.load import LoadSpec, catalog_for, problems, run_load


def run_one(backend: str, writers: int, args: argparse.Namespace, load: ForeignLoad) -> dict[str, Any]:
    waited = load.wait_quiet(args.quiet_wait)
    cores = os.cpu_count() or 1
    with tempfile.TemporaryDirectory(prefix=f"bench-concurrency-{backend}-") as tmp:
        with catalog_for(backend, Path(tmp)) as location:
            spec = LoadSpec(
                location.url,
                location.duckdb,
                location.data_path,
                str(Path(tmp) / "work"),
                seconds=args.seconds,
                seed=args.seed,
                writers=writers,
                maintainers=tuple(m for m in args.maintainers.split(",") if m),
                readers=0,
            )
            foreign0, t0 = load.now(), time.monotonic()
            figures = run_load(spec)
            elapsed = time.monotonic() - t0
    figures["backend"] = backend
    figures["quiet_wait_s"] = round(waited, 1)
    figures["foreign_share"] = round((load.now() - foreign0) / (cores * elapsed), 3)
    figures["problems"] = problems(figures)
    return figures


def report(runs: list[dict[str, Any]]) -> str:
    head = (
        "| backend | writers | ops/s | p50 ms | p99 ms | appends/s | deletes+overwrites/s | delete p50 / p99 ms "
        "| raised | retries (re-plans) | flushes, merges | exact | foreign CPU |"
    )
    lines = [head, "|" + "---|" * 13]
    for r in runs:
        ops = r["by_op"]
        appends = sum(ops.get(k, {}).get("ok", 0) for k in ("append_inlined", "append_parquet"))
        deletes = sum(ops.get(k, {}).get("ok", 0) for k in ("delete", "overwrite"))
        d = ops.get("delete", {})
        m = r.get("maintainer_ours", {}).get("done", {})
        lines.append(
            f"| {r['backend']} | {r['writers']} | {r['ops_per_s']:g} | {r['p50_ms']} | {r['p99_ms']} "
            f"| {appends / r['seconds']:.1f} | {deletes / r['seconds']:.1f} | {d.get('p50_ms')} / {d.get('p99_ms')} "
            f"| {r['errors']} | {r['retries']} ({r['replans']}) | {m.get('flush', 0)}, {m.get('merge', 0)} "
            f"| {'yes' if r['exact'] and not r['problems'] else 'NO'} | {r['foreign_share']:.0%} |"
        )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backends", default="sqlite,postgres")
    parser.add_argument("--writers", default="1,4,12", help="writer counts, comma-separated")
    parser.add_argument("--seconds", type=float, default=60.0, help="length of each run")
    parser.add_argument("--maintainers", default="ours", help="maintenance processes: ours, duckdb (comma-separated)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--quiet-wait", type=float, default=120.0, help="wait up to this long for an idle machine")
    parser.add_argument("--out", default=None, help="write config, machine and every run as JSON")
    args = parser.parse_args()
    load = ForeignLoad()
    machine = machine_info()
    runs = []
    try:
        for backend in args.backends.split(","):
            for writers in (int(w) for w in args.writers.split(",")):
                figures = run_one(backend, writers, args, load)
                print(
                    f"{backend} x{writers}: {figures['ops_per_s']} ops/s, p50 {figures['p50_ms']} ms, p99 "
                    f"{figures['p99_ms']} ms, raised {figures['errors']}, retries {figures['retries']}, "
                    f"problems {figures['problems']}",
                    flush=True,
                )
                runs.append(figures)
    finally:
        load.close()
    print(report(runs))
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        payload = {
            "git_commit": git_commit(),
            "config": vars(args),
            "machine": machine,
            "runs": runs,
            "table": report(runs),
        }
        Path(args.out).write_text(json.dumps(payload, indent=1) + "\n")
    return 1 if any(r["problems"] for r in runs) else 0


if __name__ == "__main__":
    sys.exit(main())
