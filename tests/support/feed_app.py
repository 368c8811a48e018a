"""A change-feed driver run as its own process by the initial-load kill test: ``main.a``'s feed without a start
option into Parquet, one folder per micro-batch.

Usage: python -m tests.support.feed_app CATALOG OUT CHECKPOINT MAX_ROWS
Reads with ``Trigger.AvailableNow`` and ``maxRowsPerTrigger=MAX_ROWS``; each micro-batch overwrites
``OUT/batch=<id>`` (a replayed batch replaces its earlier attempt) and then prints ``BATCH <id>``, so a test can
SIGKILL the process group between micro-batches.
"""

from __future__ import annotations

import sys
from typing import Any


def main(argv: list[str]) -> int:
    catalog, out, checkpoint, max_rows = argv[:4]
    from tests.support.app_session import local_session

    spark = local_session("ducklake-feed-kill")

    def handle(df: Any, batch_id: int) -> None:
        df.write.mode("overwrite").parquet(f"{out}/batch={batch_id}")
        print(f"BATCH {batch_id}", flush=True)

    query = (
        spark.readStream.format("ducklake")
        .option("catalog", catalog)
        .option("readChangeFeed", "true")
        .option("maxRowsPerTrigger", max_rows)
        .load("main.a")
        .writeStream.foreachBatch(handle)
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    spark.stop()
    return 0 if query.exception() is None else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
