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


def collect_each(frames: dict[str, Any], columns: list[str]) -> dict[str, list[tuple[Any, ...]]]:
    """Each frame's ``columns`` rows, sorted, from one Spark job (the frames tagged and joined): a job costs seconds
    on a loaded machine, and the reads compared here differ in how they are planned, not in the job."""
    from pyspark.sql import functions as F

    joined = None
    for name, frame in frames.items():
        tagged = frame.select(*columns, F.lit(name).alias("_read"))
        joined = tagged if joined is None else joined.unionByName(tagged)
    assert joined is not None
    out: dict[str, list[tuple[Any, ...]]] = {name: [] for name in frames}
    for r in joined.collect():
        out[r["_read"]].append(tuple(r[c] for c in columns))
    return {name: sorted(got) for name, got in out.items()}


# The four failing reads of a HUGEINT column: by route (data source, read_table) and by whether the columns option
# names it, each pair of route, option and storage (inlined, Parquet) once (pairwise, four of the eight).
FAILING_READS = {
    "parquet": [("source", "id, hugeint"), ("read_table", None)],
    "inlined": [("source", None), ("read_table", "hugeint")],
}


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
    reordered = source(columns="s,id")
    assert reordered.columns == ["id", "s"]  # the table's order
    assert source(columns="s").columns == ["s"]
    fast = pdl.read_table(spark, "main.t", catalog=url, options={"columns": "s,ID"})
    assert fast.columns == ["id", "s"]
    feed = source(columns="s, id", readChangeFeed="true", startingSnapshot=str(made))
    assert feed.columns == ["id", "s", "_change_type", "_snapshot_id", "_rowid", "_commit_timestamp"]
    at = source(columns="id,s", snapshot=str(made))
    got = collect_each({"spaced": frame, "reordered": reordered, "fast": fast, "feed": feed, "at": at}, ["id", "s"])
    assert got == {"spaced": latest, "reordered": latest, "fast": latest, "feed": latest, "at": at_two}
    lake = pdl.connect(url)
    try:
        storage = "inlined" if limit else "parquet"
        for route, columns in FAILING_READS[storage]:
            options = {} if columns is None else {"columns": columns}
            with expect_bad_input("hugeint-39-digits", lake) as err:
                if route == "source":
                    source(**options).collect()
                else:
                    pdl.read_table(spark, "main.t", catalog=url, options=options).collect()
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
    frames = {}
    for columns in (["S", "id"], "id, s", ("id", "s")):
        fast = plan_read(spark, "main.w", catalog=url, columns=columns)
        assert fast.reason is None, fast.reason  # Spark's Parquet reader: no HUGEINT among the columns
        frames[repr(columns)] = pdl.read_table(spark, "main.w", catalog=url, columns=columns)
        assert frames[repr(columns)].columns == ["id", "s"]
    frames["at"] = pdl.read_table(spark, "main.w", catalog=url, snapshot=made, columns=["id", "s"])
    got = collect_each(frames, ["id", "s"])
    assert got.pop("at") == [(i, s) for i, _, s in want[made]]
    assert got and all(rows == [(i, s) for i, _, s in want[made + 1]] for rows in got.values()), got
    fallback = plan_read(spark, "main.w", catalog=url, columns=["id", "uuid", "s"])
    assert fallback.reason is not None and "column uuid has type uuid" in fallback.reason
    frames = {}
    for snap in (made, made + 1):
        frames[str(snap)] = pdl.read_table(spark, "main.w", catalog=url, snapshot=snap, columns=["id", "uuid", "s"])
        assert frames[str(snap)].columns == ["id", "uuid", "s"]
    got = collect_each(frames, ["id", "uuid", "s"])
    assert got == {str(snap): want[snap] for snap in (made, made + 1)}
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
