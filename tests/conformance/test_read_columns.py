"""The data source's ``columns`` option: ``spark.read.format("ducklake")`` reads a table DuckDB wrote with a column
this library cannot read when that column is not selected (PySpark 4.3 gives a Python data source no column list, so
the caller names the columns); ``read_table`` does it by Spark's own column pruning. Time travel and the change feed
take the option too.
"""

from __future__ import annotations

from typing import Any

import pytest
import sqlalchemy as sa

import pyspark_ducklake as pdl
from pyspark_ducklake.exceptions import InvalidOptionError
from tests.support.bad_inputs import expect_bad_input
from tests.support.duck import open_duckdb


def _hugeint_table(catalog: Any, limit: int) -> tuple[int, list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """``main.t(id, hugeint, s)`` whose HUGEINT extremes have no Arrow form; the snapshot that made it, and
    DuckDB's rows of (id, s) there and at the latest snapshot."""
    con = open_duckdb(catalog, inlining_row_limit=limit)
    try:
        con.execute(
            "CREATE TABLE lake.main.t AS SELECT (row_number() OVER ())::BIGINT AS id, hugeint, "
            "'x' || (row_number() OVER ()) AS s FROM test_all_types()"
        )
        made = con.execute("SELECT max(snapshot_id) FROM lake.snapshots()").fetchone()[0]
        at_two = con.execute("SELECT id, s FROM lake.main.t ORDER BY id").fetchall()
        con.execute("INSERT INTO lake.main.t VALUES (10, 5, 'ten')")
        latest = con.execute("SELECT id, s FROM lake.main.t ORDER BY id").fetchall()
    finally:
        con.close()
    return made, at_two, latest


@pytest.mark.parametrize("limit", [10, 0], ids=["inlined", "parquet"])
def test_the_columns_option_reads_around_a_column_we_cannot_read(spark: Any, sqlite_catalog: Any, limit: int) -> None:
    made, at_two, latest = _hugeint_table(sqlite_catalog, limit)
    pdl.register(spark)
    url = sqlite_catalog.url

    def source(**options: str) -> Any:
        reader = spark.read.format("ducklake").option("catalog", url)
        for k, v in options.items():
            reader = reader.option(k, v)
        return reader.load("main.t")

    frame = source(columns=" id, S ")  # blanks dropped, names case-insensitive as in DuckDB
    assert frame.columns == ["id", "s"]
    assert sorted(tuple(r) for r in frame.collect()) == latest
    assert sorted(tuple(r) for r in source(columns="s,id").collect()) == latest  # the table's order
    assert source(columns="s").columns == ["s"]
    assert sorted(tuple(r) for r in source(columns="id,s", snapshot=str(made)).collect()) == at_two
    fast = pdl.read_table(spark, "main.t", catalog=url, options={"columns": "s,ID"})
    assert fast.columns == ["id", "s"] and sorted(tuple(r) for r in fast.collect()) == latest
    feed = source(columns="s, id", readChangeFeed="true", startingSnapshot=str(made))
    assert feed.columns == ["id", "s", "_change_type", "_snapshot_id", "_rowid", "_commit_timestamp"]
    assert sorted((r.id, r.s) for r in feed.collect()) == latest
    lake = pdl.connect(url)
    try:
        for attempt in (
            lambda: source(columns="id, hugeint").collect(),
            lambda: source().collect(),
            lambda: pdl.read_table(spark, "main.t", catalog=url).collect(),
            lambda: pdl.read_table(spark, "main.t", catalog=url, options={"columns": "hugeint"}).collect(),
        ):
            with expect_bad_input("hugeint-39-digits", lake) as err:
                attempt()
            assert "column 'hugeint'" in str(err.value)
        with expect_bad_input("unknown-read-column", lake) as err:
            source(columns="id, ss")
        assert "did you mean 's'" in str(err.value)
    finally:
        lake.close()


def test_the_columns_option_leaves_out_a_column_of_an_unknown_type(spark: Any, sqlite_catalog: Any) -> None:
    """A column of a type no version of this library knows fails the schema of a whole-table read; the error says
    to use the columns option, and with it the read works. One backend (SQLite): the subject is the data source's
    schema, not the catalog SQL."""
    catalog = sqlite_catalog
    con = open_duckdb(catalog, inlining_row_limit=10)
    try:
        con.execute("CREATE TABLE lake.main.t (id BIGINT, odd VARCHAR, s VARCHAR)")
        con.execute("INSERT INTO lake.main.t SELECT i, 'o' || i, 's' || i FROM range(20) r(i)")
        con.execute("INSERT INTO lake.main.t SELECT i, 'o' || i, 's' || i FROM range(20, 25) r(i)")
    finally:
        con.close()
    engine = sa.create_engine(catalog.url)
    with engine.begin() as conn:
        conn.execute(sa.text("UPDATE ducklake_column SET column_type = 'future_type' WHERE column_name = 'odd'"))
    engine.dispose()
    pdl.register(spark)
    reader = spark.read.format("ducklake").option("catalog", catalog.url)
    got = reader.option("columns", "id,s").load("main.t").collect()
    assert sorted(tuple(r) for r in got) == [(i, f"s{i}") for i in range(25)]
    lake = pdl.connect(catalog.url)
    try:
        with expect_bad_input("unreadable-type", lake) as err:
            spark.read.format("ducklake").option("catalog", catalog.url).load("main.t")
        assert "use the columns option" in str(err.value) and "or read_table" in str(err.value)
    finally:
        lake.close()


@pytest.mark.parametrize("limit", [10, 0], ids=["inlined", "parquet"])
def test_read_table_columns_leave_a_column_out_on_the_fast_path_and_the_fallback(
    spark: Any, sqlite_catalog: Any, limit: int
) -> None:
    """``read_table(columns=...)``: HUGEINT extremes (inlined, or in Parquet files as DuckDB writes them) in a column
    not selected are neither read nor converted, through Spark's Parquet reader and through the data source it falls
    back to (a UUID column selected), at a snapshot too. One backend (SQLite): the subject is Spark's reads of
    the files and inlined rows the catalog lists, not the catalog SQL."""
    from pyspark_ducklake.spark_parquet_read import plan_read

    catalog = sqlite_catalog

    con = open_duckdb(catalog, inlining_row_limit=limit)
    try:
        con.execute(
            "CREATE TABLE lake.main.w AS SELECT (row_number() OVER ())::BIGINT AS id, hugeint, uhugeint, uuid, "
            "'x' || (row_number() OVER ()) AS s FROM test_all_types()"
        )
        made = con.execute("SELECT max(snapshot_id) FROM lake.snapshots()").fetchone()[0]
        con.execute("INSERT INTO lake.main.w VALUES (10, 5, 6, NULL, 'ten')")
        want = {
            snap: con.execute(
                f"SELECT id, uuid::VARCHAR, s FROM lake.main.w AT (VERSION => {snap}) ORDER BY id"
            ).fetchall()
            for snap in (made, made + 1)
        }
    finally:
        con.close()
    pdl.register(spark)
    url = catalog.url
    for columns in (["S", "id"], "id, s", ("id", "s")):
        fast = plan_read(spark, "main.w", catalog=url, columns=columns)
        assert fast.reason is None, fast.reason  # Spark's Parquet reader: no HUGEINT among the columns
        got = pdl.read_table(spark, "main.w", catalog=url, columns=columns)
        assert got.columns == ["id", "s"]
        assert sorted(tuple(r) for r in got.collect()) == [(i, s) for i, _, s in want[made + 1]]
    at = pdl.read_table(spark, "main.w", catalog=url, snapshot=made, columns=["id", "s"])
    assert sorted(tuple(r) for r in at.collect()) == [(i, s) for i, _, s in want[made]]
    fallback = plan_read(spark, "main.w", catalog=url, columns=["id", "uuid", "s"])
    assert fallback.reason is not None and "column uuid has type uuid" in fallback.reason
    for snap in (made, made + 1):
        got = pdl.read_table(spark, "main.w", catalog=url, snapshot=snap, columns=["id", "uuid", "s"])
        assert got.columns == ["id", "uuid", "s"]
        assert sorted(tuple(r) for r in got.collect()) == want[snap]
    lake = pdl.connect(url)
    try:
        with expect_bad_input("hugeint-39-digits", lake) as err:
            pdl.read_table(spark, "main.w", catalog=url, columns=["id", "hugeint"]).collect()
        assert "column 'hugeint'" in str(err.value)
        with expect_bad_input("unknown-read-column", lake) as err:
            pdl.read_table(spark, "main.w", catalog=url, columns=["id", "ss"])
        assert "did you mean 's'" in str(err.value)
    finally:
        lake.close()
    with pytest.raises(InvalidOptionError, match="both as an argument and in options"):
        pdl.read_table(spark, "main.w", catalog=url, columns=["id"], options={"columns": "s"})
    for bad in ([], ["id", "ID"], ["id", ""], "id,,s", [1]):
        with pytest.raises(InvalidOptionError):
            pdl.read_table(spark, "main.w", catalog=url, columns=bad)
    with pytest.raises(InvalidOptionError, match="comma"):
        pdl.read_table(spark, "main.w", catalog=url, columns=["a,b"])
