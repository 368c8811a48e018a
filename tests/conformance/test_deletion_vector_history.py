"""DuckLake 1.1's deletion vectors of several snapshots (one puffin file, one cumulative blob per snapshot).

DuckDB 1.5.5 cannot read them (it takes a puffin file for one bare blob: "Magic bytes mismatch"), so its answers
come from the same history kept the way it keeps it: Parquet delete files with ``_ducklake_internal_snapshot_id``,
whose per-row snapshots a history's blobs encode. Both ways:

* DuckDB's history turned into puffin histories (each Parquet delete file of several snapshots swapped for the
  file DuckLake 1.1 writes from it): every read of ours, at every snapshot and over every range of the change feed,
  from Python and Spark, equals DuckDB's reads of the Parquet files. A 1.0 catalog may hold such files (DuckLake's
  August 2026 source wrote them whatever the version), so this is a 1.0 catalog.
* Our own 1.1 writer (``write_deletion_vectors`` on, a 1.1 catalog): its reads equal DuckDB's of a 1.0 twin lake
  that took the same operations with Parquet delete files; its rows and files are DuckLake 1.1's. On 1.0 catalogs
  we keep writing what DuckDB 1.5.5 writes (``tests/conformance/test_deletion_vectors.py``).
"""

from __future__ import annotations

import dataclasses
import gzip
import hashlib
import json
import shutil
from collections import Counter
from functools import reduce
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from sqlalchemy import create_engine, text

import pyspark_ducklake as pdl
from pyspark_ducklake.catalog import reader
from pyspark_ducklake.io.deletion_vector import decode_file, encode_history
from pyspark_ducklake.io.puffin import MAGIC, read_blobs
from pyspark_ducklake.table.commit import commit
from pyspark_ducklake.table.delete import stage_deletion_vector_history
from tests.conformance.test_deletion_vectors import dv_attach, feed_ranges, new_table, snapshots_of
from tests.support.bad_inputs import expect_bad_input
from tests.support.catalogs import CatalogLocation, sqlite_location
from tests.support.compare import same_rows
from tests.support.duck import connect_duckdb, open_duckdb

FEED = ["_snapshot_id", "_rowid", "_change_type", "id", "s"]


def catalog_rows(url: str, sql: str, **params: Any) -> list[Any]:
    """The rows of ``sql`` run on the catalog (none for a statement that returns none)."""
    engine = create_engine(url)
    try:
        with engine.begin() as conn:
            result = conn.execute(text(sql), params)
            return list(result.all()) if result.returns_rows else []
    finally:
        engine.dispose()


@dataclasses.dataclass
class DuckAnswers:
    """DuckDB's reads of a lake: ``id, s`` at each snapshot and the feed of each range."""

    snapshots: list[int]
    rows: dict[int, pa.Table]
    feeds: dict[tuple[int, int], pa.Table]


def duck_answers(con: duckdb.DuckDBPyConnection, table: str = "t") -> DuckAnswers:
    snaps = snapshots_of(con, table)
    rows = {s: con.execute(f"SELECT id, s FROM lake.{table} AT (VERSION => {s})").to_arrow_table() for s in snaps}
    feeds = {
        (a, b): con.execute(
            f"SELECT snapshot_id, rowid, change_type, id, s FROM ducklake_table_changes('lake', 'main', '{table}', "
            f"{a}, {b})"
        ).to_arrow_table()
        for a, b in feed_ranges(snaps)
    }
    return DuckAnswers(snaps, rows, feeds)


def answer_digest(rows: pa.Table) -> list[Any]:
    """``[row count, sha256 of the rows sorted]``, columns by position: how a fixture keeps DuckDB's answers (its reads
    of 70,000 rows a snapshot would be megabytes)."""
    ordered = sorted(zip(*(c.to_pylist() for c in rows.columns), strict=True))
    return [rows.num_rows, hashlib.sha256(json.dumps(ordered, separators=(",", ":")).encode()).hexdigest()]


def assert_reads_as(lake: pdl.Lake, answers: DuckAnswers, table: str = "t") -> None:
    """Our scan at every snapshot and table_changes over every range equal DuckDB's answers."""
    for s in answers.snapshots:
        assert same_rows(lake.scan(f"main.{table}", snapshot=s, columns=["id", "s"]), answers.rows[s], ["id", "s"]), s
    for (a, b), theirs in answers.feeds.items():
        ours = lake.table_changes(f"main.{table}", a, b).select(FEED)
        assert same_rows(ours, theirs, FEED), (a, b)


# --- DuckDB's history, its Parquet delete files of several snapshots swapped for puffin histories -----------------


# Table ``t`` of two files, whose first file is deleted from in five snapshots (an UPDATE among them); DuckDB 1.5.5
# keeps it with Parquet delete files (the second and later deletes of a file carry per-row snapshots), DuckDB 1.1 with
# write_deletion_vectors on as puffin histories (scripts/ducklake_1_1_dv_fixture.py runs the same statements).
DUCKDB_HISTORY = [
    "CREATE TABLE lake.t(id INTEGER, s VARCHAR)",
    "INSERT INTO lake.t SELECT i, 's' || i FROM range(70000) r(i)",  # two Roaring containers
    "INSERT INTO lake.t SELECT i, 'b' || i FROM range(70000, 73000) r(i)",
    "DELETE FROM lake.t WHERE id % 7 = 0",
    "DELETE FROM lake.t WHERE id IN (1, 69999, 70001)",
    "UPDATE lake.t SET s = 'u' || id WHERE id % 1000 = 3",
    "DELETE FROM lake.t WHERE id BETWEEN 10 AND 5000",
    "INSERT INTO lake.t SELECT i, 'c' || i FROM range(73000, 73020) r(i)",
    "DELETE FROM lake.t WHERE id BETWEEN 65000 AND 65010",
]


def duckdb_parquet_history(catalog: CatalogLocation) -> None:
    """:data:`DUCKDB_HISTORY` by DuckDB 1.5.5, every delete in a file (no inlining)."""
    con = open_duckdb(catalog, inlining_row_limit=0)
    try:
        for sql in DUCKDB_HISTORY:
            con.execute(sql)
    finally:
        con.close()


def swap_for_puffin_histories(catalog: CatalogLocation) -> list[Path]:
    """Replace each Parquet delete file with per-row snapshots by the DuckLake 1.1 file of the same deletes (its
    row as DuckDB 1.1 writes one: ``format`` puffin, the container's size and footer, the largest cardinality);
    returns the puffin files, each a container of several blobs."""
    rows = catalog_rows(
        catalog.url,
        "SELECT d.delete_file_id, d.path, f.path AS data_path FROM ducklake_delete_file d "
        "JOIN ducklake_data_file f USING (data_file_id) WHERE d.format = 'parquet'",
    )
    folder = Path(catalog.data_path) / "main" / "t"
    written = []
    for row in rows:
        deletes = pq.read_table(folder / row.path)
        if "_ducklake_internal_snapshot_id" not in deletes.column_names:
            continue
        data, footer_size, count = encode_history(
            deletes["pos"].to_numpy(), deletes["_ducklake_internal_snapshot_id"].to_numpy(), str(folder / row.data_path)
        )
        assert data.startswith(MAGIC), row.path  # several snapshots each
        target = folder / row.path.replace(".parquet", ".puffin")
        target.write_bytes(data)
        (folder / row.path).unlink()
        catalog_rows(
            catalog.url,
            "UPDATE ducklake_delete_file SET path = :p, format = 'puffin', file_size_bytes = :n, footer_size = :f, "
            "delete_count = :c WHERE delete_file_id = :id",
            p=target.name,
            n=len(data),
            f=footer_size,
            c=count,
            id=row.delete_file_id,
        )
        written.append(target)
    return written


@pytest.fixture(scope="module")
def puffin_history(tmp_path_factory: pytest.TempPathFactory) -> tuple[CatalogLocation, DuckAnswers]:
    """DuckDB's history with puffin histories in place of its Parquet ones, and DuckDB's answers from before."""
    catalog = sqlite_location(tmp_path_factory.mktemp("puffin_history"))
    duckdb_parquet_history(catalog)
    con = dv_attach(catalog, deletion_vectors=False)
    try:
        answers = duck_answers(con)
    finally:
        con.close()
    swapped = swap_for_puffin_histories(catalog)
    # both inserted files and the UPDATE's (later deletes hit its new versions): the first of five snapshots
    assert len(swapped) == 3
    assert max(len(read_blobs(p.read_bytes(), str(p))) for p in swapped) == 5
    return catalog, answers


def test_puffin_histories_read_as_duckdb_reads_the_same_deletes_at_every_snapshot_and_in_the_feed(
    puffin_history: tuple[CatalogLocation, DuckAnswers],
) -> None:
    catalog, answers = puffin_history
    assert len(answers.snapshots) == 9
    assert_reads_as(pdl.connect(catalog.url, catalog.data_path), answers)


def test_duckdb_1_5_cannot_read_a_puffin_history_which_is_why_1_0_catalogs_never_get_ours(
    puffin_history: tuple[CatalogLocation, DuckAnswers],
) -> None:
    catalog, _ = puffin_history
    con = dv_attach(catalog, deletion_vectors=False)
    try:
        with pytest.raises(duckdb.InvalidInputException, match="Magic bytes mismatch"):
            con.execute("SELECT sum(id) FROM lake.t").fetchall()  # count(*) comes from the catalog alone
    finally:
        con.close()


def test_spark_reads_puffin_histories_through_both_read_paths_and_the_change_feed(
    spark: Any, puffin_history: tuple[CatalogLocation, DuckAnswers]
) -> None:
    """``read_table``'s fast path (deleted rows by position, ``spark/deleted_rows.py``) at every snapshot, the data
    source at the snapshots around the UPDATE, and the change feed (its split planning) over the whole history and
    a range that begins inside it: each equal to DuckDB's reads of the Parquet deletes."""
    from pyspark.sql import functions as F

    from pyspark_ducklake.spark_parquet_read import plan_read

    catalog, answers = puffin_history
    pdl.register(spark)
    snaps = answers.snapshots
    for s in snaps:
        assert plan_read(spark, "main.t", snapshot=s, catalog=catalog.url).reason is None, s  # the fast path
    source_snaps = [snaps[4], snaps[-1]]  # the first histories, and the last (three files with one)
    native = [pdl.read_table(spark, "main.t", snapshot=s, catalog=catalog.url) for s in snaps]
    source = [
        spark.read.format("ducklake").option("catalog", catalog.url).option("snapshot", s).load("main.t")
        for s in source_snaps
    ]
    for frames, at in ((native, snaps), (source, source_snaps)):
        tagged = [df.select("id", "s").withColumn("_snap", F.lit(s)) for df, s in zip(frames, at, strict=True)]
        rows = reduce(lambda a, b: a.unionByName(b), tagged).toArrow()
        for s in at:
            got = rows.filter(pc.equal(rows["_snap"], s)).select(["id", "s"])
            assert same_rows(got, answers.rows[s], ["id", "s"]), s
    for start, end in [(0, snaps[-1]), (snaps[4], snaps[-1])]:
        feed = (
            spark.read.format("ducklake")
            .option("catalog", catalog.url)
            .option("readChangeFeed", "true")
            .option("startingSnapshot", start)
            .option("endingSnapshot", end)
            .load("main.t")
            .select(*FEED)
            .toArrow()
        )
        assert same_rows(feed, answers.feeds[(start, end)], FEED), (start, end)


# --- our writer on DuckLake 1.1 ------------------------------------------------------------------------------------


def deletion_vectors_on(catalog: CatalogLocation) -> None:
    """``write_deletion_vectors`` for the whole lake, the row DuckDB's ``set_option`` writes (DuckDB 1.5.5 cannot
    attach a 1.1 catalog to call it)."""
    catalog_rows(
        catalog.url,
        "INSERT INTO ducklake_metadata (key, value, scope, scope_id) VALUES ('write_deletion_vectors', 'true', NULL, "
        "NULL)",
    )


def same_history(lake: pdl.Lake) -> None:
    """The operations both lakes take: two data files, the first deleted from in five snapshots (an update too)."""
    new_table(lake, "t", files=1, rows=70000)
    lake.append("main.t", pa.table({"id": pa.array(range(70000, 73000), pa.int32()), "s": ["b"] * 3000}))
    lake.delete("main.t", [("id", "in", list(range(0, 73000, 7)))])
    lake.delete("main.t", [("id", "in", [1, 69999, 70001])])
    lake.update("main.t", {"s": "u"}, [("id", "in", [3, 1003, 2003, 70003])])
    lake.delete("main.t", [("id", ">=", 10), ("id", "<=", 5000)])
    lake.delete("main.t", [("id", ">=", 65000), ("id", "<=", 65010)])


def test_our_1_1_writer_keeps_every_snapshot_of_a_files_deletes_as_duckdb_reads_them(
    catalog: CatalogLocation, tmp_path: Path, duckdb_lake: Any
) -> None:
    lake = pdl.connect(catalog.url, catalog.data_path, data_inlining_row_limit=0, format_version="1.1")
    deletion_vectors_on(catalog)
    same_history(lake)
    twin = sqlite_location(tmp_path / "twin")  # 1.0, Parquet delete files: DuckDB 1.5.5 reads it
    same_history(pdl.connect(twin.url, twin.data_path, data_inlining_row_limit=0))
    answers = duck_answers(duckdb_lake(twin))
    last = lake.current_snapshot_id()
    assert answers.snapshots[-1] == last == 8
    assert_reads_as(lake, answers)

    live = catalog_rows(catalog.url, "SELECT * FROM ducklake_delete_file WHERE end_snapshot IS NULL ORDER BY 1")
    assert [r.format for r in live] == ["puffin"] * 3  # the inserted files' and the update's
    folder = Path(catalog.data_path) / "main" / "t"
    (first,) = [r for r in live if (r.begin_snapshot, r.partial_max) == (4, last)]
    data = (folder / first.path).read_bytes()
    blobs = read_blobs(data, first.path)
    positions, snapshots = decode_file(data, first.path)
    assert snapshots is not None
    assert [b.properties["ducklake-snapshot-id"] for b in blobs] == ["4", "5", "6", "7", "8"]
    assert [int(b.properties["cardinality"]) for b in blobs] == [(snapshots <= s).sum() for s in range(4, 9)]
    assert (first.delete_count, first.file_size_bytes, first.row_group_count) == (len(positions), len(data), None)
    payload_size = int.from_bytes(data[-12:-8], "little")
    assert first.footer_size == payload_size + 16 and first.path.endswith("-delete.puffin")
    (data_file,) = catalog_rows(
        catalog.url, "SELECT path FROM ducklake_data_file WHERE data_file_id = :i", i=first.data_file_id
    )
    assert {b.properties["referenced-data-file"] for b in blobs} == {str(folder / data_file.path)}
    scheduled = catalog_rows(catalog.url, "SELECT path FROM ducklake_files_scheduled_for_deletion")
    assert len(scheduled) == 4 + 2  # the replaced delete files: the first file's four, the second's two


def flush_history(lake: pdl.Lake, after_flush: Any = None) -> None:
    """Inlined rows inserted, updated and deleted over four snapshots, flushed (the flushed file's ended rows get
    their delete file: ``after_flush()`` looks at it), then a delete of a flushed row."""
    lake.create_table("main.t", pa.schema([("id", pa.int32()), ("s", pa.string())]))

    def rows(*pairs: tuple[int, str]) -> pa.Table:
        return pa.table({"id": pa.array([p[0] for p in pairs], pa.int32()), "s": [p[1] for p in pairs]})

    lake.append("main.t", rows((1, "a"), (2, "b"), (3, "c"), (5, "e")))
    lake.update("main.t", {"s": "u"}, [("id", "=", 1)])
    lake.delete("main.t", [("id", "=", 2)])
    lake.append("main.t", rows((4, "d")))
    lake.delete("main.t", [("id", "=", 4)])
    lake.flush_inlined_data("main.t")
    if after_flush is not None:
        after_flush()
    lake.delete("main.t", [("id", "=", 3)])


def test_our_1_1_flush_writes_the_flushed_files_ended_rows_as_a_puffin_history_as_duckdb_1_1_does(
    catalog: CatalogLocation, tmp_path: Path, duckdb_lake: Any
) -> None:
    """DuckDB 1.1's flush writes a table's ended inlined rows as a deletion vector of one blob per snapshot when
    ``write_deletion_vectors`` is on (``WriteDeletionVectorFileWithSnapshots``: beginning at the oldest, no
    ``partial_max``; seen on its development build), where 1.0 writes Parquet with per-row snapshots."""
    lake = pdl.connect(catalog.url, catalog.data_path, data_inlining_row_limit=100, format_version="1.1")
    deletion_vectors_on(catalog)
    flushed: list[Any] = []
    flush_history(lake, lambda: flushed.extend(catalog_rows(catalog.url, "SELECT * FROM ducklake_delete_file")))
    twin = sqlite_location(tmp_path / "twin")  # 1.0, Parquet delete files: DuckDB 1.5.5 reads it
    flush_history(pdl.connect(twin.url, twin.data_path, data_inlining_row_limit=100))
    assert_reads_as(lake, duck_answers(duckdb_lake(twin)))

    (row,) = flushed
    assert (row.format, row.begin_snapshot, row.partial_max, row.delete_count) == ("puffin", 3, None, 3)
    assert row.path.endswith("-delete.puffin") and row.row_group_count is None
    data = (Path(catalog.data_path) / "main" / "t" / row.path).read_bytes()
    blobs = read_blobs(data, row.path)
    # the update's pre-image at 3, the deletes at 4 and 6: one cumulative vector each
    assert [(b.properties["ducklake-snapshot-id"], b.properties["cardinality"]) for b in blobs] == [
        ("3", "1"),
        ("4", "2"),
        ("6", "3"),
    ]
    assert (row.file_size_bytes, row.footer_size) == (len(data), int.from_bytes(data[-12:-8], "little") + 16)


@pytest.mark.parametrize("other", ["delete", "update"])
def test_a_delete_committed_between_our_plan_and_commit_keeps_its_own_snapshot_in_the_history(
    sqlite_catalog: CatalogLocation, other: str
) -> None:
    """Another writer deletes from the file between our plan and our commit: our commit reads the history it finds
    then and adds its deletes as a blob of its own snapshot, after the other writer's."""
    from pyspark_ducklake._faults import before_next_commit

    catalog = sqlite_catalog
    lake = pdl.connect(catalog.url, catalog.data_path, data_inlining_row_limit=0, format_version="1.1")
    deletion_vectors_on(catalog)
    new_table(lake, "t", files=1, rows=1000)
    lake.delete("main.t", [("id", "<", 100)])  # snapshot 3: a bare blob

    def other_writer() -> None:
        second = pdl.connect(catalog.url, catalog.data_path, data_inlining_row_limit=0)
        if other == "delete":
            second.delete("main.t", [("id", ">=", 900)])
        else:
            second.update("main.t", {"s": "x"}, [("id", ">=", 900)])

    with before_next_commit(other_writer):
        lake.delete("main.t", [("id", "in", [500, 501])])  # planned at 3, committed at 5
    (row,) = catalog_rows(catalog.url, "SELECT * FROM ducklake_delete_file WHERE end_snapshot IS NULL")
    assert (row.begin_snapshot, row.partial_max) == (3, 5)
    positions, snapshots = decode_file((Path(catalog.data_path) / "main" / "t" / row.path).read_bytes(), row.path)
    assert snapshots is not None
    assert {s: sorted(positions[snapshots == s].tolist()) for s in (3, 4, 5)} == {
        3: list(range(100)),
        4: list(range(900, 1000)),
        5: [500, 501],
    }
    ids = lambda s: sorted(lake.scan("main.t", snapshot=s, columns=["id"]).column("id").to_pylist())  # noqa: E731
    assert ids(3) == list(range(100, 1000))
    assert ids(4) == list(range(100, 900)) + ([] if other == "delete" else list(range(900, 1000)))
    assert ids(5) == [i for i in ids(4) if i not in (500, 501)]


def test_a_history_takes_over_a_parquet_delete_file_at_its_begin_snapshot(sqlite_catalog: CatalogLocation) -> None:
    """Deletion vectors turned on after a Parquet delete file: the next delete writes a history whose first blob
    holds the Parquet file's deletes at its begin snapshot (DuckDB 1.1's fallback snapshot for deletes without
    per-row snapshots)."""
    catalog = sqlite_catalog
    lake = pdl.connect(catalog.url, catalog.data_path, data_inlining_row_limit=0, format_version="1.1")
    new_table(lake, "t", files=1, rows=1000)
    lake.delete("main.t", [("id", "<", 100)])  # snapshot 3: Parquet
    deletion_vectors_on(catalog)
    lake.delete("main.t", [("id", ">=", 990)])  # snapshot 4
    (row,) = catalog_rows(catalog.url, "SELECT * FROM ducklake_delete_file")
    assert (row.format, row.begin_snapshot, row.partial_max, row.delete_count) == ("puffin", 3, 4, 110)
    data = (Path(catalog.data_path) / "main" / "t" / row.path).read_bytes()
    assert [b.properties["cardinality"] for b in read_blobs(data, row.path)] == ["100", "110"]
    assert lake.scan("main.t", snapshot=3).num_rows == 900 and lake.scan("main.t").num_rows == 890
    feed = lake.table_changes("main.t", 3, 4)
    assert sorted(Counter(feed.column("_snapshot_id").to_pylist()).items()) == [(3, 100), (4, 10)]


def test_a_history_forced_on_a_1_0_catalog_is_refused_and_nothing_is_written(sqlite_catalog: CatalogLocation) -> None:
    """DuckDB 1.5 reads a 1.0 catalog and cannot read a puffin history: the writer refuses to stage one there."""
    catalog = sqlite_catalog
    lake = pdl.connect(catalog.url, catalog.data_path, data_inlining_row_limit=0)
    new_table(lake, "t", files=1, rows=100)
    lake.delete("main.t", [("id", "<", 10)])
    table = lake.table("main.t")
    with lake.engine.connect() as conn:
        (data_file,) = reader.data_files(conn, table.entry, table.snapshot_id, lake.data_path, lake.info.format)
    table_dir = reader.table_path(table.entry, lake.data_path)
    assert data_file.delete_file is not None

    def apply(ctx: Any) -> None:
        stage_deletion_vector_history(
            ctx,
            table.entry,
            data_file,
            data_file.delete_file.delete_file_id,
            data_file.delete_file.path,
            {0: 2, 50: ctx.snapshot_id},
            table_dir,
            seen=table.snapshot_id,
            encrypted=False,
        )

    with expect_bad_input("dv-history-on-1-0", lake):
        commit(lake, apply, base=table.snapshot_id)


def test_a_puffin_history_whose_footer_lies_is_a_typed_error_on_every_read(sqlite_catalog: CatalogLocation) -> None:
    catalog = sqlite_catalog
    lake = pdl.connect(catalog.url, catalog.data_path, data_inlining_row_limit=0, format_version="1.1")
    deletion_vectors_on(catalog)
    new_table(lake, "t", files=1, rows=1000)
    lake.delete("main.t", [("id", "<", 100)])
    lake.delete("main.t", [("id", ">=", 900)])
    (row,) = catalog_rows(catalog.url, "SELECT path FROM ducklake_delete_file")
    puffin = Path(catalog.data_path) / "main" / "t" / row.path
    data = puffin.read_bytes()
    assert data.startswith(MAGIC)
    puffin.write_bytes(data.replace(b'"ducklake-snapshot-id":"4"', b'"ducklake-snapshot-id":"x"'))
    with expect_bad_input("puffin-footer-lies", lake) as info:
        lake.scan("main.t")
    assert puffin.name in str(info.value) and "ducklake-snapshot-id" in str(info.value)
    with expect_bad_input("puffin-footer-lies", lake):
        lake.table_changes("main.t", 0)
    with expect_bad_input("puffin-footer-lies", lake):
        lake.delete("main.t", [("id", "=", 500)])


def test_parquet_delete_files_of_several_snapshots_record_partial_max_as_duckdb_1_5_does(
    sqlite_catalog: CatalogLocation, tmp_path: Path
) -> None:
    """A second delete of a file replaces its delete file by one with per-row snapshots: DuckDB 1.5.5 records the
    newest of them as the row's ``partial_max`` (DuckLake 1.1 too, for puffin histories)."""
    theirs = sqlite_location(tmp_path / "theirs")
    con = open_duckdb(theirs, inlining_row_limit=0)
    try:
        for sql in [
            "CREATE TABLE lake.t(id INTEGER, s VARCHAR)",
            "INSERT INTO lake.t SELECT i, 's' || i FROM range(1000) r(i)",
            "DELETE FROM lake.t WHERE id < 10",
            "DELETE FROM lake.t WHERE id > 990",
            "DELETE FROM lake.t WHERE id = 500",
        ]:
            con.execute(sql)
    finally:
        con.close()
    ours = sqlite_catalog
    lake = pdl.connect(ours.url, ours.data_path, data_inlining_row_limit=0)
    new_table(lake, "t", files=1, rows=1000)
    for f in ([("id", "<", 10)], [("id", ">", 990)], [("id", "=", 500)]):
        lake.delete("main.t", f)
    sql = "SELECT begin_snapshot, end_snapshot, format, delete_count, partial_max FROM ducklake_delete_file"
    assert catalog_rows(ours.url, sql) == catalog_rows(theirs.url, sql) == [(3, None, "parquet", 20, 5)]


def test_duckdb_1_5_still_gets_a_single_deletion_vector_on_a_1_0_catalog(sqlite_catalog: CatalogLocation) -> None:
    """With deletion vectors on, a second delete of a file on 1.0 merges into one bare blob beginning at its
    snapshot (DuckDB 1.5.5's own write, which it reads), never a Puffin container."""
    catalog = sqlite_catalog
    lake = pdl.connect(catalog.url, catalog.data_path, data_inlining_row_limit=0)
    deletion_vectors_on(catalog)
    new_table(lake, "t", files=1, rows=1000)
    lake.delete("main.t", [("id", "<", 10)])
    lake.delete("main.t", [("id", ">", 990)])
    (row,) = catalog_rows(catalog.url, "SELECT * FROM ducklake_delete_file")
    data = (Path(catalog.data_path) / "main" / "t" / row.path).read_bytes()
    assert not data.startswith(MAGIC) and (row.begin_snapshot, row.footer_size, row.partial_max) == (4, 0, None)
    con = connect_duckdb()
    try:
        con.execute(f"ATTACH '{catalog.duckdb}' AS lake (DATA_PATH '{catalog.data_path}')")
        assert con.execute("SELECT count(*) FROM lake.t").fetchone() == (1000 - 19,)
    finally:
        con.close()


# --- DuckLake 1.1's own puffin histories (a fixture its development build wrote) ------------------------------------

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "ducklake_1_1" / "dv_history"


def fixture_lake(catalog: CatalogLocation | None, tmp_path: Path) -> pdl.Lake:
    """The fixture's lake, its files under ``tmp_path``, its catalog rows as DuckDB 1.1 wrote them: in their DuckDB
    file (``catalog`` None), or copied by DuckDB 1.5.5's scanners into a SQLite or PostgreSQL catalog of the same
    version; the catalog's ``data_path`` row then names the files' new place."""
    data = tmp_path / "data"
    shutil.copytree(FIXTURE / "data", data)
    source = tmp_path / "catalog.duckdb"
    with gzip.open(FIXTURE / "catalog.duckdb.gz") as packed, source.open("wb") as out:
        shutil.copyfileobj(packed, out)
    if catalog is None:
        url, target = f"ducklake:{source}", f"'{source}' AS dst"
    else:
        pdl.connect(catalog.url, catalog.data_path, format_version="1.1").close()  # its tables, to be filled
        kind, _, where = catalog.duckdb.removeprefix("ducklake:").partition(":")
        url, target = catalog.url, f"'{where}' AS dst (TYPE {kind})"
    con = connect_duckdb()
    try:
        con.execute(f"ATTACH {target}")
        if catalog is not None:
            con.execute(f"ATTACH '{source}' AS src (READ_ONLY)")
            tables = con.execute("SELECT table_name FROM duckdb_tables() WHERE database_name = 'src'").fetchall()
            for (name,) in tables:
                con.execute(f"DELETE FROM dst.{name}")
                con.execute(f"INSERT INTO dst.{name} SELECT * FROM src.{name}")
        con.execute("UPDATE dst.ducklake_metadata SET value = ? WHERE key = 'data_path'", [f"{data}/"])
    finally:
        con.close()
    return pdl.connect(url)


@pytest.mark.parametrize("backend", ["duckdb_file", "sqlite", "postgres"])
def test_ducklake_1_1s_own_puffin_histories_read_as_it_reads_them(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """DuckDB 1.1 ran :data:`DUCKDB_HISTORY` with deletion vectors on (``scripts/ducklake_1_1_dv_fixture.py``): its
    puffin histories read at every snapshot and over every range of the feed as DuckDB 1.1 read them, whichever
    database holds the catalog; and our writer gives each history DuckDB's bytes."""
    fixture = {"duckdb_file": None, "sqlite": "sqlite_catalog", "postgres": "pg_catalog"}[backend]
    lake = fixture_lake(None if fixture is None else request.getfixturevalue(fixture), tmp_path)
    assert lake.info.format.tag == "1.1-dev1"
    answers = json.loads((FIXTURE / "answers.json").read_text())
    snapshots = answers["snapshots"]
    assert snapshots == list(range(1, 10))
    for s in snapshots:
        assert answer_digest(lake.scan("main.t", snapshot=s, columns=["id", "s"])) == answers["rows"][str(s)], s
    for a, b in feed_ranges(snapshots):
        assert answer_digest(lake.table_changes("main.t", a, b).select(FEED)) == answers["feeds"][f"{a}_{b}"], (a, b)
    histories = 0
    for path in (tmp_path / "data").rglob("*-delete.puffin"):
        data = path.read_bytes()
        positions, snapshot_ids = decode_file(data, str(path))
        if snapshot_ids is not None:
            histories += 1
            referenced = read_blobs(data, str(path))[0].properties["referenced-data-file"]
            assert encode_history(positions, snapshot_ids, referenced)[0] == data, path.name
    assert histories == 7  # the three live ones and four they replaced
