"""Partition specs: ``ducklake_partition_info`` / ``ducklake_partition_column`` / ``ducklake_file_partition_value``.

A spec is a list of (column, transform) keys; transforms are ``identity``, ``year``, ``month``, ``day`` and
``hour`` (the temporal transforms DuckLake 1.0 defines). Partition ids come from ``next_catalog_id``, as the
reference allocates them.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import Connection, insert, select, update

from pyspark_ducklake.catalog import reader
from pyspark_ducklake.catalog import tables as T
from pyspark_ducklake.catalog.transaction import CommitContext
from pyspark_ducklake.catalog.types import TableSchema
from pyspark_ducklake.exceptions import InvalidOptionError, NoSuchColumnError

TRANSFORMS = ("identity", "year", "month", "day", "hour")
TEMPORAL_TYPES = frozenset({"date", "timestamp", "timestamp_s", "timestamp_ms", "timestamp_ns", "timestamptz"})
_EXPR = re.compile(r"^\s*(?:(\w+)\s*\(\s*(.+?)\s*\)|(.+?))\s*$")


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


def parse_partition_keys(keys: Sequence[str] | str, schema: TableSchema) -> list[tuple[int, str]]:
    """``["k", "year(ts)"]`` (or ``"k, year(ts)"``) to ``[(column_id, transform), ...]``.

    Raises:
        InvalidOptionError: an unknown transform, or a temporal transform on a non-temporal column.
        NoSuchColumnError: the column does not exist.
    """
    items = [k.strip() for k in keys.split(",")] if isinstance(keys, str) else [k.strip() for k in keys]
    out: list[tuple[int, str]] = []
    for item in items:
        if not item:
            continue
        m = _EXPR.match(item)
        if m is None:
            raise InvalidOptionError(f"cannot parse partition key {item!r}; use 'col' or 'year(col)'")
        transform, name = (m.group(1).lower(), m.group(2)) if m.group(1) else ("identity", m.group(3))
        name = name.strip().strip('"')
        if transform not in TRANSFORMS:
            raise InvalidOptionError(
                f"partition transform {transform!r} in {item!r} is not one of {', '.join(TRANSFORMS)}"
            )
        column = schema.by_name(name)
        if column is None:
            raise NoSuchColumnError(f"partition key {item!r}: no column {name!r} (columns: {schema.names()})")
        if column.is_nested:
            raise InvalidOptionError(
                f"partition key {item!r}: column {name!r} is nested; partition by a primitive column"
            )
        if transform != "identity" and column.type not in TEMPORAL_TYPES:
            raise InvalidOptionError(
                f"partition key {item!r}: {transform}() needs a date or timestamp column, {name!r} is {column.type}"
            )
        out.append((column.column_id, transform))
    return out


def key_names(keys: list[tuple[int, str]], schema: TableSchema) -> list[str]:
    """Hive folder names for the keys, as the reference's ``GetPartitionKeyName`` chooses them."""
    by_id = schema.by_id()
    used: set[str] = set()
    names = []
    for column_id, transform in keys:
        field = by_id[column_id].name
        prefix = field if transform == "identity" else transform
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
    names = key_names(keys, schema) if all(cid in schema.by_id() for cid, _ in keys) else [t for _, t in keys]
    return PartitionSpec(
        int(row.partition_id),
        tuple(
            PartitionField(int(r.partition_key_index), cid, t, n)
            for r, (cid, t), n in zip(rows, keys, names, strict=False)
        ),
    )


def set_partition_spec(ctx: CommitContext, table_id: int, keys: list[tuple[int, str]]) -> int | None:
    """End the current spec and (unless ``keys`` is empty) start a new one; returns the new partition_id."""
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
