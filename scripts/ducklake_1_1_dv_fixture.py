"""Deletion vectors across snapshots against DuckLake 1.1 itself (DuckDB's development build, ``1.1-dev1``).

Two jobs, both needing the shell ``build-duckdb-ducklake-dev.sh`` builds (``.cache/duckdb-dev/bin/duckdb``; never
committed):

``fixture`` (default): DuckDB 1.1 writes a DuckDB-file lake with ``write_deletion_vectors`` on, a data file deleted
from in five snapshots (an UPDATE among them), so its deletes are puffin histories. Written to ``--out``
(``tests/fixtures/ducklake_1_1/dv_history``), relocatable and small:

* ``catalog.duckdb``: the catalog's tables, copied as DuckDB wrote them into a DuckDB file of storage version
  v1.5.0 (so DuckDB 1.5.5 and this library open it as a DuckDB-file catalog; a test copies the rows on into SQLite
  or PostgreSQL catalogs with DuckDB's scanners, which the 1.1 shell lacks);
* ``data/``: the lake's files, paths relative to the data path (``main/t/...``);
* ``answers/rows_<snapshot>.parquet`` (``id, s`` at each snapshot), ``answers/feed_<start>_<end>.parquet``
  (``ducklake_table_changes`` of each range) and ``answers/snapshots.json``: DuckDB's own reads.

``reverse``: we write the same history into a DuckDB-file lake at 1.1 (this library, ``write_deletion_vectors`` on),
the shell reads it at every snapshot and over every range of the feed, and the script compares with our reads;
exit status 1 on a difference.

    .venv/bin/python scripts/ducklake_1_1_dv_fixture.py [fixture|reverse] [--duckdb PATH] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pyarrow.parquet as pq

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import pyspark_ducklake as pdl  # noqa: E402
from tests.conformance.test_deletion_vector_history import DUCKDB_HISTORY, same_history  # noqa: E402

DEFAULT_DUCKDB = REPO / ".cache" / "duckdb-dev" / "bin" / "duckdb"
DEFAULT_OUT = REPO / "tests" / "fixtures" / "ducklake_1_1" / "dv_history"

FEED = "snapshot_id, rowid, change_type, id, s"


def run(duckdb: Path, sql: str, cwd: Path) -> str:
    """Run ``sql`` in the shell (stopping at the first error); its CSV output."""
    done = subprocess.run(
        [str(duckdb), "-bail", "-csv", "-noheader"], input=sql, text=True, capture_output=True, cwd=cwd, check=False
    )
    if done.returncode:
        raise SystemExit(f"duckdb failed ({done.returncode}): {done.stderr.strip()}\n--- sql ---\n{sql}")
    return done.stdout


def attach(catalog: Path, data: Path, *, write_dvs: bool) -> str:
    options = f"DATA_PATH '{data}/'" + (", DATA_INLINING_ROW_LIMIT 0, WRITE_DELETION_VECTORS true" if write_dvs else "")
    return f"ATTACH 'ducklake:{catalog}' AS lake ({options});\n"


def feed_ranges(snapshots: list[int]) -> list[tuple[int, int]]:
    """Each snapshot alone, every start up to the last snapshot, and everything before the last."""
    pairs = {(s, s) for s in snapshots} | {(s, snapshots[-1]) for s in [0, *snapshots]} | {(0, snapshots[-2])}
    return sorted(pairs)


def read_answers(duckdb: Path, catalog: Path, data: Path, answers: Path) -> list[int]:
    """DuckDB's reads of table ``t`` into ``answers``: rows at each snapshot, the feed of each range."""
    answers.mkdir(parents=True, exist_ok=True)
    out = run(
        duckdb, attach(catalog, data, write_dvs=False) + "SELECT snapshot_id FROM lake.snapshots() ORDER BY 1;", REPO
    )
    snapshots = [int(x) for x in out.split()]
    readable = [s for s in snapshots if s >= 1]  # the table exists from snapshot 1 on
    sql = attach(catalog, data, write_dvs=False)
    for s in readable:
        target = answers / f"rows_{s}.parquet"
        sql += f"COPY (SELECT id, s FROM lake.t AT (VERSION => {s}) ORDER BY ALL) TO '{target}';\n"
    for a, b in feed_ranges(readable):
        target = answers / f"feed_{a}_{b}.parquet"
        changes = f"ducklake_table_changes('lake', 'main', 't', {a}, {b})"
        sql += f"COPY (SELECT {FEED} FROM {changes} ORDER BY ALL) TO '{target}';\n"
    run(duckdb, sql, REPO)
    (answers / "snapshots.json").write_text(json.dumps(readable) + "\n")
    return readable


def fixture(duckdb: Path, out: Path) -> None:
    if out.exists():
        shutil.rmtree(out)
    with tempfile.TemporaryDirectory() as tmp:
        catalog, data = Path(tmp) / "lake.ducklake", Path(tmp) / "data"
        run(duckdb, attach(catalog, data, write_dvs=True) + ";\n".join(DUCKDB_HISTORY) + ";\n", REPO)
        read_answers(duckdb, catalog, data, out / "answers")
        copy = out / "catalog.duckdb"
        run(
            duckdb,
            f"ATTACH '{catalog}' AS src (READ_ONLY);\nATTACH '{copy}' AS dst (STORAGE_VERSION 'v1.5.0');\n"
            "COPY FROM DATABASE src TO dst;\n",
            REPO,
        )
        shutil.copytree(data, out / "data")
    version = run(duckdb, "SELECT library_version, source_id FROM pragma_version();", REPO).strip()
    (out / "README.md").write_text(
        "Written by `scripts/ducklake_1_1_dv_fixture.py fixture` with DuckDB " + version + " and DuckLake's "
        "development build of 1.1 (`1.1-dev1`): a lake whose deletes are puffin histories, its catalog rows, its "
        "files and DuckDB's own answers. Regenerate with the script; do not edit.\n"
    )
    print(f"wrote {out}: {sum(1 for _ in out.rglob('*'))} files")


def reverse(duckdb: Path) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        catalog, data = Path(tmp) / "ours.ducklake", Path(tmp) / "data"
        lake = pdl.connect(f"ducklake:{catalog}", f"{data}/", data_inlining_row_limit=0, format_version="1.1")
        with lake.engine.begin() as conn:
            conn.exec_driver_sql(
                "INSERT INTO ducklake_metadata (key, value, scope, scope_id) VALUES "
                "('write_deletion_vectors', 'true', NULL, NULL)"
            )
        same_history(lake)
        lake.close()
        answers = Path(tmp) / "answers"
        snapshots = read_answers(duckdb, catalog, data, answers)
        lake = pdl.connect(f"ducklake:{catalog}")
        failures = 0
        for s in snapshots:
            ours = lake.scan("main.t", snapshot=s, columns=["id", "s"]).sort_by(
                [("id", "ascending"), ("s", "ascending")]
            )
            theirs = pq.read_table(answers / f"rows_{s}.parquet").cast(ours.schema)
            if not ours.equals(theirs):
                failures += 1
                print(f"snapshot {s}: ours {ours.num_rows} rows, DuckDB {theirs.num_rows}")
        for a, b in feed_ranges(snapshots):
            cols = ["_snapshot_id", "_rowid", "_change_type", "id", "s"]
            ours = lake.table_changes("main.t", a, b).select(cols)
            ours = ours.sort_by([(c, "ascending") for c in cols])
            theirs = pq.read_table(answers / f"feed_{a}_{b}.parquet").rename_columns(cols).cast(ours.schema)
            if not ours.equals(theirs.sort_by([(c, "ascending") for c in cols])):
                failures += 1
                print(f"feed {a}..{b}: ours {ours.num_rows} rows, DuckDB {theirs.num_rows}")
        print(f"{len(snapshots)} snapshots, {len(feed_ranges(snapshots))} feed ranges: {failures} differ")
        return 1 if failures else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("job", nargs="?", choices=["fixture", "reverse"], default="fixture")
    parser.add_argument("--duckdb", type=Path, default=DEFAULT_DUCKDB, help="the 1.1 shell (default: %(default)s)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="fixture folder (default: %(default)s)")
    args = parser.parse_args()
    if not args.duckdb.exists():
        raise SystemExit(f"{args.duckdb} does not exist: build it with build-duckdb-ducklake-dev.sh first")
    if args.job == "reverse":
        return reverse(args.duckdb.resolve())
    fixture(args.duckdb.resolve(), args.out.resolve())
    return 0


if __name__ == "__main__":
    sys.exit(main())
