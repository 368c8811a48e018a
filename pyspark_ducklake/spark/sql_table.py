"""A Spark SQL table over a DuckLake table (``CREATE TABLE events USING ducklake OPTIONS (table 'main.events')``).

PySpark 4.3 hands a Python data source the table's ``OPTIONS`` only once: when ``CREATE TABLE`` without a column list
asks it for the schema (with Spark's own keys beside them: ``provider``, ``owner``, ``location``, and each option
again as ``option.<name>``). Later ``SELECT`` / ``INSERT INTO`` / ``INSERT OVERWRITE`` create the data source with the
query's options only (``SELECT * FROM events WITH ('snapshot' = '3')``), but with the schema Spark stored for the
table. So the schema carries the table's options: :func:`with_table_options` puts them in the first field's metadata
at ``CREATE TABLE``, and :func:`stored_table_options` reads them back at every read and write.

``CREATE TABLE ... AS SELECT`` and ``CREATE TABLE t (<columns>) USING ducklake`` never ask for the schema, so Spark
stores none of this and the data source later sees no table at all: :data:`NO_TABLE_HINT` says what to do instead.
Nor does an ``INSERT INTO`` whose first selected column already has the table's first column's name and type: Spark
then writes the query's column as it is, without the stored field's metadata (a renamed or cast column gets it).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from pyspark.sql.types import StructField, StructType

from pyspark_ducklake.exceptions import InvalidOptionError
from pyspark_ducklake.options import Entry, lookup

# The field-metadata key holding a SQL table's options (JSON of the options given to CREATE TABLE).
METADATA_KEY = "ducklake.table_options"
# Keys Spark's CREATE TABLE adds to the options it passes (each OPTIONS entry comes again as `option.<name>`).
SPARK_TABLE_KEYS = frozenset({"provider", "owner", "location", "comment", "external", "is_managed_location"})
OPTION_PREFIX = "option."

NO_TABLE_HINT = (
    "no DuckLake table given. In the DataFrame API name it in load('main.events') / save('main.events') or "
    "option('table', 'main.events'). In SQL, PySpark 4.3 passes a Python data source no OPTIONS for CREATE TABLE "
    "... AS SELECT or for a table created with a column list, so those cannot work. Instead of CREATE TABLE ... AS "
    "SELECT: create the DuckLake table from the query with the DataFrame API, spark.sql('SELECT ...').write"
    ".format('ducklake').mode('append').option('catalog', '...').save('main.events') (or "
    "pyspark_ducklake.write_table), then CREATE TABLE events USING ducklake OPTIONS (table 'main.events', catalog "
    "'...') without columns, and INSERT INTO events SELECT ... for more rows. An INSERT INTO whose SELECT gives the "
    "table's first column under its own name and type arrives without the table's options too (Spark drops the "
    "column metadata that carries them): rename that column in the SELECT (SELECT id AS id_, ...), or use CREATE "
    "TEMPORARY VIEW events USING ducklake OPTIONS (...), which keeps its options"
)


def is_create_table(options: Mapping[str, Any]) -> bool:
    """Whether ``options`` are those Spark's ``CREATE TABLE ... USING ducklake`` passes (it adds ``provider``)."""
    return any(str(k).lower() == "provider" for k in options)


def table_options(options: Mapping[str, Any]) -> dict[str, str]:
    """The options a ``CREATE TABLE`` was given, without the keys Spark adds (``provider``, ``owner``, ...,
    ``option.<name>`` copies)."""
    out: dict[str, str] = {}
    for key, value in options.items():
        lower = str(key).lower()
        if lower in SPARK_TABLE_KEYS:
            continue
        if lower.startswith(OPTION_PREFIX):
            out.setdefault(lower[len(OPTION_PREFIX) :], str(value))
            continue
        out[lower] = str(value)
    return out


def with_table_options(schema: StructType, options: Mapping[str, str]) -> StructType:
    """``schema`` with ``options`` in its first field's metadata, where Spark keeps them for the table."""
    if not schema.fields:
        return schema
    first, *rest = schema.fields
    metadata = {**(first.metadata or {}), METADATA_KEY: json.dumps(dict(sorted(options.items())))}
    return StructType([StructField(first.name, first.dataType, first.nullable, metadata), *rest])


def stored_table_options(schema: StructType) -> dict[str, str] | None:
    """The options a SQL table was created with, from the schema Spark stored for it (None: not a SQL table).

    Raises:
        InvalidOptionError: the metadata is not what :func:`with_table_options` writes.
    """
    for field in schema.fields:
        text = (field.metadata or {}).get(METADATA_KEY)
        if text is None:
            continue
        try:
            stored = json.loads(text)
        except ValueError as e:
            raise InvalidOptionError(f"the field metadata {METADATA_KEY!r} of column {field.name!r} is not JSON") from e
        if not isinstance(stored, dict):
            raise InvalidOptionError(f"the field metadata {METADATA_KEY!r} of column {field.name!r} is not an object")
        return {str(k): str(v) for k, v in stored.items()}
    return None


def without_table_options(schema: StructType) -> StructType:
    """``schema`` without the metadata :func:`with_table_options` added."""
    fields = []
    for field in schema.fields:
        metadata = {k: v for k, v in (field.metadata or {}).items() if k != METADATA_KEY}
        fields.append(StructField(field.name, field.dataType, field.nullable, metadata))
    return StructType(fields)


def applies(key: str, entry: Entry) -> bool:
    """Whether a stored table option applies to ``entry`` (a table's write options do not stop its reads)."""
    try:
        lookup(key, entry)
    except InvalidOptionError:
        return False
    return True


def merged_options(stored: Mapping[str, str], given: Mapping[str, Any], entry: Entry) -> dict[str, Any]:
    """A SQL table's stored options that apply to ``entry``, overridden by those the query gave."""
    given_lower = {str(k).lower() for k in given}
    out: dict[str, Any] = {k: v for k, v in stored.items() if k.lower() not in given_lower and applies(k, entry)}
    out.update({str(k).lower(): v for k, v in given.items()})
    return out


__all__ = [
    "METADATA_KEY",
    "NO_TABLE_HINT",
    "SPARK_TABLE_KEYS",
    "applies",
    "is_create_table",
    "merged_options",
    "stored_table_options",
    "table_options",
    "with_table_options",
    "without_table_options",
]
