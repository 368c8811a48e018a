"""``spark.read.format("ducklake")`` streams each file a row group at a time and packs files into a few partitions
(batch/reader.py, table/file_stream.py): DuckDB's files of many row groups read as DuckDB reads them, before and after
deletes (Parquet delete files, deletion vectors, inlined deletes of file rows) and at every snapshot; files are
packed two partitions per core; the ``columns`` option decodes only the columns it names (a file whose other column
is corrupt still reads). One backend (SQLite): the subject is the data source's reading of files; the catalog SQL
listing them is compared with DuckDB on both backends by the Python read tests (test_deletion_vectors.py,
test_added_files.py, test_duckdb_writes_we_read.py)."""

from __future__ import annotations

from typing import Any

import duckdb
import pyarrow.parquet as pq
import pytest

import pyspark_ducklake as pdl
from pyspark_ducklake.table.read_packing import PARTITIONS_PER_CORE, default_cores
from tests.support.compare import canonical
from tests.support.duck import attach_sql, connect_duckdb

ROWS = 12_000
GROUP = 2_048  # DuckDB's smallest row group: six in one file (the deletes below span groups 1-5)
COLUMNS = (
    "i::BIGINT AS id, (i * 7 % 1000)::INTEGER AS small, CASE WHEN i % 17 = 0 THEN NULL ELSE i / 7 END AS dbl, "
    "CASE WHEN i % 13 = 0 THEN NULL ELSE repeat('t', (i % 40)::INTEGER) END AS text, "
    "TIMESTAMP '2024-01-01' + to_microseconds(i * 1234567) AS ts, (i * 104729 % 100000000)::DECIMAL(18,3) AS amount, "
    "DATE '2000-01-01' + (i % 10000)::INTEGER AS day, i % 3 = 0 AS flag, "
    "CASE WHEN i % 9 = 0 THEN NULL ELSE [(i % 100)::INTEGER, (i % 7)::INTEGER][1:(i % 3)::INTEGER] END AS tags"
)


def _duckdb(catalog: Any, *, inlining: int = 0, deletion_vectors: bool = False) -> duckdb.DuckDBPyConnection:
    con = connect_duckdb()
    sql = attach_sql(catalog, "lake", inlining)
    if deletion_vectors:
        sql = sql[:-1] + ", WRITE_DELETION_VECTORS true)"
    con.execute(sql)
    return con


def _rows(rows: Any) -> list[Any]:
    return sorted((tuple(canonical(v) for v in r) for r in rows), key=repr)


def _spark_rows(spark: Any, url: str, **options: str) -> list[Any]:
    reader = spark.read.format("ducklake").option("catalog", url)
    for k, v in options.items():
        reader = reader.option(k, v)
    return _rows(tuple(r) for r in reader.load("main.t").collect())


def _duck_rows(con: duckdb.DuckDBPyConnection, snapshot: int | None = None, columns: str = "*") -> list[Any]:
    at = "" if snapshot is None else f" AT (VERSION => {snapshot})"
    return _rows(con.execute(f"SELECT {columns} FROM lake.main.t{at}").fetchall())


def _files(catalog: Any) -> list[str]:
    lake = pdl.connect(catalog.url)
    try:
        return [str(p) for p in lake.list_files("main.t").column("data_file").to_pylist()]
    finally:
        lake.close()


def _snapshot(con: duckdb.DuckDBPyConnection) -> int:
    return int(con.execute("SELECT max(snapshot_id) FROM lake.snapshots()").fetchone()[0])


@pytest.mark.parametrize("deletion_vectors", [False, True], ids=["delete-files", "deletion-vectors"])
def test_files_of_many_row_groups_read_as_duckdb_reads_them_before_and_after_deletes(
    spark: Any, sqlite_catalog: Any, deletion_vectors: bool
) -> None:
    catalog = sqlite_catalog
    pdl.register(spark)
    con = _duckdb(catalog, inlining=10, deletion_vectors=deletion_vectors)
    try:
        con.execute(f"CALL lake.set_option('parquet_row_group_size', {GROUP})")
        con.execute(f"CREATE TABLE lake.main.t AS SELECT {COLUMNS} FROM range({ROWS}) r(i)")
        made = _snapshot(con)
        assert max(pq.ParquetFile(p).num_row_groups for p in _files(catalog)) > 2
        history = [made]
        for sql in [
            # positions on both sides of row group edges, a whole row group, the last row
            f"DELETE FROM lake.main.t WHERE id % 7 = 0 OR id BETWEEN {GROUP - 3} AND {GROUP + 2} "
            f"OR id BETWEEN {4 * GROUP} AND {5 * GROUP - 1} OR id = {ROWS - 1}",
            "DELETE FROM lake.main.t WHERE id IN (1, 4097)",  # two rows: inlined in the catalog
            f"INSERT INTO lake.main.t SELECT {COLUMNS} FROM range({ROWS}, {ROWS + 5}) r(i)",  # inlined rows
        ]:
            con.execute(sql)
            history.append(_snapshot(con))
        for snapshot in history:
            assert _spark_rows(spark, catalog.url, snapshot=str(snapshot)) == _duck_rows(con, snapshot)
        expected = _duck_rows(con)
        assert len(expected) < ROWS - ROWS // 7
        assert _spark_rows(spark, catalog.url) == expected
        assert _spark_rows(spark, catalog.url, columns="tags, id") == _duck_rows(con, columns="id, tags")
    finally:
        con.close()


def test_files_are_packed_two_partitions_per_core(spark: Any, sqlite_catalog: Any) -> None:
    pdl.register(spark)
    files = 4 * PARTITIONS_PER_CORE * default_cores() + 1
    con = _duckdb(sqlite_catalog)
    try:
        con.execute("CREATE TABLE lake.main.t(id BIGINT, s VARCHAR)")
        for n in range(files):
            con.execute(f"INSERT INTO lake.main.t SELECT i, 's' || i FROM range({n * 100}, {n * 100 + 100}) r(i)")
        frame = spark.read.format("ducklake").option("catalog", sqlite_catalog.url).load("main.t")
        assert frame.rdd.getNumPartitions() == PARTITIONS_PER_CORE * default_cores()
        assert _rows(tuple(r) for r in frame.collect()) == _duck_rows(con)
    finally:
        con.close()


def test_one_large_file_is_read_by_several_tasks_each_row_group_once(spark: Any, sqlite_catalog: Any) -> None:
    pdl.register(spark)
    rows = 300_000
    con = _duckdb(sqlite_catalog)
    try:
        con.execute("CALL lake.set_option('parquet_row_group_size', 10240)")
        con.execute(
            "CREATE TABLE lake.main.t AS SELECT i::BIGINT AS id, md5(i::VARCHAR) AS a, md5((-i)::VARCHAR) AS b "
            f"FROM range({rows}) r(i)"
        )
        con.execute("DELETE FROM lake.main.t WHERE id % 3 = 0 OR id BETWEEN 100000 AND 100100")
        (path,) = _files(sqlite_catalog)
        frame = spark.read.format("ducklake").option("catalog", sqlite_catalog.url).load("main.t")
        assert frame.rdd.getNumPartitions() > 1  # the file is cut into byte ranges
        ids = sorted(r.id for r in frame.select("id").collect())
        assert ids == [r[0] for r in con.execute("SELECT id FROM lake.main.t ORDER BY id").fetchall()]
        assert frame.filter("a != md5(cast(id AS string)) OR b != md5(cast(-id AS string))").count() == 0
        assert pq.ParquetFile(path).num_row_groups > frame.rdd.getNumPartitions()
    finally:
        con.close()


def _corrupt_column(path: str, column: str) -> None:
    """Overwrite the page headers of ``column`` in every row group: the footer still describes the file."""
    meta = pq.ParquetFile(path).metadata
    at = next(i for i in range(meta.num_columns) if meta.schema.column(i).path == column)
    with open(path, "r+b") as f:
        for g in range(meta.num_row_groups):
            chunk = meta.row_group(g).column(at)
            start = chunk.dictionary_page_offset if chunk.has_dictionary_page else chunk.data_page_offset
            f.seek(start)
            f.write(b"\xff" * 12)


def test_the_columns_option_decodes_only_its_columns(spark: Any, sqlite_catalog: Any) -> None:
    catalog = sqlite_catalog
    pdl.register(spark)
    con = _duckdb(catalog)
    try:
        con.execute(
            "CREATE TABLE lake.main.t AS SELECT i AS id, 'v' || i AS broken, i * 2 AS twice FROM range(5000) r(i)"
        )
        con.execute("DELETE FROM lake.main.t WHERE id % 5 = 0")
        for path in _files(catalog):
            _corrupt_column(path, "broken")
        expected = _duck_rows(con, columns="id, twice")  # DuckDB decodes only these too
        assert len(expected) == 4000
        assert _spark_rows(spark, catalog.url, columns="twice, id") == expected
        with pytest.raises(Exception, match="cannot be read as Parquet"):
            _spark_rows(spark, catalog.url)
        with pytest.raises(duckdb.Error):
            con.execute("SELECT broken FROM lake.main.t").fetchall()
    finally:
        con.close()
