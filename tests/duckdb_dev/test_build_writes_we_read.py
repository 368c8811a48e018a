"""DuckLake's 1.1 build writes a lake; we read every table at every snapshot and ``ducklake_table_changes`` over
every range as it does; then its ``ducklake_expire_snapshots`` + ``ducklake_cleanup_old_files`` and ours, each on a
copy, leave the same catalog rows (``ducklake_view_column_tag`` among them) and the same files, and the expired
lakes read alike again.

The build's catalog is in DuckDB's newest storage; we read a copy in DuckDB 1.5's (``DevBuild.convert``).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import duckdb
import pytest

import pyspark_ducklake as pdl
from pyspark_ducklake.duckdb_attach import sql_string
from tests.duckdb_dev.build import DevBuild, attach_sql
from tests.duckdb_dev.reads import differences, questions, table_lives

OPTIONS = "DATA_INLINING_ROW_LIMIT 10"

# One statement, one snapshot (the shell commits each).
HISTORY = [
    "CREATE TABLE t(id BIGINT, s VARCHAR, d DECIMAL(18,3), f DOUBLE, ts TIMESTAMP, tz TIMESTAMPTZ, l INTEGER[], "
    'st STRUCT(a INTEGER, "b c" VARCHAR), m MAP(VARCHAR, INTEGER), row_id VARCHAR)',
    "INSERT INTO t VALUES (1, 'a''\"', 1.5, 'nan', TIMESTAMP '2024-02-29 10:00:00', TIMESTAMPTZ '2024-01-01 "
    "10:00:00+02', [1, NULL], {'a': 1, 'b c': 'it''s'}, MAP {'k': 1}, 'r1'), "
    "(2, NULL, NULL, -0.0, NULL, NULL, [], NULL, MAP {}, NULL)",
    "INSERT INTO t SELECT i, 's' || i, i / 8, i * 0.5, TIMESTAMP '2020-01-01' + INTERVAL (i) HOUR, "
    "TIMESTAMPTZ '1969-12-31 23:00:00+00' + INTERVAL (i) MINUTE, [i::INTEGER], {'a': i::INTEGER, 'b c': 'x'}, "
    "MAP {'k': i::INTEGER}, 'r' || i FROM range(100, 300) r(i)",
    "DELETE FROM t WHERE id = 2",  # an inlined row
    "DELETE FROM t WHERE id IN (150, 151)",  # inlined deletes of a file's rows
    "DELETE FROM t WHERE id BETWEEN 200 AND 240",  # a delete file
    "UPDATE t SET s = 'updated' WHERE id IN (1, 120, 260)",
    "MERGE INTO t USING (SELECT 100 AS id, 'merged' AS s UNION ALL SELECT 1000, 'new' UNION ALL SELECT 1, 'again') "
    "src ON t.id = src.id WHEN MATCHED THEN UPDATE SET s = src.s WHEN NOT MATCHED THEN INSERT (id, s) "
    "VALUES (src.id, src.s)",
    "ALTER TABLE t ADD COLUMN extra VARCHAR DEFAULT 'dflt'",
    "INSERT INTO t (id, s, extra) VALUES (3, 'three', 'given')",
    "ALTER TABLE t RENAME COLUMN s TO s2",
    "ALTER TABLE t DROP COLUMN f",
    "CALL ducklake_flush_inlined_data('lake')",
    "DELETE FROM t WHERE id BETWEEN 100 AND 115",
    "INSERT INTO t (id, s2) SELECT i, 'late' || i FROM range(400, 460) r(i)",
    "CALL ducklake_merge_adjacent_files('lake')",
    "CALL ducklake_rewrite_data_files('lake', 't', delete_threshold => 0)",
    "UPDATE t SET extra = 'after' WHERE id IN (3, 401)",
    # deletion vectors of several snapshots (deletes too large to inline), an update among them
    "CREATE TABLE dv(id INTEGER, s VARCHAR)",
    "CALL lake.set_option('write_deletion_vectors', true, table_name => 'dv')",
    "INSERT INTO dv SELECT i, 's' || i FROM range(3000) r(i)",
    "DELETE FROM dv WHERE id % 7 = 0",
    "DELETE FROM dv WHERE id BETWEEN 1000 AND 1100",
    "UPDATE dv SET s = 'u' WHERE id BETWEEN 2000 AND 2050",
    "DELETE FROM dv WHERE id % 11 = 0",
    # epoch_* and bucket partitions, changed once
    "CREATE TABLE e(id BIGINT, ts TIMESTAMP, tz TIMESTAMPTZ, d DATE, k VARCHAR)",
    "ALTER TABLE e SET PARTITIONED BY (epoch_day(ts), epoch_month(tz), bucket(4, id))",
    "INSERT INTO e SELECT i, TIMESTAMP '1969-12-30 22:00:00' + INTERVAL (i * 7) HOUR, TIMESTAMPTZ '1969-11-30 "
    "23:30:00+00' + INTERVAL (i * 11) DAY, DATE '1968-12-31' + i::INTEGER * 40, 'k' || (i % 3) FROM range(40) r(i)",
    "ALTER TABLE e SET PARTITIONED BY (epoch_year(d), epoch_hour(ts), bucket(3, k))",
    "INSERT INTO e SELECT i, TIMESTAMP '2024-02-29 23:59:59' + INTERVAL (i) HOUR, NULL, DATE '1970-01-01' + "
    "i::INTEGER * 200, 'z' || i FROM range(200, 220) r(i)",
    "DELETE FROM e WHERE id % 5 = 0",
    # a sorted table with a column named row_id, flushed and merged
    'CREATE TABLE srt(row_id VARCHAR, "begin_snapshot" INTEGER, k INTEGER, v DOUBLE)',
    "ALTER TABLE srt SET SORTED BY (k DESC NULLS FIRST, v)",
    "INSERT INTO srt VALUES ('a', 1, 3, 1.5), ('b', 2, NULL, 'nan'), ('c', 3, 3, -0.0), ('d', 4, 1, 0.0)",
    "INSERT INTO srt SELECT 'r' || i, i, i % 7, i / 3 FROM range(100, 140) r(i)",
    "CALL ducklake_flush_inlined_data('lake')",
    "CALL ducklake_merge_adjacent_files('lake')",
    "DROP TABLE srt",
    # a view with column comments, dropped
    "CREATE VIEW w AS SELECT id AS ident, s2 FROM t",
    "COMMENT ON COLUMN w.ident IS 'the id'",
    "COMMENT ON VIEW w IS 'a view'",
    "DROP VIEW w",
    "CREATE VIEW w2 AS SELECT id FROM dv",
    "COMMENT ON COLUMN w2.id IS 'kept'",
    "INSERT INTO t (id, s2) VALUES (9000, 'last')",
]


def build_lake(build: DevBuild, folder: Path) -> Path:
    """The build's lake in ``folder`` (catalog ``lake.ducklake``, files in ``data/``) after :data:`HISTORY`."""
    folder.mkdir(parents=True)
    catalog = folder / "lake.ducklake"
    build.run(attach_sql(catalog, f"{folder}/data/", options=OPTIONS) + "USE lake;\n" + ";\n".join(HISTORY) + ";\n")
    return catalog


def copy_lake(build: DevBuild, catalog: Path, folder: Path, *, convert: bool) -> Path:
    """The lake of ``catalog`` copied to ``folder`` (its data path there); its catalog in DuckDB 1.5's storage when
    ``convert``, else still in the build's."""
    shutil.copytree(catalog.parent / "data", folder / "data")
    target = folder / "lake.ducklake"
    data_path = f"UPDATE c.ducklake_metadata SET value = {sql_string(f'{folder}/data/')} WHERE key = 'data_path';\n"
    if convert:
        build.convert(catalog, target)
        con = duckdb.connect(str(target))
        try:
            con.execute(data_path.replace("c.", ""))
        finally:
            con.close()
    else:
        shutil.copy(catalog, target)
        build.run(f"ATTACH {sql_string(str(target))} AS c;\n{data_path}")
    return target


def catalog_rows(path: Path) -> dict[str, list[tuple[object, ...]]]:
    """Every table of a catalog (in DuckDB 1.5's storage) with its rows, sorted."""
    con = duckdb.connect(str(path), read_only=True)
    try:
        names = [r[0] for r in con.execute("SELECT table_name FROM duckdb_tables() ORDER BY 1").fetchall()]
        return {n: sorted(con.execute(f'SELECT * FROM "{n}"').fetchall(), key=repr) for n in names}
    finally:
        con.close()


def files(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())


def assert_we_read_as_the_build(build: DevBuild, theirs: Path, ours: Path, folder: Path) -> None:
    """Our reads of ``ours`` (a 1.5-storage copy) equal the build's of ``theirs`` at every snapshot and range."""
    lake = pdl.connect(f"ducklake:{ours}")
    try:
        assert lake.format_version == build.tag
        lives = table_lives(lake.location.url)
        answers = build.answers(attach_sql(theirs, options="READ_ONLY"), questions(lives), folder)
        try:
            assert differences(lake, answers, lives) == []
        finally:
            answers.close()
    finally:
        lake.close()


@pytest.fixture(scope="module")
def written(dev_build: DevBuild, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_lake(dev_build, tmp_path_factory.mktemp("build") / "lake")


def test_we_read_the_builds_history(dev_build: DevBuild, written: Path, tmp_path: Path) -> None:
    ours = copy_lake(dev_build, written, tmp_path / "ours", convert=True)
    assert_we_read_as_the_build(dev_build, written, ours, tmp_path)


def test_our_expiry_and_cleanup_leave_what_the_builds_leave(dev_build: DevBuild, written: Path, tmp_path: Path) -> None:
    theirs = copy_lake(dev_build, written, tmp_path / "theirs", convert=False)
    ours = copy_lake(dev_build, written, tmp_path / "ours", convert=True)
    snapshots = [int(r[0]) for r in dev_build.rows(attach_sql(theirs) + "SELECT snapshot_id FROM lake.snapshots();")]
    expired = [s for s in snapshots if 0 < s < snapshots[-1] - 3]  # the views' and srt's snapshots among them
    dev_build.run(
        attach_sql(theirs)
        + f"CALL ducklake_expire_snapshots('lake', versions => {expired});\n"
        + "CALL ducklake_cleanup_old_files('lake', cleanup_all => true);\n"
    )
    lake = pdl.connect(f"ducklake:{ours}")
    report = lake.expire_snapshots(versions=expired)
    assert report.expired == len(expired)
    lake.cleanup_old_files(cleanup_all=True)
    lake.close()

    converted = tmp_path / "theirs.converted.ducklake"
    dev_build.convert(theirs, converted)
    mine, duck = catalog_rows(ours), catalog_rows(converted)
    duck["ducklake_metadata"] = [r for r in duck["ducklake_metadata"] if r[0] != "data_path"]
    mine["ducklake_metadata"] = [r for r in mine["ducklake_metadata"] if r[0] != "data_path"]
    assert sorted(mine) == sorted(duck)
    assert {n: rows for n, rows in mine.items() if rows != duck[n]} == {}
    assert files(tmp_path / "ours" / "data") == files(tmp_path / "theirs" / "data")
    assert duck["ducklake_view_column_tag"], "the kept view's column comment"
    assert_we_read_as_the_build(dev_build, theirs, ours, tmp_path)
