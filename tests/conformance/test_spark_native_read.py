"""``pdl.read_table``: Spark's own Parquet reader over DuckLake tables, equal to DuckDB at every snapshot.

Histories written by DuckDB and by this library (deletes, inlined rows and deletes, updates, added columns with
defaults, renames, promotions, drops, partitions, flushes and merges, overwrite) are read through the native path
at every snapshot and compared with DuckDB's ``AT (VERSION => s)``. One backend (SQLite): the subject is Spark's
reader over the files the catalog lists, not the catalog SQL, which the Python scans compare with DuckDB on SQLite and
PostgreSQL (tests/conformance/test_deletion_vectors.py, test_added_files.py and the read tests). All snapshots of a
table are read in one Spark job (a union tagged by snapshot), which keeps the test fast.
"""

from __future__ import annotations

import datetime as dt
import decimal
from functools import reduce
from typing import Any

import duckdb
import pyarrow as pa
import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

import pyspark_ducklake as pdl
from pyspark_ducklake.spark import deleted_rows
from pyspark_ducklake.spark_parquet_read import NativeRead, plan_read
from tests.support.compare import canonical_rows
from tests.support.duck import open_duckdb

SNAP = "_snap"


def snapshots(con: duckdb.DuckDBPyConnection, first: int = 1) -> list[int]:
    rows = con.execute(f"SELECT snapshot_id FROM lake.snapshots() WHERE snapshot_id >= {first} ORDER BY 1").fetchall()
    return [r[0] for r in rows]


def duckdb_rows(con: duckdb.DuckDBPyConnection, table: str, snapshot: int, casts: dict[str, str]) -> list[Any]:
    """DuckDB's rows at the snapshot, with the columns cast to the types Spark shows them as."""
    try:
        names = [
            r[0]
            for r in con.execute(f'DESCRIBE SELECT * FROM lake.main."{table}" AT (VERSION => {snapshot})').fetchall()
        ]
    except duckdb.CatalogException:
        return []  # the table does not exist yet at this snapshot
    cols = [f'CAST("{n}" AS {casts[n]}) AS "{n}"' if n in casts else f'"{n}"' for n in names]
    data = con.execute(f'SELECT {", ".join(cols)} FROM lake.main."{table}" AT (VERSION => {snapshot})').to_arrow_table()
    return canonical_rows(data)


def native_reads(spark: SparkSession, catalog: Any, table: str, snaps: list[int]) -> dict[int, NativeRead]:
    lake = pdl.connect(catalog.url)
    try:
        present = [s for s in snaps if any(t.table_name == table for t in _tables_at(lake, s))]
    finally:
        lake.close()
    return {s: plan_read(spark, f"main.{table}", snapshot=s, catalog=catalog.url) for s in present}


def _tables_at(lake: pdl.Lake, snapshot: int) -> list[Any]:
    from pyspark_ducklake.catalog import reader as R

    with lake.engine.connect() as conn:
        return R.tables(conn, snapshot, "main")


def spark_rows_by_snapshot(spark: SparkSession, reads: dict[int, NativeRead]) -> dict[int, list[Any]]:
    """Every snapshot's DataFrame in one job: a union of the reads, each tagged with its snapshot."""
    out: dict[int, list[Any]] = {s: [] for s in reads}
    by_schema: dict[str, list[DataFrame]] = {}
    for s, read in reads.items():
        df = read.dataframe(spark)
        by_schema.setdefault(df.schema.simpleString(), []).append(df.withColumn(SNAP, F.lit(s)))
    for frames in by_schema.values():
        data = reduce(DataFrame.union, frames).toArrow()
        for s in set(data.column(SNAP).to_pylist()):
            part = data.filter(pa.compute.equal(data.column(SNAP), s)).drop_columns([SNAP])
            out[s] = canonical_rows(part)
    return out


def assert_native_equals_duckdb(
    spark: SparkSession,
    catalog: Any,
    con: duckdb.DuckDBPyConnection,
    table: str,
    casts: dict[str, str] | None = None,
    *,
    expect_inlined: bool = False,
    latest_only: bool = False,
) -> dict[int, NativeRead]:
    """Every snapshot of ``table`` (or the latest) read natively equals DuckDB's rows at that snapshot."""
    snaps = snapshots(con)[-1:] if latest_only else snapshots(con)
    reads = native_reads(spark, catalog, table, snaps)
    not_native = {s: r.reason for s, r in reads.items() if not r.native}
    assert not not_native, not_native
    if expect_inlined:
        assert any(r.inlined is not None and r.inlined.num_rows for r in reads.values())
    got = spark_rows_by_snapshot(spark, reads)
    for s in reads:
        want = duckdb_rows(con, table, s, casts or {})
        assert got[s] == want, f"{table} at snapshot {s}"
    return reads


DUCK_CASTS = {"ub": "DECIMAL(20,0)", "j": "VARCHAR"}
DUCK_ROW = (
    "i, i::INTEGER, 'row ' || i, i / 3, i / 100, DATE '1500-01-01' + i::INTEGER, "
    "TIMESTAMP '1850-03-04 05:06:07.123456' + INTERVAL (i) HOUR, TIMESTAMPTZ '2024-01-01 00:00:00.5+00', "
    "(i % 250)::UTINYINT, 18446744073709551615 - i, '\\x00\\xFF'::BLOB, '{\"a\": 1}', "
    "CASE WHEN i % 7 = 0 THEN NULL ELSE [i::INTEGER, NULL] END, {'a': i::INTEGER, 'b': 'q'}, "
    "MAP {'k': i::INTEGER}, (i % 100)::SMALLINT, TIMESTAMP_MS '2024-05-06 07:08:09.123' + INTERVAL (i) SECOND, "
    "(4000000000 - i)::UINTEGER, i * 123456789.0123456789"
)


def test_duckdb_written_history(spark: SparkSession, sqlite_catalog: Any) -> None:
    catalog = sqlite_catalog
    con = open_duckdb(catalog, inlining_row_limit=10)
    try:
        con.execute(
            "CREATE TABLE lake.main.h (id BIGINT, i INTEGER, s VARCHAR, f FLOAT, amount DECIMAL(9,2), d DATE, "
            "ts TIMESTAMP, tz TIMESTAMPTZ, u8 UTINYINT, ub UBIGINT, bl BLOB, j JSON, l INTEGER[], "
            "st STRUCT(a INTEGER, b VARCHAR), m MAP(VARCHAR, INTEGER), sm SMALLINT, ms TIMESTAMP_MS, u32 UINTEGER, "
            "big DECIMAL(38,10))"
        )
        con.execute(f"INSERT INTO lake.main.h SELECT {DUCK_ROW} FROM range(300) r(i)")
        con.execute(f"INSERT INTO lake.main.h SELECT {DUCK_ROW} FROM range(1000, 1003) r(i)")  # inlined
        con.execute("DELETE FROM lake.main.h WHERE id % 10 = 0")  # a delete file, inlined rows ended
        con.execute("DELETE FROM lake.main.h WHERE id IN (1, 2, 3)")  # inlined deletes of file rows
        con.execute("UPDATE lake.main.h SET s = 'upd' WHERE id IN (5, 1001)")
        con.execute(  # one snapshot each for the column changes, to keep the test short
            "BEGIN; ALTER TABLE lake.main.h ADD COLUMN extra INTEGER DEFAULT 5; "
            "ALTER TABLE lake.main.h ADD COLUMN note VARCHAR DEFAULT 'n/a'; "
            "ALTER TABLE lake.main.h ADD COLUMN st.c INTEGER; COMMIT"
        )
        with_c = DUCK_ROW.replace("'b': 'q'}", "'b': 'q', 'c': i::INTEGER}")
        con.execute(f"INSERT INTO lake.main.h SELECT {with_c}, i, 'new' FROM range(2000, 2100) r(i)")
        con.execute(
            "BEGIN; ALTER TABLE lake.main.h RENAME COLUMN s TO s2; ALTER TABLE lake.main.h RENAME COLUMN st.a TO a2; "
            "ALTER TABLE lake.main.h ALTER COLUMN i TYPE BIGINT; ALTER TABLE lake.main.h ALTER COLUMN sm TYPE DOUBLE; "
            "ALTER TABLE lake.main.h DROP COLUMN f; COMMIT"
        )
        late = with_c.replace(" i / 3,", "").replace("{'a':", "{'a2':")
        con.execute(f"INSERT INTO lake.main.h SELECT {late}, 7, 'late' FROM range(3000, 3004) r(i)")  # inlined
        # Before the flush: inlined rows of three schema versions (earlier snapshots are read after the flush).
        assert_native_equals_duckdb(spark, catalog, con, "h", DUCK_CASTS, expect_inlined=True, latest_only=True)
        con.execute("CALL ducklake_flush_inlined_data('lake')")
        con.execute("DELETE FROM lake.main.h WHERE id IN (1002, 3001, 2050)")
        con.execute("CALL ducklake_merge_adjacent_files('lake')")
        con.execute("DELETE FROM lake.main.h WHERE id BETWEEN 100 AND 160")
        reads = assert_native_equals_duckdb(spark, catalog, con, "h", DUCK_CASTS)
    finally:
        con.close()
    last = reads[max(reads)]
    assert any(g.deletes for g in last.groups)
    assert any(r.cast for g in last.groups for r in g.layout)  # promoted columns are cast from older files
    assert any(g.partial for r in reads.values() for g in r.groups)  # flushed/merged rows of later snapshots


def test_duckdb_partitioned_table_with_special_path(spark: SparkSession, sqlite_catalog: Any) -> None:
    # Partitioned histories run on both catalogs in test_our_written_history; this one adds DuckDB's own layout
    # and a table folder whose name Spark's file paths must URL-encode (space, ü) for the delete filter to match,
    # with a quote inside the delete filter's SQL text.
    catalog = sqlite_catalog
    name = "p t ü 'q"
    table = f'lake.main."{name}"'
    con = open_duckdb(catalog, inlining_row_limit=10)
    try:
        con.execute(f"CREATE TABLE {table} (id INTEGER, k VARCHAR, ts TIMESTAMP, v DOUBLE)")
        con.execute(f"ALTER TABLE {table} SET PARTITIONED BY (k, year(ts))")
        con.execute(
            f"INSERT INTO {table} SELECT i, CASE WHEN i % 3 = 0 THEN NULL ELSE 'k #' || (i % 2) END, "
            "TIMESTAMP '2020-01-01' + INTERVAL (i * 50) DAY, i / 4 FROM range(200) r(i)"
        )
        con.execute(f"DELETE FROM {table} WHERE id % 9 = 0")
        con.execute(f"ALTER TABLE {table} SET PARTITIONED BY (month(ts))")
        con.execute(
            f"INSERT INTO {table} SELECT i, 'x', TIMESTAMP '2021-01-01' + INTERVAL (i) DAY, 0 FROM range(500, 560) r(i)"
        )
        con.execute(f"UPDATE {table} SET v = -1 WHERE id % 5 = 0")
        assert_native_equals_duckdb(spark, catalog, con, name)
    finally:
        con.close()


def test_our_written_history(spark: SparkSession, sqlite_catalog: Any) -> None:
    catalog = sqlite_catalog
    lake = pdl.connect(catalog.url, catalog.data_path)
    schema = pa.schema(
        [
            ("id", pa.int64()),
            ("k", pa.string()),
            ("v", pa.float32()),
            ("n", pa.int32()),
            ("amount", pa.decimal128(9, 2)),
            ("ts", pa.timestamp("us", tz="UTC")),
            ("st", pa.struct([("a", pa.int32()), ("b", pa.string())])),
            ("l", pa.list_(pa.int64())),
        ]
    )

    def rows(first: int, n: int) -> pa.Table:
        ids = list(range(first, first + n))
        t0 = dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc)
        return pa.table(
            {
                "id": ids,
                "k": [f"k{i % 3}" for i in ids],
                "v": pa.array([i / 8 for i in ids], pa.float32()),
                "n": pa.array([i % 1000 for i in ids], pa.int32()),
                "amount": [None if i % 11 == 0 else decimal.Decimal(i) / 100 for i in ids],
                "ts": [t0 + dt.timedelta(minutes=i) for i in ids],
                "st": [{"a": i, "b": f"b{i}"} for i in ids],
                "l": [[i, i + 1] for i in ids],
            }
        )

    try:
        lake.create_table("main.ours", schema)
        lake.append("main.ours", rows(0, 5))  # inlined
        lake.append("main.ours", rows(100, 400))
        lake.delete("main.ours", [("n", "<", 130)])  # a delete file and inlined rows ended
        lake.add_column("main.ours", "extra", pa.int32(), default=5)
        lake.add_column("main.ours", "at", pa.timestamp("us"), default=dt.datetime(2001, 2, 3, 4, 5, 6, 7))
        lake.rename_column("main.ours", "k", "kind")
        lake.set_column_type("main.ours", "v", pa.float64())
        lake.set_column_type("main.ours", "n", pa.int64())
        lake.set_partitioning("main.ours", ["kind"])
        lake.close()
        pdl.register(spark)
        more = spark.createDataFrame(
            rows(1000, 300).rename_columns(["id", "kind", "v", "n", "amount", "ts", "st", "l"])
        )
        (
            more.drop("st")
            .withColumn("v", F.col("v").cast("double"))
            .withColumn("n", F.col("n").cast("long"))
            .write.format("ducklake")
            .mode("append")
            .option("catalog", catalog.url)
            .option("dataPath", catalog.data_path)
            .save("main.ours")
        )
        lake = pdl.connect(catalog.url, catalog.data_path)
        lake.append("main.ours", rows(5000, 3).rename_columns(["id", "kind", "v", "n", "amount", "ts", "st", "l"]))
        lake.delete("main.ours", [("id", "<", 300)])  # a second delete of the same files: one merged delete file
        lake.drop_column("main.ours", "l")
        lake.flush_inlined_data("main.ours")
        lake.delete("main.ours", [("id", "=", 5001)])
        con = open_duckdb(catalog)
        try:
            lake.overwrite(
                "main.ours",
                rows(9000, 20).drop_columns(["l"]).rename_columns(["id", "kind", "v", "n", "amount", "ts", "st"]),
            )
            reads = assert_native_equals_duckdb(spark, catalog, con, "ours")
        finally:
            con.close()
    finally:
        lake.close()
    assert len({r.snapshot for r in reads.values()}) >= 12


def test_falls_back_where_spark_cannot_read_exactly(spark: SparkSession, sqlite_catalog: Any) -> None:
    catalog = sqlite_catalog
    con = open_duckdb(catalog, inlining_row_limit=10)
    try:
        con.execute("CREATE TABLE lake.main.odd (id INTEGER, u UUID, iv INTERVAL, t TIME, h HUGEINT, ns TIMESTAMP_NS)")
        con.execute(
            "INSERT INTO lake.main.odd SELECT i, md5(i::VARCHAR)::UUID, INTERVAL (i) DAY, TIME '01:02:03.456789', "
            "i::HUGEINT * 1000, TIMESTAMP_NS '2024-01-01 00:00:00.123456789' FROM range(50) r(i)"
        )
        con.execute("CREATE TABLE lake.main.nested (id INTEGER, st STRUCT(a INTEGER))")
        con.execute("INSERT INTO lake.main.nested SELECT i, {'a': i} FROM range(30) r(i)")
        con.execute("ALTER TABLE lake.main.nested ADD COLUMN st.d INTEGER DEFAULT 7")
        odd = plan_read(spark, "main.odd", catalog=catalog.url)
        assert odd.reason is not None and "column u has type uuid" in odd.reason
        got = pdl.read_table(spark, "main.odd", catalog=catalog.url).select("id", "u", "h").toArrow()
        want = con.execute("SELECT id, u::VARCHAR AS u, h::DECIMAL(38,0) AS h FROM lake.main.odd").to_arrow_table()
        assert canonical_rows(got) == canonical_rows(want)
        nested = plan_read(spark, "main.nested", catalog=catalog.url)
        assert nested.reason is not None and "struct field d was added with a default" in nested.reason
        got = pdl.read_table(spark, "main.nested", catalog=catalog.url).toArrow()
        assert canonical_rows(got) == canonical_rows(con.execute("SELECT * FROM lake.main.nested").to_arrow_table())
        assert got.column("st").to_pylist()[0] == {"a": 0, "d": 7}
    finally:
        con.close()


def test_read_table_options_match_the_data_source(
    spark: SparkSession, sqlite_catalog: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    catalog = sqlite_catalog
    pdl.register(spark)
    spark.range(0, 100).write.format("ducklake").mode("append").option("catalog", catalog.url).option(
        "dataPath", catalog.data_path
    ).save("main.opts")
    lake = pdl.connect(catalog.url)
    first = lake.current_snapshot_id()
    moment = dt.datetime.now(dt.timezone.utc)
    lake.delete("main.opts", [("id", ">=", 90)])
    lake.close()
    spark.conf.set("spark.ducklake.catalog", catalog.url)
    pdl.register(spark)  # captures the conf for the data source
    try:
        reads = {
            "latest": pdl.read_table(spark, "main.opts"),
            "snapshot": pdl.read_table(spark, "main.opts", snapshot=first),
            "timestamp": pdl.read_table(spark, "main.opts", timestamp=moment),
            "versionAsOf": pdl.read_table(spark, "main.opts", options={"versionAsOf": str(first)}),
        }
        tagged = [df.select("id", F.lit(name).alias("_read")) for name, df in reads.items()]
        counts = dict(reduce(DataFrame.union, tagged).groupBy("_read").count().collect())  # one Spark job
        assert counts == {"latest": 90, "snapshot": 100, "timestamp": 100, "versionAsOf": 100}
        plain = spark.read.format("ducklake").load("main.opts")
        native = pdl.read_table(spark, "main.opts")
        assert native.schema.simpleString() == plain.schema.simpleString()
        want = canonical_rows(plain.toArrow())
        assert canonical_rows(native.toArrow()) == want
        # Many deletes are an anti join instead of a filter: broadcast, or (very many) left to Spark's planner.
        monkeypatch.setattr(deleted_rows, "DELETE_FILTER_MAX", 0)
        assert canonical_rows(pdl.read_table(spark, "main.opts").toArrow()) == want
        monkeypatch.setattr(deleted_rows, "BROADCAST_DELETES_MAX", 0)
        assert canonical_rows(pdl.read_table(spark, "main.opts").toArrow()) == want
    finally:
        spark.conf.unset("spark.ducklake.catalog")
        pdl.register(spark)
