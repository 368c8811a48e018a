"""History benchmark: what a lake after months of streaming costs per commit, per read and per micro-batch,
against a lake with a thousand snapshots, on SQLite and PostgreSQL catalogs.

For each size (``--sizes``, default 1,000, 100,000 and 1,000,000 snapshots) and catalog a lake is grown as a
long-running stream leaves it (``tests/support/history.py``, the same builder as the shape tests): one table taking
ten-row inlined appends, a flush every 100 commits, a merge every 1,000, a delete every 250 and an upsert every 500,
a column added every 50,000; beside it a table of 100 rows written once. The builder appends runs of batches in one
inlined commit and spreads it into one snapshot per batch, exactly the rows commit-by-commit writes (a test checks
it). Each PostgreSQL lake then gets the upkeep autovacuum gives a stream's catalog over its months, one ``VACUUM
ANALYZE`` (``Subject.upkeep``, its time in ``upkeep_s``; kept lakes too). Then ``--repeat`` rounds, each timing
every operation on every lake in turn (the order of the lakes rotates from round to round), in wall-clock seconds on
this process:

- ``sink commit``: a micro-batch of ten rows through the sink's committer (``MicroBatchCommitter``: replay check,
  plan, commit; p50 and p99 over ``--batches`` batches a round), and ``append``: ``Lake.append`` of ten rows;
- ``scan unchanged`` / ``point read``: ``Lake.scan`` of the table that never changed, whole and ``id = -5``;
- ``feed last 10``: ``Lake.table_changes`` of the stream's last ten snapshots; ``feed unchanged, whole history``:
  the unchanged table's feed from its first snapshot;
- ``stream start``: a change-feed stream reader made (``startingSnapshot`` latest) and its first offset;
  ``stream micro-batch``: ``latestOffset`` + ``partitions`` + reading them, for the last ten snapshots (the driver's
  and the task's work of one micro-batch of ``spark.readStream.format("ducklake")``, without the Spark engine);
- ``snapshots (limit 100)``, ``snapshots_table (limit 100)``, ``table_info``, and the CLI's
  ``snapshots --limit 20 --json`` (in this process);
- ``flush`` of ten appends; ``merge, new small files``: five one-append files made (untimed), then merged with
  ``max_file_size`` 16 KB, so only the round's new files are (those and the flush's: six files of the same rows at
  every size, recorded); ``merge``: the default merge, which rewrites the stream's oldest mergeable file too, a file
  that grows with the table (DuckDB's rule; the bytes each timed merge rewrote are recorded);
- with ``--spark`` (the Makefile's run): ``spark.read.format("ducklake").load`` of the unchanged table collected
  (the data source's planning) and ``pdl.read_table`` of it.

Each operation's median over the rounds is divided by the smallest lake's: the target is <= 1.1 at every size. The
catalog work of each operation (statements, rows returned) is counted once per size beside it, and for the
operations that only read the catalog, the floor under them: the database's own time for the same statements, each
run again alone with its parameters on a raw connection (``catalog_own_s``). Last, once per lake,
expiry of 90% of the history (``expire_snapshots``, batches of 1,000) and ``cleanup_old_files``: their times, the
snapshots expired, the batches, and the peak of Python memory while expiring (``tracemalloc``); also each
catalog's size and the process's peak RSS.

    python bench/history_bench.py --sizes 1000,10000 --backends sqlite --repeat 3 --out /tmp/history.json  # smoke
    make bench-history   # 1k, 100k, 1M snapshots, both catalogs (hours: run it on a quiet machine)
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import io
import json
import os
import resource
import statistics
import sys
import tempfile
import time
import tracemalloc
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository: the builder lives in tests/support

from _common import Catalogs, ForeignLoad, fmt, git_commit, machine_info, pct

from pyspark_ducklake.lake import Lake
from pyspark_ducklake.table.microbatch import MicroBatchCommitter, SinkSettings
from tests.support.history import QUIET, STREAM, Churn, History, feed_micro_batch, feed_stream, sink_batch
from tests.support.query_count import STEP, counting

CHURN = Churn(delete_every=250, upsert_every=500, alter_every=50_000)
TARGET = 1.1  # every ratio against the smallest lake, at most


class Subject:
    """One grown lake and what the operations keep between calls."""

    def __init__(self, label: str, catalog: dict[str, Any], size: int) -> None:
        self.label, self.catalog, self.size = label, catalog, size
        self.lake = Lake(catalog["url"], catalog["data_path"])
        self.history = History(self.lake, CHURN)
        self.committer: MicroBatchCommitter | None = None
        self.app_id = f"history-bench-{uuid.uuid4().hex[:8]}"  # a reused lake's earlier runs are not replays
        self.batch_id = 0

    def build(self) -> float:
        started = time.perf_counter()
        self.history.grow_to(self.size)
        self.lake.flush_inlined_data(STREAM)
        return time.perf_counter() - started

    def upkeep(self) -> float:
        """The database's upkeep a real stream's months have had: ``VACUUM ANALYZE`` of a PostgreSQL catalog.

        Every flush deletes the rows it moved from the inlined-data table (as DuckDB's does), and the builder commits
        hundreds of times faster than a stream, so a lake just built leaves that table thousands of pages long, nearly
        all empty (2,461 at 1M), until autovacuum truncates it about a minute later; every flush meanwhile scans them
        (1.14x at 1M). A stream committing once a second leaves autovacuum a few hundred dead rows at a time.
        """
        if self.catalog["backend"] != "postgres":
            return 0.0
        from sqlalchemy import text

        started = time.perf_counter()
        with self.lake.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.execute(text("VACUUM ANALYZE"))
        return time.perf_counter() - started

    def sink(self) -> MicroBatchCommitter:
        if self.committer is None:
            self.committer = MicroBatchCommitter(self.lake, STREAM, SinkSettings())
        return self.committer

    def sink_commit(self) -> None:
        sink_batch(self.sink(), self.app_id, self.batch_id, self.history.batch())
        self.batch_id += 1

    def head(self) -> int:
        return self.lake.current_snapshot_id()

    def catalog_bytes(self) -> int:
        if self.catalog["backend"] == "sqlite":
            path = Path(self.catalog["url"].removeprefix("sqlite:///"))
            return sum(p.stat().st_size for p in path.parent.glob(path.name + "*"))
        from sqlalchemy import text

        with self.lake.engine.connect() as conn:
            return int(conn.execute(text("SELECT pg_database_size(current_database())")).scalar_one())


def _cli_snapshots(subject: Subject) -> None:
    from pyspark_ducklake.__main__ import main

    with contextlib.redirect_stdout(io.StringIO()):
        assert main(["--catalog", subject.catalog["url"], "snapshots", "--limit", "20", "--json"]) == 0


def _feed_last_10(subject: Subject) -> Callable[[], object]:
    head = subject.head()
    return lambda: subject.lake.table_changes(STREAM, head - 9, head)


def _feed_whole(subject: Subject) -> Callable[[], object]:
    first, head = subject.lake.snapshots(limit=1, since=0)[0].snapshot_id, subject.head()
    return lambda: subject.lake.table_changes(QUIET, first, head)


def _flush(subject: Subject) -> Callable[[], object]:
    for _ in range(10):
        subject.lake.append(STREAM, subject.history.batch())
    return lambda: subject.lake.flush_inlined_data(STREAM)


SMALL_FILES = 5  # the fixed-size merge's input: this many new files of one append each
SMALL = "16KB"  # under it: the new files; over it: every file the history left (its merged files, its flushes)


def _merge_small(subject: Subject) -> Callable[[], object]:
    for _ in range(SMALL_FILES):
        subject.lake.append(STREAM, subject.history.batch())
        subject.lake.flush_inlined_data(STREAM)
    return lambda: subject.lake.merge_adjacent_files(STREAM, max_file_size=SMALL)


def operations(spark: Any) -> dict[str, Callable[[Subject], Any]]:
    """name -> a call on a lake; a call may return a function, which is then what is timed (its setup is not)."""
    ops: dict[str, Callable[[Subject], Any]] = {
        "append": lambda s: s.lake.append(STREAM, s.history.batch()),
        "scan unchanged": lambda s: s.lake.scan(QUIET),
        "point read": lambda s: s.lake.scan(QUIET, filter=[("id", "=", -5)]),
        "feed last 10": _feed_last_10,
        "feed unchanged, whole history": _feed_whole,
        "stream start": lambda s: feed_stream(s.catalog["url"], {"startingSnapshot": "latest"}).initialOffset(),
        "stream micro-batch": lambda s: feed_micro_batch(s.catalog["url"], s.head()),
        "snapshots (limit 100)": lambda s: s.lake.snapshots(limit=100),
        "snapshots_table (limit 100)": lambda s: s.lake.snapshots_table(limit=100),
        "table_info": lambda s: s.lake.table_info(),
        "CLI snapshots --limit 20": _cli_snapshots,
        "flush": _flush,
        "merge, new small files": _merge_small,
        "merge": lambda s: s.lake.merge_adjacent_files(STREAM),
    }
    if spark is not None:
        import pyspark_ducklake as pdl

        def source(s: Subject) -> None:
            spark.read.format("ducklake").option("catalog", s.catalog["url"]).load(QUIET).collect()

        def native(s: Subject) -> None:
            pdl.read_table(spark, QUIET, catalog=s.catalog["url"]).collect()

        ops["data source read, unchanged"] = source
        ops["read_table, unchanged"] = native
    return ops


def _timed(call: Callable[[], Any]) -> float:
    started = time.perf_counter()
    result = call()
    if callable(result):  # the call was the setup: time what it handed back
        started = time.perf_counter()
        result()
    return time.perf_counter() - started


def _counted(subject: Subject, op: Callable[[Subject], Any]) -> dict[str, Any]:
    with counting() as queries:  # every engine: a stream reader opens its own
        result = op(subject)
        if callable(result):
            result = result()
    work = {
        "statements": queries.statements,
        "rows": queries.rows,
        "rows_by_table": queries.by_table(),
        "sqlite_steps": queries.steps * STEP,
    }
    if hasattr(result, "files_processed"):  # a merge: the files it rewrote
        work["files_merged"] = result.files_processed
    return work


def _catalog_own_time(subject: Subject, op: Callable[[Subject], Any], repeat: int = 7) -> float | None:
    """The database's own time for the catalog reads of one timed call of ``op``: each statement run again alone,
    with its parameters, on one raw connection, fetched whole (median over ``repeat`` runs of them all); the floor
    under that operation. None when the call writes (a write cannot be run twice the same)."""
    with counting() as queries:
        call = op(subject)
        if callable(call):  # it was the setup: only what it handed back is timed
            queries.all.clear()
            call()
    if not queries.all or any(q.rows < 0 for q in queries.all):
        return None
    raw = subject.lake.engine.raw_connection()
    try:
        runs = []
        for _ in range(repeat):
            total = 0.0
            for q in queries.all:
                cursor = raw.cursor()
                started = time.perf_counter()
                cursor.execute(q.statement, q.parameters)
                cursor.fetchall()
                total += time.perf_counter() - started
                cursor.close()
            raw.rollback()
            runs.append(total)
    finally:
        raw.close()
    return statistics.median(runs)


def _expire_90(subject: Subject) -> dict[str, Any]:
    """Expire the oldest 90% of the lake's snapshots, then clean up everything scheduled."""
    cut_id = int(subject.head() * 0.9)
    (info,) = subject.lake.snapshots(since=cut_id, limit=1)
    tracemalloc.start()
    started = time.perf_counter()
    report = subject.lake.expire_snapshots(older_than=info.snapshot.snapshot_time, batch_size=1000)
    expire_s = time.perf_counter() - started
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    started = time.perf_counter()
    cleaned = subject.lake.cleanup_old_files(cleanup_all=True)
    return {
        "expired": report.expired,
        "batches": report.batches,
        "expire_s": expire_s,
        "expire_peak_python_mib": peak / 2**20,
        "files_scheduled": len(report.files_scheduled),
        "cleanup_s": time.perf_counter() - started,
        "files_deleted": len(cleaned.files),
        "snapshots_left": len(subject.lake.snapshots(limit=10**9)),
    }


def backend_of(url: str) -> str:
    """The catalog backend of a kept lake's URL: ``sqlite`` or ``postgres``."""
    return "sqlite" if url.startswith("sqlite") else "postgres"


def run_backend(args: argparse.Namespace, backend: str, catalogs: Catalogs, spark: Any, say: Any) -> dict[str, Any]:
    subjects = []
    upkeep: dict[int, float] = {}  # VACUUM ANALYZE of each PostgreSQL lake before timing it (Subject.upkeep)
    for i, size in enumerate(args.sizes):
        if args.reuse:  # a kept lake: its catalog names its data path
            subject = Subject(f"{size:,}", {"url": args.reuse[i], "backend": backend, "data_path": None}, size)
            upkeep[size] = subject.upkeep()
            say(f"{backend}: reusing {subject.head():,} snapshots (upkeep {upkeep[size]:.1f} s)")
            subjects.append((subject, 0.0))
            continue
        subject = Subject(f"{size:,}", catalogs.new(backend, f"h{size}"), size)
        seconds = subject.build()
        upkeep[size] = subject.upkeep()
        say(f"{backend}: built {subject.head():,} snapshots in {seconds:.0f} s (upkeep {upkeep[size]:.1f} s)")
        subjects.append((subject, seconds))
    ops = operations(spark)
    times: dict[str, dict[int, list[float]]] = {name: {s.size: [] for s, _ in subjects} for name in ops}
    commits: dict[int, list[float]] = {s.size: [] for s, _ in subjects}
    merge_input: dict[int, list[dict[str, int]]] = {s.size: [] for s, _ in subjects}
    load = ForeignLoad()
    foreign: list[float] = []
    for s, _ in subjects:  # warm-up round, untimed: imports, compiled statements, the sink's first batch
        for op in ops.values():
            _timed(lambda s=s, op=op: op(s))
        s.sink_commit()
    for rnd in range(args.repeat):
        order = subjects[rnd % len(subjects) :] + subjects[: rnd % len(subjects)]
        f0, t0 = load.now(), time.perf_counter()
        for s, _ in order:
            for _ in range(args.batches):
                commits[s.size].append(_timed(s.sink_commit))
            for name, op in ops.items():
                if name == "merge":  # untimed: the files the merge is about to rewrite
                    dry = s.lake.merge_adjacent_files(STREAM, dry_run=True)
                    merge_input[s.size].append({"files": dry.files_processed, "bytes": dry.bytes_before})
                times[name][s.size].append(_timed(lambda s=s, op=op: op(s)))
        foreign.append((load.now() - f0) / ((os.cpu_count() or 1) * (time.perf_counter() - t0)))
        say(f"{backend}: round {rnd + 1}/{args.repeat} done (foreign CPU {foreign[-1]:.0%})")
    load.close()
    base = args.sizes[0]
    out: dict[str, Any] = {"sizes": {}, "operations": {}, "foreign_cpu_share": foreign}
    for s, seconds in subjects:
        out["sizes"][s.size] = {
            "snapshots": s.head(),
            "build_s": seconds,
            "upkeep_s": upkeep[s.size],
            "catalog_bytes": s.catalog_bytes(),
            "merge_input": merge_input[s.size],  # what each timed merge rewrote: its time grows with these bytes
        }
    sink_p50 = {size: pct(v, 50) for size, v in commits.items()}
    out["operations"]["sink commit p50"] = _row(sink_p50, base)
    out["operations"]["sink commit p99"] = _row({size: pct(v, 99) for size, v in commits.items()}, base)
    for name, by_size in times.items():
        out["operations"][name] = _row({size: statistics.median(v) for size, v in by_size.items()}, base)
    counts: dict[str, Any] = {}
    for s, _ in subjects:
        counts[s.size] = {name: _counted(s, op) for name, op in ops.items()}
        counts[s.size]["sink commit"] = _counted(s, lambda s: s.sink_commit())
    out["catalog_work"] = counts
    for name, op in ops.items():  # the floor: the same reads, the database alone
        measured = {s.size: _catalog_own_time(s, op) for s, _ in subjects}
        own = {size: v for size, v in measured.items() if v is not None}
        if len(own) == len(measured):
            out["operations"][name]["catalog_own_s"] = own
            out["operations"][name]["catalog_own_ratio"] = {size: v / own[base] for size, v in own.items()}
    for s, _ in subjects:
        if not (args.reuse or args.no_expire):  # else the lakes stay whole, to be reused
            out["sizes"][s.size]["expire_90"] = _expire_90(s)
            say(f"{backend}: {s.label}: expired {out['sizes'][s.size]['expire_90']['expired']:,} snapshots")
        s.history.close()
        s.lake.close()
    return out


def _row(medians: dict[int, float], base: int) -> dict[str, Any]:
    return {
        "median_s": medians,
        "ratio": {size: medians[size] / medians[base] if medians[base] else None for size in medians},
    }


def report_table(results: dict[str, Any], sizes: list[int]) -> str:
    lines = []
    for backend, r in results.items():
        lines.append(f"\n### {backend}\n")
        head = " | ".join(f"{size:,}" for size in sizes)
        lines.append(f"| operation | {head} | worst ratio |")
        lines.append("|---|" + "---|" * len(sizes) + "---|")
        for name, row in r["operations"].items():
            cells = []
            for size in sizes:
                ms = row["median_s"][size] * 1000
                ratio = row["ratio"][size]
                cells.append(f"{fmt(ms, ' ms', 2)}" + ("" if size == sizes[0] else f" ({ratio:.2f}x)"))
            worst = max(v for k, v in row["ratio"].items() if k != sizes[0] and v is not None) if len(sizes) > 1 else 1
            flag = "" if worst <= TARGET else " **over 1.1x**"
            lines.append(f"| {name} | {' | '.join(cells)} | {worst:.2f}{flag} |")
        own_rows = [(name, row) for name, row in r["operations"].items() if "catalog_own_s" in row]
        if own_rows:  # the floor under each read: its catalog statements, the database alone
            lines.append("")
            lines.append(f"| catalog's own time (reads run again alone) | {head} | worst ratio |")
            lines.append("|---|" + "---|" * len(sizes) + "---|")
            for name, row in own_rows:
                cells = [
                    f"{row['catalog_own_s'][size] * 1000:.2f} ms"
                    + ("" if size == sizes[0] else f" ({row['catalog_own_ratio'][size]:.2f}x)")
                    for size in sizes
                ]
                worst = max(v for k, v in row["catalog_own_ratio"].items() if k != sizes[0]) if len(sizes) > 1 else 1
                lines.append(f"| {name} | {' | '.join(cells)} | {worst:.2f} |")
        if not all("expire_90" in r["sizes"][size] for size in sizes):  # reused lakes or --no-expire
            continue
        lines.append("")
        lines.append("| lake | snapshots | build | catalog | expire 90% | batches | expire peak (Python) | cleanup |")
        lines.append("|---|---|---|---|---|---|---|---|")
        for size in sizes:
            z = r["sizes"][size]
            e = z["expire_90"]
            lines.append(
                f"| {size:,} | {z['snapshots']:,} | {z['build_s']:.0f} s | {z['catalog_bytes'] / 2**20:.1f} MiB | "
                f"{e['expired']:,} in {e['expire_s']:.1f} s | {e['batches']} | {e['expire_peak_python_mib']:.1f} MiB "
                f"| {e['files_deleted']} files in {e['cleanup_s']:.1f} s |"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default="1000,100000,1000000", help="snapshots of each lake, smallest first")
    p.add_argument("--backends", default="sqlite,postgres")
    p.add_argument("--repeat", type=int, default=100, help="rounds over every lake (medians; a round takes seconds)")
    p.add_argument("--batches", type=int, default=20, help="sink micro-batches timed per lake and round")
    p.add_argument("--spark", action="store_true", help="also time the Spark reads of the unchanged table")
    p.add_argument("--work", help="scratch folder (default: a new temporary one, removed unless --keep)")
    p.add_argument("--keep", action="store_true", help="keep the lakes (PostgreSQL catalogs too) for a look after")
    p.add_argument("--no-expire", action="store_true", help="skip the expiry of 90%% (with --keep: lakes to --reuse)")
    p.add_argument(
        "--reuse",
        help="catalog URLs of lakes kept by an earlier run (--keep --no-expire), one per size in --sizes' order, of one"
        " backend (it sets --backends): time them again without building or expiring them",
    )
    p.add_argument("--out", default="bench/results/history.json")
    args = p.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    args.sizes = sorted(sizes)
    if args.reuse:
        urls = args.reuse.split(",")
        backends = {backend_of(url) for url in urls}
        if len(urls) != len(sizes) or len(backends) != 1:
            p.error("--reuse takes one catalog URL per size in --sizes, all of one backend (sqlite or postgres)")
        by_size = dict(zip(sizes, urls, strict=True))  # paired as given
        args.reuse = [by_size[size] for size in args.sizes]  # then smallest first
        args.backends = backends.pop()
        args.keep = True
    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="history-bench-"))
    work.mkdir(parents=True, exist_ok=True)

    def say(text: str) -> None:
        print(f"[{dt.datetime.now():%H:%M:%S}] {text}", flush=True)

    spark = None
    if args.spark:
        from _common import start_worker_spark

        spark = start_worker_spark({"engine": "ducklake", "work_dir": str(work), "name": "history"}, "history-bench")
    catalogs = Catalogs(work, prefix="ducklake_historybench")
    results: dict[str, Any] = {}
    try:
        for backend in args.backends.split(","):
            results[backend] = run_backend(args, backend, catalogs, spark, say)
    finally:
        if not args.keep:
            catalogs.drop_all()
        if spark is not None:
            spark.stop()
        if not args.keep and not args.work:
            import shutil

            shutil.rmtree(work, ignore_errors=True)
    table = report_table(results, args.sizes)
    print(table)
    worst = max(
        (v for r in results.values() for row in r["operations"].values() for k, v in row["ratio"].items() if v),
        default=1.0,
    )
    report = {
        "benchmark": "history",
        "git_commit": git_commit(),
        "when": dt.datetime.now(dt.timezone.utc).isoformat(),
        "machine": machine_info(),
        "args": vars(args),
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "target_ratio": TARGET,
        "worst_ratio": worst,
        "results": results,
        "table": table,
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=1, default=str) + "\n")
    say(f"wrote {out}; worst ratio {worst:.2f} (target <= {TARGET})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
