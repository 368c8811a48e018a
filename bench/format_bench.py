"""Format benchmark: the same work on a DuckLake 1.1 catalog and on a 1.0 catalog, in one run (target: 1.1 within 5%).

What 1.1 changes on the write and read paths is small (the inlined tables' column names, ``row_group_count`` on each
file row, the format version read with the head snapshot in every commit), so the ratio shows whether any of it costs.
For each catalog backend two lakes are made side by side, one per version, and ``--repeat`` rounds time every
operation on both (which goes first alternates from round to round), in wall-clock seconds on this process:

- ``sink batch (inlined)``: ``--sink-batches`` micro-batches of 100 rows through the sink's committer
  (``MicroBatchCommitter``: replay check, plan, inlined commit), and ``sink batch (Parquet)``: one of
  ``--rows`` rows written as Parquet and committed;
- ``batch write``: ``Lake.append`` of ``--rows`` rows (Parquet); ``batch read``: ``Lake.scan`` of a table of
  ``--rows`` rows written once (a delete file, inlined rows, an upsert's updates: it does not grow by round);
- ``flush``: ``flush_inlined_data`` of the sink's inlined rows;
- ``feed``: ``Lake.table_changes`` over that table's whole history (inlined rows, files, deletes, updates);
- ``upsert``: ``Lake.upsert`` of ``--keys`` keys (half new, half existing) into the growing table.

The figure is the median over the rounds of each round's 1.1 time over its 1.0 time (the two ran one after the
other on tables of the same size; the growing table grows between rounds); the medians of each version's times are
kept beside it. The tables have the column types users have (bigint, int, double, decimal, string, timestamp, date,
boolean, list of int).

    python bench/format_bench.py --rows 1000000 --repeat 7 --backends sqlite,postgres --out bench/results/format.json
"""

from __future__ import annotations

import argparse
import datetime as dt
import decimal
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _common import Catalogs, ForeignLoad, fmt, git_commit, machine_info

import pyspark_ducklake as pdl
from pyspark_ducklake.table.microbatch import MicroBatchCommitter, SinkSettings
from tests.support.history import sink_batch

VERSIONS = ("1.0", "1.1")
TABLE = "main.t"
FIXED = "main.fixed"  # written once: what the reads and the feed time


def rows(start: int, n: int) -> pa.Table:
    """``n`` rows with ids from ``start``, of the column types users have."""
    ids = np.arange(start, start + n, dtype=np.int64)
    day0 = dt.date(2020, 1, 1)
    return pa.table(
        {
            "id": ids,
            "i32": (ids % 1_000_000).astype(np.int32),
            "dbl": ids * 0.5,
            "amount": pa.array([decimal.Decimal(int(i) % 100000) / 1000 for i in ids], pa.decimal128(18, 3)),
            "text": pa.array([f"text-{i}" for i in ids]),
            "ts": pa.array(ids * 1_000_000, pa.timestamp("us")),
            "day": pa.array([day0 + dt.timedelta(days=int(i) % 3000) for i in ids], pa.date32()),
            "flag": ids % 2 == 0,
            "tags": pa.array([[int(i) % 7, int(i) % 11] for i in ids], pa.list_(pa.int32())),
        }
    )


class Subject:
    """One lake of one format version."""

    def __init__(self, version: str, catalog: dict[str, Any], args: argparse.Namespace) -> None:
        self.version = version
        self.lake = pdl.connect(catalog["url"], catalog["data_path"], format_version=version)
        self.args = args
        self.next_id = 0
        self.batch = 0
        self.lake.create_table(TABLE, rows(0, 1).schema)
        self.lake.append(TABLE, self._take(args.rows))
        self.lake.delete(TABLE, [("id", "<", 1000)])
        self.lake.create_table(FIXED, rows(0, 1).schema)
        self.lake.append(FIXED, rows(0, args.rows))
        self.lake.delete(FIXED, [("id", "<", 1000)])
        for first in range(args.rows, args.rows + 50, 5):
            self.lake.append(FIXED, rows(first, 5))  # inlined
        self.lake.upsert(FIXED, rows(2000, 100), on="id")
        self.fixed_end = self.lake.snapshots(limit=1)[0].snapshot_id
        self.sink = MicroBatchCommitter(self.lake, TABLE, SinkSettings(flush_rows=10**9))

    def _take(self, n: int) -> pa.Table:
        data = rows(self.next_id, n)
        self.next_id += n
        return data

    def sink_inlined(self) -> None:
        for _ in range(self.args.sink_batches):
            sink_batch(self.sink, "bench", self.batch, self._take(100))
            self.batch += 1

    def sink_parquet(self) -> None:
        sink_batch(self.sink, "bench", self.batch, self._take(self.args.rows))
        self.batch += 1

    def write(self) -> None:
        self.lake.append(TABLE, self._take(self.args.rows))

    def read(self) -> None:
        self.lake.scan(FIXED)

    def flush(self) -> None:
        self.lake.flush_inlined_data(TABLE)

    def feed(self) -> None:
        self.lake.table_changes(FIXED, 0, self.fixed_end)

    def upsert(self) -> None:
        n = self.args.keys
        old = rows(self.next_id - n // 2 - 1, n // 2)  # existing keys: replaced
        new = self._take(n - n // 2)  # new keys: inserted
        self.lake.upsert(TABLE, pa.concat_tables([old, new]), on="id")


OPERATIONS: dict[str, Callable[[Subject], None]] = {
    "sink batch (inlined)": Subject.sink_inlined,
    "sink batch (Parquet)": Subject.sink_parquet,
    "batch write": Subject.write,
    "batch read": Subject.read,
    "flush": Subject.flush,
    "feed": Subject.feed,
    "upsert": Subject.upsert,
}


def run_backend(args: argparse.Namespace, backend: str, catalogs: Catalogs, say: Callable[[str], None]) -> Any:
    subjects = {v: Subject(v, catalogs.new(backend, f"v{v.replace('.', '')}"), args) for v in VERSIONS}
    for subject in subjects.values():  # warm-up at full size, both lakes
        for op in OPERATIONS.values():
            op(subject)
    times: dict[str, dict[str, list[float]]] = {name: {v: [] for v in VERSIONS} for name in OPERATIONS}
    for r in range(args.repeat):
        order = VERSIONS if r % 2 == 0 else tuple(reversed(VERSIONS))
        for name, op in OPERATIONS.items():
            for version in order:
                start = time.perf_counter()
                op(subjects[version])
                times[name][version].append(time.perf_counter() - start)
        say(f"{backend}: round {r + 1}/{args.repeat} done")
    result = {}
    for name, by_version in times.items():
        medians = {v: statistics.median(t) for v, t in by_version.items()}
        paired = statistics.median(a / b for a, b in zip(by_version["1.1"], by_version["1.0"], strict=True))
        result[name] = {"median_s": medians, "ratio_1_1_over_1_0": paired, "runs": by_version}
    for subject in subjects.values():
        subject.lake.close()
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--keys", type=int, default=1000)
    parser.add_argument("--sink-batches", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--backends", default="sqlite,postgres")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)

    def say(text: str) -> None:
        print(f"[{time.strftime('%H:%M:%S')}] {text}", flush=True)

    load = ForeignLoad()
    started = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        catalogs = Catalogs(Path(tmp), prefix="ducklake_formatbench")
        try:
            for backend in args.backends.split(","):
                results[backend] = run_backend(args, backend, catalogs, say)
        finally:
            catalogs.drop_all()
            load.close()
    report = {
        "benchmark": "format",
        "started": started,
        "git_commit": git_commit(),
        "machine": machine_info(),
        "args": {k: str(v) for k, v in vars(args).items()},
        "results": results,
    }
    for backend, ops in results.items():
        print(f"\n{backend}: DuckLake 1.1 vs 1.0 (medians of {args.repeat}; ratio: the median of the rounds' ratios)")
        for name, r in ops.items():
            m = r["median_s"]
            print(
                f"  {name:22} 1.0 {fmt(m['1.0'], 's', 3):>10}  1.1 {fmt(m['1.1'], 's', 3):>10}  "
                f"ratio {r['ratio_1_1_over_1_0']:.3f}"
            )
    if args.out:
        args.out.write_text(json.dumps(report, indent=2, default=str) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
