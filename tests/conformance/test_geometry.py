"""Issue #16 item 3: GEOMETRY written by DuckDB (always Parquet: DuckDB never inlines it), top-level and nested in
lists, structs and maps, read as GeoArrow WKB in Python and as ``GeometryType(0)`` in Spark, at every snapshot and
in the change feed, byte for byte what DuckDB's ``ST_AsWKB`` gives; and Spark writes them back (the write side's
Python tests: test_geometry_write.py)."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql import functions as F
from pyspark.sql import types as T

import pyspark_ducklake as pdl
from pyspark_ducklake.catalog.geometry import GEOARROW_WKB
from tests.support.bad_inputs import expect_bad_input
from tests.support.catalogs import sqlite_location
from tests.support.duck import open_duckdb

SHAPES = [
    "POINT(1 2)",
    "POINT EMPTY",
    "LINESTRING Z (0 0 5, 10 10 10)",
    "POLYGON((0 0, 10 0, 10 10, 0 0))",
    "MULTIPOINT(1 1, 2 2)",
    "GEOMETRYCOLLECTION(POINT(3 4), LINESTRING(0 0, 1 1))",
]
DDL = "CREATE TABLE lake.main.g (id BIGINT, g GEOMETRY, l GEOMETRY[], s STRUCT(a GEOMETRY, n INTEGER), m MAP(VARCHAR, GEOMETRY))"
# DuckDB's own reading of each column as WKB, for comparison.
DUCK_WKB = (
    "SELECT id, ST_AsWKB(g), CASE WHEN l IS NULL THEN NULL ELSE [ST_AsWKB(x) FOR x IN l] END, "
    "CASE WHEN s IS NULL THEN NULL ELSE {'a': ST_AsWKB(s.a), 'n': s.n} END, "
    "CASE WHEN m IS NULL THEN NULL ELSE map_from_entries([{'key': e.key, 'value': ST_AsWKB(e.value)} FOR e IN map_entries(m)]) END"
)


def insert(first: int, n: int) -> str:
    shapes = ", ".join(f"'{s}'" for s in SHAPES)
    k = len(SHAPES)
    return f"""INSERT INTO lake.main.g SELECT i,
        CASE WHEN i % 7 = 6 THEN NULL ELSE ([{shapes}])[i % {k} + 1]::GEOMETRY END,
        CASE WHEN i % 5 = 4 THEN NULL ELSE [([{shapes}])[(i + 1) % {k} + 1]::GEOMETRY, NULL] END,
        CASE WHEN i % 3 = 2 THEN NULL ELSE {{'a': ([{shapes}])[(i + 2) % {k} + 1]::GEOMETRY, 'n': i::INTEGER}} END,
        MAP {{'k': ([{shapes}])[(i + 3) % {k} + 1]::GEOMETRY}}
    FROM range({first}, {first + n}) r(i)"""


def rows(table: pa.Table) -> list[tuple[Any, ...]]:
    """Rows with every GeoArrow column as its WKB bytes (maps as sorted pairs)."""
    plain = pa.table([c.cast(_storage(c.type)) for c in table.columns], names=table.column_names)
    out = []
    for r in plain.to_pylist():
        out.append(tuple(sorted(v) if isinstance(v, list) and v and isinstance(v[0], tuple) else v for v in r.values()))
    return sorted(out, key=lambda r: r[0])


def _storage(t: pa.DataType) -> pa.DataType:
    if isinstance(t, pa.BaseExtensionType):
        return t.storage_type
    if pa.types.is_list(t):
        return pa.list_(_storage(t.value_type))
    if pa.types.is_struct(t):
        return pa.struct([pa.field(f.name, _storage(f.type)) for f in t])
    if pa.types.is_map(t):
        return pa.map_(t.key_type, _storage(t.item_type))
    return t


def _duckdb_history(catalog: Any) -> tuple[dict[int, list[tuple[Any, ...]]], list[tuple[Any, ...]], list[int]]:
    con = open_duckdb(catalog, inlining_row_limit=10)
    try:
        con.execute(DDL)
        con.execute(insert(0, 3))  # small, but GEOMETRY is never inlined
        con.execute(insert(3, 30))
        con.execute("DELETE FROM lake.main.g WHERE id IN (1, 20)")
        con.execute("UPDATE lake.main.g SET g = 'POINT(9 9)'::GEOMETRY WHERE id = 5")
        snaps = [r[0] for r in con.execute("SELECT snapshot_id FROM lake.snapshots() ORDER BY 1").fetchall()]
        expected = {
            s: rows(con.execute(f"{DUCK_WKB} FROM lake.main.g AT (VERSION => {s})").to_arrow_table()) for s in snaps[2:]
        }
        feed = con.execute(
            f"{DUCK_WKB}, change_type, snapshot_id, rowid FROM ducklake_table_changes('lake', 'main', 'g', 2, {snaps[-1]})"
        ).to_arrow_table()
        inlined = con.execute("SELECT count(*) FROM __ducklake_metadata_lake.ducklake_inlined_data_tables").fetchone()
        assert inlined == (0,)
    finally:
        con.close()
    return expected, rows(feed), snaps


History = tuple[Any, dict[int, list[tuple[Any, ...]]], list[tuple[Any, ...]], list[int]]


@pytest.fixture(scope="module")
def sqlite_history(tmp_path_factory: pytest.TempPathFactory) -> History:
    """DuckDB's history in a SQLite catalog, written once for the module: every test reads ``main.g`` and writes
    tables of other names only."""
    catalog = sqlite_location(tmp_path_factory.mktemp("geometry"))
    return (catalog, *_duckdb_history(catalog))


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_geometry_duckdb_wrote_reads_as_geoarrow_wkb(backend: str, request: pytest.FixtureRequest) -> None:
    """Both backends: the catalog's geometry columns and stats (the SQLite history is the Spark tests' too)."""
    if backend == "sqlite":
        catalog, expected, feed, snaps = request.getfixturevalue("sqlite_history")
    else:
        catalog = request.getfixturevalue("pg_catalog")
        expected, feed, snaps = _duckdb_history(catalog)
    lake = pdl.connect(catalog.url)
    try:
        for s, want in expected.items():
            got = lake.scan("main.g", snapshot=s)
            assert got.schema.field("g").type.extension_name == GEOARROW_WKB
            assert rows(got) == want, f"snapshot {s}"
        changes = lake.table_changes("main.g", 2, snaps[-1])
        ours = changes.select(["id", "g", "l", "s", "m", "_change_type", "_snapshot_id", "_rowid"])
        assert sorted(rows(ours), key=repr) == sorted(feed, key=repr)
    finally:
        lake.close()


def test_geometry_reads_in_spark_as_geometry_type_and_writes_back(spark: Any, sqlite_history: History) -> None:
    from pyspark_ducklake.spark_parquet_read import plan_read

    sqlite_catalog, expected, _, snaps = sqlite_history
    pdl.register(spark)
    url = sqlite_catalog.url
    source = spark.read.format("ducklake").option("catalog", url).load("main.g")
    assert source.schema["g"].dataType == T.GeometryType(0)
    want = [(r[0], r[1]) for r in expected[snaps[-1]]]
    for frame in (source, pdl.read_table(spark, "main.g", catalog=url)):
        got = frame.selectExpr("id", "st_asbinary(g)").collect()
        assert sorted((r[0], None if r[1] is None else bytes(r[1])) for r in got) == want
    nested = source.selectExpr("id", "transform(l, x -> st_asbinary(x))", "st_asbinary(s.a)").collect()
    want_nested = {r[0]: (r[2], None if r[3] is None else r[3]["a"]) for r in expected[snaps[-1]]}
    assert {
        r[0]: (
            None if r[1] is None else [None if b is None else bytes(b) for b in r[1]],
            None if r[2] is None else bytes(r[2]),
        )
        for r in nested
    } == want_nested
    # and written back through Spark: the data source, the fast path and the sink, read by DuckDB byte for byte
    lake = pdl.connect(url)
    try:
        wanted = sorted(want, key=lambda r: r[0])
        source.select("id", "g").write.format("ducklake").option("catalog", url).mode("append").save("main.g2")
        pdl.write_table(source.select("id", "g"), "main.g3", catalog=url)
        nested = source.select("id", "l", "s")
        nested.write.format("ducklake").option("catalog", url).mode("append").save("main.g4")
        source.select("id", "g").createOrReplaceTempView("geo_src")
        sink = pdl.ducklake_sink("main.g5", catalog=url, app_id="geometry-test")
        sink(spark.table("geo_src"), 0)
        con = open_duckdb(sqlite_catalog)
        try:
            for name in ("g2", "g3", "g5"):
                got = con.execute(f"SELECT id, ST_AsWKB(g) FROM lake.main.{name} ORDER BY id").fetchall()
                assert [(i, None if b is None else bytes(b)) for i, b in got] == wanted, name
            # a table of our writing (the data source's writer), read back through read_table's fast path
            ours = plan_read(spark, "main.g2", catalog=url)
            assert ours.reason is None, ours.reason
            got = ours.dataframe(spark).selectExpr("id", "st_asbinary(g)").collect()
            assert sorted((r[0], None if r[1] is None else bytes(r[1])) for r in got) == wanted
            nested_sql = DUCK_WKB.split(", CASE WHEN m")[0].replace("ST_AsWKB(g), ", "")
            back = rows(con.execute(f"{nested_sql} FROM lake.main.g4").to_arrow_table())
            assert back == [(r[0], r[2], r[3]) for r in expected[snaps[-1]]]
            assert con.execute(
                "SELECT count(*) FROM __ducklake_metadata_lake.ducklake_inlined_data_tables"
            ).fetchone() == (0,)
        finally:
            con.close()
        with expect_bad_input("geometry-srid", lake):
            source.selectExpr("id", "st_setsrid(g, 4326) AS g").write.format("ducklake").option("catalog", url).mode(
                "append"
            ).save("main.g6")
        with expect_bad_input("spark-geography-write", lake):
            source.selectExpr("id", "st_geogfromwkb(st_asbinary(g)) AS g").write.format("ducklake").option(
                "catalog", url
            ).mode("append").save("main.g7")
    finally:
        lake.close()


def test_read_table_reads_top_level_geometry_through_spark_parquet_reader(spark: Any, sqlite_history: History) -> None:
    """A top-level GEOMETRY takes ``read_table``'s fast path (Spark 4.3 reads the Parquet ``Geometry`` column as
    ``GeometryType(0)``), byte for byte DuckDB's ``ST_AsWKB`` at every snapshot (one Spark job for all of them),
    DuckDB's files here and ours in the test above; a nested one falls back to the data source, and ``columns``
    leaves the nested ones out."""
    catalog, expected, _, _ = sqlite_history  # Spark's read path; the catalog's geometry on both backends: the first
    from pyspark_ducklake.spark_parquet_read import plan_read

    pdl.register(spark)
    url = catalog.url
    nested = plan_read(spark, "main.g", catalog=url)
    assert nested.reason is not None and "column l (element) nests a geometry" in nested.reason, nested.reason
    frames = []
    for s in expected:
        read = plan_read(spark, "main.g", snapshot=s, catalog=url, columns=["id", "g"])
        assert read.reason is None, (s, read.reason)
        frame = read.dataframe(spark)
        assert frame.schema["g"].dataType == T.GeometryType(0)
        frames.append(frame.selectExpr("id", "st_asbinary(g) AS wkb").withColumn("_snap", F.lit(s)))
    union = frames[0]
    for frame in frames[1:]:
        union = union.unionByName(frame)
    got: dict[int, list[tuple[Any, ...]]] = {s: [] for s in expected}
    for r in union.collect():
        got[r["_snap"]].append((r["id"], None if r["wkb"] is None else bytes(r["wkb"])))
    for s, want in expected.items():
        assert sorted(got[s]) == [(r[0], r[1]) for r in want], s
