"""``spark.read.format("ducklake").option("metadata", "snapshots" | "table_info" | "files")``: the lake's metadata
as a DataFrame with the columns of DuckDB's ``ducklake_snapshots()`` / ``ducklake_table_info()`` /
``ducklake_list_files()`` (table/metadata.py builds them; ``files`` needs the table as ``load()``'s argument).
Read once on the driver's planner and handed to one task: metadata tables are small."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, InputPartition
from pyspark.sql.pandas.types import from_arrow_schema
from pyspark.sql.types import StructType

from pyspark_ducklake.exceptions import InvalidOptionError
from pyspark_ducklake.options import option_as_int, option_as_snapshot, option_value
from pyspark_ducklake.spark.lake_config import LakeConfig
from pyspark_ducklake.table.metadata import KINDS

METADATA = "metadata"


def metadata_kind(options: dict[str, str]) -> str | None:
    """The option ``metadata``'s value (None: a read of the table's rows).

    Raises:
        InvalidOptionError: not one of ``snapshots``, ``table_info``, ``files``.
    """
    value = option_value(options, METADATA)
    if value is None:
        return None
    kind = str(value).strip().lower()
    if kind not in KINDS:
        raise InvalidOptionError(f"option metadata must be one of {', '.join(KINDS)}, got {value!r}")
    return kind


def check_listing_options(options: dict[str, str], kind: str | None) -> None:
    """Options ``limit`` and ``since`` bound the snapshot listing and nothing else.

    Raises:
        InvalidOptionError: one of them given to another read.
    """
    for key in ("limit", "since"):
        if kind != "snapshots" and option_value(options, key) is not None:
            raise InvalidOptionError(
                f"option {key} bounds the listing of snapshots: it goes with option metadata 'snapshots' (to limit "
                "the rows of another read, use the DataFrame's limit())"
            )


def metadata_schema(kind: str) -> StructType:
    """The Spark schema of a metadata table (DuckDB's column names and types)."""
    return from_arrow_schema(KINDS[kind])


def metadata_table(config: LakeConfig, kind: str, identifier: str | None, options: dict[str, str]) -> pa.Table:
    """The metadata table, read now.

    Raises:
        InvalidOptionError: ``files`` without a table, or a table given to the lake-wide ones.
    """
    if kind == "files" and not identifier:
        raise InvalidOptionError("option metadata 'files' lists one table's files: give it, load('main.events')")
    if kind != "files" and identifier:
        raise InvalidOptionError(f"option metadata {kind!r} is about the whole lake: give no table to load()")
    lake = config.connect(keep_engine=True)
    try:
        if kind == "snapshots":
            limit = option_as_int(options, "limit", None, minimum=1)
            return lake.snapshots_table(limit=limit, since=option_as_snapshot(options, "since"))
        if kind == "table_info":
            return lake.table_info()
        assert identifier is not None
        return lake.list_files(identifier, snapshot=option_as_snapshot(options, "snapshot"))
    finally:
        lake.close()


class MetadataReader(DataSourceReader):
    """One partition holding the rows read when the reader was made."""

    def __init__(self, table: pa.Table) -> None:
        maps = [pa.types.is_map(f.type) for f in table.schema]
        self.rows = [
            tuple(dict(v) if is_map and v is not None else v for v, is_map in zip(r.values(), maps, strict=True))
            for r in table.to_pylist()
        ]

    def partitions(self) -> list[InputPartition]:
        return [InputPartition(0)]

    def read(self, partition: InputPartition) -> Iterator[tuple[Any, ...]]:
        yield from self.rows


__all__ = ["METADATA", "MetadataReader", "metadata_kind", "metadata_schema", "metadata_table"]
