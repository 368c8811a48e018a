"""Deterministic test data covering every DuckLake type we write, with the awkward values."""

from __future__ import annotations

import datetime as dt
import decimal
import math
import uuid
from typing import Any

import pyarrow as pa

UTC = dt.timezone.utc

STRUCT_T = pa.struct([("a", pa.int32()), ("b", pa.string())])
MAP_T = pa.map_(pa.string(), pa.int32())

BROAD_SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("b", pa.bool_()),
        ("i8", pa.int8()),
        ("i16", pa.int16()),
        ("i32", pa.int32()),
        ("u8", pa.uint8()),
        ("u16", pa.uint16()),
        ("u32", pa.uint32()),
        ("u64", pa.uint64()),
        ("f32", pa.float32()),
        ("f64", pa.float64()),
        ("d18", pa.decimal128(18, 3)),
        ("d38", pa.decimal128(38, 10)),
        ("dt", pa.date32()),
        ("tm", pa.time64("us")),
        ("ts", pa.timestamp("us")),
        ("tstz", pa.timestamp("us", tz="UTC")),
        ("tsns", pa.timestamp("ns")),
        ("s", pa.string()),
        ("bl", pa.binary()),
        ("u", pa.uuid()),
        ("j", pa.json_()),
        ("li", pa.list_(pa.int32())),
        ("ls", pa.list_(pa.string())),
        ("st", STRUCT_T),
        ("mp", MAP_T),
    ]
)

AWKWARD_STRINGS = [
    "",
    "plain",
    "it's",
    'say "hi"',
    "back\\slash",
    "comma, and [brackets] {braces} a=b: c",
    "ünïcødé ✓ 中文",
    "NULL",
    "  padded  ",
    "\\'",
    "multi\nline\ttab",
]


def _row(i: int) -> dict[str, Any]:
    null = i % 7 == 6
    s = AWKWARD_STRINGS[i % len(AWKWARD_STRINGS)]
    floats = [0.0, -0.0, 1.5, -2.25, math.inf, -math.inf, math.nan, 1e308, 3.4028234e38, 1e-300]
    return {
        "id": i,
        "b": None if null else i % 2 == 0,
        "i8": None if null else [-128, 127, 0, -1][i % 4],
        "i16": None if null else [-32768, 32767, 5][i % 3],
        "i32": None if null else [-(2**31), 2**31 - 1, i * 1000][i % 3],
        "u8": None if null else [0, 255, 17][i % 3],
        "u16": None if null else [0, 65535][i % 2],
        "u32": None if null else [0, 2**32 - 1][i % 2],
        "u64": None if null else [0, 2**64 - 1, 2**63][i % 3],
        "f32": None if null else [0.0, 1.5, -2.25, math.inf, math.nan, 33.333332][i % 6],
        "f64": None if null else floats[i % len(floats)],
        "d18": None if null else decimal.Decimal(["123456789012345.678", "-0.001", "0.000"][i % 3]),
        "d38": None
        if null
        else decimal.Decimal(["9999999999999999999999999999.9999999999", "-0.0000000001", "1.5"][i % 3]),
        "dt": None
        if null
        else [dt.date(2024, 2, 29), dt.date(1, 1, 1), dt.date(9999, 12, 31), dt.date(1969, 12, 31)][i % 4],
        "tm": None if null else [dt.time(23, 59, 59, 999999), dt.time(0, 0), dt.time(12, 30, 1, 5)][i % 3],
        "ts": None if null else dt.datetime(2024, 1, 1, 10, 0, 0, 123456) + dt.timedelta(hours=i),
        "tstz": None if null else dt.datetime(2024, 1, 1, 8, 0, 0, 500000, tzinfo=UTC) + dt.timedelta(minutes=i),
        "tsns": None if null else 1_700_000_000_123_456_789 + i,
        "s": None if null else f"{s}#{i}" if i % 3 else s,
        "bl": None if null else bytes([0, 255, i % 256]) + b"ab",
        "u": None if null else uuid.UUID(int=(i * 0x9E3779B97F4A7C15) % (1 << 128)).bytes,
        "j": None if null else f'{{"k": {i}, "s": "x\\"y"}}',
        "li": None if null else [[1, None, 3], [], [i]][i % 3],
        "ls": None if null else [[s, None, "x y"], [], ["a'b", "[c]"]][i % 3],
        "st": None if null else [{"a": i, "b": s}, {"a": None, "b": None}, {"a": -1, "b": "it's, {x}"}][i % 3],
        "mp": None if null else [[("k1", 1), ("k'2", None)], [], [(s or "e", i)]][i % 3],
    }


def broad_rows(start: int, n: int) -> pa.Table:
    rows = [_row(i) for i in range(start, start + n)]
    arrays = []
    for f in BROAD_SCHEMA:
        values = [r[f.name] for r in rows]
        if f.name == "tsns":
            arrays.append(pa.array(values, pa.int64()).cast(f.type))
        elif isinstance(f.type, pa.BaseExtensionType):
            storage = pa.array(values, f.type.storage_type)
            arrays.append(pa.ExtensionArray.from_storage(f.type, storage))
        else:
            arrays.append(pa.array(values, f.type))
    return pa.Table.from_arrays(arrays, schema=BROAD_SCHEMA)
