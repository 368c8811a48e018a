"""``df.writeStream.foreachBatch(ducklake_sink("main.events"))``: exactly one snapshot per micro-batch, idempotently."""

from __future__ import annotations

import logging
import pickle
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from typing import Any, cast

import pyarrow as pa
from pyspark.sql.types import StructType

from pyspark_ducklake.catalog.transaction import outcome_unknown, run_through_outages, wait_for_catalog
from pyspark_ducklake.exceptions import InvalidOptionError, NoSuchColumnError, StalePlanError
from pyspark_ducklake.options import Entry, check_keywords, check_options
from pyspark_ducklake.spark.connect import is_connect
from pyspark_ducklake.spark.job_tasks import tasks_stopped_on_failure
from pyspark_ducklake.spark.lake_config import LakeConfig, retry_config, spark_conf
from pyspark_ducklake.spark.type_mapping import columns_from_spark
from pyspark_ducklake.streaming.sink_upsert import (
    ControlMemo,
    check_spec,
    flag_deletes,
    persisted_dedupe,
    quoted,
    run_upsert_tasks,
)
from pyspark_ducklake.table.job_files import JobToken
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
    UpsertSpec,
    upsert_spec,
    write_task,
)
from pyspark_ducklake.table.microbatch_upsert import DELETE_FLAG, UpsertCommitter
from pyspark_ducklake.table.upsert import closest_name

log = logging.getLogger("pyspark_ducklake.sink")

QUERY_ID_PROPERTY = "sql.streaming.queryId"
_OUTPUT_SCHEMA = "payload binary"


class DuckLakeSink:
    """The ``foreachBatch`` function; it also keeps the metrics of every batch it handled (``.metrics``).

    On Spark Connect the client pickles this object and the server runs the copy in a Python process of its own:
    ``.metrics`` of the client's object stay empty (read the table's snapshots instead), and ``app_id`` must be
    given, since nothing there tells the streaming query's id.
    """

    def __init__(
        self,
        table: str,
        config_options: dict[str, str],
        app_id: str | None,
        settings: SinkSettings,
        storage_options: dict[str, Any] | None = None,
    ) -> None:
        self.table = table
        self.config_options = config_options
        self.storage_options = storage_options
        self.app_id = app_id
        self.settings = settings
        self.metrics: list[BatchMetrics] = []
        self._lock = threading.Lock()
        self._committer: MicroBatchCommitter | None = None
        # After a batch small enough to inline, the next one is first fetched through Arrow (see collect_if_small).
        self._expect_small = False
        self._control = ControlMemo()

    def __getstate__(self) -> dict[str, Any]:
        # Spark Connect pickles the foreachBatch function: the copy starts without a lock or an open lake.
        state = self.__dict__.copy()
        del state["_lock"]
        state["_committer"] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    @property
    def last(self) -> BatchMetrics | None:
        return self.metrics[-1] if self.metrics else None

    def _get_committer(self, spark: Any) -> MicroBatchCommitter:
        if self._committer is None:
            conf = spark_conf(spark)
            config = LakeConfig.resolve(self.config_options, conf.get)
            storage = self.storage_options or config.storage_options
            lake = config.connect(retry=self.settings.retry, storage_options=storage)
            self._committer = MicroBatchCommitter(lake, self.table, self.settings)
        return self._committer

    def __call__(self, batch_df: Any, batch_id: int) -> None:
        with self._lock:
            self._handle_through_outages(batch_df, int(batch_id))

    def _handle_through_outages(self, batch_df: Any, batch_id: int) -> None:
        """Run the batch; after a lost catalog connection (or a COMMIT of unknown outcome) wait for the catalog and
        run it again: the replay check finds a batch that did land. ``CatalogUnreachableError`` after
        ``reconnect_timeout`` seconds without the catalog."""
        retry = self.settings.retry

        def wait(error: Exception) -> None:
            if self._committer is None:  # the lake was never opened: nothing to wait on
                raise error
            log.warning("ducklake sink %s batch %d: catalog connection lost (%s); waiting", self.table, batch_id, error)
            wait_for_catalog(self._committer.lake.engine, retry, error)

        run_through_outages(lambda: self._handle(batch_df, batch_id), retry, wait, f"batch {batch_id}")

    def _handle(self, batch_df: Any, batch_id: int) -> None:
        started = time.monotonic()
        spark = batch_df.sparkSession
        committer = self._get_committer(spark)
        app_id = self.app_id or query_id(spark, self.table)
        if not app_id:
            raise InvalidOptionError(
                "ducklake_sink could not find the streaming query id (not running inside foreachBatch?); "
                "pass app_id='...' explicitly"
            )
        if self.settings.upsert is not None:
            self._handle_upsert(batch_df, batch_id, app_id, committer, started)
            return
        done, planned = committer.prepare(app_id, batch_id, columns_from_spark(batch_df.schema))
        if planned is None:
            metrics = BatchMetrics(
                batch_id, app_id, 0, "skipped", snapshot_id=done, duration_s=time.monotonic() - started
            )
            self._record(metrics)
            return
        plan, tplan = planned
        plan = replace(plan, job=JobToken.new())  # this attempt's files carry its own token
        try:
            small = collect_if_small(batch_df, plan.inline_limit) if self._expect_small else None
            if small is not None:
                outputs = [write_task(plan, small)]
            else:
                with tasks_stopped_on_failure(spark):
                    outputs = run_tasks(batch_df, plan)
        except BaseException:
            # A task failed: its files go, and so do those of tasks that finished (or were killed) meanwhile, which
            # never reported them; the tasks have stopped by now.
            self._remove_attempt_files(committer, plan)
            raise
        try:
            metrics = committer.commit(plan, tplan, outputs, app_id=app_id, batch_id=batch_id, started=started)
        except Exception as e:
            if not outcome_unknown(e):  # a commit that may have landed (or be landing) keeps its files
                self._remove_attempt_files(committer, plan)
            raise
        if metrics.rows:
            self._expect_small = metrics.rows <= plan.inline_limit
        self._record(metrics)

    def _handle_upsert(
        self, batch_df: Any, batch_id: int, app_id: str, committer: MicroBatchCommitter, started: float
    ) -> None:
        """One upsert micro-batch: small ones through the driver, large ones written by the executors (see
        ``streaming/sink_upsert.py``); a large one whose planned row ids went stale before its commit runs again."""
        spec = self.settings.upsert
        assert spec is not None
        selected, stored, incoming = self._upsert_input(batch_df, committer, spec)
        upserts = UpsertCommitter(committer, spec)
        deduped = None
        try:
            for attempt in range(self.settings.retry.max_retry_count + 1):
                done, planned = committer.prepare(app_id, batch_id, incoming)
                if planned is None:
                    elapsed = time.monotonic() - started
                    self._record(BatchMetrics(batch_id, app_id, 0, "skipped", snapshot_id=done, duration_s=elapsed))
                    return
                plan, tplan = planned
                plan = replace(plan, job=JobToken.new())
                upserts.check_keys(plan, stored)
                if deduped is None:
                    small = collect_if_small(selected, plan.inline_limit)
                    if small is not None:
                        if sum(b.num_rows for b in small) == 0:
                            metrics = upserts.record_unchanged(tplan, app_id, batch_id, 0, started)
                        else:
                            data = pa.Table.from_batches(small)
                            metrics = upserts.commit_rows(
                                plan, tplan, data, app_id=app_id, batch_id=batch_id, started=started
                            )
                        self._record(metrics)
                        return
                    deduped = persisted_dedupe(selected, spec, stored)
                last = attempt == self.settings.retry.max_retry_count
                result = self._upsert_large(upserts, deduped, plan, tplan, app_id, batch_id, started, last)
                if result is not None:
                    self._record(result)
                    return
        finally:
            if deduped is not None:
                deduped.unpersist()

    def _upsert_input(
        self, batch_df: Any, committer: MicroBatchCommitter, spec: UpsertSpec
    ) -> tuple[Any, list[str], Any]:
        """The batch as the upsert reads it (stored columns, ``order_by``-only columns, the delete flag), the stored
        columns and their schema.

        Raises:
            NoSuchColumnError: a key column the table or the batch lacks, an ``order_by`` column the batch lacks.
            InvalidOptionError: ``delete_when`` is not a boolean Spark SQL expression over the batch's columns.
        """
        check_spec(batch_df, spec)
        flagged = flag_deletes(batch_df, spec)
        control = self._control.get(batch_df, spec)
        existing = committer.table_columns()
        missing = [k for k in spec.keys if existing is not None and k not in existing]
        if missing:
            near = closest_name(missing[0], existing or [])
            raise NoSuchColumnError(f"upsert_on column {missing[0]!r} is not in table {self.table}{near}")
        stored = [c for c in batch_df.columns if c not in control or (existing is not None and c in existing)]
        incoming = columns_from_spark(StructType([f for f in batch_df.schema.fields if f.name in stored]))
        order_only = [c for c in spec.order_by if c not in stored]
        flag = [DELETE_FLAG] if spec.delete_when else []
        return flagged.select(*[quoted(c) for c in stored + order_only], *flag), stored, incoming

    def _upsert_large(
        self,
        upserts: UpsertCommitter,
        deduped: Any,
        plan: BatchPlan,
        tplan: Any,
        app_id: str,
        batch_id: int,
        started: float,
        last: bool,
    ) -> BatchMetrics | None:
        """Plan the persisted batch's keys, let the executors write its rows, commit; None when the plan went stale
        (another writer changed the table) and the batch must run again."""
        spec = upserts.spec
        committer = upserts.committer
        key_columns = [*[quoted(k) for k in spec.keys], *([DELETE_FLAG] if spec.delete_when else [])]
        keys = deduped.select(*key_columns).toArrow()
        key_plan = upserts.plan_keys(plan, tplan, keys)
        try:
            with tasks_stopped_on_failure(deduped.sparkSession):
                outputs = run_upsert_tasks(deduped, replace(key_plan.task_plan, batch=plan))
        except BaseException:
            self._remove_attempt_files(committer, plan)
            raise
        try:
            return upserts.commit_files(
                plan, tplan, key_plan, outputs, app_id=app_id, batch_id=batch_id, rows=keys.num_rows, started=started
            )
        except StalePlanError as e:
            self._remove_attempt_files(committer, plan)
            if last:
                raise
            log.info("ducklake sink %s batch %d: runs again (%s)", self.table, batch_id, e)
            return None
        except Exception as e:
            if not outcome_unknown(e):
                self._remove_attempt_files(committer, plan)
            raise

    def _remove_attempt_files(self, committer: MicroBatchCommitter, plan: BatchPlan) -> None:
        try:
            committer.remove_attempt_files(plan)
        except Exception as e:  # the batch's own error matters more; the files stay as orphans
            log.warning("ducklake sink %s: could not remove the files of a failed batch: %s", self.table, e)

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


def query_id(spark: Any, table: str) -> str | None:
    """The id of the streaming query running this ``foreachBatch`` call (stable across restarts from its
    checkpoint), from the SparkContext's local property.

    Raises:
        InvalidOptionError: on Spark Connect, where the function runs in a Python process of the server that is not
            told the query's id: the sink needs ``app_id`` (the message shows the call with it, for ``table``).
    """
    if is_connect(spark):
        raise InvalidOptionError(
            "ducklake_sink on Spark Connect cannot find the streaming query id (Spark Connect does not pass it to "
            f"foreachBatch functions): pass app_id, ducklake_sink({table!r}, app_id='<a name for this query>', ...), "
            "one value per query, kept across restarts from the same checkpoint (as Delta's txnAppId)"
        )
    value = spark.sparkContext.getLocalProperty(QUERY_ID_PROPERTY)
    return str(value) if value else None


def collect_if_small(batch_df: Any, limit: int) -> list[pa.RecordBatch] | None:
    """The batch's rows as Arrow on the driver when it has at most ``limit`` rows, else None.

    One Spark job fetches at most ``limit + 1`` rows straight from the JVM as Arrow, which costs about half of
    :func:`run_tasks` (no Python workers). When the batch turns out bigger, those rows are dropped and the batch is
    written by :func:`run_tasks`; only one computation's rows are ever used, so this holds for any source.
    """
    if limit <= 0:
        return None
    limited = batch_df.limit(limit + 1)
    # classic PySpark; Spark Connect has toArrow only (and its DataFrame answers any attribute with a Column)
    collect = None if is_connect(batch_df.sparkSession) else getattr(limited, "_collect_as_arrow", None)
    batches: list[pa.RecordBatch] = collect() if collect is not None else limited.toArrow().to_batches()
    return batches if sum(b.num_rows for b in batches) <= limit else None


def run_tasks(batch_df: Any, plan: BatchPlan) -> list[TaskOutput]:
    """Run :func:`write_task` on every partition of the batch (executors) and collect what they produced."""

    names = list(batch_df.columns)

    def task(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        output = write_task(plan, (b.rename_columns(names) for b in batches))
        yield pa.RecordBatch.from_pydict(
            {"payload": [pickle.dumps(output)]}, schema=pa.schema([("payload", pa.binary())])
        )

    # mapInArrow resolves each column by name, so a column named 'a.b' failed as a nested field: positional names
    plain = batch_df.toDF(*[f"_c{i}" for i in range(len(names))])
    rows = plain.mapInArrow(task, _OUTPUT_SCHEMA).collect()
    return [pickle.loads(r["payload"]) for r in rows]


def ducklake_sink(
    table: str,
    *,
    catalog: str | None = None,
    data_path: str | None = None,
    app_id: str | None = None,
    data_inlining_row_limit: int | str = SINK_INLINING_ROW_LIMIT_DEFAULT,
    flush_rows: int | str = FLUSH_ROWS_DEFAULT,
    flush_bytes: int | str = FLUSH_BYTES_DEFAULT,
    flush_interval: float | str = FLUSH_INTERVAL_DEFAULT,
    create_table: bool | str = True,
    merge_schema: bool | str = False,
    partition_by: list[str] | str | None = None,
    target_file_rows: int | str = TARGET_FILE_ROWS_DEFAULT,
    max_retry_count: int | str | None = None,
    retry_wait_ms: int | str | None = None,
    retry_backoff: float | str | None = None,
    reconnect_timeout: float | str | None = None,
    storage_options: dict[str, Any] | None = None,
    encrypted: bool | str | None = None,
    format_version: str | None = None,
    duckdb_storage_version: str | None = None,
    upsert_on: list[str] | str | None = None,
    delete_when: str | None = None,
    order_by: list[str] | str | None = None,
    expire_older_than: str | None = None,
    delete_older_than: str | None = None,
    retention_interval: float | str | None = None,
    **unknown: Any,
) -> DuckLakeSink:
    """A ``foreachBatch`` function that commits each micro-batch to ``table`` as one DuckLake snapshot.

    Args:
        table: ``schema.table``.
        catalog: catalog URL; default from Spark conf ``spark.ducklake.catalog`` or ``DUCKLAKE_CATALOG``.
        data_path: data path for a new lake; default from ``spark.ducklake.dataPath`` or ``DUCKLAKE_DATA_PATH``.
        app_id: idempotency key; default the streaming query id (stable across restarts from a checkpoint). Required
            on Spark Connect, which does not tell a foreachBatch function its query's id.
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
        reconnect_timeout: seconds to wait for an unreachable catalog before failing the batch (default 60).
        storage_options: fsspec (s3fs) options for the data path, as ``connect()`` takes them; default from the
            Spark conf ``spark.ducklake.s3.*`` and the ``AWS_*`` environment (executors get them with the tasks).
        encrypted: create a new lake encrypted (DuckDB's ``ATTACH ... (ENCRYPTED)``); on an existing lake it must
            match the lake's setting (default: follow the catalog).
        format_version: the DuckLake format of a new lake, ``"1.0"`` (default) or ``"1.1"``; on an existing lake it
            must match the lake's version (default: follow the catalog).
        duckdb_storage_version: the DuckDB storage version of a new DuckDB-file catalog (default ``"v1.5.0"``, which
            DuckDB 1.5 opens).
        upsert_on: key columns: apply each batch by key (a row whose key exists replaces it, keeping its row id, so
            the change feed shows an update pair; a new key is inserted) instead of appending.
        delete_when: with ``upsert_on``, a Spark SQL boolean expression over the batch's columns (``"op = 'd'"``):
            rows where it is true delete their key (NULL counts as false).
        order_by: with ``upsert_on``, column(s) ordering several rows of one key in a batch: the last wins (ties:
            the later row; NULL first). Without it a key twice in a batch is a ``DuplicateKeyError``.
            Columns used only by ``delete_when``/``order_by`` that the table lacks are not stored (nor put in a
            table the sink creates).
        expire_older_than: retention: every ``retention_interval`` after a commit, expire the snapshots older than
            this (``"7 days"``, as Delta's ``logRetentionDuration``) and delete the files they left once scheduled
            ``delete_older_than`` ago. Giving it (or ``retention_interval``) turns retention on; default: off, and
            when on, the lake's ``expire_older_than`` setting. A change-feed stream that still needed expired
            snapshots fails with ``DataLossError`` (docs/maintenance.md, "Retention for streams").
        delete_older_than: retention: how long deleted files are kept for readers of old snapshots (default the
            lake's ``delete_older_than``, else 2 days).
        retention_interval: retention: seconds (or ``"1 hour"``) between runs (default 3600).

    Every value may also be given as a string (``create_table="false"``, ``flush_bytes="64MB"``,
    ``flush_interval="5 min"``), as Spark options are.

    Raises:
        InvalidOptionError: an option value that does not parse or is out of range (names the option), or a
            misspelt keyword argument (naming the closest valid one).
    """
    given = {
        "catalog": catalog,
        "data_path": data_path,
        "app_id": app_id,
        "data_inlining_row_limit": data_inlining_row_limit,
        "flush_rows": flush_rows,
        "flush_bytes": flush_bytes,
        "flush_interval": flush_interval,
        "create_table": create_table,
        "merge_schema": merge_schema,
        "partition_by": partition_by,
        "target_file_rows": target_file_rows,
        "max_retry_count": max_retry_count,
        "retry_wait_ms": retry_wait_ms,
        "retry_backoff": retry_backoff,
        "reconnect_timeout": reconnect_timeout,
        "storage_options": storage_options,
        "encrypted": encrypted,
        "format_version": format_version,
        "duckdb_storage_version": duckdb_storage_version,
        "upsert_on": upsert_on,
        "delete_when": delete_when,
        "order_by": order_by,
        "expire_older_than": expire_older_than,
        "delete_older_than": delete_older_than,
        "retention_interval": retention_interval,
    }
    check_keywords(unknown, ["table", *given], "ducklake_sink()")  # not Python's bare TypeError
    # one parser for every entry point: "false" is False, "64MB" a size, NaN and negative values are refused
    parsed = check_options(given, Entry.SINK)
    retry = retry_config(parsed)
    settings = SinkSettings(
        cast(int, parsed["data_inlining_row_limit"]),
        cast(int, parsed["flush_rows"]),
        cast(int, parsed["flush_bytes"]),
        cast(float, parsed["flush_interval"]),
        cast(bool, parsed["create_table"]),
        cast(bool, parsed["merge_schema"]),
        cast("tuple[str, ...]", parsed.get("partition_by") or ()),
        cast(int, parsed["target_file_rows"]),
        retry,
        upsert_spec(parsed),
        retention_spec(parsed),
    )
    app_id = cast("str | None", parsed.get("app_id"))
    storage_options = cast("dict[str, Any] | None", parsed.get("storage_options"))
    given_options = (("catalog", parsed.get("catalog")), ("dataPath", parsed.get("dataPath")))
    options = {k: str(v) for k, v in given_options if v}
    if parsed.get("encrypted") is not None:
        options["encrypted"] = str(parsed["encrypted"]).lower()
    for key in ("format_version", "duckdb_storage_version"):
        if parsed.get(key) is not None:
            options[key] = str(parsed[key])
    return DuckLakeSink(table, options, app_id, settings, storage_options)
