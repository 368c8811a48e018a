"""``df.writeStream.format("ducklake").start("main.events")``: the sink as a Python streaming data source writer.

Same semantics as :func:`ducklake_sink`: tasks write Parquet (or hand back small partitions), the driver commits
one snapshot per micro-batch recording (app_id, batch_id), and a replayed batch is skipped. The app id defaults to
the streaming query id, which tasks read from their TaskContext.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Any, TypeVar

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamArrowWriter, WriterCommitMessage
from pyspark.sql.types import StructType

from pyspark_ducklake.catalog.db import DBAPIError
from pyspark_ducklake.catalog.transaction import is_connection_error, retry_while_unreachable, run_through_outages
from pyspark_ducklake.exceptions import CatalogUnreachableError, InvalidOptionError, SchemaMismatchError
from pyspark_ducklake.io.fileio import delete_files, filesystem
from pyspark_ducklake.lake import Lake
from pyspark_ducklake.options import (
    Entry,
    check_options,
    option_as_bool,
    option_as_int,
    option_as_seconds,
    option_as_size,
    option_value,
    parse_keys,
)
from pyspark_ducklake.spark.job_tasks import LATE_TASK_GRACE_S
from pyspark_ducklake.spark.lake_config import LakeConfig
from pyspark_ducklake.spark.type_mapping import columns_from_spark
from pyspark_ducklake.streaming.write_stream_upsert import (
    StreamUpsert,
    commit_upsert,
    spark_kind,
    stream_upsert,
    upsert_task,
)
from pyspark_ducklake.table.job_files import JobToken, remove_job_files, remove_job_files_late
from pyspark_ducklake.table.key_scan import KeyScan, plan_key_scan
from pyspark_ducklake.table.maintenance.retention import retention_spec
from pyspark_ducklake.table.microbatch import (
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
    upsert_spec,
    write_task,
)
from pyspark_ducklake.table.microbatch_upsert import UpsertCommitter
from pyspark_ducklake.table.staged_upsert import StagedTask

log = logging.getLogger("pyspark_ducklake.sink")


def sink_settings(options: dict[str, str], retry: object) -> SinkSettings:
    """Sink settings from Spark writer options (case-insensitive; same names as ``ducklake_sink``'s arguments).

    Raises:
        InvalidOptionError: an unknown option (with the closest valid name) or a value that does not parse.
    """
    parsed = check_options(options, Entry.STREAM_WRITE)
    return SinkSettings(
        data_inlining_row_limit=option_as_int(
            options, "data_inlining_row_limit", SINK_INLINING_ROW_LIMIT_DEFAULT, minimum=0
        )
        or 0,
        flush_rows=option_as_int(options, "flush_rows", FLUSH_ROWS_DEFAULT, minimum=1) or FLUSH_ROWS_DEFAULT,
        flush_bytes=option_as_size(options, "flush_bytes", FLUSH_BYTES_DEFAULT),
        flush_interval=option_as_seconds(options, "flush_interval", FLUSH_INTERVAL_DEFAULT),
        create_table=option_as_bool(options, "create_table", True),
        merge_schema=option_as_bool(options, "merge_schema", False),
        partition_by=parse_keys(option_value(options, "partition_by") or "", "partition_by"),
        target_file_rows=option_as_int(options, "target_file_rows", TARGET_FILE_ROWS_DEFAULT, minimum=1)
        or TARGET_FILE_ROWS_DEFAULT,
        retry=retry,  # type: ignore[arg-type]
        upsert=upsert_spec(parsed, spark=True),
        retention=retention_spec(parsed),
    )


@dataclass(frozen=True)
class StreamTaskMessage(WriterCommitMessage):
    output: TaskOutput | StagedTask
    query_id: str | None


def batch_job(query_id: str, identifier: str, batch_id: int) -> JobToken:
    """The token naming the files of one micro-batch: the same in its tasks (which know the query id from their
    TaskContext) and in its commit and abort (which read it from the checkpoint), which Spark runs from separate
    copies of the writer. A replay of the batch after a crash shares it; its first attempt's files are then orphans,
    never committed ones (those are referenced, and a sweep keeps what a snapshot references)."""
    return JobToken.derived(f"{query_id}\0{identifier}\0{batch_id}")


def checkpoint_query_id(checkpoint: str | None, storage_options: dict[str, Any] | None) -> str | None:
    """The streaming query id Spark recorded in ``<checkpoint>/metadata`` (``{"id": ...}``), or None."""
    if not checkpoint:
        return None
    try:
        fs, path = filesystem(checkpoint.rstrip("/") + "/metadata", storage_options)
        with fs.open(path, "r") as f:
            value = json.loads(f.readline()).get("id")
    except Exception as e:  # a store fsspec cannot open (hdfs://), or no metadata yet: the files stay as orphans
        log.warning("cannot read the streaming query id from checkpoint %s: %s", checkpoint, e)
        return None
    return value if isinstance(value, str) and value else None


T = TypeVar("T")


def scratch_paths(messages: list[StreamTaskMessage]) -> list[str]:
    """The scratch files of large upsert tasks (``table/scratch.py``): no snapshot references them."""
    return [s.path for m in messages if isinstance(m.output, StagedTask) for s in m.output.scratch]


class DuckLakeStreamWriter(DataSourceStreamArrowWriter):
    """The streaming writer; planned on the driver when the query starts, re-checked at every commit."""

    def __init__(self, config: LakeConfig, identifier: str, options: dict[str, str], schema: StructType) -> None:
        self.config = config
        # Spark gives every copy of the writer (the tasks', each batch's commit or abort) the checkpoint location
        self.checkpoint = option_value(options, "checkpointLocation")
        self.identifier = identifier
        self.settings = sink_settings(options, config.retry)
        self.app_id = option_value(options, "app_id")
        self.schema = schema
        self.incoming = columns_from_spark(schema)
        # upsertOn/deleteWhen/orderBy checked against the stream's columns now: PySpark creates the writer when it
        # plans a micro-batch (the first one, before any task runs), not when the query starts
        spec = self.settings.upsert
        kinds = {f.name: spark_kind(f.dataType) for f in schema.fields}
        self.upsert: StreamUpsert | None = None if spec is None else stream_upsert(spec, kinds)
        self.key_scan: KeyScan | None = None  # upserts: the table's keys as the tasks pair their rows with them
        # Spark makes a writer for every micro-batch: it waits out an outage too, one starting after the connect
        self.plan: BatchPlan = self._while_unreachable(self._plan)

    def _plan(self) -> BatchPlan:
        lake = self._lake()
        try:
            committer = MicroBatchCommitter(lake, self.identifier, self.settings)
            if self.upsert is not None:
                # only the columns the table keeps (a table the first batch creates leaves out the control ones)
                self.upsert = self.upsert.for_table(committer.table_columns())
                stored = StructType([f for f in self.schema.fields if f.name in self.upsert.stored])
                self.incoming = columns_from_spark(stored)
                plan, tplan = committer.plan(self.incoming)
                UpsertCommitter(committer, self.upsert.spec).check_keys(plan, list(self.upsert.stored))
                if tplan.entry is not None:
                    with lake.engine.connect() as conn:
                        keys = self.upsert.spec.keys
                        fmt = lake.info.format
                        self.key_scan = plan_key_scan(conn, tplan.entry, tplan.snapshot_id, lake.data_path, fmt, keys)
                return plan
            return committer.plan(self.incoming)[0]
        finally:
            lake.close()

    def _while_unreachable(self, step: Callable[[], T]) -> T:
        """``step()``, run again for up to ``reconnect_timeout`` seconds while the catalog refuses or drops
        connections."""
        try:
            return step()
        except (CatalogUnreachableError, DBAPIError) as e:
            if isinstance(e, DBAPIError) and not is_connection_error(e):
                raise
            return retry_while_unreachable(step, self.settings.retry, e)

    def _lake(self) -> Lake:
        return self.config.connect(retry=self.settings.retry)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> StreamTaskMessage:
        from pyspark import TaskContext

        context = TaskContext.get()
        query_id = context.getLocalProperty("sql.streaming.queryId") if context is not None else None
        batch = context.getLocalProperty("streaming.sql.batchId") if context is not None else None
        plan = self.plan
        if query_id and batch is not None:
            plan = replace(plan, job=batch_job(query_id, self.identifier, int(batch)))
        if self.upsert is not None:  # few rows go to the commit as Arrow IPC; more are paired and written here
            return StreamTaskMessage(upsert_task(self.upsert, plan, self.key_scan, iterator), query_id)
        return StreamTaskMessage(write_task(plan, iterator), query_id)

    def _batch_job(self, batch_id: int) -> JobToken | None:
        """The token of batch ``batch_id``'s files (see :func:`batch_job`), from the query id the checkpoint
        records; None when it cannot be read."""
        query_id = checkpoint_query_id(self.checkpoint, self.config.storage_options)
        return None if query_id is None else batch_job(query_id, self.identifier, batch_id)

    def _batch_plan(self, batch_id: int, query_id: str | None) -> BatchPlan:
        """The plan with batch ``batch_id``'s file token, as its tasks named their files."""
        return self.plan if not query_id else replace(self.plan, job=batch_job(query_id, self.identifier, batch_id))

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Commit the batch; through a catalog outage (a refused or lost connection, a COMMIT of unknown outcome)
        wait up to ``reconnect_timeout`` for the catalog and try again: the replay check finds a batch that did land.

        Raises:
            CatalogUnreachableError: the catalog stayed unreachable; restart the query from its checkpoint.
        """
        started = time.monotonic()

        def lost(error: Exception) -> None:  # the next attempt's _open waits for the catalog
            log.warning(
                "ducklake sink %s batch %d: catalog connection lost (%s); waiting", self.identifier, batchId, error
            )

        run_through_outages(
            lambda: self._commit(messages, batchId, started), self.settings.retry, lost, f"batch {batchId}"
        )

    def _open(self) -> Lake:
        """The lake, waiting up to ``reconnect_timeout`` seconds for a catalog that refuses or drops connections."""
        try:
            return self._lake()
        except (CatalogUnreachableError, DBAPIError) as e:
            if isinstance(e, DBAPIError) and not is_connection_error(e):
                raise
            return retry_while_unreachable(self._lake, self.settings.retry, e)

    def _commit(self, messages: list[WriterCommitMessage | None], batchId: int, started: float) -> None:
        ours = [m for m in messages if isinstance(m, StreamTaskMessage)]
        ours_query_id = next((m.query_id for m in ours if m.query_id), None)
        app_id = self.app_id or ours_query_id
        if not app_id:
            raise InvalidOptionError("cannot tell the streaming query id; set option app_id on the writer")
        lake = self._open()
        try:
            committer = MicroBatchCommitter(lake, self.identifier, self.settings)
            if self.upsert is not None:
                metrics = self._commit_upsert(lake, committer, self.upsert, ours, app_id, batchId, started)
            else:
                metrics = self._commit_append(lake, committer, ours, app_id, batchId, started)
        finally:
            lake.close()
        if metrics is None:
            log.info("ducklake sink %s batch %d: already committed; skipped", self.identifier, batchId)
            return
        log.info(
            "ducklake sink %s batch %d: %d rows, %s, snapshot %s, commit %.1f ms",
            self.identifier,
            batchId,
            metrics.rows,
            metrics.mode,
            metrics.snapshot_id,
            metrics.commit_latency_s * 1000,
        )

    def _remove_replayed(self, lake: Lake, ours: list[StreamTaskMessage]) -> None:
        """What the tasks of a batch already committed wrote: a replay writes new files, but a retry after a COMMIT
        of unknown outcome may find its own files referenced by the snapshot that landed, so only unreferenced ones
        go (scratch files are never referenced)."""
        paths = [f.written.path for m in ours for f in m.output.files]
        referenced = lake.referenced_files(paths) if paths else set()
        delete_files([p for p in paths if p not in referenced] + scratch_paths(ours), self.config.storage_options)

    def _current_plan(self, plan: BatchPlan) -> None:
        """The table as this batch finds it must be the one the query started with.

        Raises:
            SchemaMismatchError: its columns or location changed: restart the query.
        """
        if plan.schema.shape() != self.plan.schema.shape() or plan.table_dir != self.plan.table_dir:
            raise SchemaMismatchError(
                f"table {self.identifier} changed while the stream was running (columns or location); "
                "restart the query to pick up the new schema"
            )

    def _commit_append(
        self,
        lake: Lake,
        committer: MicroBatchCommitter,
        ours: list[StreamTaskMessage],
        app_id: str,
        batchId: int,
        started: float,
    ) -> BatchMetrics | None:
        """Commit the tasks' rows and files as one snapshot; None for a batch already committed."""
        if committer.committed_snapshot(app_id, batchId) is not None:
            self._remove_replayed(lake, ours)
            return None
        plan, tplan = committer.plan(self.incoming)
        self._current_plan(plan)
        query_id = next((m.query_id for m in ours if m.query_id), None)
        return committer.commit(
            self._batch_plan(batchId, query_id),
            tplan,
            [m.output for m in ours if isinstance(m.output, TaskOutput)],
            app_id=app_id,
            batch_id=batchId,
            started=started,
        )

    def _commit_upsert(
        self,
        lake: Lake,
        committer: MicroBatchCommitter,
        upsert: StreamUpsert,
        ours: list[StreamTaskMessage],
        app_id: str,
        batchId: int,
        started: float,
    ) -> BatchMetrics | None:
        """Apply the tasks' rows by key as one snapshot; None for a batch already committed (its rows unread, the
        files its tasks wrote removed)."""
        _, planned = committer.prepare(app_id, batchId, self.incoming)
        if planned is None:
            self._remove_replayed(lake, ours)
            return None
        plan, tplan = planned
        self._current_plan(plan)
        query_id = next((m.query_id for m in ours if m.query_id), None)
        plan = replace(plan, job=self._batch_plan(batchId, query_id).job)
        outputs = [m.output for m in ours]
        return commit_upsert(
            committer, upsert, plan, tplan, self.key_scan, outputs, app_id=app_id, batch_id=batchId, started=started
        )

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        job = self._batch_job(batchId)
        if job is not None and any(m is None for m in messages):
            # A task failed, so the commit never ran: every file of this batch's attempt goes, found by its name
            # (tasks Spark was still killing, or that finished after the failure, never reported theirs).
            try:
                lake = self._lake()
            except Exception as e:
                log.warning("keeping the files of aborted batch %d: %s", batchId, e)
                return
            try:
                remove_job_files_late(
                    lambda: remove_job_files(
                        lake.engine,
                        lake.data_path,
                        self.plan.table_dir,
                        job,
                        storage_options=self.config.storage_options,
                    ),
                    grace_s=LATE_TASK_GRACE_S,
                )
            finally:
                lake.close()
            return
        # abort can follow a commit that raised after publishing: only remove files no snapshot references.
        ours = [m for m in messages if isinstance(m, StreamTaskMessage)]
        delete_files(scratch_paths(ours), self.config.storage_options)  # never referenced
        paths = [f.written.path for m in ours for f in m.output.files]
        if not paths:
            return
        lake = self._lake()
        try:
            referenced = lake.referenced_files(paths)
        except Exception as e:
            log.warning("keeping %d files of aborted batch %d: %s", len(paths), batchId, e)
            return
        finally:
            lake.close()
        delete_files([p for p in paths if p not in referenced], self.config.storage_options)
