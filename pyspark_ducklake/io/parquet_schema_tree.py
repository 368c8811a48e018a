"""A Parquet file's schema as its footer spells it: every element with its name, children and types.

``Lake.add_files`` needs what pyarrow hides: the repeated group of a list (``list``, ``bag``, or a legacy 2-level
``array``), logical and converted types as written, and each leaf's column-chunk index. DuckDB derives a file
column's type from these (``DuckLakeParquetTypeChecker::DeriveLogicalType``); :func:`derived_type` does the same.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

from pyspark_ducklake.exceptions import DataFileError, ThriftDecodeError
from pyspark_ducklake.io import thrift_compact as tc
from pyspark_ducklake.io.fileio import filesystem

# Parquet physical types and converted types (parquet.thrift)
_PHYSICAL = {0: "BOOLEAN", 1: "INT32", 2: "INT64", 3: "INT96", 4: "FLOAT", 5: "DOUBLE", 6: "BYTE_ARRAY", 7: "FLBA"}
_CONVERTED = {
    0: "UTF8", 1: "MAP", 2: "MAP_KEY_VALUE", 3: "LIST", 4: "ENUM", 5: "DECIMAL", 6: "DATE", 7: "TIME_MILLIS",
    8: "TIME_MICROS", 9: "TIMESTAMP_MILLIS", 10: "TIMESTAMP_MICROS", 11: "UINT_8", 12: "UINT_16", 13: "UINT_32",
    14: "UINT_64", 15: "INT_8", 16: "INT_16", 17: "INT_32", 18: "INT_64", 19: "JSON", 20: "BSON", 21: "INTERVAL",
}  # fmt: skip
_CONVERTED_TYPES = {
    "INT_8": "int8", "INT_16": "int16", "INT_32": "int32", "INT_64": "int64", "UINT_8": "uint8",
    "UINT_16": "uint16", "UINT_32": "uint32", "UINT_64": "uint64", "DATE": "date", "TIMESTAMP_MICROS": "timestamp",
    "TIMESTAMP_MILLIS": "timestamp", "UTF8": "varchar", "ENUM": "varchar", "TIME_MILLIS": "time",
    "TIME_MICROS": "time", "INTERVAL": "interval", "JSON": "json",
}  # fmt: skip
_PHYSICAL_TYPES = {
    "BOOLEAN": "boolean", "INT32": "int32", "INT64": "int64", "INT96": "timestamp", "FLOAT": "float32",
    "DOUBLE": "float64", "BYTE_ARRAY": "blob", "FLBA": "blob",
}  # fmt: skip
_UNITS = {1: "ms", 2: "us", 3: "ns"}


@dataclass
class SchemaNode:
    """One schema element; ``leaf`` is its column-chunk index (None for a group)."""

    name: str
    physical: str | None
    converted: str | None
    logical: tuple[str, Any] | None  # ("TIMESTAMP", (adjusted, unit)), ("JSON", None), ...
    scale: int | None
    precision: int | None
    children: list[SchemaNode]
    leaf: int | None = None


def _logical(value: Any) -> tuple[str, Any] | None:
    if not isinstance(value, tc.Struct) or not value.fields:
        return None
    f = value.fields[0]
    names = {1: "STRING", 2: "MAP", 3: "LIST", 4: "ENUM", 5: "DECIMAL", 6: "DATE", 7: "TIME", 8: "TIMESTAMP",
             10: "INTEGER", 11: "UNKNOWN", 12: "JSON", 13: "BSON", 14: "UUID", 15: "FLOAT16", 16: "VARIANT",
             17: "GEOMETRY", 18: "GEOGRAPHY"}  # fmt: skip
    name = names.get(f.id, f"LOGICAL{f.id}")
    if name in ("TIME", "TIMESTAMP") and isinstance(f.value, tc.Struct):
        adjusted = f.value.get(1)
        unit = f.value.get(2)
        unit_id = unit.value.fields[0].id if unit is not None and unit.value.fields else 2
        return name, (bool(adjusted.value) if adjusted is not None else False, _UNITS.get(unit_id, "us"))
    if name == "INTEGER" and isinstance(f.value, tc.Struct):
        width, signed = f.value.get(1), f.value.get(2)
        return name, (int(width.value) if width else 64, bool(signed.value) if signed else True)
    return name, None


def _int(el: tc.Struct, fid: int) -> int | None:
    f = el.get(fid)
    return None if f is None else int(f.value)


def footer_schema(path: str, storage_options: dict[str, Any] | None = None) -> tuple[list[SchemaNode], int, int, int]:
    """The file's top-level schema nodes, its size, its footer size and its number of row groups.

    Raises:
        DataFileError: the file is missing, not Parquet, or its footer cannot be decoded.
    """
    try:
        fs, p = filesystem(path, storage_options)
        with fs.open(p, "rb") as fh:
            fh.seek(0, 2)
            size = fh.tell()
            if size < 12:
                raise DataFileError(f"{path} is not a Parquet file ({size} bytes); add plain Parquet files")
            fh.seek(size - 8)
            tail = fh.read(8)
            if tail[4:] != b"PAR1":
                raise DataFileError(
                    f"{path} is not a plain Parquet file (no PAR1 footer; encrypted files cannot be added); add plain "
                    "Parquet files"
                )
            footer_size = struct.unpack("<I", tail[:4])[0]
            if footer_size > size - 12:
                raise DataFileError(f"{path}: its footer length {footer_size} exceeds the file")
            fh.seek(size - 8 - footer_size)
            meta, _ = tc.decode_struct(fh.read(footer_size))
    except DataFileError:
        raise
    except (OSError, ThriftDecodeError, ValueError) as e:
        raise DataFileError(f"could not read the Parquet footer of {path}: {e}") from e
    schema = meta.get(2)
    if schema is None or not isinstance(schema.value, tc.ListValue) or not schema.value.items:
        raise DataFileError(f"{path}: Parquet footer has no schema")
    elements: list[tc.Struct] = schema.value.items
    pos, leaf = 1, 0

    def build() -> SchemaNode:
        nonlocal pos, leaf
        if pos >= len(elements):
            raise DataFileError(f"{path}: Parquet schema is truncated")
        el = elements[pos]
        pos += 1
        name_f = el.get(4)
        phys = _int(el, 1)
        conv = _int(el, 6)
        logical_f = el.get(10)
        node = SchemaNode(
            bytes(name_f.value).decode("utf-8", "replace") if name_f is not None else "",
            _PHYSICAL.get(phys) if phys is not None else None,
            _CONVERTED.get(conv) if conv is not None else None,
            _logical(logical_f.value) if logical_f is not None else None,
            _int(el, 7),
            _int(el, 8),
            [],
        )
        n = _int(el, 5) or 0
        if n == 0 and phys is not None:
            node.leaf = leaf
            leaf += 1
        for _ in range(n):
            node.children.append(build())
        return node

    top = []
    for _ in range(_int(elements[0], 5) or 0):
        top.append(build())
    row_groups = meta.get(4)
    return top, size, footer_size, len(row_groups.value.items) if row_groups is not None else 0


def derived_type(node: SchemaNode) -> str:
    """The DuckLake type DuckDB derives for a file column (``list`` / ``map`` / ``struct`` for groups)."""
    if node.children:
        if node.converted == "LIST" or (node.logical and node.logical[0] == "LIST"):
            return "list"
        if node.converted in ("MAP", "MAP_KEY_VALUE") or (node.logical and node.logical[0] == "MAP"):
            return "map"
        return "struct"
    if node.logical is not None:
        kind, detail = node.logical
        if kind == "TIME" and detail == (False, "us"):
            return "time"
        if kind == "TIMESTAMP":
            adjusted, unit = detail
            if adjusted:
                return "timestamptz"
            return {"ms": "timestamp_ms", "us": "timestamp", "ns": "timestamp_ns"}[unit]
        if kind == "UUID":
            return "uuid"
        if kind == "GEOMETRY":
            return "geometry"
        if kind == "TIME" and node.converted is None:
            return f"time({detail[1]})"  # a TIME DuckDB does not accept as TIME
    if node.converted is not None:
        if node.converted == "DECIMAL":
            return f"decimal({node.precision or 0},{node.scale or 0})"
        if node.converted in ("TIME_MILLIS", "TIME_MICROS") and node.logical is not None:
            unit = node.logical[1][1] if node.logical[0] == "TIME" else "us"
            return "time" if unit == "us" else f"time({unit})"
        if node.converted in _CONVERTED_TYPES:
            return _CONVERTED_TYPES[node.converted]
    if node.logical is not None:
        kind, detail = node.logical
        if kind == "DECIMAL":
            return f"decimal({node.precision or 0},{node.scale or 0})"
        if kind == "INTEGER":
            width, signed = detail
            return f"{'' if signed else 'u'}int{width}"
        if kind in ("STRING", "ENUM"):
            return "varchar"
        if kind == "JSON":
            return "json"
        if kind == "DATE":
            return "date"
    return _PHYSICAL_TYPES.get(node.physical or "", "blob")


__all__ = ["SchemaNode", "derived_type", "footer_schema"]
