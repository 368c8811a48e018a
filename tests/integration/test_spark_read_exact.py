"""Spark reads that must be exact whatever the values and the column names: NaN, -0.0 and long strings under Spark's
filters, and columns named like the reader's own (virtual, internal and change-feed columns)."""

from __future__ import annotations

import datetime as dt
import functools
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

import pyspark_ducklake as pdl
from tests.support.duck import open_duckdb

NAN = float("nan")
UTC = dt.timezone.utc
# Spark orders NaN above every double and equal to itself, and -0.0 equal to 0.0.
PREDICATES = [
    "f > 5",
    "f >= double('inf')",
    "f = double('nan')",
    "f < 0",
    "f = 0",
    "f <=> -0.0",
    "f IN (1.0, double('nan'))",
    "f != 2.0",
    "f IS NULL",
    "s > 'zzz'",
    "s >= concat(repeat('z', 300), 'a')",
    "s < 'b'",
    "s IN ('', 'a')",
    "d = 0.1",
    "d > 1",
    "dt >= DATE'2024-02-29'",
    "ts > TIMESTAMP'2024-01-01 05:00:00+05:00'",
    "b = true",
    "NOT b",
]


def _rows() -> list[pa.Table]:
    schema = pa.schema(
        [
            ("id", pa.int64()),
            ("f", pa.float64()),
            ("s", pa.string()),
            ("d", pa.decimal128(10, 2)),
            ("dt", pa.date32()),
            ("ts", pa.timestamp("us", tz="UTC")),
            ("b", pa.bool_()),
        ]
    )
    t0 = dt.datetime(2024, 1, 1, tzinfo=UTC)
    files = [
        {"f": [1.0, 2.0, NAN], "s": ["a", "b", "z" * 300 + "b"], "d": ["0.10", "1.00", None]},
        {"f": [-0.0, 0.0, None], "s": ["", "\U0010ffff" * 80, "é" * 200], "d": ["2.50", None, "-1.00"]},
        {"f": [float("inf"), float("-inf"), -0.0], "s": [None, "~" * 300, "\x7f" * 300], "d": [None, None, "0.00"]},
        {"f": [None, None, None], "s": [None, None, None], "d": [None, None, None]},
    ]
    out, n = [], 0
    for k, f in enumerate(files):
        out.append(
            pa.table(
                {
                    "id": [n, n + 1, n + 2],
                    "f": f["f"],
                    "s": f["s"],
                    "d": [None if v is None else Decimal(v) for v in f["d"]],
                    "dt": [dt.date(2024, 2, 27) + dt.timedelta(days=k), None, dt.date(2023, 1, 1)],
                    "ts": [t0 + dt.timedelta(hours=k), t0 - dt.timedelta(hours=k), None],
                    "b": [True, False, None],
                },
                schema=schema,
            )
        )
        n += 3
    return out


def _kept(df: Any) -> dict[str, list[int]]:
    """The ids each of PREDICATES holds true for, every predicate a column of one query over one scan (one Spark
    job). For a source that takes no filter (a local frame; the data source: test_spark_batch.py asserts it pushes
    none) this is ``df.filter(predicate)``: Spark evaluates the predicate over every row the scan gives."""
    rows = df.select("id", *[F.expr(p).alias(f"p{i}") for i, p in enumerate(PREDICATES)]).collect()
    return {p: sorted(r["id"] for r in rows if r[f"p{i}"] is True) for i, p in enumerate(PREDICATES)}


def _kept_by_filters(df: Any) -> dict[str, list[int]]:
    """The ids ``df.filter(predicate)`` keeps for each of PREDICATES, for a source that prunes by the filters pushed
    to it (Spark's Parquet reader: row groups by min/max): one filtered scan per predicate, in one job (a union)."""
    parts = [df.filter(p).select(F.lit(i).alias("p"), "id") for i, p in enumerate(PREDICATES)]
    kept: dict[str, list[int]] = {p: [] for p in PREDICATES}
    for r in functools.reduce(DataFrame.unionAll, parts).collect():
        kept[PREDICATES[r["p"]]].append(r["id"])
    return {p: sorted(ids) for p, ids in kept.items()}


@pytest.mark.parametrize("writer", ["ours", "duckdb"])
def test_spark_filters_over_nan_zero_and_long_strings_match_spark_over_every_row(
    spark: SparkSession, sqlite_catalog: Any, writer: str
) -> None:
    files = _rows()
    if writer == "ours":
        lake = pdl.connect(sqlite_catalog.url, data_path=sqlite_catalog.data_path, data_inlining_row_limit=0)
        lake.create_table("main.t", files[0].schema)
        for f in files:
            lake.append("main.t", f)
        lake.close()
    else:
        con = open_duckdb(sqlite_catalog, inlining_row_limit=0)
        con.execute("SET TimeZone = 'UTC'")
        con.execute(
            "CREATE TABLE lake.main.t (id BIGINT, f DOUBLE, s VARCHAR, d DECIMAL(10,2), dt DATE, ts TIMESTAMPTZ, "
            "b BOOLEAN)"
        )
        for f in files:
            con.register("batch", f)
            con.execute("INSERT INTO lake.main.t SELECT * FROM batch")
            con.unregister("batch")
        con.close()
    pdl.register(spark)
    every_row = spark.createDataFrame(pa.concat_tables(files))  # Arrow keeps NaN apart from NULL
    source = spark.read.format("ducklake").option("catalog", sqlite_catalog.url).load("main.t")
    native = pdl.read_table(spark, "main.t", catalog=sqlite_catalog.url)
    expected = _kept(every_row)
    assert _kept(source) == expected
    assert _kept_by_filters(native) == expected


NAMES = ["rowid", "snapshot_id", "_change_type", "_snapshot_id", "_rowid", "_commit_timestamp", "_file_position"]
RESERVED = ["row_id", "begin_snapshot", "end_snapshot", "_ducklake_internal_row_id", "_ducklake_internal_snapshot_id"]


def test_columns_named_like_the_readers_own_read_in_spark(
    spark: SparkSession, sqlite_catalog: Any, tmp_path: Path
) -> None:
    names = NAMES + RESERVED
    lake = pdl.connect(sqlite_catalog.url, data_path=sqlite_catalog.data_path, data_inlining_row_limit=0)
    lake.create_table("main.t", pa.schema([("id", pa.int64())] + [(n, pa.int64()) for n in names]))
    lake.append("main.t", pa.table({"id": list(range(30)), **{n: list(range(1000, 1030)) for n in names}}))
    lake.delete("main.t", [("rowid", "=", 1003)])
    lake.close()
    inlined = pdl.connect(sqlite_catalog.url)  # a table of NAMES only takes inlined rows
    inlined.create_table("main.i", pa.schema([("id", pa.int64())] + [(n, pa.int64()) for n in NAMES]))
    inlined.append("main.i", pa.table({"id": [0, 1], **{n: [1000, 1001] for n in NAMES}}))
    inlined.close()
    pdl.register(spark)

    def check(df: Any, table_names: list[str], ids: list[int]) -> None:
        rows = sorted(df.collect(), key=lambda r: r["id"])
        assert [r["id"] for r in rows] == ids
        for r in rows:
            assert [r[i + 1] for i in range(len(table_names))] == [1000 + r["id"]] * len(table_names)

    live = [i for i in range(30) if i != 3]
    read = spark.read.format("ducklake").option("catalog", sqlite_catalog.url)
    check(read.load("main.t"), names, live)
    check(pdl.read_table(spark, "main.t", catalog=sqlite_catalog.url), names, live)
    check(read.load("main.i"), NAMES, [0, 1])
    check(pdl.read_table(spark, "main.i", catalog=sqlite_catalog.url), NAMES, [0, 1])

    feed = read.option("readChangeFeed", "true").option("startingSnapshot", "earliest").load("main.t")
    assert feed.columns == ["id", *names, "_change_type_1", "_snapshot_id_1", "_rowid_1", "_commit_timestamp_1"]
    changes = feed.collect()
    assert sorted((r["_change_type_1"], r["id"]) for r in changes if r["_change_type_1"] == "delete") == [("delete", 3)]
    assert all(r[1] == 1000 + r["id"] and r["_rowid_1"] == r["id"] for r in changes)

    got: list[Any] = []
    stream = (
        spark.readStream.format("ducklake")
        .option("catalog", sqlite_catalog.url)
        .option("startingSnapshot", "earliest")
        .load("main.i")
        .writeStream.foreachBatch(lambda df, _: got.extend(df.collect()))
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    stream.awaitTermination(120)
    assert sorted((r["id"], r["rowid"], r["_change_type"], r["_change_type_1"], r["_rowid_1"]) for r in got) == [
        (0, 1000, 1000, "insert", 0),
        (1, 1001, 1001, "insert", 1),
    ]


def test_sink_written_table_with_columns_named_rowid_and_snapshot_id_reads_back(
    spark: SparkSession, sqlite_catalog: Any
) -> None:
    """The sink creates the table from the stream's columns (rowid, snapshot_id among them), inlines a small batch,
    writes a large one to Parquet and flushes; every reader gives the rows' own values, as DuckDB does."""
    from pyspark_ducklake import ducklake_sink

    url = sqlite_catalog.url
    pdl.register(spark)
    sink = ducklake_sink("main.s", catalog=url, data_path=sqlite_catalog.data_path, app_id="names", flush_rows=30)
    # inlined, Parquet, inlined and flushed with the first, inlined and left in the catalog
    for batch, (first, n) in enumerate([(0, 5), (5, 2000), (2005, 40), (2045, 3)]):
        df = spark.range(first, first + n, 1, 2).selectExpr(
            "id", "id + 1000 AS rowid", "id + 2000 AS Snapshot_ID", "id + 3000 AS _change_type"
        )
        sink(df, batch)
    expected = [(i, i + 1000, i + 2000, i + 3000) for i in range(2048)]

    def rows(df: Any) -> list[tuple[int, ...]]:
        return sorted((r["id"], r["rowid"], r["Snapshot_ID"], r["_change_type"]) for r in df.collect())

    lake = pdl.connect(url)
    got = lake.scan("main.s").to_pylist()
    assert sorted((r["id"], r["rowid"], r["Snapshot_ID"], r["_change_type"]) for r in got) == expected
    virtual = lake.scan("main.s", columns=["id", "_ducklake_internal_row_id", "_ducklake_internal_snapshot_id"])
    assert sorted(virtual.column("_ducklake_internal_row_id").to_pylist()) == list(range(2048))
    sunk = lake.current_snapshot_id()
    assert lake.delete("main.s", [("rowid", "=", 1000), ("Snapshot_ID", "=", 2000)]) > 0
    lake.append("main.s", pa.table({"id": [0], "rowid": [1000], "Snapshot_ID": [2000], "_change_type": [3000]}))
    assert rows(spark.read.format("ducklake").option("catalog", url).load("main.s")) == expected
    assert rows(pdl.read_table(spark, "main.s", catalog=url)) == expected
    feed = (
        spark.read.format("ducklake")
        .option("catalog", url)
        .option("readChangeFeed", "true")
        .option("startingSnapshot", "earliest")
        .load("main.s")
    )
    assert rows(feed.filter("_change_type_1 = 'insert'")) == sorted([*expected, expected[0]])
    changes = lake.table_changes("main.s", 0, lake.current_snapshot_id()).to_pylist()
    inserted = [r for r in changes if r["_change_type_1"] == "insert"]
    assert sorted((r["id"], r["rowid"], r["Snapshot_ID"], r["_change_type"]) for r in inserted) == sorted(
        [*expected, expected[0]]
    )
    con = open_duckdb(sqlite_catalog)
    try:
        duck = con.execute('SELECT id, rowid, snapshot_id, "_change_type" FROM lake.main.s ORDER BY id').fetchall()
        duck_feed = con.execute(
            "SELECT count(*) FROM ducklake_table_changes('lake', 'main', 's', 0, ?) WHERE change_type = 'insert'",
            [sunk],
        ).fetchone()
    finally:
        con.close()
    assert duck == expected
    assert duck_feed == (2048,)
