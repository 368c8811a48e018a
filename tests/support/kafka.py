"""A real Apache Kafka broker for the tests, and Spark's Kafka source jars, both through ``scripts/kafka.sh``.

The script fetches the jars from Maven Central into ``.cache/kafka/jars/`` (once; later calls are quick). Each test
session's broker is a single-node KRaft process on 127.0.0.1 with free ports and its state in a temp folder
(``KAFKA_STATE_DIR``), so parallel runs and a broker started by hand (``scripts/kafka.sh start``) never collide.

Spark's Kafka source must be on the JVM's classpath when the SparkSession starts (``spark.jars``); the shared
``spark`` fixture is created without it, so tests run a Spark driver that reads Kafka as a separate process.
"""

from __future__ import annotations

import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from tests.support.processes import daemon_running, stop_daemon

REPO_ROOT = Path(__file__).resolve().parents[2]
KAFKA_SCRIPT = REPO_ROOT / "scripts" / "kafka.sh"
# Variables of the script that would pin a test broker to a caller's choice.
_PINNING_ENV = ("KAFKA_PORT", "KAFKA_CONTROLLER_PORT", "KAFKA_STATE_DIR")


@dataclass(frozen=True)
class KafkaBroker:
    """A running broker: ``bootstrap`` is ``127.0.0.1:<port>``; ``state_dir`` holds its config, data and log."""

    bootstrap: str
    pid: int
    state_dir: Path

    @property
    def log(self) -> Path:
        return self.state_dir / "broker.log"


def run_script(*args: str, state_dir: Path | None = None, timeout: float = 900) -> str:
    """Run ``scripts/kafka.sh ARGS`` and return its stdout.

    Raises:
        RuntimeError: the script failed (its stderr is in the message).
    """
    env = {k: v for k, v in os.environ.items() if k not in _PINNING_ENV}
    if state_dir is not None:
        env["KAFKA_STATE_DIR"] = str(state_dir)
    proc = subprocess.run(
        ["bash", str(KAFKA_SCRIPT), *args],
        cwd=REPO_ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"scripts/kafka.sh {' '.join(args)} failed (exit {proc.returncode}):\n{proc.stderr}")
    return proc.stdout


def spark_kafka_jars() -> list[str]:
    """Local paths of Spark's Kafka source and what it needs beyond pyspark's own jars (for ``spark.jars``)."""
    return [j for j in run_script("spark-jars").strip().split(",") if j]


def start_broker(state_dir: Path, ready_timeout: float = 90) -> KafkaBroker:
    """Start a broker with free ports and its state in ``state_dir``; return once an admin client lists topics."""
    state_dir.mkdir(parents=True, exist_ok=True)
    bootstrap = run_script("start", state_dir=state_dir).strip().splitlines()[-1]
    broker = KafkaBroker(bootstrap, int((state_dir / "broker.pid").read_text()), state_dir)
    try:
        wait_until_ready(bootstrap, ready_timeout)
    except BaseException:
        stop_broker(broker)
        raise
    return broker


def wait_until_ready(bootstrap: str, timeout: float = 90) -> None:
    """Wait until an admin client gets the topic list from ``bootstrap``."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + timeout
    while True:
        try:
            admin.list_topics(timeout=5)
            return
        except Exception as e:  # KafkaException: not up yet
            if time.monotonic() > deadline:
                raise TimeoutError(f"Kafka at {bootstrap} did not answer within {timeout:.0f} s: {e}") from e
            time.sleep(0.5)


def is_running(broker: KafkaBroker) -> bool:
    """True while the broker's own process (not a reused pid) is alive."""
    return daemon_running(broker.pid, b"kafka.Kafka", broker.state_dir)


def stop_broker(broker: KafkaBroker, timeout: float = 30) -> None:
    """Stop it by its pid: SIGTERM (a clean shutdown), then SIGKILL after ``timeout`` seconds."""
    stop_daemon(broker.pid, b"kafka.Kafka", broker.state_dir, timeout)


def create_topic(bootstrap: str, topic: str, partitions: int = 3) -> None:
    """Create a topic and wait until it exists."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)])[topic].result(timeout=30)


def topic_offsets(bootstrap: str, topic: str) -> dict[int, tuple[int, int]]:
    """``{partition: (low, high)}`` watermarks of ``topic``."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "tests-watermarks"})
    try:
        meta = consumer.list_topics(topic, timeout=30).topics[topic]
        return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30) for p in meta.partitions}
    finally:
        consumer.close()
