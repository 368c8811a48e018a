"""The CDC pipeline's first half on real parts: PostgreSQL (logical WAL) -> Debezium's connector in a Kafka Connect
worker -> a real Kafka broker. Pins down the change events the lake's upsert sink will consume (issue #17): the
snapshot's reads, updates with full before images, deletes with tombstones, a primary-key change as delete + create,
and the source LSN that orders them."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa

from tests.support.catalogs import REPO_ROOT
from tests.support.debezium import (
    ConnectWorker,
    add_connector,
    drop_slot,
    postgres_connector_config,
    remove_connector,
    start_connect,
    stop_connect,
)
from tests.support.pg_instance import PgInstance

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(600)]

CDC_BASE = REPO_ROOT / ".cache" / "postgres-cdc"


@pytest.fixture(scope="module")
def cdc_pg() -> Iterator[PgInstance]:
    """A PostgreSQL of its own with logical WAL (scripts/postgres.sh configures it), so the shared one is never
    restarted for it."""
    instance = PgInstance(CDC_BASE)
    instance.start()
    try:
        yield instance
    finally:
        instance.stop()


@pytest.fixture(scope="module")
def connect_worker(kafka_broker: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConnectWorker]:
    try:
        worker = start_connect(tmp_path_factory.mktemp("connect"), kafka_broker)
    except Exception as e:
        pytest.fail(f"could not start Kafka Connect with Debezium: {e}", pytrace=False)
    yield worker
    stop_connect(worker)


def consume(bootstrap: str, topic: str, want: int, timeout: float = 90) -> list[tuple[Any, Any, int]]:
    """``want`` messages of ``topic`` from the beginning as (key, value, partition), JSON-decoded (None for a
    tombstone's value)."""
    from confluent_kafka import Consumer

    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"t-{uuid.uuid4().hex}", "auto.offset.reset": "earliest"}
    )
    out: list[tuple[Any, Any, int]] = []
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + timeout
        while len(out) < want and time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is None or msg.error():
                continue
            value = msg.value()
            out.append((json.loads(msg.key()), None if value is None else json.loads(value), msg.partition()))
    finally:
        consumer.close()
    return out


def test_debezium_change_events(cdc_pg: PgInstance, connect_worker: ConnectWorker, kafka_broker: str) -> None:
    server = cdc_pg.start()  # already running: returns the server
    tag = uuid.uuid4().hex[:8]
    database, slot, prefix = f"cdc_{tag}", f"slot_{tag}", f"pg{tag}"
    admin = sa.create_engine(server.url(), isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        assert conn.execute(sa.text("SHOW wal_level")).scalar() == "logical"
        conn.execute(sa.text(f"CREATE DATABASE {database}"))
    engine = sa.create_engine(server.url(database))
    try:
        with engine.begin() as conn:
            conn.execute(
                sa.text("CREATE TABLE customers(id int PRIMARY KEY, name text NOT NULL, balance numeric(12,2))")
            )
            conn.execute(sa.text("ALTER TABLE customers REPLICA IDENTITY FULL"))
            conn.execute(sa.text("INSERT INTO customers VALUES (1, 'ann', 10.50), (2, 'bob', 20.00), (3, 'cy', NULL)"))
        add_connector(
            connect_worker,
            prefix,
            postgres_connector_config(server, database, topic_prefix=prefix, tables=["public.customers"], slot=slot),
        )
        topic = f"{prefix}.public.customers"
        snapshot = consume(kafka_broker, topic, 3)
        assert sorted((k["id"], v["op"], v["after"]["name"]) for k, v, _ in snapshot) == [
            (1, "r", "ann"),
            (2, "r", "bob"),
            (3, "r", "cy"),
        ]
        with engine.begin() as conn:
            conn.execute(sa.text("UPDATE customers SET balance = 25.75 WHERE id = 2"))
        with engine.begin() as conn:
            conn.execute(sa.text("DELETE FROM customers WHERE id = 3"))
        with engine.begin() as conn:
            conn.execute(sa.text("UPDATE customers SET id = 10 WHERE id = 1"))
        with engine.begin() as conn:
            conn.execute(sa.text("INSERT INTO customers VALUES (4, 'dee', 1.00)"))
        # 3 reads, the update, delete + tombstone, key change (delete + tombstone + create), the insert.
        events = consume(kafka_broker, topic, 10)
        assert len(events) == 10, events
        changes = [(k, v) for k, v, _ in events if v is not None and v["op"] != "r"]
        tombstones = sorted(k["id"] for k, v, _ in events if v is None)
        assert tombstones == [1, 3]
        changes.sort(key=lambda kv: (kv[1]["source"]["lsn"], kv[1]["op"] != "d"))  # a key change: delete first
        seen = [(k["id"], v["op"], v["before"], v["after"]) for k, v in changes]
        assert seen == [
            (2, "u", {"id": 2, "name": "bob", "balance": "20.00"}, {"id": 2, "name": "bob", "balance": "25.75"}),
            (3, "d", {"id": 3, "name": "cy", "balance": None}, None),
            (1, "d", {"id": 1, "name": "ann", "balance": "10.50"}, None),
            (10, "c", None, {"id": 10, "name": "ann", "balance": "10.50"}),
            (4, "c", None, {"id": 4, "name": "dee", "balance": "1.00"}),
        ]
        # The same key always lands in the same partition, so per key the order of the topic is the commit order.
        by_key: dict[int, set[int]] = {}
        for k, _, partition in events:
            by_key.setdefault(k["id"], set()).add(partition)
        assert all(len(p) == 1 for p in by_key.values())
        lsns = [v["source"]["lsn"] for _, v in changes]
        assert lsns == sorted(lsns)
    finally:
        try:
            remove_connector(connect_worker, prefix)
            drop_slot(server.url(database), slot)
        finally:
            engine.dispose()
            with admin.connect() as conn:
                conn.execute(sa.text(f"DROP DATABASE IF EXISTS {database} WITH (FORCE)"))
            admin.dispose()
