"""PostgreSQL -> Debezium -> Kafka -> Spark -> DuckLake: keep lake tables equal to PostgreSQL tables, exactly once.

Two tables of an operational database (``customers``, ``orders``) are captured by Debezium's PostgreSQL connector in
a Kafka Connect worker, one Kafka topic per table. A Spark Structured Streaming query per table reads its topic,
turns Debezium's change events into rows with :func:`pyspark_ducklake.debezium` (the row each change leaves, its
``op`` and its ``lsn``) and applies them with ``ducklake_sink(upsert_on=[key], delete_when="op = 'd'",
order_by="lsn")``: one DuckLake snapshot per micro-batch, updates as DuckDB's UPDATE makes them (the row keeps its
row id, so the change feed shows an update pre/post pair), deletes and primary-key changes applied, a replayed batch
a no-op. Kill the pipeline at any moment and start it again: the lake catches up, exactly.

    python examples/cdc_postgres_to_lake/cdc_to_lake.py            # all of it: services, workload, pipeline, check
    python examples/cdc_postgres_to_lake/cdc_to_lake.py up         # PostgreSQL, Kafka, Kafka Connect + Debezium,
                                                                   #   the demo database and its connector
    python examples/cdc_postgres_to_lake/cdc_to_lake.py workload --ops 2000 --rate 100
    python examples/cdc_postgres_to_lake/cdc_to_lake.py pipeline   # until Ctrl-C or --timeout
    python examples/cdc_postgres_to_lake/cdc_to_lake.py check      # lake == PostgreSQL? DuckDB? the change feed?
    python examples/cdc_postgres_to_lake/cdc_to_lake.py remove     # drop the demo's connector, replication slot
                                                                   #   and database (a slot left behind keeps WAL)
    python examples/cdc_postgres_to_lake/cdc_to_lake.py down       # stop Kafka Connect and the broker

The services come from the project's scripts (``scripts/postgres.sh``, ``scripts/kafka.sh``,
``scripts/debezium.sh``: PostgreSQL from apt, Kafka and Debezium from Maven Central; no Docker). docs/cdc.md explains
the pipeline; tests/integration/test_cdc_pipeline.py kills and restarts it under a random workload.

Configuration (flags win over the environment):
    CDC_POSTGRES_URL    --postgres    the captured server, ``postgresql+psycopg2://user@host:port`` (default: the
                                      server of ``scripts/postgres.sh start``); it needs ``wal_level=logical``
    KAFKA_BOOTSTRAP     --bootstrap   default: the broker of ``scripts/kafka.sh start``
    CONNECT_URL         --connect     Kafka Connect's REST API (default: ``scripts/debezium.sh start``)
    DUCKLAKE_CATALOG    --catalog     default ``sqlite:///<lake>/catalog.sqlite``
    DUCKLAKE_DATA_PATH  --data-path   default ``<lake>/data/``
"""

from __future__ import annotations

import argparse
import datetime as dt
import decimal
import json
import os
import random
import re
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SCRIPTS = os.path.join(ROOT, "scripts")


@dataclass(frozen=True)
class Names:
    """What one demo owns, from its ``--tag``: a database, a connector with its replication slot, and topics."""

    tag: str = "demo"

    def __post_init__(self) -> None:
        if not re.fullmatch(r"[a-z][a-z0-9_]{0,30}", self.tag):
            raise SystemExit(f"--tag {self.tag!r}: use lower-case letters, digits and _ (it names a database)")

    @property
    def database(self) -> str:
        return f"cdc_{self.tag}"

    @property
    def connector(self) -> str:
        return f"cdc-{self.tag}"

    @property
    def slot(self) -> str:
        return f"cdc_{self.tag}"

    def topic(self, table: Captured) -> str:
        return f"cdc_{self.tag}.public.{table.name}"


@dataclass(frozen=True)
class Captured:
    """A captured table: its PostgreSQL DDL, its key and its columns as Spark reads them from Debezium's events."""

    name: str
    key: str
    ddl: str
    spark_schema: str

    @property
    def lake_table(self) -> str:
        return f"main.{self.name}"


TABLES = (
    Captured(
        "customers",
        "id",
        "CREATE TABLE customers(id bigint PRIMARY KEY, name text NOT NULL, email text, balance numeric(12,2), "
        "updated_at timestamptz)",
        "id BIGINT, name STRING, email STRING, balance DECIMAL(12,2), updated_at TIMESTAMP",
    ),
    Captured(
        "orders",
        "order_id",
        "CREATE TABLE orders(order_id bigint PRIMARY KEY, customer_id bigint, status text, total numeric(12,2), "
        "items int[], placed_at timestamp)",
        "order_id BIGINT, customer_id BIGINT, status STRING, total DECIMAL(12,2), items ARRAY<INT>, "
        "placed_at TIMESTAMP_NTZ",
    ),
)


def say(message: str) -> None:
    print(message, flush=True)


def script(name: str, *args: str, env: dict[str, str] | None = None) -> str:
    """The last line ``scripts/<name>.sh`` prints (a URL or a bootstrap address); exits on failure."""
    proc = subprocess.run(
        ["bash", os.path.join(SCRIPTS, f"{name}.sh"), *args],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, **(env or {})},
    )
    if proc.returncode != 0:
        sys.exit(f"scripts/{name}.sh {' '.join(args)} failed:\n{proc.stderr[-3000:]}")
    return proc.stdout.strip().splitlines()[-1]


# --- PostgreSQL ----------------------------------------------------------------------------------------------------


def engine(server_url: str, names: Names) -> Any:
    import sqlalchemy as sa

    return sa.create_engine(sa.engine.make_url(server_url).set(database=names.database))


def create_database(server_url: str, names: Names) -> None:
    """The demo database and its tables (``REPLICA IDENTITY FULL``: a delete's event carries the whole row)."""
    import sqlalchemy as sa

    admin = sa.create_engine(server_url, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            if conn.execute(sa.text("SHOW wal_level")).scalar() != "logical":
                sys.exit(f"{sa.engine.make_url(server_url).render_as_string()}: wal_level must be logical")
            if not conn.execute(
                sa.text("SELECT 1 FROM pg_database WHERE datname = :d"), {"d": names.database}
            ).scalar():
                conn.execute(sa.text(f"CREATE DATABASE {names.database}"))
    finally:
        admin.dispose()
    db = engine(server_url, names)
    try:
        with db.begin() as conn:
            for t in TABLES:
                if not conn.execute(sa.text("SELECT to_regclass(:t)"), {"t": f"public.{t.name}"}).scalar():
                    conn.execute(sa.text(t.ddl))
                    conn.execute(sa.text(f"ALTER TABLE {t.name} REPLICA IDENTITY FULL"))
    finally:
        db.dispose()


def random_text(rng: random.Random) -> str:
    """Names a careless or hostile source holds too: quotes, brackets, separators, non-ASCII, empty."""
    return rng.choice(["ann", "bob", "o'hara", 'say "hi"', "[x]", "a/../b", "", "zoë", "{k: v}", "tab\tnew\nline"])


def workload(
    server_url: str, names: Names, ops: int, rate: float, seed: int, stop: threading.Event | None = None
) -> dict[str, int]:
    """``ops`` random changes in small transactions: inserts, updates (some of one key twice in a transaction),
    deletes and primary-key changes, on both tables. Returns counts by kind."""
    import sqlalchemy as sa

    rng = random.Random(seed)
    db = engine(server_url, names)
    counts: dict[str, int] = {}
    ids: dict[str, list[int]] = {}
    try:
        with db.connect() as conn:
            for t in TABLES:
                ids[t.name] = [r[0] for r in conn.execute(sa.text(f"SELECT {t.key} FROM {t.name}"))]
        next_id = max([0, *(i for v in ids.values() for i in v)]) + 1
        started, done = time.monotonic(), 0
        while done < ops and not (stop is not None and stop.is_set()):
            with db.begin() as conn:
                for _ in range(rng.randint(1, 4)):
                    t = rng.choice(TABLES)
                    keys = ids[t.name]
                    kind = rng.choices(["insert", "update", "delete", "key"], [40, 40, 12, 8])[0] if keys else "insert"
                    if kind == "insert":
                        key, next_id = next_id, next_id + 1
                        conn.execute(sa.text(_insert_sql(t)), {"k": key, **_values(t, rng)})
                        keys.append(key)
                    elif kind == "update":
                        key = rng.choice(keys)
                        for _ in range(rng.choice([1, 1, 1, 2])):  # sometimes one key twice in a transaction
                            conn.execute(sa.text(_update_sql(t)), {"k": key, **_values(t, rng)})
                    elif kind == "delete":
                        key = keys.pop(rng.randrange(len(keys)))
                        conn.execute(sa.text(f"DELETE FROM {t.name} WHERE {t.key} = :k"), {"k": key})
                    else:
                        i = rng.randrange(len(keys))
                        new, next_id = next_id, next_id + 1
                        conn.execute(
                            sa.text(f"UPDATE {t.name} SET {t.key} = :n WHERE {t.key} = :k"), {"n": new, "k": keys[i]}
                        )
                        keys[i] = new
                    counts[kind] = counts.get(kind, 0) + 1
                    done += 1
            if rate > 0:
                ahead = done / rate - (time.monotonic() - started)
                if ahead > 0:
                    time.sleep(ahead)
    finally:
        db.dispose()
    return counts


def _insert_sql(t: Captured) -> str:
    if t.name == "customers":
        return "INSERT INTO customers VALUES (:k, :name, :email, :balance, :ts)"
    return "INSERT INTO orders VALUES (:k, :customer, :status, :total, :items, :ts)"


def _update_sql(t: Captured) -> str:
    if t.name == "customers":
        return "UPDATE customers SET name = :name, email = :email, balance = :balance, updated_at = :ts WHERE id = :k"
    return "UPDATE orders SET status = :status, total = :total, items = :items, placed_at = :ts WHERE order_id = :k"


def _values(t: Captured, rng: random.Random) -> dict[str, Any]:
    maybe = lambda v: None if rng.random() < 0.1 else v  # noqa: E731
    ts = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc) + dt.timedelta(microseconds=rng.randrange(10**14))
    money = decimal.Decimal(rng.randrange(-(10**8), 10**9)) / 100
    if t.name == "customers":
        return {"name": random_text(rng), "email": maybe(random_text(rng)), "balance": maybe(money), "ts": maybe(ts)}
    items = maybe([rng.choice([None, rng.randrange(-1000, 1000)]) for _ in range(rng.randrange(4))])
    return {
        "customer": maybe(rng.randrange(1, 10**6)),
        "status": maybe(rng.choice(["new", "paid", "shipped", "x'y"])),
        "total": maybe(money),
        "items": items,
        "ts": maybe(ts.replace(tzinfo=None)),
    }


def postgres_rows(server_url: str, names: Names, t: Captured) -> dict[int, dict[str, Any]]:
    import sqlalchemy as sa

    db = engine(server_url, names)
    try:
        with db.connect() as conn:
            return {r._mapping[t.key]: dict(r._mapping) for r in conn.execute(sa.text(f"SELECT * FROM {t.name}"))}
    finally:
        db.dispose()


# --- Kafka Connect and Debezium --------------------------------------------------------------------------------------


def rest(connect_url: str, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(connect_url + path, data=data, method=method)
    request.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(request, timeout=30) as response:
        raw = response.read()
    return json.loads(raw) if raw else None


def connector_config(server_url: str, names: Names) -> dict[str, str]:
    """Debezium's PostgreSQL connector on the demo tables: pgoutput, an initial snapshot, numerics as strings."""
    import sqlalchemy as sa

    url = sa.engine.make_url(server_url)
    return {
        "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
        "tasks.max": "1",
        "database.hostname": url.host or "127.0.0.1",
        "database.port": str(url.port or 5432),
        "database.user": url.username or "postgres",
        "database.password": url.password or "",
        "database.dbname": names.database,
        "topic.prefix": f"cdc_{names.tag}",
        "plugin.name": "pgoutput",
        "slot.name": names.slot,
        "publication.name": f"{names.slot}_pub",
        "publication.autocreate.mode": "filtered",
        "table.include.list": ",".join(f"public.{t.name}" for t in TABLES),
        "snapshot.mode": "initial",
        "decimal.handling.mode": "string",
        # how often the task hands captured changes to Kafka Connect (default 500 ms: half of it is added latency)
        "poll.interval.ms": "100",
    }


def add_connector(connect_url: str, server_url: str, names: Names, timeout: float = 120) -> None:
    """Create the demo's connector unless it exists, and wait until its task runs."""
    try:
        rest(connect_url, "GET", f"/connectors/{names.connector}")
    except urllib.error.HTTPError as e:
        if e.code != 404:
            raise
        config = connector_config(server_url, names)
        rest(connect_url, "POST", "/connectors", {"name": names.connector, "config": config})
    deadline = time.monotonic() + timeout
    while True:
        try:
            status = rest(connect_url, "GET", f"/connectors/{names.connector}/status")
        except urllib.error.HTTPError:
            status = None
        if status is not None:
            states = [status["connector"]["state"], *(t["state"] for t in status.get("tasks", []))]
            if "FAILED" in states:
                sys.exit(f"connector {names.connector} failed: {json.dumps(status)[-3000:]}")
            if status.get("tasks") and all(s == "RUNNING" for s in states):
                return
        if time.monotonic() > deadline:
            sys.exit(f"connector {names.connector} not running after {timeout:.0f} s: {status}")
        time.sleep(0.5)


def drop_slot(server_url: str, slot: str, timeout: float = 30) -> None:
    """Drop a replication slot once its connector has let go of it (a slot left behind keeps WAL forever)."""
    import sqlalchemy as sa

    admin = sa.create_engine(server_url, isolation_level="AUTOCOMMIT")
    deadline = time.monotonic() + timeout
    try:
        with admin.connect() as conn:
            while True:
                active = conn.execute(
                    sa.text("SELECT active FROM pg_replication_slots WHERE slot_name = :s"), {"s": slot}
                ).scalar()
                if active is None:
                    return
                if not active:
                    conn.execute(sa.text("SELECT pg_drop_replication_slot(:s)"), {"s": slot})
                    return
                if time.monotonic() > deadline:
                    raise TimeoutError(f"replication slot {slot} still in use after {timeout:.0f} s")
                time.sleep(0.5)
    finally:
        admin.dispose()


def remove(connect_url: str | None, server_url: str, names: Names) -> None:
    """Undo :func:`up` for one ``--tag``: its connector (when Kafka Connect runs), replication slot and database."""
    import sqlalchemy as sa

    if connect_url:
        try:
            rest(connect_url, "DELETE", f"/connectors/{names.connector}")
        except urllib.error.HTTPError as e:
            if e.code != 404:
                raise
    drop_slot(server_url, names.slot)
    admin = sa.create_engine(server_url, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.execute(sa.text(f"DROP DATABASE IF EXISTS {names.database} WITH (FORCE)"))
    finally:
        admin.dispose()


# --- Spark ----------------------------------------------------------------------------------------------------------


def build_spark(jars: str, master: str) -> Any:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master(master)
        .appName("cdc-to-ducklake")
        .config("spark.jars", jars)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def create_lake_tables(catalog: str, data_path: str) -> None:
    """The lake tables, with the captured tables' columns (not the events' ``op`` and ``lsn``)."""
    from pyspark.sql.pandas.types import to_arrow_schema
    from pyspark.sql.types import StructType

    import pyspark_ducklake as pdl

    with pdl.connect(catalog, data_path) as lake:
        for t in TABLES:
            lake.create_table(
                t.lake_table, to_arrow_schema(StructType.fromDDL(t.spark_schema), timezone="UTC"), exist_ok=True
            )


def start_query(spark: Any, args: argparse.Namespace, t: Captured) -> Any:
    """Kafka topic -> Debezium events as rows -> the upsert sink, with its own checkpoint."""
    import pyspark_ducklake as pdl
    from pyspark_ducklake import ducklake_sink

    events = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", args.bootstrap)
        .option("subscribe", Names(args.tag).topic(t))
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", args.max_per_batch)
        .load()
    )
    rows = pdl.debezium(events, t.spark_schema)  # the table's columns, then op and lsn
    sink: Any = ducklake_sink(
        t.lake_table,
        catalog=args.catalog,
        data_path=args.data_path,
        upsert_on=[t.key],
        delete_when="op = 'd'",
        order_by="lsn",
        data_inlining_row_limit=args.inline_limit,
    )

    def apply(batch_df: Any, batch_id: int) -> None:
        sink(batch_df, batch_id)
        m = sink.last
        detail = "already committed before a restart" if m.mode == "skipped" else f"{m.rows:,} changes {m.mode}"
        say(f"{t.name} batch {batch_id}: {detail}, snapshot {m.snapshot_id}")

    return (
        rows.writeStream.foreachBatch(apply)
        .queryName(t.name)
        .option("checkpointLocation", os.path.join(args.checkpoint, t.name))
        .trigger(processingTime=f"{args.trigger_seconds} seconds")
        .start()
    )


def run_pipeline(args: argparse.Namespace, until: threading.Event | None = None) -> int:
    """Stream every table until ``until`` is set, ``--timeout`` passes or Ctrl-C; 1 when a query failed."""
    spark = build_spark(args.spark_jars or script("kafka", "spark-jars"), args.master)
    create_lake_tables(args.catalog, args.data_path)  # its DDL schemas are parsed by the session
    queries = [start_query(spark, args, t) for t in TABLES]
    deadline = time.monotonic() + args.timeout if args.timeout else None
    failed = None
    try:
        while failed is None and not (until is not None and until.wait(0.5)):
            failed = next((q for q in queries if not q.isActive), None)
            if until is None:
                time.sleep(0.5)
            if deadline is not None and time.monotonic() > deadline:
                break
    except KeyboardInterrupt:
        say("pipeline: interrupted")
    for q in queries:
        q.stop()
    errors = [f"{q.name}: {q.exception()}" for q in queries if q.exception() is not None]
    spark.stop()
    for e in errors:
        say(f"pipeline: query failed: {e}")
    return 1 if errors else 0


# --- checks ---------------------------------------------------------------------------------------------------------


def lake_rows(lake: Any, t: Captured) -> dict[int, dict[str, Any]]:
    from pyspark_ducklake.exceptions import NoSuchTableError

    try:
        return {r[t.key]: r for r in lake.scan(t.lake_table).to_pylist()}
    except NoSuchTableError:
        return {}


def comparable(row: dict[str, Any]) -> dict[str, Any]:
    """A row with timestamps in UTC (PostgreSQL's timestamptz comes back in the session's zone)."""
    return {k: v.astimezone(dt.timezone.utc) if isinstance(v, dt.datetime) and v.tzinfo else v for k, v in row.items()}


def differences(server_url: str, names: Names, catalog: str, data_path: str) -> list[str]:
    """What differs between each PostgreSQL table and its lake table (empty: equal, row for row)."""
    import pyspark_ducklake as pdl

    out = []
    with pdl.connect(catalog, data_path) as lake:
        for t in TABLES:
            want = {k: comparable(v) for k, v in postgres_rows(server_url, names, t).items()}
            got = {k: comparable(v) for k, v in lake_rows(lake, t).items()}
            missing, extra = sorted(want.keys() - got.keys()), sorted(got.keys() - want.keys())
            wrong = sorted(k for k in want.keys() & got.keys() if want[k] != got[k])
            if missing or extra or wrong:
                sample = [(want[k], got[k]) for k in wrong[:2]]
                out.append(
                    f"{t.name}: {len(missing)} missing {missing[:5]}, {len(extra)} extra {extra[:5]}, "
                    f"{len(wrong)} differ {sample}"
                )
    return out


def feed_problems(catalog: str, data_path: str) -> tuple[dict[str, dict[str, int]], list[str]]:
    """The change feed of each lake table from its creation: counts by change type, and what is wrong with it
    (an update pair whose key or row id differs; a replay of the feed that does not give the table)."""
    import pyspark_ducklake as pdl

    counts: dict[str, dict[str, int]] = {}
    problems: list[str] = []
    with pdl.connect(catalog, data_path) as lake:
        last = lake.current_snapshot_id()
        for t in TABLES:
            feed = lake.table_changes(t.lake_table, 0, last).to_pylist()
            counts[t.name] = {}
            state: dict[int, dict[str, Any]] = {}  # rowid -> row
            pre: dict[tuple[int, int], Any] = {}
            for c in feed:
                kind = c["_change_type"]
                counts[t.name][kind] = counts[t.name].get(kind, 0) + 1
                row = {k: v for k, v in c.items() if not k.startswith("_")}
                at = (c["_snapshot_id"], c["_rowid"])
                if kind == "update_preimage":
                    pre[at] = row[t.key]
                elif kind == "update_postimage" and pre.pop(at, None) != row[t.key]:
                    problems.append(f"{t.name}: update pair at snapshot/rowid {at} changes the key")
                if kind in ("insert", "update_postimage"):
                    state[c["_rowid"]] = row
                elif kind == "delete":
                    state.pop(c["_rowid"], None)
            replayed = sorted((r[t.key] for r in state.values()), key=str)
            table = sorted(lake_rows(lake, t), key=str)
            if replayed != table:
                problems.append(
                    f"{t.name}: replaying the change feed gives {len(replayed)} keys, the table has {len(table)}"
                )
    return counts, problems


def duckdb_differences(catalog: str, data_path: str) -> list[str]:
    """What DuckDB's ducklake extension reads differently from this library (needs the ``duckdb`` wheels)."""
    import pyspark_ducklake as pdl
    from pyspark_ducklake.duckdb_attach import open_in_duckdb

    out = []
    with pdl.connect(catalog, data_path) as lake:
        con = open_in_duckdb(lake)
        try:
            for t in TABLES:
                ours = lake.scan(t.lake_table).sort_by(t.key)
                theirs = con.sql(f"SELECT * FROM lake.{t.lake_table} ORDER BY {t.key}").to_arrow_table()
                if ours.to_pylist() != theirs.cast(ours.schema).to_pylist():
                    out.append(f"{t.name}: DuckDB reads {theirs.num_rows} rows differently from our {ours.num_rows}")
        finally:
            con.close()
    return out


def check(args: argparse.Namespace, wait: float = 0) -> int:
    """Wait up to ``wait`` seconds for the lake to equal PostgreSQL; then report it, DuckDB's read and the feed."""
    deadline = time.monotonic() + wait
    names = Names(args.tag)
    while (diff := differences(args.postgres, names, args.catalog, args.data_path)) and time.monotonic() < deadline:
        time.sleep(1)
    for d in diff:
        say(f"lake != PostgreSQL: {d}")
    say("lake == PostgreSQL, row for row: " + ("yes" if not diff else "NO"))
    try:
        duck = duckdb_differences(args.catalog, args.data_path)
        say("DuckDB reads the same: " + ("yes" if not duck else "NO: " + "; ".join(duck)))
    except ImportError as e:  # NotInstalledError: DuckDB is optional at run time
        duck = []
        say(f"(DuckDB is optional: {e})")
    counts, problems = feed_problems(args.catalog, args.data_path)
    for name, by_kind in counts.items():
        say(f"change feed of {name}: {by_kind}")
    for p in problems:
        say(f"change feed: {p}")
    return 0 if not (diff or duck or problems) else 1


# --- command line ----------------------------------------------------------------------------------------------


def up(args: argparse.Namespace) -> None:
    names = Names(args.tag)
    create_database(args.postgres, names)
    connect = args.connect or script("debezium", "start", env={"CONNECT_BOOTSTRAP": args.bootstrap})
    add_connector(connect, args.postgres, names)
    say(f"capturing {', '.join(t.name for t in TABLES)} of {names.database} into topics cdc_{names.tag}.public.*")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "command", nargs="?", default="all", choices=["all", "up", "workload", "pipeline", "check", "remove", "down"]
    )
    parser.add_argument("--postgres", default=os.environ.get("CDC_POSTGRES_URL"), help="the captured server's URL")
    parser.add_argument("--bootstrap", default=os.environ.get("KAFKA_BOOTSTRAP"), help="Kafka bootstrap servers")
    parser.add_argument("--connect", default=os.environ.get("CONNECT_URL"), help="Kafka Connect's REST URL")
    parser.add_argument("--tag", default="demo", help="names the database, connector, slot and topics (cdc_<tag>)")
    parser.add_argument("--lake", default=os.path.join(ROOT, "lake", "cdc"), help="folder of the default lake")
    parser.add_argument("--catalog", default=os.environ.get("DUCKLAKE_CATALOG"), help="catalog URL")
    parser.add_argument("--data-path", default=os.environ.get("DUCKLAKE_DATA_PATH"), help="data path of a new lake")
    parser.add_argument("--checkpoint", help="Spark checkpoint folder (default <lake>/checkpoint)")
    parser.add_argument("--ops", type=int, default=2000, help="changes the workload makes")
    parser.add_argument("--rate", type=float, default=200, help="changes per second, 0 = as fast as possible")
    parser.add_argument("--seed", type=int, default=1, help="the workload's random seed")
    parser.add_argument("--timeout", type=float, default=0, help="stop the pipeline after this many seconds")
    parser.add_argument("--max-per-batch", type=int, default=5000, help="maxOffsetsPerTrigger of the Kafka source")
    parser.add_argument(
        "--inline-limit", type=int, default=1000, help="micro-batches of at most this many changes stay in the catalog"
    )
    parser.add_argument("--trigger-seconds", type=float, default=1.0, help="micro-batch interval")
    parser.add_argument("--master", default="local[2]", help="Spark master")
    parser.add_argument("--spark-jars", help="comma-separated jars of Spark's Kafka source")
    args = parser.parse_args(argv)
    lake = os.path.abspath(args.lake)
    args.catalog = args.catalog or f"sqlite:///{lake}/catalog.sqlite"
    args.data_path = args.data_path or f"{lake}/data/"
    args.checkpoint = args.checkpoint or f"{lake}/checkpoint"
    if args.catalog.startswith("sqlite:///"):
        os.makedirs(os.path.dirname(args.catalog[len("sqlite:///") :]), exist_ok=True)
    if args.command != "down":
        args.postgres = args.postgres or script("postgres", "start")
    if args.command in ("all", "up", "pipeline"):
        args.bootstrap = args.bootstrap or script("kafka", "start")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.command == "down":
        script("debezium", "stop")
        script("kafka", "stop")
        return 0
    if args.command == "up":
        up(args)
        return 0
    if args.command == "remove":
        names = Names(args.tag)
        running = subprocess.run(["bash", os.path.join(SCRIPTS, "debezium.sh"), "status"], capture_output=True)
        remove(args.connect or (script("debezium", "url") if running.returncode == 0 else None), args.postgres, names)
        say(f"removed connector {names.connector}, replication slot {names.slot} and database {names.database}")
        return 0
    if args.command == "workload":
        say(f"workload: {workload(args.postgres, Names(args.tag), args.ops, args.rate, args.seed)}")
        return 0
    if args.command == "pipeline":
        return run_pipeline(args)
    if args.command == "check":
        return check(args)
    # all: the services, the workload while the pipeline runs, then the check once the lake has caught up
    up(args)
    stop = threading.Event()
    done: dict[str, Any] = {}
    pipeline = threading.Thread(target=lambda: done.setdefault("rc", run_pipeline(args, until=stop)), daemon=True)
    pipeline.start()
    say(f"workload: {workload(args.postgres, Names(args.tag), args.ops, args.rate, args.seed)}")
    rc = check(args, wait=180)
    stop.set()
    pipeline.join()
    return rc or done.get("rc", 1)


if __name__ == "__main__":
    sys.exit(main())
