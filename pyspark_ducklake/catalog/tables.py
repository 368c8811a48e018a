"""SQLAlchemy Core definitions of the DuckLake catalog tables (format 1.0, and what 1.1 adds).

Columns are in the order of the reference's ``GetCreateTableStatements`` so that positional readers (and
``INSERT ... VALUES``) see the same layout. Only the five PRIMARY KEYs the reference declares exist.

The module-level tables are the 1.0 layout, which every version has: queries name them whatever the catalog's
version. What 1.1 adds (``row_group_count`` at the end of the two file tables, ``ducklake_view_column_tag``) lives in
:data:`metadata_v1_1`; :func:`catalog_metadata` gives the whole set a version creates, :func:`data_file_table` and
:func:`delete_file_table` the tables a version's inserts go to.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Column, MetaData, String, Table

from pyspark_ducklake.catalog.format_version import FormatVersion
from pyspark_ducklake.catalog.sqltypes import (
    CatalogInteger,
    DuckLakeBoolean,
    DuckLakeTimestampTZ,
    DuckLakeUUID,
    name_columns,
)

metadata = MetaData()


def _id(name: str, primary_key: bool = False) -> Column[int]:
    return Column(name, CatalogInteger(), primary_key=primary_key, autoincrement=False)


def _str(name: str, nullable: bool = True) -> Column[str]:
    return Column(name, String, nullable=nullable)


def _bool(name: str) -> Column[bool]:
    return Column(name, DuckLakeBoolean())


ducklake_metadata = Table(
    "ducklake_metadata", metadata, _str("key", False), _str("value", False), _str("scope"), _id("scope_id")
)
ducklake_snapshot = Table(
    "ducklake_snapshot",
    metadata,
    _id("snapshot_id", True),
    Column("snapshot_time", DuckLakeTimestampTZ),
    _id("schema_version"),
    _id("next_catalog_id"),
    _id("next_file_id"),
)
ducklake_snapshot_changes = Table(
    "ducklake_snapshot_changes",
    metadata,
    _id("snapshot_id", True),
    _str("changes_made"),
    _str("author"),
    _str("commit_message"),
    _str("commit_extra_info"),
)
ducklake_schema = Table(
    "ducklake_schema",
    metadata,
    _id("schema_id", True),
    Column("schema_uuid", DuckLakeUUID),
    _id("begin_snapshot"),
    _id("end_snapshot"),
    _str("schema_name"),
    _str("path"),
    _bool("path_is_relative"),
)
ducklake_table = Table(
    "ducklake_table",
    metadata,
    _id("table_id"),
    Column("table_uuid", DuckLakeUUID),
    _id("begin_snapshot"),
    _id("end_snapshot"),
    _id("schema_id"),
    _str("table_name"),
    _str("path"),
    _bool("path_is_relative"),
)
ducklake_view = Table(
    "ducklake_view",
    metadata,
    _id("view_id"),
    Column("view_uuid", DuckLakeUUID),
    _id("begin_snapshot"),
    _id("end_snapshot"),
    _id("schema_id"),
    _str("view_name"),
    _str("dialect"),
    _str("sql"),
    _str("column_aliases"),
)
ducklake_tag = Table(
    "ducklake_tag", metadata, _id("object_id"), _id("begin_snapshot"), _id("end_snapshot"), _str("key"), _str("value")
)
ducklake_column_tag = Table(
    "ducklake_column_tag",
    metadata,
    _id("table_id"),
    _id("column_id"),
    _id("begin_snapshot"),
    _id("end_snapshot"),
    _str("key"),
    _str("value"),
)


def _data_file_columns() -> list[Column[Any]]:
    return [
        _id("data_file_id", True),
        _id("table_id"),
        _id("begin_snapshot"),
        _id("end_snapshot"),
        _id("file_order"),
        _str("path"),
        _bool("path_is_relative"),
        _str("file_format"),
        _id("record_count"),
        _id("file_size_bytes"),
        _id("footer_size"),
        _id("row_id_start"),
        _id("partition_id"),
        _str("encryption_key"),
        _id("mapping_id"),
        _id("partial_max"),
    ]


ducklake_data_file = Table("ducklake_data_file", metadata, *_data_file_columns())

ducklake_file_column_stats = Table(
    "ducklake_file_column_stats",
    metadata,
    _id("data_file_id"),
    _id("table_id"),
    _id("column_id"),
    _id("column_size_bytes"),
    _id("value_count"),
    _id("null_count"),
    _str("min_value"),
    _str("max_value"),
    _bool("contains_nan"),
    _str("extra_stats"),
)
ducklake_file_variant_stats = Table(
    "ducklake_file_variant_stats",
    metadata,
    _id("data_file_id"),
    _id("table_id"),
    _id("column_id"),
    _str("variant_path"),
    _str("shredded_type"),
    _id("column_size_bytes"),
    _id("value_count"),
    _id("null_count"),
    _str("min_value"),
    _str("max_value"),
    _bool("contains_nan"),
    _str("extra_stats"),
)


def _delete_file_columns() -> list[Column[Any]]:
    return [
        _id("delete_file_id", True),
        _id("table_id"),
        _id("begin_snapshot"),
        _id("end_snapshot"),
        _id("data_file_id"),
        _str("path"),
        _bool("path_is_relative"),
        _str("format"),
        _id("delete_count"),
        _id("file_size_bytes"),
        _id("footer_size"),
        _str("encryption_key"),
        _id("partial_max"),
    ]


ducklake_delete_file = Table("ducklake_delete_file", metadata, *_delete_file_columns())

ducklake_column = Table(
    "ducklake_column",
    metadata,
    _id("column_id"),
    _id("begin_snapshot"),
    _id("end_snapshot"),
    _id("table_id"),
    _id("column_order"),
    _str("column_name"),
    _str("column_type"),
    _str("initial_default"),
    _str("default_value"),
    _bool("nulls_allowed"),
    _id("parent_column"),
    _str("default_value_type"),
    _str("default_value_dialect"),
)
ducklake_table_stats = Table(
    "ducklake_table_stats",
    metadata,
    _id("table_id"),
    _id("record_count"),
    _id("next_row_id"),
    _id("file_size_bytes"),
)
ducklake_table_column_stats = Table(
    "ducklake_table_column_stats",
    metadata,
    _id("table_id"),
    _id("column_id"),
    _bool("contains_null"),
    _bool("contains_nan"),
    _str("min_value"),
    _str("max_value"),
    _str("extra_stats"),
)
ducklake_partition_info = Table(
    "ducklake_partition_info",
    metadata,
    _id("partition_id"),
    _id("table_id"),
    _id("begin_snapshot"),
    _id("end_snapshot"),
)
ducklake_partition_column = Table(
    "ducklake_partition_column",
    metadata,
    _id("partition_id"),
    _id("table_id"),
    _id("partition_key_index"),
    _id("column_id"),
    _str("transform"),
)
ducklake_file_partition_value = Table(
    "ducklake_file_partition_value",
    metadata,
    _id("data_file_id"),
    _id("table_id"),
    _id("partition_key_index"),
    _str("partition_value"),
)
ducklake_files_scheduled_for_deletion = Table(
    "ducklake_files_scheduled_for_deletion",
    metadata,
    _id("data_file_id"),
    _str("path"),
    _bool("path_is_relative"),
    Column("schedule_start", DuckLakeTimestampTZ),
)
ducklake_inlined_data_tables = Table(
    "ducklake_inlined_data_tables", metadata, _id("table_id"), _str("table_name"), _id("schema_version")
)
ducklake_column_mapping = Table("ducklake_column_mapping", metadata, _id("mapping_id"), _id("table_id"), _str("type"))
ducklake_name_mapping = Table(
    "ducklake_name_mapping",
    metadata,
    _id("mapping_id"),
    _id("column_id"),
    _str("source_name"),
    _id("target_field_id"),
    _id("parent_column"),
    _bool("is_partition"),
)
ducklake_schema_versions = Table(
    "ducklake_schema_versions", metadata, _id("begin_snapshot"), _id("schema_version"), _id("table_id")
)
ducklake_macro = Table(
    "ducklake_macro",
    metadata,
    _id("schema_id"),
    _id("macro_id"),
    _str("macro_name"),
    _id("begin_snapshot"),
    _id("end_snapshot"),
)
ducklake_macro_impl = Table(
    "ducklake_macro_impl", metadata, _id("macro_id"), _id("impl_id"), _str("dialect"), _str("sql"), _str("type")
)
ducklake_macro_parameters = Table(
    "ducklake_macro_parameters",
    metadata,
    _id("macro_id"),
    _id("impl_id"),
    _id("column_id"),
    _str("parameter_name"),
    _str("parameter_type"),
    _str("default_value"),
    _str("default_value_type"),
)
ducklake_sort_info = Table(
    "ducklake_sort_info", metadata, _id("sort_id"), _id("table_id"), _id("begin_snapshot"), _id("end_snapshot")
)
ducklake_sort_expression = Table(
    "ducklake_sort_expression",
    metadata,
    _id("sort_id"),
    _id("table_id"),
    _id("sort_key_index"),
    _str("expression"),
    _str("dialect"),
    _str("sort_direction"),
    _str("null_order"),
)


# What DuckLake 1.1 adds (the reference's DuckLakeMetadataManagerV1_1): the 1.0 tables, the two file tables with
# row_group_count as their last column, and the view column tags.
for _table in metadata.tables.values():
    name_columns(_table)
metadata_v1_1 = MetaData()
for _table in metadata.tables.values():
    if _table.name not in ("ducklake_data_file", "ducklake_delete_file"):
        _table.to_metadata(metadata_v1_1)
ducklake_data_file_v1_1 = Table("ducklake_data_file", metadata_v1_1, *_data_file_columns(), _id("row_group_count"))
ducklake_delete_file_v1_1 = Table(
    "ducklake_delete_file", metadata_v1_1, *_delete_file_columns(), _id("row_group_count")
)
ducklake_view_column_tag = Table(
    "ducklake_view_column_tag",
    metadata_v1_1,
    _id("view_id"),
    _str("column_name"),
    _id("begin_snapshot"),
    _id("end_snapshot"),
    _str("key"),
    _str("value"),
)


for _table in metadata_v1_1.tables.values():
    name_columns(_table)
del _table


def catalog_metadata(fmt: FormatVersion) -> MetaData:
    """Every fixed table of a catalog of format ``fmt``, to create it."""
    return metadata_v1_1 if fmt.row_group_counts else metadata


def data_file_table(fmt: FormatVersion) -> Table:
    """``ducklake_data_file`` with the columns a catalog of format ``fmt`` has (for inserts)."""
    return ducklake_data_file_v1_1 if fmt.row_group_counts else ducklake_data_file


def delete_file_table(fmt: FormatVersion) -> Table:
    """``ducklake_delete_file`` with the columns a catalog of format ``fmt`` has (for inserts)."""
    return ducklake_delete_file_v1_1 if fmt.row_group_counts else ducklake_delete_file


def inlined_system_columns(names: tuple[str, str, str]) -> list[Column[Any]]:
    """The three columns every inlined-data table starts with, spelled ``names`` (a format's
    :attr:`~FormatVersion.inlined_system_columns`, or as a table has them), keyed ``row_id``, ``begin_snapshot`` and
    ``end_snapshot`` whatever the spelling."""
    keys = ("row_id", "begin_snapshot", "end_snapshot")
    return [Column(name, CatalogInteger(), key=key) for name, key in zip(names, keys, strict=True)]


def inlined_data_table_name(table_id: int, schema_version: int) -> str:
    return f"ducklake_inlined_data_{table_id}_{schema_version}"


def inlined_delete_table_name(table_id: int) -> str:
    return f"ducklake_inlined_delete_{table_id}"


def inlined_delete_table(table_id: int, md: MetaData | None = None) -> Table:
    """``ducklake_inlined_delete_<tid>(file_id, row_id, begin_snapshot)``: small deletes against Parquet files."""
    return name_columns(
        Table(
            inlined_delete_table_name(table_id), md or MetaData(), _id("file_id"), _id("row_id"), _id("begin_snapshot")
        )
    )
