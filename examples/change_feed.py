"""Follow a DuckLake table through its change feed and print each change as it arrives.

A Spark Structured Streaming query reads ``spark.readStream.format("ducklake").load("main.events")``: every insert,
delete and update (a pre/post image pair) committed to the table, snapshot by snapshot, whoever wrote it (this
library, Spark, DuckDB). Each micro-batch prints one summary line and then one line per change: the snapshot, its
commit time, the change type and the key columns. Use it next to ``examples/kafka_to_lake.py`` to watch the events
land, or on any other lake.

    python examples/change_feed.py                                  # changes from now on, until Ctrl-C
    python examples/change_feed.py --starting-snapshot earliest --available-now    # the whole history, then stop
    python examples/change_feed.py --starting-snapshot 5 --max-seconds 60 --per-batch 10

Output (``--starting-snapshot earliest`` on a lake where DuckDB ran ``UPDATE ... SET kind = 'buy' WHERE id = 1``):

    batch 0: snapshots 1..4, 5 changes (insert 3, delete 1, update 1)
      snapshot 2  2026-11-22T10:00:01Z  insert            id=1
      ...
      snapshot 4  2026-11-22T10:00:09Z  update_preimage   id=1
      snapshot 4  2026-11-22T10:00:09Z  update_postimage  id=1

Configuration (flags win over the environment):
    DUCKLAKE_CATALOG               --catalog            default: the lake of kafka_to_lake.py (``lake/kafka/``)
    CHANGE_FEED_TABLE              --table              default ``main.events``
    CHANGE_FEED_STARTING_SNAPSHOT  --starting-snapshot  an id, ``earliest`` or ``latest`` (default: ``latest``)
    CHANGE_FEED_KEYS               --keys               comma-separated key columns (default ``id``)
    CHANGE_FEED_CHECKPOINT         --checkpoint         Spark checkpoint: a restart resumes after the last change
                                                        printed (default: a temporary one, removed at the end)
    The data path comes from the catalog. For an ``s3://`` data path, s3fs takes the endpoint and credentials from
    AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_REGION.
The script waits for the catalog and the table to exist, so it can start before the pipeline that creates them.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import shutil
import sys
import tempfile
import threading
import time
from collections import Counter
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
DEFAULT_CATALOG = f"sqlite:///{os.path.join(ROOT, 'lake', 'kafka', 'catalog.sqlite')}"
CHANGE_ORDER = {"delete": 0, "update_preimage": 1, "update_postimage": 2, "insert": 3}


def count_changes(types: list[str]) -> Counter[str]:
    """Changes by kind; an update's pre/post image pair counts as one ``update``."""
    return Counter("update" if t == "update_preimage" else t for t in types if t != "update_postimage")


def say(message: str) -> None:
    print(message, flush=True)


def wait_for_table(catalog: str, table: str, deadline: float | None) -> bool:
    """Wait until ``table`` exists in the catalog (which may not exist yet either); False at the deadline."""
    import pyspark_ducklake as pdl
    from pyspark_ducklake.exceptions import CatalogError, InvalidOptionError

    waited = False
    while True:
        try:
            lake = pdl.connect(catalog)  # no data path: never creates the catalog
            try:
                lake.table(table)
                return True
            finally:
                lake.close()
        except (CatalogError, InvalidOptionError) as e:  # no server yet, empty database, no schema or table yet
            if deadline is not None and time.monotonic() > deadline:
                say(f"feed: gave up waiting for {table}: {e}")
                return False
            if not waited:
                say(f"feed: waiting for {table} to be created ({type(e).__name__}: {e})")
                waited = True
            time.sleep(1)


def build_spark(master: str) -> Any:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    import pyspark_ducklake as pdl

    spark = (
        SparkSession.builder.master(master)
        .appName("ducklake-change-feed")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    pdl.register(spark)
    return spark


def format_value(value: Any) -> str:
    if isinstance(value, str):
        return repr(value)
    if isinstance(value, dt.datetime):
        return value.isoformat()
    return str(value)


class Printer:
    """The ``foreachBatch`` function: one summary line per micro-batch, then one line per change."""

    def __init__(self, keys: list[str], per_batch: int | None, max_changes: int | None) -> None:
        self.keys = keys
        self.per_batch = per_batch
        self.max_changes = max_changes
        self.totals: Counter[str] = Counter()
        self.changes = 0
        self.snapshots: set[int] = set()
        self.done = threading.Event()

    def __call__(self, batch_df: Any, batch_id: int) -> None:
        rows = batch_df.select("_snapshot_id", "_commit_timestamp", "_change_type", "_rowid", *self.keys).collect()
        rows.sort(key=lambda r: (r["_snapshot_id"], r["_rowid"], CHANGE_ORDER.get(r["_change_type"], 9)))
        counts = count_changes([r["_change_type"] for r in rows])
        snapshots = sorted({r["_snapshot_id"] for r in rows})
        span = f"snapshots {snapshots[0]}..{snapshots[-1]}" if snapshots else "no row changes"
        detail = ", ".join(f"{k} {v:,}" for k, v in sorted(counts.items()))
        say(f"batch {batch_id}: {span}, {len(rows):,} changes" + (f" ({detail})" if detail else ""))
        shown = rows if self.per_batch is None else rows[: self.per_batch]
        for r in shown:
            when = r["_commit_timestamp"]
            stamp = when.strftime("%Y-%m-%dT%H:%M:%SZ") if when is not None else "?"
            key = "  ".join(f"{k}={format_value(r[k])}" for k in self.keys)
            say(f"  snapshot {r['_snapshot_id']}  {stamp}  {r['_change_type']:<16}  {key}")
        if len(shown) < len(rows):
            say(f"  ... and {len(rows) - len(shown):,} more")
        self.totals.update(counts)
        self.changes += len(rows)
        self.snapshots.update(snapshots)
        if self.max_changes is not None and self.changes >= self.max_changes:
            self.done.set()


def table_columns(catalog: str, table: str) -> list[str]:
    import pyspark_ducklake as pdl

    lake = pdl.connect(catalog)
    try:
        return list(lake.table(table).schema.names)
    finally:
        lake.close()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--catalog", default=os.environ.get("DUCKLAKE_CATALOG") or DEFAULT_CATALOG, help="catalog URL")
    parser.add_argument("--table", default=os.environ.get("CHANGE_FEED_TABLE") or "main.events")
    start = parser.add_mutually_exclusive_group()
    start.add_argument(
        "--starting-snapshot",
        default=os.environ.get("CHANGE_FEED_STARTING_SNAPSHOT"),
        help="first snapshot to print: an id, earliest or latest (default latest: what comes after the start)",
    )
    start.add_argument("--starting-timestamp", help="start at the first snapshot after this ISO time")
    parser.add_argument(
        "--keys", default=os.environ.get("CHANGE_FEED_KEYS") or "id", help="comma-separated key columns"
    )
    parser.add_argument(
        "--checkpoint", default=os.environ.get("CHANGE_FEED_CHECKPOINT"), help="Spark checkpoint folder"
    )
    parser.add_argument("--max-snapshots-per-trigger", type=int, help="maxSnapshotsPerTrigger of the source")
    parser.add_argument("--max-rows-per-trigger", type=int, help="maxRowsPerTrigger of the source (soft)")
    parser.add_argument("--trigger-seconds", type=float, default=1.0, help="micro-batch interval")
    parser.add_argument("--per-batch", type=int, help="print at most this many changes of each micro-batch")
    bound = parser.add_argument_group("stopping (default: run until Ctrl-C)")
    bound.add_argument("--available-now", action="store_true", help="print what is committed now, then stop")
    bound.add_argument("--max-seconds", type=float, help="stop after this many seconds")
    bound.add_argument("--max-changes", type=int, help="stop once this many changes were printed")
    parser.add_argument("--master", default="local[2]", help="Spark master")
    return parser


def source_options(args: argparse.Namespace) -> dict[str, str]:
    """The change-feed source's options from the flags (a start option selects the change feed; without one a
    stream would read the table's rows)."""
    options = {"catalog": args.catalog}
    if args.starting_timestamp:
        options["startingTimestamp"] = args.starting_timestamp
    else:
        options["startingSnapshot"] = args.starting_snapshot or "latest"
    if args.max_snapshots_per_trigger:
        options["maxSnapshotsPerTrigger"] = str(args.max_snapshots_per_trigger)
    if args.max_rows_per_trigger:
        options["maxRowsPerTrigger"] = str(args.max_rows_per_trigger)
    return options


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    started = time.monotonic()
    deadline = started + args.max_seconds if args.max_seconds else None
    options = source_options(args)
    start = options.get("startingSnapshot") or f"after {options['startingTimestamp']}"
    say(f"feed: {args.table} from snapshot {start}; catalog {args.catalog}")
    if not wait_for_table(args.catalog, args.table, deadline):
        return 2
    columns = table_columns(args.catalog, args.table)
    keys = [k.strip() for k in args.keys.split(",") if k.strip()]
    missing = [k for k in keys if k not in columns]
    if missing:
        say(f"feed: {args.table} has no column {', '.join(missing)}; its columns are {', '.join(columns)} (--keys)")
        return 2

    checkpoint, scratch = args.checkpoint, None
    if checkpoint is None:
        scratch = checkpoint = tempfile.mkdtemp(prefix="change-feed-checkpoint-")
    else:
        say(f"feed: checkpoint {checkpoint}")
    spark = build_spark(args.master)
    printer = Printer(keys, args.per_batch, args.max_changes)
    reader = spark.readStream.format("ducklake")
    for key, value in options.items():
        reader = reader.option(key, value)
    writer = reader.load(args.table).writeStream.foreachBatch(printer).option("checkpointLocation", checkpoint)
    if args.available_now:
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime=f"{args.trigger_seconds} seconds")
    query = writer.start()
    stopped_by = "the end of what was committed" if args.available_now else "Ctrl-C"
    try:
        while query.isActive and not printer.done.wait(0.2):
            if deadline is not None and time.monotonic() > deadline:
                stopped_by = f"--max-seconds {args.max_seconds:g}"
                break
        else:
            if printer.done.is_set():
                stopped_by = f"--max-changes {args.max_changes:,}"
    except KeyboardInterrupt:
        stopped_by = "Ctrl-C"
    query.stop()
    failure = query.exception()
    spark.stop()
    if scratch is not None:
        shutil.rmtree(scratch, ignore_errors=True)
    if failure is not None:
        say(f"feed: the query failed: {failure}")
        return 1
    totals = ", ".join(f"{k} {v:,}" for k, v in sorted(printer.totals.items())) or "nothing"
    seen = sorted(printer.snapshots)
    span = f" in snapshots {seen[0]}..{seen[-1]}" if seen else ""
    say(f"feed: stopped by {stopped_by}; {printer.changes:,} changes{span}: {totals}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
