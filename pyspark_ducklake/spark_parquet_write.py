"""Writing a DataFrame to a DuckLake table with Spark's own Parquet writer: the fast write path.

``write_table(df, "main.events")`` checks the DataFrame against the table on the driver (as the data source does),
lets Spark write the Parquet files itself into a new folder under the table's folder, then, on the driver:

- gives every column, struct field, list element and map key/value its DuckLake field id by rewriting each file's
  footer (Spark can only attach ids to struct fields, and DuckDB cannot bind a list element or map key without
  one); the data pages do not move;
- takes each file's record count, sizes and per-column statistics from the footer, rendered exactly as the data
  source's writer renders them (a column whose footer lacks min/max, or holds a NaN, is read back to compute them);
- commits all files as one snapshot, exactly as ``df.write.format("ducklake")`` does.

Spark writes timestamps as ``TIMESTAMP_MICROS`` (not INT96), dates and timestamps in the proleptic Gregorian
calendar and decimals in the standard form: the session conf is set for the duration of the write (see
``WRITE_CONF``) and restored after it.

Writes that this path cannot make exact fall back to the ``ducklake`` data source (``df.write.format("ducklake")``),
with the reason logged (logger ``pyspark_ducklake.native``) and returned: partitioned tables, column types Spark
cannot write as DuckLake stores them (unsigned, HUGEINT, TIME, TIMESTAMP_S/MS/NS, INTERVAL, UUID, JSON; GEOMETRY: Spark
writes a geometry's WKB as given, big-endian or EWKB, where DuckDB gives back little-endian ISO WKB), sorted tables
(``SET SORTED BY``: the data source sorts each file's rows as DuckDB orders them), NOT NULL columns, DataFrame
columns that need more than a lossless promotion, data paths that are not on the local filesystem
(the footers are rewritten in place), encrypted lakes (Spark encrypts Parquet only through a KMS
factory class on the JVM; the data source encrypts each file with its own key, as DuckDB does) and Spark Connect
sessions (the server writes the files, the client would rewrite their footers).
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import shutil
import struct
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T

from pyspark_ducklake.batch.write_job import (
    PARTITION_BY,
    TARGET_FILE_ROWS,
    WritePlan,
    commit_files,
    plan_write,
)
from pyspark_ducklake.catalog.catalog import uuid7
from pyspark_ducklake.catalog.file_stats import leaf_min_max, stats_function
from pyspark_ducklake.catalog.stats_values import render_stat
from pyspark_ducklake.catalog.types import Column, TableSchema, arrow_type, can_promote, decimal_params
from pyspark_ducklake.exceptions import DataFileError, InvalidOptionError, TableAlreadyExistsError
from pyspark_ducklake.io import thrift_compact as tc
from pyspark_ducklake.io.parquet import LeafStats, WrittenFile, leaf_arrays
from pyspark_ducklake.options import TXN_APP_ID, TXN_VERSION, Entry, check_options, option_as_int, option_txn
from pyspark_ducklake.spark.connect import is_connect
from pyspark_ducklake.spark.job_tasks import tasks_stopped_on_failure
from pyspark_ducklake.spark.lake_config import LakeConfig, spark_conf
from pyspark_ducklake.spark.type_mapping import spark_type
from pyspark_ducklake.spark_parquet_read import GLOB_CHARACTERS, column_named, default_literal, spark_path
from pyspark_ducklake.table.data_files import PendingFile

log = logging.getLogger("pyspark_ducklake.native")

# DuckLake types Spark's Parquet writer stores exactly as DuckDB does (decimals too, and nested types of these).
NATIVE_WRITE_TYPES = frozenset(
    {"boolean", "int8", "int16", "int32", "int64", "float32", "float64", "date", "timestamp", "timestamptz"}
    | {"varchar", "blob", "list", "struct", "map"}
)
WRITE_CONF = {
    "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
    "spark.sql.parquet.writeLegacyFormat": "false",
    "spark.sql.parquet.datetimeRebaseModeInWrite": "CORRECTED",
    "spark.sql.parquet.int96RebaseModeInWrite": "CORRECTED",
}
CREATE_MODES = ("error", "errorifexists", "ignore")
MODES = ("append", "overwrite", *CREATE_MODES)
_SCHEMA = 2  # FileMetaData.schema
_NAME, _NUM_CHILDREN, _FIELD_ID = 4, 5, 9  # SchemaElement fields


class _NotNative(Exception):
    """Raised while planning: why Spark's Parquet writer cannot write this table exactly."""


@dataclass(frozen=True)
class WriteOutcome:
    """What :func:`write_table` did: natively or through the data source (and why), the snapshot, the files."""

    native: bool
    reason: str | None = None
    snapshot_id: int | None = None
    files: int = 0
    rows: int = 0


def write_table(
    df: DataFrame,
    table: str,
    *,
    mode: str = "append",
    partition_by: str | None = None,
    catalog: str | None = None,
    data_path: str | None = None,
    options: Mapping[str, str] | None = None,
    txn_app_id: str | None = None,
    txn_version: int | None = None,
) -> WriteOutcome:
    """Append ``df`` to ``table`` (or replace its rows with ``mode="overwrite"``) in one snapshot.

    The table is created from the DataFrame's schema when missing, as the data source does. Spark's other save modes
    work as for its own tables: ``"error"``/``"errorifexists"`` create the table and fail when it exists,
    ``"ignore"`` writes nothing when it exists (the data source cannot offer these: Spark refuses them there).
    ``options`` takes the data source's write options (``targetFileRows``, the retry options, S3 settings);
    ``partition_by`` is its ``partitionBy`` (partitioned tables are written through the data source).

    ``txn_app_id`` and ``txn_version`` (options ``txnAppId``/``txnVersion``) make the write idempotent as Delta's
    are, e.g. inside ``foreachBatch`` with the batch id as the version: when that app committed this version or a
    later one into the table, nothing is written (no Spark job runs) and the outcome names the snapshot of its
    last committed version.

    Raises:
        TableAlreadyExistsError: mode ``"error"`` and the table exists; nothing was written.
        InvalidOptionError: an unknown mode or option; ``txn_app_id`` without ``txn_version`` (or the reverse), a
            version that is not an integer >= 0.
    """
    if mode not in MODES:
        raise InvalidOptionError(
            f"mode {mode!r} is not supported: use 'append', 'overwrite', 'error' (alias 'errorifexists') or 'ignore'"
        )
    spark = df.sparkSession
    opts = {str(k): str(v) for k, v in (options or {}).items()}
    if catalog is not None:
        opts["catalog"] = catalog
    if data_path is not None:
        opts["dataPath"] = data_path
    if partition_by is not None:
        opts[PARTITION_BY] = partition_by
    for key, value in ((TXN_APP_ID, txn_app_id), (TXN_VERSION, txn_version)):
        if value is not None:
            if isinstance(value, bool) or not isinstance(value, (str, int)):
                raise InvalidOptionError(f"{key} must be a string or an integer, got {value!r}")
            opts[key] = str(value)
    check_options(opts, Entry.WRITE)
    option_txn(opts)  # both or neither, before anything runs
    config = LakeConfig.resolve(opts, spark_conf(spark).get)
    plan = plan_write(config, table, opts, df.schema)
    if mode in CREATE_MODES:  # Spark's SaveMode semantics, which the data source cannot offer (Spark refuses them)
        if plan.table_exists and mode == "ignore":
            log.info("write_table(mode='ignore'): %s exists; nothing written", table)
            return WriteOutcome(True, "the table exists (mode 'ignore'): nothing written")
        if plan.table_exists:
            raise TableAlreadyExistsError(
                f"table {table} already exists (mode {mode!r}); use mode 'append' or 'overwrite' to write to it"
            )
        mode = "append"  # the commit creates the table; one created meanwhile makes it a CommitConflictError
    if plan.txn_done is not None:
        log.info(
            "write_table to %s: txn %s already committed (snapshot %d); nothing written", table, plan.txn, plan.txn_done
        )
        return WriteOutcome(True, f"txn {plan.txn} already committed", plan.txn_done)
    try:
        frame = _conform(df, plan)
        _check_target(spark, plan)
    except _NotNative as e:
        log.info("writing %s through the ducklake data source: %s", table, e)
        _data_source_write(df, table, mode, opts)
        return WriteOutcome(False, str(e))
    job = f"ducklake-spark-{uuid7()}"
    folder = plan.table_dir + job + "/"
    writer = (
        frame.write.mode("errorifexists")
        .option("compression", "snappy")
        .option("mapreduce.fileoutputcommitter.marksuccessfuljobs", "false")
    )
    target_rows = option_as_int(opts, TARGET_FILE_ROWS, None, minimum=1)
    if target_rows is not None:
        writer = writer.option("maxRecordsPerFile", str(target_rows))
    try:
        # the folder goes only once the job's tasks stopped: one Spark is still killing could write into it
        with session_conf(spark, WRITE_CONF), tasks_stopped_on_failure(spark):
            writer.parquet(spark_path(folder))
        files = collect_files(folder, job, plan.table_schema)
    except BaseException:
        shutil.rmtree(_local(folder), ignore_errors=True)
        raise
    snapshot = commit_files(plan, files, overwrite=mode == "overwrite")
    if not files:
        shutil.rmtree(_local(folder), ignore_errors=True)
    rows = sum(f.written.record_count for f in files)
    log.info("native write to %s: %d files, %d rows, snapshot %s", table, len(files), rows, snapshot)
    return WriteOutcome(True, None, snapshot, len(files), rows)


def _data_source_write(df: DataFrame, table: str, mode: str, options: dict[str, str]) -> None:
    from pyspark_ducklake.datasource import FORMAT_NAME, register

    register(df.sparkSession)
    writer = df.write.format(FORMAT_NAME).mode(mode)
    for k, v in options.items():
        writer = writer.option(k, v)
    writer.save(table)


@contextlib.contextmanager
def session_conf(spark: SparkSession, values: Mapping[str, str]) -> Iterator[None]:
    """Set session conf for the duration of a block, restoring (or unsetting) the previous values."""
    before: dict[str, str | None] = {k: spark.conf.get(k, None) for k in values}
    for k, v in values.items():
        spark.conf.set(k, v)
    try:
        yield
    finally:
        for key, old in before.items():
            if old is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, old)


def _local(path: str) -> str:
    return path[len("file://") :] if path.startswith("file://") else path


# --- planning ---------------------------------------------------------------------------------------------------


def _check_target(spark: SparkSession, plan: WritePlan) -> None:
    if is_connect(spark):
        # The server writes the files; their footers are rewritten here, where the server's disk may not be
        raise _NotNative("a Spark Connect client cannot rewrite the footers of the files the server writes")
    if plan.encrypted:  # Spark's Parquet encryption needs a KMS factory class on the JVM; the data source encrypts
        raise _NotNative("the lake is encrypted")
    if plan.partition is not None or plan.new_partition_keys:
        raise _NotNative("the table is partitioned")
    if plan.sort:  # Spark orders NULLs and nested values otherwise; the data source sorts each file as DuckDB does
        raise _NotNative("the table is sorted (SET SORTED BY)")
    folder = plan.table_dir
    if "://" in folder and not folder.startswith("file://"):
        raise _NotNative(f"the data path {folder} is not on the local filesystem (file footers are rewritten)")
    if GLOB_CHARACTERS & set(folder):
        raise _NotNative(f"the table folder {folder} contains glob characters")


def _conform(df: DataFrame, plan: WritePlan) -> DataFrame:
    """``df`` as the table's columns, in the table's order and Spark types (defaults for missing columns)."""
    incoming = {f.name: f for f in df.schema.fields}
    columns = []
    for column in plan.table_schema.columns:
        for c in column.walk():
            if not (c.type in NATIVE_WRITE_TYPES or decimal_params(c.type) is not None):
                raise _NotNative(f"column {column.name} has type {c.type}, which Spark does not write as DuckLake does")
        if not column.nulls_allowed:
            raise _NotNative(f"column {column.name} is NOT NULL")
        target = spark_type(column)
        f = incoming.get(column.name)
        if f is None:
            columns.append(default_literal(column, target, current=True).alias(column.name))
        elif _same_type(f.dataType, target):
            columns.append(column_named(column.name))
        elif _promotion(f.dataType, column):
            columns.append(column_named(column.name).cast(target).alias(column.name))
        else:
            raise _NotNative(
                f"column {column.name} is {f.dataType.simpleString()} in the data and {column.type} in the table"
            )
    return df.select(*columns)


def _same_type(a: T.DataType, b: T.DataType) -> bool:
    """Equal Spark types, ignoring nullability and field metadata."""
    if isinstance(a, T.StructType) and isinstance(b, T.StructType):
        return len(a.fields) == len(b.fields) and all(
            x.name == y.name and _same_type(x.dataType, y.dataType) for x, y in zip(a.fields, b.fields, strict=True)
        )
    if isinstance(a, T.ArrayType) and isinstance(b, T.ArrayType):
        return _same_type(a.elementType, b.elementType)
    if isinstance(a, T.MapType) and isinstance(b, T.MapType):
        return _same_type(a.keyType, b.keyType) and _same_type(a.valueType, b.valueType)
    return a == b


def _promotion(source: T.DataType, column: Column) -> bool:
    """Whether casting ``source`` to the column is one of DuckLake's lossless promotions."""
    from pyspark_ducklake.spark.type_mapping import columns_from_spark

    if column.is_nested or isinstance(source, T.StructType | T.ArrayType | T.MapType):
        return False
    incoming = columns_from_spark(T.StructType([T.StructField("x", source)])).columns[0].type
    return can_promote(incoming, column.type)


# --- after Spark wrote the files ----------------------------------------------------------------------------------


def collect_files(folder: str, job: str, schema: TableSchema) -> list[PendingFile]:
    """The Parquet files Spark wrote into ``folder``, footers given DuckLake field ids, described for the commit.

    Anything else Spark left there (checksum files, markers) and empty files are removed.
    """
    folder = _local(folder)
    out = []
    for name in sorted(os.listdir(folder)):
        path = folder + name
        if not name.endswith(".parquet") or name.startswith((".", "_")):
            os.remove(path)
            continue
        written = describe_file(path, schema)
        if written is None:
            os.remove(path)
            continue
        out.append(PendingFile(f"{job}/{name}", written))
    return out


def describe_file(path: str, schema: TableSchema) -> WrittenFile | None:
    """Give the file's schema DuckLake field ids and describe it; None for a file without rows."""
    with open(path, "r+b") as f:
        f.seek(0, os.SEEK_END)
        size = f.tell()
        f.seek(size - 8)
        tail = f.read(8)
        if tail[4:] != b"PAR1":
            raise DataFileError(f"{path} is not a Parquet file")
        footer_len = struct.unpack("<I", tail[:4])[0]
        start = size - 8 - footer_len
        f.seek(start)
        meta, _ = tc.decode_struct(f.read(footer_len))
        num_rows = meta.get(3)
        if num_rows is not None and int(num_rows.value) == 0:
            return None
        set_field_ids(meta, schema, path)
        footer = tc.encode_struct(meta)
        f.seek(start)
        f.write(footer + struct.pack("<I", len(footer)) + b"PAR1")
        f.truncate()
        size = f.tell()
    metadata = pq.ParquetFile(path).metadata
    return WrittenFile(
        path,
        metadata.num_rows,
        size,
        len(footer),
        leaf_stats(path, metadata, schema),
        row_group_count=metadata.num_row_groups,
    )


def set_field_ids(meta: tc.Struct, schema: TableSchema, path: str) -> None:
    """Set ``field_id`` = DuckLake column id on every schema element that is a column, field, element, key or value."""
    schema_field = meta.get(_SCHEMA)
    if schema_field is None or not isinstance(schema_field.value, tc.ListValue):
        raise DataFileError(f"{path}: Parquet footer has no schema")
    elements: list[tc.Struct] = schema_field.value.items
    pos = 1

    def children(el: tc.Struct) -> int:
        f = el.get(_NUM_CHILDREN)
        return int(f.value) if f is not None else 0

    def name(el: tc.Struct) -> str:
        f = el.get(_NAME)
        return bytes(f.value).decode() if f is not None else ""

    def visit(column: Column, expected_name: str | None) -> None:
        nonlocal pos
        el = elements[pos]
        if expected_name is not None and name(el) != expected_name:
            raise DataFileError(f"{path}: expected column {expected_name!r}, found {name(el)!r} in the footer")
        el.set(_FIELD_ID, tc.I32, column.column_id)
        pos += 1
        if column.type == "struct":
            for child in column.children:
                visit(child, child.name)
        elif column.type in ("list", "map"):
            group = elements[pos]  # the repeated group (list / key_value): no id, as DuckDB writes it
            pos += 1
            if children(group) != len(column.children):
                raise DataFileError(f"{path}: {column.name} has an unexpected layout in the footer")
            for child in column.children:
                visit(child, None)

    if children(elements[0]) != len(schema.columns):
        raise DataFileError(f"{path}: the footer has {children(elements[0])} columns, the table {len(schema.columns)}")
    for column in schema.columns:
        visit(column, column.name)


def leaf_stats(path: str, metadata: pq.FileMetaData, schema: TableSchema) -> tuple[LeafStats, ...]:
    """Per-leaf statistics as the data source's writer records them, from the footer where it is enough."""
    leaves = schema.leaves()
    if metadata.num_columns != len(leaves):
        raise DataFileError(f"{path}: {metadata.num_columns} column chunks for {len(leaves)} table leaves")
    out: list[LeafStats | None] = []
    exact: list[int] = []
    for i, column in enumerate(leaves):
        size = values = nulls = 0
        lows: list[Any] = []
        highs: list[Any] = []
        complete = True
        for rg in range(metadata.num_row_groups):
            chunk = metadata.row_group(rg).column(i)
            size += chunk.total_compressed_size
            values += chunk.num_values
            st = chunk.statistics
            if st is None or not st.has_null_count:
                complete = False
                continue
            nulls += st.null_count
            if st.has_min_max:
                lows.append(st.min_raw)
                highs.append(st.max_raw)
            elif chunk.num_values > st.null_count:
                complete = False
        rendered = _render(column, lows + highs) if complete else None
        values = max(values - nulls, 0)  # non-NULL values, as io.parquet.write_table records them (DuckDB's count)
        if rendered is None:
            exact.append(i)
            out.append(LeafStats(column.column_id, size, values, nulls))
        else:
            out.append(LeafStats(column.column_id, size, values, nulls, *rendered))
    if exact:
        _fill_exact(path, schema, leaves, out, exact)
    return tuple(s for s in out if s is not None)


def _render(column: Column, raws: list[Any]) -> tuple[str | None, str | None, bool | None] | None:
    """min, max, contains_nan of a leaf from its row groups' raw min/max values; None when they cannot tell."""
    t = column.type
    if t in ("float32", "float64") and any(math.isnan(v) for v in raws):
        return None  # Spark's writer orders NaN above every number: the largest real value is unknown
    if not raws:
        return (None, None, False) if t in ("float32", "float64") else (None, None, None)
    dec = decimal_params(t)
    if dec is not None:
        import decimal

        ints = [int.from_bytes(v, "big", signed=True) if isinstance(v, bytes) else int(v) for v in raws]
        array = pa.array([decimal.Decimal(i).scaleb(-dec[1]) for i in ints], arrow_type(column))
    elif t == "date":
        array = pa.array(raws, pa.int32()).cast(pa.date32())
    elif t in ("timestamp", "timestamptz"):
        array = pa.array(raws, pa.int64()).cast(arrow_type(column))
    elif t == "varchar":
        array = pa.array(raws, pa.binary()).cast(pa.string())
    else:
        array = pa.array(raws, arrow_type(column))
    return leaf_min_max(column, array)


def _fill_exact(
    path: str, schema: TableSchema, leaves: list[Column], out: list[LeafStats | None], exact: list[int]
) -> None:
    """Compute the statistics of leaves ``exact`` from the data, reading only their top-level columns."""
    owner = {c.column_id: top for top in schema.columns for c in top.walk()}
    tops = [top for top in schema.columns if any(owner[leaves[i].column_id] is top for i in exact)]
    data = pq.read_table(path, columns=[c.name for c in tops])
    sub = TableSchema(tuple(tops))
    stats = stats_function(sub)
    arrays = dict(zip([c.column_id for c in sub.leaves()], leaf_arrays(data), strict=True))
    for i in exact:
        column = leaves[i]
        old = out[i]
        assert old is not None
        lo, hi, nan = stats(column.column_id, arrays[column.column_id])
        out[i] = LeafStats(old.field_id, old.column_size_bytes, old.value_count, old.null_count, lo, hi, nan)


__all__ = ["WRITE_CONF", "WriteOutcome", "collect_files", "describe_file", "render_stat", "write_table"]
