"""A streaming driver run as its own process by the writeStream upsert test: JSON change files in,
``writeStream.format("ducklake")`` with ``upsertOn``/``deleteWhen``/``orderBy`` out.

Usage: python -m tests.support.ws_upsert_app SOURCE CHECKPOINT CATALOG DATA_PATH
Processes every file once (Trigger.AvailableNow, one file per micro-batch) and exits. A crash point in
PYSPARK_DUCKLAKE_CRASH_AT kills it (with its JVM and Python workers) mid-way, as a machine failure would.
STREAM_APP_JAVA_OPTIONS goes to the driver JVM (as in ``tests.support.stream_app``).
"""

from __future__ import annotations

import os
import sys
from typing import Any

BATCH_DDL = "id BIGINT, v STRING, op STRING, lsn BIGINT"
UPSERT = {"upsertOn": "id", "deleteWhen": "op = 'd'", "orderBy": "lsn"}


def start(spark: Any, source: str, checkpoint: str, catalog: str, data_path: str, table: str = "main.ws") -> Any:
    """The upsert query over the change files in ``source`` (its own process's or a test's session)."""
    writer = (
        spark.readStream.schema(BATCH_DDL)
        .option("maxFilesPerTrigger", 1)
        .json(source)
        .writeStream.format("ducklake")
        .option("catalog", catalog)
        .option("dataPath", data_path)
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
    )
    for key, value in UPSERT.items():
        writer = writer.option(key, value)
    return writer.start(table)


def main(argv: list[str]) -> int:
    source, checkpoint, catalog, data_path = argv[:4]
    from pyspark_ducklake._faults import GROUP_ENV

    os.environ[GROUP_ENV] = str(os.getpgid(0))  # the commit's Python worker kills this whole driver
    from tests.support.app_session import local_session

    java_options = os.environ.get("STREAM_APP_JAVA_OPTIONS")  # e.g. the shared class archive (tests.support.jvm)
    spark = local_session(
        "ducklake-ws-upsert", conf={"spark.driver.extraJavaOptions": java_options} if java_options else None
    )
    query = start(spark, source, checkpoint, catalog, data_path)
    query.awaitTermination()
    spark.stop()
    return 0 if query.exception() is None else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
