"""Upserts through ``writeStream.format("ducklake")`` (options ``upsertOn``, ``deleteWhen``, ``orderBy``).

PySpark's Python stream writer has no SparkSession: ``write()`` runs in executor Python workers and ``commit()`` in a
driver-side Python worker. So ``deleteWhen`` is evaluated by the strict Spark SQL subset of ``table/delete_when.py``
(checked when the query starts), and each task keeps the last row of each key (with ``orderBy``). Then:

- a task of at most the inlining limit of rows hands them back as Arrow IPC in its commit message; when every task
  did, ``commit()`` applies the batch through the same driver-side upsert as ``ducklake_sink``'s small batches
  (:meth:`UpsertCommitter.commit_rows`: inlined when small, else Parquet written by the driver);
- a larger task pairs its rows with the table and writes them itself (``table/staged_upsert.py``), handing the
  driver only its keys: the rows of a large batch never pass through the driver.

Either way one snapshot records the batch id; a replay commits nothing and removes what its tasks wrote.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from pyspark_ducklake.exceptions import NoSuchColumnError
from pyspark_ducklake.table.delete_when import OTHER, DeleteWhen, compile_delete_when
from pyspark_ducklake.table.key_scan import KeyScan
from pyspark_ducklake.table.microbatch import (
    BatchMetrics,
    BatchPlan,
    MicroBatchCommitter,
    TablePlan,
    TaskOutput,
    UpsertSpec,
    from_ipc,
    to_ipc,
)
from pyspark_ducklake.table.microbatch_upsert import DELETE_FLAG, UpsertCommitter
from pyspark_ducklake.table.staged_upsert import StagedTask, commit_staged, stage_task
from pyspark_ducklake.table.upsert import closest_name, prepare_rows


@dataclass(frozen=True)
class StreamUpsert:
    """What the tasks and the commit of an upsert stream need (pickled with the writer)."""

    spec: UpsertSpec
    delete_when: DeleteWhen | None
    columns: tuple[str, ...]  # the stream's columns
    stored: tuple[str, ...] = ()  # the stream's columns the table keeps (see :meth:`for_table`)

    @property
    def control(self) -> frozenset[str]:
        """Columns only ``deleteWhen``/``orderBy`` use (never a key): stored only when the table has them."""
        used = set(self.spec.order_by) | set(self.delete_when.columns if self.delete_when else ())
        return frozenset(used - set(self.spec.keys))

    def for_table(self, existing: list[str] | None) -> StreamUpsert:
        """With :attr:`stored` for a table holding ``existing`` columns (None: a table the first batch creates)."""
        have = set(existing or ())
        stored = tuple(c for c in self.columns if c not in self.control or c in have)
        return StreamUpsert(self.spec, self.delete_when, self.columns, stored)

    @property
    def order_only(self) -> tuple[str, ...]:
        return tuple(c for c in self.spec.order_by if c not in self.stored)


def stream_upsert(spec: UpsertSpec, kinds: dict[str, str]) -> StreamUpsert:
    """Check the options against the stream's columns (their kinds as :mod:`table.delete_when` names them), when the
    query starts.

    Raises:
        NoSuchColumnError: an ``upsertOn`` or ``orderBy`` column the stream lacks (naming the closest).
        InvalidOptionError: ``deleteWhen`` outside the evaluated subset of Spark SQL, or naming a column the
            stream lacks.
    """
    names = list(kinds)
    for option, columns in (("upsertOn", spec.keys), ("orderBy", spec.order_by)):
        for c in columns:
            if c not in names:
                raise NoSuchColumnError(f"{option} column {c!r} is not in the stream{closest_name(c, names)}")
    compiled = None if spec.delete_when is None else compile_delete_when(spec.delete_when, kinds)
    return StreamUpsert(spec, compiled, tuple(names))


def spark_kind(data_type: Any) -> str:
    """The kind of a Spark column for ``deleteWhen``: the integer and floating types, string (binary collation
    only: another collation compares differently), boolean; anything else only for IS [NOT] NULL."""
    from pyspark.sql import types as T

    exact = {
        T.ByteType: "int8",
        T.ShortType: "int16",
        T.IntegerType: "int32",
        T.LongType: "int64",
        T.FloatType: "float32",
        T.DoubleType: "float64",
        T.BooleanType: "bool",
    }
    kind = exact.get(type(data_type))
    if kind is not None:
        return kind
    if type(data_type) is T.StringType and getattr(data_type, "collation", "UTF8_BINARY") == "UTF8_BINARY":
        return "string"
    return OTHER


def upsert_task(
    upsert: StreamUpsert, plan: BatchPlan, keys: KeyScan | None, batches: Iterable[pa.RecordBatch]
) -> TaskOutput | StagedTask:
    """Executor side: the task's rows as the commit needs them (stored and ``orderBy`` columns, the delete flag),
    handed back as Arrow IPC when they fit the inlining limit; else paired with the table (``keys``: as the writer
    planned it) and written here."""
    rows = task_rows(upsert, batches)
    if rows is None:
        return TaskOutput(0)
    if rows.num_rows <= plan.inline_limit:
        return TaskOutput(rows.num_rows, to_ipc(rows))
    return stage_task(plan, upsert.spec, keys, rows, upsert.stored)


def task_rows(upsert: StreamUpsert, batches: Iterable[pa.RecordBatch]) -> pa.Table | None:
    """The task's rows (stored and ``orderBy`` columns, the delete flag), the last of each key when ``orderBy`` is
    set; None for a task without rows."""
    names = [*upsert.stored, *upsert.order_only]
    parts: list[pa.RecordBatch] = []
    for batch in batches:
        if batch.num_rows == 0:
            continue
        arrays = [batch.column(n) for n in names]
        out = list(names)
        if upsert.delete_when is not None:
            arrays.append(upsert.delete_when.flags(batch))
            out.append(DELETE_FLAG)
        parts.append(pa.RecordBatch.from_arrays(arrays, names=out))
    if not parts:
        return None
    return last_per_key(pa.Table.from_batches(parts), upsert.spec)


def last_per_key(rows: pa.Table, spec: UpsertSpec) -> pa.Table:
    """With ``orderBy``, only the last row of each key in this task (ties: the later row), in the task's order: the
    commit keeps the last of every key over the tasks in partition order, so it keeps the same rows, and the driver
    gets fewer. Rows with a NULL key are all kept (the commit refuses them); without ``orderBy`` so are duplicates."""
    if not spec.order_by or any(rows.column(k).null_count for k in spec.keys):
        return rows
    kept = prepare_rows(rows, np.zeros(rows.num_rows, dtype=bool), rows.select(list(spec.order_by)), spec.keys)
    return kept.rows


def commit_upsert(
    committer: MicroBatchCommitter,
    upsert: StreamUpsert,
    plan: BatchPlan,
    tplan: TablePlan,
    keys: KeyScan | None,
    outputs: list[TaskOutput | StagedTask],
    *,
    app_id: str,
    batch_id: int,
    started: float,
) -> BatchMetrics:
    """Driver side: the tasks' rows or keys, in partition order (so ``orderBy`` ties go to the later row as in
    ``ducklake_sink``), applied as one snapshot; a batch that changes nothing records its batch id all the same.

    Raises:
        NullKeyError, DuplicateKeyError, NoSuchColumnError: nothing is written.
    """
    upserts = UpsertCommitter(committer, upsert.spec)
    upserts.check_keys(plan, list(upsert.stored))
    if any(isinstance(o, StagedTask) for o in outputs):
        return commit_staged(
            upserts, plan, tplan, keys, outputs, upsert.stored, app_id=app_id, batch_id=batch_id, started=started
        )
    tables = [from_ipc(o.ipc) for o in outputs if isinstance(o, TaskOutput) and o.ipc]
    if not tables:
        return upserts.record_unchanged(tplan, app_id, batch_id, 0, started)
    data = pa.concat_tables(tables)
    return upserts.commit_rows(plan, tplan, data, app_id=app_id, batch_id=batch_id, started=started)
