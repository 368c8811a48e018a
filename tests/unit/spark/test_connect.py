"""Telling a Spark Connect session from a classic one by its class, without importing Spark Connect's client."""

from __future__ import annotations

from pyspark.sql.connect.session import SparkSession as ConnectSession
from pyspark.sql.session import SparkSession as ClassicSession

from pyspark_ducklake.spark.connect import is_connect


def test_connect_and_classic_sessions() -> None:
    assert is_connect(object.__new__(ConnectSession))
    assert not is_connect(object.__new__(ClassicSession))
    assert not is_connect(object())
