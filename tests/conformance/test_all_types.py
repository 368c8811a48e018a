"""Issue #16 item 4: every column of DuckDB's ``test_all_types()`` that DuckLake accepts, written by DuckDB
(inlined on SQLite and PostgreSQL catalogs, in Parquet on SQLite), read exactly at every snapshot and in the change feed;
and a column we cannot read blocks only the reads that select it.

Values are compared by their Arrow storage (:mod:`tests.support.raw_rows`): TIME ``24:00:00``, DATE and TIMESTAMP
infinities and years beyond 9999 have no Python form.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
import sqlalchemy as sa
from pyspark.sql import types as T

import pyspark_ducklake as pdl
from pyspark_ducklake.exceptions import NoSuchColumnError
from tests.support.bad_inputs import expect_bad_input
from tests.support.duck import open_duckdb
from tests.support.raw_rows import raw_rows

# test_all_types() columns DuckLake refuses (BIGNUM, BIT, ENUM, UNION, fixed-size ARRAY; format-2 §6.1).
REFUSED_BY_DUCKLAKE = (
    "bignum",
    "bit",
    "small_enum",
    "medium_enum",
    "large_enum",
    "union",
    "fixed_int_array",
    "fixed_varchar_array",
    "fixed_nested_int_array",
    "fixed_nested_varchar_array",
    "fixed_struct_array",
    "struct_of_fixed_array",
    "fixed_array_of_int_list",
    "list_of_fixed_int_array",
)
# HUGEINT/UHUGEINT extremes have 39 digits (tested below); GEOMETRY is never inlined (test_geometry.py).
NOT_HERE = ("hugeint", "uhugeint", "geometry")


def all_types_columns(con: Any, *, parquet: bool, backend: str) -> list[str]:
    names = [r[0] for r in con.execute("DESCRIBE SELECT * FROM test_all_types()").fetchall()]
    # DuckDB's Parquet writer refuses TIME_NS (INTERNAL error), and on PostgreSQL DuckDB declares its inlined column
    # as TIME_NS, which PostgreSQL lacks: it exists only inlined on SQLite.
    skip = {*REFUSED_BY_DUCKLAKE, *NOT_HERE, *(["time_ns"] if parquet or backend == "postgres" else [])}
    return [n for n in names if n not in skip]


# Inlined values live in the catalog database (its own SQL types and text forms): both backends. DuckDB's Parquet
# files read the same whatever catalog lists them: SQLite only (the catalog is not under test there).
INLINED_BOTH_PARQUET_SQLITE = pytest.mark.parametrize(
    ("catalog", "limit"),
    [("sqlite", 10), ("postgres", 10), ("sqlite", 0)],
    ids=["sqlite-inlined", "postgres-inlined", "sqlite-parquet"],
    indirect=["catalog"],
)


def quoted(names: list[str]) -> str:
    return ", ".join(f'"{n}"' for n in names)


@INLINED_BOTH_PARQUET_SQLITE
def test_every_all_types_column_duckdb_wrote_reads_exactly(catalog: Any, limit: int) -> None:
    con = open_duckdb(catalog, inlining_row_limit=limit)
    try:
        cols = all_types_columns(con, parquet=limit == 0, backend=catalog.backend)
        con.execute(
            f"CREATE TABLE lake.main.t AS SELECT (row_number() OVER ())::BIGINT AS id, {quoted(cols)} "
            "FROM test_all_types()"
        )
        con.execute(f"INSERT INTO lake.main.t SELECT id + 10, {quoted(cols)} FROM lake.main.t")
        con.execute("DELETE FROM lake.main.t WHERE id IN (2, 13)")
        con.execute(f'UPDATE lake.main.t SET "{cols[0]}" = NULL WHERE id = 11')
        snapshots = [r[0] for r in con.execute("SELECT snapshot_id FROM lake.snapshots() ORDER BY 1").fetchall()]
        expected = {
            s: raw_rows(con.execute(f"SELECT * FROM lake.main.t AT (VERSION => {s})").to_arrow_table())
            for s in snapshots[2:]
        }
        feed = con.execute(
            f"SELECT {quoted(['id', *cols])}, change_type, snapshot_id, rowid "
            f"FROM ducklake_table_changes('lake', 'main', 't', {snapshots[1]}, {snapshots[-1]})"
        ).to_arrow_table()
    finally:
        con.close()
    lake = pdl.connect(catalog.url)
    try:
        for s, rows in expected.items():
            assert raw_rows(lake.scan("main.t", snapshot=s)) == rows, f"snapshot {s}"
        ours = lake.table_changes("main.t", snapshots[1], snapshots[-1])
        ours = ours.select(["id", *cols, "_change_type", "_snapshot_id", "_rowid"]).rename_columns(feed.column_names)
        assert sorted(raw_rows(ours), key=repr) == sorted(raw_rows(feed), key=repr)
    finally:
        lake.close()


@INLINED_BOTH_PARQUET_SQLITE
def test_a_column_we_cannot_read_blocks_only_reads_that_select_it(catalog: Any, limit: int) -> None:
    """HUGEINT beyond 38 digits (DuckDB's extremes) failed every read of the table, even of its other
    columns."""
    con = open_duckdb(catalog, inlining_row_limit=limit)
    try:
        con.execute(
            "CREATE TABLE lake.main.t AS SELECT (row_number() OVER ())::BIGINT AS id, hugeint, "
            "'x' || (row_number() OVER ()) AS s FROM test_all_types()"
        )
        expected = con.execute("SELECT id, s FROM lake.main.t ORDER BY id").fetchall()
    finally:
        con.close()
    lake = pdl.connect(catalog.url)
    try:
        got = lake.scan("main.t", columns=["id", "s"])
        assert sorted(zip(*(got.column(i).to_pylist() for i in range(2)), strict=True)) == expected
        got = lake.scan("main.t", columns=["s"], filter=[("id", "=", 3)])
        assert got.column("s").to_pylist() == ["x3"]
        for attempt in (lambda: lake.scan("main.t", columns=["id", "hugeint"]), lambda: lake.scan("main.t")):
            with expect_bad_input("hugeint-39-digits", lake) as err:
                attempt()
            assert "column 'hugeint'" in str(err.value)
    finally:
        lake.close()


def in_micros(table: pa.Table) -> pa.Table:
    """Every time column as ``time64[us]`` (Spark's TIME(6) comes back in nanoseconds; TIME_NS truncated)."""
    fields = [f.with_type(pa.time64("us")) if pa.types.is_time(f.type) else f for f in table.schema]
    return pa.table(
        [pc.cast(c, f.type, safe=False) for c, f in zip(table.columns, fields, strict=True)], pa.schema(fields)
    )


def _future_type_table(catalog: Any) -> None:
    """A table whose column ``odd`` has a type no version of this library knows (as a newer DuckLake's would), with
    rows in Parquet and inlined."""
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


def test_a_column_of_an_unknown_type_is_refused_only_when_selected(spark: Any, sqlite_catalog: Any) -> None:
    """Python ``columns=`` and Spark's projection (``read_table(...).select``) read the other columns; selecting it
    is an ``UnsupportedTypeError`` naming the column (the data source: tests/integration/test_spark_edges.py)."""
    _future_type_table(sqlite_catalog)
    pdl.register(spark)
    url = sqlite_catalog.url
    lake = pdl.connect(url)
    try:
        expected = [(i, f"s{i}") for i in range(25)]
        got = lake.scan("main.t", columns=["id", "s"])
        assert sorted(zip(got.column("id").to_pylist(), got.column("s").to_pylist(), strict=True)) == expected
        frame = pdl.read_table(spark, "main.t", catalog=url)
        assert frame.columns == ["id", "odd", "s"]
        assert sorted(tuple(r) for r in frame.select("id", "s").collect()) == expected
        assert frame.filter("id > 17").count() == 7
        for attempt in (
            lambda: lake.scan("main.t"),
            lambda: lake.scan("main.t", columns=["odd"]),
            lambda: frame.select("odd").collect(),
        ):
            with expect_bad_input("unreadable-type", lake) as err:
                attempt()
            assert "column 'odd' has DuckLake type 'future_type'" in str(err.value)
    finally:
        lake.close()


@pytest.mark.parametrize("limit", [10, 0], ids=["inlined", "parquet"])
def test_time_types_read_in_spark_as_time(spark: Any, sqlite_catalog: Any, limit: int) -> None:
    """TIME, TIMETZ (offset dropped, as DuckDB's Arrow read) and TIME_NS (truncated to µs) as Spark's TIME(6), in
    both read paths and the change feed; ``24:00:00`` is refused naming the column (Spark cannot hold it)."""
    con = open_duckdb(sqlite_catalog, inlining_row_limit=limit)
    ns = ", '12:34:56.123456789'::TIME_NS AS tn" if limit else ""
    try:
        con.execute(
            "CREATE TABLE lake.main.t AS SELECT i::BIGINT AS id, TIME '01:02:03.456789' + INTERVAL (i) MINUTE AS tm, "
            f"('12:34:56.789+05:30'::TIMETZ) AS tz{ns} FROM range(3) r(i)"
        )
        con.execute("INSERT INTO lake.main.t (id) VALUES (3)")
        expected = con.execute("SELECT * FROM lake.main.t").to_arrow_table()
        con.execute("INSERT INTO lake.main.t (id, tm) VALUES (4, '24:00:00')")
    finally:
        con.close()
    pdl.register(spark)
    url = sqlite_catalog.url
    want = raw_rows(in_micros(expected))
    source = spark.read.format("ducklake").option("catalog", url).option("snapshot", "2").load("main.t")
    assert all(isinstance(f.dataType, T.TimeType) for f in source.schema.fields[1:])
    for frame in (source, pdl.read_table(spark, "main.t", catalog=url, snapshot=2)):
        assert raw_rows(in_micros(frame.toArrow())) == want
    feed = spark.read.format("ducklake").option("catalog", url).option("readChangeFeed", "true")
    feed = feed.option("startingSnapshot", "1").option("endingSnapshot", "2").load("main.t")
    assert raw_rows(in_micros(feed.select(*expected.column_names).toArrow())) == want
    for attempt in (
        lambda: spark.read.format("ducklake").option("catalog", url).load("main.t").collect(),
        lambda: pdl.read_table(spark, "main.t", catalog=url).collect(),
    ):
        with expect_bad_input("spark-time-2400") as err:
            attempt()
        assert "column 'tm'" in str(err.value)


def test_spark_and_python_times_written_read_back_exactly_by_duckdb(spark: Any, sqlite_catalog: Any) -> None:
    """Spark TIME(6) columns (data source, inlined; ``write_table``, Parquet) and Arrow ``time64`` from Python: DuckDB
    reads the same TIME values, microseconds included."""
    import datetime as dt

    from pyspark_ducklake.spark_parquet_write import write_table

    con = open_duckdb(sqlite_catalog, inlining_row_limit=10)
    con.close()
    pdl.register(spark)
    url = sqlite_catalog.url
    times = [dt.time(0, 0), dt.time(23, 59, 59, 999999), None, dt.time(12, 34, 56, 789012)]
    schema = T.StructType([T.StructField("id", T.LongType()), T.StructField("tm", T.TimeType(6))])
    small = spark.createDataFrame([(i, t) for i, t in enumerate(times)], schema)
    small.write.format("ducklake").option("catalog", url).mode("append").save("main.a")
    large = spark.createDataFrame([(i, times[i % 4]) for i in range(40)], schema)
    write_table(large, "main.b", catalog=url)
    lake = pdl.connect(url)
    try:
        lake.append("main.a", pa.table({"id": pa.array([9], pa.int64()), "tm": pa.array([dt.time(1, 2, 3, 4)])}))
        assert lake.table("main.b").schema.field("tm").type == pa.time64("us")
    finally:
        lake.close()
    con = open_duckdb(sqlite_catalog)
    try:
        got_a = con.execute("SELECT id, tm FROM lake.main.a ORDER BY id").fetchall()
        got_b = con.execute("SELECT id, tm FROM lake.main.b ORDER BY id").fetchall()
        types = {
            r[0]
            for r in con.execute(
                "SELECT data_type FROM information_schema.columns WHERE table_catalog = 'lake' AND column_name = 'tm'"
            ).fetchall()
        }
    finally:
        con.close()
    assert got_a == [*((i, t) for i, t in enumerate(times)), (9, dt.time(1, 2, 3, 4))]
    assert got_b == [(i, times[i % 4]) for i in range(40)]
    assert types == {"TIME"}


def test_the_change_feed_reads_without_a_column_we_cannot_read(catalog: Any) -> None:
    """``lake.table_changes(..., columns=)``: the feed of the other columns equals DuckDB's, the change columns keep
    the names the whole table gives them (a ``_change_type`` column left out still renames the change column)."""
    con = open_duckdb(catalog, inlining_row_limit=10)
    try:
        con.execute('CREATE TABLE lake.main.t (id BIGINT, odd VARCHAR, "_change_type" VARCHAR, s VARCHAR)')
        con.execute("INSERT INTO lake.main.t SELECT i, 'o', 'c', 's' || i FROM range(20) r(i)")
        con.execute("INSERT INTO lake.main.t SELECT i, 'o', 'c', 's' || i FROM range(20, 23) r(i)")
        con.execute("DELETE FROM lake.main.t WHERE id IN (3, 21)")
        con.execute("UPDATE lake.main.t SET s = 'new' WHERE id IN (4, 22)")
        last = con.execute("SELECT max(snapshot_id) FROM lake.snapshots()").fetchone()[0]
        expected = sorted(
            con.execute(
                f"SELECT id, s, change_type, snapshot_id, rowid FROM ducklake_table_changes('lake', 'main', 't', 1, {last})"
            ).fetchall()
        )
    finally:
        con.close()
    engine = sa.create_engine(catalog.url)
    with engine.begin() as conn:
        conn.execute(sa.text("UPDATE ducklake_column SET column_type = 'future_type' WHERE column_name = 'odd'"))
    engine.dispose()
    lake = pdl.connect(catalog.url)
    try:
        feed = lake.table_changes("main.t", 1, last, columns=["s", "id"])
        assert feed.column_names == ["id", "s", "_change_type_1", "_snapshot_id", "_rowid", "_commit_timestamp"]
        assert sorted(zip(*(feed.column(i).to_pylist() for i in range(5)), strict=True)) == expected
        with expect_bad_input("unreadable-type", lake) as err:
            lake.table_changes("main.t", 1, last)
        assert "column 'odd'" in str(err.value)
        with pytest.raises(NoSuchColumnError):
            lake.table_changes("main.t", 1, last, columns=["id", "_change_type_1"])
    finally:
        lake.close()


@INLINED_BOTH_PARQUET_SQLITE
def test_timetz_offsets_read_as_duckdb_reads_them(catalog: Any, limit: int) -> None:
    """Offsets of hours only, negative half hours, seconds, the extremes; top-level and in a list (nested text)."""
    offsets = [
        "12:34:56+05",
        "12:34:56.5-00:30",
        "00:00:00-15:59:59",
        "23:59:59.999999+15:59:59",
        "12:00:00.000001-03:15:07",
    ]
    con = open_duckdb(catalog, inlining_row_limit=limit)
    try:
        con.execute("CREATE TABLE lake.main.t (id BIGINT, tz TIMETZ, l TIMETZ[])")
        for i, v in enumerate(offsets):
            con.execute(f"INSERT INTO lake.main.t VALUES ({i}, '{v}', ['{v}'::TIMETZ, NULL])")
        expected = raw_rows(con.execute("SELECT * FROM lake.main.t").to_arrow_table())
    finally:
        con.close()
    lake = pdl.connect(catalog.url)
    try:
        assert raw_rows(lake.scan("main.t")) == expected
    finally:
        lake.close()
