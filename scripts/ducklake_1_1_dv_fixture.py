"""Deletion vectors across snapshots against DuckLake 1.1 itself (DuckDB's development build, ``1.1-dev1``).

Two jobs, both needing the shell ``build-duckdb-ducklake-dev.sh`` builds (``.cache/duckdb-dev/bin/duckdb``; never
committed):

``fixture`` (default): DuckDB 1.1 writes a DuckDB-file lake with ``write_deletion_vectors`` on and runs
``DUCKDB_HISTORY`` (``tests/conformance/test_deletion_vector_history.py``: a data file deleted from in five
snapshots, an UPDATE among them), so its deletes are puffin histories. Written to ``--out``
(``tests/fixtures/ducklake_1_1/dv_history``), relocatable and small:

* ``catalog.duckdb.gz``: the catalog's tables, copied as DuckDB wrote them into a DuckDB file of storage version
  v1.5.0 (so DuckDB 1.5.5 and this library open it as a DuckDB-file catalog; a test copies the rows on into SQLite
  and PostgreSQL catalogs with DuckDB's scanners, which the 1.1 shell lacks);
* ``data/``: the lake's files, paths relative to the data path (``main/t/...``);
* ``answers.json``: DuckDB's own reads, as ``[row count, digest]`` (``answer_digest``): ``id, s`` at each snapshot,
  ``ducklake_table_changes`` over each range of ``feed_ranges``.

``reverse``: we write the same history (``same_history``) into a DuckDB-file lake at 1.1 with this library,
``write_deletion_vectors`` on; the shell reads it at every snapshot and over every range of the feed, and the script
compares with our reads; exit status 1 on a difference.

    .venv/bin/python scripts/ducklake_1_1_dv_fixture.py [fixture|reverse] [--duckdb PATH] [--out DIR]
"""

from __future__ import annotations

import argparse
import gzip
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
from tests.conformance.test_deletion_vector_history import (  # noqa: E402
    DUCKDB_HISTORY,
    FEED,
    answer_digest,
    feed_ranges,
    same_history,
)

DEFAULT_DUCKDB = REPO / ".cache" / "duckdb-dev" / "bin" / "duckdb"
DEFAULT_OUT = REPO / "tests" / "fixtures" / "ducklake_1_1" / "dv_history"
DUCK_FEED = "snapshot_id, rowid, change_type, id, s"


def run(duckdb: Path, sql: str) -> str:
    """Run ``sql`` in the shell (stopping at the first error); its CSV output."""
    done = subprocess.run(
        [str(duckdb), "-bail", "-csv", "-noheader"], input=sql, text=True, capture_output=True, cwd=REPO, check=False
    )
    if done.returncode:
        raise SystemExit(f"duckdb failed ({done.returncode}): {done.stderr.strip()}\n--- sql ---\n{sql}")
    return done.stdout


def attach(catalog: Path, data: Path, *, write_dvs: bool = False) -> str:
    options = f"DATA_PATH '{data}/'" + (", DATA_INLINING_ROW_LIMIT 0, WRITE_DELETION_VECTORS true" if write_dvs else "")
    return f"ATTACH 'ducklake:{catalog}' AS lake ({options});\n"


def read_answers(duckdb: Path, catalog: Path, data: Path, answers: Path) -> list[int]:
    """DuckDB's reads of table ``t`` into ``answers`` as Parquet: ``rows_<s>`` at each snapshot from the table's
    creation on, ``feed_<a>_<b>`` over each range; returns those snapshots."""
    answers.mkdir(parents=True, exist_ok=True)
    out = run(duckdb, attach(catalog, data) + "SELECT snapshot_id FROM lake.snapshots() ORDER BY 1;")
    snapshots = [int(x) for x in out.split() if int(x) >= 1]  # the table exists from snapshot 1 on
    sql = attach(catalog, data)
    for s in snapshots:
        sql += f"COPY (SELECT id, s FROM lake.t AT (VERSION => {s})) TO '{answers / f'rows_{s}.parquet'}';\n"
    for a, b in feed_ranges(snapshots):
        changes = f"ducklake_table_changes('lake', 'main', 't', {a}, {b})"
        sql += f"COPY (SELECT {DUCK_FEED} FROM {changes}) TO '{answers / f'feed_{a}_{b}.parquet'}';\n"
    run(duckdb, sql)
    return snapshots


def fixture(duckdb: Path, out: Path) -> None:
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    with tempfile.TemporaryDirectory() as tmp:
        catalog, data, answers = Path(tmp) / "lake.ducklake", Path(tmp) / "data", Path(tmp) / "answers"
        # zstd: the fixture's files stay small (a compression option only; the deletes are the subject)
        setup = "CALL lake.set_option('parquet_compression', 'zstd');\n"
        run(duckdb, attach(catalog, data, write_dvs=True) + setup + ";\n".join(DUCKDB_HISTORY) + ";\n")
        snapshots = read_answers(duckdb, catalog, data, answers)
        digests = {
            "snapshots": snapshots,
            "rows": {str(s): answer_digest(pq.read_table(answers / f"rows_{s}.parquet")) for s in snapshots},
            "feeds": {
                f"{a}_{b}": answer_digest(pq.read_table(answers / f"feed_{a}_{b}.parquet"))
                for a, b in feed_ranges(snapshots)
            },
        }
        (out / "answers.json").write_text(json.dumps(digests) + "\n")
        copy = Path(tmp) / "catalog.duckdb"
        run(
            duckdb,
            f"ATTACH '{catalog}' AS src (READ_ONLY);\nATTACH '{copy}' AS dst (STORAGE_VERSION 'v1.5.0');\n"
            "COPY FROM DATABASE src TO dst;\n",
        )
        with copy.open("rb") as f, (out / "catalog.duckdb.gz").open("wb") as raw:
            with gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as g:  # mtime 0: the same bytes on a rerun
                shutil.copyfileobj(f, g)
        shutil.copytree(data, out / "data")
    version = run(duckdb, "SELECT library_version || ' (' || source_id || ')' FROM pragma_version();").strip()
    (out / "README.md").write_text(
        f"Written by `scripts/ducklake_1_1_dv_fixture.py fixture` with DuckDB {version} and DuckLake's development "
        "build of 1.1 (`1.1-dev1`): a lake whose deletes are puffin histories, its catalog rows, its files and "
        "digests of DuckDB's own reads. Regenerate with the script; do not edit.\n"
    )
    print(f"wrote {out}: {sum(1 for p in out.rglob('*') if p.is_file())} files")


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
        with lake.engine.begin() as conn:  # the development build knows its own tag only ("Unsupported '1.1'")
            conn.exec_driver_sql("UPDATE ducklake_metadata SET value = '1.1-dev1' WHERE key = 'version'")
        lake.close()
        answers = Path(tmp) / "answers"
        snapshots = read_answers(duckdb, catalog, data, answers)
        lake = pdl.connect(f"ducklake:{catalog}")
        failures = 0
        for s in snapshots:
            ours = answer_digest(lake.scan("main.t", snapshot=s, columns=["id", "s"]))
            theirs = answer_digest(pq.read_table(answers / f"rows_{s}.parquet"))
            if ours != theirs:
                failures += 1
                print(f"snapshot {s}: ours {ours}, DuckDB {theirs}")
        for a, b in feed_ranges(snapshots):
            ours = answer_digest(lake.table_changes("main.t", a, b).select(FEED))
            theirs = answer_digest(pq.read_table(answers / f"feed_{a}_{b}.parquet"))
            if ours != theirs:
                failures += 1
                print(f"feed {a}..{b}: ours {ours}, DuckDB {theirs}")
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
