"""Partition specs: ``ducklake_partition_info`` / ``ducklake_partition_column`` / ``ducklake_file_partition_value``.

A spec is a list of (column, transform) keys. A transform is stored as DuckDB stores it: ``identity``, the calendar
parts ``year``, ``month``, ``day``, ``hour`` (DuckLake 1.0), ``bucket(N)`` (1.0: Iceberg's murmur3 bucket, as
DuckDB computes it) and ``epoch_year``, ``epoch_month``, ``epoch_day``, ``epoch_hour`` (DuckLake 1.1 only: whole
units since 1970-01-01). Users write keys as DuckDB's ``SET PARTITIONED BY`` does: ``k``, ``year(ts)``,
``bucket(4, id)``. Partition ids come from ``next_catalog_id``, as the reference allocates them.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import Connection, insert, select, update

from pyspark_ducklake.catalog import reader
from pyspark_ducklake.catalog import tables as T
from pyspark_ducklake.catalog.format_version import FormatVersion
from pyspark_ducklake.catalog.partition_keys import split_keys
from pyspark_ducklake.catalog.transaction import CommitContext
from pyspark_ducklake.catalog.types import NESTED_TYPES, Column, TableSchema, arrow_type, find_folded
from pyspark_ducklake.exceptions import FormatVersionError, InvalidOptionError, NoSuchColumnError, UnsupportedTypeError

CALENDAR_TRANSFORMS = ("year", "month", "day", "hour")
EPOCH_TRANSFORMS = ("epoch_year", "epoch_month", "epoch_day", "epoch_hour")
TRANSFORMS = ("identity", *CALENDAR_TRANSFORMS, "bucket", *EPOCH_TRANSFORMS)
TEMPORAL_TYPES = frozenset({"date", "timestamp", "timestamp_s", "timestamp_ms", "timestamp_ns", "timestamptz"})
# bucket() of these DuckDB hashes as its own text of each value, which is not reproduced here
BUCKET_REFUSED_TYPES = NESTED_TYPES | frozenset({"variant", "geometry"})
BUCKET_MAX = 2**31 - 1  # DuckDB: "Bucket count cannot exceed 2147483647"
VALID_KEYS = (
    "a column (identity), year(col), month(col), day(col), hour(col), bucket(N, col), epoch_year(col), "
    "epoch_month(col), epoch_day(col), epoch_hour(col)"
)
_STORED_BUCKET = re.compile(r"^bucket\(\s*(\d+)\s*\)$")
_CALL = re.compile(r"^([A-Za-z_]\w*)\s*\((.*)\)$", re.S)
_PLAIN_NAME = re.compile(r"^[^,()\"]+$")


@dataclass(frozen=True)
class PartitionField:
    key_index: int
    column_id: int
    transform: str
    key_name: str


@dataclass(frozen=True)
class PartitionSpec:
    partition_id: int
    fields: tuple[PartitionField, ...]


def transform_kind(transform: str) -> str:
    """The kind of a stored transform: ``bucket`` for ``bucket(N)``, else the transform itself.

    Raises:
        InvalidOptionError: a transform DuckLake 1.0 and 1.1 do not define (written by a newer DuckDB), or a malformed
            ``bucket(N)``.
    """
    if transform.startswith("bucket("):
        bucket_count(transform)
        return "bucket"
    if transform in TRANSFORMS:
        return transform
    raise InvalidOptionError(
        f"partition transform {transform!r} is not one this pyspark-ducklake knows (identity, "
        f"{', '.join(CALENDAR_TRANSFORMS)}, bucket(N), {', '.join(EPOCH_TRANSFORMS)}); write to this table with the "
        "DuckDB that partitioned it, or repartition it with lake.set_partitioning()"
    )


def bucket_count(transform: str) -> int:
    """``N`` of a stored ``bucket(N)`` transform.

    Raises:
        InvalidOptionError: not ``bucket(N)`` with ``1 <= N <= 2**31 - 1``.
    """
    m = _STORED_BUCKET.match(transform.strip())
    count = int(m.group(1)) if m else 0
    if not 1 <= count <= BUCKET_MAX:
        raise InvalidOptionError(
            f"partition transform {transform!r} is not a valid bucket(N) (N from 1 to {BUCKET_MAX}); repartition the "
            "table with lake.set_partitioning()"
        )
    return count


def key_text(column_name: str, transform: str) -> str:
    """A key as users write it (``k``, ``year(ts)``, ``bucket(4, id)``); names that would not parse are quoted."""
    name = column_name if _PLAIN_NAME.match(column_name) and column_name == column_name.strip() else _quote(column_name)
    if transform == "identity":
        return name
    m = _STORED_BUCKET.match(transform.strip())
    if m is not None:
        return f"bucket({int(m.group(1))}, {name})"
    return f"{transform}({name})"  # also a transform this library does not know: shown as stored


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def parse_partition_keys(
    keys: Sequence[str] | str, schema: TableSchema, *, format: FormatVersion
) -> list[tuple[int, str]]:
    """``["k", "year(ts)", "bucket(4, id)"]`` (or ``"k, year(ts), bucket(4, id)"``) to ``[(column_id, transform)]``
    with transforms as stored (``bucket(4)``), for a catalog of ``format``.

    Raises:
        InvalidOptionError: an unknown transform, a malformed key, a bucket count out of range, or a transform the
            column's type does not take.
        FormatVersionError: an ``epoch_*`` transform on a DuckLake 1.0 catalog.
        NoSuchColumnError: the column does not exist.
    """
    items = split_keys(keys) if isinstance(keys, str) else [k.strip() for k in keys]
    out: list[tuple[int, str]] = []
    for item in items:
        if not item:
            continue
        call = _CALL.match(item)
        if call is None:
            out.append((_key_column(item, item, schema).column_id, "identity"))
            continue
        kind, args = call.group(1).lower(), split_keys(call.group(2))
        if kind not in TRANSFORMS:
            raise InvalidOptionError(
                f"partition transform {call.group(1)!r} in {item!r} is not one of {', '.join(TRANSFORMS)}; partition "
                f"keys are {VALID_KEYS}"
            )
        if kind == "bucket":
            if len(args) != 2:
                raise InvalidOptionError(
                    f"partition key {item!r}: write bucket(N, col), N the number of buckets, as in bucket(16, id)"
                )
            transform = f"bucket({_bucket_arg(args[0], item)})"
        elif len(args) != 1:
            raise InvalidOptionError(f"partition key {item!r}: write {kind}(col), one column")
        else:
            transform = kind
        column = _key_column(args[-1], item, schema)
        check_transform(item, kind, column, format)
        out.append((column.column_id, transform))
    return out


def _bucket_arg(text: str, item: str) -> int:
    try:
        count = int(text, 10)
    except ValueError:
        count = 0
    if not 1 <= count <= BUCKET_MAX:
        raise InvalidOptionError(
            f"partition key {item!r}: the bucket count {text!r} must be an integer from 1 to {BUCKET_MAX}, as in "
            "bucket(16, id)"
        )
    return count


def _key_column(text: str, item: str, schema: TableSchema) -> Column:
    name = text.strip()
    if len(name) >= 2 and name[0] == name[-1] == '"':
        name = name[1:-1].replace('""', '"')
    column = schema.by_name(name)
    if column is None:
        folded = find_folded(schema.names(), name)  # DuckDB resolves column names case-insensitively
        column = schema.by_name(folded) if folded is not None else None
    if column is None:
        raise NoSuchColumnError(f"partition key {item!r}: no column {name!r} (columns: {schema.names()})")
    return column


def check_transform(item: str, kind: str, column: Column, format: FormatVersion) -> None:
    """Refuse a transform ``column``'s type does not take, or one ``format`` does not define.

    Raises:
        InvalidOptionError: the type does not fit the transform.
        FormatVersionError: an ``epoch_*`` transform and ``format`` is DuckLake 1.0.
    """
    if kind in EPOCH_TRANSFORMS and not format.epoch_transforms:
        raise FormatVersionError(
            f"partition key {item!r}: {kind} is a DuckLake 1.1 transform and this catalog is DuckLake {format.tag}; "
            "migrate the catalog first with lake.migrate('1.1') (pyspark-ducklake migrate --to 1.1; DuckDB 1.5 "
            f"cannot open it after that), or partition by {kind.removeprefix('epoch_')}({column.name}) instead"
        )
    if kind == "identity" and column.is_nested:
        raise InvalidOptionError(
            f"partition key {item!r}: column {column.name!r} is nested; partition by a primitive column"
        )
    if kind == "bucket" and (column.type in BUCKET_REFUSED_TYPES or not _readable(column)):
        raise InvalidOptionError(
            f"partition key {item!r}: bucket() of column {column.name!r} ({column.type}) is not supported here "
            "(DuckDB hashes its own text of such values); bucket a primitive column, as in bucket(16, id)"
        )
    if kind not in ("identity", "bucket") and column.type not in TEMPORAL_TYPES:
        raise InvalidOptionError(
            f"partition key {item!r}: {kind}() needs a date or timestamp column, {column.name!r} is {column.type}"
        )


def _readable(column: Column) -> bool:
    try:
        arrow_type(column)
    except UnsupportedTypeError:
        return False
    return True


def key_names(keys: list[tuple[int, str]], schema: TableSchema) -> list[str]:
    """Hive folder names for the keys, as the reference's ``GetPartitionKeyName`` chooses them."""
    by_id = schema.by_id()
    used: set[str] = set()
    names = []
    for column_id, transform in keys:
        field = by_id[column_id].name
        prefix = field if transform == "identity" else transform_kind(transform)
        name = prefix
        if name.lower() in used:
            name = f"{prefix}_{field}"
            counter = 2
            while name.lower() in used:
                name = f"{prefix}_{field}_{counter}"
                counter += 1
        used.add(name.lower())
        names.append(name)
    return names


def partition_spec(conn: Connection, table_id: int, snapshot_id: int, schema: TableSchema) -> PartitionSpec | None:
    """The table's partition spec at the snapshot, or None when unpartitioned."""
    info = T.ducklake_partition_info
    row = conn.execute(
        select(info.c.partition_id)
        .where(info.c.table_id == table_id, reader.visible(info, snapshot_id))
        .order_by(info.c.partition_id.desc())
        .limit(1)
    ).first()
    if row is None:
        return None
    pc = T.ducklake_partition_column
    rows = conn.execute(
        select(pc)
        .where(pc.c.partition_id == row.partition_id, pc.c.table_id == table_id)
        .order_by(pc.c.partition_key_index)
    ).all()
    keys = [(int(r.column_id), str(r.transform)) for r in rows]
    known = all(cid in schema.by_id() and _known(t) for cid, t in keys)
    names = key_names(keys, schema) if known else [t for _, t in keys]
    return PartitionSpec(
        int(row.partition_id),
        tuple(
            PartitionField(int(r.partition_key_index), cid, t, n)
            for r, (cid, t), n in zip(rows, keys, names, strict=False)
        ),
    )


def _known(transform: str) -> bool:
    try:
        transform_kind(transform)
    except InvalidOptionError:
        return False
    return True


def partition_keys_by_id(conn: Connection, table_id: int) -> dict[int, dict[int, tuple[int, str]]]:
    """Every spec the table ever had: ``{partition_id: {key_index: (column_id, transform)}}`` (a file keeps the
    partition id it was written with)."""
    pc = T.ducklake_partition_column
    out: dict[int, dict[int, tuple[int, str]]] = {}
    for r in conn.execute(select(pc).where(pc.c.table_id == table_id)):
        out.setdefault(int(r.partition_id), {})[int(r.partition_key_index)] = (int(r.column_id), str(r.transform))
    return out


def set_partition_spec(ctx: CommitContext, table_id: int, keys: list[tuple[int, str]]) -> int | None:
    """End the current spec and (unless ``keys`` is empty) start a new one; returns the new partition_id.

    Raises:
        FormatVersionError: an ``epoch_*`` transform and the catalog (as this commit reads it) is DuckLake 1.0.
    """
    for _, transform in keys:
        if transform in EPOCH_TRANSFORMS and not ctx.format.epoch_transforms:
            raise FormatVersionError(
                f"partition transform {transform} is DuckLake 1.1 only and this catalog is DuckLake {ctx.format.tag}; "
                "migrate the catalog first with lake.migrate('1.1')"
            )
    info = T.ducklake_partition_info
    ctx.conn.execute(
        update(info)
        .where(info.c.table_id == table_id, info.c.end_snapshot.is_(None))
        .values(end_snapshot=ctx.snapshot_id)
    )
    if not keys:
        return None
    partition_id = ctx.allocate_catalog_id()
    ctx.conn.execute(
        insert(info).values(
            partition_id=partition_id, table_id=table_id, begin_snapshot=ctx.snapshot_id, end_snapshot=None
        )
    )
    ctx.conn.execute(
        insert(T.ducklake_partition_column),
        [
            {
                "partition_id": partition_id,
                "table_id": table_id,
                "partition_key_index": i,
                "column_id": cid,
                "transform": t,
            }
            for i, (cid, t) in enumerate(keys)
        ],
    )
    return partition_id


def record_partition_values(ctx: CommitContext, data_file_id: int, table_id: int, values: Sequence[str | None]) -> None:
    if not values:
        return
    ctx.conn.execute(
        insert(T.ducklake_file_partition_value),
        [
            {"data_file_id": data_file_id, "table_id": table_id, "partition_key_index": i, "partition_value": v}
            for i, v in enumerate(values)
        ],
    )
