"""Fixtures for tests/integration (the suite-wide ones are in tests/conftest.py).

- ``kafka_server`` (session): a real single-node Kafka broker (``tests.support.kafka.KafkaBroker``), started with
  ``scripts/kafka.sh`` on free ports in a temp folder (the jars are fetched from Maven Central on first use) and
  stopped by its pid at the end of the session.
- ``kafka_broker`` (session): its bootstrap string, ``127.0.0.1:<port>``.
- ``cdc_pg`` (session): a PostgreSQL with ``wal_level=logical`` of its own, for Debezium's connector.
- ``connect_worker`` (session): a Kafka Connect worker with Debezium's PostgreSQL connector, on the broker.
- ``kafka_spark_jars`` (session): comma-separated jars of Spark's Kafka source, for ``spark.jars`` of a driver that
  the test starts as its own process.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.debezium import ConnectWorker, start_connect, stop_connect
from tests.support.kafka import KafkaBroker, spark_kafka_jars, start_broker, stop_broker
from tests.support.pg_instance import PgInstance


@pytest.fixture(scope="session")
def kafka_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaBroker]:
    """A running Kafka broker for the whole session."""
    try:
        broker = start_broker(tmp_path_factory.mktemp("kafka"))
    except Exception as e:
        pytest.fail(f"could not start the Kafka broker: {e}", pytrace=False)
    yield broker
    stop_broker(broker)


@pytest.fixture(scope="session")
def kafka_broker(kafka_server: KafkaBroker) -> str:
    """Bootstrap servers of the session's Kafka broker."""
    return kafka_server.bootstrap


@pytest.fixture(scope="session")
def kafka_spark_jars() -> str:
    """``spark.jars`` value for Spark's Kafka source."""
    try:
        return ",".join(spark_kafka_jars())
    except Exception as e:
        pytest.fail(f"could not fetch Spark's Kafka source: {e}", pytrace=False)


@pytest.fixture(scope="session")
def cdc_pg(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PgInstance]:
    """A PostgreSQL of its own with logical WAL (scripts/postgres.sh configures it), in a fresh cluster folder, so
    neither the shared server nor another worker's is ever restarted for it. Modules using it share the xdist group
    ``debezium`` (one worker starts it once)."""
    instance = PgInstance(tmp_path_factory.mktemp("postgres-cdc"))
    instance.start()
    try:
        yield instance
    finally:
        instance.stop()


@pytest.fixture(scope="session")
def connect_worker(kafka_broker: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConnectWorker]:
    try:
        worker = start_connect(tmp_path_factory.mktemp("connect"), kafka_broker)
    except Exception as e:
        pytest.fail(f"could not start Kafka Connect with Debezium: {e}", pytrace=False)
    yield worker
    stop_connect(worker)
