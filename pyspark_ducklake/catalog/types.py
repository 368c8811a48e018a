"""DuckLake column types and their Arrow equivalents.

DuckLake stores a type as a string in ``ducklake_column.column_type`` (``int32``, ``decimal(18,3)``,
``timestamptz``...). Nested types (``list``, ``struct``, ``map``) have one child row per field, linked by
``parent_column``; :class:`Column` mirrors that tree.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import pyarrow as pa

from pyspark_ducklake.catalog.geometry import GEOARROW_WKB, geometry_type, spark_geometry_srid
from pyspark_ducklake.catalog.time_types import TIME_ARROW
from pyspark_ducklake.exceptions import UnsupportedTypeError
from pyspark_ducklake.io.variant import VARIANT_TYPE, is_variant_type

NESTED_TYPES = frozenset({"list", "struct", "map"})

_PRIMITIVE_TO_ARROW: dict[str, pa.DataType] = {
    "boolean": pa.bool_(),
    "int8": pa.int8(),
    "int16": pa.int16(),
    "int32": pa.int32(),
    "int64": pa.int64(),
    "uint8": pa.uint8(),
    "uint16": pa.uint16(),
    "uint32": pa.uint32(),
    "uint64": pa.uint64(),
    "int128": pa.decimal128(38, 0),
    "uint128": pa.decimal128(38, 0),
    "float32": pa.float32(),
    "float64": pa.float64(),
    "date": pa.date32(),
    "time": pa.time64("us"),
    "timestamp": pa.timestamp("us"),
    "timestamp_s": pa.timestamp("s"),
    "timestamp_ms": pa.timestamp("ms"),
    "timestamp_ns": pa.timestamp("ns"),
    "timestamptz": pa.timestamp("us", tz="UTC"),
    "interval": pa.month_day_nano_interval(),
    "varchar": pa.string(),
    "blob": pa.binary(),
    "uuid": pa.uuid(),
    "json": pa.json_(),
}

_DECIMAL_RE = re.compile(r"^decimal\((\d+),\s*(\d+)\)$")

# Lossless widenings DuckLake allows with ALTER COLUMN SET TYPE.
_PROMOTIONS: dict[str, frozenset[str]] = {
    "int8": frozenset({"int16", "int32", "int64", "float32", "float64"}),
    "int16": frozenset({"int32", "int64", "float32", "float64"}),
    "int32": frozenset({"int64", "float64"}),
    "uint8": frozenset({"uint16", "uint32", "uint64", "int16", "int32", "int64", "float32", "float64"}),
    "uint16": frozenset({"uint32", "uint64", "int32", "int64", "float32", "float64"}),
    "uint32": frozenset({"uint64", "int64", "float64"}),
    "float32": frozenset({"float64"}),
}


@dataclass(frozen=True)
class Column:
    """One column (or nested field) of a DuckLake table, as stored in ``ducklake_column``."""

    column_id: int
    name: str
    type: str
    nulls_allowed: bool = True
    children: tuple[Column, ...] = ()
    initial_default: str | None = None
    default_value: str | None = None

    @property
    def is_nested(self) -> bool:
        return self.type in NESTED_TYPES

    def with_children(self, children: tuple[Column, ...]) -> Column:
        return replace(self, children=children)

    def shape(self) -> tuple[Any, ...]:
        """Identity, name, type, nullability and children: what data files depend on (not defaults)."""
        return (self.column_id, self.name, self.type, self.nulls_allowed, tuple(c.shape() for c in self.children))

    def nullable(self) -> Column:
        """This column with NULL allowed at every level (a map's key stays NOT NULL, as Arrow requires)."""
        children = tuple(c if self.type == "map" and i == 0 else c.nullable() for i, c in enumerate(self.children))
        return replace(self, nulls_allowed=True, children=children)

    def walk(self) -> list[Column]:
        """This column and all nested fields, depth first (the order DuckLake numbers them)."""
        out = [self]
        for child in self.children:
            out.extend(child.walk())
        return out


@dataclass(frozen=True)
class TableSchema:
    """The top-level columns of a table at one schema version."""

    columns: tuple[Column, ...] = field(default_factory=tuple)
    # where each column stands in the whole table when only some columns are read (a file without field ids or a
    # name mapping is bound by position, as DuckDB binds it); None: these are the table's columns
    positions: tuple[int, ...] | None = None

    def names(self) -> list[str]:
        return [c.name for c in self.columns]

    def shape(self) -> tuple[Any, ...]:
        return tuple(c.shape() for c in self.columns)

    def nullable(self) -> TableSchema:
        """Every column nullable: the change feed's columns, whose old rows may predate a ``SET NOT NULL``."""
        return TableSchema(tuple(c.nullable() for c in self.columns), self.positions)

    def by_name(self, name: str) -> Column | None:
        for c in self.columns:
            if c.name == name:
                return c
        return None

    def by_id(self) -> dict[int, Column]:
        return {c.column_id: c for top in self.columns for c in top.walk()}

    def max_column_id(self) -> int:
        return max((c.column_id for top in self.columns for c in top.walk()), default=0)

    def leaves(self) -> list[Column]:
        return [c for top in self.columns for c in top.walk() if not c.is_nested]

    def arrow_schema(self) -> pa.Schema:
        return pa.schema([arrow_field(c) for c in self.columns])


_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


# Types DuckDB never inlines (no inlined-data table for a table holding one, ducklake-format-2.md §5): rows of such
# a table always go to Parquet.
NEVER_INLINED_TYPES = frozenset({"variant", "geometry"})


def fold_name(name: str) -> str:
    """A name as DuckDB compares identifiers: ASCII letters case-insensitively, everything else exactly
    (``T`` and ``t`` are one table, ``Ü`` and ``ü`` two)."""
    return name.translate(_ASCII_LOWER)


def find_folded(names: Any, name: str) -> str | None:
    """The name among ``names`` equal to ``name`` under :func:`fold_name`, or None."""
    folded = fold_name(name)
    for n in names:
        if fold_name(n) == folded:
            return str(n)
    return None


def validate_columns(columns: tuple[Column, ...], where: str) -> None:
    """Refuse what DuckDB refuses in a table definition: no columns, an empty name, two columns (or fields of one
    struct) whose names differ only in case, a struct without fields.

    Raises:
        InvalidIdentifierError: an empty name or a duplicate (case-insensitive) name.
        UnsupportedTypeError: no columns, or a struct without fields.
    """
    from pyspark_ducklake.exceptions import InvalidIdentifierError

    if not columns:
        raise UnsupportedTypeError(f"{where} has no columns; DuckDB needs at least one: give it a column")

    def check(level: tuple[Column, ...], owner: str) -> None:
        seen: dict[str, str] = {}
        for c in level:
            if not c.name:
                raise InvalidIdentifierError(f"{owner} has a column or field with an empty name; give it a name")
            other = seen.get(fold_name(c.name))
            if other is not None:
                raise InvalidIdentifierError(
                    f"duplicate column names in {owner}: {other!r} and {c.name!r} (DuckDB's names are "
                    "case-insensitive); give every column its own name"
                )
            seen[fold_name(c.name)] = c.name
            if c.type == "struct" and not c.children:
                raise UnsupportedTypeError(
                    f"column {c.name!r} of {owner} is a struct without fields, which DuckDB cannot hold; "
                    "give it a field or drop it"
                )
            if c.children:
                check(c.children, f"{owner}.{c.name}")

    check(columns, where)


def decimal_params(type_str: str) -> tuple[int, int] | None:
    m = _DECIMAL_RE.match(type_str)
    return (int(m.group(1)), int(m.group(2))) if m else None


def arrow_type(column: Column) -> pa.DataType:
    """The Arrow type of a DuckLake column (nested types from its children)."""
    t = column.type
    if t in _PRIMITIVE_TO_ARROW:
        return _PRIMITIVE_TO_ARROW[t]
    if t in TIME_ARROW:
        return TIME_ARROW[t]
    if t == "geometry":
        return geometry_type()
    dec = decimal_params(t)
    if dec is not None:
        return pa.decimal128(*dec) if dec[0] <= 38 else pa.decimal256(*dec)
    if t == "variant":
        return VARIANT_TYPE
    if t == "list":
        return pa.list_(arrow_field(column.children[0]))
    if t == "struct":
        return pa.struct([arrow_field(c) for c in column.children])
    if t == "map":
        key, value = column.children
        return pa.map_(arrow_field(key).with_nullable(False), arrow_field(value))
    raise unreadable_type(column.name, t)


def unreadable_type(name: str, type_name: str) -> UnsupportedTypeError:
    """The error for a column of a DuckLake type this library cannot read, raised only when a read selects it."""
    return UnsupportedTypeError(
        f"column {name!r} has DuckLake type {type_name!r}, which pyspark-ducklake cannot read yet; select the other "
        "columns: use the columns option (spark.read.format('ducklake').option('columns', 'a, b')) or read_table "
        "(pyspark_ducklake.read_table(spark, ...).select(...)), or lake.scan(..., columns=[...]) in Python; or read "
        "it with DuckDB, or have DuckDB copy the rows without it or cast to text "
        f"(CREATE TABLE … AS SELECT * EXCLUDE ({name}), {name}::VARCHAR AS {name} …)"
    )


def arrow_field(column: Column) -> pa.Field:
    """An Arrow field for the column, tagged with ``PARQUET:field_id`` = column_id."""
    return pa.field(
        column.name,
        arrow_type(column),
        nullable=column.nulls_allowed,
        metadata={b"PARQUET:field_id": str(column.column_id).encode()},
    )


def empty_table(schema: pa.Schema) -> pa.Table:
    """A table of no rows; unlike ``schema.empty_table()`` it allows extension types (UUID, JSON) inside lists,
    structs and maps."""
    return pa.table([pa.nulls(0, f.type) for f in schema], schema=schema)


def table_of(arrays: Sequence[pa.Array | pa.ChunkedArray], schema: pa.Schema, num_rows: int) -> pa.Table:
    """``pa.Table.from_arrays(arrays, schema=schema)`` of ``num_rows`` rows; with no arrays (a read that selects
    only ``rowid``/``snapshot_id``, or none of a file's columns) a table of no columns that still has them all,
    where ``from_arrays`` would give a table of no rows."""
    if arrays:
        return pa.Table.from_arrays(list(arrays), schema=schema)
    return pa.table({"rows": pa.nulls(num_rows)}).select([])


def ducklake_type(dtype: pa.DataType, *, where: str = "") -> str:
    """The DuckLake type string for a primitive Arrow type.

    Raises:
        UnsupportedTypeError: for Arrow types DuckLake cannot store; ``where`` names the column.
    """
    if isinstance(dtype, pa.BaseExtensionType):
        name = dtype.extension_name
        if name == "arrow.uuid":
            return "uuid"
        if name == "arrow.json":
            return "json"
        if name == GEOARROW_WKB:
            return "geometry"
        raise UnsupportedTypeError(f"column {where!r}: Arrow extension type {name!r} is not supported by DuckLake")
    if pa.types.is_large_string(dtype) or pa.types.is_string_view(dtype):
        return "varchar"
    if pa.types.is_large_binary(dtype) or pa.types.is_binary_view(dtype) or pa.types.is_fixed_size_binary(dtype):
        return "blob"
    if pa.types.is_decimal(dtype):
        if dtype.precision > 38:
            raise UnsupportedTypeError(
                f"column {where!r}: decimal({dtype.precision},{dtype.scale}) exceeds DuckLake's maximum precision 38"
            )
        return f"decimal({dtype.precision},{dtype.scale})"
    if pa.types.is_timestamp(dtype):
        if dtype.tz is not None:
            if dtype.unit != "us":
                # DuckLake has one zoned timestamp type, in microseconds.
                return "timestamptz"
            return "timestamptz"
        return {"s": "timestamp_s", "ms": "timestamp_ms", "us": "timestamp", "ns": "timestamp_ns"}[dtype.unit]
    if pa.types.is_time(dtype):
        return "time"
    if pa.types.is_date(dtype):
        return "date"
    if pa.types.is_dictionary(dtype):
        return ducklake_type(dtype.value_type, where=where)
    for name, t in _PRIMITIVE_TO_ARROW.items():
        if name in ("int128", "uint128"):
            continue
        if dtype == t:
            return name
    if pa.types.is_float16(dtype):
        return "float32"
    raise UnsupportedTypeError(
        f"column {where!r}: Arrow type {dtype} cannot be stored in DuckLake; cast it to a supported type first"
    )


def columns_from_arrow(schema: pa.Schema, first_id: int = 1) -> tuple[Column, ...]:
    """Build DuckLake columns for an Arrow schema, numbering ids depth-first from ``first_id``."""
    next_id = [first_id]
    return tuple(column_from_arrow_field(f, next_id) for f in schema)


def column_from_arrow_field(f: pa.Field, next_id: list[int], name: str | None = None) -> Column:
    """One column (with nested children) for an Arrow field; ``next_id`` is a one-item counter."""
    cid = next_id[0]
    next_id[0] += 1
    name = f.name if name is None else name
    t = f.type
    if isinstance(t, pa.BaseExtensionType) and t.extension_name not in ("arrow.uuid", "arrow.json", GEOARROW_WKB):
        t = t.storage_type
    srid = spark_geometry_srid(f)
    if srid is not None:  # Spark's GeometryType as PySpark gives it to Arrow
        if srid != 0:
            raise UnsupportedTypeError(
                f"column {name!r}: a geometry with SRID {srid}, and DuckLake keeps no SRID or CRS; set it to 0 first "
                "(st_setsrid(col, 0) in Spark) if the coordinates need no CRS to be read"
            )
        return Column(cid, name, "geometry", f.nullable)
    if is_variant_type(t):
        return Column(cid, name, "variant", f.nullable)
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t) or pa.types.is_list_view(t):
        child = column_from_arrow_field(t.value_field, next_id, "element")
        return Column(cid, name, "list", f.nullable, (child,))
    if pa.types.is_map(t):
        key = column_from_arrow_field(t.key_field, next_id, "key")
        value = column_from_arrow_field(t.item_field, next_id, "value")
        return Column(cid, name, "map", f.nullable, (replace(key, nulls_allowed=True), value))
    if pa.types.is_struct(t):
        children = tuple(column_from_arrow_field(t.field(i), next_id) for i in range(t.num_fields))
        return Column(cid, name, "struct", f.nullable, children)
    return Column(cid, name, ducklake_type(t, where=name), f.nullable)


def can_promote(old: str, new: str) -> bool:
    """Whether values of type ``old`` convert losslessly to ``new``."""
    if old == new:
        return True
    if new in _PROMOTIONS.get(old, frozenset()):
        return True
    od, nd = decimal_params(old), decimal_params(new)
    if od and nd:
        return nd[1] >= od[1] and nd[0] - nd[1] >= od[0] - od[1]
    return False
