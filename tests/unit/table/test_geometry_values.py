"""table/geometry_values.py: every accepted Arrow form at every GEOMETRY position (lists, structs, maps, sliced
arrays) becomes geoarrow.wkb of DuckDB's ISO WKB, other positions untouched."""

from __future__ import annotations

import struct

import pyarrow as pa
import pytest

from pyspark_ducklake.catalog.geometry import geometry_type
from pyspark_ducklake.catalog.types import columns_from_arrow
from pyspark_ducklake.exceptions import InvalidGeometryError, UnsupportedTypeError
from pyspark_ducklake.table.geometry_values import geometry_values

LE = b"\x01" + struct.pack("<I2d", 1, 1.0, 2.0)
BE = b"\x00" + struct.pack(">I2d", 1, 1.0, 2.0)
LE2 = b"\x01" + struct.pack("<I2d", 1, 3.0, 4.0)
BE2 = b"\x00" + struct.pack(">I2d", 1, 3.0, 4.0)


def plain(arr: pa.Array) -> list:
    def strip(t: pa.DataType) -> pa.DataType:
        if isinstance(t, pa.BaseExtensionType):
            return t.storage_type
        if pa.types.is_list(t):
            return pa.list_(strip(t.value_type))
        if pa.types.is_struct(t):
            return pa.struct([pa.field(f.name, strip(f.type)) for f in t])
        if pa.types.is_map(t):
            return pa.map_(t.key_type, strip(t.item_type))
        return t

    return arr.cast(strip(arr.type)).to_pylist()


def test_nested_and_sliced_values_are_normalised() -> None:
    gt = geometry_type()
    schema = pa.schema(
        [
            pa.field("ls", pa.list_(pa.struct([("a", gt), ("n", pa.int32())]))),
            pa.field("m", pa.map_(pa.string(), gt)),
        ]
    )
    ls_col, m_col = columns_from_arrow(schema)
    ls = pa.array(
        [[{"a": BE, "n": 0}], None, [{"a": LE2, "n": 1}, None, {"a": None, "n": 2}], [{"a": BE2, "n": 3}]],
        pa.list_(pa.struct([("a", pa.binary()), ("n", pa.int32())])),
    )
    out = geometry_values(ls.slice(1, 3), ls_col, "ls")
    assert out.type == schema.field("ls").type
    assert plain(out) == [None, [{"a": LE2, "n": 1}, None, {"a": None, "n": 2}], [{"a": LE2, "n": 3}]]
    m = pa.array([[("x", BE)], [("y", BE2), ("z", None)], None], pa.map_(pa.string(), pa.binary()))
    out = geometry_values(pa.chunked_array([m.slice(1)]), m_col, "m")
    assert out.type == schema.field("m").type
    assert plain(out) == [[("y", LE2), ("z", None)], None]


def test_spark_form_and_refusals() -> None:
    (g,) = columns_from_arrow(pa.schema([pa.field("g", geometry_type())]))
    spark_form = pa.struct([pa.field("srid", pa.int32(), False), pa.field("wkb", pa.binary(), False)])
    values = pa.array([{"srid": 0, "wkb": BE}, None, {"srid": 0, "wkb": LE2}], spark_form)
    assert plain(geometry_values(values, g, "g")) == [LE, None, LE2]
    with pytest.raises(UnsupportedTypeError, match="SRID 4326"):
        geometry_values(pa.array([{"srid": 4326, "wkb": LE}], spark_form), g, "g")
    with pytest.raises(InvalidGeometryError, match="g, value 1"):
        geometry_values(pa.array([LE, LE[:5]]), g, "g")
    # a type that is no geometry form passes through for the caller's type check to refuse
    strings = pa.array(["POINT(1 2)"])
    assert geometry_values(strings, g, "g") is strings
