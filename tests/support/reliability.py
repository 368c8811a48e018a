"""Print the docs' "Reliability" figures from the fault tests' last runs (``.cache/reliability/*.json``).

    .venv/bin/python -m pytest tests/integration/test_faults_*.py tests/unit/test_bad_input.py
    .venv/bin/python -m tests.support.reliability            # --write: into docs/reliability.md

Each fault test writes its figures when it passes (``tests.support.faults.record_figures``); a test that did not run
shows as "not run".
"""

from __future__ import annotations

import json
import sys
from typing import Any

from tests.support import doc_blocks
from tests.support.bad_inputs import CASES
from tests.support.faults import FIGURES_DIR

BLOCK = "reliability-figures"  # its markers: docs/reliability.md (tests.support.doc_blocks finds them)


def load(name: str) -> dict[str, Any] | None:
    path = FIGURES_DIR / f"{name}.json"
    return json.loads(path.read_text()) if path.exists() else None


def table() -> str:
    soak, outage, contention = load("crash_soak"), load("catalog_outage"), load("contention")
    rows: list[tuple[str, str, str]] = []
    if soak:
        moments = ", ".join(
            f"{v} {'at random moments' if k == 'random moment' else k.replace('_', ' ')}"
            for k, v in sorted(soak["kills_by_moment"].items())
        )
        rows.append(
            (
                "crashes survived (driver and JVM SIGKILLed, restarted from the checkpoint)",
                str(soak["kills"]),
                f"crash soak, PostgreSQL catalog: {moments}; {soak['micro_batches']} micro-batches, "
                f"{soak['rows']} rows, seed {soak['seed']}",
            )
        )
    else:
        rows.append(("crashes survived", "not run", "crash soak"))
    if outage:
        rows.append(
            (
                "catalog outage survived (PostgreSQL stopped mid-stream)",
                f"{outage['outage_seconds']:g} s",
                f"catalog outage: one stream waited and continued (commits paused "
                f"{outage['patient_longest_commit_gap_s']:g} s)"
                + (
                    f', so did `writeStream.format("ducklake")` ({outage["writer_longest_commit_gap_s"]:g} s)'
                    if "writer_longest_commit_gap_s" in outage
                    else ""
                )
                + f", one failed with `CatalogUnreachableError` and continued after a restart; {outage['rows']} rows",
            )
        )
    else:
        rows.append(("catalog outage survived", "not run", "catalog outage"))
    if contention:
        retries = contention["retries_total"]
        rows.append(
            (
                "concurrent writers on one table, plus compaction and flushes",
                f"{contention['writers']} for {contention['seconds']:g} s",
                f"contention: 2 streams, 2 batch appenders, {contention['merges']} compactions, "
                f"{contention['flushes']} flushes; {contention['typed_failures']} typed failures "
                f"({', '.join(contention['failures_by_type']) or 'none'})",
            )
        )
        rows.append(
            (
                "commits per second held",
                f"{contention['commits_per_second']:g}",
                f"contention: {contention['commits']} commits, {retries} retries after collisions",
            )
        )
    else:
        rows.append(("concurrent writers", "not run", "contention"))
    loads = [r for r in (load("load_sqlite"), load("load_postgres")) if r]
    for r in loads:
        backend = "SQLite" if r["backend"] == "sqlite" else "PostgreSQL"
        m = r["maintainer_ours"]["done"]
        rows.append(
            (
                f"writer processes appending, deleting and overwriting beside maintenance, {backend}",
                f"{r['writers']} + 1 DuckDB for {r['seconds']:g} s",
                f"load: {r['ops']} operations of ours ({r['ops_per_s']:g}/s, p99 {r['p99_ms']:g} ms), "
                f"{r['errors']} raised, {r['replans']} deletes planned again; our maintenance {m.get('flush', 0)} "
                f"flushes and {m.get('merge', 0)} merges, DuckDB's beside it; the reader checked "
                f"{r['reader_checks'].get('reads', 0)} snapshots against DuckDB, time travel and the change feed",
            )
        )
    rows.append(("bad inputs tried", str(len(CASES)), "the [Bad input](errors.md#bad-input) table, one test each"))
    runs = [r for r in (soak, outage, contention) if r]
    lost = sum(r["rows_lost"] for r in runs) + sum(r["rows_missing"] for r in loads)
    doubled = sum(r["rows_duplicated"] for r in runs) + sum(r["rows_doubled"] for r in loads)
    total = sum(r["rows"] for r in runs) + sum(r["rows_expected"] for r in loads)
    rows.append(("rows lost", str(lost), f"of {total} rows written in the fault tests; DuckDB read the same"))
    rows.append(("rows duplicated", str(doubled), "exact comparison of ids with the source, here and in DuckDB"))
    lines = ["| figure | value | how |", "|---|---|---|"]
    lines += [f"| {a} | {b} | {c} |" for a, b, c in rows]
    return "\n".join(lines)


def write_docs() -> None:
    for path in doc_blocks.write({BLOCK: table()}):
        print(f"wrote {path}")


if __name__ == "__main__":
    if "--write" in sys.argv[1:]:
        write_docs()
    else:
        print(table())
