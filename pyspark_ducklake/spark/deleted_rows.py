"""Removing deleted rows from a DataFrame of Parquet files read by Spark: the fast read path's deletes.

A data file's deleted rows are known by their position in the file (from its delete file or deletion vector, and the
catalog's inlined deletes). Spark's Parquet reader gives every row its file and position as the hidden
``_metadata.file_path`` and ``_metadata.row_index``; how the deleted ones are dropped depends on how many there are:

- few positions and position ranges (runs of consecutive positions, as ``DELETE ... WHERE id BETWEEN`` leaves):
  one SQL filter, parsed once on the JVM;
- else, where the files with deletes have few rows enough (``BITMAP_MAX_BYTES``), a filter on a bitmap of the
  deleted positions: one binary value, seven positions a byte (so each byte is an ASCII character whose code
  Spark's ``ascii`` gives back), each file's bytes found from its path by a ``CASE`` (no path for one file). The
  value is a one-row table read by a scalar subquery, not a literal: a literal prints its bytes in hex in every plan
  string, and Spark's SQL UI keeps those of its last 1,000 queries (3.4 MB for one read of 3,000,000 rows). A row
  costs a byte lookup; nothing is joined, written or left behind, and a re-evaluation of the lazy DataFrame reads
  the same plan. For these sizes it replaced the anti join below, whose local relation of keys
  (``createDataFrame``) cost more than reading the files (tiny runs on a loaded machine, 3,000,000 rows, 300,000
  deleted positions, CPU seconds of the JVM: over four files the bitmap 1.3-4.2, the join 4.5-7.9, the read alone
  0.9-2.7; over one file the join 4.0-5.9, the same keys read from a Parquet file 2.6-4.0, a ``localCheckpoint``
  of the sent keys 3.7-7.4: both slower than the bitmap, and a file must be placed and removed);
- else a left anti join on one ``bigint`` key, ``file ordinal << bits | row_index``, with the deleted keys sent
  from Arrow. Spark joins a single integral key through its long hash map (a probe per row, no row copied), where a
  (path, position) key hashed the path's string and copied it into a key row for every row read, which cost more
  than reading the files. The file ordinal comes from a broadcast join of the path with the few files that have
  deletes (one lookup per row); a read of a single file needs no path at all.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import reduce
from typing import Any

import numpy as np
import pyarrow as pa
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

# Up to this many listed positions (runs shorter than RUN_MIN) and position ranges, in up to this many files, the
# deletes are a filter instead of a join. Spark parses and analyses a filter of 10,000 positions in about 1.5 s
# (measured under load), while the broadcast anti join of the same costs about 0.3 s to plan and as much to run: the
# filter only wins for few positions. Each range is two comparisons in one OR chain, so their number stays small.
DELETE_FILTER_MAX = 1_000
DELETE_RANGES_MAX = 64
DELETE_FILTER_FILES_MAX = 64
# Consecutive deleted positions from this many on are a range in the filter (fewer are listed).
RUN_MIN = 4
# Up to this many bytes of bitmap (a seventh of the rows of the files with deletes), in up to this many files (one
# CASE branch each, compared per row), the deletes are a bitmap filter instead of a join. The bitmap is the value of
# a scalar subquery, held by the driver and shipped with each stage's tasks.
BITMAP_MAX_BYTES = 1 << 20
BITMAP_FILES_MAX = 64
# Positions per bitmap byte: seven keep every byte below 0x80, a valid one-byte UTF-8 character.
BITMAP_BITS = 7
# Above this many deleted positions the anti join is left to Spark's planner instead of broadcast.
BROADCAST_DELETES_MAX = 2_000_000
# Bits of the join key (a bigint, kept non-negative): file ordinals and positions that do not fit together are
# joined as two columns instead (slower, never wrong).
KEY_BITS = 63

_FILE = "__ducklake_file"
_ORDINAL = "__ducklake_ordinal"
_KEY = "__ducklake_key"
_POSITION = "__ducklake_pos"
_BITMAP = "__ducklake_deleted"


@dataclass(frozen=True)
class FileDeletes:
    """One data file of the DataFrame: its path as Spark qualifies it in ``_metadata.file_path``, its row count
    and its deleted positions (sorted, distinct, each below ``rows``; empty for none)."""

    path: str
    rows: int
    positions: np.ndarray


def remove_deleted(spark: SparkSession, df: DataFrame, files: Sequence[FileDeletes]) -> DataFrame:
    """The rows of ``df`` (a ``spark.read.parquet`` of exactly ``files``) whose position is not deleted."""
    deleted = [f for f in files if len(f.positions)]
    if not deleted:
        return df
    # the file metadata column itself, also where the table has a column named _metadata (which hides it by name)
    metadata = df.metadataColumn("_metadata")
    shadowed = any(c.lower() == "_metadata" for c in df.columns)  # SQL text would name the table's column
    text = None if shadowed else filter_text(deleted)
    if text is not None:
        return df.where(text)
    if bitmap_fits(deleted):
        return _bitmap_filter(spark, df, metadata, files, deleted)
    return _anti_join(spark, df, metadata, files, deleted)


def filter_text(deleted: Sequence[FileDeletes]) -> str | None:
    """A Spark SQL condition keeping the rows not deleted, or None where there are too many positions for one."""
    if len(deleted) > DELETE_FILTER_FILES_MAX:
        return None
    terms, listed, ranges = [], 0, 0
    for f in deleted:
        single, runs = position_runs(f.positions)
        listed += len(single)
        ranges += len(runs)
        if listed > DELETE_FILTER_MAX or ranges > DELETE_RANGES_MAX:
            return None
        parts = [f"_metadata.row_index BETWEEN {a} AND {b}" for a, b in runs]
        if len(single):
            parts.append(f"_metadata.row_index IN ({', '.join(map(str, single.tolist()))})")
        terms.append(f"(_metadata.file_path = {sql_string(f.path)} AND ({' OR '.join(parts)}))")
    return f"NOT ({' OR '.join(terms)})"


def position_runs(positions: np.ndarray) -> tuple[np.ndarray, list[tuple[int, int]]]:
    """Sorted distinct positions split into single positions and ranges ``(first, last)`` of at least RUN_MIN."""
    if not len(positions):
        return positions, []
    breaks = np.flatnonzero(np.diff(positions) != 1) + 1
    starts = np.concatenate(([0], breaks))
    ends = np.concatenate((breaks, [len(positions)]))
    long_runs = (ends - starts) >= RUN_MIN
    runs = [(int(positions[s]), int(positions[e - 1])) for s, e in zip(starts[long_runs], ends[long_runs], strict=True)]
    keep = np.ones(len(positions), dtype=bool)
    for s, e in zip(starts[long_runs], ends[long_runs], strict=True):
        keep[s:e] = False
    return positions[keep], runs


def bitmap_fits(deleted: Sequence[FileDeletes]) -> bool:
    """Whether the files' deleted positions are a bitmap filter (few files, few rows) rather than a join."""
    size = sum(-(-f.rows // BITMAP_BITS) for f in deleted)
    return len(deleted) <= BITMAP_FILES_MAX and size <= BITMAP_MAX_BYTES


def deleted_bitmap(deleted: Sequence[FileDeletes]) -> tuple[bytes, list[int]]:
    """The files' deleted positions as one bitmap, and the byte each file's part starts at: position ``p`` of a file
    is bit ``p % BITMAP_BITS`` (least significant first) of byte ``start + p // BITMAP_BITS``; bytes are below 0x80."""
    parts, starts, start = [], [], 0
    for f in deleted:
        size = -(-f.rows // BITMAP_BITS)
        bits = np.zeros(size * BITMAP_BITS, dtype=np.uint8)
        bits[f.positions] = 1
        parts.append(np.packbits(bits.reshape(size, BITMAP_BITS), axis=1, bitorder="little")[:, 0].tobytes())
        starts.append(start)
        start += size
    return b"".join(parts), starts


def _bitmap_filter(
    spark: SparkSession, df: DataFrame, metadata: Column, files: Sequence[FileDeletes], deleted: Sequence[FileDeletes]
) -> DataFrame:
    blob, starts = deleted_bitmap(deleted)
    bitmap = spark.createDataFrame(pa.table({_BITMAP: pa.array([blob], pa.binary())})).select(_BITMAP).scalar()
    position = metadata.getField("row_index")
    if len(files) == 1:
        start: Column = F.lit(0)
    else:
        path = metadata.getField("file_path")
        cases = zip(deleted, starts, strict=True)
        first, first_start = next(cases)
        start = reduce(
            lambda c, fs: c.when(path == F.lit(fs[0].path), F.lit(fs[1])),
            cases,
            F.when(path == F.lit(first.path), F.lit(first_start)),
        )  # NULL for files without deletes
    index = start + F.call_function("div", position, F.lit(BITMAP_BITS))
    byte = F.substring(bitmap, (index + 1).cast("int"), 1)
    code = F.ascii(byte.cast("string"))  # the byte's value: an ASCII character
    bit = F.call_function("shiftright", code, (position % BITMAP_BITS).cast("int")).bitwiseAND(1)
    return df.where(F.coalesce(bit, F.lit(0)) == 0)


def _anti_join(
    spark: SparkSession, df: DataFrame, metadata: Column, files: Sequence[FileDeletes], deleted: Sequence[FileDeletes]
) -> DataFrame:
    position = metadata.getField("row_index")
    shift = max(1, max(f.rows for f in deleted).bit_length())
    ordinal_bits = (len(deleted) - 1).bit_length()
    total = sum(len(f.positions) for f in deleted)
    ordinals = np.repeat(np.arange(len(deleted), dtype=np.int64), [len(f.positions) for f in deleted])
    positions = np.concatenate([f.positions.astype(np.int64, copy=False) for f in deleted])
    if len(files) == 1:
        # a single file: the position is the key
        located = df.select("*", position.alias(_KEY))
        gone = pa.table({_KEY: positions})
        keys = [_KEY]
    else:
        paths = pa.table({_FILE: [f.path for f in deleted], _ORDINAL: pa.array(range(len(deleted)), pa.int64())})
        located = df.select("*", metadata.getField("file_path").alias(_FILE), position.alias(_POSITION)).join(
            F.broadcast(spark.createDataFrame(paths)), _FILE, "left"
        )
        if ordinal_bits + shift <= KEY_BITS:
            key = F.shiftleft(F.col(_ORDINAL), shift).bitwiseOR(F.col(_POSITION))
            located = located.select("*", key.alias(_KEY))
            gone = pa.table({_KEY: (ordinals << shift) | positions})
            keys = [_KEY]
        else:
            gone = pa.table({_ORDINAL: ordinals, _POSITION: positions})
            keys = [_ORDINAL, _POSITION]
    table = spark.createDataFrame(gone)
    if total <= BROADCAST_DELETES_MAX:
        table = F.broadcast(table)
    helpers = [c for c in (_FILE, _ORDINAL, _POSITION, _KEY) if c in located.columns]
    return located.join(table, keys, "left_anti").drop(*helpers)


def sql_string(text: str) -> str:
    """``text`` as a Spark SQL expression: a cast of its UTF-8 bytes as a hex literal, which needs no escaping
    whatever the path holds and however the session's parser treats backslashes (a constant, folded once)."""
    return f"CAST(X'{text.encode().hex()}' AS STRING)"


def qualified_paths(spark: SparkSession, paths: Sequence[str]) -> list[str]:
    """Each path (as given to ``spark.read.parquet``) as Spark spells it in ``_metadata.file_path`` (qualified,
    URL-encoded)."""
    jvm: Any = spark.sparkContext._jvm
    if jvm is None:
        raise RuntimeError("the SparkContext has no JVM gateway")
    conf = spark.sparkContext._jsc.hadoopConfiguration()
    out = []
    for p in paths:
        hp = jvm.org.apache.hadoop.fs.Path(p)
        out.append(str(hp.getFileSystem(conf).makeQualified(hp).toUri().toString()))
    return out


__all__ = [
    "FileDeletes",
    "bitmap_fits",
    "deleted_bitmap",
    "filter_text",
    "position_runs",
    "qualified_paths",
    "remove_deleted",
    "sql_string",
]
