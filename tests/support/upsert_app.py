"""A driver run as its own process by the sink-upsert crash test: upsert micro-batches through ``ducklake_sink``.

Usage: python -m tests.support.upsert_app CATALOG DATA_PATH FIRST_BATCH LAST_BATCH
Runs batches FIRST..LAST of :func:`batch_rows` (batch 1 is large: written by the executors). A crash point in
PYSPARK_DUCKLAKE_CRASH_AT kills it (and its JVM) mid-way, as a machine failure would.
STREAM_APP_JAVA_OPTIONS goes to the driver JVM (as in ``tests.support.stream_app``).
"""

from __future__ import annotations

import os
import sys

APP_ID = "crash-app"
BATCH_DDL = "id BIGINT, v STRING, op STRING, lsn BIGINT"


def batch_rows(batch: int) -> list[tuple[int, str, str, int]]:
    """Deterministic changes: batch 0 inserts 0..199, batch 1 updates 100..2999 (new from 200), batch 2 deletes."""
    if batch == 0:
        return [(i, f"a{i}", "c", 0) for i in range(200)]
    if batch == 1:
        return [(i, f"b{i}", "u", 1) for i in range(100, 3000)]
    return [(i, "", "d", 2) for i in range(150)]


def sink(catalog: str, data_path: str) -> object:
    from pyspark_ducklake import ducklake_sink

    return ducklake_sink(
        "main.t",
        catalog=catalog,
        data_path=data_path,
        app_id=APP_ID,
        upsert_on="id",
        delete_when="op = 'd'",
        order_by="lsn",
        data_inlining_row_limit=100,
    )


def main(argv: list[str]) -> int:
    catalog, data_path, first, last = argv[0], argv[1], int(argv[2]), int(argv[3])
    from tests.support.app_session import local_session

    java_options = os.environ.get("STREAM_APP_JAVA_OPTIONS")  # e.g. the shared class archive (tests.support.jvm)
    spark = local_session(
        "ducklake-upsert-crash", conf={"spark.driver.extraJavaOptions": java_options} if java_options else None
    )
    write = sink(catalog, data_path)
    for b in range(first, last + 1):
        write(spark.createDataFrame(batch_rows(b), BATCH_DDL).repartition(3), b)  # type: ignore[operator]
    spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
