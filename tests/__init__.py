"""Test suite of pyspark-ducklake (a package so that ``tests.support`` imports work)."""
