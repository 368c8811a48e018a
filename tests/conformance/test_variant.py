"""VARIANT (ducklake-format-2.md §4): what DuckDB writes (shredded Parquet) we read exactly, from Python, the change
feed and Spark; what we write (unshredded, annotated VARIANT(1)) DuckDB reads back equal, with the statistics rows
DuckDB keeps for such a file and never inlined, on SQLite and PostgreSQL.

Values are compared as Python values: ours decoded from the (metadata, value) pair, DuckDB's as its Python client
returns a VARIANT. A top-level variant null is NULL on both sides (DuckDB writes SQL NULL as variant null).
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import uuid
from collections.abc import Iterator
from typing import Any

import duckdb
import pyarrow as pa
import pytest
from sqlalchemy import create_engine, text

import pyspark_ducklake as pdl
from pyspark_ducklake.exceptions import InvalidVariantError
from pyspark_ducklake.io.variant import VARIANT_TYPE, decode, from_python
from tests.support.bad_inputs import expect_bad_input
from tests.support.duck import connect_duckdb, sql_string

# DuckDB expressions: objects shredded in part (a residual decimal, a missing field), lists of objects, mixed rows,
# keys with quotes, dots and unicode, deep nesting, every scalar type, NULL and JSON null, a long string.
SHAPES = [
    "{{'a': {i}, 'o': {{'q': 'x' || {i}, 'p': {i} * 1.5}}, 'l': [{i}, {i} + 1]}}::VARIANT",
    "{{'a': {i}, 'o': {{'q': 'y', 'p': 2.5::DECIMAL(4,1)}}, 'l': [{{'z': 1}}], "
    "'extra': TIMESTAMP '2020-01-01 10:00:00.123456'}}::VARIANT",
    "{{'a': 'str', 'o': NULL, 'l': NULL}}::VARIANT",
    "NULL",
    "'null'::JSON::VARIANT",
    "[{{'a': 1}}, {{'b': [1, 2]}}, NULL]::VARIANT",
    "{{'a': {i}, 'ts': TIMESTAMPTZ '1900-01-01 10:00:00+00', 'd': DATE '0001-01-01', "
    "'u': uuid '00000000-0000-0000-0000-000000000001', 'b': '\\x00\\xff'::BLOB, 't': TIME '23:59:59.999999'}}::VARIANT",
    """('{{"deep": {{"x": {{"y": {{"z": [1, {{"w": null}}]}}}}}}, "k\\"q": 2, "a.b": "dot", "ü": "ß", "[": {{}}}}')"""
    "::JSON::VARIANT",
    "12.34::DECIMAL(9,2)::VARIANT",
    "123456789012345678.123::DECIMAL(38,3)::VARIANT",
    "(-0.0)::DOUBLE::VARIANT",
    "repeat('ü', 5000)::VARIANT",
    "[]::INTEGER[]::VARIANT",
    "{i}::BIGINT::VARIANT",
    "true::VARIANT",
]


def shape_sql(i: int) -> str:
    return SHAPES[i % len(SHAPES)].format(i=i)


def duckdb_history(con: duckdb.DuckDBPyConnection) -> None:
    """Table ``t``: mixed shapes in one file, an all-int file (fully shredded root), deletes and an update."""
    con.execute("CREATE TABLE lake.t (id INTEGER, v VARIANT)")
    rows = ", ".join(f"({i}, {shape_sql(i)})" for i in range(3 * len(SHAPES)))
    con.execute(f"INSERT INTO lake.t VALUES {rows}")
    con.execute("INSERT INTO lake.t SELECT 1000 + i, (i * 7)::INTEGER::VARIANT FROM range(5) r(i)")
    con.execute("INSERT INTO lake.t VALUES (2000, 1::VARIANT)")  # one row: still a Parquet file (never inlined)
    con.execute("DELETE FROM lake.t WHERE id % 4 = 1")
    con.execute("UPDATE lake.t SET v = {'updated': id}::VARIANT WHERE id % 4 = 2")


def norm(value: Any) -> Any:
    """A value in the form both sides give. DuckDB's Python client returns an object with an empty key as a tuple
    of its values in key order (``v::JSON`` shows the key), so such an object is compared that way."""
    if isinstance(value, dict):
        if "" in value:
            return tuple(norm(v) for _, v in sorted(value.items()))
        return {k: norm(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return tuple(norm(v) for v in value)
    if isinstance(value, list):
        return [norm(v) for v in value]
    if isinstance(value, float) and value == 0:
        return (value, str(value))  # -0.0 and 0.0 differ
    return value


def ours(lake: pdl.Lake, snapshot: int | None = None) -> list[tuple[int, Any]]:
    rows = lake.scan("main.t", snapshot=snapshot).to_pylist()
    return sorted(
        (r["id"], None if r["v"] is None else norm(decode(r["v"]["metadata"], r["v"]["value"]))) for r in rows
    )


def duck(con: duckdb.DuckDBPyConnection, snapshot: int | None = None) -> list[tuple[int, Any]]:
    at = "" if snapshot is None else f" AT (VERSION => {snapshot})"
    return sorted((i, norm(v)) for i, v in con.execute(f"SELECT id, v FROM lake.t{at}").fetchall())


def snapshots(con: duckdb.DuckDBPyConnection) -> list[int]:
    return [s for (s,) in con.execute("SELECT snapshot_id FROM lake.snapshots() ORDER BY 1").fetchall()]


def catalog_rows(url: str, sql: str) -> list[tuple[Any, ...]]:
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            return [tuple(r) for r in conn.execute(text(sql)).all()]
    finally:
        engine.dispose()


def variant_table(values: list[Any]) -> pa.Table:
    pairs = [None if v is None else from_python(v) for v in values]
    v = pa.StructArray.from_arrays(
        [pa.array([p[1] if p else b"" for p in pairs], pa.binary()), pa.array([p[0] if p else b"" for p in pairs])],
        fields=list(VARIANT_TYPE),
        mask=pa.array([p is None for p in pairs]),
    )
    return pa.table({"id": pa.array(range(len(values)), pa.int32()), "v": v})


def test_duckdb_shredded_variants_read_equal_at_every_snapshot_and_in_the_change_feed(
    catalog: Any, duckdb_lake: Any
) -> None:
    con = duckdb_lake(catalog, inlining_row_limit=10)
    duckdb_history(con)
    # DuckDB shredded them (the reason this test exists) and inlined nothing
    assert catalog_rows(catalog.url, "SELECT count(*) FROM ducklake_file_variant_stats")[0][0] > 0
    assert catalog_rows(catalog.url, "SELECT count(*) FROM ducklake_inlined_data_tables") == [(0,)]
    lake = pdl.connect(catalog.url)
    for s in snapshots(con)[2:]:
        assert ours(lake, s) == duck(con, s), f"snapshot {s}"
    assert any(v is not None and isinstance(v, dict) for _, v in ours(lake))

    last = lake.current_snapshot_id()
    feed = lake.table_changes("main.t", 0, last).to_pylist()
    mine = sorted(
        (
            r["_change_type"],
            r["_rowid"],
            r["_snapshot_id"],
            r["id"],
            None if r["v"] is None else norm(decode(r["v"]["metadata"], r["v"]["value"])),
        )
        for r in feed
    )
    theirs = sorted(
        (c, rowid, snap, i, norm(v))
        for c, rowid, snap, i, v in con.execute(
            f"SELECT change_type, rowid, snapshot_id, id, v FROM ducklake_table_changes('lake', 'main', 't', 0, {last})"
        ).fetchall()
    )
    assert mine == theirs


def test_reads_without_the_variant_column_keep_every_row_with_or_without_rowid_and_snapshot_id(
    catalog: Any, duckdb_lake: Any, tmp_path: Any
) -> None:
    # DuckDB's variant tests make tables whose only other columns are the virtual ones: a read of only rowid and
    # snapshot_id decodes no column of the file, and it must still give every row (it gave none, then failed)
    con = duckdb_lake(catalog, inlining_row_limit=10)
    duckdb_history(con)
    con.execute("CREATE TABLE lake.only (v VARIANT)")
    con.execute(f"INSERT INTO lake.only SELECT {shape_sql(0).replace('{i}', 'i')} FROM range(30) r(i)")
    con.execute("DELETE FROM lake.only WHERE rowid % 7 = 3")
    lake = pdl.connect(catalog.url)
    for s in snapshots(con)[2:]:
        at = f" AT (VERSION => {s})"
        for table, cols in (("t", ["id", "rowid", "snapshot_id"]), ("t", ["rowid"]), ("t", ["id"])):
            theirs = sorted(con.execute(f"SELECT {', '.join(cols)} FROM lake.{table}{at}").fetchall())
            mine = lake.scan(f"main.{table}", snapshot=s, columns=cols)
            assert sorted(tuple(r.values()) for r in mine.to_pylist()) == theirs, (table, cols, s)
        if s >= snapshots(con)[-3]:  # main.only exists
            theirs = sorted(con.execute(f"SELECT rowid, snapshot_id FROM lake.only{at}").fetchall())
            mine = lake.scan("main.only", snapshot=s, columns=["rowid", "snapshot_id"])
            assert sorted(tuple(r.values()) for r in mine.to_pylist()) == theirs, s
    last = lake.current_snapshot_id()
    feed = lake.table_changes("main.only", 0, last, columns=[])
    assert sorted(
        zip(*(feed.column(c).to_pylist() for c in ("_change_type", "_rowid", "_snapshot_id")), strict=True)
    ) == sorted(
        con.execute(
            f"SELECT change_type, rowid, snapshot_id FROM ducklake_table_changes('lake', 'main', 'only', 0, {last})"
        ).fetchall()
    )

    # a DuckDB-file catalog, where DuckDB inlines VARIANT rows
    path = str(tmp_path / "v.ducklake")
    duck = connect_duckdb()
    try:
        duck.execute(f"ATTACH {sql_string('ducklake:' + path)} AS lake (DATA_PATH {sql_string(str(tmp_path / 'f'))})")
        duck.execute("CREATE TABLE lake.only (v VARIANT)")
        duck.execute("INSERT INTO lake.only VALUES (1::VARIANT), (NULL), ({'a': 2}::VARIANT)")
        duck.execute("INSERT INTO lake.only SELECT i::VARIANT FROM range(20) r(i)")
        theirs = sorted(duck.execute("SELECT rowid, snapshot_id FROM lake.only").fetchall())
    finally:
        duck.close()
    with pdl.connect(f"ducklake:{path}") as inlined:
        mine = inlined.scan("main.only", columns=["rowid", "snapshot_id"])
    assert sorted(tuple(r.values()) for r in mine.to_pylist()) == theirs and len(theirs) == 23


HOSTILE = [
    42,
    "hello",
    None,
    {"a": 1, "b": [True, None, "x"]},
    [],
    {},
    2.5,
    -0.0,
    decimal.Decimal("12.34"),
    decimal.Decimal("-12345678901234567890.123456789"),
    dt.date(1, 1, 1),
    dt.datetime(2020, 1, 2, 3, 4, 5, 6),
    dt.datetime(1900, 1, 2, 3, 4, 5, 6, tzinfo=dt.timezone.utc),
    b"\x00\xff",
    "ü" * 100_000,
    {'k"q': {"a.b": {"ü": -1, "": [None, {}]}}, "[x]": "'"},
    uuid.UUID(int=5),
    dt.time(1, 2, 3, 4),
    1 << 40,
    [[[[[[[[[[{"deep": [1]}]]]]]]]]]],
    {f"k{i:03d}": i for i in range(300)},  # more than 255 fields
]


def test_we_write_variant_duckdb_reads_it_back_with_its_stats_and_never_inlined(catalog: Any, duckdb_lake: Any) -> None:
    lake = pdl.connect(catalog.url, catalog.data_path, data_inlining_row_limit=10)
    data = variant_table(HOSTILE)
    lake.create_table("main.t", data.schema)
    lake.append("main.t", data.slice(0, 3))  # within the inlining limit: still a Parquet file, as DuckDB does
    lake.append("main.t", data.slice(3))
    assert catalog_rows(catalog.url, "SELECT count(*) FROM ducklake_inlined_data_tables") == [(0,)]
    assert catalog_rows(catalog.url, "SELECT column_type FROM ducklake_column WHERE column_name = 'v'") == [
        ("variant",)
    ]
    con = duckdb_lake(catalog)
    assert duck(con) == sorted((i, norm(v)) for i, v in enumerate(HOSTILE))
    assert ours(lake) == duck(con)
    assert con.execute("SELECT count(*) FROM lake.t WHERE v IS NULL").fetchone() == (1,)
    typeof = dict(con.execute("SELECT id, variant_typeof(v) FROM lake.t WHERE id IN (8, 10, 12, 16)").fetchall())
    assert typeof == {8: "DECIMAL(4, 2)", 10: "DATE", 12: "TIMESTAMP_MICROS_TZ", 16: "UUID"}

    # Stats as DuckDB keeps them for a file it did not shred: one row, every row counted, no NULLs, no min/max
    con.execute("CREATE TABLE lake.d (id INTEGER, v VARIANT)")
    con.execute("INSERT INTO lake.d VALUES (0, 42::VARIANT), (1, 'x'::VARIANT), (2, [1]::VARIANT)")
    rows = catalog_rows(
        catalog.url,
        "SELECT t.table_name, s.value_count, s.null_count, s.min_value, s.max_value, s.contains_nan, s.extra_stats "
        "FROM ducklake_file_column_stats s JOIN ducklake_table t ON t.table_id = s.table_id "
        "JOIN ducklake_column c ON c.table_id = s.table_id AND c.column_id = s.column_id "
        "WHERE c.column_name = 'v' ORDER BY s.data_file_id",
    )
    assert rows == [
        ("t", 3, 0, None, None, None, None),
        ("t", len(HOSTILE) - 3, 0, None, None, None, None),
        ("d", 3, 0, None, None, None, None),
    ]
    table_stats = catalog_rows(
        catalog.url,
        "SELECT t.table_name, s.contains_null, s.contains_nan, s.min_value, s.max_value, s.extra_stats "
        "FROM ducklake_table_column_stats s JOIN ducklake_table t ON t.table_id = s.table_id "
        "WHERE s.column_id = 2 ORDER BY t.table_name",
    )
    assert [r[1:] for r in table_stats] == [(False, None, None, None, None)] * 2
    assert catalog_rows(catalog.url, "SELECT count(*) FROM ducklake_file_variant_stats") == [(0,)]

    # DuckDB keeps writing into our table (shredded files); we read its rows and ours
    con.execute("INSERT INTO lake.t SELECT 100 + i, {'n': i, 's': 'v' || i}::VARIANT FROM range(20) r(i)")
    con.execute("DELETE FROM lake.t WHERE id IN (0, 101)")
    assert ours(lake) == duck(con)


def test_bad_variant_writes_are_refused_with_nothing_written(sqlite_catalog: Any, duckdb_lake: Any) -> None:
    lake = pdl.connect(sqlite_catalog.url, sqlite_catalog.data_path)
    lake.create_table("main.t", variant_table([1]).schema)
    good = from_python({"a": 1})
    truncated = pa.table(
        {
            "id": pa.array([1, 2], pa.int32()),
            "v": pa.StructArray.from_arrays(
                [pa.array([good[1], good[1][:-1]]), pa.array([good[0], good[0]])], fields=list(VARIANT_TYPE)
            ),
        }
    )
    with expect_bad_input("variant-malformed", lake) as err:
        lake.append("main.t", truncated)
    assert isinstance(err.value, InvalidVariantError) and "row 1" in str(err.value)
    with expect_bad_input("variant-not-variant", lake):
        lake.append("main.t", pa.table({"id": pa.array([1], pa.int32()), "v": pa.array(['{"a": 1}'])}))
    con = duckdb_lake(sqlite_catalog)
    con.execute("CREATE TABLE lake.n (s STRUCT(v VARIANT, k INTEGER))")
    nested = pa.table({"s": pa.array([{"v": {"value": good[1], "metadata": good[0]}, "k": 1}])})
    with expect_bad_input("variant-nested", lake):
        lake.append("main.n", nested)


@pytest.fixture
def lake_conf(spark: Any, sqlite_catalog: Any) -> Iterator[None]:
    """The session's ``spark.ducklake.*`` conf names the lake; unset and registered again afterwards (the one
    SparkSession serves every test, and ``register`` captures the conf)."""
    spark.conf.set("spark.ducklake.catalog", sqlite_catalog.url)
    spark.conf.set("spark.ducklake.dataPath", sqlite_catalog.data_path)
    pdl.register(spark)
    try:
        yield
    finally:
        spark.conf.unset("spark.ducklake.catalog")
        spark.conf.unset("spark.ducklake.dataPath")
        pdl.register(spark)


def test_spark_reads_and_writes_variant(sqlite_catalog: Any, duckdb_lake: Any, spark: Any, lake_conf: None) -> None:
    from pyspark.sql import functions as F

    from pyspark_ducklake.spark_parquet_read import plan_read

    con = duckdb_lake(sqlite_catalog, inlining_row_limit=10)
    duckdb_history(con)
    url = sqlite_catalog.url

    def spark_rows(df: Any) -> list[tuple[int, Any]]:
        return sorted(
            (r["id"], None if r["v"] is None else norm(decode(r["v"].metadata, r["v"].value))) for r in df.collect()
        )

    source = spark.read.format("ducklake").load("main.t")
    assert source.schema.simpleString() == "struct<id:int,v:variant>"
    assert spark_rows(source) == duck(con)
    assert "variant" in (plan_read(spark, "main.t").reason or "")  # Spark's own reader is not exact here
    assert spark_rows(pdl.read_table(spark, "main.t")) == duck(con)
    first = snapshots(con)[2]
    old = spark.read.format("ducklake").option("snapshot", first).load("main.t")
    assert spark_rows(old) == duck(con, first)
    feed = spark.read.format("ducklake").option("startingSnapshot", 0).load("main.t")
    changed = sorted(
        (r["_change_type"], r["_rowid"], None if r["v"] is None else norm(decode(r["v"].metadata, r["v"].value)))
        for r in feed.collect()
    )
    last = snapshots(con)[-1]
    assert changed == sorted(
        (c, rowid, norm(v))
        for c, rowid, v in con.execute(
            f"SELECT change_type, rowid, v FROM ducklake_table_changes('lake', 'main', 't', 0, {last})"
        ).fetchall()
    )
    # without the VARIANT column, on every path: the data source's columns option, the fast path, the feed
    ids = sorted(i for i, _ in duck(con))
    assert (
        sorted(r["id"] for r in spark.read.format("ducklake").option("columns", "id").load("main.t").collect()) == ids
    )
    assert sorted(r["id"] for r in pdl.read_table(spark, "main.t", columns=["id"]).collect()) == ids
    feed_ids = feed.select("_change_type", "_rowid", "id").collect()
    narrow = spark.read.format("ducklake").option("startingSnapshot", 0).option("columns", "id").load("main.t")
    assert sorted(map(tuple, narrow.select("_change_type", "_rowid", "id").collect())) == sorted(map(tuple, feed_ids))

    texts = ['{"a": 1, "b": [1.5, null, "x"]}', "42", "null", None, '"s"', '{"k\\"q": {"a.b": "ü", "": {}}}', "[]"]
    df = spark.createDataFrame(list(enumerate(texts)), "id int, j string").select("id", F.parse_json("j").alias("v"))
    df.write.format("ducklake").mode("append").save("main.w")
    outcome = pdl.write_table(df.withColumn("id", F.col("id") + 100), "main.w", mode="append")
    assert not outcome.native and "variant" in (outcome.reason or "")
    got = dict(con.execute("SELECT id, v::JSON FROM lake.w").fetchall())
    for i, t in enumerate(texts):
        for key in (i, i + 100):
            want = None if t is None else json.loads(t)
            assert (None if got[key] is None else json.loads(got[key])) == want, key
    assert con.execute("SELECT count(*) FROM lake.w WHERE v IS NULL").fetchone() == (4,)  # SQL NULL and JSON null
    # we read back what Spark wrote as Spark holds it (JSON null and SQL NULL both NULL, as in DuckDB)
    ours_w = spark_rows(spark.read.format("ducklake").load("main.w").filter("id < 100"))
    theirs = [(r["id"], None if r["v"] is None else norm(decode(r["v"].metadata, r["v"].value))) for r in df.collect()]
    assert ours_w == sorted(theirs)

    # the streaming sink: small batches (under its inlining limit of 1000 rows) still go to Parquet, as DuckDB's
    from pyspark_ducklake import ducklake_sink

    folder = f"{sqlite_catalog.data_path.rstrip('/')}-stream"
    for k in range(2):
        spark.range(k * 5, k * 5 + 5).write.mode("append").parquet(f"{folder}/in")
    stream = spark.readStream.schema("id long").parquet(f"{folder}/in")
    stream = stream.select("id", F.parse_json(F.format_string('{"n": %d, "s": "x"}', F.col("id"))).alias("v"))
    query = stream.writeStream.foreachBatch(ducklake_sink("main.s")).option("checkpointLocation", f"{folder}/ck")
    query.trigger(availableNow=True).start().awaitTermination()
    assert con.execute(
        "SELECT count(*), bool_and(v.n::BIGINT = id), bool_and(v.s::VARCHAR = 'x') FROM lake.s"
    ).fetchone() == (
        10,
        True,
        True,
    )
    assert catalog_rows(url, "SELECT count(*) FROM ducklake_inlined_data_tables") == [(0,)]

    nested = spark.createDataFrame([(1, '{"a": 1}')], "id int, j string").select(
        "id", F.struct(F.parse_json("j").alias("v")).alias("s")
    )
    lake = pdl.connect(url)
    with expect_bad_input("variant-nested-spark", lake):
        nested.write.format("ducklake").mode("append").save("main.nested")


def test_a_variant_column_added_with_a_default_reads_it_as_duckdb_does(catalog: Any, duckdb_lake: Any) -> None:
    # DuckDB reads the default of a VARIANT column as the VARCHAR variant of its text, for old rows and new ones
    con = duckdb_lake(catalog)
    con.execute("CREATE TABLE lake.t (id INTEGER, v VARIANT)")
    con.execute("INSERT INTO lake.t VALUES (1, 1::VARIANT), (2, NULL)")
    con.execute("ALTER TABLE lake.t ADD COLUMN w VARIANT DEFAULT 42")
    con.execute("ALTER TABLE lake.t ADD COLUMN n VARIANT DEFAULT NULL")
    lake = pdl.connect(catalog.url)
    lake.append("main.t", pa.table({"id": pa.array([3], pa.int32())}))  # w, n missing: their defaults
    con.execute("INSERT INTO lake.t (id) VALUES (4)")
    theirs = sorted(con.execute("SELECT id, w, variant_typeof(w), n FROM lake.t").fetchall())
    assert theirs == [(i, "42", "VARCHAR", None) for i in (1, 2, 3, 4)]
    mine = sorted(
        (r["id"], decode(r["w"]["metadata"], r["w"]["value"]), r["n"]) for r in lake.scan("main.t").to_pylist()
    )
    assert mine == [(i, "42", None) for i in (1, 2, 3, 4)]


def test_our_append_clears_the_table_variant_stats_so_duckdb_does_not_prune_our_rows(
    catalog: Any, duckdb_lake: Any
) -> None:
    # DuckDB keeps per-table variant stats (extra_stats) only while every file has them; a file without them (ours,
    # or DuckDB's own unshredded ones) clears them. Left in place they bound our values wrongly: DuckDB then skips
    # the table for `v::INTEGER = 100` and finds no row.
    con = duckdb_lake(catalog, inlining_row_limit=0)
    con.execute("CREATE TABLE lake.t (id INTEGER, v VARIANT)")
    con.execute("INSERT INTO lake.t SELECT i, (i + 1)::INTEGER::VARIANT FROM range(5) r(i)")
    stats_sql = "SELECT extra_stats FROM ducklake_table_column_stats WHERE column_id = 2"
    assert catalog_rows(catalog.url, stats_sql)[0][0] is not None
    lake = pdl.connect(catalog.url)
    lake.append("main.t", variant_table([100]).set_column(0, "id", pa.array([10], pa.int32())))
    assert catalog_rows(catalog.url, stats_sql) == [(None,)]
    assert con.execute("SELECT id FROM lake.t WHERE v::INTEGER = 100").fetchall() == [(10,)]
    assert con.execute("SELECT id FROM lake.t WHERE v::INTEGER > 50").fetchall() == [(10,)]
