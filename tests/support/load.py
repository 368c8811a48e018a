"""A load of real processes on one DuckLake table, with the exact expected result at the end.

- **writers** (this library, or DuckDB 1.5.5 through SQL) append batches of 1 to 500 rows (inlined up to the lake's
  limit, Parquet above it), delete ranges of their own rows and overwrite ranges of them (``overwrite(filter=...)``);
  each keeps the set of its rows that must be in the table;
- **maintainers** (ours, or DuckDB's ``ducklake_*`` functions) flush inlined rows, merge small files, expire
  snapshots and delete old files in a loop;
- **readers** check, while all this runs, what a reader may rely on: snapshots never go backwards, no row appears
  twice at any snapshot, a snapshot reads the same each time (before and after flushes and merges), DuckDB reads the
  same as we do, and the change feed between two snapshots turns the first into the second.

At the end the table must hold exactly the union of every writer's rows, read by us and by DuckDB.

``tests/integration/test_faults_contention.py`` runs a short fixed-seed load; ``make soak`` the long one
(``python -m tests.support.load soak``); ``bench/concurrency_bench.py`` takes its figures from :func:`run_load`.
A role runs as ``python -m tests.support.load <role> <spec.json> <index>``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import logging
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

TABLE = "main.load"
SCHEMA = pa.schema([("w", pa.int32()), ("seq", pa.int64()), ("pad", pa.string())])
SEQ_SPAN = 10**9  # row key = w * SEQ_SPAN + seq
DUCKDB_WRITER_BASE = 1000  # DuckDB writers are w = 1000, 1001, ...
OPS = ("append_inlined", "append_parquet", "delete", "overwrite")
OP_WEIGHTS = (40, 20, 28, 12)
MAX_ROWS = 500


@dataclass
class LoadSpec:
    """Everything a load run and its processes need (JSON)."""

    catalog_url: str
    duckdb: str  # DuckDB's ATTACH spelling of the catalog
    data_path: str
    work_dir: str
    seconds: float = 30.0
    seed: int = 1
    writers: int = 4
    duckdb_writers: int = 0
    maintainers: tuple[str, ...] = ("ours",)  # "ours" and/or "duckdb"
    readers: int = 1
    inline_limit: int = 10
    ops: tuple[str, ...] = OPS  # what writers do (the bench runs appends only, deletes only, ...)
    think_s: float = 0.0  # pause between a writer's operations
    expire_age_s: float = 20.0
    cleanup_age_s: float = 10.0

    @classmethod
    def load(cls, path: Path) -> LoadSpec:
        raw = json.loads(path.read_text())
        raw["maintainers"] = tuple(raw["maintainers"])
        raw["ops"] = tuple(raw["ops"])
        return cls(**raw)


def key(w: int, seq: int) -> int:
    return w * SEQ_SPAN + seq


def rows_of(w: int, first: int, n: int) -> pa.Table:
    seqs = list(range(first, first + n))
    return pa.table(
        {"w": pa.array([w] * n, pa.int32()), "seq": pa.array(seqs, pa.int64()), "pad": [f"r{s}" for s in seqs]},
        schema=SCHEMA,
    )


class CommitLog(logging.Handler):
    """Counts the commit protocol's retries and re-plans (it logs each at DEBUG)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.retries = 0
        self.replans = 0

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if message.startswith("commit attempt") and "must be planned again" in message:
            self.replans += 1
        elif message.startswith("commit attempt"):
            self.retries += 1


@dataclass
class OpRecord:
    op: str
    seconds: float
    retries: int = 0
    replans: int = 0
    error: str | None = None


@dataclass
class RoleResult:
    role: str
    index: int
    ops: list[OpRecord] = field(default_factory=list)
    live: list[int] = field(default_factory=list)  # writers: keys that must be in the table
    counts: dict[str, int] = field(default_factory=dict)
    violations: list[str] = field(default_factory=list)  # readers: broken invariants
    notes: list[str] = field(default_factory=list)  # readers: what DuckDB got wrong once
    # readers: snapshots DuckDB kept reading differently from us while the load ran, with what we read there
    # ([snapshot, rows, key sum]); re-read once everything has stopped, where a torn read cannot happen
    suspects: list[list[int]] = field(default_factory=list)
    crash: str | None = None


def _deadline(spec: LoadSpec, role: str, index: int) -> float:
    """Report ready, wait for the orchestrator's go (every process warmed up), then run ``spec.seconds``."""
    work = Path(spec.work_dir)
    (work / f"ready-{role}-{index}").touch()
    go = work / "go"
    while not go.exists():
        time.sleep(0.05)
    wait = float(go.read_text()) - time.time()
    if wait > 0:
        time.sleep(wait)
    return time.monotonic() + spec.seconds


def _warm_up(spec: LoadSpec, index: int) -> None:
    """Every write path once on a private lake, so first-use costs (imports, caches) stay out of the figures."""
    import pyspark_ducklake as pdl

    folder = Path(spec.work_dir) / f"warm-{index}"
    with pdl.connect(f"sqlite:///{folder}.sqlite", str(folder), data_inlining_row_limit=spec.inline_limit) as lake:
        lake.create_table(TABLE, SCHEMA, exist_ok=True)
        lake.append(TABLE, rows_of(0, 0, 3))
        lake.append(TABLE, rows_of(0, 3, spec.inline_limit + 5))
        lake.delete(TABLE, pc.field("seq") < 2)
        lake.overwrite(TABLE, rows_of(0, 100, 2), filter=pc.field("seq") == 5)
        lake.flush_inlined_data(TABLE)
        lake.scan(TABLE, columns=["w", "seq", "rowid"])


def _error_text(e: BaseException) -> str:
    """The error's type and its last line (DuckDB puts the reason after "Failed to commit DuckLake transaction.")."""
    lines = [line for line in str(e).splitlines() if line.strip()]
    return f"{type(e).__name__}: {(lines[-1] if lines else '')[:300]}"


def _range(rng: random.Random, live: set[int]) -> tuple[int, int]:
    """A range of a writer's sequence numbers that holds at least one live row."""
    start = rng.choice(sorted(live)) - rng.randint(0, 5)
    return max(start, 0), max(start, 0) + rng.randint(1, 60)


# --- writers ----------------------------------------------------------------------------------------------------


def run_writer(spec: LoadSpec, index: int) -> RoleResult:
    import pyspark_ducklake as pdl

    w = index
    rng = random.Random(spec.seed * 1000 + w)
    result = RoleResult("writer", w)
    log = CommitLog()
    tx = logging.getLogger("pyspark_ducklake.catalog.transaction")
    tx.setLevel(logging.DEBUG)
    tx.addHandler(log)
    _warm_up(spec, w)
    lake = pdl.connect(spec.catalog_url, data_inlining_row_limit=spec.inline_limit)
    live: set[int] = set()
    next_seq = 0
    deadline = _deadline(spec, "writer", w)
    weights = [wt if op in spec.ops else 0 for op, wt in zip(OPS, OP_WEIGHTS, strict=True)]
    try:
        while time.monotonic() < deadline:
            op = rng.choices(OPS, weights)[0]
            if op in ("delete", "overwrite") and not live:
                op = "append_inlined"
            small = op == "append_inlined"
            n = rng.randint(1, spec.inline_limit) if small else rng.randint(spec.inline_limit + 1, MAX_ROWS)
            retries, replans = log.retries, log.replans
            started = time.monotonic()
            error = None
            try:
                if op.startswith("append"):
                    lake.append(TABLE, rows_of(w, next_seq, n))
                    live.update(range(next_seq, next_seq + n))
                    next_seq += n
                else:
                    lo, hi = _range(rng, live)
                    predicate = [("w", "=", w), ("seq", ">=", lo), ("seq", "<", hi)]
                    if op == "delete":
                        lake.delete(TABLE, predicate)
                        live.difference_update(range(lo, hi))
                    else:
                        n = rng.randint(1, 20)
                        lake.overwrite(TABLE, rows_of(w, next_seq, n), filter=predicate)
                        live.difference_update(range(lo, hi))
                        live.update(range(next_seq, next_seq + n))
                        next_seq += n
            except pdl.DuckLakeError as e:
                error = f"{type(e).__name__}: {e}"
            result.ops.append(
                OpRecord(op, time.monotonic() - started, log.retries - retries, log.replans - replans, error)
            )
            if spec.think_s:
                time.sleep(spec.think_s)
    finally:
        lake.close()
    result.live = sorted(key(w, s) for s in live)
    return result


def run_duckdb_writer(spec: LoadSpec, index: int) -> RoleResult:
    """A writer through DuckDB's own ``INSERT`` and ``DELETE`` (its conflicts are its own; they are recorded)."""
    from tests.support.duck import attach_sql, connect_duckdb

    w = DUCKDB_WRITER_BASE + index
    rng = random.Random(spec.seed * 1000 + w)
    result = RoleResult("duckdb_writer", w)
    con = connect_duckdb()
    con.execute(attach_sql(_Location(spec), "lake", spec.inline_limit))
    con.execute(f"SELECT count(*) FROM lake.{TABLE}").fetchall()
    live: set[int] = set()
    next_seq = 0
    deadline = _deadline(spec, "duckdb_writer", index)
    counts: Counter[str] = Counter()

    import pyspark_ducklake as pdl

    lake = pdl.connect(spec.catalog_url)
    oplog = Path(spec.work_dir) / f"duckdb_writer_{w}.ops.jsonl"

    def present(lo: int, hi: int) -> set[int]:
        # read by this library, from the catalog itself: the DuckDB instance whose commit failed may still serve
        # its cached view of the table, without rows the failed-but-landed commit added
        rows = lake.scan(TABLE, columns=["seq"], filter=[("w", "=", w), ("seq", ">=", lo), ("seq", "<", hi)])
        return set(rows.column("seq").to_pylist())

    try:
        while time.monotonic() < deadline:
            op = rng.choices(("append_inlined", "append_parquet", "delete"), (45, 20, 35))[0]
            if op == "delete" and not live:
                op = "append_inlined"
            started = time.monotonic()
            error = None
            if op.startswith("append"):
                n = rng.randint(1, spec.inline_limit) if op == "append_inlined" else rng.randint(11, MAX_ROWS)
                lo, hi = next_seq, next_seq + n
                next_seq += n
                sql = (
                    f"INSERT INTO lake.{TABLE} SELECT {w}::INTEGER, range::BIGINT, 'r' || range FROM range({lo}, {hi})"
                )
            else:
                lo, hi = _range(rng, live)
                sql = f"DELETE FROM lake.{TABLE} WHERE w = {w} AND seq >= {lo} AND seq < {hi}"
            reported = None
            try:
                row = con.execute(sql).fetchone()
                reported = int(row[0]) if row else None  # rows DuckDB says it inserted or deleted
                after = set(range(lo, hi)) if op.startswith("append") else set()
                expected = hi - lo if op.startswith("append") else len(live & set(range(lo, hi)))
                if reported != expected:
                    # DuckDB 1.5.5 can delete fewer rows than its snapshot holds: a DELETE that started before a
                    # concurrent flush (ours or its own) committed finds the inlined rows gone from the inlined
                    # table and the flushed file not yet in its snapshot; a 0-row delete commits nothing (duckdb/
                    # ducklake#1393). What it left is settled from the catalog; only rows it reports deleted and
                    # that are still there count against us (the end state).
                    after = present(lo, hi)
                    counts["duckdb_short_count"] += 1
                    result.notes.append(f"{op} of seq {lo}..{hi - 1}: DuckDB reported {reported} of {expected} rows")
            except Exception as e:  # DuckDB's own conflicts, retries running out, a locked SQLite catalog
                error = _error_text(e)
                # DuckDB 1.5.5 on a SQLite catalog can report "database is locked" for a commit that landed: settle
                # what is in the table now (all of the rows or none of them, or the run fails on the end state).
                try:
                    after = present(lo, hi)
                except Exception:
                    time.sleep(1.0)
                    after = present(lo, hi)
                before = set() if op.startswith("append") else live & set(range(lo, hi))
                if after != before:
                    counts["failed_but_landed"] += 1
                    result.notes.append(f"{op} of seq {lo}..{hi - 1} raised {error} but landed")
            live.difference_update(range(lo, hi))
            live.update(after)
            result.ops.append(OpRecord(op, time.monotonic() - started, error=error))
            _log_op(
                oplog,
                op=op,
                lo=lo,
                hi=hi,
                error=error,
                reported=reported,
                after=len(after),
                snapshot=lake.current_snapshot_id(),
            )
            if spec.think_s:
                time.sleep(spec.think_s)
    finally:
        con.close()
        lake.close()
    result.live = sorted(key(w, s) for s in live)
    result.counts = dict(counts)
    return result


def _log_op(path: Path, **fields: Any) -> None:
    """One line per operation in the work folder (time, what, result): what a failed end state is traced back to."""
    with path.open("a") as f:
        f.write(json.dumps({"t": time.time(), **fields}) + "\n")


# --- maintenance ------------------------------------------------------------------------------------------------


def run_maintainer(spec: LoadSpec, index: int, kind: str) -> RoleResult:
    """Flush, merge, expire and clean up in a loop, through this library or DuckDB."""
    result = RoleResult(f"maintainer_{kind}", index)
    counts: Counter[str] = Counter()
    if kind == "ours":
        import pyspark_ducklake as pdl
        from pyspark_ducklake.exceptions import StalePlanError

        lake = pdl.connect(spec.catalog_url)

        def merge() -> Any:
            # what its error says to do: run it again (three times at once; on a loaded machine writers can win
            # every merge of a run otherwise, and the run then proves nothing about merges)
            for attempt in range(3):
                try:
                    return lake.merge_adjacent_files(TABLE, target_file_size="2MB").snapshot_id
                except StalePlanError:
                    if attempt == 2:
                        raise
            return None

        steps: list[tuple[str, Any]] = [
            ("flush", lambda: lake.flush_inlined_data(TABLE)),
            ("merge", merge),
            ("expire", lambda: lake.expire_snapshots(older_than=dt.timedelta(seconds=spec.expire_age_s)).snapshots),
            ("cleanup", lambda: lake.cleanup_old_files(older_than=dt.timedelta(seconds=spec.cleanup_age_s)).files),
        ]
        close = lake.close
    else:
        from tests.support.duck import attach_sql, connect_duckdb

        con = connect_duckdb()
        con.execute(attach_sql(_Location(spec), "lake", spec.inline_limit))
        con.execute("SET ducklake_max_retry_count = 100")
        expire = f"now() - INTERVAL '{spec.expire_age_s} seconds'"
        cleanup = f"now() - INTERVAL '{spec.cleanup_age_s} seconds'"
        steps = [
            ("flush", lambda: con.execute("CALL ducklake_flush_inlined_data('lake')").fetchall()),
            ("merge", lambda: con.execute("CALL ducklake_merge_adjacent_files('lake')").fetchall()),
        ]
        if not spec.catalog_url.startswith("sqlite"):
            # On a SQLite catalog DuckDB 1.5.5's ducklake_cleanup_old_files deletes every scheduled file however
            # young (files readers still read), so only ours expires and cleans up there.
            steps += [
                ("expire", lambda: con.execute(f"CALL ducklake_expire_snapshots('lake', older_than => {expire})")),
                ("cleanup", lambda: con.execute(f"CALL ducklake_cleanup_old_files('lake', older_than => {cleanup})")),
            ]
        close = con.close
    deadline = _deadline(spec, f"maintainer_{kind}", index)
    oplog = Path(spec.work_dir) / f"maintainer_{kind}_{index}.ops.jsonl"
    try:
        while time.monotonic() < deadline:
            for name, step in steps:
                if time.monotonic() >= deadline:
                    break
                started = time.monotonic()
                error = None
                done: Any = None
                try:
                    done = step()
                    if done:
                        counts[name] += 1
                except Exception as e:  # maintenance may lose to writers (a conflict); recorded, never hidden
                    error = _error_text(e)
                result.ops.append(OpRecord(name, time.monotonic() - started, error=error))
                _log_op(oplog, op=name, result=repr(done)[:200], error=error)
            time.sleep(0.3)
    finally:
        close()
    result.counts = dict(counts)
    return result


# --- readers ----------------------------------------------------------------------------------------------------


def run_reader(spec: LoadSpec, index: int) -> RoleResult:
    import pyspark_ducklake as pdl
    from pyspark_ducklake.exceptions import NoSuchSnapshotError
    from tests.support.duck import attach_sql, connect_duckdb

    result = RoleResult("reader", index)
    rng = random.Random(spec.seed * 7 + index)
    lake = pdl.connect(spec.catalog_url)
    con = connect_duckdb()
    con.execute(attach_sql(_Location(spec), "lake", spec.inline_limit))
    seen: dict[int, tuple[int, int, frozenset[int]]] = {}  # snapshot -> (rows, key sum, row ids)
    last = -1
    counts: Counter[str] = Counter()

    def duck_read(snapshot: int) -> tuple[int, int]:
        return _duck_state(con, snapshot)

    def fresh_read(snapshot: int) -> tuple[int, int] | None:
        """The snapshot as a newly attached DuckDB instance reads it (None if it could not)."""
        fresh = connect_duckdb()
        try:
            fresh.execute(attach_sql(_Location(spec), "lake", spec.inline_limit))
            return _duck_state(fresh, snapshot)
        except Exception:
            return None
        finally:
            fresh.close()

    def read(snapshot: int) -> tuple[int, int, frozenset[int]]:
        t = lake.scan(TABLE, snapshot=snapshot, columns=["w", "seq", "rowid"])
        keys = pc.add(pc.multiply(t.column("w").cast(pa.int64()), SEQ_SPAN), t.column("seq"))
        rowids = t.column("rowid").to_pylist()
        if len(set(keys.to_pylist())) != t.num_rows or len(set(rowids)) != t.num_rows:
            result.violations.append(f"snapshot {snapshot}: a row appears twice")
        return t.num_rows, int(pc.sum(keys).as_py() or 0), frozenset(rowids)

    read(lake.current_snapshot_id())
    deadline = _deadline(spec, "reader", index)
    try:
        while time.monotonic() < deadline:
            try:
                snap = lake.current_snapshot_id()
                if snap < last:
                    result.violations.append(f"snapshot went backwards: {last} then {snap}")
                last = snap
                state = read(snap)
                counts["reads"] += 1
                if snap in seen and seen[snap] != state:
                    result.violations.append(f"snapshot {snap} read differently the second time")
                seen[snap] = state
                got = duck_read(snap)
                if got != state[:2]:
                    # Read both again: ours must not change. DuckDB 1.5.5 can tear a read across a flush that
                    # commits meanwhile (its reads of one snapshot then differ from each other); only two equal
                    # DuckDB reads that differ from ours count against us.
                    duck_reads = [got]
                    again = state[:2]
                    for _ in range(3):
                        time.sleep(0.5)
                        again = read(snap)[:2]
                        duck_reads.append(duck_read(snap))
                        if again != state[:2] or duck_reads[-1] == again or duck_reads[-1] == duck_reads[-2]:
                            break
                    persistent = duck_reads[-1] == duck_reads[-2] and duck_reads[-1] != again
                    if again != state[:2]:
                        result.violations.append(
                            f"snapshot {snap}: we read {state[:2]} then {again} (DuckDB {duck_reads})"
                        )
                    elif persistent and fresh_read(snap) == state[:2]:
                        # A DuckDB instance attached across concurrent flushes can keep misreading a snapshot: a
                        # newly attached one reads what we read. Settled now, before maintenance can expire it.
                        counts["duckdb_misreads_settled"] += 1
                        result.notes.append(f"snapshot {snap}: DuckDB read {duck_reads}, we read {state[:2]}")
                    elif persistent:
                        # A new instance can tear its read across a flush too: decided by a read after the load.
                        result.suspects.append([snap, *state[:2]])
                        result.notes.append(f"snapshot {snap}: DuckDB read {duck_reads}, we read {state[:2]}")
                    else:
                        counts["duckdb_transient_misreads"] += 1
                        result.notes.append(f"snapshot {snap}: DuckDB read {duck_reads}, we read {state[:2]}")
                counts["duckdb_compared"] += 1
                older = [s for s in seen if s < snap]
                if older:
                    # the first time travel goes to the snapshot read last (the likeliest not yet expired on a
                    # loaded machine, where one round can take longer than the expiry age), later ones anywhere
                    past = rng.choice(older) if counts["time_travel"] else max(older)
                    again = read(past)  # time travel, across whatever flushes and merges happened since
                    counts["time_travel"] += 1
                    if again != seen[past]:
                        result.violations.append(f"snapshot {past} read differently after later commits")
                    _check_feed(lake, past, seen[past][2], snap, state[2], result)
                    counts["feeds"] += 1
                if len(seen) > 40:
                    seen.pop(min(seen))
            except NoSuchSnapshotError:
                counts["expired_meanwhile"] += 1
            time.sleep(0.2)
    finally:
        lake.close()
        con.close()
    result.counts = dict(counts)
    return result


def _check_feed(lake: Any, a: int, at_a: frozenset[int], b: int, at_b: frozenset[int], result: RoleResult) -> None:
    """The change feed of ``a+1..b`` turns the row ids at ``a`` into those at ``b``, each row at most once."""
    if a >= b:
        return
    from pyspark_ducklake.exceptions import NoSuchSnapshotError

    try:
        feed = lake.table_changes(TABLE, a + 1, b)
    except NoSuchSnapshotError:
        return
    kinds = feed.column("_change_type").to_pylist()
    rowids = feed.column("_rowid").to_pylist()
    inserted = [r for r, k in zip(rowids, kinds, strict=True) if k == "insert"]
    deleted = [r for r, k in zip(rowids, kinds, strict=True) if k == "delete"]
    if len(set(inserted)) != len(inserted) or len(set(deleted)) != len(deleted) or set(inserted) & at_a:
        result.violations.append(f"feed {a + 1}..{b}: a row inserted or deleted twice")
    if (at_a | set(inserted)) - set(deleted) != at_b or not set(deleted) <= (at_a | set(inserted)):
        result.violations.append(f"feed {a + 1}..{b} does not turn snapshot {a} into snapshot {b}")


# --- the run ----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Location:
    spec: LoadSpec

    @property
    def duckdb(self) -> str:
        return self.spec.duckdb

    @property
    def data_path(self) -> str:
        return self.spec.data_path


ROLES = {
    "writer": run_writer,
    "duckdb_writer": run_duckdb_writer,
    "reader": run_reader,
    "maintainer_ours": lambda spec, i: run_maintainer(spec, i, "ours"),
    "maintainer_duckdb": lambda spec, i: run_maintainer(spec, i, "duckdb"),
}


def run_load(spec: LoadSpec) -> dict[str, Any]:
    """Create the table, run every role as its own process for ``spec.seconds``, and check the end state.

    Returns:
        The figures (see :func:`summarise`), with ``exact`` true when the table equals the union of the writers'
        rows in our reading and DuckDB's.
    """
    import pyspark_ducklake as pdl

    work = Path(spec.work_dir)
    work.mkdir(parents=True, exist_ok=True)
    lake = pdl.connect(spec.catalog_url, spec.data_path)
    lake.create_table(TABLE, SCHEMA, exist_ok=True)
    first_snapshot = lake.current_snapshot_id()
    roles = [("writer", i) for i in range(spec.writers)]
    roles += [("duckdb_writer", i) for i in range(spec.duckdb_writers)]
    roles += [(f"maintainer_{kind}", i) for i, kind in enumerate(spec.maintainers)]
    roles += [("reader", i) for i in range(spec.readers)]
    spec_file = work / "spec.json"
    spec_file.write_text(json.dumps(asdict(spec)))
    repo = Path(__file__).resolve().parents[2]
    procs = []
    for role, index in roles:
        out = work / f"{role}-{index}.json"
        log = (work / f"{role}-{index}.log").open("w")
        cmd = [sys.executable, "-m", "tests.support.load", role, str(spec_file), str(index), str(out)]
        procs.append((role, index, out, subprocess.Popen(cmd, cwd=repo, stdout=log, stderr=subprocess.STDOUT)))
    warming = time.monotonic() + 300
    while time.monotonic() < warming and not all(
        (work / f"ready-{role}-{index}").exists() or proc.poll() is not None for role, index, _, proc in procs
    ):
        time.sleep(0.1)
    ready = work / "go.tmp"
    ready.write_text(str(time.time() + 0.5))
    ready.rename(work / "go")  # atomically: a process polling for "go" must never read it half-written (empty)
    results: list[RoleResult] = []
    began = time.monotonic()
    for role, index, out, proc in procs:
        try:
            proc.wait(timeout=spec.seconds + 180)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.returncode != 0 or not out.exists():
            tail = (work / f"{role}-{index}.log").read_text()[-3000:]
            results.append(RoleResult(role, index, crash=f"exit {proc.returncode}: {tail}"))
            continue
        raw = json.loads(out.read_text())
        raw["ops"] = [OpRecord(**o) for o in raw["ops"]]
        results.append(RoleResult(**raw))
    elapsed = time.monotonic() - began
    _settle_suspects(spec, lake, results)
    expected = sorted(k for r in results for k in r.live)
    t = lake.scan(TABLE, columns=["w", "seq", "rowid"])
    got = pc.add(pc.multiply(t.column("w").cast(pa.int64()), SEQ_SPAN), t.column("seq")).to_pylist()
    from tests.support.duck import attach_sql, connect_duckdb

    con = connect_duckdb()
    try:
        con.execute(attach_sql(_Location(spec), "lake", spec.inline_limit))
        duck = sorted(r[0] for r in con.execute(f"SELECT w::BIGINT * {SEQ_SPAN} + seq FROM lake.{TABLE}").fetchall())
    finally:
        con.close()
    end = {
        "rows_expected": len(expected),
        "rows_read": len(got),
        "rows_missing": len(set(expected) - set(got)),
        "rows_unexpected": len(set(got) - set(expected)),
        "rows_doubled": len(got) - len(set(got)),
        "rowids_doubled": t.num_rows - len(set(t.column("rowid").to_pylist())),
        "duckdb_equal": duck == expected,
        "missing_sample": sorted(set(expected) - set(got))[:5],
        "unexpected_sample": sorted(set(got) - set(expected))[:5],
    }
    end["exact"] = sorted(got) == expected and end["duckdb_equal"]
    snapshots = lake.snapshots()
    end["empty_snapshots"] = [s.snapshot_id for s in snapshots if s.snapshot_id > first_snapshot and not s.changes_made]
    end["commits"] = lake.current_snapshot_id() - first_snapshot
    lake.close()
    return summarise(spec, results, elapsed, end)


def _duck_state(con: Any, snapshot: int) -> tuple[int, int]:
    """(rows, sum of keys) of the table at ``snapshot`` as DuckDB reads it."""
    row = con.execute(
        f"SELECT count(*), coalesce(sum(w::BIGINT * {SEQ_SPAN} + seq), 0) FROM lake.{TABLE} AT (VERSION => {snapshot})"
    ).fetchone()
    assert row is not None
    return int(row[0]), int(row[1])


def _settle_suspects(spec: LoadSpec, lake: Any, results: list[RoleResult]) -> None:
    """Re-read each snapshot DuckDB kept reading differently during the load, now that nothing runs: if a newly
    attached DuckDB reads what we read there (and we still do), it was DuckDB's torn or stale read (a note);
    otherwise, or when the snapshot has expired meanwhile, a violation."""
    from tests.support.duck import attach_sql, connect_duckdb

    suspects = [(r, s) for r in results if r.role == "reader" for s in r.suspects]
    if not suspects:
        return
    con = connect_duckdb()
    try:
        con.execute(attach_sql(_Location(spec), "lake", spec.inline_limit))
        for reader, (snap, rows, keysum) in suspects:
            try:
                t = lake.scan(TABLE, snapshot=snap, columns=["w", "seq"])
                keys = pc.add(pc.multiply(t.column("w").cast(pa.int64()), SEQ_SPAN), t.column("seq"))
                ours = (t.num_rows, int(pc.sum(keys).as_py() or 0))
                theirs: Any = _duck_state(con, snap)
            except Exception as e:  # expired meanwhile: undecided, so it counts against us
                ours, theirs = (rows, keysum), _error_text(e)
            if ours == theirs == (rows, keysum):
                reader.counts["duckdb_misreads_settled"] = reader.counts.get("duckdb_misreads_settled", 0) + 1
            else:
                reader.violations.append(
                    f"snapshot {snap}: after the load we read {ours} (during it {(rows, keysum)}), DuckDB {theirs}"
                )
    finally:
        con.close()


def _percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000, 1)


def summarise(spec: LoadSpec, results: list[RoleResult], elapsed: float, end: dict[str, Any]) -> dict[str, Any]:
    """Figures of a run: per operation kind of our writers the count, ops/s, p50/p99 ms, errors, retries,
    re-plans; DuckDB writers' and maintainers' counts and errors; readers' checks and violations."""
    ours = [o for r in results if r.role == "writer" for o in r.ops]
    by_op: dict[str, Any] = {}
    for op in sorted({o.op for o in ours}):
        records = [o for o in ours if o.op == op]
        times = [o.seconds for o in records if o.error is None]
        by_op[op] = {
            "count": len(records),
            "ok": len(times),
            "p50_ms": _percentile(times, 0.5),
            "p99_ms": _percentile(times, 0.99),
            "errors": sum(1 for o in records if o.error),
            "retries": sum(o.retries for o in records),
            "replans": sum(o.replans for o in records),
        }
    ok = [o.seconds for o in ours if o.error is None]
    figures: dict[str, Any] = {
        "seed": spec.seed,
        "work_dir": spec.work_dir,
        "seconds": spec.seconds,
        "elapsed_s": round(elapsed, 1),
        "writers": spec.writers,
        "duckdb_writers": spec.duckdb_writers,
        "maintainers": list(spec.maintainers),
        "ops": len(ours),
        "ops_per_s": round(len(ok) / spec.seconds, 1),
        "p50_ms": _percentile(ok, 0.5),
        "p99_ms": _percentile(ok, 0.99),
        "errors": sum(1 for o in ours if o.error),
        "error_samples": sorted({o.error for o in ours if o.error})[:5],
        "retries": sum(o.retries for o in ours),
        "replans": sum(o.replans for o in ours),
        "by_op": by_op,
    }
    duck_ops = [o for r in results if r.role == "duckdb_writer" for o in r.ops]
    figures["duckdb_writer_ops"] = len(duck_ops)
    figures["duckdb_writer_errors"] = Counter(o.error for o in duck_ops if o.error)
    figures["duckdb_writer_failed_but_landed"] = sum(
        r.counts.get("failed_but_landed", 0) for r in results if r.role == "duckdb_writer"
    )
    figures["duckdb_writer_short_counts"] = sum(
        r.counts.get("duckdb_short_count", 0) for r in results if r.role == "duckdb_writer"
    )
    figures["duckdb_writer_notes"] = [n for r in results if r.role == "duckdb_writer" for n in r.notes][:10]
    for r in results:
        if r.role.startswith("maintainer"):
            done = figures.setdefault(r.role, {"done": Counter(), "errors": Counter(), "error_samples": []})
            done["done"].update(r.counts)
            for o in r.ops:
                if o.error:
                    done["errors"][o.op] += 1
                    if len(done["error_samples"]) < 3:
                        done["error_samples"].append(o.error)
    readers = [r for r in results if r.role == "reader"]
    figures["reader_checks"] = dict(sum((Counter(r.counts) for r in readers), Counter()))
    figures["violations"] = [v for r in readers for v in r.violations][:20]
    figures["duckdb_misread_samples"] = [n for r in readers for n in r.notes][:5]
    figures["crashes"] = [f"{r.role}-{r.index}: {r.crash}" for r in results if r.crash]
    figures.update(end)
    return json.loads(json.dumps(figures, default=dict))


def problems(figures: dict[str, Any]) -> list[str]:
    """What makes a run fail: anything but an exact end state, or any error of our writers."""
    out = []
    if figures["crashes"]:
        out.append(f"crashed: {figures['crashes']}")
    if not figures["exact"]:
        keys = ("rows_expected", "rows_read", "rows_missing", "rows_unexpected", "rows_doubled", "duckdb_equal")
        out.append(
            f"end state not exact: { {k: figures[k] for k in keys} } missing {figures['missing_sample']}"
            f" unexpected {figures['unexpected_sample']} (op logs of DuckDB writers: {figures.get('work_dir')})"
        )
    if figures["rowids_doubled"]:
        out.append(f"{figures['rowids_doubled']} row ids appear twice")
    if figures["errors"]:
        out.append(f"our writers raised {figures['errors']} times: {figures['error_samples']}")
    if figures["violations"]:
        out.append(f"readers saw: {figures['violations']}")
    if figures["empty_snapshots"]:
        out.append(f"snapshots with no change: {figures['empty_snapshots'][:10]}")
    return out


# --- command line -----------------------------------------------------------------------------------------------


def _role_main(role: str, spec_file: str, index: int, out: str) -> None:
    spec = LoadSpec.load(Path(spec_file))
    try:
        result = ROLES[role](spec, index)
    except BaseException:
        result = RoleResult(role, index, crash=traceback.format_exc())
    Path(out).write_text(json.dumps(asdict(result)))


def main(argv: list[str] | None = None) -> int:
    """``soak``: the long run on each backend (``make soak``); a role name: one process of a run."""
    args = argv if argv is not None else sys.argv[1:]
    if args and args[0] in ROLES:
        _role_main(args[0], args[1], int(args[2]), args[3])
        return 0
    parser = argparse.ArgumentParser(prog="python -m tests.support.load")
    parser.add_argument("command", choices=["soak"])
    parser.add_argument("--seconds", type=float, default=float(os.environ.get("DUCKLAKE_SOAK_SECONDS", "600")))
    parser.add_argument("--writers", type=int, default=12)
    parser.add_argument("--duckdb-writers", type=int, default=0)
    parser.add_argument("--maintainers", default="ours,duckdb")
    parser.add_argument("--readers", type=int, default=1)
    parser.add_argument("--backends", default="sqlite,postgres")
    parser.add_argument("--seed", type=int, default=int(os.environ.get("DUCKLAKE_SOAK_SEED", "1")))
    parser.add_argument("--expire-age", type=float, default=20.0, help="seconds before maintenance expires a snapshot")
    parser.add_argument("--cleanup-age", type=float, default=10.0, help="seconds before it deletes an old file")
    parser.add_argument("--out", default=None, help="append each run's figures as a JSON line to this file")
    opts = parser.parse_args(args)
    failed = False
    for backend in opts.backends.split(","):
        with tempfile.TemporaryDirectory(prefix=f"soak-{backend}-") as tmp:
            with catalog_for(backend, Path(tmp)) as location:
                spec = LoadSpec(
                    location.url,
                    location.duckdb,
                    location.data_path,
                    str(Path(tmp) / "work"),
                    seconds=opts.seconds,
                    seed=opts.seed,
                    writers=opts.writers,
                    duckdb_writers=opts.duckdb_writers,
                    maintainers=tuple(m for m in opts.maintainers.split(",") if m),
                    readers=opts.readers,
                    expire_age_s=opts.expire_age,
                    cleanup_age_s=opts.cleanup_age,
                )
                figures = run_load(spec)
                figures["backend"] = backend
                found = problems(figures)
                if found:  # keep the writers' op logs and the lake to trace the failure back
                    kept = Path(tempfile.gettempdir()) / f"soak-failed-{backend}-{opts.seed}-{os.getpid()}"
                    shutil.copytree(tmp, kept)
                    figures["kept"] = str(kept)
        figures["problems"] = found
        print(json.dumps(figures, indent=1), flush=True)
        if opts.out:
            Path(opts.out).parent.mkdir(parents=True, exist_ok=True)
            with open(opts.out, "a") as f:
                f.write(json.dumps(figures) + "\n")
        failed = failed or bool(found)
    return 1 if failed else 0


class catalog_for:
    """A fresh catalog on ``backend`` under ``folder`` (a new PostgreSQL database, dropped on exit)."""

    def __init__(self, backend: str, folder: Path) -> None:
        self.backend, self.folder = backend, folder
        self._drop: Any = None

    def __enter__(self) -> Any:
        from tests.support.catalogs import (
            create_database,
            drop_database,
            pg_admin_engine,
            postgres_location,
            sqlite_location,
            start_pg_server,
        )

        if self.backend == "sqlite":
            return sqlite_location(self.folder)
        server = start_pg_server()
        admin = pg_admin_engine(server)
        database = create_database(admin)

        def drop() -> None:
            drop_database(admin, database)
            admin.dispose()

        self._drop = drop
        return postgres_location(server, database, self.folder)

    def __exit__(self, *exc: object) -> None:
        if self._drop is not None:
            self._drop()


if __name__ == "__main__":
    sys.exit(main())
