"""Upserts and updates: rows that replace other rows keep their row ids, as DuckDB's ``UPDATE`` does.

DuckDB 1.5.5 writes an UPDATE as a delete of the old rows (delete file, deletion vector or ended inlined rows, as a
DELETE would) plus their new versions in the same snapshot, carrying the old row ids: inlined, as rows with the
same ``row_id`` (``next_row_id`` stays); in Parquet, as a file with a ``_ducklake_internal_row_id`` column (its
``row_id_start`` still takes a fresh range, and ``next_row_id`` grows by it). Rows with new keys are plain inserts.
A delete and an insert of one row id in one snapshot is what both change feeds read as an
``update_preimage``/``update_postimage`` pair.

An upsert is planned against one snapshot: it reads only the key columns of the files whose statistics may hold
the batch's keys, and pairs each existing row with the batch row of its key (keys compared as DuckDB compares
them: NaN equals NaN, -0.0 equals 0.0, strings exactly). The commit re-plans when any other snapshot touched the
table since the plan: an insert of the same new key or an update of the same row by another writer is then seen,
so no update is lost and no key is doubled.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pyspark_ducklake.catalog import commit_rows as W
from pyspark_ducklake.catalog import reader
from pyspark_ducklake.catalog.transaction import CommitContext
from pyspark_ducklake.catalog.types import TableSchema, find_folded
from pyspark_ducklake.exceptions import (
    DuplicateKeyError,
    InvalidOptionError,
    NoSuchColumnError,
    NullKeyError,
    StalePlanError,
    UnsupportedTypeError,
)
from pyspark_ducklake.table.data_files import PendingFile, write_data_files
from pyspark_ducklake.table.delete import DeletePlan, FileDeletes, stage_deletes
from pyspark_ducklake.table.scan import (
    FILE_POSITION,
    ROW_ID_FIELD_ID,
    ROWID,
    ScanPlan,
    execute_file_task,
    internal_column,
)

INTERNAL_ROW_ID = "_ducklake_internal_row_id"
_PRUNE_BRANCHES = 64  # at most this many "key in [lo, hi]" branches prune the files an upsert reads


@dataclass(frozen=True)
class UpsertRows:
    """An upsert's input made ready: one row per key (the last by ``order_by``), in the table's Arrow types."""

    rows: pa.Table  # the table's columns, conformed
    deletes: np.ndarray  # bool per row: the key is deleted, the row is not stored
    keys: tuple[str, ...]


@dataclass(frozen=True)
class RowChanges:
    """What one upsert or update writes, planned against ``deletes.snapshot_id``: the rows it ends, the new versions
    of rows that keep their row ids, and rows with new row ids."""

    deletes: DeletePlan
    replaced: pa.Table
    replaced_row_ids: tuple[int, ...]
    inserted: pa.Table

    def is_empty(self) -> bool:
        return self.deletes.rows == 0 and self.replaced.num_rows == 0 and self.inserted.num_rows == 0


def check_key_names(on: Any, schema: TableSchema, data_names: Sequence[str], table_name: str) -> tuple[str, ...]:
    """The key columns, checked: named, of the table (not nested) and of the data.

    Raises:
        InvalidOptionError: ``on`` is empty or not column names.
        NoSuchColumnError: a key column the table or the data lacks (naming the closest one).
        UnsupportedTypeError: a key column of a nested type.
    """
    keys = [on] if isinstance(on, str) else on
    if not isinstance(keys, (list, tuple)) or not keys or not all(isinstance(k, str) and k for k in keys):
        raise InvalidOptionError(f"on= must name the key columns of {table_name}, e.g. on=['id']; got {on!r}")
    if len(set(keys)) != len(keys):
        raise InvalidOptionError(f"on= names a key column twice: {keys!r}")
    by_name = {c.name: c for c in schema.columns}
    for k in keys:
        if k not in by_name:
            raise NoSuchColumnError(f"key column {k!r} is not in table {table_name}{closest_name(k, list(by_name))}")
        if by_name[k].is_nested:
            raise UnsupportedTypeError(
                f"key column {k!r} of {table_name} is of a nested type ({by_name[k].type}); keys must be of a "
                "primitive type"
            )
        if k not in data_names:
            raise NoSuchColumnError(f"key column {k!r} is not in the upsert's data{closest_name(k, list(data_names))}")
    return tuple(keys)


def closest_name(name: str, names: list[str]) -> str:
    """``; did you mean 'x'? (columns: [...])``: the name equal but for case, else the most similar one."""
    near = find_folded(names, name) or next(iter(difflib.get_close_matches(name, names, n=1, cutoff=0.0)), None)
    if near is None:
        return f" (columns: {names})"
    return f"; did you mean {near!r}? (columns: {names})"


def split_control_columns(
    data: pa.Table, schema: TableSchema, delete_column: str | None, order_by: Any, table_name: str
) -> tuple[pa.Table, np.ndarray, pa.Table | None]:
    """Take the delete flag and the ordering columns out of the data: ``(table rows, deletes, order)``. The delete
    column is never stored; ordering columns are stored only when the table has them.

    Raises:
        NoSuchColumnError: ``delete_column`` or an ``order_by`` column is not in the data.
        InvalidOptionError: the delete column is not boolean or holds NULL.
    """
    n = data.num_rows
    deletes = np.zeros(n, dtype=bool)
    table_names = set(schema.names())
    drop: set[str] = set()
    if delete_column is not None:
        if not isinstance(delete_column, str) or delete_column not in data.column_names:
            near = closest_name(str(delete_column), data.column_names)
            raise NoSuchColumnError(f"delete_column {delete_column!r} is not in the upsert's data{near}")
        flags = data.column(delete_column)
        if not pa.types.is_boolean(flags.type):
            raise InvalidOptionError(
                f"delete_column {delete_column!r} must be boolean (true deletes the key), not {flags.type}; cast it, "
                "e.g. pc.equal(data['op'], 'd')"
            )
        if flags.null_count:
            raise InvalidOptionError(
                f"delete_column {delete_column!r} holds NULL in {flags.null_count} rows; say true or false for each"
            )
        deletes = np.asarray(flags.to_numpy(zero_copy_only=False), dtype=bool)
        drop.add(delete_column)
    order = None
    if order_by is not None:
        cols = [order_by] if isinstance(order_by, str) else list(order_by)
        if not cols or not all(isinstance(c, str) for c in cols):
            raise InvalidOptionError(f"order_by= must name columns of the data, got {order_by!r}")
        for c in cols:
            if c not in data.column_names:
                raise NoSuchColumnError(
                    f"order_by column {c!r} is not in the upsert's data{closest_name(c, data.column_names)}"
                )
        order = data.select(cols)
        drop |= {c for c in cols if c not in table_names}
    rows = data.drop_columns([c for c in data.column_names if c in drop])
    return rows, deletes, order


def prepare_rows(rows: pa.Table, deletes: np.ndarray, order: pa.Table | None, keys: tuple[str, ...]) -> UpsertRows:
    """One row per key: the last by ``order`` (ties: the later row), or an error for duplicates without ``order``.

    Raises:
        NullKeyError: a key column holds NULL.
        DuplicateKeyError: a key occurs twice and there is no ``order``.
    """
    for k in keys:
        nulls = rows.column(k).null_count
        if nulls:
            raise NullKeyError(
                f"key column {k!r} holds NULL in {nulls} of the upsert's rows: fill or drop those rows; nothing was "
                "written"
            )
    n = rows.num_rows
    if n == 0:
        return UpsertRows(rows, deletes, keys)
    normalized = key_table(rows, keys)
    if order is not None:
        ranked = order.append_column("__i", pa.array(np.arange(n, dtype=np.int64)))
        sorting = [(c, "ascending", "at_start") for c in order.column_names] + [("__i", "ascending", "at_start")]
        sequence = pc.sort_indices(ranked, sort_keys=sorting).to_numpy()
    else:
        sequence = np.arange(n, dtype=np.int64)
    rank = np.empty(n, dtype=np.int64)
    rank[sequence] = np.arange(n, dtype=np.int64)
    grouped = (
        normalized.append_column("__rank", pa.array(rank))
        .group_by(list(normalized.column_names), use_threads=False)
        .aggregate([("__rank", "max"), ("__rank", "count")])
    )
    if grouped.num_rows == n:
        return UpsertRows(rows, deletes, keys)
    if order is None:
        counts = grouped.column("__rank_count").to_numpy()
        example = int(sequence[grouped.column("__rank_max").to_numpy()[int(np.argmax(counts > 1))]])
        key = {k: rows.column(k)[example].as_py() for k in keys}
        raise DuplicateKeyError(
            f"the upsert's rows hold {n - grouped.num_rows} duplicate keys (e.g. {key}); pass order_by= to keep the "
            "last of each, or deduplicate them; nothing was written"
        )
    winners = np.sort(sequence[grouped.column("__rank_max").to_numpy()])
    return UpsertRows(rows.take(pa.array(winners)), deletes[winners], keys)


def key_table(rows: pa.Table, keys: Sequence[str]) -> pa.Table:
    """The key columns as values that are equal exactly when DuckDB finds them equal (floats: NaN equals NaN,
    -0.0 equals 0.0), named ``k0``, ``k1``..."""
    arrays = []
    for k in keys:
        arr = rows.column(k).combine_chunks() if rows.num_rows else pa.array([], rows.schema.field(k).type)
        if isinstance(arr, pa.ChunkedArray):
            arr = arr.combine_chunks() if arr.num_chunks else pa.array([], arr.type)
        if pa.types.is_floating(arr.type):
            nan = pa.scalar(float("nan"), arr.type)
            arr = pc.if_else(pc.is_nan(arr), nan, pc.add(arr, pa.scalar(0.0, arr.type)))
            arr = arr.view(pa.int32() if arr.type == pa.float32() else pa.int64())
        elif pa.types.is_dictionary(arr.type):
            arr = arr.dictionary_decode()
        arrays.append(arr)
    return pa.Table.from_arrays(arrays, names=[f"k{i}" for i in range(len(keys))])


def prune_filter(rows: pa.Table, key: str) -> list[list[tuple[str, str, Any]]] | None:
    """DNF branches for :func:`plan_scan`'s file pruning: ``key`` between the first and last of a run of the batch's
    sorted distinct keys, at most ``_PRUNE_BRANCHES`` runs, split at the widest gaps between numbers (else into equal
    runs); None (no pruning) when the keys hold NaN."""
    arr = rows.column(key).combine_chunks()
    if len(arr) == 0:
        return None
    if pa.types.is_floating(arr.type) and pc.any(pc.is_nan(arr)).as_py():
        return None
    unique = pc.unique(arr)
    unique = unique.take(pc.sort_indices(unique))
    values = unique.to_pylist()
    n = len(values)
    if n <= _PRUNE_BRANCHES:
        cuts = list(range(1, n))
    elif pa.types.is_integer(unique.type) or pa.types.is_floating(unique.type):
        gaps = np.diff(unique.cast(pa.float64()).to_numpy(zero_copy_only=False))
        cuts = sorted((np.argsort(gaps, kind="stable")[-(_PRUNE_BRANCHES - 1) :] + 1).tolist())
    else:
        step = -(-n // _PRUNE_BRANCHES)
        cuts = list(range(step, n, step))
    branches = []
    for lo_i, hi_i in zip([0, *cuts], [*cuts, n], strict=True):
        lo, hi = values[lo_i], values[hi_i - 1]
        branches.append([(key, "=", lo)] if lo_i == hi_i - 1 else [(key, ">=", lo), (key, "<=", hi)])
    return branches


@dataclass(frozen=True)
class _Match:
    batch: np.ndarray  # batch row index per matched existing row
    row_ids: np.ndarray
    where: np.ndarray  # -1: inlined; else the index of the file task
    positions: np.ndarray  # file position (unused for inlined rows)


def plan_upsert(scan: ScanPlan, batch: UpsertRows, storage_options: dict[str, Any] | None) -> RowChanges:
    """Pair the live rows of ``scan`` (a plan of the key columns) with the batch's keys; reads those columns."""
    wanted = key_table(batch.rows, batch.keys).append_column(
        "__b", pa.array(np.arange(batch.rows.num_rows, dtype=np.int64))
    )
    key_names = [f"k{i}" for i in range(len(batch.keys))]
    parts: list[_Match] = []

    def match(rows: pa.Table, where: int) -> None:
        if rows.num_rows == 0:
            return
        existing = key_table(rows, batch.keys)
        existing = existing.cast(wanted.select(key_names).schema)
        existing = existing.append_column("__r", internal_column(rows, scan.schema, ROWID).combine_chunks())
        if where >= 0:
            existing = existing.append_column("__p", internal_column(rows, scan.schema, FILE_POSITION).combine_chunks())
        joined = existing.join(wanted, keys=key_names, join_type="inner", use_threads=False)
        if joined.num_rows == 0:
            return
        b = joined.column("__b").to_numpy()
        r = joined.column("__r").to_numpy()
        p = joined.column("__p").to_numpy() if where >= 0 else np.zeros(len(b), dtype=np.int64)
        parts.append(_Match(b, r, np.full(len(b), where), p))

    for i, task in enumerate(scan.files):
        rows = execute_file_task(task, scan.schema, storage_options=storage_options, with_positions=True)
        match(rows, i)
    if scan.inlined is not None and scan.inlined.data.num_rows:
        match(scan.inlined.data, -1)
    if parts:
        b = np.concatenate([m.batch for m in parts])
        r = np.concatenate([m.row_ids for m in parts])
        w = np.concatenate([m.where for m in parts])
        p = np.concatenate([m.positions for m in parts])
    else:
        b = r = w = p = np.zeros(0, dtype=np.int64)
    return _changes(scan, batch.rows, batch.deletes, b, r, w, p)


def _changes(
    scan: ScanPlan,
    rows: pa.Table,
    deletes: np.ndarray,
    b: np.ndarray,
    r: np.ndarray,
    w: np.ndarray,
    p: np.ndarray,
) -> RowChanges:
    """The change from matched (batch row ``b``, existing row id ``r`` at file ``w`` / position ``p``) pairs: every
    matched row ends; a kept batch row replaces the smallest row id of its key, others are inserted."""
    files: list[FileDeletes] = []
    for i, task in enumerate(scan.files):
        mine = np.sort(p[w == i])
        if len(mine):
            files.append(FileDeletes(task.file, tuple(mine.tolist())))
    inlined = tuple(np.sort(r[w == -1]).tolist())
    plan = DeletePlan(scan.table, scan.snapshot_id, tuple(files), inlined)
    # the smallest matched row id of each batch row
    order = np.lexsort((r, b))
    b_sorted, r_sorted = b[order], r[order]
    head = np.ones(len(order), dtype=bool)
    head[1:] = b_sorted[1:] != b_sorted[:-1]
    smallest = np.full(rows.num_rows, -1, dtype=np.int64)
    smallest[b_sorted[head]] = r_sorted[head]
    matched = np.zeros(rows.num_rows, dtype=bool)
    matched[b_sorted[head]] = True
    keep = ~deletes
    replaced_idx = np.flatnonzero(keep & matched)
    inserted_idx = np.flatnonzero(keep & ~matched)
    return RowChanges(
        plan,
        rows.take(pa.array(replaced_idx, pa.int64())),
        tuple(smallest[replaced_idx].tolist()),
        rows.take(pa.array(inserted_idx, pa.int64())),
    )


def update_changes(scan: ScanPlan, matched: pa.Table, new_rows: pa.Table) -> RowChanges:
    """An update's change: the ``matched`` rows (a read of ``scan`` with ``rowid`` and file positions, and a
    ``__task`` column: the file task index, -1 inlined) end; ``new_rows`` (their new values, same order) keep their
    row ids."""
    r = internal_column(matched, scan.schema, ROWID).to_numpy()
    w = matched.column("__task").to_numpy()
    p = internal_column(matched, scan.schema, FILE_POSITION).to_numpy()
    n = matched.num_rows
    changes = _changes(scan, new_rows, np.zeros(n, dtype=bool), np.arange(n, dtype=np.int64), r, w, p)
    return changes


def check_untouched(ctx: CommitContext, table_id: int, table_name: str) -> None:
    """The commit's re-plan trigger: any snapshot since the plan that changed the table's rows may hold a key of
    the batch (a concurrent insert or update of it).

    Raises:
        StalePlanError: such a snapshot exists; the change is planned again against the newest snapshot.
    """
    planned = ctx.planned_snapshot_id
    if planned is None or planned >= ctx.base.snapshot_id:
        return
    for other in reader.snapshot_changes_after(ctx.conn, planned):
        if table_id in other.changes.tables_touched():
            raise StalePlanError(
                f"snapshot {other.snapshot_id} changed table {table_name} after the upsert or update was planned"
            )


def with_row_ids(data: pa.Table, row_ids: Sequence[int]) -> pa.Table:
    """``data`` with DuckDB's ``_ducklake_internal_row_id`` column (field id 2147483540) after its columns."""
    field = pa.field(INTERNAL_ROW_ID, pa.int64(), metadata={b"PARQUET:field_id": str(ROW_ID_FIELD_ID).encode()})
    return data.append_column(field, pa.array(list(row_ids), pa.int64()))


def write_change_files(
    changes: RowChanges,
    table_dir: str,
    schema: TableSchema,
    keys: Any,
    *,
    storage_options: dict[str, Any] | None,
    encrypt: bool,
) -> tuple[list[PendingFile], list[PendingFile]]:
    """The Parquet files of a change that is not inlined: ``(replaced rows with their row ids, new rows)``."""
    replaced: list[PendingFile] = []
    inserted: list[PendingFile] = []
    try:
        if changes.replaced.num_rows:
            data = with_row_ids(changes.replaced, changes.replaced_row_ids)
            replaced = write_data_files(data, table_dir, schema, keys, storage_options=storage_options, encrypt=encrypt)
        if changes.inserted.num_rows:
            inserted = write_data_files(
                changes.inserted, table_dir, schema, keys, storage_options=storage_options, encrypt=encrypt
            )
    except BaseException:
        from pyspark_ducklake.io.fileio import delete_files

        delete_files([f.written.path for f in replaced], storage_options)
        raise
    return replaced, inserted


def stage_changes(
    ctx: CommitContext,
    changes: RowChanges,
    table_dir: str,
    schema: TableSchema,
    *,
    inline: bool,
    files: tuple[list[PendingFile], list[PendingFile]] | None,
    add_files: Any,
) -> None:
    """End the planned rows and write the new versions and new rows in this commit (``add_files(ctx, files)``
    registers Parquet files)."""
    entry = changes.deletes.table
    check_untouched(ctx, entry.table_id, f"{entry.schema.schema_name}.{entry.table_name}")
    stage_deletes(ctx, changes.deletes, table_dir)
    if inline:
        if changes.replaced.num_rows:
            W.inlined_insert(ctx, entry, schema, changes.replaced, row_ids=changes.replaced_row_ids)
        if changes.inserted.num_rows:
            W.inlined_insert(ctx, entry, schema, changes.inserted)
        return
    assert files is not None
    replaced, inserted = files
    add_files(ctx, replaced + inserted)


def read_matching(
    scan: ScanPlan, predicate: pc.Expression | None, filters: Any, storage_options: dict[str, Any] | None
) -> pa.Table:
    """The live rows of ``scan`` matching ``predicate`` (all without one), with ``rowid``, ``snapshot_id``, file
    positions and a ``__task`` column (the file task's index, -1 for inlined rows); reads the files."""
    from pyspark_ducklake.table.delete import passing_rows
    from pyspark_ducklake.table.scan import visible

    parts: list[pa.Table] = []

    def keep(rows: pa.Table, task: int) -> None:
        if predicate is not None and rows.num_rows:
            rows = rows.take(passing_rows(visible(rows, scan.schema), predicate, filters))
        if rows.num_rows:
            parts.append(rows.append_column("__task", pa.array(np.full(rows.num_rows, task, dtype=np.int64))))

    for i, task in enumerate(scan.files):
        keep(execute_file_task(task, scan.schema, storage_options=storage_options, with_positions=True), i)
    if scan.inlined is not None and scan.inlined.data.num_rows:
        inlined = scan.inlined.data
        keep(inlined.append_column(FILE_POSITION, pa.array(np.zeros(inlined.num_rows, dtype=np.int64))), -1)
    if not parts:
        from pyspark_ducklake.table.scan import empty_result

        empty = empty_result(scan.schema, with_virtual=True)
        empty = empty.append_column(FILE_POSITION, pa.array([], pa.int64()))
        return empty.append_column("__task", pa.array([], pa.int64()))
    return pa.concat_tables([p.cast(parts[0].schema) for p in parts])


def set_values(matched: pa.Table, schema: TableSchema, assignments: dict[str, Any], table_name: str) -> pa.Table:
    """The new versions of ``matched`` rows: every assignment evaluated on the old values (as SQL's ``SET``), then
    fitted to the table's types.

    Raises:
        InvalidOptionError: an expression pyarrow cannot evaluate on the rows.
        SchemaMismatchError: a value that does not fit its column.
    """
    import pyarrow.dataset as ds

    from pyspark_ducklake.table.data_files import conform_to_table
    from pyspark_ducklake.table.scan import table_columns

    old = table_columns(matched, schema)
    n = old.num_rows
    new = old
    expressions = {c: v for c, v in assignments.items() if isinstance(v, pc.Expression)}
    computed: dict[str, Any] = {}
    if expressions and n:
        try:
            result = ds.dataset(old).to_table(columns=expressions)
            computed = dict(zip(expressions, result.columns, strict=True))
        except (pa.ArrowException, TypeError, ValueError) as e:
            raise InvalidOptionError(f"update of {table_name}: cannot evaluate {expressions}: {e}") from e
    for c, v in assignments.items():
        if isinstance(v, pc.Expression):
            arr = computed.get(c, pa.array([], old.schema.field(c).type))
        elif v is None:
            arr = pa.nulls(n, old.schema.field(c).type)
        else:
            try:
                arr = pa.array([v] * n) if n else pa.array([], old.schema.field(c).type)
            except (pa.ArrowException, TypeError, ValueError) as e:
                raise InvalidOptionError(f"update of {table_name}: {c}={v!r} is not a value Arrow can hold: {e}") from e
        new = new.set_column(new.schema.get_field_index(c), c, arr)
    return conform_to_table(new, schema, table_name)
