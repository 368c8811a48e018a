"""DuckLake tables as DataFrames read by Spark's own Parquet reader: the fast read path.

``read_table(spark, "main.events")`` plans the read on the driver from the catalog (one snapshot, its data files,
delete files and inlined rows) and builds a plain DataFrame out of it:

- data files through ``spark.read.parquet`` with a schema whose fields carry ``parquet.field.id`` (the DuckLake
  column ids) and ``spark.sql.parquet.fieldId.read.enabled=true``, so renamed columns and struct fields are found by
  id, never by name;
- deleted rows removed by their (``_metadata.file_path``, ``_metadata.row_index``): a filter for few positions or
  ranges of the delete files (and of inlined deletes) at the snapshot, a filter on a bitmap of positions for up to
  about 7.3M rows of files with deletes, else a left anti join on one bigint key
  (``spark/deleted_rows.py``); rows a flush or merge wrote for later snapshots (``partial_max``) removed by their
  ``_ducklake_internal_snapshot_id``;
- columns older files lack read as the column's initial default, columns whose type was promoted since a file was
  written are read in the file's type and cast;
- the inlined rows of the catalog unioned in from Arrow, converted exactly as the data source converts them.

What Spark's reader cannot read exactly makes the whole read fall back to the Python data source
(``spark.read.format("ducklake")``) at the same snapshot, with the reason logged (logger
``pyspark_ducklake.native``) and kept on the plan: columns of type TIME, TIMESTAMP_NS, INTERVAL, UUID, HUGEINT,
UHUGEINT or VARIANT, and GEOMETRY nested in a list, struct or map (a top-level GEOMETRY is read as
``GeometryType(0)``, DuckDB's ISO WKB byte for byte); nested and GEOMETRY columns of files registered with a name
mapping (``ducklake_add_data_files``, no field ids: their top-level columns are read by name, partition values from
the path; another writer's WKB may be EWKB, which Spark refuses), and such files with column names differing only
in case (Spark matches names case-insensitively); files without field ids or a mapping; files whose stored type
is one of those or is not the table's type or a promotion of it; struct fields added with a default or changed in
type since a file was written;
data paths whose scheme Spark's Hadoop has no filesystem for (``s3://`` without hadoop-aws) or that contain glob
characters; encrypted lakes (Spark decrypts Parquet only through a KMS factory class on the JVM, and not DuckDB's
files, which have no AAD); Spark Connect sessions (the paths of deleted rows are qualified by the JVM's Hadoop
filesystem, which a Connect client cannot call). A Python data source cannot hand Spark a JVM plan (PySpark 4.3's
``DataSourceReader`` only yields rows or Arrow batches), so ``spark.read.format("ducklake")`` itself stays on the
slower path.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import threading
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import reduce
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import Column as SparkColumn
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from pyspark_ducklake.batch.reader import SNAPSHOT_OPTIONS, TIMESTAMP_OPTIONS, resolve_read_snapshot
from pyspark_ducklake.catalog import reader as R
from pyspark_ducklake.catalog.types import Column, TableSchema, can_promote, ducklake_type
from pyspark_ducklake.exceptions import InvalidOptionError, UnsupportedTypeError
from pyspark_ducklake.io.fileio import filesystem
from pyspark_ducklake.io.parquet import field_id
from pyspark_ducklake.options import FEED, Entry, check_options, options_for, parse_column_names, parse_snapshot_id
from pyspark_ducklake.spark.column_option import selected_columns
from pyspark_ducklake.spark.connect import is_connect
from pyspark_ducklake.spark.deleted_rows import FileDeletes, qualified_paths, remove_deleted
from pyspark_ducklake.spark.lake_config import LakeConfig, spark_conf
from pyspark_ducklake.spark.type_mapping import arrow_schema_for_spark, spark_schema, spark_type, to_spark_batch
from pyspark_ducklake.spark.unreadable import with_unreadable
from pyspark_ducklake.table.conform import default_array
from pyspark_ducklake.table.identifiers import parse_identifier
from pyspark_ducklake.table.name_mapped import hive_values, partition_array
from pyspark_ducklake.table.projection import project, readable
from pyspark_ducklake.table.scan import (
    SNAPSHOT_ID_FIELD_ID,
    FileTask,
    plan_scan,
    read_delete_positions,
    table_columns,
)

log = logging.getLogger("pyspark_ducklake.native")

FIELD_ID = "parquet.field.id"
FIELD_ID_READ_CONF = "spark.sql.parquet.fieldId.read.enabled"
# DuckLake types whose Parquet form Spark's reader refuses or reads differently from DuckDB.
# variant: Spark 4.3's reader fails on DuckDB's shredded UUID fields and keeps a top-level variant null non-NULL
NOT_NATIVE_TYPES = frozenset(
    {"time", "timetz", "time_ns", "timestamp_ns", "interval", "uuid", "int128", "uint128", "variant"}
)
# Read by Spark's reader only as a top-level column: Spark 4.3 reads the ISO WKB DuckDB and this library write
# (``Geometry`` logical type) byte for byte as GeometryType(0); nested geometries go through the data source.
TOP_LEVEL_ONLY_TYPES = frozenset({"geometry"})
GLOB_CHARACTERS = frozenset("*?[]{}\\")
FOOTER_THREADS = 8
# Added files in more distinct partitions than this (one Parquet read each) go through the data source instead.
MAPPED_GROUPS_MAX = 256

_SNAPSHOT_COLUMN = "__ducklake_snapshot"


class _NotNative(Exception):
    """Raised while planning: the reason Spark's Parquet reader cannot read this table exactly."""


@dataclass(frozen=True)
class ColumnRead:
    """How one table column comes out of a group of files."""

    column: Column
    # The Spark type to read the column with (ids attached when the read schema is built); None: the files lack
    # the column, which then reads as its initial default.
    read_type: T.DataType | None
    cast: bool = False
    # Files registered with a name mapping (no field ids): the file's column to read by name, or, for a hive
    # partition column, its value from the file's path (DuckDB's text; None with ``partition`` is NULL).
    source: str | None = None
    partition: bool = False
    value: str | None = None


@dataclass
class FileGroup:
    """Files read by one ``spark.read.parquet`` call: same column layout, same row filters."""

    layout: tuple[ColumnRead, ...]
    deletes: bool
    partial: bool
    files: list[FileTask] = field(default_factory=list)


@dataclass
class NativeRead:
    """A planned read: the groups of files, the inlined rows, or why it must use the data source."""

    identifier: str
    snapshot: int
    schema: TableSchema
    options: dict[str, str]
    groups: list[FileGroup] = field(default_factory=list)
    inlined: pa.Table | None = None
    # deleted positions per data file path (only files in a group with deletes)
    deleted: dict[str, np.ndarray] = field(default_factory=dict)
    reason: str | None = None
    # Columns this library cannot read, and the table's column order: they read as an error only when selected.
    unreadable: tuple[Column, ...] = ()
    order: tuple[str, ...] = ()

    @property
    def native(self) -> bool:
        return self.reason is None

    def dataframe(self, spark: SparkSession) -> DataFrame:
        """The DataFrame of this read (the data source's, pinned at the same snapshot, when not native)."""
        if not self.native:
            return _data_source_frame(spark, self.identifier, self.options, self.snapshot)
        spark.conf.set(FIELD_ID_READ_CONF, "true")
        target = spark_schema(self.schema)
        parts = [_group_frame(spark, g, self, target) for g in self.groups]
        if self.inlined is not None and self.inlined.num_rows:
            batch = to_spark_batch(self.inlined, arrow_schema_for_spark(target))
            parts.append(spark.createDataFrame(pa.Table.from_batches([batch]), schema=target))
        frame = reduce(DataFrame.union, parts) if parts else spark.createDataFrame([], target)
        return with_unreadable(frame, self.unreadable, self.order) if self.unreadable else frame


def read_table(
    spark: SparkSession,
    table: str,
    *,
    snapshot: int | None = None,
    timestamp: dt.datetime | str | None = None,
    catalog: str | None = None,
    data_path: str | None = None,
    columns: Sequence[str] | str | None = None,
    options: Mapping[str, str] | None = None,
) -> DataFrame:
    """The table at the latest snapshot, a snapshot id, or the newest snapshot at or before ``timestamp``.

    Data files are read by Spark's own Parquet reader (see the module docstring); tables it cannot read exactly are
    read through the ``ducklake`` data source at the same snapshot instead. ``catalog`` and ``data_path`` default to
    the ``spark.ducklake.*`` conf, then the environment, as for the data source; ``options`` takes the data
    source's other options (``snapshot``/``versionAsOf``, ``timestamp``/``timestampAsOf``, S3 settings).
    ``columns`` (names, or the data source's ``columns`` option text ``"id, name"``) reads only those top-level
    columns, in the table's order: the others are neither read nor converted on any path, so a column this library
    cannot read (a HUGEINT holding DuckDB's extremes, a type it does not know) or one that makes Spark's reader fall
    back (see the module docstring) stays out of the read.

    Sets ``spark.sql.parquet.fieldId.read.enabled=true`` on the session (columns are matched by field id); it only
    changes reads whose schema carries field ids, and must stay on while the DataFrame is used.
    """
    return plan_read(
        spark,
        table,
        snapshot=snapshot,
        timestamp=timestamp,
        catalog=catalog,
        data_path=data_path,
        columns=columns,
        options=options,
    ).dataframe(spark)


def plan_read(
    spark: SparkSession,
    table: str,
    *,
    snapshot: int | None = None,
    timestamp: dt.datetime | str | None = None,
    catalog: str | None = None,
    data_path: str | None = None,
    columns: Sequence[str] | str | None = None,
    options: Mapping[str, str] | None = None,
) -> NativeRead:
    """Plan :func:`read_table` on the driver without building the DataFrame (``.reason`` says why not native)."""
    opts = _read_options(snapshot, timestamp, catalog, data_path, columns, options)
    config = LakeConfig.resolve(opts, spark_conf(spark).get)
    lake = config.connect()
    try:
        snap = resolve_read_snapshot(lake, opts)
        schema_name, table_name = parse_identifier(table)
        with lake.engine.connect() as conn:
            entry = R.table_by_name(conn, schema_name, table_name, snap)
            selected = selected_columns(opts, R.table_schema(conn, entry.table_id, snap), table)
            full = project(R.table_schema(conn, entry.table_id, snap), selected)  # the `columns` option's only
            unreadable = tuple(c for c in full.columns if not readable(c))
            names = [c.name for c in full.columns if c not in unreadable] if unreadable or selected else None
            scan = plan_scan(conn, entry, snap, lake.data_path, fmt=lake.info.format, columns=names)
            altered = R.columns_changed_since_creation(conn, entry)
        data_path_root = lake.data_path
        encrypted = lake.catalog_info.encrypted
    finally:
        lake.close()
    pinned = {k: v for k, v in opts.items() if k.lower() not in _SNAPSHOT_KEYS}
    read = NativeRead(table, snap, scan.schema, pinned, unreadable=unreadable, order=tuple(full.names()))
    try:
        if unreadable and not scan.schema.columns:
            raise _NotNative("no column of the table can be read")
        if encrypted:  # Spark's Parquet decryption needs a KMS class on the JVM; the data source decrypts instead
            raise _NotNative("the lake is encrypted")
        _check_types(scan.schema)
        _check_paths(spark, [t.file.path for t in scan.files], data_path_root)
        read.groups = _group_files(scan.files, scan.schema, altered, config.storage_options)
        read.deleted = _deleted_positions(read.groups, snap, config.storage_options)
        inlined = scan.inlined.data if scan.inlined is not None else None
        read.inlined = table_columns(inlined, scan.schema) if inlined is not None else None
    except _NotNative as e:
        read.reason = str(e)
        read.groups, read.deleted, read.inlined = [], {}, None
        log.info("reading %s at snapshot %d through the ducklake data source: %s", table, snap, e)
    return read


_FEED_KEYS = frozenset(s.lower() for o in options_for(Entry.READ) if o.section == FEED for s in o.spellings)
_SNAPSHOT_KEYS = frozenset(k.lower() for k in (*SNAPSHOT_OPTIONS, *TIMESTAMP_OPTIONS))


def _read_options(
    snapshot: int | None,
    timestamp: dt.datetime | str | None,
    catalog: str | None,
    data_path: str | None,
    columns: Sequence[str] | str | None,
    options: Mapping[str, str] | None,
) -> dict[str, str]:
    opts = {str(k): str(v) for k, v in (options or {}).items()}
    given = {
        "snapshot": None if snapshot is None else str(parse_snapshot_id(snapshot, "snapshot", text=False)),
        "timestamp": timestamp.isoformat() if isinstance(timestamp, dt.datetime) else timestamp,
        "catalog": catalog,
        "dataPath": data_path,
        "columns": None if columns is None else _columns_text(columns),
    }
    for key, value in given.items():
        if value is None:
            continue
        if key.lower() in {k.lower() for k in opts}:
            raise InvalidOptionError(f"read_table() got option {key} both as an argument and in options; give it once")
        opts[key] = str(value)
    check_options(opts, Entry.READ)
    feed = [k for k in opts if k.lower() in _FEED_KEYS]
    if feed:
        raise InvalidOptionError(
            f"read_table() reads the table, not its change feed (option {feed[0]!r}); read the change feed with "
            "spark.read.format('ducklake').option('readChangeFeed', 'true')"
        )
    return opts


def _columns_text(columns: Sequence[str] | str) -> str:
    """The ``columns`` argument as the data source's option text (the fallback passes it on)."""
    names = parse_column_names(columns if isinstance(columns, str) else list(columns), "columns")
    comma = next((n for n in names if "," in n), None)
    if comma is not None:
        raise InvalidOptionError(
            f"read_table() cannot select column {comma!r}: the columns option is comma-separated and the data source "
            "it falls back to takes no name with a comma; rename the column or read every column"
        )
    return ", ".join(names)


def _data_source_frame(spark: SparkSession, identifier: str, options: dict[str, str], snapshot: int) -> DataFrame:
    from pyspark_ducklake.datasource import FORMAT_NAME, register

    register(spark)
    reader = spark.read.format(FORMAT_NAME)
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.option("snapshot", str(snapshot)).load(identifier)


# --- planning ---------------------------------------------------------------------------------------------------


def _check_types(schema: TableSchema) -> None:
    for top in schema.columns:
        for c in top.walk():
            where = top.name if c is top else f"{top.name} ({c.name})"
            if c.type in NOT_NATIVE_TYPES:
                raise _NotNative(f"column {where} has type {c.type}, which Spark's Parquet reader cannot read exactly")
            if c.type in TOP_LEVEL_ONLY_TYPES and c is not top:
                raise _NotNative(f"column {where} nests a {c.type}, which the fast path reads at the top level only")
            try:
                spark_type(c)
            except UnsupportedTypeError as e:
                raise _NotNative(str(e)) from e


def _check_paths(spark: SparkSession, paths: list[str], data_path: str) -> None:
    schemes = {_scheme(p) for p in [*paths, data_path]}
    for p in paths:
        if GLOB_CHARACTERS & set(p.split("://", 1)[-1]):
            raise _NotNative(f"data file path {p} contains glob characters, which spark.read.parquet would expand")
    if is_connect(spark):
        # Deleted rows are matched by the path Spark's Hadoop filesystem qualifies, which only a JVM can tell
        raise _NotNative("a Spark Connect session has no JVM on this side to plan the file paths with")
    try:
        jvm = _jvm(spark)
    except Exception as e:  # a session whose JVM has gone
        raise _NotNative("no JVM in this session") from e
    conf = spark.sparkContext._jsc.hadoopConfiguration()
    for scheme in sorted(schemes):
        try:
            jvm.org.apache.hadoop.fs.FileSystem.getFileSystemClass(scheme, conf)
        except Exception as e:
            raise _NotNative(
                f"Spark has no Hadoop filesystem for {scheme}:// paths (add its connector, e.g. hadoop-aws for s3a)"
            ) from e


def _jvm(spark: SparkSession) -> Any:
    jvm = spark.sparkContext._jvm
    if jvm is None:
        raise RuntimeError("the SparkContext has no JVM gateway")
    return jvm


def _scheme(path: str) -> str:
    return path.split("://", 1)[0] if "://" in path else "file"


def spark_path(path: str) -> str:
    """The path as given to ``spark.read.parquet``: local paths become absolute ``file:`` URIs (a cluster's default
    filesystem may be HDFS, while the lake's data path names the local or shared disk)."""
    if "://" in path:
        return path
    return "file:" + os.path.abspath(path)


def _group_files(
    tasks: list[FileTask], schema: TableSchema, altered: bool, storage_options: dict[str, Any] | None
) -> list[FileGroup]:
    mapped = [t for t in tasks if t.file.name_mapping is not None]
    tasks = [t for t in tasks if t.file.name_mapping is None]
    _check_foreign_files(tasks, storage_options)
    same = tuple(ColumnRead(c, spark_type(c)) for c in schema.columns)
    layouts: list[tuple[ColumnRead, ...]]
    if altered:
        footers = _footers([(t.file.path, t.file.file_size_bytes) for t in tasks], storage_options)
        layouts = [_layout(footer, schema, t.file.path) for t, footer in zip(tasks, footers, strict=True)]
    else:
        layouts = [same] * len(tasks)
    if mapped:
        footers = _footers([(t.file.path, t.file.file_size_bytes) for t in mapped], storage_options)
        layouts += [_mapped_layout(footer, schema, t) for t, footer in zip(mapped, footers, strict=True)]
        tasks += mapped
    groups: dict[tuple[Any, ...], FileGroup] = {}
    for t, layout in zip(tasks, layouts, strict=True):
        deletes = t.file.delete_file is not None or bool(t.inlined_deleted_positions)
        partial = t.file.partial_max is not None and t.file.partial_max > t.snapshot_id
        key = (layout, deletes, partial)
        if key not in groups:
            groups[key] = FileGroup(layout, deletes, partial)
        groups[key].files.append(t)
    if len(groups) > MAPPED_GROUPS_MAX:
        raise _NotNative(f"the files need {len(groups)} separate Parquet reads (added files' partition values)")
    return list(groups.values())


def _mapped_layout(footer: pa.Schema, schema: TableSchema, task: FileTask) -> tuple[ColumnRead, ...]:
    """How a file registered with a name mapping (``ducklake_add_data_files``) is read by Spark: top-level columns by
    their name in the file, partition columns as their value in the path, columns the mapping lacks as their
    default; as ``table.name_mapped`` reads it. What Spark cannot match exactly raises _NotNative."""
    path, mapping = task.file.path, task.file.name_mapping
    assert mapping is not None
    lowered = [f.name.lower() for f in footer]
    if len(set(lowered)) != len(lowered):  # Spark matches names case-insensitively
        raise _NotNative(f"data file {path} has column names differing only in case")
    nodes = {n.target_field_id: n for n in mapping.nodes}
    hive: dict[str, str | None] | None = None
    out = []
    for c in schema.columns:
        node = nodes.get(c.column_id)
        if node is None:
            if c.initial_default not in (None, "NULL") and not c.is_nested:
                _default_table([c])
            out.append(ColumnRead(c, None))
            continue
        if node.is_partition:
            hive = hive_values(path) if hive is None else hive
            if node.source_name not in hive:
                raise _NotNative(f"data file {path} lacks the partition folder of column {c.name}")
            out.append(ColumnRead(c, spark_type(c), partition=True, value=hive[node.source_name]))
            continue
        if c.is_nested or node.children:
            raise _NotNative(f"nested column {c.name} of added file {path} (fields matched by name)")
        if c.type == "geometry":  # another writer's WKB: EWKB, which Spark refuses and DuckDB reads, or big-endian
            raise _NotNative(f"geometry column {c.name} of added file {path} (WKB as another writer stored it)")
        f = next((f for f in footer if f.name == node.source_name), None)
        if f is None:
            raise _NotNative(f"data file {path} lacks column {node.source_name!r} of its name mapping")
        read_type = _stored_type(f, c, path)
        out.append(ColumnRead(c, read_type, read_type != spark_type(c), source=f.name))
    return tuple(out)


_footer_cache: dict[tuple[str, int | None], pa.Schema] = {}
_footer_lock = threading.Lock()
FOOTER_CACHE_MAX = 20_000


def _by_a_ducklake_writer(path: str) -> bool:
    """Whether the file's name is one DuckDB's or this library's writers give (those always carry field ids)."""
    parts = path.rstrip("/").rsplit("/", 2)
    return parts[-1].startswith("ducklake-") or (len(parts) > 1 and parts[-2].startswith("ducklake-spark-"))


def _check_foreign_files(tasks: list[FileTask], storage_options: dict[str, Any] | None) -> None:
    """Raise _NotNative for a file some other writer registered without field ids: it binds by position, which
    Spark's reader (matching by field id) cannot do. Only files not named by a DuckLake writer are opened."""
    foreign = [t for t in tasks if not _by_a_ducklake_writer(t.file.path)]
    if not foreign:
        return
    footers = _footers([(t.file.path, t.file.file_size_bytes) for t in foreign], storage_options)
    for t, footer in zip(foreign, footers, strict=True):
        if len(footer) and all(field_id(f) is None for f in footer):
            raise _NotNative(f"data file {t.file.path} has no field ids (its columns bind by position)")


def _footers(files: list[tuple[str, int | None]], storage_options: dict[str, Any] | None) -> list[pa.Schema]:
    """The Arrow schemas (with field ids) of data files, read in parallel and cached (files never change)."""

    def one(key: tuple[str, int | None]) -> pa.Schema:
        with _footer_lock:
            cached = _footer_cache.get(key)
        if cached is not None:
            return cached
        fs, p = filesystem(key[0], storage_options)
        with fs.open(p, "rb") as f:
            schema = pq.read_schema(f)
        with _footer_lock:
            if len(_footer_cache) >= FOOTER_CACHE_MAX:
                _footer_cache.clear()
            _footer_cache[key] = schema
        return schema

    if len(files) <= 1:
        return [one(k) for k in files]
    with ThreadPoolExecutor(min(FOOTER_THREADS, len(files))) as pool:
        return list(pool.map(one, files))


def _layout(footer: pa.Schema, schema: TableSchema, path: str) -> tuple[ColumnRead, ...]:
    by_id = {field_id(f): f for f in footer}
    out = []
    for c in schema.columns:
        f = by_id.get(c.column_id)
        if f is None:
            if c.initial_default not in (None, "NULL") and not c.is_nested:
                _default_table([c])  # fails here, while planning, when the default cannot be converted
            out.append(ColumnRead(c, None))
            continue
        read_type = _stored_type(f, c, path)
        out.append(ColumnRead(c, read_type, read_type != spark_type(c)))
    return tuple(out)


def _stored_type(f: pa.Field, column: Column, path: str) -> T.DataType:
    """The Spark type to read the file's field with: the table's, or the stored type to cast from (promotions)."""
    t = f.type
    where = f"column {column.name} of data file {path}"
    if column.is_nested:
        _check_nested(f, column, path)
        return spark_type(column)
    if pa.types.is_nested(t):
        raise _NotNative(f"{where} is stored as {t}, the table has {column.type}")
    if column.type == "geometry":
        storage = t.storage_type if isinstance(t, pa.BaseExtensionType) else t
        if not pa.types.is_binary(storage) and not pa.types.is_large_binary(storage):
            raise _NotNative(f"{where} is stored as {t}, the table has geometry")
        return spark_type(column)
    try:
        stored = ducklake_type(t, where=column.name)
    except UnsupportedTypeError as e:
        raise _NotNative(f"{where} is stored as {t}") from e
    if stored in NOT_NATIVE_TYPES:
        raise _NotNative(f"{where} is stored as {stored}, which Spark's Parquet reader cannot read exactly")
    wanted = spark_type(column)
    stored_spark = spark_type(Column(column.column_id, column.name, stored))
    if stored_spark == wanted:
        return wanted
    if can_promote(stored, column.type):
        return stored_spark
    raise _NotNative(f"{where} is stored as {stored}, which is not the table's {column.type} or a promotion of it")


def _check_nested(f: pa.Field, column: Column, path: str) -> None:
    """Nested columns must be stored as the table has them; struct fields may be missing (they read as NULL)."""
    t = f.type
    where = f"column {column.name} of data file {path}"
    if column.type == "struct" and pa.types.is_struct(t):
        by_id = {field_id(t.field(i)): t.field(i) for i in range(t.num_fields)}
        for child in column.children:
            sub = by_id.get(child.column_id)
            if sub is None:
                if child.initial_default not in (None, "NULL") and not child.is_nested:
                    raise _NotNative(f"{where}: struct field {child.name} was added with a default")
                continue
            _check_same(sub, child, path)
        return
    if column.type == "list" and (pa.types.is_list(t) or pa.types.is_large_list(t)):
        _check_same(t.value_field, column.children[0], path)
        return
    if column.type == "map" and pa.types.is_map(t):
        _check_same(t.key_field, column.children[0], path)
        _check_same(t.item_field, column.children[1], path)
        return
    raise _NotNative(f"{where} is stored as {t}, the table has {column.type}")


def _check_same(f: pa.Field, column: Column, path: str) -> None:
    if _stored_type(f, column, path) != spark_type(column):
        raise _NotNative(f"nested field {column.name} of data file {path} changed type since the file was written")


def _default_table(columns: list[Column], *, current: bool = False) -> pa.Table:
    """One row of the columns' initial defaults (``current``: defaults for new rows), in the shape Spark takes."""
    try:
        arrays = [default_array(c, 1, current=current) for c in columns]
        table = pa.Table.from_arrays(arrays, names=[c.name for c in columns])
        target = spark_schema(TableSchema(tuple(columns)))
        return pa.Table.from_batches([to_spark_batch(table, arrow_schema_for_spark(target))])
    except (ValueError, TypeError, pa.ArrowException) as e:
        raise _NotNative(f"the initial default of {', '.join(c.name for c in columns)} does not convert: {e}") from e


def _deleted_positions(
    groups: list[FileGroup], snapshot: int, storage_options: dict[str, Any] | None
) -> dict[str, np.ndarray]:
    """Each file's deleted positions at the snapshot (sorted, distinct, below its record count), files of groups with
    deletes only."""
    tasks = [t for g in groups if g.deletes for t in g.files]

    def one(task: FileTask) -> np.ndarray:
        positions = np.asarray(task.inlined_deleted_positions, dtype=np.int64)
        if task.file.delete_file is not None:
            found = read_delete_positions(
                task.file.delete_file, snapshot, storage_options, row_count=task.file.record_count
            )
            positions = np.concatenate((positions, np.asarray(found, dtype=np.int64)))
        positions = np.unique(positions)  # sorted
        return positions[positions < task.file.record_count]

    if len(tasks) <= 1:
        found = [one(t) for t in tasks]
    else:
        with ThreadPoolExecutor(min(FOOTER_THREADS, len(tasks))) as pool:
            found = list(pool.map(one, tasks))
    return {t.file.path: p for t, p in zip(tasks, found, strict=True)}


# --- the DataFrame ----------------------------------------------------------------------------------------------


def with_field_ids(column: Column, dtype: T.DataType) -> T.DataType:
    """``dtype`` with ``parquet.field.id`` on every struct field below it (lists and maps carry none in Spark)."""
    if column.type == "struct" and isinstance(dtype, T.StructType):
        return T.StructType(
            [
                T.StructField(f.name, with_field_ids(c, f.dataType), f.nullable, {FIELD_ID: c.column_id})
                for c, f in zip(column.children, dtype.fields, strict=True)
            ]
        )
    if column.type == "list" and isinstance(dtype, T.ArrayType):
        return T.ArrayType(with_field_ids(column.children[0], dtype.elementType), dtype.containsNull)
    if column.type == "map" and isinstance(dtype, T.MapType):
        key, value = column.children
        return T.MapType(
            with_field_ids(key, dtype.keyType), with_field_ids(value, dtype.valueType), dtype.valueContainsNull
        )
    return dtype


def _group_frame(spark: SparkSession, group: FileGroup, read: NativeRead, target: T.StructType) -> DataFrame:
    fields = [
        # By name (no field id) for an added file's column, by field id otherwise.
        T.StructField(r.source, r.read_type)
        if r.source is not None
        else T.StructField(r.column.name, with_field_ids(r.column, r.read_type), True, {FIELD_ID: r.column.column_id})
        for r in group.layout
        if r.read_type is not None and not r.partition
    ]
    if group.partial:
        fields.append(T.StructField(_SNAPSHOT_COLUMN, T.LongType(), True, {FIELD_ID: SNAPSHOT_ID_FIELD_ID}))
    reader = (
        spark.read.schema(T.StructType(fields))
        .option("datetimeRebaseMode", "CORRECTED")
        .option("int96RebaseMode", "CORRECTED")
    )
    df = reader.parquet(*[spark_path(t.file.path) for t in group.files])
    if group.deletes:
        keys = qualified_paths(spark, [spark_path(t.file.path) for t in group.files])
        empty = np.zeros(0, np.int64)
        files = [
            FileDeletes(key, t.file.record_count, read.deleted.get(t.file.path, empty))
            for t, key in zip(group.files, keys, strict=True)
        ]
        df = remove_deleted(spark, df, files)
    if group.partial:
        df = df.where(F.col(_SNAPSHOT_COLUMN).isNull() | (F.col(_SNAPSHOT_COLUMN) <= F.lit(read.snapshot)))
    columns = []
    for r, f in zip(group.layout, target.fields, strict=True):
        name = f.name if r.source is None else r.source
        if r.partition:
            columns.append(partition_literal(r.column, r.value, f.dataType).alias(f.name))
        elif r.read_type is None:
            columns.append(default_literal(r.column, f.dataType).alias(f.name))
        elif r.cast:
            columns.append(column_named(name).cast(f.dataType).alias(f.name))
        else:
            columns.append(column_named(name).alias(f.name))
    return df.select(*columns)


def column_named(name: str) -> SparkColumn:
    """The top-level column ``name``, backquoted: ``F.col('a.b')`` means field b of a column a."""
    return F.col("`" + name.replace("`", "``") + "`")


def default_literal(column: Column, dtype: T.DataType, *, current: bool = False) -> SparkColumn:
    """The column's initial default (``current``: its default for new rows) as a Spark literal of ``dtype``."""
    has = _has_default(column, current=current)
    value = _default_table([column], current=current).column(0)[0].as_py() if has else None
    return _literal(value, dtype)


def partition_literal(column: Column, text: str | None, dtype: T.DataType) -> SparkColumn:
    """An added file's partition value from its path (DuckDB's text, parsed as the data source parses it) as a
    Spark literal of ``dtype``.

    Raises:
        _NotNative: the text is not a value of the column's type (the data source raises the read's error).
    """
    if text is None:
        return F.lit(None).cast(dtype)
    try:
        table = pa.table({column.name: partition_array(column, text, 1)})
        batch = to_spark_batch(table, arrow_schema_for_spark(spark_schema(TableSchema((column,)))))
    except (ValueError, TypeError, ArithmeticError, pa.ArrowException) as e:
        raise _NotNative(f"partition value {text!r} of column {column.name} does not convert: {e}") from e
    return _literal(batch.column(0)[0].as_py(), dtype)


def _literal(value: Any, dtype: T.DataType) -> SparkColumn:
    if value is None:
        return F.lit(None).cast(dtype)
    if isinstance(dtype, T.TimestampType):
        return F.timestamp_micros(F.lit(_epoch_micros(value)))
    if isinstance(dtype, T.TimestampNTZType):
        return F.expr(f"TIMESTAMP_NTZ'{value.isoformat(sep=' ', timespec='microseconds')}'")
    return F.lit(value).cast(dtype)


def _epoch_micros(value: dt.datetime) -> int:
    delta = value - dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def _has_default(column: Column, *, current: bool = False) -> bool:
    raw = column.default_value if current else column.initial_default
    return raw not in (None, "NULL") and not column.is_nested


__all__ = ["NativeRead", "plan_read", "read_table", "spark_path", "with_field_ids"]
