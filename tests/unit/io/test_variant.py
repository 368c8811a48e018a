"""The variant codec against the Parquet variant spec's encodings and the bytes DuckDB 1.5.5 and Spark 4.3 write
(ducklake-format-2.md §4.2, §4.4); un-shredding of shredded columns; malformed bytes are typed errors."""

from __future__ import annotations

import datetime as dt
import decimal
import uuid
from typing import Any

import pyarrow as pa
import pytest

from pyspark_ducklake.exceptions import InvalidVariantError
from pyspark_ducklake.io.variant import (
    EMPTY_METADATA,
    MAX_DEPTH,
    VARIANT_TYPE,
    decode,
    encode_array,
    encode_metadata,
    from_python,
    is_variant_type,
    parse_metadata,
    unshred,
    variant_column,
)

H = bytes.fromhex
ABC = H("1103000102") + b"\x03abc"  # DuckDB's sorted metadata with keys a, b, c


@pytest.mark.parametrize(
    ("metadata", "value", "expected"),
    [
        (EMPTY_METADATA, H("142a000000"), 42),  # DuckDB: INTEGER 42 as int32
        (EMPTY_METADATA, b"\x2d" + b"hello world", "hello world"),  # short string
        (EMPTY_METADATA, H("2ccd2a0000"), dt.date(2000, 1, 1)),
        (EMPTY_METADATA, H("030500050a0f1015140100000014020000001403000000001405000000"), [1, 2, 3, None, 5]),
        (EMPTY_METADATA, H("200119000000"), decimal.Decimal("2.5")),  # a decimal residual
        (EMPTY_METADATA, H("2002d2040000"), decimal.Decimal("12.34")),
        (H("010000"), H("0c2a"), 42),  # Spark: parse_json('42') as int8, unsorted metadata
        (ABC, H("02030001020005060b") + H("142a000000") + b"\x00" + H("1454000000"), {"a": 42, "b": None, "c": 84}),
        (EMPTY_METADATA, b"\x00", None),
        (EMPTY_METADATA, b"\x04", True),
        (EMPTY_METADATA, b"\x08", False),
    ],
)
def test_decodes_spec_and_duckdb_bytes(metadata: bytes, value: bytes, expected: Any) -> None:
    assert decode(metadata, value) == expected


def test_metadata_dictionary_matches_duckdb_bytes() -> None:
    assert parse_metadata(ABC) == ["a", "b", "c"]
    assert encode_metadata(["a", "b", "c"]) == ABC
    assert encode_metadata([]) == EMPTY_METADATA
    assert encode_metadata(["b", "a"])[0] & 0x10 == 0  # not flagged sorted


def test_array_encoding_matches_duckdb_bytes() -> None:
    ints = [H("14") + i.to_bytes(4, "little") for i in (1, 2, 3)]
    assert encode_array([*ints, b"\x00", H("1405000000")]) == H(
        "030500050a0f1015140100000014020000001403000000001405000000"
    )


HOSTILE = [
    None,
    0,
    -1,
    127,
    128,
    -32769,
    1 << 40,
    -(1 << 63),
    2.5,
    -0.0,
    float("inf"),
    decimal.Decimal("12.34"),
    decimal.Decimal("-0.001"),
    decimal.Decimal("1E+3"),
    decimal.Decimal("12345678901234567890.123456789"),
    "",
    "x" * 63,
    "x" * 64,
    "ü" * 10_000,
    'quote " and \\ and \x00',
    b"",
    b"\x00\xff" * 100,
    dt.date(1, 1, 1),
    dt.date(9999, 12, 31),
    dt.datetime(2020, 1, 2, 3, 4, 5, 6),
    dt.datetime(1900, 1, 2, 3, 4, 5, 6, tzinfo=dt.timezone.utc),
    dt.time(23, 59, 59, 999_999),
    uuid.UUID(int=1),
    {},
    [],
    {"": 1, "a.b": {'k"q': [None, {}]}, "ü": "v", "[x]": []},
    [[[[[]]]]],
    {"k": {"k": {"k": {"k": {"k": 1}}}}},
]


@pytest.mark.parametrize("value", HOSTILE, ids=range(len(HOSTILE)))
def test_python_values_round_trip(value: Any) -> None:
    metadata, encoded = from_python(value)
    assert decode(metadata, encoded) == value


def test_large_objects_and_arrays_round_trip() -> None:
    wide = {f"key{i:04d}": "v" * (i % 300) for i in range(1000)}  # > 255 fields, offsets beyond 2 bytes
    long = list(range(70_000))
    assert decode(*from_python(wide)) == wide
    assert decode(*from_python(long)) == long


@pytest.mark.parametrize(
    ("metadata", "value", "says"),
    [
        (b"", b"\x00", "metadata is empty"),
        (H("020000"), b"\x00", "version 2"),
        (H("1101"), b"\x00", "truncated"),
        (H("11010002") + b"\xff\xfe", b"\x00", "not UTF-8"),
        (EMPTY_METADATA, b"", "truncated"),
        (EMPTY_METADATA, H("1401"), "truncated"),
        (EMPTY_METADATA, H("142a00000000"), "bytes after its end"),
        (EMPTY_METADATA, H("fc"), "unknown primitive type"),
        (EMPTY_METADATA, H("0201050001") + b"\x00", "beyond the metadata"),
        (EMPTY_METADATA, b"\x05\xff", "not UTF-8"),
        (EMPTY_METADATA, H("3c") + (100).to_bytes(4, "little") + b"ab", "truncated"),
    ],
)
def test_malformed_bytes_are_typed_errors(metadata: bytes, value: bytes, says: str) -> None:
    with pytest.raises(InvalidVariantError, match=says):
        decode(metadata, value)


def test_nesting_beyond_the_limit_is_refused() -> None:
    deep = b"\x00"
    for _ in range(MAX_DEPTH + 2):
        deep = encode_array([deep])
    with pytest.raises(InvalidVariantError, match="nested deeper"):
        decode(EMPTY_METADATA, deep)


# --- un-shredding -----------------------------------------------------------------------------------------------


def _group(value: list[Any], typed: pa.Array) -> pa.StructArray:
    return pa.StructArray.from_arrays([pa.array(value, pa.binary()), typed], names=["value", "typed_value"])


def _column(metadata: list[bytes], value: list[Any], typed: pa.Array, mask: list[bool] | None = None) -> pa.Array:
    return pa.StructArray.from_arrays(
        [pa.array(metadata, pa.binary()), pa.array(value, pa.binary()), typed],
        names=["metadata", "value", "typed_value"],
        mask=pa.array(mask) if mask else None,
    )


def _decoded(arr: pa.Array) -> list[Any]:
    out = unshred(arr)
    assert out.type == VARIANT_TYPE and is_variant_type(out.type)
    return [None if r is None else decode(r["metadata"], r["value"]) for r in out.to_pylist()]


def test_unshreds_a_fully_shredded_root_and_mixed_rows() -> None:
    # DuckDB: (3, 7) in an all-int column; non-int rows keep value with a NULL typed_value
    arr = _column([EMPTY_METADATA] * 4, [None, H("2d") + b"hello world", b"\x00", None], pa.array([7, None, None, 3]))
    assert _decoded(arr) == [7, "hello world", None, 3]
    assert unshred(arr).null_count == 1  # a top-level variant null is SQL NULL


def test_unshreds_partially_shredded_objects_as_duckdb_writes_them() -> None:
    # {'a':42,'b':NULL,'c':84}: a, c typed; b a variant null in value; k absent (both NULL)
    typed = pa.StructArray.from_arrays(
        [
            _group([None, None], pa.array([42, 1], pa.int32())),
            _group([b"\x00", None], pa.array([None, None], pa.int32())),
            _group([None, None], pa.array([84, None], pa.int32())),
            _group([None, None], pa.array([None, None], pa.int32())),
        ],
        names=["a", "b", "c", "k"],
    )
    # row 2: {'a': 1, 'z': 'r'} with z kept in a residual object (field id 1 of its metadata)
    meta2 = encode_metadata(["a", "z"])
    residual = H("0201010002") + b"\x05r"
    arr = _column([ABC, meta2], [None, residual], typed)
    assert _decoded(arr) == [{"a": 42, "b": None, "c": 84}, {"a": 1, "z": "r"}]


def test_unshreds_lists_of_shredded_elements_and_null_lists() -> None:
    elem = _group([None, b"\x05q", None, b"\x00"], pa.array([1, None, 3, None], pa.int64()))
    lists = pa.ListArray.from_arrays(pa.array([0, 2, 2, 4], pa.int32()), elem, mask=pa.array([False, True, False]))
    arr = _column([EMPTY_METADATA] * 3, [None, H("1405000000"), None], lists)
    assert _decoded(arr) == [[1, "q"], 5, [3, None]]


def test_unshreds_every_shredded_primitive_type() -> None:
    cases: list[tuple[pa.Array, Any]] = [
        (pa.array([True]), True),
        (pa.array([-5], pa.int8()), -5),
        (pa.array([-5], pa.int16()), -5),
        (pa.array([1.5], pa.float32()), 1.5),
        (pa.array([1.5], pa.float64()), 1.5),
        (pa.array([decimal.Decimal("-1.25")], pa.decimal128(20, 2)), decimal.Decimal("-1.25")),
        (pa.array([dt.date(1, 1, 1)], pa.date32()), dt.date(1, 1, 1)),
        (pa.array([dt.time(1, 2, 3, 4)], pa.time64("us")), dt.time(1, 2, 3, 4)),
        (
            pa.array([dt.datetime(2020, 1, 1, 10)], pa.timestamp("us", "UTC")),
            dt.datetime(2020, 1, 1, 10, tzinfo=dt.timezone.utc),
        ),
        (pa.array([dt.datetime(2020, 1, 1, 10)], pa.timestamp("us")), dt.datetime(2020, 1, 1, 10)),
        (pa.array([5], pa.timestamp("ns")), ("timestamp_ntz_nanos", 5)),
        (pa.array([b"\x00"], pa.binary()), b"\x00"),
        (pa.array(["é" * 100]), "é" * 100),
        (pa.array([uuid.UUID(int=7).bytes], pa.uuid()), uuid.UUID(int=7)),
    ]
    for typed, expected in cases:
        assert _decoded(_column([EMPTY_METADATA], [None], typed)) == [expected], typed.type


def test_a_field_both_shredded_and_in_the_residual_is_refused() -> None:
    meta = encode_metadata(["a"])
    typed = pa.StructArray.from_arrays([_group([None], pa.array([1], pa.int32()))], names=["a"])
    residual = H("02010000") + b"\x05" + H("1402000000")
    with pytest.raises(InvalidVariantError, match="both shredded"):
        unshred(_column([meta], [residual], typed))


def test_unshredded_files_and_null_groups() -> None:
    arr = pa.StructArray.from_arrays(
        [pa.array([EMPTY_METADATA, EMPTY_METADATA], pa.binary()), pa.array([H("142a000000"), b"\x00"], pa.binary())],
        names=["metadata", "value"],
        mask=pa.array([False, False]),
    )
    assert _decoded(arr) == [42, None]
    assert unshred(arr).is_null().to_pylist() == [False, True]


# --- values given to a write ------------------------------------------------------------------------------------


def test_write_values_are_checked_and_named() -> None:
    good = from_python({"a": [1]})
    arr = pa.StructArray.from_arrays(
        [pa.array([good[0], EMPTY_METADATA]), pa.array([good[1], H("1401")])],
        names=["metadata", "value"],
    )
    with pytest.raises(InvalidVariantError, match=r"column 'v', row 1: variant value is truncated"):
        variant_column(arr, "column 'v'")
    with pytest.raises(InvalidVariantError, match="give struct<value: binary, metadata: binary>"):
        variant_column(pa.array(["{}"]), "column 'v'")
    nulls = variant_column(pa.nulls(3), "column 'v'")
    assert nulls.null_count == 3 and nulls.type == VARIANT_TYPE
