"""Writing and reading Parquet files the way DuckLake expects them.

Every field carries ``PARQUET:field_id`` (the DuckLake column id) at every nesting level; the writer reports
the file's size, footer size and per-leaf statistics so the catalog can record them without reopening the file.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from fsspec.implementations.local import LocalFileSystem

from pyspark_ducklake.exceptions import DataFileError, DuckLakeError, EncryptedLakeError, UnsupportedTypeError
from pyspark_ducklake.io import thrift_compact as tc
from pyspark_ducklake.io.encryption import decode_key, encode_key, encrypt_file, new_key, open_encrypted, undecryptable
from pyspark_ducklake.io.fileio import ensure_parent, filesystem
from pyspark_ducklake.io.parquet_footer import edit_columns_by_field_id, edit_top_level_columns
from pyspark_ducklake.io.row_group_count import RecordedRowGroups, check_row_groups
from pyspark_ducklake.io.storage import describe_error, scrubbed
from pyspark_ducklake.io.variant_parquet import collapse_stats, mark_variant_columns, to_parquet_form, variant_columns
from pyspark_ducklake.io.wkb import GeoSummary, is_wkb_type, summarize

log = logging.getLogger(__name__)

FIELD_ID_KEY = b"PARQUET:field_id"
DEFAULT_COMPRESSION = "snappy"
ROW_GROUP_SIZE = 122_880  # DuckDB's default row group size
# Dictionary encoding only for leaves whose values repeat: a dictionary of (nearly) unique values makes files larger
# and Spark's reader about 25% slower over them (measured: bench/README.md, batch results), as in DuckDB's and
# parquet-mr's writers, which fall back to plain encoding when a dictionary does not pay. Decided on a sample.
DICTIONARY_SAMPLE_ROWS = 20_000
DICTIONARY_MAX_DISTINCT_SHARE = 0.5

INTERVAL = pa.month_day_nano_interval()
PARQUET_INTERVAL = pa.binary(12)  # FIXED_LEN_BYTE_ARRAY(12): months, days, millis as little-endian uint32
CONVERTED_TYPE_INTERVAL = 21  # Parquet's ConvertedType.INTERVAL
_FLBA = 7  # Parquet's Type.FIXED_LEN_BYTE_ARRAY
CONVERTED_TYPE_TIME_MICROS = 8  # Parquet's ConvertedType.TIME_MICROS
_CONVERTED_TYPE = 6  # SchemaElement.converted_type
_LOGICAL_TYPE = 10  # SchemaElement.logicalType
_LOGICAL_TIME = 7  # LogicalType.TIME
_TIME_ADJUSTED_TO_UTC = 1  # TimeType.isAdjustedToUTC
_MAX_U32 = 0xFFFFFFFF


@dataclass(frozen=True)
class LeafStats:
    """Statistics of one leaf column of a written file (values are Python values, not yet rendered)."""

    field_id: int
    column_size_bytes: int
    value_count: int
    null_count: int
    min_value: Any = None
    max_value: Any = None
    contains_nan: bool | None = None
    geo: GeoSummary | None = None  # a GEOMETRY leaf's types and bounding box (the catalog's extra_stats)


@dataclass(frozen=True)
class WrittenFile:
    """A Parquet file written for a commit; a frozen record of primitives, so it pickles to the driver."""

    path: str
    record_count: int
    file_size_bytes: int
    footer_size: int
    leaf_stats: tuple[LeafStats, ...] = field(default_factory=tuple)
    # base64 AES key of an encrypted file, for the catalog's encryption_key; kept out of repr (logs, errors)
    encryption_key: str | None = field(default=None, repr=False)
    # row groups in the footer (DuckLake 1.1's row_group_count)
    row_group_count: int | None = None


def field_id(f: pa.Field) -> int | None:
    if f.metadata and FIELD_ID_KEY in f.metadata:
        return int(f.metadata[FIELD_ID_KEY])
    return None


def leaf_fields(schema: pa.Schema) -> list[pa.Field]:
    """Leaf fields depth first: the order of Parquet's column chunks."""
    out: list[pa.Field] = []

    def walk(f: pa.Field) -> None:
        t = f.type
        if isinstance(t, pa.BaseExtensionType):
            out.append(f)
        elif pa.types.is_list(t) or pa.types.is_large_list(t):
            walk(t.value_field)
        elif pa.types.is_map(t):
            walk(t.key_field)
            walk(t.item_field)
        elif pa.types.is_struct(t):
            for i in range(t.num_fields):
                walk(t.field(i))
        else:
            out.append(f)

    for f in schema:
        walk(f)
    return out


def leaf_arrays(table: pa.Table) -> list[pa.Array]:
    """The flattened values of every leaf, depth first (nested nulls dropped with their parents)."""
    out: list[pa.Array] = []

    def walk(arr: pa.Array) -> None:
        t = arr.type
        if isinstance(t, pa.BaseExtensionType):
            out.append(arr.storage)
        elif pa.types.is_list(t) or pa.types.is_large_list(t):
            walk(flatten_list(arr))
        elif pa.types.is_map(t):
            walk(arr.keys)
            walk(arr.items)
        elif pa.types.is_struct(t):
            # flatten() folds the parent's nulls into the children, as Parquet's definition levels do
            for child in flatten_struct(arr):
                walk(child)
        else:
            out.append(arr)

    for col in table.columns:
        walk(col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col)
    return out


def flatten_list(arr: pa.ListArray) -> pa.Array:
    """The values of the lists (``ListArray.flatten``, which pyarrow cannot do for some extension-typed values, such
    as a struct holding ``geoarrow.wkb`` under all-NULL lists; then the values the offsets span)."""
    try:
        return arr.flatten()
    except pa.ArrowNotImplementedError:
        offsets = arr.offsets
        first, last = offsets[0].as_py(), offsets[-1].as_py()
        return arr.values.slice(first, last - first)


def flatten_struct(arr: pa.StructArray) -> list[pa.Array]:
    """The struct's fields with its NULLs folded in (``StructArray.flatten``, which pyarrow cannot do for some
    extension-typed fields, such as ``geoarrow.wkb`` in an empty or all-NULL struct array)."""
    try:
        return list(arr.flatten())
    except pa.ArrowNotImplementedError:
        pass
    out = []
    for i in range(arr.type.num_fields):
        child = arr.field(i)
        if arr.null_count:
            storage = child.storage if isinstance(child, pa.ExtensionArray) else child
            storage = pc.if_else(arr.is_valid(), storage, pa.scalar(None, storage.type))
            child = (
                pa.ExtensionArray.from_storage(child.type, storage) if isinstance(child, pa.ExtensionArray) else storage
            )
        out.append(child)
    return out


StatsFn = Callable[[int, pa.Array], tuple[Any, Any, "bool | None"]]


def write_table(
    table: pa.Table,
    path: str,
    *,
    storage_options: dict[str, Any] | None = None,
    compression: str = DEFAULT_COMPRESSION,
    stats: StatsFn | None = None,
    encrypt: bool = False,
    utc_time_ids: frozenset[int] = frozenset(),
) -> WrittenFile:
    """Write ``table`` (whose schema already carries field ids) to ``path`` and describe it.

    ``stats(field_id, leaf_values)`` gives each leaf's ``(min, max, contains_nan)``; the file's own metadata gives
    sizes and counts. The file is complete before this returns; a failed upload raises and leaves no catalog trace.

    Top-level INTERVAL columns are written as DuckDB writes them (pyarrow cannot): ``FIXED_LEN_BYTE_ARRAY(12)``
    with converted type INTERVAL and no statistics; sub-millisecond precision is truncated as DuckDB truncates it.
    Negative intervals (DuckDB refuses them), millisecond parts beyond 32 bits and nested intervals raise
    :class:`UnsupportedTypeError` before anything is written.

    With ``encrypt`` (an encrypted lake) the file is encrypted with a fresh key, returned base64 in
    ``encryption_key`` (see :mod:`.encryption`).

    The ``time64[us]`` leaves whose field ids are in ``utc_time_ids`` (DuckLake ``timetz``) are written as DuckDB
    writes them: ``TIME(us, isAdjustedToUTC=true)`` with converted type ``TIME_MICROS``, no column statistics, and
    a statistics row of zeros.
    """
    variants = variant_columns(table)
    table = to_parquet_form(table, variants)  # unshredded, annotated VARIANT(1) below (io.variant_parquet)
    intervals = _interval_columns(table)
    key = new_key() if encrypt else None
    leaves = leaf_fields(table.schema)
    arrays = leaf_arrays(table)
    nan_leaves = _nan_leaves(leaves, arrays)
    no_stats = set(intervals)
    utc_leaves = {i for i, lf in enumerate(leaves) if field_id(lf) in utc_time_ids} if utc_time_ids else set()
    utc_time_ids = frozenset(field_id(leaves[i]) or -1 for i in utc_leaves)  # those in this file
    if nan_leaves or utc_leaves:
        paths = _leaf_paths(table.schema)
        no_stats.update(paths[i] for i in nan_leaves | utc_leaves)
    try:
        size, footer_size, metadata = _write_file(
            table, path, intervals, no_stats, compression, storage_options, key, variants, utc_time_ids
        )
    except DuckLakeError:
        raise
    except Exception as e:  # the store failed (unreachable, denied, full...): no half-written file may stay behind
        _remove_partial(path, storage_options)
        raise DataFileError(
            f"could not write data file {path}: {describe_error(e, storage_options)}; check that the data path is "
            "reachable and writable (endpoint, credentials, permissions) and retry: nothing was committed"
        ) from scrubbed(e, storage_options)
    try:
        described = collapse_stats(
            table.schema, variants, _describe(leaves, arrays, metadata, nan_leaves, stats, utc_leaves), table.num_rows
        )
    except BaseException:
        _remove_partial(path, storage_options)  # e.g. a value the statistics refuse: no orphan file stays
        raise
    return WrittenFile(
        path,
        table.num_rows,
        size,
        footer_size,
        tuple(described),
        encode_key(key) if key is not None else None,
        metadata.num_row_groups,
    )


def _describe(
    leaves: list[pa.Field],
    arrays: list[pa.Array],
    metadata: Any,
    nan_leaves: set[int],
    stats: StatsFn | None,
    zero_leaves: set[int] | None = None,
) -> list[LeafStats]:
    """Per-leaf sizes, counts and (through ``stats``) min/max of a written file; the leaves ``zero_leaves`` get a
    row of zeros (DuckDB's for TIMETZ)."""
    described = []
    for i, (lf, arr) in enumerate(zip(leaves, arrays, strict=False)):
        if zero_leaves and i in zero_leaves:
            fid = field_id(lf)
            described.append(LeafStats(fid if fid is not None else -1, 0, 0, 0))
            continue
        size_bytes = 0
        value_count = 0
        null_count = 0
        for rg in range(metadata.num_row_groups):
            chunk = metadata.row_group(rg).column(i)
            size_bytes += chunk.total_compressed_size
            value_count += chunk.num_values
            if chunk.statistics is not None and chunk.statistics.has_null_count:
                null_count += chunk.statistics.null_count
        fid = field_id(lf)
        geo = None
        if is_wkb_type(lf.type):
            # pyarrow writes GeospatialStatistics but no Statistics (so no null count) for a GEOMETRY leaf: NULLs at
            # every level (a NULL or empty list, a NULL struct) are the leaf's slots without a value, as in Parquet
            null_count = value_count - (len(arr) - arr.null_count)
            lo, hi, nan = None, None, None
            geo = summarize(arr)
        elif lf.type == INTERVAL:
            # no statistics in the file (DuckDB writes none for INTERVAL): count nulls here, no min/max
            null_count = arr.null_count
            lo, hi, nan = None, None, None
        elif i in nan_leaves:
            # no statistics in the file either (see _nan_leaves): count nulls here; the catalog keeps min/max + NaN
            null_count = arr.null_count
            lo, hi, nan = stats(fid, arr) if stats is not None and fid is not None else (None, None, None)
        else:
            lo, hi, nan = stats(fid, arr) if stats is not None and fid is not None else (None, None, None)
        # DuckDB's value_count counts non-NULL values only (Parquet's num_values counts NULL slots too)
        value_count = max(value_count - null_count, 0)
        described.append(
            LeafStats(fid if fid is not None else -1, size_bytes, value_count, null_count, lo, hi, nan, geo)
        )
    return described


def _nan_leaves(leaves: list[pa.Field], arrays: list[pa.Array]) -> set[int]:
    """Indexes of the floating-point leaves holding a NaN.

    pyarrow leaves NaN out of a column chunk's min/max, and DuckDB prunes row groups with those bounds while it
    orders NaN above every number: ``WHERE x > 100`` would skip the row group of a NaN. DuckDB's own writer writes
    no min/max for such a column, and so do we.
    """
    out = set()
    for i, (lf, arr) in enumerate(zip(leaves, arrays, strict=False)):
        if pa.types.is_floating(lf.type) and len(arr) and pc.any(pc.is_nan(arr)).as_py():
            out.add(i)
    return out


def _write_file(
    table: pa.Table,
    path: str,
    intervals: list[str],
    no_stats: set[str],
    compression: str,
    storage_options: dict[str, Any] | None,
    key: bytes | None = None,
    variants: list[str] | None = None,
    utc_time_ids: frozenset[int] = frozenset(),
) -> tuple[int, int, Any]:
    """Write the file (no statistics for the leaf paths ``no_stats``, encrypted with ``key`` if given); its size,
    footer size and Parquet metadata."""
    ensure_parent(path, storage_options)
    fs, p = filesystem(path, storage_options)
    # the whole file in memory when its footer is edited, or it is encrypted
    if intervals or variants or utc_time_ids or key is not None:
        if intervals:
            plain = _interval_file_bytes(table, intervals, no_stats, compression)
        else:
            sink = pa.BufferOutputStream()
            writer = _parquet_writer(
                sink, table.schema, compression, _statistics(table, no_stats), dictionary_columns(table)
            )
            writer.write_table(table, row_group_size=ROW_GROUP_SIZE)
            writer.close()
            plain = sink.getvalue().to_pybytes()
        if variants:
            plain = mark_variant_columns(plain, set(variants))
        if utc_time_ids:
            plain = mark_utc_times(plain, utc_time_ids)
        data = encrypt_file(plain, key) if key is not None else plain
        with fs.open(p, "wb") as out:
            out.write(data)
        size = len(data)
        footer_size = struct.unpack("<I", data[-8:-4])[0]
        metadata = pq.ParquetFile(pa.BufferReader(plain)).metadata
    else:
        with fs.open(p, "wb") as raw:
            out = _TailKeeper(raw)
            writer = _parquet_writer(
                out, table.schema, compression, _statistics(table, no_stats), dictionary_columns(table)
            )
            writer.write_table(table, row_group_size=ROW_GROUP_SIZE)
            writer.close()
            metadata = writer.writer.metadata
        # Size and footer length from the bytes written: no round trips to the store after the upload.
        size = out.written
        footer_size = struct.unpack("<I", out.tail[:4])[0]
    return size, footer_size, metadata


def _statistics(table: pa.Table, no_stats: set[str]) -> bool | list[str]:
    """pyarrow's ``write_statistics``: every leaf but the paths ``no_stats``."""
    if not no_stats:
        return True
    return [p for p in _leaf_paths(table.schema) if p not in no_stats] or False


def _parquet_writer(
    sink: Any, schema: pa.Schema, compression: str, statistics: bool | list[str], dictionary: list[str]
) -> pq.ParquetWriter:
    """pyarrow's writer set up as DuckLake files need: compliant nested names, no Arrow schema blob."""
    return pq.ParquetWriter(
        sink,
        schema,
        compression=compression,
        use_compliant_nested_type=True,
        store_schema=False,
        write_statistics=statistics,
        use_dictionary=dictionary or False,
        data_page_version="1.0",  # DuckDB 1.5.5 cannot read encrypted v2 pages (io.encryption)
    )


def dictionary_columns(table: pa.Table) -> list[str]:
    """The leaf paths worth dictionary encoding: at most half of a sample of their non-NULL values are distinct."""
    sample = table.slice(0, DICTIONARY_SAMPLE_ROWS)
    leaves = [leaf for col in sample.columns for leaf in _leaf_arrays(col.combine_chunks())]
    paths = _leaf_paths(table.schema)
    if len(paths) != len(leaves):  # a layout this walk does not know: leave it to pyarrow's default
        return paths
    out = []
    for path, values in zip(paths, leaves, strict=True):
        if pa.types.is_boolean(values.type):
            continue
        present = len(values) - values.null_count
        try:
            distinct = pc.count_distinct(values).as_py() if present else 0
        except pa.ArrowNotImplementedError:
            distinct = 0  # a type the kernel does not hash: keep pyarrow's default (dictionary)
        if distinct <= DICTIONARY_MAX_DISTINCT_SHARE * present:
            out.append(path)
    return out


def _leaf_arrays(arr: pa.Array) -> list[pa.Array]:
    """The values of each Parquet leaf below ``arr``, in the writer's leaf order."""
    t = arr.type
    if pa.types.is_struct(t):
        return [leaf for i in range(t.num_fields) for leaf in _leaf_arrays(arr.field(i))]
    if pa.types.is_map(t):
        return [*_leaf_arrays(arr.keys), *_leaf_arrays(arr.items)]
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return _leaf_arrays(flatten_list(arr))
    if pa.types.is_fixed_size_list(t):
        return _leaf_arrays(arr.flatten())
    return [arr]


class _TailKeeper:
    """A write-only file that passes bytes on, counting them and keeping the last eight (footer length + magic)."""

    def __init__(self, raw: Any) -> None:
        self.raw = raw
        self.written = 0
        self.tail = b""
        self.closed = False

    def write(self, data: Any) -> int:
        view = memoryview(data).cast("B")
        self.raw.write(view)
        self.written += view.nbytes
        self.tail = (self.tail + bytes(view[-8:]))[-8:]
        return view.nbytes

    def tell(self) -> int:
        return self.written

    def flush(self) -> None:
        self.raw.flush()

    def close(self) -> None:
        self.closed = True


def _remove_partial(path: str, storage_options: dict[str, Any] | None) -> None:
    """Best effort: a store that is down keeps the partial file, an orphan that maintenance removes later."""
    try:
        fs, p = filesystem(path, storage_options)
        if fs.exists(p):
            fs.rm_file(p)
    except Exception as e:
        log.warning("could not remove the partial file %s: %s", path, describe_error(e, storage_options))


# --- INTERVAL ---------------------------------------------------------------------------------------------------


def _has_interval(t: pa.DataType) -> bool:
    if t == INTERVAL:
        return True
    if isinstance(t, pa.BaseExtensionType):
        return _has_interval(t.storage_type)
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return _has_interval(t.value_type)
    if pa.types.is_map(t):
        return _has_interval(t.key_type) or _has_interval(t.item_type)
    if pa.types.is_struct(t):
        return any(_has_interval(t.field(i).type) for i in range(t.num_fields))
    return False


def _interval_columns(table: pa.Table) -> list[str]:
    """Names of the top-level INTERVAL columns; an INTERVAL nested in a list, struct or map is refused."""
    out = []
    for f in table.schema:
        if f.type == INTERVAL:
            out.append(f.name)
        elif _has_interval(f.type):
            raise UnsupportedTypeError(
                f"column {f.name!r} ({f.type}) has an INTERVAL inside a list, struct or map, which cannot be "
                "written to Parquet here (only top-level INTERVAL columns can); keep such appends within "
                "data_inlining_row_limit rows"
            )
    return out


_MDN = np.dtype([("months", "<i4"), ("days", "<i4"), ("nanos", "<i8")])


def interval_to_parquet(name: str, values: pa.Array | pa.ChunkedArray) -> pa.FixedSizeBinaryArray:
    """month_day_nano intervals as Parquet INTERVAL values (months, days, millis as little-endian uint32).

    Sub-millisecond nanoseconds are truncated, as DuckDB does when it writes INTERVAL to Parquet. Negative parts
    (which DuckDB refuses: "Parquet files do not support negative intervals") and millisecond parts beyond
    2**32 - 1 (which DuckDB would silently wrap) raise :class:`UnsupportedTypeError` naming the column.
    """
    arr = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
    n = len(arr)
    valid = np.ones(n, dtype=bool) if arr.null_count == 0 else arr.is_valid().to_numpy(zero_copy_only=False)
    buf = arr.buffers()[1]
    raw = np.frombuffer(buf, dtype=_MDN, count=n + arr.offset)[arr.offset :] if buf is not None else np.zeros(n, _MDN)
    months = np.where(valid, raw["months"], 0).astype(np.int64)
    days = np.where(valid, raw["days"], 0).astype(np.int64)
    nanos = np.where(valid, raw["nanos"], 0)
    negative = (months < 0) | (days < 0) | (nanos < 0)
    if negative.any():
        i = int(np.argmax(negative))
        raise UnsupportedTypeError(
            f"column {name!r}: Parquet files do not support negative intervals (row {i}: {arr[i].as_py()}); "
            "DuckDB refuses them too"
        )
    millis = nanos // 1_000_000
    too_big = millis > _MAX_U32
    if too_big.any():
        i = int(np.argmax(too_big))
        raise UnsupportedTypeError(
            f"column {name!r}: interval time part of {int(nanos[i])} ns (row {i}) does not fit Parquet's 32-bit "
            "milliseconds; express long durations in days or months"
        )
    out = np.empty((n, 3), dtype="<u4")
    out[:, 0] = months
    out[:, 1] = days
    out[:, 2] = millis
    validity = None if arr.null_count == 0 else pa.array(valid, pa.bool_()).buffers()[1]
    return pa.FixedSizeBinaryArray.from_buffers(
        PARQUET_INTERVAL, n, [validity, pa.py_buffer(out.tobytes())], null_count=arr.null_count
    )


def _leaf_paths(schema: pa.Schema) -> list[str]:
    """Dotted Parquet column paths of ``schema``'s leaves, as pyarrow's writer names them."""
    # pyarrow cannot write an interval: a top-level one is written as its fixed-size form (one leaf either way)
    schema = pa.schema(
        [f.with_type(PARQUET_INTERVAL) if pa.types.is_interval(f.type) else f for f in schema], schema.metadata
    )
    sink = pa.BufferOutputStream()
    w = pq.ParquetWriter(sink, schema, use_compliant_nested_type=True, store_schema=False)
    w.close()
    s = pq.ParquetFile(pa.BufferReader(sink.getvalue())).schema
    return [s.column(i).path for i in range(len(s))]


def _interval_file_bytes(table: pa.Table, intervals: list[str], no_stats: set[str], compression: str) -> bytes:
    """The whole Parquet file for a table with top-level INTERVAL columns, footer annotated as DuckDB's."""
    wanted = set(intervals)
    columns = []
    fields = []
    for f, col in zip(table.schema, table.columns, strict=True):
        if f.name in wanted:
            columns.append(interval_to_parquet(f.name, col))
            fields.append(pa.field(f.name, PARQUET_INTERVAL, f.nullable, f.metadata))
        else:
            columns.append(col)
            fields.append(f)
    converted = pa.Table.from_arrays(columns, schema=pa.schema(fields, table.schema.metadata))
    with_stats = [p for p in _leaf_paths(converted.schema) if p not in wanted and p not in no_stats]
    sink = pa.BufferOutputStream()
    writer = _parquet_writer(sink, converted.schema, compression, with_stats or False, dictionary_columns(converted))
    writer.write_table(converted, row_group_size=ROW_GROUP_SIZE)
    writer.close()
    return mark_interval_columns(sink.getvalue().to_pybytes(), wanted)


def mark_interval_columns(data: bytes, names: set[str]) -> bytes:
    """Rewrite a Parquet file's footer so the top-level FLBA(12) columns ``names`` carry converted type INTERVAL.

    Raises:
        DataFileError: a named column is missing or not FIXED_LEN_BYTE_ARRAY(12).
    """

    def mark(name: str, el: tc.Struct) -> None:
        type_f, len_f = el.get(1), el.get(2)
        if type_f is None or type_f.value != _FLBA or len_f is None or len_f.value != 12:
            raise DataFileError(f"column {name!r} is not FIXED_LEN_BYTE_ARRAY(12) in the written file")
        el.set(6, tc.I32, CONVERTED_TYPE_INTERVAL)

    return edit_top_level_columns(data, names, mark)


def mark_utc_times(data: bytes, ids: frozenset[int]) -> bytes:
    """Rewrite a Parquet file's footer so the ``TIME`` leaves with field ids ``ids`` say ``isAdjustedToUTC=true``
    and carry converted type ``TIME_MICROS``, as DuckDB writes TIMETZ.

    Raises:
        DataFileError: a field id is missing or not a microsecond TIME leaf.
    """

    def mark(fid: int, el: tc.Struct) -> None:
        logical = el.get(_LOGICAL_TYPE)
        time = logical.value.get(_LOGICAL_TIME) if logical is not None else None
        if time is None:
            raise DataFileError(f"field id {fid} is not a TIME column in the written file")
        time.value.set(_TIME_ADJUSTED_TO_UTC, tc.BOOL_TRUE, True)
        el.set(_CONVERTED_TYPE, tc.I32, CONVERTED_TYPE_TIME_MICROS)

    return edit_columns_by_field_id(data, ids, mark)


def read_table(
    path: str,
    *,
    columns: list[str] | None = None,
    storage_options: dict[str, Any] | None = None,
    footer_size: int | None = None,
    encryption_key: str | None = None,
) -> pa.Table:
    """Read a whole Parquet file, or ``columns`` of it (schema metadata, including field ids, preserved).

    ``encryption_key`` (the catalog's base64 key, in encrypted lakes) decrypts the file (see :mod:`.encryption`).
    """
    return read_columns(path, lambda _schema: columns, storage_options=storage_options, encryption_key=encryption_key)


def read_columns(
    path: str,
    pick: Callable[[pa.Schema], list[str] | None],
    *,
    storage_options: dict[str, Any] | None = None,
    encryption_key: str | None = None,
    row_groups: Sequence[int] | None = None,
    recorded_row_groups: RecordedRowGroups | None = None,
) -> pa.Table:
    """Read the columns that ``pick`` chooses from the file's schema (None: all), opening the file once; only the
    row groups ``row_groups`` (in that order) when given. ``recorded_row_groups``: the file's ``row_group_count``
    as its catalog row records it (DuckLake 1.1), checked against the footer.

    Raises:
        DataFileError: the file is missing or is not Parquet.
        RowGroupCountError: the footer's row groups are not ``recorded_row_groups``.
        EncryptedLakeError: the file is encrypted and the catalog gives no key, or the reverse.
        FileDecryptionError: the key does not open the file (wrong key, corrupt or truncated file).
    """
    fs, p = filesystem(path, storage_options)
    try:
        if encryption_key is not None:
            key = decode_key(encryption_key, path)
            pf = _open_encrypted(fs, p, path, key, storage_options)
            check_row_groups(path, pf.metadata.num_row_groups, recorded_row_groups)
            return _read_decrypted(pf, path, pick, row_groups)
        if isinstance(fs, LocalFileSystem):  # pyarrow's own file: no Python call per read, ~1 ms less per file
            pf = pq.ParquetFile(fs._strip_protocol(p))
            check_row_groups(path, pf.metadata.num_row_groups, recorded_row_groups)
            return _read(pf, pick, row_groups)
        with fs.open(p, "rb") as f:
            pf = pq.ParquetFile(f)
            check_row_groups(path, pf.metadata.num_row_groups, recorded_row_groups)
            return _read(pf, pick, row_groups)
    except FileNotFoundError as e:
        raise _missing(path) from e
    except (OSError, pa.ArrowInvalid) as e:
        if _is_encrypted(fs, p):
            raise _encrypted(path) from e
        raise DataFileError(f"data file {path} cannot be read as Parquet: {e}") from e


def _missing(path: str) -> DataFileError:
    return DataFileError(
        f"data file {path} is missing: the lake's files were removed or moved (its data_path is recorded in the "
        "catalog); restore the file or time-travel to a snapshot that does not need it"
    )


def _read(
    pf: pq.ParquetFile, pick: Callable[[pa.Schema], list[str] | None], row_groups: Sequence[int] | None
) -> pa.Table:
    columns = pick(pf.schema_arrow)
    if row_groups is None:
        return pf.read(columns=columns, use_threads=True)
    return pf.read_row_groups(list(row_groups), columns=columns, use_threads=True)


def iter_row_groups(
    path: str,
    pick: Callable[[pa.Schema], list[str] | bool | None],
    *,
    storage_options: dict[str, Any] | None = None,
    encryption_key: str | None = None,
    byte_range: tuple[int, int | None] = (0, None),
    recorded_row_groups: RecordedRowGroups | None = None,
) -> Iterator[tuple[int, pa.Table]]:
    """Each row group of the file in order, as ``(its first row's position in the file, its table)`` of the
    columns ``pick`` chooses from the file's schema (None: all; False: read nothing), decoded one at a time on
    the calling thread (a Spark task already has its core) and opening the file once.

    ``byte_range`` ``(start, end)`` (end None: the file's end): only the row groups whose middle byte lies in it, as
    Spark and parquet-mr split a file, so ranges that tile the file read each row group once.
    ``recorded_row_groups``: as :func:`read_columns`.

    Raises:
        DataFileError, RowGroupCountError, EncryptedLakeError, FileDecryptionError: as :func:`read_columns`.
    """
    fs, p = filesystem(path, storage_options)
    key = None if encryption_key is None else decode_key(encryption_key, path)
    handle = None
    try:
        if key is not None:
            pf = _open_encrypted(fs, p, path, key, storage_options)
        elif isinstance(fs, LocalFileSystem):
            pf = pq.ParquetFile(fs._strip_protocol(p))
        else:
            handle = fs.open(p, "rb")
            pf = pq.ParquetFile(handle)
        meta = pf.metadata
        check_row_groups(path, meta.num_row_groups, recorded_row_groups)
        columns = pick(pf.schema_arrow)
        if columns is False:
            return
        start, end = byte_range
        whole = start <= 0 and end is None
        first = 0
        for i in range(meta.num_row_groups):
            group = meta.row_group(i)
            if whole or start <= _middle(group) < (end if end is not None else _AFTER_ANY_FILE):
                yield first, pf.read_row_group(i, columns=columns, use_threads=False)
            first += group.num_rows
    except FileNotFoundError as e:
        raise _missing(path) from e
    except (OSError, pa.ArrowException) as e:
        if key is not None:
            raise undecryptable(path, type(e).__name__) from None
        if not isinstance(e, (OSError, pa.ArrowInvalid)):  # as read_columns: other Arrow errors pass
            raise
        if _is_encrypted(fs, p):
            raise _encrypted(path) from e
        raise DataFileError(f"data file {path} cannot be read as Parquet: {e}") from e
    finally:
        if handle is not None:
            handle.close()


_AFTER_ANY_FILE = 1 << 62


def _middle(group: Any) -> int:
    """The row group's middle byte: from its first page (a dictionary page, else the first data page) over its
    compressed column chunks."""
    begin = None
    size = 0
    for j in range(group.num_columns):
        chunk = group.column(j)
        at = chunk.data_page_offset
        dictionary = chunk.dictionary_page_offset if chunk.has_dictionary_page else None
        if dictionary is not None and 0 < dictionary < at:
            at = dictionary
        begin = at if begin is None else min(begin, at)
        size += chunk.total_compressed_size
    return (begin or 0) + size // 2


def row_group_ranges(
    path: str,
    column: str,
    *,
    storage_options: dict[str, Any] | None = None,
    recorded_row_groups: RecordedRowGroups | None = None,
) -> tuple[bool, list[tuple[int, int | None, int | None]]]:
    """Whether the file has the top-level integer column ``column``, and each row group's ``(rows, min, max)`` of
    it, from the footer alone (min and max None where the footer has no statistics or no such column).
    ``recorded_row_groups``: as :func:`read_columns`.

    Raises:
        DataFileError: the file is missing or is not Parquet.
        RowGroupCountError: the footer's row groups are not ``recorded_row_groups``.
    """
    fs, p = filesystem(path, storage_options)
    try:
        with fs.open(p, "rb") as f:
            meta = pq.ParquetFile(f).metadata
    except (OSError, pa.ArrowInvalid) as e:
        raise DataFileError(f"data file {path} cannot be read as Parquet: {e}") from e
    check_row_groups(path, meta.num_row_groups, recorded_row_groups)
    at = next((i for i in range(meta.num_columns) if meta.schema.column(i).path == column), None)
    out: list[tuple[int, int | None, int | None]] = []
    for g in range(meta.num_row_groups):
        group = meta.row_group(g)
        low = high = None
        if at is not None:
            stats = group.column(at).statistics
            if stats is not None and stats.has_min_max:
                low, high = int(stats.min), int(stats.max)
        out.append((group.num_rows, low, high))
    return at is not None, out


def _read_decrypted(
    pf: pq.ParquetFile,
    path: str,
    pick: Callable[[pa.Schema], list[str] | None],
    row_groups: Sequence[int] | None = None,
) -> pa.Table:
    """Read an encrypted file opened for decryption (io.encryption); a store failure is not a decryption failure."""
    try:
        return _read(pf, pick, row_groups)
    except (OSError, pa.ArrowException) as e:
        raise undecryptable(path, type(e).__name__) from None


def _open_encrypted(fs: Any, p: str, path: str, key: bytes, storage_options: dict[str, Any] | None) -> pq.ParquetFile:
    """The encrypted file read whole and opened for decryption (io.encryption)."""
    try:
        with fs.open(p, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        raise
    except OSError as e:
        raise DataFileError(
            f"data file {path} could not be read: {describe_error(e, storage_options)}; check that the data path is "
            "reachable and retry"
        ) from scrubbed(e, storage_options)
    return open_encrypted(data, key, path)


def _encrypted(path: str) -> EncryptedLakeError:
    return EncryptedLakeError(
        f"data file {path} is encrypted, but the catalog gives it no key: the lake is not marked encrypted "
        "(ducklake_metadata 'encrypted'), as DuckDB also refuses ('File is encrypted, but encryption_config was not "
        "set'); the file was written by another lake's writer: remove it or restore the lake's metadata"
    )


def _is_encrypted(fs: Any, path: str) -> bool:
    """Whether the file ends with ``PARE``, the magic of Parquet modular encryption with an encrypted footer."""
    try:
        with fs.open(path, "rb") as f:
            f.seek(-4, 2)
            return bool(f.read(4) == b"PARE")
    except Exception:
        return False


def read_schema(path: str, *, storage_options: dict[str, Any] | None = None) -> pa.Schema:
    fs, p = filesystem(path, storage_options)
    with fs.open(p, "rb") as f:
        return pq.ParquetFile(f).schema_arrow
