"""The floor under a write of the history benchmark: one operation alone on kept lakes, interleaved.

A write cannot be run twice the same, so ``history_bench.py`` cannot replay it as it replays reads. This runs the
operation (after its untimed setup) on each given catalog in turn, alternating which goes first, and times it whole
and statement by statement on the client (SQLAlchemy events), then prints the medians and the statements whose
time changed most between the first catalog and the second. ``--after-merge`` runs the lake's default merge
(untimed) before each setup, as the benchmark's round does before the lake's next round::

    python bench/history_bench.py --sizes 1000,1000000 --backends postgres --work /tmp/hb --keep --no-expire
    python bench/history_write_profile.py flush URL_OF_1K URL_OF_1M

The setups and the timed calls are the benchmark's own (``history_bench.operations``), after its upkeep of each
lake (``Subject.upkeep``: ``VACUUM ANALYZE`` of a PostgreSQL catalog).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository: the builder lives in tests/support

from history_bench import Subject, backend_of, operations
from sqlalchemy import event
from sqlalchemy.engine import make_url

from tests.support.history import STREAM

OPS = {"flush": "flush", "merge-small": "merge, new small files"}  # history_bench.py's operations, by name


class Timed:
    """One kept lake, and the client time of each statement while ``on``."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.subject = Subject(url, {"url": url, "backend": backend_of(url), "data_path": None}, 0)
        self.lake = self.subject.lake
        self.subject.upkeep()  # as the benchmark does before timing a lake
        self.on = False
        self.statements: list[tuple[str, float]] = []
        self.totals: list[float] = []
        self.rounds: list[list[tuple[str, float]]] = []
        event.listen(self.lake.engine, "before_cursor_execute", self._before)
        event.listen(self.lake.engine, "after_cursor_execute", self._after)

    def _before(self, conn: Any, *_: Any) -> None:
        conn.info["profile_started"] = time.perf_counter()

    def _after(self, conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        if self.on:
            self.statements.append((" ".join(statement.split()), time.perf_counter() - conn.info["profile_started"]))

    def setup(self, op: str, after_merge: bool) -> Callable[[], object]:
        if after_merge:
            self.lake.merge_adjacent_files(STREAM)
        call = operations(None)[OPS[op]](self.subject)  # the benchmark's own setup; it hands back the timed call
        assert callable(call)
        return call

    def run(self, call: Callable[[], object], keep: bool) -> None:
        self.statements, self.on = [], True
        started = time.perf_counter()
        call()
        elapsed = time.perf_counter() - started
        self.on = False
        if keep:
            self.totals.append(elapsed)
            self.rounds.append(self.statements)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("op", choices=sorted(OPS))
    p.add_argument("urls", nargs="+", help="catalog URLs of kept lakes, the baseline first")
    p.add_argument("--rounds", type=int, default=40)
    p.add_argument("--after-merge", action="store_true", help="run the lake's default merge before each setup")
    args = p.parse_args(argv)
    lakes = [Timed(url) for url in args.urls]
    for rnd in range(args.rounds + 2):  # two warm-up rounds
        for lake in lakes if rnd % 2 == 0 else lakes[::-1]:
            lake.run(lake.setup(args.op, args.after_merge), keep=rnd >= 2)
    for lake in lakes:
        sql = statistics.median(sum(s for _, s in r) for r in lake.rounds)
        total = statistics.median(lake.totals)
        ratio = total / statistics.median(lakes[0].totals)
        print(
            f"{make_url(lake.url).render_as_string(hide_password=True)}: {total * 1e3:.2f} ms ({ratio:.2f}x),"
            f" statements {sql * 1e3:.2f} ms, {sorted({len(r) for r in lake.rounds})} statements"
        )
    if len(lakes) == 2 and all(len({len(r) for r in lake.rounds}) == 1 for lake in lakes):
        base, other = lakes
        rows = []
        for i, (text, _) in enumerate(base.rounds[0]):
            a = statistics.median(r[i][1] for r in base.rounds)
            b = statistics.median(r[i][1] for r in other.rounds)
            rows.append((b - a, a, b, text))
        print(
            f"statement medians summed: {sum(r[1] for r in rows) * 1e3:.2f} -> {sum(r[2] for r in rows) * 1e3:.2f} ms"
        )
        for delta, a, b, text in sorted(rows, reverse=True)[:10]:
            print(f"{delta * 1e3:+7.2f} ms  {a * 1e3:6.2f} -> {b * 1e3:6.2f}  {text[:110]}")
    for lake in lakes:
        lake.subject.history.close()
        lake.lake.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
