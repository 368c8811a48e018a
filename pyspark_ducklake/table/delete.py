"""Deleting rows by predicate: the plan (which positions of which data files, which inlined rows) and its staging.

A plan is made against one snapshot by reading the rows that match. Staging it in a commit checks that every planned
row is still where the plan found it (``catalog/commit_rows.py`` raises :class:`StalePlanError` when a flush, a
compaction, an overwrite or an update moved it); the commit protocol then plans the delete again against the newest
snapshot. Rows another writer deleted meanwhile are simply left out, and a concurrent append touches neither the
planned files nor the planned inlined rows: neither needs a new plan.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pyspark_ducklake.catalog import commit_rows as W
from pyspark_ducklake.catalog import reader
from pyspark_ducklake.catalog.entries import DataFileEntry, TableEntry
from pyspark_ducklake.catalog.transaction import CommitContext
from pyspark_ducklake.exceptions import FormatVersionError, InvalidOptionError
from pyspark_ducklake.io.deletion_vector import (
    PUFFIN,
    delete_file_format,
    write_deletion_vector,
    write_deletion_vector_history,
)
from pyspark_ducklake.io.encryption import encode_key, new_key
from pyspark_ducklake.options import parse_bool
from pyspark_ducklake.table.data_files import new_delete_file_name, unique_positions, write_delete_file
from pyspark_ducklake.table.scan import (
    FILE_POSITION,
    ROWID,
    ScanPlan,
    apply_filter,
    execute_file_task,
    internal_column,
    read_delete_entries,
    visible,
)


@dataclass(frozen=True)
class FileDeletes:
    """Positions of one data file to delete (none of them deleted yet at the planned snapshot)."""

    file: DataFileEntry
    positions: tuple[int, ...]


@dataclass(frozen=True)
class DeletePlan:
    """The rows of one table that a delete ends, as found at ``snapshot_id``."""

    table: TableEntry
    snapshot_id: int
    files: tuple[FileDeletes, ...] = ()
    inlined_row_ids: tuple[int, ...] = ()

    @property
    def rows(self) -> int:
        return sum(len(f.positions) for f in self.files) + len(self.inlined_row_ids)


def plan_deletes(
    scan: ScanPlan, predicate: pc.Expression, storage_options: dict[str, Any] | None, filters: Any = None
) -> DeletePlan:
    """The rows of ``scan`` (a full scan plan) that match ``predicate``; reads the data files.

    Raises:
        InvalidOptionError: pyarrow cannot evaluate the predicate on some rows (``filters`` names it).
    """

    def matching(rows: pa.Table, internal: str) -> list[int]:
        # the internal column's values of the matching rows; found by position, as a user column may share its name
        passed = passing_rows(visible(rows, scan.schema), predicate, filters)
        return list(internal_column(rows, scan.schema, internal).take(passed).to_pylist())

    files: list[FileDeletes] = []
    for task in scan.files:
        rows = execute_file_task(task, scan.schema, storage_options=storage_options, with_positions=True)
        matched = matching(rows, FILE_POSITION)
        if not matched:
            continue
        # Positions already in ducklake_inlined_delete_<tid> stay there: DuckDB unions both and counts each once.
        fresh = sorted(set(matched) - set(task.inlined_deleted_positions))
        if fresh:
            files.append(FileDeletes(task.file, tuple(fresh)))
    inlined: list[int] = []
    if scan.inlined is not None and scan.inlined.data.num_rows:
        inlined = matching(scan.inlined.data, ROWID)
    return DeletePlan(scan.table, scan.snapshot_id, tuple(files), tuple(inlined))


def passing_rows(rows: pa.Table, expr: pc.Expression, filters: Any) -> pa.Array:
    """The indices of the rows that pass ``expr``."""
    index = "__row"
    while index in rows.column_names:
        index += "_"
    numbered = rows.append_column(index, pa.array(np.arange(rows.num_rows, dtype=np.int64)))
    return apply_filter(numbered, expr, expr if filters is None else filters).column(index).combine_chunks()


def stage_deletes(ctx: CommitContext, plan: DeletePlan, table_dir: str) -> None:
    """End the planned rows in this commit.

    Raises:
        StalePlanError: a planned row moved or was deleted by another writer since the plan's snapshot.
    """
    if plan.inlined_row_ids:
        W.end_inlined_rows(ctx, plan.table.table_id, list(plan.inlined_row_ids))
    for target in plan.files:
        write_deletes(ctx, plan.table, target.file, target.positions, table_dir)


def write_deletes(
    ctx: CommitContext, entry: TableEntry, data_file: Any, fresh: Sequence[int] | np.ndarray, table_dir: str
) -> None:
    """Delete ``fresh`` positions of a data file in this commit, as DuckDB does for the catalog's format version.

    The first delete of a file is a plain delete file. A later one writes a single file holding every deleted
    position with the snapshot that deleted it (``_ducklake_internal_snapshot_id``), starting at the oldest of them,
    and removes the previous delete file's row (scheduling its file for deletion): so exactly one delete file is
    visible at any snapshot, and DuckDB's own later deletes and time travel stay right. With deletion vectors on,
    that file is on DuckLake 1.1 a deletion vector of one blob per snapshot (:func:`stage_deletion_vector_history`),
    and on 1.0 one deletion vector of every position, beginning now (DuckDB 1.5.5's merge, which loses history).

    The file's deletes are read as they are now, not as planned: positions another writer deleted meanwhile are
    left out (the file's rows never change, so planning again would find exactly the others), unless that writer
    may have updated them (written new versions elsewhere), which needs a new plan.

    Raises:
        StalePlanError: the data file is no longer live (compacted, rewritten, overwritten), or rows planned here
            may have been updated; checked before anything is written.
    """
    state = W.data_file_state(ctx, entry.table_id, data_file.data_file_id)
    current = state.delete_file
    encrypt = reader.lake_encrypted(ctx.conn)  # in the attempt: DuckDB encrypts delete files too
    merged: dict[int, int] = {}
    if current is not None:
        path = reader.delete_file_path(table_dir, current, ctx.data_path)
        key = reader.file_key(current, encrypt, path)
        positions, snapshots = read_delete_entries(
            path,
            int(current.begin_snapshot),
            ctx.storage_options,
            key,
            file_format=delete_file_format(current.format, current.path),
            row_count=data_file.record_count,
        )
        merged = dict(zip(positions, snapshots, strict=True))
    # numpy, not Python lists: a file of millions of rows may lose most of them in one commit
    wanted = unique_positions(fresh)
    known = np.fromiter([*merged, *state.inlined_positions], dtype=np.int64)
    left = wanted[~np.isin(wanted, known)] if len(known) else wanted
    if len(left) < len(wanted):
        W.check_not_updated(ctx, entry.table_id, data_file.data_file_id)
    if not len(left):
        return  # another writer deleted all of them
    seen = ctx.base.snapshot_id  # every delete of the file up to the newest snapshot is accounted for
    if current is None and not deletion_vectors_on(ctx, entry):
        name, written = write_delete_file(
            data_file.path, left, table_dir, storage_options=ctx.storage_options, encrypt=encrypt
        )
        ctx.attempt_files.append(written.path)
        _add_first_delete_file(ctx, entry, data_file, written, name, seen)
        return
    fresh = left.tolist()
    if deletion_vectors_on(ctx, entry):
        if current is not None and ctx.format.multi_snapshot_deletion_vectors:
            merged.update(dict.fromkeys(fresh, ctx.snapshot_id))
            stage_deletion_vector_history(
                ctx,
                entry,
                data_file,
                int(current.delete_file_id),
                path,
                merged,
                table_dir,
                seen=seen,
                encrypted=encrypt,
            )
            return
        _write_deletion_vector(ctx, entry, data_file, current, sorted({*merged, *fresh}), table_dir, seen, encrypt)
        return
    assert current is not None  # a first Parquet delete file was written above
    for pos in fresh:
        merged[pos] = ctx.snapshot_id
    ordered = sorted(merged)
    name, written = write_delete_file(
        data_file.path,
        ordered,
        table_dir,
        storage_options=ctx.storage_options,
        snapshot_ids=[merged[p] for p in ordered],
        encrypt=encrypt,
    )
    ctx.attempt_files.append(written.path)
    previous = _Previous(int(current.delete_file_id), path)
    W.replace_delete_file(
        ctx,
        entry,
        previous,
        data_file.data_file_id,
        written,
        relative_path=name,
        begin_snapshot=min(merged.values()),
        partial_max=max(merged.values()),
        deletes_seen=seen,
    )


def deletion_vectors_on(ctx: CommitContext, entry: TableEntry) -> bool:
    """Whether deletes of the table write deletion vectors: the persisted ``write_deletion_vectors`` option of the
    table, else its schema, else the lake, as DuckDB's ``set_option`` stores it (default off: Parquet delete files).

    Raises:
        InvalidOptionError: the stored value is not a boolean; nothing was written.
    """
    known: dict[int, bool] = ctx.scratch("write_deletion_vectors", dict)
    if entry.table_id not in known:
        value = reader.write_deletion_vectors(ctx.conn, entry)
        try:
            known[entry.table_id] = value is not None and parse_bool(value, "write_deletion_vectors")
        except InvalidOptionError as e:
            raise InvalidOptionError(
                f"{e} (stored in the catalog's ducklake_metadata); set it to true or false with DuckDB: "
                "CALL <lake>.set_option('write_deletion_vectors', false)"
            ) from e
    return known[entry.table_id]


def _add_first_delete_file(
    ctx: CommitContext, entry: TableEntry, data_file: Any, written: Any, name: str, seen: int
) -> None:
    """Register the first delete file (Parquet or deletion vector) of a data file that had none."""
    W.add_delete_file(
        ctx,
        entry,
        data_file.data_file_id,
        written,
        relative_path=name,
        previous_delete_file_id=None,
        deletes_seen=seen,
    )


def _write_deletion_vector(
    ctx: CommitContext,
    entry: TableEntry,
    data_file: Any,
    current: Any | None,
    positions: list[int],
    table_dir: str,
    seen: int,
    encrypted: bool,
) -> None:
    """Delete with a deletion vector, as DuckDB 1.5.5 does with ``write_deletion_vectors`` on: the first delete of a
    file writes a DV of its positions; a later one writes one DV of every deleted position, beginning at this
    snapshot, and removes the previous delete file's row (DuckDB's merge, which loses the earlier deletes' history:
    time travel before this snapshot shows those rows again, in DuckDB and here alike; ducklake-format-2.md §2.4).
    """
    name = new_delete_file_name(PUFFIN)
    ctx.attempt_files.append(table_dir + name)
    written = write_deletion_vector(positions, table_dir + name, storage_options=ctx.storage_options)
    if encrypted:  # DuckDB's DV rows carry a key in an encrypted lake, though DVs stay plain
        written = replace(written, encryption_key=encode_key(new_key()))
    if current is None:
        _add_first_delete_file(ctx, entry, data_file, written, name, seen)
        return
    previous = _Previous(int(current.delete_file_id), reader.delete_file_path(table_dir, current, ctx.data_path))
    W.replace_delete_file(
        ctx,
        entry,
        previous,
        data_file.data_file_id,
        written,
        relative_path=name,
        begin_snapshot=ctx.snapshot_id,
        deletes_seen=seen,
    )


def stage_deletion_vector_history(
    ctx: CommitContext,
    entry: TableEntry,
    data_file: Any,
    previous_id: int,
    previous_path: str,
    deleted: dict[int, int],
    table_dir: str,
    *,
    seen: int,
    encrypted: bool,
) -> None:
    """Replace a data file's delete file (id ``previous_id`` at ``previous_path``) by DuckLake 1.1's deletion vector
    of every position in ``deleted`` (position -> the snapshot that deleted it): one cumulative blob per snapshot,
    a bare blob where there is one snapshot, beginning at the oldest and ending (``partial_max``) at the newest,
    as DuckDB 1.1's ``WriteDeletionVectorFileWithSnapshots``. Time travel and the change feed keep every snapshot's
    deletes.

    Raises:
        FormatVersionError: the catalog is DuckLake 1.0, whose readers (DuckDB 1.5) cannot read such a file;
            nothing is written.
        StalePlanError: the data file or its deletes changed since the change was planned.
    """
    if not ctx.format.multi_snapshot_deletion_vectors:
        raise FormatVersionError(
            f"a deletion vector of several snapshots (table {entry.schema.schema_name}.{entry.table_name}) needs a "
            f"DuckLake 1.1 catalog; this one is {ctx.format}, which DuckDB 1.5 reads and which keeps one deletion "
            "vector per delete file: migrate the lake to 1.1 (Lake.migrate('1.1')) to keep the history of deletes"
        )
    ordered = sorted(deleted)
    snapshots = [deleted[p] for p in ordered]
    name = new_delete_file_name(PUFFIN)
    ctx.attempt_files.append(table_dir + name)
    written = write_deletion_vector_history(
        ordered, snapshots, table_dir + name, data_file_path=data_file.path, storage_options=ctx.storage_options
    )
    if encrypted:  # DuckDB's DV rows carry a key in an encrypted lake, though DVs stay plain
        written = replace(written, encryption_key=encode_key(new_key()))
    W.replace_delete_file(
        ctx,
        entry,
        _Previous(previous_id, previous_path),
        data_file.data_file_id,
        written,
        relative_path=name,
        begin_snapshot=min(snapshots),
        partial_max=max(snapshots),
        deletes_seen=seen,
    )


@dataclass(frozen=True)
class _Previous:
    delete_file_id: int
    path: str
