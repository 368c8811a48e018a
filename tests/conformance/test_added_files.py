"""Files registered with ``ducklake_add_data_files`` (ducklake-format-2.md §1) are read as DuckDB reads them.

Foreign writers (pyarrow here) write Parquet without field ids; DuckDB registers them, maps their columns by name
through ``ducklake_name_mapping``, takes hive partition values from the path, casts narrower file types, reads
missing columns as their initial default and ignores extra ones. DML on top (delete, update, a delete that empties
a file, rename, add column) follows. Every snapshot is compared through ``scan``, the change feed, and Spark's two
read paths (the fast path falls back to the data source for such files). The Python reads and ``add_files``' catalog
rows run on SQLite and PostgreSQL (their subject is catalog SQL); the Spark reads run on SQLite only: the catalog is
not under test in a Spark read of files, and the same plans are read from PostgreSQL by the Python tests here.
"""

from __future__ import annotations

import datetime as dt
import decimal
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from sqlalchemy import create_engine, text

import pyspark_ducklake as pdl
from tests.support.bad_inputs import expect_bad_input
from tests.support.compare import canonical_rows
from tests.support.duck import attach_sql, connect_duckdb


def canon(rows: pa.Table) -> list[Any]:
    """Every row, canonical and fully ordered (tables here have no common key column)."""
    return sorted(canonical_rows(rows, rows.column_names[0]), key=repr)


def write_foreign_files(ext: Path) -> None:
    """Parquet files as other tools write them: no field ids, other spellings, narrower types, extras."""
    ext.mkdir(parents=True, exist_ok=True)
    s_type = pa.struct([("A", pa.int32()), ("b", pa.string())])
    f1 = pa.table(
        {
            "ID": pa.array([1, 2, 3, None], pa.int32()),
            "name": ["one", None, "three", "four"],
            "s": pa.array([{"A": 1, "b": "x"}, None, {"A": None, "b": "z"}, {"A": 4, "b": None}], s_type),
            "l": pa.array([[1, None, 3], [], None, [4]], pa.list_(pa.int32())),
            "m": pa.array([[("k", 1)], None, [], [("a", None), ("b", 2)]], pa.map_(pa.string(), pa.int32())),
            "ts": pa.array([dt.datetime(2020, 1, 1, 1, 2, 3, 4000), None] * 2, pa.timestamp("ms")),
            "dec": pa.array([decimal.Decimal("1.25"), None, decimal.Decimal("-3.5"), None], pa.decimal128(10, 2)),
            "f": pa.array([1.5, None, float("nan"), -0.0], pa.float32()),
            "extra": pa.array([9, 9, 9, 9], pa.int64()),
        }
    )
    pq.write_table(f1, ext / "f1.parquet")
    # Columns in another order, a list element named ``item`` (pyarrow's non-compliant nested spelling), no ``m``.
    f2 = pa.table(
        {
            "l": pa.array([[7], [8, 9]], pa.list_(pa.int16())),
            "s": pa.array(
                [{"b": "q", "A": 7}, {"b": None, "A": None}], pa.struct([("b", pa.string()), ("A", pa.int8())])
            ),
            "name": ["seven", "eight"],
            "ID": pa.array([7, 8], pa.int16()),
            "ts": pa.array([dt.datetime(1999, 12, 31), None], pa.timestamp("ns")),
            "dec": pa.array([decimal.Decimal("7.125"), None], pa.decimal128(12, 3)),
            "f": pa.array([7.0, 8.0], pa.float64()),
        }
    )
    pq.write_table(f2, ext / "f2.parquet", use_compliant_nested_type=False)
    f3 = pa.table({"ID": pa.array([20, 21], pa.int64()), "name": ["gone", "gone too"]})
    pq.write_table(f3, ext / "f3.parquet")


def write_hive_files(ext: Path) -> None:
    for key, v, extra in [
        ("1", "x", {}),
        ("2", "y", {}),
        ("__HIVE_DEFAULT_PARTITION__", "z", {}),
        ("7", "w", {"k": pa.array([99], pa.int32())}),  # the path wins over the file's own k
    ]:
        folder = ext / ("both" if extra else "flat") / f"k={key}"
        folder.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.table({"v": [v], **extra}), folder / "f.parquet")
    for key in ["a%2Fb", "x%3Dy", "50%25", "__HIVE_DEFAULT_PARTITION__", "sp ace"]:
        folder = ext / "str" / f"k={key}"
        folder.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.table({"v": [key]}), folder / "f.parquet")
    for key in ["3", "5"]:
        folder = ext / "part" / f"k={key}"
        folder.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.table({"v": [f"p{key}", f"q{key}"]}), folder / "f.parquet")


ADD_FULL = {"ignore_extra_columns": True, "allow_missing": True}


def history_steps(ext: Path) -> list[Any]:
    """DDL and DML as SQL; registrations as ``(table, glob, options)`` (DuckDB's CALL or our ``add_files``)."""
    return [
        "CREATE TABLE lake.t(id BIGINT, Name VARCHAR, s STRUCT(a INTEGER, b VARCHAR), l INTEGER[], "
        "m MAP(VARCHAR, INTEGER), ts TIMESTAMP, dec DECIMAL(18,3), f DOUBLE)",
        "ALTER TABLE lake.t ADD COLUMN d VARCHAR DEFAULT 'dflt'",
        ("t", str(ext / "f1.parquet"), ADD_FULL),
        ("t", str(ext / "f2.parquet"), {"allow_missing": True}),
        "INSERT INTO lake.t(id, Name, d) VALUES (100, 'native', 'n')",
        ("t", str(ext / "f3.parquet"), {"allow_missing": True}),
        "DELETE FROM lake.t WHERE id = 2",
        "UPDATE lake.t SET Name = 'upd', s = {'a': 42, 'b': 'u'} WHERE id IN (3, 7)",
        "ALTER TABLE lake.t RENAME COLUMN Name TO nm",
        "ALTER TABLE lake.t ALTER COLUMN d SET DEFAULT 'later'",
        "ALTER TABLE lake.t ADD COLUMN z INTEGER DEFAULT 5",
        "DELETE FROM lake.t WHERE id IN (20, 21)",  # empties f3: DuckDB ends the file, no delete file
        "CREATE TABLE lake.h(k INTEGER, v VARCHAR)",
        ("h", str(ext / "flat" / "k=*" / "*.parquet"), {}),
        ("h", str(ext / "both" / "k=*" / "*.parquet"), {}),
        "DELETE FROM lake.h WHERE v = 'y'",
        "CREATE TABLE lake.hs(k VARCHAR, v VARCHAR)",
        ("hs", str(ext / "str" / "k=*" / "*.parquet"), {}),
        "CREATE TABLE lake.p(k INTEGER, v VARCHAR)",
        "ALTER TABLE lake.p SET PARTITIONED BY (k)",
        ("p", str(ext / "part" / "k=*" / "*.parquet"), {}),
        "INSERT INTO lake.p VALUES (3, 'native3'), (9, 'native9')",
        "UPDATE lake.p SET v = 'u5' WHERE v = 'q5'",
    ]


def write_all(ext: Path) -> None:
    if not (ext / "f1.parquet").exists():
        write_foreign_files(ext)
        write_hive_files(ext)


def duckdb_added_history(catalog: Any, ext: Path, *, ours: bool = False) -> None:
    """The history, with the registrations made by DuckDB or (``ours``) by ``Lake.add_files``."""
    write_all(ext)
    con = connect_duckdb()
    con.execute(attach_sql(catalog, "lake", 0))
    lake = pdl.connect(catalog.url, catalog.data_path) if ours else None
    try:
        for step in history_steps(ext):
            if isinstance(step, str):
                con.execute(step)
            elif lake is not None:
                table, path, options = step
                lake.add_files(f"main.{table}", path, **options)
            else:
                table, path, options = step
                opts = "".join(f", {k} => {str(v).lower()}" for k, v in options.items())
                con.execute(f"CALL ducklake_add_data_files('lake', '{table}', '{path}'{opts})")
    finally:
        con.close()


def duck(catalog: Any) -> duckdb.DuckDBPyConnection:
    con = connect_duckdb()
    con.execute(attach_sql(catalog, "lake", 0))
    return con


def table_snapshots(con: duckdb.DuckDBPyConnection, table: str) -> list[int]:
    out = []
    for (s,) in con.execute("SELECT snapshot_id FROM lake.snapshots() ORDER BY 1").fetchall():
        try:
            con.execute(f"SELECT 1 FROM lake.{table} AT (VERSION => {s}) LIMIT 0")
        except duckdb.Error:
            continue
        out.append(s)
    return out


def changed_snapshots(con: duckdb.DuckDBPyConnection, table: str) -> list[int]:
    """The snapshots at which ``table``'s columns or rows (as DuckDB reads them) differ from the snapshot before."""
    out, last = [], None
    for s in table_snapshots(con, table):
        rows = con.execute(f"SELECT * FROM lake.{table} AT (VERSION => {s})").to_arrow_table()
        state = (rows.column_names, canon(rows))
        if state != last:
            out.append(s)
        last = state
    return out


def duck_rows(con: duckdb.DuckDBPyConnection, table: str, snapshot: int | None = None) -> list[Any]:
    at = "" if snapshot is None else f" AT (VERSION => {snapshot})"
    return canon(con.execute(f"SELECT * FROM lake.{table}{at}").to_arrow_table())


def duck_feed(con: duckdb.DuckDBPyConnection, table: str, start: int, end: int) -> list[Any]:
    rows = con.execute(
        f"SELECT snapshot_id, rowid, change_type, * EXCLUDE (snapshot_id, rowid, change_type) "
        f"FROM ducklake_table_changes('lake', 'main', '{table}', {start}, {end})"
    ).to_arrow_table()
    return canon(rows)


def our_feed(lake: pdl.Lake, table: str, start: int, end: int) -> list[Any]:
    feed = lake.table_changes(f"main.{table}", start, end)
    names = feed.column_names
    n = names.index("_change_type")
    cols = ["_snapshot_id", "_rowid", "_change_type", *names[:n]]
    return canon(feed.select(cols))


TABLES = ("t", "h", "hs", "p")


def feed_ranges(snaps: list[int]) -> list[tuple[int, int]]:
    """Each snapshot's own changes, every start up to the last snapshot and every end from the first: each snapshot
    is a start and an end (an end sets the feed's columns), so every registration, DML and schema change is read
    alone and inside longer ranges. Not all pairs: t alone has some 25 snapshots, some 300 ranges, each read by us
    and by DuckDB, and a range adds no case its two ends do not (the feed lists each snapshot's changes)."""
    pairs = {(s, s) for s in snaps} | {(s, snaps[-1]) for s in snaps} | {(snaps[0], e) for e in snaps}
    return sorted(pairs)


def test_added_files_read_as_duckdb_reads_them_at_every_snapshot_and_in_the_feed_and_after_our_dml(
    catalog: Any, tmp_path: Path
) -> None:
    """DuckDB's history read at every snapshot and in the feed (``feed_ranges``); then our deletes and an append on
    the added files, read by DuckDB (one history per backend serves both halves: building it is the slow part)."""
    duckdb_added_history(catalog, tmp_path / "ext")
    lake = pdl.connect(catalog.url, catalog.data_path)
    con = duck(catalog)
    try:
        for table in TABLES:
            snaps = table_snapshots(con, table)
            for s in snaps:
                assert canon(lake.scan(f"main.{table}", snapshot=s)) == duck_rows(con, table, s), (table, s)
            for start, end in feed_ranges(snaps):
                assert our_feed(lake, table, start, end) == duck_feed(con, table, start, end), (table, start, end)
        # spot checks of what DuckDB shows, so an equal-but-wrong read cannot pass unnoticed
        rows = {r[0]: r for r in con.execute("SELECT id, nm, s, l, d, z, f FROM lake.t").fetchall()}
        assert rows[1] == (1, "one", {"a": 1, "b": "x"}, [1, None, 3], "dflt", 5, 1.5)
        assert rows[7][1:3] == ("upd", {"a": 42, "b": "u"})
        assert sorted(con.execute("SELECT k, v FROM lake.hs").fetchall(), key=str) == sorted(
            [
                ("a/b", "a%2Fb"),
                ("x=y", "x%3Dy"),
                ("50%", "50%25"),
                (None, "__HIVE_DEFAULT_PARTITION__"),
                ("sp ace", "sp ace"),
            ],
            key=str,
        )
    finally:
        con.close()

    # our deletes and appends on the added files are read by DuckDB
    for table, where in [("t", ("id", "=", 8)), ("h", ("k", "=", 7)), ("hs", ("k", "=", "a/b"))]:
        before = lake.current_snapshot_id()
        assert lake.delete(f"main.{table}", [where]) > before, table  # something matched
    lake.append("main.h", pa.table({"k": pa.array([11], pa.int32()), "v": ["ours"]}))
    lake.flush_inlined_data()
    con = duck(catalog)
    try:
        for table in TABLES:
            assert canon(lake.scan(f"main.{table}")) == duck_rows(con, table), table
        assert 8 not in [r[0] for r in con.execute("SELECT id FROM lake.t").fetchall()]
        assert ("a/b",) not in con.execute("SELECT k FROM lake.hs").fetchall()
        last = lake.current_snapshot_id()
        for table in TABLES:
            assert our_feed(lake, table, 0, last) == duck_feed(con, table, 0, last), table
    finally:
        con.close()


def test_spark_reads_added_files_through_both_read_paths(spark: Any, sqlite_catalog: Any, tmp_path: Path) -> None:
    """One backend: Spark reads the files the catalog lists; the catalog SQL of this history is compared with DuckDB
    on both backends by the scan and feed test above."""
    from pyspark.sql import functions as F

    from pyspark_ducklake.spark_parquet_read import plan_read

    catalog = sqlite_catalog

    pdl.register(spark)
    duckdb_added_history(catalog, tmp_path / "ext")
    con = duck(catalog)
    try:
        for table in ("t", "hs", "h", "p"):
            # Spark runs the scan's own file reads, whose result the test above compares at every snapshot: here the
            # last two snapshots at which the table's columns or rows changed (the lake's last four snapshots, read
            # before, were one and the same state of t, h and hs)
            snaps = changed_snapshots(con, table)[-2:]
            reason = plan_read(spark, f"main.{table}", catalog=catalog.url).reason
            if table == "t":  # a struct whose fields the mapping matches by name: the documented fallback
                assert reason is not None and "nested column s of added file" in reason
            else:  # Spark's Parquet reader, columns by name, hive partition values from the paths
                assert reason is None, reason
            native = [pdl.read_table(spark, f"main.{table}", snapshot=s, catalog=catalog.url) for s in snaps]
            source = [
                spark.read.format("ducklake").option("catalog", catalog.url).option("snapshot", s).load(f"main.{table}")
                for s in snaps
            ]
            for frames in (native, source):  # one Spark job per path: the snapshots' frames tagged and joined
                tagged = [df.withColumn("_snap", F.lit(s)) for df, s in zip(frames, snaps, strict=True)]
                joined = tagged[0]
                for df in tagged[1:]:  # the columns may differ between snapshots: each is read back on its own
                    joined = joined.unionByName(df, allowMissingColumns=True)
                rows = joined.toArrow()
                for df, s in zip(frames, snaps, strict=True):
                    got = rows.filter(pc.equal(rows["_snap"], s)).select(df.columns)
                    assert canon(got) == duck_rows(con, table, s), (table, s)
            last = snaps[-1]
            feed = (
                spark.read.format("ducklake")
                .option("catalog", catalog.url)
                .option("readChangeFeed", "true")
                .option("startingSnapshot", 0)
                .option("endingSnapshot", last)
                .load(f"main.{table}")
            )
            names = [c for c in feed.columns if not c.startswith("_")]
            rows = feed.select("_snapshot_id", "_rowid", "_change_type", *names).toArrow()
            assert canon(rows) == duck_feed(con, table, 0, last), table
    finally:
        con.close()


# --- Lake.add_files writes what ducklake_add_data_files writes -----------------------------------------------------

CATALOG_ROWS = {
    "ducklake_column_mapping": "SELECT mapping_id, table_id, type FROM ducklake_column_mapping",
    "ducklake_name_mapping": "SELECT * FROM ducklake_name_mapping",
    "ducklake_data_file": "SELECT data_file_id, table_id, begin_snapshot, end_snapshot, path, path_is_relative, "
    "record_count, file_size_bytes, footer_size, row_id_start, partition_id, mapping_id FROM ducklake_data_file "
    "WHERE path_is_relative = false",
    "ducklake_file_column_stats": "SELECT s.* FROM ducklake_file_column_stats s JOIN ducklake_data_file f "
    "ON f.data_file_id = s.data_file_id WHERE f.path_is_relative = false",
    "ducklake_file_partition_value": "SELECT * FROM ducklake_file_partition_value",
    "ducklake_snapshot_changes": "SELECT snapshot_id, changes_made FROM ducklake_snapshot_changes",
    # file_size_bytes left out: it sums native files too, whose delete files hold paths of another length
    "ducklake_table_stats": "SELECT table_id, record_count, next_row_id FROM ducklake_table_stats",
}


def catalog_rows(catalog: Any) -> dict[str, list[Any]]:
    engine = create_engine(catalog.url)
    try:
        with engine.connect() as conn:
            return {
                name: sorted(map(tuple, conn.execute(text(sql)).all()), key=repr) for name, sql in CATALOG_ROWS.items()
            }
    finally:
        engine.dispose()


def test_add_files_writes_the_catalog_rows_duckdb_writes_and_duckdb_reads_them(
    catalog: Any, tmp_path_factory: Any, tmp_path: Path
) -> None:
    ext = tmp_path / "ext"
    duckdb_added_history(catalog, ext, ours=True)
    theirs = tmp_path_factory.mktemp("theirs")
    (theirs / "data").mkdir()
    duck_catalog = type(catalog)(
        backend="sqlite",
        url=f"sqlite:///{theirs}/lake.sqlite",
        duckdb=f"ducklake:sqlite:{theirs}/lake.sqlite",
        data_path=f"{theirs}/data/",
    )
    duckdb_added_history(duck_catalog, ext)
    ours_rows, duck_rows_ = catalog_rows(catalog), catalog_rows(duck_catalog)
    for name in CATALOG_ROWS:
        assert ours_rows[name] == duck_rows_[name], name
    con, ref = duck(catalog), duck(duck_catalog)
    lake = pdl.connect(catalog.url, catalog.data_path)
    try:
        for table in TABLES:
            for s in table_snapshots(ref, table):
                assert duck_rows(con, table, s) == duck_rows(ref, table, s), (table, s)
                assert canon(lake.scan(f"main.{table}", snapshot=s)) == duck_rows(ref, table, s), (table, s)
    finally:
        con.close()
        ref.close()


# --- DuckDB's type checks at add time (§1.3) ------------------------------------------------------------------------

TYPE_CASES: list[tuple[str, pa.DataType, Any]] = [
    *[("BIGINT", t, 1) for t in (pa.int64(), pa.int32(), pa.uint32(), pa.int16(), pa.uint16(), pa.int8(), pa.uint8())],
    ("BIGINT", pa.uint64(), 1),
    *[("INTEGER", t, 1) for t in (pa.int32(), pa.int16(), pa.uint16(), pa.int8(), pa.uint8(), pa.int64(), pa.uint32())],
    ("UINTEGER", pa.uint16(), 1),
    ("UINTEGER", pa.int32(), 1),
    ("UBIGINT", pa.uint64(), 1),
    ("DOUBLE", pa.float32(), 1.5),
    ("DOUBLE", pa.int32(), 1),
    ("FLOAT", pa.float64(), 1.5),
    *[("TIMESTAMP", pa.timestamp(u), dt.datetime(2021, 5, 6, 7, 8, 9)) for u in ("ms", "us", "ns")],
    ("TIMESTAMP", pa.timestamp("us", tz="UTC"), dt.datetime(2021, 5, 6, tzinfo=dt.timezone.utc)),
    ("TIMESTAMP", pa.date32(), dt.date(2021, 5, 6)),
    ("TIMESTAMPTZ", pa.timestamp("ms", tz="UTC"), dt.datetime(2021, 5, 6, tzinfo=dt.timezone.utc)),
    ("TIMESTAMPTZ", pa.timestamp("us"), dt.datetime(2021, 5, 6)),
    ("DECIMAL(18,3)", pa.decimal128(10, 2), decimal.Decimal("1.25")),
    ("DECIMAL(18,3)", pa.decimal128(10, 4), decimal.Decimal("1.2500")),
    ("DECIMAL(9,2)", pa.decimal128(18, 2), decimal.Decimal("1.25")),
    ("VARCHAR", pa.string(), "x"),
    ("VARCHAR", pa.binary(), b"x"),
    ("VARCHAR", pa.json_(pa.string()), '{"a": 1}'),
    ("BLOB", pa.binary(), b"x"),
    ("BLOB", pa.string(), "x"),
    ("DATE", pa.date32(), dt.date(2021, 5, 6)),
    ("BOOLEAN", pa.bool_(), True),
    ("TIME", pa.time64("us"), dt.time(1, 2, 3)),
    ("TIME", pa.time32("ms"), dt.time(1, 2, 3)),
    ("TIME", pa.time64("ns"), dt.time(1, 2, 3)),
    ("UUID", pa.uuid(), b"\x01" * 16),
    ("UUID", pa.binary(16), b"\x01" * 16),
    ("JSON", pa.json_(pa.string()), '{"a": 1}'),
    ("JSON", pa.string(), '{"a": 1}'),
    ("INTEGER[]", pa.list_(pa.int16()), [1, 2]),
    ("INTEGER[]", pa.list_(pa.int64()), [1, 2]),
    ("STRUCT(a INTEGER)", pa.struct([("A", pa.int8())]), {"A": 1}),
    ("MAP(VARCHAR, INTEGER)", pa.map_(pa.string(), pa.int16()), [("k", 1)]),
    ("INTEGER", pa.list_(pa.int32()), [1]),
    # nested: fields in another order and case, narrower types, at every level
    (
        "STRUCT(x INTEGER, y VARCHAR)[]",
        pa.list_(pa.struct([("Y", pa.string()), ("X", pa.int16())])),
        [{"Y": "a", "X": 1}],
    ),
    (
        "MAP(VARCHAR, STRUCT(p BIGINT, q INTEGER[]))",
        pa.map_(pa.string(), pa.struct([("Q", pa.list_(pa.int8())), ("P", pa.int32())])),
        [("k", {"Q": [1, None], "P": 3})],
    ),
    ("STRUCT(s STRUCT(a INTEGER))", pa.struct([("S", pa.struct([("A", pa.int64())]))]), {"S": {"A": 1}}),
]


def test_add_files_accepts_and_rejects_the_types_duckdb_does(sqlite_catalog: Any, tmp_path: Path) -> None:
    from pyspark_ducklake.exceptions import SchemaMismatchError

    ref_dir = tmp_path / "ref"
    (ref_dir / "data").mkdir(parents=True)
    ref = connect_duckdb()
    ref.execute(f"ATTACH 'ducklake:sqlite:{ref_dir}/lake.sqlite' AS lake (DATA_PATH '{ref_dir}/data/')")
    setup = connect_duckdb()
    setup.execute(attach_sql(sqlite_catalog, "lake"))
    for i, (sql_type, _, _) in enumerate(TYPE_CASES):
        for con in (ref, setup):
            con.execute(f"CREATE TABLE lake.t{i}(c {sql_type})")
    setup.close()
    lake = pdl.connect(sqlite_catalog.url, sqlite_catalog.data_path)
    verdicts = []
    for i, (sql_type, arrow_type, value) in enumerate(TYPE_CASES):
        path = tmp_path / f"c{i}.parquet"
        pq.write_table(pa.table({"c": pa.array([value, None], arrow_type)}), path)
        try:
            ref.execute(f"CALL ducklake_add_data_files('lake', 't{i}', '{path}')")
            duck_ok = True
        except duckdb.Error:
            duck_ok = False
        before = lake.current_snapshot_id()
        try:
            lake.add_files(f"main.t{i}", str(path))
            ours_ok = True
        except SchemaMismatchError as e:
            ours_ok = False
            assert str(path) in str(e) and '"c' in str(e), e  # names file and column
            assert lake.current_snapshot_id() == before  # nothing written
        verdicts.append((sql_type, str(arrow_type), duck_ok, ours_ok))
        if duck_ok and ours_ok:
            theirs = ref.execute(f"SELECT * FROM lake.t{i}").to_arrow_table()
            assert canon(lake.scan(f"main.t{i}")) == canon(theirs), (sql_type, arrow_type)
    ref.close()
    wrong = [v for v in verdicts if v[2] != v[3]]
    assert not wrong, wrong
    assert sum(v[2] for v in verdicts) not in (0, len(verdicts))  # both kinds of verdict happen
    # our reads of every accepted file equal DuckDB's own reads of our catalog
    con = duck(sqlite_catalog)
    try:
        for i, (_, _, duck_ok, _) in enumerate(verdicts):
            if duck_ok:
                assert duck_rows(con, f"t{i}") == canon(lake.scan(f"main.t{i}")), TYPE_CASES[i]
    finally:
        con.close()


def test_spark_add_files_registers_files_spark_wrote_and_duckdb_reads_them(
    spark: Any, sqlite_catalog: Any, tmp_path: Path
) -> None:
    """One backend: the subject is Spark's Parquet layouts; the catalog rows ``add_files`` writes are compared with
    DuckDB's on both backends by ``test_add_files_writes_the_catalog_rows_duckdb_writes_and_duckdb_reads_them``."""
    catalog = sqlite_catalog
    con = duck(catalog)
    con.execute(
        "CREATE TABLE lake.sp(id BIGINT, s STRUCT(a INTEGER, b VARCHAR), l INTEGER[], m MAP(VARCHAR, INTEGER), "
        "dec DECIMAL(18,3), k VARCHAR)"
    )
    con.close()
    df = spark.sql(
        "SELECT CAST(id AS INT) AS ID, named_struct('A', CAST(id AS INT), 'b', CAST(id AS STRING)) AS s, "
        "IF(id = 1, NULL, array(CAST(id AS INT), NULL)) AS l, map('x', CAST(id AS INT)) AS m, "
        "CAST(id / 4 AS DECIMAL(9,2)) AS dec FROM range(3)"
    )
    for legacy in ("false", "true"):  # Spark's legacy layout: lists as bag/array, decimals as fixed bytes
        spark.conf.set("spark.sql.parquet.writeLegacyFormat", legacy)
        try:
            df.coalesce(1).write.parquet(str(tmp_path / f"k=legacy-{legacy}"))
        finally:
            spark.conf.unset("spark.sql.parquet.writeLegacyFormat")
    snapshot = pdl.add_files(spark, "main.sp", str(tmp_path / "k=*" / "*.parquet"), catalog=catalog.url)
    lake = pdl.connect(catalog.url, catalog.data_path)
    assert snapshot == lake.current_snapshot_id()
    con = duck(catalog)
    try:
        theirs = duck_rows(con, "sp")
        # DuckDB's wrong result: a list in Spark's legacy layout (bag/array) reads with NULL elements through the
        # very mapping DuckDB itself writes for the file; we read the file's values (those of the same rows
        # written in the standard layout).
        standard = {r[0]: r[2] for r in theirs if r[-1] == "legacy-false"}
        for r in theirs:
            if r[-1] == "legacy-true" and r[2] is not None:
                assert all(v is None for v in r[2]), r
        expected = sorted(
            (r if r[-1] == "legacy-false" else (*r[:2], standard[r[0]], *r[3:]) for r in theirs), key=repr
        )
        assert len(expected) == 6 and canon(lake.scan("main.sp")) == expected
        got = pdl.read_table(spark, "main.sp", catalog=catalog.url).toArrow()
        assert canon(got) == expected
        assert con.execute("SELECT count(*) FROM lake.sp WHERE s.a = 2 AND m['x'] = 2").fetchone() == (2,)
    finally:
        con.close()


# --- bad input and the attacker's cases ------------------------------------------------------------------------------


def small_lake(catalog: Any, ddl: list[str]) -> pdl.Lake:
    con = duck(catalog)
    for sql in ddl:
        con.execute(sql)
    con.close()
    return pdl.connect(catalog.url, catalog.data_path)


def test_add_files_bad_input_is_refused_with_nothing_written(sqlite_catalog: Any, tmp_path: Path) -> None:
    lake = small_lake(
        sqlite_catalog,
        ["CREATE TABLE lake.t(a INTEGER, b VARCHAR)", "CREATE TABLE lake.p(k INTEGER, v VARCHAR)",
         "ALTER TABLE lake.p SET PARTITIONED BY (k)"],
    )  # fmt: skip
    ext = tmp_path / "ext"
    (ext / "k=abc").mkdir(parents=True)
    pq.write_table(pa.table({"a": pa.array([1], pa.int32()), "b": ["x"], "c": [1]}), ext / "extra.parquet")
    pq.write_table(pa.table({"a": pa.array([1], pa.int32())}), ext / "missing.parquet")
    pq.write_table(pa.table({"a": pa.array([1], pa.int64()), "b": ["x"]}), ext / "wide.parquet")
    pq.write_table(pa.table({"v": ["x"]}), ext / "flat.parquet")
    pq.write_table(pa.table({"v": ["x"]}), ext / "k=abc" / "f.parquet")
    (ext / "text.parquet").write_text("not parquet at all, though long enough")
    cases = [
        ("add-files-extra-column", "main.t", ext / "extra.parquet", {}),
        ("add-files-missing-column", "main.t", ext / "missing.parquet", {}),
        ("add-files-type", "main.t", ext / "wide.parquet", {}),
        ("add-files-partition-missing", "main.p", ext / "flat.parquet", {"allow_missing": True}),
        ("add-files-hive-value", "main.p", ext / "k=abc" / "f.parquet", {}),
        ("add-files-not-parquet", "main.t", ext / "text.parquet", {}),
        ("add-files-flag-string", "main.t", ext / "extra.parquet", {"hive_partitioning": "false"}),
        ("add-files-glob-empty", "main.t", ext / "nothing" / "*.parquet", {}),
    ]
    for case, table, path, options in cases:
        with expect_bad_input(case, lake, watch=[ext, sqlite_catalog.url.removeprefix("sqlite:///")]):
            lake.add_files(table, str(path), **options)
    # the same files with DuckDB's options go in, and only then
    lake.add_files("main.t", [str(ext / "extra.parquet"), str(ext / "missing.parquet")], ignore_extra_columns=True,
                   allow_missing=True)  # fmt: skip
    assert sorted(lake.scan("main.t").to_pylist(), key=repr) == [{"a": 1, "b": "x"}, {"a": 1, "b": None}]


def test_an_added_file_that_lost_a_column_fails_the_read_with_a_typed_error(
    sqlite_catalog: Any, tmp_path: Path
) -> None:
    lake = small_lake(sqlite_catalog, ["CREATE TABLE lake.t(a INTEGER, b VARCHAR)"])
    path = tmp_path / "f.parquet"
    pq.write_table(pa.table({"a": pa.array([1], pa.int32()), "b": ["x"]}), path)
    lake.add_files("main.t", str(path))
    pq.write_table(pa.table({"a": pa.array([1], pa.int32()), "renamed": ["x"]}), path)
    with expect_bad_input("added-file-changed", lake, watch=[tmp_path]):
        lake.scan("main.t")


def test_an_added_file_moved_out_of_its_partition_folder_fails_the_read_as_in_duckdb(
    sqlite_catalog: Any, tmp_path: Path
) -> None:
    from pyspark_ducklake.exceptions import DataFileError

    lake = small_lake(sqlite_catalog, ["CREATE TABLE lake.h(k INTEGER, v VARCHAR)"])
    (tmp_path / "k=1").mkdir()
    pq.write_table(pa.table({"v": ["x"]}), tmp_path / "k=1" / "f.parquet")
    lake.add_files("main.h", str(tmp_path / "k=*" / "*.parquet"))
    assert lake.scan("main.h").to_pylist() == [{"k": 1, "v": "x"}]
    (tmp_path / "k=1" / "f.parquet").rename(tmp_path / "f.parquet")
    engine = create_engine(sqlite_catalog.url)
    with engine.begin() as conn:
        conn.execute(text("UPDATE ducklake_data_file SET path = :p"), {"p": str(tmp_path / "f.parquet")})
    engine.dispose()
    with pytest.raises(DataFileError, match="move it back"):
        lake.scan("main.h")
    con = duck(sqlite_catalog)
    try:
        with pytest.raises(duckdb.Error, match="hive partitions"):
            con.execute("SELECT * FROM lake.h").fetchall()
    finally:
        con.close()


def test_external_added_files_are_never_deleted_by_our_maintenance(sqlite_catalog: Any, tmp_path: Path) -> None:
    """DuckDB's expire + cleanup deletes an added file outside its data path once the table is dropped; we refuse
    to delete outside the data path whatever the catalog says (the file stays, reported as outside)."""
    lake = small_lake(sqlite_catalog, ["CREATE TABLE lake.t(a INTEGER)"])
    path = tmp_path / "ext" / "f.parquet"
    path.parent.mkdir()
    for i in range(2):
        pq.write_table(pa.table({"a": pa.array([i], pa.int32())}), path.with_name(f"f{i}.parquet"))
    lake.add_files("main.t", str(path.parent / "*.parquet"))
    lake.merge_adjacent_files("main.t")  # added files are not rewritten: they stay the user's
    assert {r[0] for r in sql_rows(sqlite_catalog, "SELECT path FROM ducklake_data_file")} == {
        str(path.with_name("f0.parquet")),
        str(path.with_name("f1.parquet")),
    }
    assert sorted(lake.scan("main.t")["a"].to_pylist()) == [0, 1]
    con = duck(sqlite_catalog)
    con.execute("DROP TABLE lake.t")
    con.close()
    lake.expire_snapshots(older_than="0 seconds")
    report = lake.cleanup_old_files(cleanup_all=True)
    assert sorted(report.outside_data_path) == [str(path.with_name("f0.parquet")), str(path.with_name("f1.parquet"))]
    assert path.with_name("f0.parquet").exists() and path.with_name("f1.parquet").exists()


def test_add_files_edge_paths_and_names_as_duckdb(sqlite_catalog: Any, tmp_path: Path, monkeypatch: Any) -> None:
    """A relative path with ``..`` (stored absolute: DuckDB stores it as given, relative to its working folder),
    the same file twice (DuckDB registers it twice), file columns differing only in case."""
    ddl = ["CREATE TABLE lake.t(a INTEGER)", "CREATE TABLE lake.c(a INTEGER, b INTEGER)"]
    lake = small_lake(sqlite_catalog, ddl)
    ref_dir = tmp_path / "ref"
    (ref_dir / "data").mkdir(parents=True)
    ref = connect_duckdb()
    ref.execute(f"ATTACH 'ducklake:sqlite:{ref_dir}/lake.sqlite' AS lake (DATA_PATH '{ref_dir}/data/')")
    for sql in ddl:
        ref.execute(sql)
    (tmp_path / "w" / "sub").mkdir(parents=True)
    pq.write_table(pa.table({"a": pa.array([1, 2], pa.int32())}), tmp_path / "w" / "f.parquet")
    pq.write_table(
        pa.table({"A": pa.array([1], pa.int32()), "a": pa.array([2], pa.int32()), "B": pa.array([3], pa.int32())}),
        tmp_path / "w" / "case.parquet",
    )
    monkeypatch.chdir(tmp_path / "w" / "sub")
    for _ in range(2):
        lake.add_files("main.t", "../f.parquet")
        ref.execute("CALL ducklake_add_data_files('lake', 't', '../f.parquet')")
    stored = {r[0] for r in sql_rows(sqlite_catalog, "SELECT path FROM ducklake_data_file")}
    assert stored == {str(tmp_path / "w" / "f.parquet")}
    for options in ({}, {"ignore_extra_columns": True}):
        opts = "".join(f", {k} => {str(v).lower()}" for k, v in options.items())
        try:
            ref.execute(f"CALL ducklake_add_data_files('lake', 'c', '{tmp_path}/w/case.parquet'{opts})")
            duck_ok = True
        except duckdb.Error:
            duck_ok = False
        try:
            lake.add_files("main.c", str(tmp_path / "w" / "case.parquet"), **options)
            ours_ok = True
        except pdl.DuckLakeError:
            ours_ok = False
        assert duck_ok == ours_ok, options
    try:
        for table in ("t", "c"):
            theirs = canon(ref.execute(f"SELECT * FROM lake.{table}").to_arrow_table())
            assert canon(lake.scan(f"main.{table}")) == theirs, table
        assert canon(lake.scan("main.c")) == [(1, 3)]  # the first spelling wins, as in DuckDB
    finally:
        ref.close()
    con = duck(sqlite_catalog)
    try:
        assert duck_rows(con, "t") == canon(lake.scan("main.t")) and len(duck_rows(con, "t")) == 4
    finally:
        con.close()


def sql_rows(catalog: Any, sql: str) -> list[Any]:
    engine = create_engine(catalog.url)
    try:
        with engine.connect() as conn:
            return [tuple(r) for r in conn.execute(text(sql)).all()]
    finally:
        engine.dispose()


def test_filtered_scan_keeps_added_float_files_whose_stats_are_in_float32(sqlite_catalog: Any, tmp_path: Path) -> None:
    """An added FLOAT file in a DOUBLE column keeps FLOAT statistics ("0.1" is the float 0.1, above the double 0.1):
    pruning must not drop the file for a filter on the value it holds. DuckDB 1.5.5 does drop it (its wrong result:
    ``WHERE f = 0.10000000149011612`` finds no row); we find the row."""
    lake = small_lake(sqlite_catalog, ["CREATE TABLE lake.t(f DOUBLE)"])
    path = tmp_path / "f.parquet"
    pq.write_table(pa.table({"f": pa.array([0.05, 0.1], pa.float32())}), path)
    lake.add_files("main.t", str(path))
    held = float(np.float32(0.1))
    con = duck(sqlite_catalog)
    try:
        values = [r[0] for r in con.execute("SELECT f FROM lake.t").fetchall()]
        assert sorted(values) == sorted(lake.scan("main.t")["f"].to_pylist()) and held in values
        assert con.execute(f"SELECT count(*) FROM lake.t WHERE f = {held!r}").fetchone() == (0,)  # DuckDB's pruning
    finally:
        con.close()
    for op, expected in (("=", 1), (">=", 1), (">", 0), ("<=", 2)):
        assert lake.scan("main.t", filter=[("f", op, held)]).num_rows == expected, op


def positional_file(catalog: Any, tmp_path: Path) -> None:
    """Table ``t(a, b, c)`` with one file whose columns are ``(b INTEGER, a VARCHAR)``, no field ids, no mapping."""
    small_lake(catalog, ["CREATE TABLE lake.t(a INTEGER, b VARCHAR, c INTEGER)"])
    path = tmp_path / "f.parquet"
    pq.write_table(pa.table({"a": pa.array([1, 2], pa.int32()), "b": ["x", "y"]}), path)
    con = duck(catalog)
    con.execute(f"CALL ducklake_add_data_files('lake', 't', '{path}', allow_missing => true)")
    con.close()
    # the same bytes but the names swapped, and the catalog row without its mapping
    pq.write_table(pa.table({"b": pa.array([1, 2], pa.int32()), "a": ["x", "y"]}), path)
    engine = create_engine(catalog.url)
    with engine.begin() as conn:
        size = conn.execute(text("SELECT file_size_bytes FROM ducklake_data_file")).scalar()
        assert size == path.stat().st_size
        conn.execute(text("UPDATE ducklake_data_file SET mapping_id = NULL"))
    engine.dispose()


def test_spark_reads_a_file_without_mapping_or_field_ids_by_position(
    spark: Any, sqlite_catalog: Any, tmp_path: Path
) -> None:
    from pyspark_ducklake.spark_parquet_read import plan_read

    positional_file(sqlite_catalog, tmp_path)
    reason = plan_read(spark, "main.t", catalog=sqlite_catalog.url).reason
    assert reason is not None and "no field ids" in reason  # Spark's reader fails on such a file: fall back
    got = pdl.read_table(spark, "main.t", catalog=sqlite_catalog.url).toArrow()
    assert canon(got) == [(1, "x", None), (2, "y", None)]
    # some columns only: each still bound by its place in the whole table
    frame = spark.read.format("ducklake").option("catalog", sqlite_catalog.url).option("columns", "b").load("main.t")
    assert sorted(r.b for r in frame.collect()) == ["x", "y"]


def test_spark_fast_path_reads_flat_added_files_by_name_as_duckdb(
    spark: Any, sqlite_catalog: Any, tmp_path: Path
) -> None:
    """Added files with top-level columns only go through Spark's Parquet reader (by name, no field ids): a renamed
    column, a promoted type, a column added later with a default, DuckDB's deletes; a file whose column names differ
    only in case (Spark matches names case-insensitively) sends the read to the data source. Both equal DuckDB.
    One backend: the subject is Spark's reader, not the catalog SQL (both backends in the Python tests above)."""
    from pyspark_ducklake.spark_parquet_read import plan_read

    catalog = sqlite_catalog

    ext = tmp_path / "flat_ext"
    ext.mkdir()
    pq.write_table(pa.table({"id": pa.array([1, 2, 3], pa.int32()), "Name": ["a", "b", None]}), ext / "a.parquet")
    pq.write_table(pa.table({"id": pa.array([4, 5], pa.int32()), "nm": ["d", "e"]}), ext / "b.parquet")
    pq.write_table(pa.table({"id": pa.array([6], pa.int32()), "nm": ["f"], "NM": ["shadow"]}), ext / "c.parquet")
    con = duck(catalog)
    try:
        con.execute("CREATE TABLE lake.flat(id BIGINT, Name VARCHAR)")
        con.execute(f"CALL ducklake_add_data_files('lake', 'flat', '{ext / 'a.parquet'}')")
        con.execute("ALTER TABLE lake.flat RENAME COLUMN Name TO nm")
        con.execute(f"CALL ducklake_add_data_files('lake', 'flat', '{ext / 'b.parquet'}')")
        con.execute("ALTER TABLE lake.flat ADD COLUMN extra INTEGER DEFAULT 7")
        con.execute("DELETE FROM lake.flat WHERE id IN (2, 5)")
        con.execute("INSERT INTO lake.flat VALUES (10, 'native', 1)")
        assert plan_read(spark, "main.flat", catalog=catalog.url).reason is None
        got = pdl.read_table(spark, "main.flat", catalog=catalog.url).toArrow()
        assert canon(got) == duck_rows(con, "flat")
        con.execute(
            f"CALL ducklake_add_data_files('lake', 'flat', '{ext / 'c.parquet'}', allow_missing => true, "
            "ignore_extra_columns => true)"
        )
        reason = plan_read(spark, "main.flat", catalog=catalog.url).reason
        assert reason is not None and "differing only in case" in reason
        got = pdl.read_table(spark, "main.flat", catalog=catalog.url).toArrow()
        assert canon(got) == duck_rows(con, "flat")
    finally:
        con.close()


def test_a_file_without_mapping_or_field_ids_binds_columns_by_position_as_duckdb(
    sqlite_catalog: Any, tmp_path: Path
) -> None:
    """ducklake-format-2.md §1.2: a data file with neither a name mapping nor field ids (a foreign writer's row)
    binds file column i to table column i, whatever it is called."""
    positional_file(sqlite_catalog, tmp_path)
    lake = pdl.connect(sqlite_catalog.url, sqlite_catalog.data_path)
    con = duck(sqlite_catalog)
    try:
        theirs = duck_rows(con, "t")
        assert theirs == [(1, "x", None), (2, "y", None)]
        assert canon(lake.scan("main.t")) == theirs
        assert lake.scan("main.t", columns=["b"]).column("b").to_pylist() == ["x", "y"]
        assert lake.scan("main.t", columns=["c", "b"]).to_pydict() == {"b": ["x", "y"], "c": [None, None]}
        last = lake.current_snapshot_id()
        assert our_feed(lake, "t", 0, last) == duck_feed(con, "t", 0, last)
        feed = lake.table_changes("main.t", 0, last, columns=["b"])
        assert sorted(feed.column("b").to_pylist()) == ["x", "y"]
    finally:
        con.close()


def test_add_files_nested_missing_fields_and_temporal_partitions(sqlite_catalog: Any, tmp_path: Path) -> None:
    """A struct field the file lacks needs allow_missing, as in DuckDB, and reads as DuckDB reads it; into a table
    partitioned by year() a file under year=2020/ goes with that value, as DuckDB registers it."""
    from pyspark_ducklake.exceptions import SchemaMismatchError

    ddl = [
        "CREATE TABLE lake.n(id INTEGER, s STRUCT(a INTEGER, b VARCHAR))",
        "CREATE TABLE lake.y(ts TIMESTAMP, v VARCHAR)",
        "ALTER TABLE lake.y SET PARTITIONED BY (year(ts))",
    ]
    lake = small_lake(sqlite_catalog, ddl)
    path = tmp_path / "n.parquet"
    s_type = pa.struct([("a", pa.int32())])
    pq.write_table(pa.table({"id": pa.array([1, 2], pa.int32()), "s": pa.array([{"a": 5}, None], s_type)}), path)
    before = lake.current_snapshot_id()
    with pytest.raises(SchemaMismatchError, match=r'"s\.b"'):
        lake.add_files("main.n", str(path))
    assert lake.current_snapshot_id() == before
    lake.add_files("main.n", str(path), allow_missing=True)
    (tmp_path / "year=2020").mkdir()
    pq.write_table(
        pa.table({"ts": pa.array([dt.datetime(2020, 1, 1)]), "v": ["x"]}), tmp_path / "year=2020" / "f.parquet"
    )
    lake.add_files("main.y", str(tmp_path / "year=2020" / "f.parquet"))
    con = duck(sqlite_catalog)
    try:
        assert duck_rows(con, "n") == canon(lake.scan("main.n")) == [(1, (("a", 5), ("b", None))), (2, None)]
        assert con.execute("SELECT v FROM lake.y WHERE year(ts) = 2020").fetchall() == [("x",)]
        assert con.execute(
            "SELECT partition_value FROM __ducklake_metadata_lake.ducklake_file_partition_value"
        ).fetchall() == [("2020",)]
    finally:
        con.close()


def test_add_files_into_an_encrypted_lake_is_refused_as_duckdb_cannot_read_them(
    sqlite_catalog: Any, tmp_path: Path
) -> None:
    from pyspark_ducklake.exceptions import EncryptedLakeError

    path = tmp_path / "e.parquet"
    pq.write_table(pa.table({"a": pa.array([1, 2], pa.int32())}), path)
    con = connect_duckdb()
    con.execute(attach_sql(sqlite_catalog, "lake")[:-1] + ", ENCRYPTED)")
    try:
        con.execute("CREATE TABLE lake.c(a INTEGER)")
        con.execute(f"CALL ducklake_add_data_files('lake', 'c', '{path}')")  # DuckDB registers it...
        with pytest.raises(duckdb.Error, match="does not have an encryption key"):
            con.execute("SELECT * FROM lake.c").fetchall()  # ...and cannot read it
    finally:
        con.close()
    lake = pdl.connect(sqlite_catalog.url, sqlite_catalog.data_path)
    with pytest.raises(EncryptedLakeError):
        lake.scan("main.c")  # nor can we: refused as DuckDB refuses it, not read as NULL
    with expect_bad_input("add-files-encrypted-lake", lake, watch=[tmp_path]):
        lake.add_files("main.c", str(path))
