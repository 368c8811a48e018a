"""A streaming driver run as its own process by recovery tests: JSON files in, ducklake_sink out.

Usage: python -m tests.support.stream_app SOURCE CHECKPOINT CATALOG DATA_PATH [INLINE_LIMIT] [FLUSH_ROWS]
Processes every file once (Trigger.AvailableNow, one file per micro-batch) and exits. A crash point in
PYSPARK_DUCKLAKE_CRASH_AT kills it (and its JVM) mid-way. It prints ``BATCH <id>`` when a micro-batch reaches the
sink, so a test can kill it while batches run. STREAM_APP_JAVA_OPTIONS goes to the driver JVM (e.g. a class-data
sharing archive that halves start-up, see ``tests.support.jvm``).
"""

from __future__ import annotations

import os
import sys
from typing import Any


def main(argv: list[str]) -> int:
    source, checkpoint, catalog, data_path = argv[:4]
    inline_limit = int(argv[4]) if len(argv) > 4 else 100
    flush_rows = int(argv[5]) if len(argv) > 5 else 100_000
    from pyspark_ducklake import ducklake_sink
    from tests.support.app_session import local_session

    java_options = os.environ.get("STREAM_APP_JAVA_OPTIONS")
    spark = local_session(
        "ducklake-recovery", conf={"spark.driver.extraJavaOptions": java_options} if java_options else None
    )
    sink = ducklake_sink(
        "main.events", catalog=catalog, data_path=data_path, data_inlining_row_limit=inline_limit, flush_rows=flush_rows
    )
    query = (
        spark.readStream.schema("id BIGINT, kind STRING, amount DOUBLE")
        .option("maxFilesPerTrigger", 1)
        .json(source)
        .writeStream.foreachBatch(announced(sink))
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    spark.stop()
    return 0 if query.exception() is None else 1


def announced(sink: Any) -> Any:
    def handle(batch_df: Any, batch_id: int) -> None:
        print(f"BATCH {batch_id}", flush=True)
        sink(batch_df, batch_id)

    return handle


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
