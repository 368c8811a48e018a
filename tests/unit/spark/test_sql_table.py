"""spark/sql_table.py: a SQL table's OPTIONS kept in the schema Spark stores, and what PySpark's data source lookup
sees in the package (``DefaultSource``)."""

from __future__ import annotations

import importlib
import json

import pytest
from pyspark.sql.datasource import DataSource
from pyspark.sql.types import LongType, StringType, StructField, StructType

from pyspark_ducklake.exceptions import InvalidOptionError
from pyspark_ducklake.options import Entry
from pyspark_ducklake.spark.sql_table import (
    METADATA_KEY,
    is_create_table,
    merged_options,
    stored_table_options,
    table_options,
    with_table_options,
    without_table_options,
)

SCHEMA = StructType([StructField("id", LongType(), False, {"comment": "key"}), StructField("s", StringType())])


def test_default_source_is_what_pyspark_looks_up() -> None:
    # pyspark/sql/worker/lookup_data_sources.py: import_module(name), hasattr DefaultSource, a DataSource subclass
    module = importlib.import_module("pyspark_ducklake")
    assert hasattr(module, "DefaultSource")
    assert issubclass(module.DefaultSource, DataSource)
    assert module.DefaultSource.name() == "ducklake"
    assert module.DefaultSource.spark_conf == {}  # found by Spark: no session conf, options or environment only
    with pytest.raises(AttributeError):
        _ = module.NoSuchThing


def test_create_table_options_without_sparks_keys() -> None:
    given = {
        "option.table": "main.t",
        "table": "main.t",
        "option.catalog": "sqlite:///x",
        "catalog": "sqlite:///x",
        "provider": "ducklake",
        "owner": "root",
        "location": "file:/somewhere",
        "option.datapath": "/d",
    }
    assert is_create_table(given)
    assert not is_create_table({"table": "main.t"})
    assert table_options(given) == {"table": "main.t", "catalog": "sqlite:///x", "datapath": "/d"}


def test_options_round_trip_through_the_schema() -> None:
    options = {"table": "main.t", "catalog": "postgresql://u@h/db", "snapshot": "3"}
    stored = with_table_options(SCHEMA, options)
    assert stored.fields[0].metadata["comment"] == "key"  # other metadata kept
    assert json.loads(stored.fields[0].metadata[METADATA_KEY]) == options
    # Spark stores the schema as JSON and hands it back
    again = StructType.fromJson(json.loads(stored.json()))
    assert stored_table_options(again) == options
    assert without_table_options(again) == SCHEMA
    assert stored_table_options(SCHEMA) is None


@pytest.mark.parametrize("bad", ["{not json", "[1, 2]"])
def test_damaged_metadata_is_a_typed_error(bad: str) -> None:
    schema = StructType([StructField("id", LongType(), True, {METADATA_KEY: bad})])
    with pytest.raises(InvalidOptionError, match="id"):
        stored_table_options(schema)


def test_merged_options_query_wins_and_entry_filters() -> None:
    stored = {"table": "main.t", "catalog": "c", "data_inlining_row_limit": "5", "snapshot": "2"}
    assert merged_options(stored, {"snapshot": "7"}, Entry.READ) == {"table": "main.t", "catalog": "c", "snapshot": "7"}
    # a write-only option stays out of reads, a read-only one out of writes
    assert merged_options(stored, {}, Entry.WRITE) == {
        "table": "main.t",
        "catalog": "c",
        "data_inlining_row_limit": "5",
    }
