"""``df.writeStream.foreachBatch(ducklake_sink("main.events"))``: exactly one snapshot per micro-batch, idempotently."""

from __future__ import annotations

import logging
import pickle
import threading
import time
from collections.abc import Iterator
from typing import Any

import pyarrow as pa

from pyspark_ducklake.batch.spark_types import columns_from_spark
from pyspark_ducklake.catalog.transaction import RetryConfig
from pyspark_ducklake.exceptions import InvalidOptionError
from pyspark_ducklake.lake import Lake
from pyspark_ducklake.options import LakeConfig
from pyspark_ducklake.streaming.microbatch import (
    FLUSH_BYTES_DEFAULT,
    FLUSH_INTERVAL_DEFAULT,
    FLUSH_ROWS_DEFAULT,
    SINK_INLINING_ROW_LIMIT_DEFAULT,
    TARGET_FILE_ROWS_DEFAULT,
    BatchMetrics,
    BatchPlan,
    MicroBatchCommitter,
    SinkSettings,
    TaskOutput,
    write_task,
)

log = logging.getLogger("pyspark_ducklake.sink")

QUERY_ID_PROPERTY = "sql.streaming.queryId"
_OUTPUT_SCHEMA = "payload binary"


class DuckLakeSink:
    """The ``foreachBatch`` function; it also keeps the metrics of every batch it handled (``.metrics``)."""

    def __init__(self, table: str, config_options: dict[str, str], app_id: str | None, settings: SinkSettings) -> None:
        self.table = table
        self.config_options = config_options
        self.app_id = app_id
        self.settings = settings
        self.metrics: list[BatchMetrics] = []
        self._lock = threading.Lock()
        self._committer: MicroBatchCommitter | None = None

    @property
    def last(self) -> BatchMetrics | None:
        return self.metrics[-1] if self.metrics else None

    def _get_committer(self, spark: Any) -> MicroBatchCommitter:
        if self._committer is None:
            conf = {k: spark.conf.get(k, None) for k in ("spark.ducklake.catalog", "spark.ducklake.dataPath")}
            config = LakeConfig.resolve(self.config_options, lambda key: conf.get(key))
            lake = Lake(config.catalog, config.data_path, retry=self.settings.retry)
            self._committer = MicroBatchCommitter(lake, self.table, self.settings)
        return self._committer

    def __call__(self, batch_df: Any, batch_id: int) -> None:
        with self._lock:
            self._handle(batch_df, int(batch_id))

    def _handle(self, batch_df: Any, batch_id: int) -> None:
        started = time.monotonic()
        spark = batch_df.sparkSession
        committer = self._get_committer(spark)
        app_id = self.app_id or spark.sparkContext.getLocalProperty(QUERY_ID_PROPERTY)
        if not app_id:
            raise InvalidOptionError(
                "ducklake_sink could not find the streaming query id (not running inside foreachBatch?); "
                "pass app_id='...' explicitly"
            )
        done = committer.committed_snapshot(app_id, batch_id)
        if done is not None:
            metrics = BatchMetrics(
                batch_id, app_id, 0, "skipped", snapshot_id=done, duration_s=time.monotonic() - started
            )
            self._record(metrics)
            return
        incoming = columns_from_spark(batch_df.schema)
        plan, tplan = committer.plan(incoming)
        outputs = run_tasks(batch_df, plan)
        metrics = committer.commit(plan, tplan, outputs, app_id=app_id, batch_id=batch_id, started=started)
        self._record(metrics)

    def _record(self, metrics: BatchMetrics) -> None:
        self.metrics.append(metrics)
        log.info(
            "ducklake sink %s batch %d: %d rows, %s%s, snapshot %s, commit %.1f ms, total %.1f ms",
            self.table,
            metrics.batch_id,
            metrics.rows,
            metrics.mode,
            f" ({metrics.files} files)" if metrics.files else "",
            metrics.snapshot_id,
            metrics.commit_latency_s * 1000,
            metrics.duration_s * 1000,
        )
        if metrics.flushed_rows:
            log.info(
                "ducklake sink %s batch %d flushed %d inlined rows to Parquet",
                self.table,
                metrics.batch_id,
                metrics.flushed_rows,
            )


def run_tasks(batch_df: Any, plan: BatchPlan) -> list[TaskOutput]:
    """Run :func:`write_task` on every partition of the batch (executors) and collect what they produced."""

    def task(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        output = write_task(plan, batches)
        yield pa.RecordBatch.from_pydict(
            {"payload": [pickle.dumps(output)]}, schema=pa.schema([("payload", pa.binary())])
        )

    rows = batch_df.mapInArrow(task, _OUTPUT_SCHEMA).collect()
    return [pickle.loads(r["payload"]) for r in rows]


def ducklake_sink(
    table: str,
    *,
    catalog: str | None = None,
    data_path: str | None = None,
    app_id: str | None = None,
    data_inlining_row_limit: int = SINK_INLINING_ROW_LIMIT_DEFAULT,
    flush_rows: int = FLUSH_ROWS_DEFAULT,
    flush_bytes: int = FLUSH_BYTES_DEFAULT,
    flush_interval: float = FLUSH_INTERVAL_DEFAULT,
    create_table: bool = True,
    merge_schema: bool = False,
    partition_by: list[str] | str | None = None,
    target_file_rows: int = TARGET_FILE_ROWS_DEFAULT,
    max_retry_count: int | None = None,
    retry_wait_ms: int | None = None,
    retry_backoff: float | None = None,
) -> DuckLakeSink:
    """A ``foreachBatch`` function that commits each micro-batch to ``table`` as one DuckLake snapshot.

    Args:
        table: ``schema.table``.
        catalog: catalog URL; default from Spark conf ``spark.ducklake.catalog`` or ``DUCKLAKE_CATALOG``.
        data_path: data path for a new lake; default from ``spark.ducklake.dataPath`` or ``DUCKLAKE_DATA_PATH``.
        app_id: idempotency key; default the streaming query id (stable across restarts from a checkpoint).
        data_inlining_row_limit: batches of at most this many rows are stored in the catalog (default 1000).
        flush_rows: flush inlined rows to Parquet once the table holds this many (default 100000).
        flush_bytes: ... or about this many bytes (default 64 MiB).
        flush_interval: ... or when the oldest inlined row is this many seconds old (default 300).
        create_table: create a missing table from the stream's schema (default True).
        merge_schema: add new columns of the stream to the table (default False: a typed error).
        partition_by: partition keys for a table the sink creates (``["k", "day(ts)"]``).
        target_file_rows: rows per Parquet file written by a task (default 1000000).
        max_retry_count: commit retries (DuckLake default 10).
        retry_wait_ms: first retry wait (DuckLake default 100).
        retry_backoff: wait multiplier per retry (DuckLake default 1.5).

    Raises:
        InvalidOptionError: an option value out of range (names the option).
    """
    for name, value, minimum in (
        ("data_inlining_row_limit", data_inlining_row_limit, 0),
        ("flush_rows", flush_rows, 1),
        ("flush_bytes", flush_bytes, 1),
        ("target_file_rows", target_file_rows, 1),
    ):
        if not isinstance(value, int) or value < minimum:
            raise InvalidOptionError(f"ducklake_sink option {name} must be an integer >= {minimum}, got {value!r}")
    if not isinstance(flush_interval, (int, float)) or flush_interval < 0:
        raise InvalidOptionError(f"ducklake_sink option flush_interval must be seconds >= 0, got {flush_interval!r}")
    defaults = RetryConfig()
    retry = RetryConfig(
        defaults.max_retry_count if max_retry_count is None else max_retry_count,
        defaults.retry_wait_ms if retry_wait_ms is None else retry_wait_ms,
        defaults.retry_backoff if retry_backoff is None else retry_backoff,
    )
    keys = (
        tuple(k.strip() for k in partition_by.split(","))
        if isinstance(partition_by, str)
        else tuple(partition_by or ())
    )
    settings = SinkSettings(
        data_inlining_row_limit,
        flush_rows,
        flush_bytes,
        float(flush_interval),
        create_table,
        merge_schema,
        tuple(k for k in keys if k),
        target_file_rows,
        retry,
    )
    options = {k: v for k, v in (("catalog", catalog), ("dataPath", data_path)) if v}
    return DuckLakeSink(table, options, app_id, settings)
