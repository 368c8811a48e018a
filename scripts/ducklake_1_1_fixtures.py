"""Write the DuckLake 1.1 fixture lakes of ``tests/fixtures/ducklake_1_1/`` with a DuckDB that speaks DuckLake 1.1.

The package index has DuckDB 2.0 but not its ``ducklake`` extension, so the lakes are made by a DuckDB shell with the
extension linked in (DuckLake's development build, ``1.1-dev1``; docs/compatibility.md says how to get one). CI has
no such binary: it reads the committed lakes and compares what this library reads with DuckDB's own answers, recorded
here at generation time.

    python scripts/ducklake_1_1_fixtures.py --duckdb /path/to/duckdb [--out tests/fixtures/ducklake_1_1]

Each scenario is a folder with:

* ``catalog.ducklake.gz``: the DuckLake catalog, a DuckDB database copied into DuckDB 1.5's storage version (the
  development build writes its own, newer one, which the test environment's DuckDB 1.5.5 cannot open; the lake inside
  is DuckLake 1.1, which only the tests' own library reads), gzipped (a DuckDB file is mostly empty blocks);
* ``data/``: the lake's files (the catalog records the absolute data path of the generating machine; tests rewrite
  it to where they copy the folder);
* ``answers.duckdb.gz``: DuckDB's answers, one table per question: ``read_<table>_<snapshot>`` (``SELECT rowid,
  snapshot_id, * FROM t AT (VERSION => s)``) for every snapshot where the table exists, ``changes_<table>_<end>`` (every
  ``ducklake_table_changes(start, end)`` of that end, with the start in ``_start``) and, per scenario, ``rows_<name>``
  of catalog tables; also DuckDB 1.5's storage version;
* ``manifest.json``: the scenario, its statements, its snapshots and tables, and the DuckDB build that wrote it.

The scenarios are plain SQL (``SCENARIOS`` below); a statement that commits makes one snapshot.
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

STORAGE = "v1.5.0"  # DuckDB 1.5 (the tests' DuckDB 1.5.5) opens these files
# catalog tables whose rows the answers keep (row group counts, partition values, view column tags...)
CATALOG_TABLES = (
    "ducklake_metadata",
    "ducklake_data_file",
    "ducklake_delete_file",
    "ducklake_view",
    "ducklake_view_column_tag",
    "ducklake_partition_column",
    "ducklake_file_partition_value",
    "ducklake_snapshot_changes",
)

# name -> (ATTACH options, statements); the lake is attached as `lake`, `USE lake` first.
SCENARIOS: dict[str, tuple[str, list[str]]] = {
    "history": (
        "DATA_INLINING_ROW_LIMIT 10",
        [
            "CREATE TABLE t(id BIGINT, i INTEGER, s VARCHAR, d DECIMAL(18,3), f DOUBLE, b BOOLEAN, dt DATE, "
            'ts TIMESTAMP, tz TIMESTAMPTZ, bl BLOB, u UUID, l INTEGER[], st STRUCT(a INTEGER, "b c" VARCHAR), '
            "m MAP(VARCHAR, INTEGER), row_id VARCHAR)",
            "INSERT INTO t VALUES (1, 1, 'a', 1.5, 1.25, true, DATE '2024-02-29', TIMESTAMP '2024-01-01 10:00:00', "
            "TIMESTAMPTZ '2024-01-01 10:00:00+02', '\\x00\\xff'::BLOB, '00000000-0000-0000-0000-000000000001', "
            "[1, NULL, 3], {'a': 1, 'b c': 'it''s'}, MAP {'k': 1, 'q''uote': NULL}, 'r1'), "
            "(2, NULL, NULL, NULL, 'nan'::DOUBLE, NULL, NULL, NULL, NULL, NULL, NULL, [], NULL, MAP {}, NULL)",
            "INSERT INTO t SELECT i, i::INTEGER, 's' || i, i / 8, i * 0.5, i % 2 = 0, DATE '2020-01-01' + i::INTEGER, "
            "TIMESTAMP '2020-01-01' + INTERVAL (i) HOUR, TIMESTAMPTZ '2020-01-01 00:00:00+00' + INTERVAL (i) MINUTE, "
            "NULL, NULL, [i::INTEGER], {'a': i::INTEGER, 'b c': 'x'}, MAP {'k': i::INTEGER}, 'r' || i "
            "FROM range(100, 300) r(i)",
            "DELETE FROM t WHERE id = 2",
            "DELETE FROM t WHERE id IN (150, 151, 152)",
            "UPDATE t SET s = 'updated' WHERE id IN (1, 200)",
            "ALTER TABLE t ADD COLUMN extra VARCHAR DEFAULT 'dflt'",
            "INSERT INTO t (id, s, extra) VALUES (3, 'three', 'given')",
            "ALTER TABLE t RENAME COLUMN i TO i2",
            "ALTER TABLE t DROP COLUMN f",
            "CALL ducklake_flush_inlined_data('lake')",
            "DELETE FROM t WHERE id BETWEEN 100 AND 109",
            "INSERT INTO t (id, s) SELECT i, 'late' || i FROM range(400, 460) r(i)",
            "CALL ducklake_merge_adjacent_files('lake')",
        ],
    ),
    "deletion_vectors": (
        "DATA_INLINING_ROW_LIMIT 0, WRITE_DELETION_VECTORS true",
        [
            "CREATE TABLE t(id INTEGER, s VARCHAR)",
            "INSERT INTO t SELECT i, 's' || i FROM range(3000) r(i)",
            "DELETE FROM t WHERE id % 7 = 0",
            "DELETE FROM t WHERE id IN (1, 2999)",
            "UPDATE t SET s = 'u' WHERE id = 2",
            "DELETE FROM t WHERE id % 11 = 0",
        ],
    ),
    "partitions": (
        "DATA_INLINING_ROW_LIMIT 0",
        [
            "CREATE TABLE e(id BIGINT, ts TIMESTAMP, tz TIMESTAMPTZ, d DATE, k VARCHAR)",
            "ALTER TABLE e SET PARTITIONED BY (epoch_day(ts), epoch_month(tz), bucket(4, id))",
            "INSERT INTO e SELECT i, TIMESTAMP '1969-12-30 22:00:00' + INTERVAL (i * 7) HOUR, "
            "TIMESTAMPTZ '1969-11-30 23:30:00+00' + INTERVAL (i * 11) DAY, DATE '1968-12-31' + i::INTEGER * 40, "
            "'k' || (i % 3) FROM range(40) r(i)",
            "INSERT INTO e VALUES (100, NULL, NULL, NULL, NULL)",
            "ALTER TABLE e SET PARTITIONED BY (epoch_year(d), epoch_hour(ts), bucket(3, k))",
            "INSERT INTO e SELECT i, TIMESTAMP '2024-02-29 23:59:59' + INTERVAL (i) HOUR, NULL, "
            "DATE '1970-01-01' + i::INTEGER * 200, 'z' || i FROM range(200, 220) r(i)",
            "DELETE FROM e WHERE id % 5 = 0",
        ],
    ),
    "duckdb2_on_1_0": (
        "DUCKLAKE_VERSION '1.0', DATA_INLINING_ROW_LIMIT 10",
        [
            "CREATE TABLE t(id INTEGER, s VARCHAR)",
            "INSERT INTO t SELECT i, 's' || i FROM range(0, 50) r(i)",
            "INSERT INTO t SELECT i, 's' || i FROM range(50, 100) r(i)",
            "DELETE FROM t WHERE id < 50",
            "ALTER TABLE t ADD COLUMN x INTEGER",
            "INSERT INTO t SELECT i, 's' || i, i FROM range(100, 160) r(i)",
            "CALL ducklake_merge_adjacent_files('lake')",
            "MERGE INTO t USING (SELECT 100 AS id, 'merged' AS s UNION ALL SELECT 1000, 'new') src ON t.id = src.id "
            "WHEN MATCHED THEN UPDATE SET s = src.s WHEN NOT MATCHED THEN INSERT (id, s) VALUES (src.id, src.s)",
            "DELETE FROM t WHERE id BETWEEN 150 AND 159",
        ],
    ),
    "sorted_row_id": (
        "DATA_INLINING_ROW_LIMIT 10",
        [
            'CREATE TABLE s(row_id VARCHAR, "begin_snapshot" INTEGER, k INTEGER, v DOUBLE)',
            "ALTER TABLE s SET SORTED BY (k DESC NULLS FIRST, v)",
            "INSERT INTO s VALUES ('a', 1, 3, 1.5), ('b', 2, NULL, 'nan'), ('c', 3, 3, -0.0), ('d', 4, 1, 0.0)",
            "INSERT INTO s SELECT 'r' || i, i, i % 7, i / 3 FROM range(100, 140) r(i)",
            "UPDATE s SET v = 9 WHERE k = 3",
            "CALL ducklake_flush_inlined_data('lake')",
            "DELETE FROM s WHERE k = 1",
        ],
    ),
    # a 1.0 catalog the build migrates to 1.1 (ATTACH ... (AUTOMATIC_MIGRATION true)) after these statements; the
    # catalog before the migration is kept as before.ducklake.gz
    "migration": (
        "DUCKLAKE_VERSION '1.0', DATA_INLINING_ROW_LIMIT 10",
        [
            "CREATE TABLE t(id INTEGER, s VARCHAR, r INTEGER)",
            "INSERT INTO t VALUES (1, 'a', 10), (2, 'b', 20)",
            "ALTER TABLE t ADD COLUMN x INTEGER",
            "INSERT INTO t VALUES (3, 'c', 30, 3)",
            "INSERT INTO t SELECT i, 's' || i, i, i FROM range(100, 130) r(i)",
            "DELETE FROM t WHERE id IN (1, 120)",
            "CREATE TABLE u(k VARCHAR)",
            "INSERT INTO u VALUES ('x')",
        ],
    ),
    "view_tags": (
        "",
        [
            "CREATE TABLE base(id INTEGER, v VARCHAR)",
            "INSERT INTO base VALUES (1, 'a'), (2, 'b')",
            "CREATE VIEW w AS SELECT id AS ident, v FROM base",
            "COMMENT ON COLUMN w.ident IS 'the id'",
            "COMMENT ON VIEW w IS 'a view'",
            "DROP VIEW w",
        ],
    ),
}


def run(duckdb: str, sql: str, cwd: Path) -> str:
    proc = subprocess.run(
        [duckdb, "-batch", "-csv", "-noheader", "-bail"], input=sql, capture_output=True, text=True, cwd=cwd
    )
    if proc.returncode != 0 or "Error" in proc.stderr:
        raise SystemExit(f"duckdb failed:\n{sql}\n---\n{proc.stdout}\n{proc.stderr}")
    return proc.stdout


def attach(folder: Path, options: str) -> str:
    opts = f"DATA_PATH '{folder}/data/'" + (f", {options}" if options else "")
    return f"ATTACH 'ducklake:{folder}/dev.ducklake' AS lake ({opts});\nUSE lake;\n"


def convert(duckdb: str, folder: Path, source: str, target: str) -> None:
    """Copy the DuckDB database ``source`` into ``target`` written in DuckDB 1.5's storage version."""
    run(
        duckdb,
        f"ATTACH '{folder}/{source}' AS src (READ_ONLY);\n"
        f"ATTACH '{folder}/{target}' AS dst (STORAGE_VERSION '{STORAGE}');\n"
        "COPY FROM DATABASE src TO dst;\n",
        folder,
    )


def query(duckdb: str, folder: Path, options: str, sql: str) -> list[list[str]]:
    out = run(duckdb, attach(folder, options) + sql, folder)
    return [line.split(",") for line in out.splitlines() if line]


def generate(duckdb: str, name: str, options: str, statements: list[str], out: Path) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / name
        (folder / "data").mkdir(parents=True)
        snapshots = []
        for sql in statements:
            run(duckdb, attach(folder, options) + sql + ";\n", folder)
            (last,) = query(duckdb, folder, options, "SELECT max(snapshot_id) FROM lake.snapshots();")
            snapshots.append((sql, int(last[0])))
        if name == "migration":
            convert(duckdb, folder, "dev.ducklake", "before.ducklake")
            options = options.replace("DUCKLAKE_VERSION '1.0'", "AUTOMATIC_MIGRATION true")
            run(duckdb, attach(folder, options) + "SELECT 1;\n", folder)
            options = options.replace("AUTOMATIC_MIGRATION true", "").strip(", ")
        last = snapshots[-1][1]
        # every table that ever existed, with the snapshots at which it did (a dropped table cannot be read after)
        lives = query(
            duckdb,
            folder,
            options,
            "SELECT table_name, min(begin_snapshot), max(coalesce(end_snapshot, 4611686018427387904)) "
            "FROM __ducklake_metadata_lake.ducklake_table GROUP BY table_name ORDER BY table_name;",
        )
        answers = [f"ATTACH '{folder}/answers.duckdb' AS answers (STORAGE_VERSION '{STORAGE}');"]
        tables = {}
        for table, begin, end_text in lives:
            first, stop = int(begin), min(int(end_text) - 1, last)
            tables[table] = [first, stop]
            for s in range(first, stop + 1):
                answers.append(
                    f"CREATE TABLE answers.read_{table}_{s} AS SELECT rowid, snapshot_id, * FROM lake.{table} "
                    f"AT (VERSION => {s});"
                )
            for end in range(first, stop + 1):
                union = " UNION ALL ".join(
                    f"SELECT {start} AS _start, * FROM ducklake_table_changes('lake', 'main', '{table}', {start}, "
                    f"{end})"
                    for start in range(first, end + 1)
                )
                answers.append(f"CREATE TABLE answers.changes_{table}_{end} AS {union};")
        ((version,),) = query(
            duckdb,
            folder,
            options,
            "SELECT value FROM __ducklake_metadata_lake.ducklake_metadata WHERE key = 'version';",
        )
        present = set(CATALOG_TABLES) - ({"ducklake_view_column_tag"} if version == "1.0" else set())
        for table in (t for t in CATALOG_TABLES if t in present):  # a 1.0 catalog has no view column tags
            answers.append(f"CREATE TABLE answers.rows_{table} AS SELECT * FROM __ducklake_metadata_lake.{table};")
        run(duckdb, attach(folder, options) + "\n".join(answers) + "\n", folder)
        # the catalog in DuckDB 1.5's storage version (the dev build's own is newer; the tests' DuckDB is 1.5.5)
        convert(duckdb, folder, "dev.ducklake", "catalog.ducklake")
        (folder / "dev.ducklake").unlink()
        for path in (folder / n for n in ("catalog.ducklake", "answers.duckdb", "before.ducklake")):
            if not path.exists():
                continue  # mostly empty blocks: kept gzipped
            with path.open("rb") as raw, gzip.open(f"{path}.gz", "wb", compresslevel=9) as packed:
                shutil.copyfileobj(raw, packed)
            path.unlink()
        version = run(duckdb, "SELECT library_version || ' ' || source_id FROM pragma_version();", folder).strip()
        manifest = {
            "scenario": name,
            "attach_options": options,
            "statements": [{"sql": sql, "snapshot": snap} for sql, snap in snapshots],
            "tables": tables,
            "last_snapshot": last,
            "data_path": f"{folder}/data/",
            "duckdb": version,
        }
        (folder / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
        target = out / name
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(folder, target)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--duckdb",
        required=True,
        type=lambda p: str(Path(p).resolve()),
        help="a DuckDB shell with the ducklake extension of DuckLake 1.1",
    )
    parser.add_argument("--out", default=str(Path(__file__).resolve().parents[1] / "tests/fixtures/ducklake_1_1"))
    parser.add_argument("scenarios", nargs="*", default=list(SCENARIOS))
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for name in args.scenarios:
        options, statements = SCENARIOS[name]
        generate(args.duckdb, name, options, statements, out)
        print(f"wrote {out / name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
