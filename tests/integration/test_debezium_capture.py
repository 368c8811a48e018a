"""The CDC pipeline's first half on real parts: PostgreSQL (logical WAL) -> Debezium's connector in a Kafka Connect
worker -> a real Kafka broker. Pins down the change events the lake's upsert sink will consume (issue #17): the
snapshot's reads, updates with full before images, deletes with tombstones, a primary-key change as delete + create,
and the source LSN that orders them."""

from __future__ import annotations

import contextlib
import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa

from tests.support.catalogs import PgServer
from tests.support.debezium import (
    ConnectWorker,
    add_connector,
    drop_slot,
    postgres_connector_config,
    remove_connector,
)
from tests.support.pg_instance import PgInstance

# One xdist worker for every Debezium module: one PostgreSQL and one Connect worker (tests/integration/conftest.py).
pytestmark = [pytest.mark.kafka, pytest.mark.timeout(600), pytest.mark.xdist_group("debezium")]


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


@contextlib.contextmanager
def captured(server: PgServer, worker: ConnectWorker, table: str, setup: list[str]) -> Iterator[tuple[sa.Engine, str]]:
    """A fresh database with ``table`` made by the ``setup`` SQL (with REPLICA IDENTITY FULL), captured by a Debezium
    connector of its own: yields the database's engine and the table's topic; removes connector, slot and database."""
    tag = uuid.uuid4().hex[:8]
    database, slot, prefix = f"cdc_{tag}", f"slot_{tag}", f"pg{tag}"
    admin = sa.create_engine(server.url(), isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        assert conn.execute(sa.text("SHOW wal_level")).scalar() == "logical"
        conn.execute(sa.text(f"CREATE DATABASE {database}"))
    engine = sa.create_engine(server.url(database))
    try:
        with engine.begin() as conn:
            for sql in setup:
                conn.exec_driver_sql(sql.replace("%", "%%"))
            conn.execute(sa.text(f"ALTER TABLE {table} REPLICA IDENTITY FULL"))
        config = postgres_connector_config(server, database, topic_prefix=prefix, tables=[f"public.{table}"], slot=slot)
        add_connector(worker, prefix, config)
        try:
            yield engine, f"{prefix}.public.{table}"
        finally:
            remove_connector(worker, prefix)
            drop_slot(server.url(database), slot)
    finally:
        engine.dispose()
        with admin.connect() as conn:
            conn.execute(sa.text(f"DROP DATABASE IF EXISTS {database} WITH (FORCE)"))
        admin.dispose()


def test_debezium_change_events(cdc_pg: PgInstance, connect_worker: ConnectWorker, kafka_broker: str) -> None:
    setup = [
        "CREATE TABLE customers(id int PRIMARY KEY, name text NOT NULL, balance numeric(12,2))",
        "INSERT INTO customers VALUES (1, 'ann', 10.50), (2, 'bob', 20.00), (3, 'cy', NULL)",
    ]
    with captured(cdc_pg.start(), connect_worker, "customers", setup) as (engine, topic):
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


TYPED_DDL = """CREATE TABLE typed(
    id bigint PRIMARY KEY, i int, d double precision, n numeric(18,3), b boolean, dt date, ts timestamp,
    tsz timestamptz, u uuid, j jsonb, bin bytea, arr int[], txt text)"""
TYPED_SCHEMA = (
    "id BIGINT, i INT, d DOUBLE, n DECIMAL(18,3), b BOOLEAN, dt DATE, ts TIMESTAMP_NTZ, tsz TIMESTAMP, u STRING, "
    "j STRING, bin BINARY, arr ARRAY<INT>, txt STRING"
)
TYPED_ROWS = [
    "(1, 2, 1.5, 12.345, true, '2024-02-29', '2024-01-02 03:04:05.123456', '2024-01-02 03:04:05.123456+05:30', "
    "'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '{\"a\": [1, \"x]\"]}', '\\xdeadbeef', '{1,2,NULL}', 'he said \"hi\" [x]')",
    "(2, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)",
    "(3, -7, -0.0, -0.001, false, '1901-12-13', '1901-12-13 20:45:52', '1969-12-31 23:59:59.999999+00', "
    "NULL, '[]', '\\x', '{}', '')",
]


def test_debezium_rows_equal_postgres(
    cdc_pg: PgInstance, connect_worker: ConnectWorker, kafka_broker: str, spark: Any
) -> None:
    """``pdl.debezium`` over the real topic, applied in LSN order (last change of a key wins, deletes remove it),
    equals the PostgreSQL table value for value, for every type it decodes."""
    import pyspark_ducklake as pdl

    setup = [TYPED_DDL, "INSERT INTO typed VALUES " + ", ".join(TYPED_ROWS)]
    with captured(cdc_pg.start(), connect_worker, "typed", setup) as (engine, topic):
        with engine.begin() as conn:  # one transaction: the LSN orders changes within it too
            conn.execute(sa.text("UPDATE typed SET n = 99.999, txt = 'first' WHERE id = 1"))
            conn.execute(sa.text("UPDATE typed SET n = 100.5, txt = 'second' WHERE id = 1"))
        with engine.begin() as conn:
            conn.execute(sa.text("DELETE FROM typed WHERE id = 2"))
            conn.execute(sa.text("UPDATE typed SET id = 30 WHERE id = 3"))
            conn.execute(sa.text("INSERT INTO typed(id, txt) VALUES (2, 'back')"))
        # 3 reads, 2 updates, delete + tombstone, key change (delete + tombstone + create), the insert.
        messages = consume(kafka_broker, topic, 11)
        assert len(messages) == 11
        values = [(None if v is None else json.dumps(v).encode(),) for _, v, _ in messages]
        raw = spark.createDataFrame(values, "value BINARY")
        rows = pdl.debezium(raw, TYPED_SCHEMA).toArrow().to_pylist()
        assert sorted(r["op"] for r in rows) == sorted("rrruuddcc")
        lake: dict[int, dict[str, Any]] = {}
        for r in sorted(rows, key=lambda r: r["lsn"]):
            op, _ = r.pop("op"), r.pop("lsn")
            if op == "d":
                lake.pop(r["id"], None)
            else:
                lake[r["id"]] = r
        with engine.connect() as conn:
            expected = {row.id: dict(row._mapping) for row in conn.execute(sa.text("SELECT * FROM typed"))}
        assert sorted(lake) == sorted(expected) == [1, 2, 30]
        for key, want in expected.items():
            got = lake[key]
            want = {
                **want,
                "u": None if want["u"] is None else str(want["u"]),
                "j": want["j"],
                "bin": None if want["bin"] is None else bytes(want["bin"]),
            }
            got = {**got, "j": None if got["j"] is None else json.loads(got["j"])}
            assert got == want, key
