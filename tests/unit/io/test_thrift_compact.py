"""The compact-protocol reader/writer round-trips real Parquet footers byte for byte; the INTERVAL footer edit."""

from __future__ import annotations

import datetime as dt
import decimal
import struct
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pyspark_ducklake.exceptions import UnsupportedTypeError
from pyspark_ducklake.io import thrift_compact as tc
from pyspark_ducklake.io.parquet import interval_to_parquet, mark_interval_columns, write_table


def _v(s: tc.Struct, field_id: int) -> Any:
    f = s.get(field_id)
    assert f is not None, f"no field {field_id}"
    return f.value


def _footer(data: bytes) -> bytes:
    n = struct.unpack("<I", data[-8:-4])[0]
    return data[-8 - n : -8]


def _parquet_bytes(table: pa.Table, **kwargs: object) -> bytes:
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, **kwargs)
    return sink.getvalue().to_pybytes()


def _tables() -> list[tuple[pa.Table, dict[str, object]]]:
    n = 50
    flat = pa.table(
        {
            "i": pa.array(range(n), pa.int64()),
            "f": pa.array([x / 3 for x in range(n)], pa.float64()),
            "s": pa.array([None if x % 7 == 0 else f"v{x}" for x in range(n)]),
            "b": pa.array([x % 2 == 0 for x in range(n)]),
            "d": pa.array([decimal.Decimal(x) / 100 for x in range(n)], pa.decimal128(12, 2)),
            "t": pa.array([dt.datetime(2024, 1, 1) + dt.timedelta(seconds=x) for x in range(n)], pa.timestamp("us")),
            "bin": pa.array([bytes([x, 255 - x]) for x in range(n)], pa.binary()),
            "fx": pa.array([bytes(12)] * n, pa.binary(12)),
        }
    )
    nested = pa.table(
        {
            "l": pa.array([[x, None, x + 1] for x in range(n)], pa.list_(pa.int32())),
            "st": pa.array([{"a": x, "b": str(x)} for x in range(n)]),
            "m": pa.array([[("k", x)] for x in range(n)], pa.map_(pa.string(), pa.int64())),
        }
    )
    wide = pa.table({f"c{k}": pa.array(range(n), pa.int16()) for k in range(40)})  # > 15 list entries, ids
    with_ids = flat.cast(
        pa.schema(
            [
                pa.field(f.name, f.type, metadata={b"PARQUET:field_id": str(1000 + k).encode()})
                for k, f in enumerate(flat.schema)
            ]
        )
    )
    return [
        (flat, {}),
        (flat, {"compression": "snappy", "row_group_size": 7, "write_statistics": ["i", "s"]}),
        (flat, {"use_dictionary": False, "data_page_version": "2.0", "write_page_index": True}),
        (nested, {"use_compliant_nested_type": True}),
        (wide, {"store_schema": False}),
        (with_ids, {"store_schema": False, "compression": "zstd"}),
        (flat.slice(0, 0), {}),
    ]


@pytest.mark.parametrize("case", range(7))
def test_pyarrow_footers_round_trip_byte_identical(case: int) -> None:
    table, kwargs = _tables()[case]
    footer = _footer(_parquet_bytes(table, **kwargs))
    decoded, end = tc.decode_struct(footer)
    assert end == len(footer)
    assert tc.encode_struct(decoded) == footer


def test_every_wire_type_round_trips() -> None:
    inner = tc.Struct([tc.Field(1, tc.I32, -5), tc.Field(40, tc.BINARY, b"far id")])
    s = tc.Struct(
        [
            tc.Field(1, tc.BOOL_TRUE, True),
            tc.Field(2, tc.BOOL_FALSE, False),
            tc.Field(3, tc.BYTE, -7),
            tc.Field(4, tc.I16, -300),
            tc.Field(5, tc.I32, 2**31 - 1),
            tc.Field(6, tc.I64, -(2**63)),
            tc.Field(7, tc.DOUBLE, 1.5),
            tc.Field(8, tc.BINARY, b"\x00\xff"),
            tc.Field(9, tc.LIST, tc.ListValue(tc.I64, list(range(-10, 10)))),
            tc.Field(10, tc.SET, tc.ListValue(tc.BOOL_TRUE, [True, False, True])),
            tc.Field(11, tc.MAP, tc.MapValue(tc.BINARY, tc.STRUCT, [(b"k", inner)])),
            tc.Field(12, tc.MAP, tc.MapValue(0, 0, [])),
            tc.Field(30, tc.STRUCT, inner),  # delta > 15: long header
            tc.Field(31, tc.LIST, tc.ListValue(tc.STRUCT, [])),
        ]
    )
    data = tc.encode_struct(s)
    back, end = tc.decode_struct(data)
    assert end == len(data)
    assert tc.encode_struct(back) == data
    assert _v(back, 6) == -(2**63)
    assert _v(back, 10).items == [True, False, True]
    assert _v(_v(back, 30), 40) == b"far id"
    assert _v(back, 1) is True and _v(back, 2) is False


def test_long_forms_in_the_input_are_kept() -> None:
    # field 1 spelled with a long header, a 2-element list spelled with a long size
    data = bytes([tc.I32, 0x02, 0x06, 0x19, 0xF5, 0x02, 0x02, 0x04, 0x00])
    s, end = tc.decode_struct(data)
    assert end == len(data)
    assert _v(s, 1) == 3 and _v(s, 2).items == [1, 2]
    assert tc.encode_struct(s) == data


def test_set_inserts_in_id_order() -> None:
    s = tc.Struct([tc.Field(1, tc.I32, 7), tc.Field(9, tc.I32, 1)])
    s.set(6, tc.I32, 21)
    assert [f.id for f in s.fields] == [1, 6, 9]
    back, _ = tc.decode_struct(tc.encode_struct(s))
    assert [(f.id, f.value) for f in back.fields] == [(1, 7), (6, 21), (9, 1)]


def test_truncated_input_raises() -> None:
    data = tc.encode_struct(tc.Struct([tc.Field(1, tc.BINARY, b"abcdef")]))
    with pytest.raises(tc.ThriftDecodeError):
        tc.decode_struct(data[:-3])


def test_mark_interval_columns_changes_only_the_converted_type() -> None:
    table = pa.table({"a": pa.array([1, 2]), "iv": pa.array([bytes(12), None], pa.binary(12)), "z": ["x", "y"]})
    data = _parquet_bytes(table, store_schema=False)
    marked = mark_interval_columns(data, {"iv"})
    old_footer, new_footer = _footer(data), _footer(marked)
    assert marked[: len(data) - 8 - len(old_footer)] == data[: len(data) - 8 - len(old_footer)]
    new, _ = tc.decode_struct(new_footer)
    elements = _v(new, 2).items
    names = [_v(el, 4) for el in elements]
    iv = elements[names.index(b"iv")]
    assert _v(iv, 6) == 21
    iv.fields = [f for f in iv.fields if f.id != 6]
    assert tc.encode_struct(new) == old_footer  # nothing else changed
    pf = pq.ParquetFile(pa.BufferReader(marked))
    assert pf.schema.column(1).converted_type == "INTERVAL"
    assert pf.read().column("a").to_pylist() == [1, 2]


def test_interval_to_parquet_layout_and_truncation() -> None:
    arr = pa.array(
        [pa.MonthDayNano([1, 2, 3_000_999_999]), None, pa.MonthDayNano([14, 0, 999_999])],
        pa.month_day_nano_interval(),
    )
    out = interval_to_parquet("iv", arr.slice(0))
    assert out.type == pa.binary(12)
    assert out.to_pylist() == [struct.pack("<III", 1, 2, 3000), None, struct.pack("<III", 14, 0, 0)]
    assert interval_to_parquet("iv", arr.slice(1)).to_pylist() == [None, struct.pack("<III", 14, 0, 0)]
    assert interval_to_parquet("iv", pa.chunked_array([arr[:1], arr[2:]])).null_count == 0


@pytest.mark.parametrize("bad", [[0, 0, -1], [-1, 0, 0], [0, -1, 0]])
def test_negative_intervals_are_refused(bad: list[int]) -> None:
    arr = pa.array([pa.MonthDayNano([1, 1, 1]), pa.MonthDayNano(bad)], pa.month_day_nano_interval())
    with pytest.raises(UnsupportedTypeError, match=r"'span'.*negative"):
        interval_to_parquet("span", arr)


def test_null_slots_are_not_checked() -> None:
    # a null slot's storage may hold anything; only valid values are checked
    raw = struct.pack("<iiq", -1, -1, -1) + struct.pack("<iiq", 1, 2, 3_000_000)
    validity = pa.array([False, True]).buffers()[1]
    arr = pa.Array.from_buffers(pa.month_day_nano_interval(), 2, [validity, pa.py_buffer(raw)], null_count=1)
    assert interval_to_parquet("iv", arr).to_pylist() == [None, struct.pack("<III", 1, 2, 3)]


def test_write_table_with_interval(tmp_path: object) -> None:
    schema = pa.schema(
        [
            pa.field("id", pa.int64(), metadata={b"PARQUET:field_id": b"1"}),
            pa.field("iv", pa.month_day_nano_interval(), metadata={b"PARQUET:field_id": b"2"}),
        ]
    )
    table = pa.table([pa.array([1, 2, 3]), pa.array([pa.MonthDayNano([1, 2, 3_000_000]), None, None])], schema=schema)
    seen: list[int] = []

    def stats(fid: int, arr: pa.Array) -> tuple[object, object, None]:
        seen.append(fid)
        return (arr[0].as_py(), arr[-1].as_py(), None)

    path = f"{tmp_path}/x.parquet"
    w = write_table(table, path, stats=stats)
    data = open(path, "rb").read()
    assert w.file_size_bytes == len(data)
    assert w.footer_size == struct.unpack("<I", data[-8:-4])[0]
    assert seen == [1]  # no stats call for the interval leaf
    by_id = {s.field_id: s for s in w.leaf_stats}
    assert (by_id[2].min_value, by_id[2].max_value, by_id[2].null_count, by_id[2].value_count) == (None, None, 2, 1)
    assert (by_id[1].min_value, by_id[1].max_value) == (1, 3)
    pf = pq.ParquetFile(path)
    assert pf.schema.column(1).converted_type == "INTERVAL"
    assert pf.metadata.row_group(0).column(1).statistics is None
    assert pf.metadata.row_group(0).column(0).statistics.has_min_max
    assert pf.schema_arrow.field("iv").metadata[b"PARQUET:field_id"] == b"2"


def test_nested_interval_is_refused(tmp_path: object) -> None:
    table = pa.table({"l": pa.array([[pa.MonthDayNano([1, 1, 1])]], pa.list_(pa.month_day_nano_interval()))})
    with pytest.raises(UnsupportedTypeError, match="'l'"):
        write_table(table, f"{tmp_path}/n.parquet")
