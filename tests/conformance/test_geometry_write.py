"""Issue #16 item 3, the write side: GEOMETRY columns we write (top level, in lists, structs, maps and lists of
structs) DuckDB reads back byte for byte (``ST_AsWKB``), never inlined, with the ``extra_stats`` DuckDB writes for the
same data, on SQLite and PostgreSQL; compaction keeps them, deletes and the change feed work; malformed WKB, SRIDs and
CRSs are refused with nothing written."""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
from sqlalchemy import create_engine, text

import pyspark_ducklake as pdl
from pyspark_ducklake.catalog.geometry import geometry_type
from pyspark_ducklake.exceptions import InvalidGeometryError
from tests.conformance.test_geometry import rows
from tests.support.bad_inputs import expect_bad_input

SHAPES = [
    "POINT(1 2)",
    "POINT EMPTY",
    "LINESTRING Z (0 0 5, 10 10 10)",
    "POLYGON((0 0, 10 0, 10 10, 0 0), (1 1, 2 1, 2 2, 1 1))",
    "MULTIPOINT(1 1, 2 2)",
    "GEOMETRYCOLLECTION(POINT(3 4), GEOMETRYCOLLECTION(LINESTRING(-7 0, 1 1)))",
    "POINT ZM (1 2 3 4)",
    "POINT M (5 6 -7)",
    "MULTIPOLYGON Z (((0 0 1, 1 0 1, 1 1 1, 0 0 1)))",
    "LINESTRING EMPTY",
    "GEOMETRYCOLLECTION EMPTY",
    "MULTILINESTRING((0 0, 1e10 -1e-3))",
]
DDL = (
    "CREATE TABLE lake.main.{name} (id BIGINT, g GEOMETRY, l GEOMETRY[], s STRUCT(a GEOMETRY, n INTEGER), "
    "m MAP(VARCHAR, GEOMETRY), ls STRUCT(a GEOMETRY)[])"
)
DUCK_WKB = (
    "SELECT id, ST_AsWKB(g), CASE WHEN l IS NULL THEN NULL ELSE [ST_AsWKB(x) FOR x IN l] END, "
    "CASE WHEN s IS NULL THEN NULL ELSE {'a': ST_AsWKB(s.a), 'n': s.n} END, "
    "CASE WHEN m IS NULL THEN NULL ELSE map_from_entries([{'key': e.key, 'value': ST_AsWKB(e.value)} "
    "FOR e IN map_entries(m)]) END, "
    "CASE WHEN ls IS NULL THEN NULL ELSE [CASE WHEN x IS NULL THEN NULL ELSE {'a': ST_AsWKB(x.a)} END FOR x IN ls] END"
)


def wkb(con: duckdb.DuckDBPyConnection, shape: str) -> bytes:
    return bytes(con.execute(f"SELECT ST_AsWKB('{shape}'::GEOMETRY)").fetchone()[0])


def big_endian(value: bytes) -> bytes:
    """A little-endian POINT / LINESTRING value's big-endian twin (enough for the shapes used here)."""
    kind = struct.unpack_from("<I", value, 1)[0]
    if kind % 1000 == 1:
        doubles = (len(value) - 5) // 8
        return (
            b"\x00"
            + struct.pack(">I", kind)
            + struct.pack(f">{doubles}d", *struct.unpack_from(f"<{doubles}d", value, 5))
        )
    raise AssertionError(kind)


def geometry_data(con: duckdb.DuckDBPyConnection, first: int, n: int) -> pa.Table:
    shapes = [wkb(con, s) for s in SHAPES]
    k = len(shapes)
    gt = geometry_type()

    def geo(values: list[bytes | None]) -> pa.Array:
        return pa.ExtensionArray.from_storage(gt, pa.array(values, pa.binary()))

    ids = list(range(first, first + n))
    g = [None if i % 7 == 6 else shapes[i % k] for i in ids]
    # plain binary WKB in a list, big-endian and EWKB among them: stored (and read back) as DuckDB's ISO form
    lists = [
        None if i % 5 == 4 else [] if i % 5 == 3 else [big_endian(shapes[0]) if i % 2 else shapes[(i + 1) % k], None]
        for i in ids
    ]
    structs = [None if i % 3 == 2 else {"a": shapes[(i + 2) % k] if i % 4 else None, "n": i} for i in ids]
    maps = [[("k", shapes[(i + 3) % k])] for i in ids]
    list_structs = [[{"a": shapes[(i + 4) % k]}, None, {"a": None}] if i % 2 else None for i in ids]
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "g": geo(g),
            "l": pa.array(lists, pa.list_(pa.binary())),
            "s": pa.StructArray.from_arrays(
                [
                    geo([None if s is None else s["a"] for s in structs]),
                    pa.array([None if s is None else s["n"] for s in structs], pa.int32()),
                ],
                names=["a", "n"],
                mask=pa.array([s is None for s in structs]),
            ),
            "m": pa.array(maps, pa.map_(pa.string(), pa.binary())),
            "ls": pa.array(list_structs, pa.list_(pa.struct([("a", pa.binary())]))),
        }
    )


TABLE_SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64()),
        pa.field("g", geometry_type()),
        pa.field("l", pa.list_(geometry_type())),
        pa.field("s", pa.struct([("a", geometry_type()), ("n", pa.int32())])),
        pa.field("m", pa.map_(pa.string(), geometry_type())),
        pa.field("ls", pa.list_(pa.struct([("a", geometry_type())]))),
    ]
)


def catalog_rows(url: str, sql: str) -> list[tuple[Any, ...]]:
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            return [tuple(r) for r in conn.execute(text(sql)).all()]
    finally:
        engine.dispose()


def file_stats(url: str, table: str) -> list[tuple[Any, ...]]:
    """Each file's column statistics, by column id and file order, without sizes (compressions differ)."""
    return catalog_rows(
        url,
        "SELECT s.column_id, s.value_count, s.null_count, s.min_value, s.max_value, s.contains_nan, s.extra_stats "
        "FROM ducklake_file_column_stats s JOIN ducklake_table t ON t.table_id = s.table_id "
        f"WHERE t.table_name = '{table}' AND t.end_snapshot IS NULL ORDER BY s.data_file_id, s.column_id",
    )


BOUNDS = ("xmin", "xmax", "ymin", "ymax", "zmin", "zmax", "mmin", "mmax")
LIST_STRUCT_LEAF = 13  # ls.element.a


def _counts_outside_list_structs(stats: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    return [(r[0], None, None, *r[3:]) if r[0] == LIST_STRUCT_LEAF else r for r in stats]


def table_stats(url: str, table: str) -> list[tuple[Any, ...]]:
    return catalog_rows(
        url,
        "SELECT s.column_id, s.contains_null, s.contains_nan, s.min_value, s.max_value, s.extra_stats "
        "FROM ducklake_table_column_stats s JOIN ducklake_table t ON t.table_id = s.table_id "
        f"WHERE t.table_name = '{table}' AND t.end_snapshot IS NULL ORDER BY s.column_id",
    )


def test_we_write_geometry_duckdb_reads_it_back_with_its_stats_and_never_inlined(
    catalog: Any, duckdb_lake: Any
) -> None:
    con = duckdb_lake(catalog, inlining_row_limit=10)
    con.execute(DDL.format(name="d"))  # DuckDB's twin, for its statistics rows
    lake = pdl.connect(catalog.url, catalog.data_path, data_inlining_row_limit=10)
    first = geometry_data(con, 0, 3)
    second = geometry_data(con, 3, 40)
    lake.create_table("main.g", TABLE_SCHEMA)
    assert catalog_rows(
        catalog.url,
        "SELECT c.column_name, c.column_type FROM ducklake_column c JOIN ducklake_table t ON t.table_id = c.table_id "
        "WHERE t.table_name = 'g' AND c.column_type = 'geometry' ORDER BY c.column_id",
    ) == [("g", "geometry"), ("element", "geometry"), ("a", "geometry"), ("value", "geometry"), ("a", "geometry")]
    lake.append("main.g", first)  # within the inlining limit: still a Parquet file, as DuckDB does
    lake.append("main.g", second)
    # no inlined-data table for either table, as DuckDB
    assert catalog_rows(catalog.url, "SELECT count(*) FROM ducklake_inlined_data_tables") == [(0,)]
    for part in (first, second):
        con.register("part", part)
        con.execute(
            "INSERT INTO lake.main.d SELECT id, g, [ST_GeomFromWKB(x) FOR x IN l], "
            "CASE WHEN s IS NULL THEN NULL ELSE {'a': s.a, 'n': s.n} END, "
            "map_from_entries([{'key': e.key, 'value': ST_GeomFromWKB(e.value)} FOR e IN map_entries(m)]), "
            "CASE WHEN ls IS NULL THEN NULL ELSE [CASE WHEN x IS NULL THEN NULL ELSE {'a': ST_GeomFromWKB(x.a)} END "
            "FOR x IN ls] END FROM part"
        )
        con.unregister("part")
    con.execute("SET VARIABLE x = 1")  # a fresh statement: DuckDB sees our snapshots
    theirs = rows(con.execute(f"{DUCK_WKB} FROM lake.main.d").to_arrow_table())
    ours_in_duckdb = rows(con.execute(f"{DUCK_WKB} FROM lake.main.g").to_arrow_table())
    assert ours_in_duckdb == theirs
    assert rows(lake.scan("main.g")) == theirs
    texts = dict(con.execute("SELECT id, ST_AsText(g) FROM lake.main.g WHERE id < 12").fetchall())
    assert texts[0] == "POINT (1 2)" and texts[1] == "POINT EMPTY" and texts[6] is None
    # the statistics rows DuckDB writes for the same data, file by file and for the table
    # DuckDB's own Parquet writer counts every slot of a struct field inside a list as NULL (INTEGER fields too:
    # ls.list.element.a has null_count 5 of 5 with one value); we count from the file, so those counts differ
    assert _counts_outside_list_structs(file_stats(catalog.url, "g")) == _counts_outside_list_structs(
        file_stats(catalog.url, "d")
    )
    # ... and its table row for that field keeps only the first file's types and box; ours is the union of the files
    ours, duck = table_stats(catalog.url, "g"), table_stats(catalog.url, "d")
    assert [r for r in ours if r[0] != LIST_STRUCT_LEAF] == [r for r in duck if r[0] != LIST_STRUCT_LEAF]
    ls_files = [json.loads(r[6]) for r in file_stats(catalog.url, "g") if r[0] == LIST_STRUCT_LEAF]
    ls_table = json.loads(next(r[5] for r in ours if r[0] == LIST_STRUCT_LEAF))
    assert ls_table["types"] == sorted({t for f in ls_files for t in f["types"]})
    assert ls_table["bbox"]["xmax"] == max(f["bbox"]["xmax"] for f in ls_files)
    extra = json.loads(table_stats(catalog.url, "g")[1][5])
    assert extra["bbox"]["xmin"] == -7 and extra["bbox"]["xmax"] == 1e10 and "point_zm" in extra["types"]
    # the file: Parquet's Geometry logical type (no CRS) and GeospatialStatistics, no Arrow schema blob
    files = sorted(Path(catalog.data_path).rglob("*.parquet"))
    assert files
    for f in files:
        meta = pq.ParquetFile(f).metadata
        assert "optional binary field_id=2 g (Geometry(crs=));" in str(meta.schema)
        assert meta.metadata is None or b"ARROW:schema" not in meta.metadata
        assert meta.row_group(0).column(1).geo_statistics is not None


def test_geometry_delete_compaction_and_change_feed(sqlite_catalog: Any, duckdb_lake: Any) -> None:
    con = duckdb_lake(sqlite_catalog)
    lake = pdl.connect(sqlite_catalog.url, sqlite_catalog.data_path)
    data = geometry_data(con, 0, 20)
    lake.create_table("main.g", pa.schema([pa.field("id", pa.int64()), pa.field("g", geometry_type())]))
    for i in range(0, 20, 5):
        lake.append("main.g", data.select(["id", "g"]).slice(i, 5))
    lake.delete("main.g", pa.compute.field("id") == 3)
    stats_before = table_stats(sqlite_catalog.url, "g")
    lake.merge_adjacent_files()
    live = "SELECT count(*) FROM ducklake_data_file WHERE end_snapshot IS NULL"
    assert catalog_rows(sqlite_catalog.url, live)[0][0] < 4  # merged (a file with deletes may stay apart)
    assert table_stats(sqlite_catalog.url, "g") == stats_before
    merged = file_stats(sqlite_catalog.url, "g")
    geo_rows = [r for r in merged if r[0] == 2]
    assert len(geo_rows) < 4 and all(json.loads(r[6])["types"] for r in geo_rows)
    con.execute("SET VARIABLE x = 1")
    want = sorted(
        (r["id"], r["g"])
        for r in data.select(["id", "g"]).cast(pa.schema([("id", pa.int64()), ("g", pa.binary())])).to_pylist()
        if r["id"] != 3
    )
    got = sorted(
        (i, None if b is None else bytes(b))
        for i, b in con.execute("SELECT id, ST_AsWKB(g) FROM lake.main.g").fetchall()
    )
    assert got == want
    assert sorted((r[0], r[1]) for r in rows(lake.scan("main.g"))) == want
    last = lake.current_snapshot_id()
    feed = lake.table_changes("main.g", 0, last).select(["id", "g", "_change_type"])
    theirs = con.execute(
        f"SELECT id, ST_AsWKB(g), change_type FROM ducklake_table_changes('lake', 'main', 'g', 0, {last})"
    ).fetchall()
    mine = sorted(
        (r["id"], r["g"], r["_change_type"])
        for r in feed.cast(
            pa.schema([("id", pa.int64()), ("g", pa.binary()), ("_change_type", pa.string())])
        ).to_pylist()
    )
    assert mine == sorted((i, None if b is None else bytes(b), c) for i, b, c in theirs)


def test_bad_geometry_writes_are_refused_with_nothing_written(sqlite_catalog: Any, duckdb_lake: Any) -> None:
    con = duckdb_lake(sqlite_catalog)
    lake = pdl.connect(sqlite_catalog.url, sqlite_catalog.data_path)
    schema = pa.schema(
        [
            pa.field("id", pa.int64()),
            pa.field("g", geometry_type()),
            pa.field("l", pa.list_(pa.struct([("a", geometry_type())]))),
        ]
    )
    lake.create_table("main.g", schema)
    good = wkb(con, "POINT(1 2)")

    def table(g: list[Any], nested: Any = None, gtype: pa.DataType | None = None) -> pa.Table:
        return pa.table(
            {
                "id": pa.array(range(len(g)), pa.int64()),
                "g": pa.array(g, gtype or pa.binary()),
                "l": pa.array(nested or [None] * len(g), pa.list_(pa.struct([("a", pa.binary())]))),
            }
        )

    bad_values = [
        good[:-3],  # truncated
        good + b"\x00",  # trailing bytes
        b"\x02" + good[1:],  # byte order 2
        b"\x01" + struct.pack("<I", 8) + good[5:],  # CIRCULARSTRING: DuckDB refuses it too
        b"\x01" + struct.pack("<II", 4, 1) + b"\x01" + struct.pack("<II", 2, 0),  # a MULTIPOINT of a line
        b"\x01" + struct.pack("<II", 1004, 1) + good,  # a 2D point in a MULTIPOINT Z
        b"\x01" + struct.pack("<II", 2, 0xFFFFFFFF),  # a count beyond the bytes
        b"",
    ]
    for bad in bad_values:
        with expect_bad_input("geometry-malformed", lake) as err:
            lake.append("main.g", table([good, bad]))
        assert isinstance(err.value, InvalidGeometryError) and "value 1" in str(err.value) and "'g'" in str(err.value)
    with expect_bad_input("geometry-malformed", lake):
        lake.append("main.g", table([good], [[{"a": good}, {"a": good[:7]}]]))
    srid = b"\x01" + struct.pack("<Ii", 0x20000001, 4326) + good[5:]
    with expect_bad_input("geometry-srid", lake):
        lake.append("main.g", table([srid]))
    crs_type = _CrsWkb()
    with expect_bad_input("geometry-srid", lake):
        lake.append(
            "main.g",
            pa.table(
                {"id": pa.array([1], pa.int64()), "g": pa.ExtensionArray.from_storage(crs_type, pa.array([good]))}
            ),
        )
    # PySpark's Arrow form of a geometry: struct<srid, wkb>, the wkb field tagged; SRIDs other than 0 are refused
    wkb_field = pa.field("wkb", pa.binary(), False, {"geometry": "true", "srid": "4326"})
    spark_form = pa.struct([pa.field("srid", pa.int32(), False), wkb_field])
    with expect_bad_input("geometry-srid", lake):
        lake.create_table("main.s", pa.schema([pa.field("g", spark_form)]))
    values = pa.array([{"srid": 0, "wkb": good}, {"srid": 4326, "wkb": good}], spark_form)
    with expect_bad_input("geometry-srid", lake):
        lake.append("main.g", pa.table({"id": pa.array([1, 2], pa.int64()), "g": values}))
    with expect_bad_input("geometry-not-wkb", lake):
        lake.append("main.g", table(["POINT(1 2)"], gtype=pa.string()))
    # EWKB with SRID 0 and Z/M flags is DuckDB's ISO form once stored
    ewkb = b"\x01" + struct.pack("<Ii", 0x20000000 | 0x80000001, 0) + struct.pack("<3d", 1, 2, 3)
    lake.append("main.g", table([ewkb, None]))
    con.execute("SET VARIABLE x = 1")
    assert con.execute("SELECT ST_AsText(g), ST_AsWKB(g) FROM lake.main.g WHERE id = 0").fetchall() == [
        ("POINT Z (1 2 3)", wkb(con, "POINT Z (1 2 3)"))
    ]


class _CrsWkb(pa.ExtensionType):
    """Another library's ``geoarrow.wkb`` with a CRS (geoarrow-pyarrow's shape), not registered."""

    def __init__(self) -> None:
        super().__init__(pa.binary(), "geoarrow.wkb")

    def __arrow_ext_serialize__(self) -> bytes:
        return b'{"crs": "OGC:CRS84"}'

    @classmethod
    def __arrow_ext_deserialize__(cls, storage_type: pa.DataType, serialized: bytes) -> _CrsWkb:
        return cls()


def test_geometry_added_to_a_table_with_inlined_rows_then_flushed(catalog: Any, duckdb_lake: Any) -> None:
    con = duckdb_lake(catalog, inlining_row_limit=10)
    con.execute("CREATE TABLE lake.main.h (id BIGINT)")
    con.execute("INSERT INTO lake.main.h VALUES (1), (2)")  # inlined
    inlined_before = catalog_rows(catalog.url, "SELECT table_name FROM ducklake_inlined_data_tables")
    lake = pdl.connect(catalog.url, catalog.data_path)
    lake.add_column("main.h", "g", geometry_type())
    point = wkb(con, "POINT(3 4)")
    lake.append("main.h", pa.table({"id": pa.array([3], pa.int64()), "g": pa.array([point])}))
    # the new row went to Parquet and no inlined-data table was made for the new schema, as DuckDB does
    assert catalog_rows(catalog.url, "SELECT table_name FROM ducklake_inlined_data_tables") == inlined_before
    assert catalog_rows(catalog.url, "SELECT count(*) FROM ducklake_data_file")[0][0] == 1
    lake.flush_inlined_data("main.h")
    con.execute("SET VARIABLE x = 1")
    got = con.execute("SELECT id, ST_AsWKB(g) FROM lake.main.h ORDER BY id").fetchall()
    assert [(i, None if b is None else bytes(b)) for i, b in got] == [(1, None), (2, None), (3, point)]
    ours = lake.scan("main.h").cast(pa.schema([("id", pa.int64()), ("g", pa.binary())])).to_pylist()
    assert sorted((r["id"], r["g"]) for r in ours) == [(1, None), (2, None), (3, point)]
    # the flushed file holds the rows of the schema before g (g reads NULL); our Parquet file has g's statistics
    geo = [json.loads(r[6]) for r in file_stats(catalog.url, "h") if r[0] == 2]
    assert geo == [{"bbox": {**dict.fromkeys(BOUNDS), "xmin": 3, "xmax": 3, "ymin": 4, "ymax": 4}, "types": ["point"]}]


def test_spark_writes_geometry_on_both_catalogs(spark: Any, catalog: Any, duckdb_lake: Any) -> None:
    """Spark's GeometryType(0), top level and in a list of structs, through the sink (two batches) and the data
    source into one table, merged by the Spark compaction job: DuckDB reads DuckDB's ISO WKB of every value (Spark
    keeps a big-endian value's bytes; we store DuckDB's form), with the union of the files' types in the table row."""
    pdl.register(spark)
    con = duckdb_lake(catalog)
    shapes = [wkb(con, s) for s in SHAPES]
    values = [*shapes, big_endian(shapes[0]), None]
    frame = spark.createDataFrame([(i, v) for i, v in enumerate(values)], "id BIGINT, w BINARY").selectExpr(
        "id",
        "st_geomfromwkb(w) AS g",
        "CASE WHEN id % 2 = 0 THEN array(named_struct('a', st_geomfromwkb(w)), NULL) END AS ls",
    )
    url = catalog.url
    sink = pdl.ducklake_sink("main.sg", catalog=url, app_id="geometry-spark")
    sink(frame.where("id < 5"), 0)
    sink(frame.where("id >= 5 AND id < 10"), 1)
    frame.where("id >= 10").write.format("ducklake").option("catalog", url).mode("append").save("main.sg")
    from pyspark_ducklake.batch.compaction_job import merge_adjacent_files

    merge_adjacent_files(spark, "main.sg", catalog=url)
    assert catalog_rows(url, "SELECT count(*) FROM ducklake_inlined_data_tables") == [(0,)]
    con.execute("SET VARIABLE x = 1")
    normal = [None if v is None else shapes[0] if v == big_endian(shapes[0]) else v for v in values]
    got = con.execute(
        "SELECT id, ST_AsWKB(g), CASE WHEN ls IS NULL THEN NULL ELSE "
        "[CASE WHEN x IS NULL THEN NULL ELSE ST_AsWKB(x.a) END FOR x IN ls] END FROM lake.main.sg ORDER BY id"
    ).fetchall()
    assert [
        (i, None if g is None else bytes(g), None if ls is None else [None if b is None else bytes(b) for b in ls])
        for i, g, ls in got
    ] == [(i, v, [v, None] if i % 2 == 0 else None) for i, v in enumerate(normal)]
    table_geo = json.loads(next(r[5] for r in table_stats(url, "sg") if r[0] == 2))
    file_types = [json.loads(r[6])["types"] for r in file_stats(url, "sg") if r[0] == 2]
    assert table_geo["types"] == sorted({t for types in file_types for t in types})
    assert set(table_geo["types"]) >= {"point", "point_zm", "geometrycollection", "multipolygon_z"}


def test_add_files_with_geometry_as_duckdb_adds_them(catalog: Any, duckdb_lake: Any, tmp_path: Path) -> None:
    """A Parquet file with a Geometry column (pyarrow's) added by us and by DuckDB's ducklake_add_data_files: the same
    extra_stats (DuckDB leaves the counts NULL, pyarrow wrote no Statistics; we count from the values), and DuckDB
    reads ours; a file holding malformed WKB is refused with nothing added."""
    con = duckdb_lake(catalog)
    shapes = [wkb(con, s) for s in SHAPES]
    gt = geometry_type()
    good = tmp_path / "good.parquet"
    values = [*shapes, None]
    pq.write_table(
        pa.table(
            {
                "id": pa.array(range(len(values)), pa.int64()),
                "g": pa.ExtensionArray.from_storage(gt, pa.array(values, pa.binary())),
            }
        ),
        good,
        store_schema=False,
    )
    for name in ("ours", "theirs"):
        con.execute(f"CREATE TABLE lake.main.{name} (id BIGINT, g GEOMETRY)")
    con.execute(f"CALL ducklake_add_data_files('lake', 'theirs', '{good}')")
    lake = pdl.connect(catalog.url, catalog.data_path)
    lake.add_files("main.ours", [str(good)])
    ours, theirs = file_stats(catalog.url, "ours"), file_stats(catalog.url, "theirs")
    assert [(r[0], r[6]) for r in ours] == [(r[0], r[6]) for r in theirs]
    assert next(r for r in ours if r[0] == 2)[1:3] == (len(shapes), 1)
    con.execute("SET VARIABLE x = 1")
    got = con.execute("SELECT id, ST_AsWKB(g) FROM lake.main.ours ORDER BY id").fetchall()
    assert [(i, None if b is None else bytes(b)) for i, b in got] == list(enumerate(values))
    bad = tmp_path / "bad.parquet"
    pq.write_table(
        pa.table(
            {
                "id": pa.array([1, 2], pa.int64()),
                "g": pa.ExtensionArray.from_storage(gt, pa.array([shapes[0], shapes[0][:9]])),
            }
        ),
        bad,
        store_schema=False,
    )
    with expect_bad_input("geometry-malformed", lake):
        lake.add_files("main.ours", [str(bad)])


def test_added_big_endian_and_extended_wkb_read_as_duckdb_reads_them(
    catalog: Any, duckdb_lake: Any, tmp_path: Path
) -> None:
    """Another writer's file may hold big-endian WKB: DuckDB reads it as little-endian ISO WKB, and so do we (scan and
    change feed), top-level and in a list."""
    con = duckdb_lake(catalog)
    shapes = [wkb(con, s) for s in SHAPES]
    gt = geometry_type()
    values = [big_endian(shapes[0]), shapes[1], None]
    path = tmp_path / "be.parquet"
    pq.write_table(
        pa.table(
            {
                "id": pa.array(range(len(values)), pa.int64()),
                "g": pa.ExtensionArray.from_storage(gt, pa.array(values, pa.binary())),
                "l": pa.ListArray.from_arrays(
                    pa.array(range(len(values) + 1), pa.int32()),
                    pa.ExtensionArray.from_storage(gt, pa.array(values, pa.binary())),
                ),
            }
        ),
        path,
        store_schema=False,
    )
    con.execute("CREATE TABLE lake.main.be (id BIGINT, g GEOMETRY, l GEOMETRY[])")
    con.execute(f"CALL ducklake_add_data_files('lake', 'be', '{path}')")
    duck = con.execute("SELECT id, ST_AsWKB(g), [ST_AsWKB(x) FOR x IN l] FROM lake.main.be ORDER BY id").fetchall()
    want = [(i, None if g is None else bytes(g), [None if x is None else bytes(x) for x in xs]) for i, g, xs in duck]
    assert want[0][1] == shapes[0] != values[0]  # DuckDB turned the big-endian value into its ISO form
    lake = pdl.connect(catalog.url, catalog.data_path)
    got = lake.scan("main.be").sort_by("id")
    assert [(r["id"], r["g"], r["l"]) for r in got.to_pylist()] == want
    feed = lake.table_changes("main.be", 0, lake.current_snapshot_id()).sort_by("id")
    assert [(r["id"], r["g"], r["l"]) for r in feed.to_pylist()] == want
