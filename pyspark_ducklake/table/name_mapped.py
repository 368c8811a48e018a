"""Reading a data file registered by ``ducklake_add_data_files`` (or ``Lake.add_files``): columns by name.

Such a file has a name mapping (ducklake-format-2.md §1.2): each node names a field of the file, spelled as in the
file, and the DuckLake column id it holds. :func:`apply_name_mapping` turns the raw file into a table whose fields
carry those ids as ``PARQUET:field_id``, at every nesting level, so :func:`conform_table` then matches, casts and
fills defaults exactly as for our own files. File columns without a node are dropped; a partition node takes its
value from the file's path (``name=value``, URL-decoded, ``__HIVE_DEFAULT_PARTITION__`` is NULL), as DuckDB does.
"""

from __future__ import annotations

import urllib.parse
from typing import Any

import pyarrow as pa

from pyspark_ducklake.catalog.name_mapping import MappingNode, NameMapping
from pyspark_ducklake.catalog.stats_values import parse_stat
from pyspark_ducklake.catalog.types import Column, TableSchema, arrow_type, table_of
from pyspark_ducklake.exceptions import DataFileError, InvalidGeometryError, UnsupportedTypeError
from pyspark_ducklake.io.parquet import FIELD_ID_KEY, field_id
from pyspark_ducklake.table.conform import conform_table
from pyspark_ducklake.table.geometry_values import geometry_in, geometry_values

HIVE_NULL = "__HIVE_DEFAULT_PARTITION__"


def hive_values(path: str) -> dict[str, str | None]:
    """``{key: value}`` of the path's ``key=value`` folders (the last wins), values URL-decoded; the null marker
    is None."""
    out: dict[str, str | None] = {}
    folders = path.replace("\\", "/").split("/")[:-1]
    for segment in folders:
        if "=" not in segment:
            continue
        key, value = segment.split("=", 1)
        if not key:
            continue
        value = urllib.parse.unquote(value)
        out[urllib.parse.unquote(key)] = None if value == HIVE_NULL else value
    return out


def _tagged(name: str, type_: pa.DataType, target: int) -> pa.Field:
    return pa.field(name, type_, metadata={FIELD_ID_KEY: str(target).encode()})


def _find(fields: list[pa.Field], name: str) -> int | None:
    for i, f in enumerate(fields):
        if f.name == name:
            return i
    return None


def _missing(path: str, name: str) -> DataFileError:
    return DataFileError(
        f"data file {path} has no column {name!r}, which its name mapping (ducklake_add_data_files) names: the file "
        "changed after it was registered; restore the file as it was, or remove it from the table"
    )


def _map_array(arr: pa.Array, node: MappingNode, path: str) -> pa.Array:
    """``arr`` with nested fields renamed to the nodes' names and tagged with their target ids."""
    t = arr.type
    if not node.children:
        return arr
    if pa.types.is_struct(t):
        fields = [t.field(i) for i in range(t.num_fields)]
        children, tagged = [], []
        for child in node.children:
            i = _find(fields, child.source_name)
            if i is None:
                raise _missing(path, f"{node.source_name}.{child.source_name}")
            mapped = _map_array(arr.field(i), child, path)
            children.append(mapped)
            tagged.append(_tagged(child.source_name, mapped.type, child.target_field_id))
        if not children:
            return arr
        mask = arr.is_null() if arr.null_count else None
        return pa.StructArray.from_arrays(children, fields=tagged, mask=mask)
    if pa.types.is_map(t):
        keys = _map_array(arr.keys, node.children[0], path)
        items = _map_array(arr.items, node.children[1], path) if len(node.children) > 1 else arr.items
        mask = arr.is_null() if arr.null_count else None
        return pa.MapArray.from_arrays(arr.offsets, keys, items, mask=mask)
    if pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        arr = arr.cast(pa.list_(t.value_field))
        t = arr.type
    if pa.types.is_list(t):
        # A list's one child is its element, whatever the file calls it (element, item, array: §1.1).
        values = _map_array(arr.values, node.children[0], path)
        mask = arr.is_null() if arr.null_count else None
        return pa.ListArray.from_arrays(arr.offsets, values, mask=mask)
    return arr


def partition_array(column: Column, value: str | None, n: int) -> pa.Array:
    t = arrow_type(column)
    if value is None:
        return pa.nulls(n, t)
    parsed: Any = parse_stat(column, value, inlined=True)
    return pa.array([parsed] * n, t)


def apply_name_mapping(raw: pa.Table, mapping: NameMapping, path: str, schema: TableSchema) -> pa.Table:
    """The mapped columns of ``raw`` (a file read whole), tagged with their DuckLake column ids.

    Raises:
        DataFileError: the file lacks a column its mapping names (it changed after registration), or a partition
            value in its path is not of the column's type.
    """
    n = raw.num_rows
    file_fields = [raw.schema.field(i) for i in range(raw.num_columns)]
    by_id = {c.column_id: c for c in schema.columns}
    hive: dict[str, str | None] | None = None
    arrays, fields = [], []
    for node in mapping.nodes:
        column = by_id.get(node.target_field_id)
        if column is None:
            continue  # a dropped column: nothing reads it
        if node.is_partition:
            hive = hive_values(path) if hive is None else hive
            if node.source_name not in hive:  # DuckDB refuses the read too
                raise DataFileError(
                    f"data file {path}: column {column.name} is a partition value of its path (folder "
                    f"{node.source_name}=...), which the path does not have: the file was moved after it was "
                    "registered; move it back, or remove it from the table"
                )
            try:
                arr = partition_array(column, hive.get(node.source_name), n)
            except (ValueError, TypeError, ArithmeticError, pa.ArrowException) as e:
                raise DataFileError(
                    f"data file {path}: partition value {node.source_name}={hive.get(node.source_name)!r} in its "
                    f"path is not a valid {column.type} ({e})"
                ) from e
        else:
            i = _find(file_fields, node.source_name)
            if i is None:
                raise _missing(path, node.source_name)
            arr = _map_array(raw.column(i).combine_chunks(), node, path)
        arrays.append(arr)
        fields.append(_tagged(node.source_name, arr.type, node.target_field_id))
    return table_of(arrays, pa.schema(fields), n)


def conform_foreign(raw: pa.Table, schema: TableSchema, path: str) -> pa.Table:
    """:func:`conform_table` for a foreign file, whose values may not cast to the table's types.

    Raises:
        DataFileError: a value does not fit its column's type (DuckDB fails the read too).
    """
    try:
        table = conform_table(raw, schema)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as e:
        raise DataFileError(
            f"data file {path} (registered without field ids) holds values that do not fit the table's column "
            f"types ({e}); rewrite the file with the table's types, or remove it from the table"
        ) from e
    return _iso_geometry(table, schema, path)


def _iso_geometry(table: pa.Table, schema: TableSchema, path: str) -> pa.Table:
    """GEOMETRY values of a foreign file as DuckDB reads them: little-endian ISO WKB (another writer may have stored
    big-endian or extended WKB; our writers and DuckDB's store the ISO form already).

    Raises:
        DataFileError: a value that is not WKB DuckDB reads.
    """
    for i, column in enumerate(schema.columns):
        if not geometry_in(column):
            continue
        where = f"column {column.name!r} of data file {path}"
        try:
            values = geometry_values(table.column(i), column, where)
        except (InvalidGeometryError, UnsupportedTypeError) as e:
            raise DataFileError(f"{e}; rewrite the file with valid WKB, or remove it from the table") from e
        table = table.set_column(i, pa.field(column.name, values.type), values)
    return table


def without_field_ids(raw: pa.Table) -> bool:
    """Whether a file without a name mapping has no field id on any top-level column (a foreign writer's file
    registered without ``ducklake_add_data_files``)."""
    return raw.num_columns > 0 and all(field_id(f) is None for f in raw.schema)


def apply_positional(raw: pa.Table, schema: TableSchema) -> pa.Table:
    """File column ``i`` as table column ``i``, as DuckDB binds a file with neither mapping nor field ids
    (ducklake-format-2.md §1.2: ``CreatePositionalMapping``); columns past the shorter of the two are dropped. A
    schema of some columns only binds each by its place in the whole table (``schema.positions``)."""
    places = schema.positions if schema.positions is not None else tuple(range(len(schema.columns)))
    bound = [(i, c) for i, c in zip(places, schema.columns, strict=True) if i < raw.num_columns]
    fields = [_tagged(raw.schema.field(i).name, raw.schema.field(i).type, c.column_id) for i, c in bound]
    return table_of([raw.column(i) for i, _ in bound], pa.schema(fields), raw.num_rows)


__all__ = [
    "HIVE_NULL",
    "apply_name_mapping",
    "apply_positional",
    "conform_foreign",
    "hive_values",
    "partition_array",
    "without_field_ids",
]
