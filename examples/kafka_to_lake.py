"""Kafka to DuckLake, exactly once: keyed JSON events from Apache Kafka through Spark into a DuckLake table.

A confluent-kafka producer writes events ``{"id", "kind", "amount", "ts"}`` (key = the event id) to a topic; a Spark
Structured Streaming query reads the topic with ``format("kafka")``, parses the JSON into typed columns (plus the
Kafka partition and offset) and commits every micro-batch with ``foreachBatch(ducklake_sink("main.events"))`` as one
idempotent DuckLake snapshot. Kill the pipeline at any moment and start it again with the same ``--checkpoint``:
the lake still holds every event exactly once. At the end DuckDB (when installed) reads the same table.

    scripts/kafka.sh start                                  # a local broker (see docs/kafka.md)
    python examples/kafka_to_lake.py                        # both: produce 20,000 events and stream them into the lake
    python examples/kafka_to_lake.py --produce 100000 --rate 5000     # producer only
    python examples/kafka_to_lake.py --pipeline --until-count 100000  # pipeline only (Ctrl-C or --until-count stops it)

Configuration (flags win over the environment):
    KAFKA_BOOTSTRAP     --bootstrap   default: the broker of ``scripts/kafka.sh`` (``scripts/kafka.sh bootstrap``)
    KAFKA_TOPIC         --topic       default ``events``
    DUCKLAKE_CATALOG    --catalog     default ``sqlite:///<lake>/catalog.sqlite`` (or ``postgresql+psycopg2://...``)
    DUCKLAKE_DATA_PATH  --data-path   default ``<lake>/data/`` (or ``s3://bucket/prefix/``)
    For an ``s3://`` data path, s3fs (``pip install 'pyspark-ducklake[s3]'``) takes the endpoint and credentials from
    AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_REGION; the final DuckDB report uses them too.
    Spark's Kafka source jars: ``--spark-jars a.jar,b.jar``, default ``scripts/kafka.sh spark-jars`` (fetches them).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
KAFKA_SCRIPT = os.path.join(ROOT, "scripts", "kafka.sh")
TABLE = "main.events"
KINDS = ("click", "view", "buy")
EVENT_SCHEMA = "id BIGINT, kind STRING, amount DOUBLE, ts TIMESTAMP"
S3_ENV = ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION")


def say(message: str) -> None:
    print(message, flush=True)


# --- Kafka (confluent-kafka) --------------------------------------------------------------------------------------


def default_bootstrap() -> str:
    env = os.environ.get("KAFKA_BOOTSTRAP")
    if env:
        return env
    running = subprocess.run(["bash", KAFKA_SCRIPT, "status"], capture_output=True, text=True, check=False)
    proc = subprocess.run(["bash", KAFKA_SCRIPT, "bootstrap"], capture_output=True, text=True, check=False)
    if running.returncode != 0 or proc.returncode != 0 or not proc.stdout.strip():
        sys.exit("no Kafka broker: start one with `scripts/kafka.sh start`, or set KAFKA_BOOTSTRAP / --bootstrap")
    return proc.stdout.strip().splitlines()[-1]


def ensure_topic(bootstrap: str, topic: str, partitions: int) -> None:
    """Create ``topic`` unless it exists."""
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    if topic in admin.list_topics(timeout=30).topics:
        return
    future = admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)])[topic]
    try:
        future.result(timeout=30)
        say(f"created topic {topic} with {partitions} partitions")
    except KafkaException as e:
        if e.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
            raise


def topic_offsets(bootstrap: str, topic: str) -> dict[int, tuple[int, int]]:
    """``{partition: (low, high)}`` watermarks of ``topic``."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "kafka-to-lake-watermarks"})
    try:
        meta = consumer.list_topics(topic, timeout=30).topics[topic]
        return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30) for p in meta.partitions}
    finally:
        consumer.close()


def event(event_id: int) -> dict[str, Any]:
    """The event with this id (deterministic, except its time)."""
    return {
        "id": event_id,
        "kind": KINDS[event_id % len(KINDS)],
        "amount": round((event_id * 7919) % 100_000 / 100, 2),
        "ts": dt.datetime.now(dt.timezone.utc).isoformat(timespec="milliseconds"),
    }


def produce(bootstrap: str, topic: str, count: int, rate: float, first_id: int | None) -> tuple[int, int]:
    """Write ``count`` events at about ``rate`` per second (0: as fast as possible); returns ``(first_id, count)``."""
    from confluent_kafka import Producer

    if first_id is None:  # continue after the events already in the topic
        first_id = sum(high for _low, high in topic_offsets(bootstrap, topic).values())
    # Idempotent: a retried send never duplicates an event in the topic.
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all", "linger.ms": 20})
    acked = failed = 0

    def delivered(err: Any, _msg: Any) -> None:
        nonlocal acked, failed
        if err is None:
            acked += 1
        else:
            failed += 1

    say(f"producer: {count:,} events, ids {first_id:,}..{first_id + count - 1:,}, to {topic} at {bootstrap}")
    started = last_report = time.monotonic()
    for i in range(count):
        if rate > 0:
            ahead = i / rate - (time.monotonic() - started)
            if ahead > 0:
                time.sleep(ahead)
        event_id = first_id + i
        while True:
            try:
                producer.produce(topic, key=str(event_id), value=json.dumps(event(event_id)), on_delivery=delivered)
                break
            except BufferError:  # local queue full: let deliveries drain
                producer.poll(0.1)
        producer.poll(0)
        now = time.monotonic()
        if now - last_report >= 1:
            say(f"producer: {i + 1:,}/{count:,} sent, {acked:,} acked ({(i + 1) / (now - started):,.0f}/s)")
            last_report = now
    left = producer.flush(120)
    elapsed = time.monotonic() - started
    say(f"producer: done, {acked:,}/{count:,} acked in {elapsed:.1f} s ({count / max(elapsed, 1e-9):,.0f}/s)")
    if failed or left:
        sys.exit(f"producer: {failed} events failed, {left} not delivered")
    return first_id, count


# --- the lake ------------------------------------------------------------------------------------------------------


def lake_rows(catalog: str, data_path: str) -> int:
    """Rows in the table now (0 before the first batch)."""
    import pyspark_ducklake as pdl
    from pyspark_ducklake.exceptions import NoSuchSchemaError, NoSuchTableError

    lake = pdl.connect(catalog, data_path)
    try:
        return lake.scan(TABLE, columns=["id"]).num_rows
    except (NoSuchTableError, NoSuchSchemaError):
        return 0
    finally:
        lake.close()


@dataclass
class Progress:
    """What the pipeline has committed so far (rows in the table, counting those of earlier runs)."""

    rows: int
    target: int | None = None
    last_batch: int = -1
    reached: threading.Event = field(default_factory=threading.Event)

    def check(self) -> None:
        if self.target is not None and self.rows >= self.target:
            self.reached.set()


def build_spark(jars: str, master: str) -> Any:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master(master)
        .appName("kafka-to-ducklake")
        .config("spark.jars", jars)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def start_pipeline(spark: Any, args: argparse.Namespace, progress: Progress) -> Any:
    """Start the streaming query: Kafka -> typed columns -> ducklake_sink, one line of progress per batch."""
    from pyspark.sql import functions as F

    from pyspark_ducklake import ducklake_sink

    events = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", args.bootstrap)
        .option("subscribe", args.topic)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", args.max_per_batch)
        .load()
        .select(
            F.from_json(F.col("value").cast("string"), EVENT_SCHEMA).alias("e"),
            F.col("partition").alias("kafka_partition"),
            F.col("offset").alias("kafka_offset"),
        )
        .select("e.*", "kafka_partition", "kafka_offset")
    )
    sink: Any = ducklake_sink(TABLE, catalog=args.catalog, data_path=args.data_path)

    def commit_batch(batch_df: Any, batch_id: int) -> None:
        sink(batch_df, batch_id)
        m = sink.last
        progress.rows += m.rows if m.mode != "skipped" else 0
        progress.last_batch = m.batch_id
        detail = "already committed before a restart" if m.mode == "skipped" else f"{m.rows:,} rows {m.mode}"
        say(
            f"batch {m.batch_id:>3}: {detail}, snapshot {m.snapshot_id}, commit {m.commit_latency_s * 1000:.0f} ms, "
            f"batch {m.duration_s:.1f} s; the lake holds {progress.rows:,} events"
        )
        progress.check()

    return (
        events.writeStream.foreachBatch(commit_batch)
        .option("checkpointLocation", args.checkpoint)
        .trigger(processingTime=f"{args.trigger_seconds} seconds")
        .start()
    )


def run_pipeline(args: argparse.Namespace, producer: threading.Thread | None, produced: dict[str, int]) -> int:
    ensure_topic(args.bootstrap, args.topic, args.partitions)
    progress = Progress(lake_rows(args.catalog, args.data_path), args.until_count)
    say(f"pipeline: the lake holds {progress.rows:,} events; checkpoint {args.checkpoint}")
    spark = build_spark(args.spark_jars or spark_jars(), args.master)
    query = start_pipeline(spark, args, progress)
    deadline = time.monotonic() + args.timeout if args.timeout else None
    try:
        while query.isActive and not progress.reached.wait(0.5):
            if producer is not None and not producer.is_alive() and progress.target is None:
                if "count" not in produced:
                    say("pipeline: the producer failed; stopping")
                    break
                # Both in one run: stream until the lake holds the whole topic.
                progress.target = sum(high - low for low, high in topic_offsets(args.bootstrap, args.topic).values())
                say(f"pipeline: running until the lake holds all {progress.target:,} events of {args.topic}")
                progress.check()
            if deadline is not None and time.monotonic() > deadline:
                say(f"pipeline: --timeout {args.timeout} s reached with {progress.rows:,} events in the lake")
                break
    except KeyboardInterrupt:
        say("pipeline: interrupted")
    # Let Spark record the last batch in its checkpoint first (else the next run replays it; harmless: the sink
    # skips a batch it has committed).
    for _ in range(40):
        last = query.lastProgress
        if not query.isActive or (last is not None and last["batchId"] >= progress.last_batch):
            break
        time.sleep(0.25)
    query.stop()
    failure = query.exception()
    spark.stop()
    if failure is not None:
        say(f"pipeline: the query failed: {failure}")
        return 1
    report(args)
    return 0 if progress.reached.is_set() else 2


def report(args: argparse.Namespace) -> None:
    """Count the table with the Python API and DuckDB: every event once, by id and by Kafka partition/offset."""
    import pyarrow.compute as pc

    import pyspark_ducklake as pdl

    lake = pdl.connect(args.catalog, args.data_path)
    table = lake.scan(TABLE, columns=["id", "kafka_partition", "kafka_offset"])
    ids = pc.count_distinct(table["id"]).as_py()
    positions = len(set(zip(table["kafka_partition"].to_pylist(), table["kafka_offset"].to_pylist(), strict=True)))
    batches = [json.loads(s.commit_extra_info) for s in lake.snapshots() if s.commit_extra_info]
    say(
        f"lake: {table.num_rows:,} events, {ids:,} distinct ids, {positions:,} distinct Kafka offsets, "
        f"{len(batches)} batch snapshots"
    )
    say("exactly once: " + ("yes" if table.num_rows == ids == positions else "NO, duplicates found"))
    try:
        con = open_duckdb(lake)
    except ImportError as e:  # NotInstalledError: duckdb or an extension wheel is missing
        say(f"(DuckDB is optional: {e})")
        return
    try:
        rows = con.execute(
            "SELECT kind, count(*), count(DISTINCT id), round(sum(amount), 2) FROM lake.main.events "
            "GROUP BY kind ORDER BY kind"
        ).fetchall()
        say("DuckDB reads:")
        for kind, n, distinct, amount in rows:
            say(f"  {kind:<6} {n:>9,} events  {distinct:>9,} distinct ids  amount {amount:,.2f}")
        say(f"  total  {sum(r[1] for r in rows):>9,} events")
    finally:
        con.close()


def open_duckdb(lake: Any) -> Any:
    """DuckDB with the lake attached as ``lake``; for an ``s3://`` data path with httpfs and the S3 settings first."""
    from pyspark_ducklake.duckdb_attach import attach_sql, connect_duckdb, open_in_duckdb

    if not str(lake.data_path).startswith("s3://"):
        return open_in_duckdb(lake)
    con = connect_duckdb()
    try:
        duckdb_s3(con)
        con.execute(attach_sql(lake.location.duckdb_attach(), lake.data_path, "lake"))
    except BaseException:
        con.close()
        raise
    return con


def duckdb_s3(con: Any) -> None:
    """Give DuckDB the S3 settings s3fs uses (httpfs from the duckdb-extension-httpfs wheel)."""
    from urllib.parse import urlparse

    from pyspark_ducklake.duckdb_attach import extension_path, sql_string

    con.execute(f"LOAD {sql_string(extension_path('duckdb_extension_httpfs', 'httpfs'))}")
    endpoint, key, secret, region = (os.environ.get(name, "") for name in S3_ENV)
    options = [
        f"KEY_ID {sql_string(key)}",
        f"SECRET {sql_string(secret)}",
        f"REGION {sql_string(region or 'us-east-1')}",
    ]
    if endpoint:
        url = urlparse(endpoint)
        options += [f"ENDPOINT {sql_string(url.netloc)}", "URL_STYLE 'path'", f"USE_SSL {url.scheme == 'https'}"]
    con.execute(f"CREATE SECRET lake_s3 (TYPE s3, {', '.join(options)})")


def spark_jars() -> str:
    """Spark's Kafka source and what it needs beyond pyspark's jars, fetched by ``scripts/kafka.sh``."""
    proc = subprocess.run(["bash", KAFKA_SCRIPT, "spark-jars"], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        sys.exit(f"could not get Spark's Kafka source jars:\n{proc.stderr}")
    return proc.stdout.strip()


# --- command line ----------------------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--produce", type=int, metavar="N", help="produce N events (alone: producer only)")
    parser.add_argument("--rate", type=float, default=5000, help="events per second, 0 = as fast as possible")
    parser.add_argument("--first-id", type=int, help="id of the first event (default: after the topic's events)")
    parser.add_argument("--pipeline", action="store_true", help="run the Spark pipeline (alone: pipeline only)")
    parser.add_argument("--until-count", type=int, metavar="N", help="stop once the lake holds N events")
    parser.add_argument("--timeout", type=float, default=0, help="stop the pipeline after this many seconds")
    parser.add_argument("--lake", default=os.path.join(ROOT, "lake", "kafka"), help="folder of the default lake")
    parser.add_argument("--checkpoint", help="Spark checkpoint folder (default <lake>/checkpoint)")
    parser.add_argument("--catalog", default=os.environ.get("DUCKLAKE_CATALOG"), help="catalog URL")
    parser.add_argument("--data-path", default=os.environ.get("DUCKLAKE_DATA_PATH"), help="data path of a new lake")
    parser.add_argument("--bootstrap", default=None, help="Kafka bootstrap servers")
    parser.add_argument("--topic", default=os.environ.get("KAFKA_TOPIC", "events"))
    parser.add_argument("--partitions", type=int, default=3, help="partitions of a topic this creates")
    parser.add_argument("--max-per-batch", type=int, default=20_000, help="maxOffsetsPerTrigger of the Kafka source")
    parser.add_argument("--trigger-seconds", type=float, default=1.0, help="micro-batch interval")
    parser.add_argument("--master", default="local[2]", help="Spark master")
    parser.add_argument("--spark-jars", help="comma-separated jars of Spark's Kafka source")
    return parser


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    args = build_parser().parse_args(argv)
    if args.produce is None and not args.pipeline:  # neither: both, with a small default
        args.produce, args.pipeline = 20_000, True
    lake = os.path.abspath(args.lake)
    args.catalog = args.catalog or f"sqlite:///{lake}/catalog.sqlite"
    args.data_path = args.data_path or f"{lake}/data/"
    args.checkpoint = args.checkpoint or f"{lake}/checkpoint"
    args.bootstrap = args.bootstrap or default_bootstrap()
    if args.catalog.startswith("sqlite:///"):
        os.makedirs(os.path.dirname(args.catalog[len("sqlite:///") :]), exist_ok=True)
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    say(f"kafka: {args.bootstrap}, topic {args.topic}")
    if args.pipeline:
        say(f"lake: catalog {args.catalog}, data {args.data_path}")
        if args.data_path.startswith("s3://"):
            say("S3: " + ", ".join(f"{name} {'set' if os.environ.get(name) else 'unset'}" for name in S3_ENV))
    produced: dict[str, int] = {}
    if not args.pipeline:
        ensure_topic(args.bootstrap, args.topic, args.partitions)
        produce(args.bootstrap, args.topic, args.produce, args.rate, args.first_id)
        return 0
    producer = None
    if args.produce:
        ensure_topic(args.bootstrap, args.topic, args.partitions)

        def run_producer() -> None:
            produced["first_id"], produced["count"] = produce(
                args.bootstrap, args.topic, args.produce, args.rate, args.first_id
            )

        producer = threading.Thread(target=run_producer, name="producer", daemon=True)
        producer.start()
    return run_pipeline(args, producer, produced)


if __name__ == "__main__":
    sys.exit(main())
