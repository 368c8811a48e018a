"""The WKB walker (io/wkb.py) against DuckDB's own WKB: every shape DuckDB writes is kept byte for byte with the
type name and bounding box DuckDB's Parquet writer records; other encodings become DuckDB's ISO form; what DuckDB
refuses is refused here, naming the byte."""

from __future__ import annotations

import math
import struct

import pyarrow as pa
import pytest

from pyspark_ducklake.catalog.geometry import geo_stats_text, parse_geo_stats
from pyspark_ducklake.exceptions import InvalidGeometryError, UnsupportedTypeError
from pyspark_ducklake.io.wkb import GeoSummary, normalize, normalize_array
from tests.support.duck import connect_duckdb

INF = math.inf
CASES = {
    "POINT(1 2)": ("point", (1, 1, 2, 2, INF, -INF, INF, -INF)),
    "POINT EMPTY": ("point", (INF, -INF) * 4),
    "POINT Z EMPTY": ("point_z", (INF, -INF) * 4),
    "LINESTRING Z (0 0 5, 10 10 10)": ("linestring_z", (0, 10, 0, 10, 5, 10, INF, -INF)),
    "POINT M (1 2 4)": ("point_m", (1, 1, 2, 2, INF, -INF, 4, 4)),
    "POINT ZM (1 2 3 4)": ("point_zm", (1, 1, 2, 2, 3, 3, 4, 4)),
    "MULTIPOINT(EMPTY, 1 2)": ("multipoint", (1, 1, 2, 2, INF, -INF, INF, -INF)),
    "POLYGON((0 0, 10 0, 10 10, 0 0), (1 1, 2 1, 2 2, 1 1))": ("polygon", (0, 10, 0, 10, INF, -INF, INF, -INF)),
    "POLYGON EMPTY": ("polygon", (INF, -INF) * 4),
    "GEOMETRYCOLLECTION Z (POINT Z (1 2 3), GEOMETRYCOLLECTION Z (LINESTRING Z (-4 0 0, 1 1 9)))": (
        "geometrycollection_z",
        (-4, 1, 0, 2, 0, 9, INF, -INF),
    ),
    "MULTIPOLYGON M (((0 0 1, 1 0 2, 1 1 3, 0 0 1)))": ("multipolygon_m", (0, 1, 0, 1, INF, -INF, 1, 3)),
    "MULTILINESTRING((0 0, 1e300 -1e-300))": ("multilinestring", (0, 1e300, -1e-300, 0, INF, -INF, INF, -INF)),
}


@pytest.fixture(scope="module")
def duck_wkb() -> dict[str, bytes]:
    con = connect_duckdb()
    try:
        return {w: bytes(con.execute(f"SELECT ST_AsWKB('{w}'::GEOMETRY)").fetchone()[0]) for w in CASES}
    finally:
        con.close()


def test_duckdb_wkb_is_kept_with_its_type_and_box(duck_wkb: dict[str, bytes]) -> None:
    for wkt, (name, box) in CASES.items():
        value, got_name, got_box = normalize(duck_wkb[wkt])
        assert value == duck_wkb[wkt], wkt
        assert (got_name, tuple(got_box)) == (name, box), wkt


def test_big_endian_and_ewkb_become_duckdbs_iso_form(duck_wkb: dict[str, bytes]) -> None:
    le = duck_wkb["POINT(1 2)"]
    be = b"\x00" + struct.pack(">I2d", 1, 1.0, 2.0)
    assert normalize(be)[0] == le
    ewkb_z = b"\x01" + struct.pack("<I3d", 0x80000001, 1.0, 2.0, 3.0)
    ewkb_srid0 = b"\x00" + struct.pack(">Ii3d", 0x20000000 | 0x80000001, 0, 1.0, 2.0, 3.0)
    iso_z = b"\x01" + struct.pack("<I3d", 1001, 1.0, 2.0, 3.0)
    assert normalize(ewkb_z)[0] == normalize(ewkb_srid0)[0] == iso_z
    # a big-endian collection of a little-endian part
    mixed = b"\x00" + struct.pack(">II", 4, 1) + le
    assert normalize(mixed)[0] == b"\x01" + struct.pack("<II", 4, 1) + le


def test_malformed_wkb_is_refused_naming_the_byte(duck_wkb: dict[str, bytes]) -> None:
    good = duck_wkb["POINT(1 2)"]
    bad = {
        good[:-1]: "ends early",
        good + b"\x00": "1 bytes follow",
        b"\x07" + good[1:]: "byte order 7",
        b"\x01" + struct.pack("<I", 17) + good[5:]: "geometry type 17",
        b"\x01" + struct.pack("<I", 4001) + good[5:]: "geometry type 4001",
        b"\x01" + struct.pack("<II", 5, 1) + good: "a linestring part was expected, not a point",
        b"\x01" + struct.pack("<II", 1007, 1) + good: "Z/M dimensions differ",
        b"\x01" + struct.pack("<II", 2, 1 << 30): "a count of",
        b"": "ends early",
    }
    for value, why in bad.items():
        with pytest.raises(InvalidGeometryError, match=why):
            normalize(value)
    with pytest.raises(UnsupportedTypeError, match="SRID 4326"):
        normalize(b"\x01" + struct.pack("<Ii2d", 0x20000001, 4326, 1.0, 2.0))
    with pytest.raises(InvalidGeometryError, match="column x, value 2"):
        normalize_array(pa.array([good, None, good[:3]]), "column x")


def test_array_summary_and_extra_stats_text(duck_wkb: dict[str, bytes]) -> None:
    values = pa.array(
        [duck_wkb["POINT EMPTY"], None, duck_wkb["POINT M (1 2 4)"], duck_wkb["LINESTRING Z (0 0 5, 10 10 10)"]]
    )
    out, summary = normalize_array(values, "g")
    assert out.to_pylist() == values.to_pylist()
    text = geo_stats_text(summary)
    assert text == (
        '{"bbox": {"xmin": 0.000000, "xmax": 10.000000, "ymin": 0.000000, "ymax": 10.000000, "zmin": 5.000000, '
        '"zmax": 10.000000, "mmin": 4.000000, "mmax": 4.000000}, "types": ["linestring_z", "point", "point_m"]}'
    )
    assert parse_geo_stats(text) == summary
    empty = normalize_array(pa.array([None], pa.binary()), "g")[1]
    assert geo_stats_text(empty) == (
        '{"bbox": {"xmin": null, "xmax": null, "ymin": null, "ymax": null, "zmin": null, "zmax": null, '
        '"mmin": null, "mmax": null}, "types": []}'
    )
    assert empty.merge(summary) == summary == summary.merge(GeoSummary())
    assert parse_geo_stats("not json") is None and parse_geo_stats(None) is None


def test_array_summary_equals_the_fold_of_its_values(duck_wkb: dict[str, bytes]) -> None:
    """Little-endian points are summarised for the whole array at once; the result is the per-value fold, for
    sliced arrays, NaN ordinates, big-endian points (walked one by one) and every other shape too."""
    nan_point = b"\x01" + struct.pack("<I3d", 1001, math.nan, 5.0, -2.0)
    be_point = b"\x00" + struct.pack(">I2d", 1, -9.0, 9.0)
    zm_points = [b"\x01" + struct.pack("<I4d", 3001, i, -i, i * 2, i * 3) for i in range(5)]
    m_point = b"\x01" + struct.pack("<I3d", 2001, 0.5, 0.25, -8.0)
    values = [*duck_wkb.values(), nan_point, be_point, *zm_points, m_point, None] * 3
    arr = pa.array(values, pa.binary())
    for part in (arr, arr.slice(7, 30), arr.slice(len(values) - 9)):
        out, summary = normalize_array(part, "g")
        want = GeoSummary()
        expected_out = []
        for v in part.to_pylist():
            if v is None:
                expected_out.append(None)
                continue
            value, name, box = normalize(v)
            expected_out.append(value)
            want = want.merge(GeoSummary(frozenset({name}), tuple(box)))
        assert summary == want
        assert out.to_pylist() == expected_out
