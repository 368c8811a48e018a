"""We write a DuckLake 1.1 lake (a DuckDB-file catalog); DuckLake's 1.1 build reads every table at every snapshot
and ``ducklake_table_changes`` over every range exactly as we do.

The build refuses catalogs tagged ``1.1`` (it knows its own development tag only), so our catalog's version row is
set to the tag it writes (``1.1-dev1``, the same layout) before it reads; it attaches our catalog ``READ_ONLY``,
which leaves the file in DuckDB 1.5's storage for us.
"""

from __future__ import annotations

import datetime as dt
import decimal
import pickle
from pathlib import Path

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from sqlalchemy import create_engine, text

import pyspark_ducklake as pdl
from tests.duckdb_dev.build import DevBuild, attach_sql, tag_for_build
from tests.duckdb_dev.reads import differences, questions, table_lives

UTC = dt.timezone.utc


BROAD = pa.schema(
    [
        ("id", pa.int64()),
        ("s", pa.string()),
        ("d", pa.decimal128(18, 3)),
        ("f", pa.float64()),
        ("ts", pa.timestamp("us")),
        ("tz", pa.timestamp("us", tz="UTC")),
        ("l", pa.list_(pa.int32())),
        ("st", pa.struct([("a", pa.int32()), ("b c", pa.string())])),
        ("m", pa.map_(pa.string(), pa.int32())),
        ("row_id", pa.string()),
    ]
)
EVENTS = pa.schema(
    [
        ("id", pa.int64()),
        ("ts", pa.timestamp("us")),
        ("tz", pa.timestamp("us", tz="UTC")),
        ("d", pa.date32()),
        ("k", pa.string()),
    ]
)


def broad(first: int, n: int) -> pa.Table:
    """Rows of every kind of column the history touches (a user column named ``row_id`` among them)."""
    ids = list(range(first, first + n))
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "s": [None if i % 7 == 3 else f"s{i}'\"," for i in ids],
            "d": pa.array([decimal.Decimal(i) / 8 for i in ids], pa.decimal128(18, 3)),
            "f": [float("nan") if i % 11 == 5 else (-0.0 if i % 13 == 1 else i * 0.5) for i in ids],
            "ts": pa.array([dt.datetime(2020, 1, 1) + dt.timedelta(hours=i) for i in ids], pa.timestamp("us")),
            "tz": pa.array(
                [dt.datetime(1969, 12, 31, 23, tzinfo=UTC) + dt.timedelta(minutes=i) for i in ids],
                pa.timestamp("us", tz="UTC"),
            ),
            "l": pa.array([[i, None] if i % 2 else [] for i in ids], pa.list_(pa.int32())),
            "st": pa.array([{"a": i, "b c": "x"} for i in ids], pa.struct([("a", pa.int32()), ("b c", pa.string())])),
            "m": pa.array([[("k", i)] for i in ids], pa.map_(pa.string(), pa.int32())),
            "row_id": [f"r{i}" for i in ids],
        },
        schema=BROAD,
    )


def events(first: int, n: int, *, hours: int = 7) -> pa.Table:
    ids = list(range(first, first + n))
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "ts": pa.array(
                [dt.datetime(1969, 12, 30, 22) + dt.timedelta(hours=i * hours) for i in ids], pa.timestamp("us")
            ),
            "tz": pa.array(
                [dt.datetime(1969, 11, 30, 23, 30, tzinfo=UTC) + dt.timedelta(days=i * 11) for i in ids],
                pa.timestamp("us", tz="UTC"),
            ),
            "d": pa.array([dt.date(1968, 12, 31) + dt.timedelta(days=i * 40) for i in ids], pa.date32()),
            "k": [f"k{i % 3}" for i in ids],
        },
        schema=EVENTS,
    )


def _set_option(url: str, key: str, value: str, table_id: int) -> None:
    """A table-scoped option row, as DuckDB's ``CALL lake.set_option(key, value, table_name => ...)`` writes it
    (DuckDB 1.5.5 cannot attach a 1.1 catalog to call it)."""
    engine = create_engine(url)
    try:
        with engine.begin() as conn:
            conn.execute(
                text("INSERT INTO ducklake_metadata (key, value, scope, scope_id) VALUES (:k, :v, 'table', :id)"),
                {"k": key, "v": value, "id": table_id},
            )
    finally:
        engine.dispose()


def python_history(lake: pdl.Lake) -> None:
    """Inlined and Parquet appends, deletes (Parquet delete files and, on one table, deletion vectors of several
    snapshots), updates and upserts, added, renamed and dropped columns, flush, merge, rewrite, epoch_* and bucket
    partitions, a sorted table, writeStream upserts written by their tasks, dropped tables (the feed is compared over every range of a table's life, so tables
    whose history is done are dropped: a range count grows with the square of the life)."""
    lake.create_table("main.srt", pa.schema([("row_id", pa.string()), ("k", pa.int32()), ("v", pa.float64())]))
    lake.set_sort_order("main.srt", ["k DESC NULLS FIRST", "v"])
    few = {"row_id": ["a", "b", "c", "d"], "k": [3, None, 3, 1], "v": [1.5, float("nan"), -0.0, 0.0]}
    lake.append("main.srt", pa.table(few))  # inlined, sorted
    many = {"row_id": [f"r{i}" for i in range(40)], "k": [i % 7 for i in range(40)], "v": [i / 3 for i in range(40)]}
    lake.append("main.srt", pa.table(many, schema=lake.table("main.srt").schema))
    lake.flush_inlined_data("main.srt")
    lake.append("main.srt", pa.table({"row_id": ["x", "y"], "k": pa.array([9, None], pa.int32()), "v": [None, 2.0]}))
    lake.merge_adjacent_files("main.srt")
    lake.drop_table("main.srt")

    lake.create_table("main.dv", pa.schema([("id", pa.int32()), ("s", pa.string())]))
    _set_option(lake.location.url, "write_deletion_vectors", "true", lake.table("main.dv").table_id)
    lake.append("main.dv", pa.table({"id": pa.array(range(3000), pa.int32()), "s": [f"s{i}" for i in range(3000)]}))
    lake.delete("main.dv", [("id", "in", list(range(0, 3000, 7)))])  # a deletion vector
    lake.delete("main.dv", [("id", "in", [1, 2999])])  # a puffin file of two
    lake.update("main.dv", {"s": "u"}, [("id", "=", 2)])  # of three, and an inlined row
    lake.delete("main.dv", [("id", "in", list(range(0, 3000, 11)))])
    lake.rewrite_data_files("main.dv", delete_threshold=0.1)
    lake.drop_table("main.dv")

    lake.create_table("main.e", EVENTS)
    lake.set_partitioning("main.e", ["epoch_day(ts)", "epoch_month(tz)", "bucket(4, id)"])
    lake.append("main.e", events(0, 40))
    lake.set_partitioning("main.e", ["epoch_year(d)", "epoch_hour(ts)", "bucket(3, k)"])
    lake.append("main.e", events(200, 20, hours=1))
    lake.delete("main.e", [("id", "in", list(range(0, 300, 5)))])

    lake.create_table("main.t", BROAD)
    lake.append("main.t", broad(0, 5))  # inlined
    lake.append("main.t", broad(5, 200))  # Parquet
    lake.append("main.t", broad(205, 4))  # inlined
    lake.delete("main.t", [("id", "<", 2)])  # inlined rows
    lake.delete("main.t", [("id", ">=", 50), ("id", "<", 60)])  # a Parquet delete file
    lake.append("main.e", events(300, 3))  # another table's snapshot inside t's history
    lake.update("main.t", {"s": "updated"}, [("id", "in", [3, 70, 206])])
    lake.upsert("main.t", broad(200, 10).set_column(1, "s", pa.array(["upserted"] * 10)), on="id")
    lake.add_column("main.t", "extra", pa.string(), default="dflt")
    lake.append("main.t", broad(300, 3).append_column("extra", pa.array(["given"] * 3)))
    lake.rename_column("main.t", "s", "s2")
    lake.drop_column("main.t", "f")
    lake.flush_inlined_data("main.t")  # row 206: three versions in one file
    lake.delete("main.t", [("id", ">=", 100), ("id", "<", 110)])
    later = broad(400, 60).drop_columns(["f"])  # the columns after the changes above
    later = later.rename_columns(["s2" if c == "s" else c for c in later.column_names])
    lake.append("main.t", later.append_column("extra", pa.nulls(60, pa.string())))
    lake.merge_adjacent_files("main.t")
    lake.rewrite_data_files("main.t", delete_threshold=0)
    staged_stream_upserts(lake)


def staged_stream_upserts(lake: pdl.Lake) -> None:
    """``writeStream`` upserts whose tasks write their own rows (``table/staged_upsert.py``): a key in both tasks
    (the later ``lsn`` wins), deletes, new keys; the writer run as Spark runs it (pickled copies), without the JVM."""
    from pyspark.sql import types as T

    from pyspark_ducklake.spark.lake_config import LakeConfig
    from pyspark_ducklake.streaming.write_stream import DuckLakeStreamWriter

    schema = pa.schema([("id", pa.int64()), ("v", pa.string())])
    lake.create_table("main.w", schema)
    lake.append("main.w", pa.table({"id": list(range(30)), "v": [f"v{i}" for i in range(30)]}, schema=schema))
    stream = T.StructType(
        [T.StructField("id", T.LongType()), T.StructField("v", T.StringType()), T.StructField("lsn", T.LongType())]
    )
    options = {
        "catalog": lake.location.url,
        "dataPath": lake.data_path,
        "upsertOn": "id",
        "orderBy": "lsn",
        "deleteWhen": "v IS NULL",
        "app_id": "staged",
        "data_inlining_row_limit": "2",
    }
    batches = [
        [
            {"id": [1, 2, 3, 40, 41], "v": ["a", "a", None, "a", "a"], "lsn": [1] * 5},
            {"id": [2, 5, 42], "v": ["b", "b", "b"], "lsn": [2, 1, 1]},
        ],
        [
            {"id": [5, 6, 40], "v": [None, "c", "c"], "lsn": [1, 1, 1]},
            {"id": [7, 8, 9, 43], "v": ["d", "d", "d", "d"], "lsn": [1, 1, 1, 1]},
        ],
    ]
    for batch_id, tasks in enumerate(batches):
        writer = DuckLakeStreamWriter(LakeConfig.resolve(options), "main.w", options, stream)
        messages = [pickle.loads(pickle.dumps(writer)).write(iter([pa.record_batch(t)])) for t in tasks]
        pickle.loads(pickle.dumps(writer)).commit(list(messages), batch_id)


def assert_build_reads_as_we_do(lake: pdl.Lake, catalog: Path, build: DevBuild, tmp_path: Path) -> None:
    """The build's reads of our lake at every snapshot and over every feed range equal ours."""
    tag_for_build(lake.location.url, build)
    lives = table_lives(lake.location.url)
    attach = attach_sql(catalog, options="READ_ONLY")
    answers = build.answers(attach, questions(lives), tmp_path)
    try:
        assert differences(lake, answers, lives) == []
    finally:
        answers.close()


def test_the_build_reads_our_python_history(dev_build: DevBuild, tmp_path: Path) -> None:
    catalog = tmp_path / "ours.ducklake"
    lake = pdl.connect(f"ducklake:{catalog}", f"{tmp_path}/data/", format_version="1.1")
    python_history(lake)
    assert_build_reads_as_we_do(lake, catalog, dev_build, tmp_path)
    lake.close()


def test_the_build_reads_what_spark_writes_into_a_1_1_lake(
    spark: SparkSession, dev_build: DevBuild, tmp_path: Path
) -> None:
    """The sink creates the 1.1 lake (``format_version``) and commits micro-batches, inlined, flushed on its
    threshold, a large one as Parquet, and upserts; ``write_table`` (Spark's Parquet writer), the data source and an
    overwrite write a second table, partitioned by ``bucket``."""
    catalog = tmp_path / "spark.ducklake"
    url = f"ducklake:{catalog}"
    rows = "id bigint, s string, ts timestamp, l array<int>"

    def batch(first: int, n: int) -> DataFrame:
        return (
            spark.range(first, first + n)
            .selectExpr(
                "id",
                "IF(id % 5 = 0, NULL, concat('v''', id))",
                "timestamp_micros(id * 3600000000)",
                "array(CAST(id AS INT), NULL)",
            )
            .toDF(*[c.split()[0] for c in rows.split(", ")])
        )

    sink = pdl.ducklake_sink(
        "main.s", catalog=url, data_path=f"{tmp_path}/data/", format_version="1.1", flush_rows=15, app_id="rows"
    )
    for batch_id, (first, n) in enumerate([(0, 6), (6, 6), (12, 6), (100, 400), (18, 4)]):
        sink(batch(first, n), batch_id)  # 6 + 6 inlined, 6 more flushes all 18; 400 to Parquet; 4 inlined
    upserts = pdl.ducklake_sink("main.s", catalog=url, app_id="upserts", upsert_on="id")
    upserts(batch(3, 5).withColumn("s", F.lit("upserted")), 0)  # replaces flushed rows: an update each
    upserts(batch(150, 3).withColumn("s", F.lit("big")), 1)  # rows of the Parquet file
    upserts(batch(19, 2).withColumn("s", F.lit("inl")), 2)  # inlined rows

    lake = pdl.connect(url)
    assert lake.format_version == "1.1"
    batch(50, 30).write.format("ducklake").option("catalog", url).mode("append").save("main.w")  # creates it
    lake.set_partitioning("main.w", ["bucket(4, id)"])
    pdl.write_table(batch(0, 50), "main.w", catalog=url)
    lake.delete("main.w", [("id", "<", 10)])
    pdl.write_table(batch(200, 20), "main.w", catalog=url, mode="overwrite")
    assert_build_reads_as_we_do(lake, catalog, dev_build, tmp_path)
    lake.close()


def test_a_lake_the_build_creates_takes_our_sink_stream_and_reads(
    spark: SparkSession, dev_build: DevBuild, tmp_path: Path
) -> None:
    """A lake the build creates with its defaults (its 1.1 tag, its inlining limit), in DuckDB 1.5's storage: a
    streaming ``foreachBatch(ducklake_sink(...))`` appends to its table and upserts into it, a ``readStream`` change
    feed and ``read_table`` give what the build and the sink wrote, and the build reads the whole history as we do."""
    theirs, catalog = tmp_path / "theirs.ducklake", tmp_path / "lake.ducklake"
    dev_build.run(
        attach_sql(theirs, f"{tmp_path}/data/")
        + "CREATE TABLE lake.events(id BIGINT, s VARCHAR, ts TIMESTAMP);\n"
        + "INSERT INTO lake.events VALUES (1, 'from the build', TIMESTAMP '2026-01-01 00:00:00'), (2, NULL, NULL);\n"
        + "INSERT INTO lake.events SELECT i, 'built ' || i, NULL FROM range(100, 130) r(i);\n"
    )
    dev_build.convert(theirs, catalog)
    url = f"ducklake:{catalog}"
    lake = pdl.connect(url)
    assert lake.format_version == dev_build.tag

    source = tmp_path / "incoming"
    source.mkdir()
    schema = "id bigint, s string, ts timestamp"
    query = (
        spark.readStream.schema(schema)
        .json(str(source))
        .writeStream.foreachBatch(pdl.ducklake_sink("main.events", catalog=url, flush_rows=40))
        .option("checkpointLocation", str(tmp_path / "sink-checkpoint"))
        .trigger(availableNow=True)
    )
    written: list[tuple[object, ...]] = []
    for n, (first, count) in enumerate([(200, 5), (300, 50), (400, 3)]):
        rows = [(i, f"streamed {i}", None) for i in range(first, first + count)]
        (source / f"{n}.json").write_text("".join(f'{{"id": {i}, "s": "{s}"}}\n' for i, s, _ in rows))
        query.start().awaitTermination()
        written += rows
    upsert = pdl.ducklake_sink("main.events", catalog=url, upsert_on="id", app_id="fix")
    upsert(spark.createDataFrame([(1, "fixed", None), (301, "fixed", None)], schema), 0)

    feed = (
        spark.readStream.format("ducklake")
        .option("catalog", url)
        .option("startingSnapshot", 1)
        .load("main.events")
        .writeStream.format("memory")
        .queryName("build_lake_feed")
        .trigger(availableNow=True)
        .start()
    )
    feed.awaitTermination()
    changes = spark.sql("SELECT id, _change_type FROM build_lake_feed").collect()
    kinds = sorted((r.id, r._change_type) for r in changes)
    assert [k for k in kinds if k[1] == "insert"] == sorted(
        (i, "insert") for i in [1, 2, *range(100, 130), *(r[0] for r in written)]
    )
    assert [k for k in kinds if k[1] != "insert"] == sorted(
        [(1, "update_preimage"), (1, "update_postimage"), (301, "update_preimage"), (301, "update_postimage")]
    )

    table = pdl.read_table(spark, "main.events", catalog=url).select("id", "s").collect()
    expected = {1: "fixed", 2: None, **{i: f"built {i}" for i in range(100, 130)}, **{r[0]: r[1] for r in written}}
    expected[301] = "fixed"
    assert {r.id: r.s for r in table} == expected
    assert_build_reads_as_we_do(lake, catalog, dev_build, tmp_path)
    lake.close()
