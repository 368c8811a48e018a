"""Whether a SparkSession is a Spark Connect client, which has no SparkContext and no JVM on this side.

On Spark Connect, ``spark.sparkContext``, ``_jsc`` and ``_jvm`` raise; whatever needs them takes another route
(runtime conf instead of the SparkConf, the data source instead of the fast paths, an explicit ``app_id`` for the
sink). The check looks at the session's class only: importing ``pyspark.sql.connect`` needs grpcio and zstandard
(the ``connect`` extra), which a classic session does not.
"""

from __future__ import annotations

from typing import Any

CONNECT_MODULE = "pyspark.sql.connect"


def is_connect(spark: Any) -> bool:
    """Whether ``spark`` (a SparkSession, or a DataFrame's ``sparkSession``) is a Spark Connect session."""
    module = type(spark).__module__ or ""
    return module == CONNECT_MODULE or module.startswith(CONNECT_MODULE + ".")


__all__ = ["is_connect"]
