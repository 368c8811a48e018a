"""The sink's upsert mode on the Spark side: ``delete_when`` evaluated by Spark, duplicates resolved by ``order_by``.

A small batch (at most the inlining limit) comes to the driver as Arrow in one limited job and is committed by
:meth:`UpsertCommitter.commit_rows`. A larger one is deduplicated by Spark (a window over the keys, the last by
``order_by`` kept), persisted so its rows are computed once, and then read twice: its keys and delete flags go to the
driver, which plans the matches against the table, and its rows go to :func:`write_upsert_task` on the executors
with the row id each replaced key keeps.
"""

from __future__ import annotations

import os
import pickle
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from pyspark_ducklake.exceptions import InvalidOptionError, NoSuchColumnError
from pyspark_ducklake.spark.connect import is_connect
from pyspark_ducklake.table.microbatch import TaskOutput, UpsertSpec
from pyspark_ducklake.table.microbatch_upsert import DELETE_FLAG, UpsertTaskPlan, write_upsert_task
from pyspark_ducklake.table.upsert import closest_name

_SEQ = "__ducklake_seq"
_RANK = "__ducklake_rank"
_OUTPUT_SCHEMA = "payload binary"


def quoted(name: str) -> str:
    """A column name as Spark SQL refers to it whatever it holds (dots, spaces, backticks)."""
    return "`" + name.replace("`", "``") + "`"


def check_spec(df: Any, spec: UpsertSpec) -> None:
    """The key and ``order_by`` columns are the batch's.

    Raises:
        NoSuchColumnError: naming the column and the closest one.
    """
    names = list(df.columns)
    for k in spec.keys:
        if k not in names:
            raise NoSuchColumnError(f"upsert_on column {k!r} is not in the micro-batch{closest_name(k, names)}")
    for c in spec.order_by:
        if c not in names:
            raise NoSuchColumnError(f"order_by column {c!r} is not in the micro-batch{closest_name(c, names)}")


def flag_deletes(df: Any, spec: UpsertSpec) -> Any:
    """``df`` with :data:`DELETE_FLAG`: ``delete_when`` as Spark evaluates it (NULL counts as false).

    Raises:
        InvalidOptionError: ``delete_when`` does not parse, names a column the batch lacks, or is not boolean.
    """
    from pyspark.errors import AnalysisException
    from pyspark.sql import functions as F
    from pyspark.sql.types import BooleanType

    if spec.delete_when is None:
        return df
    try:
        flagged = df.withColumn(DELETE_FLAG, F.expr(spec.delete_when))
        kind = flagged.schema[DELETE_FLAG].dataType
    except AnalysisException as e:
        raise InvalidOptionError(
            f"delete_when {spec.delete_when!r} is not a Spark SQL expression over the micro-batch's columns "
            f"({', '.join(df.columns)}): {e}"
        ) from e
    if not isinstance(kind, BooleanType):
        raise InvalidOptionError(
            f"delete_when {spec.delete_when!r} must be a boolean expression (true deletes the key), but it gives "
            f"{kind.simpleString()}; compare it, e.g. \"op = 'd'\""
        )
    return flagged.withColumn(DELETE_FLAG, F.coalesce(F.col(DELETE_FLAG), F.lit(False)))


_STRING_LITERAL = re.compile(r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"")
_IDENTIFIER = re.compile(r"`((?:[^`]|``)+)`|([A-Za-z_][A-Za-z0-9_]*)")


def control_columns(columns: list[str], spec: UpsertSpec) -> set[str]:
    """The ``order_by`` columns and the batch's columns ``delete_when`` names (outside its string literals,
    case-insensitively, as Spark resolves them; a name Spark would take for a function counts too: such a column is
    then only kept when the table has it), but not the keys."""
    out = set(spec.order_by)
    if spec.delete_when is not None:
        text = _STRING_LITERAL.sub(" ", spec.delete_when)
        named = {
            (m.group(1).replace("``", "`") if m.group(1) else m.group(2)).lower() for m in _IDENTIFIER.finditer(text)
        }
        out |= {c for c in columns if c.lower() in named}
    return out - set(spec.keys)  # a key is always stored


def dedupe(df: Any, spec: UpsertSpec) -> Any:
    """One row per key: the last by ``order_by`` (ties: the later row; NULL first), as ``lake.upsert`` keeps."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    if not spec.order_by:
        return df  # duplicates are found on the driver, from the keys (DuplicateKeyError)
    keys = [F.col(quoted(k)) for k in spec.keys]
    order = [F.col(quoted(c)).desc_nulls_last() for c in spec.order_by] + [F.col(_SEQ).desc()]
    window = Window.partitionBy(*keys).orderBy(*order)
    numbered = df.withColumn(_SEQ, F.monotonically_increasing_id())
    # Shuffled by key into as many partitions as the cluster runs tasks at once (the window reuses them): left to
    # spark.sql.shuffle.partitions (200), a batch of 2,000 keys became 200 tasks writing 325 files, and the
    # persisted result keeps its partitioning (AQE does not coalesce a cached plan's output).
    ranked = numbered.repartition(task_slots(df.sparkSession), *keys).withColumn(_RANK, F.row_number().over(window))
    return ranked.where(F.col(_RANK) == 1).drop(_SEQ, _RANK)


def task_slots(spark: Any) -> int:
    """How many tasks the session runs at once: the SparkContext's default parallelism, or on Spark Connect (which
    has none here) ``spark.default.parallelism`` if set, else this machine's cores."""
    if not is_connect(spark):
        return max(1, int(spark.sparkContext.defaultParallelism))
    configured = spark.conf.get("spark.default.parallelism", None)
    return max(1, int(configured)) if configured else max(1, os.cpu_count() or 1)


def persisted_dedupe(df: Any, spec: UpsertSpec, stored: list[str]) -> Any:
    """The large batch deduplicated, its stored columns and delete flag, persisted: its keys and its rows are read
    in two jobs and must be the same rows (computed once; only a lost executor's blocks are computed again, from a
    source Spark requires to replay deterministically anyway)."""
    from pyspark import StorageLevel

    flag = [DELETE_FLAG] if spec.delete_when else []
    deduped = dedupe(df, spec).select(*[quoted(c) for c in stored], *flag)
    return deduped.persist(StorageLevel.MEMORY_AND_DISK)


def run_upsert_tasks(df: Any, task_plan: UpsertTaskPlan) -> list[TaskOutput]:
    """Run :func:`write_upsert_task` on every partition of ``df`` (executors) and collect what they wrote."""
    names = list(df.columns)

    def task(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        output = write_upsert_task(task_plan, (b.rename_columns(names) for b in batches))
        yield pa.RecordBatch.from_pydict(
            {"payload": [pickle.dumps(output)]}, schema=pa.schema([("payload", pa.binary())])
        )

    plain = df.toDF(*[f"_c{i}" for i in range(len(names))])
    rows = plain.mapInArrow(task, _OUTPUT_SCHEMA).collect()
    return [pickle.loads(r["payload"]) for r in rows]


@dataclass
class ControlMemo:
    """:func:`control_columns` per batch schema (a stream keeps its schema)."""

    key: Any = None
    value: frozenset[str] = frozenset()

    def get(self, df: Any, spec: UpsertSpec) -> frozenset[str]:
        key = (tuple(df.columns), spec)
        if key != self.key:
            self.key, self.value = key, frozenset(control_columns(list(df.columns), spec))
        return self.value
