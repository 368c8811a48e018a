"""The bad-input cases: what each gets (typed error, the advice its message gives) and proof nothing was written.

``CASES`` is the single list behind the docs' "Bad input" table (``python -m tests.support.bad_inputs`` prints
it; ``--write`` puts it between the ``bad-input-table`` markers, in docs/errors.md). Tests prove each case with
``expect_bad_input("<id>", ...)``: the block must raise the case's error (directly, or wrapped by Spark), the message
must contain the advice, and the catalog's snapshot count and the listing (names, sizes) of the watched folders and
files must be unchanged. ``tests/unit/test_bad_input.py`` checks that the docs page matches and that every case is
proven by some test.
"""

from __future__ import annotations

import hashlib
import os
import re
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

import pyspark_ducklake as pdl
from pyspark_ducklake import exceptions as E
from tests.support import doc_blocks
from tests.support.catalogs import REPO_ROOT

BLOCK = "bad-input-table"  # its markers: docs/errors.md, "Bad input" (tests.support.doc_blocks finds them)


@dataclass(frozen=True)
class BadInput:
    id: str
    what: str  # the bad input, as the table's first column says it
    error: type[E.DuckLakeError] | None  # None: accepted as it is
    advice: str  # what the message tells the user to do (table column)
    match: str | None = None  # the part of the message that proves it; default: ``advice``

    @property
    def expected_text(self) -> str:
        return self.match or self.advice


CASES: tuple[BadInput, ...] = (
    # --- where the lake is
    BadInput(
        "catalog-unreachable",
        "catalog URL of a server that is not there",
        E.CatalogUnreachableError,
        "check the URL, credentials, that the database server is running",
    ),
    BadInput(
        "catalog-credentials",
        "PostgreSQL catalog with a wrong user or database name",
        E.CatalogUnreachableError,
        "check the URL, credentials",
    ),
    BadInput(
        "catalog-folder-missing",
        "SQLite catalog in a folder that does not exist",
        E.CatalogUnreachableError,
        "check that the folder exists",
        match="that the folder exists",
    ),
    BadInput(
        "catalog-not-ducklake",
        "a database that holds other tables, not a DuckLake",
        E.NotADuckLakeCatalogError,
        "point the catalog at an empty database or an existing DuckLake",
    ),
    BadInput(
        "catalog-other-version",
        "a DuckLake catalog of a format version other than 1.0, 1.1 and 1.1-dev1 (0.3, 1.2, 2.0)",
        E.UnsupportedSpecVersionError,
        "this pyspark-ducklake reads and writes 1.0, 1.1, 1.1-dev1",
    ),
    BadInput(
        "format-version-unknown",
        "`format_version` other than '1.0' or '1.1' (`'2.0'`, `'1.1-dev1'`, `1.1` as a number)",
        E.InvalidOptionError,
        "use one of '1.0', '1.1'",
        match="'1.0', '1.1'",
    ),
    BadInput(
        "format-version-mismatch",
        "`format_version` that differs from an existing catalog's (1.0 asked of a 1.1 lake, or 1.1 of a 1.0 one)",
        E.InvalidOptionError,
        "leave the option out to follow the catalog (or migrate it with Lake.migrate('1.1'))",
        match="leave the option out to follow the catalog",
    ),
    BadInput(
        "migrate-collision",
        "`migrate('1.1')` of a lake whose inlined table has a column named like a 1.1 system column "
        "(`_ducklake_row_id`), or a migration the database refuses",
        E.MigrationError,
        "rename the column and flush the table's inlined data before migrating",
    ),
    BadInput(
        "duckdb-storage-version",
        "`duckdb_storage_version` that is not a DuckDB version (`'v1.5'`, `1`) or one the installed DuckDB cannot "
        "write (`'v9.9.9'`)",
        E.InvalidOptionError,
        "a DuckDB version such as 'v1.5.0' (DuckDB's storage_compatibility_version) or 'latest'",
        match="duckdb_storage_version",
    ),
    BadInput(
        "catalog-new-without-data-path",
        "a new (empty) catalog without a data path",
        E.InvalidOptionError,
        "pass data_path",
    ),
    BadInput(
        "catalog-duckdb-locked",
        "a DuckDB-file catalog (`ducklake:lake.ducklake`) that a DuckDB session holds (another process, or this one)",
        E.CatalogLockedError,
        "detach it there, or use a SQLite/PostgreSQL catalog (another process: after a 5 s wait, naming its PID)",
        match="Detach it there",
    ),
    BadInput(
        "catalog-duckdb-extra-missing",
        "a DuckDB-file catalog without the `[duckdb]` extra installed",
        E.NotInstalledError,
        "pip install 'pyspark-ducklake[duckdb]'",
    ),
    BadInput(
        "catalog-other-backend",
        "another database backend (`mysql://…`)",
        E.InvalidOptionError,
        "DuckLake catalogs here are sqlite, postgresql or a DuckDB file",
    ),
    BadInput(
        "catalog-in-memory",
        "in-memory SQLite (`sqlite://`)",
        E.InvalidOptionError,
        "give a file, e.g. 'sqlite:///lake.sqlite'",
    ),
    BadInput(
        "catalog-driver-missing",
        "a PostgreSQL catalog without its driver installed",
        E.NotInstalledError,
        "pip install 'pyspark-ducklake[postgres]'",
    ),
    BadInput(
        "data-path-mismatch",
        "a data path other than the one the catalog records",
        E.InvalidOptionError,
        "omit data_path, or move the catalog with its files",
    ),
    BadInput(
        "data-path-unwritable",
        "a data path the process cannot write (Python append, Spark stream)",
        E.DataFileError,
        "check that the data path is reachable and writable",
    ),
    BadInput(
        "spark-no-catalog",
        "Spark read, write or sink with no catalog anywhere",
        E.LakeNotConfiguredError,
        "pass .option('catalog', …), or set spark.ducklake.catalog and call register(spark), or DUCKLAKE_CATALOG",
        match="or set the Spark conf spark.ducklake.catalog and call pyspark_ducklake.register(spark)",
    ),
    BadInput(
        "spark-no-table",
        "Spark `load()` / `save()` without a table, or a SQL table made by CTAS or with a column list",
        E.InvalidOptionError,
        "no DuckLake table given. In the DataFrame API name it in load('main.events')",
    ),
    BadInput(
        "spark-partition-by-differs",
        "Spark `partitionBy` other than the table's partitioning",
        E.InvalidOptionError,
        "change it with lake.set_partitioning() first",
    ),
    # --- tables and data
    BadInput(
        "unknown-table",
        "append to, or read, a table that does not exist",
        E.NoSuchTableError,
        "create it with lake.create_table()",
    ),
    BadInput(
        "unknown-schema", "a schema that does not exist", E.NoSuchSchemaError, "create it with lake.create_schema"
    ),
    BadInput(
        "schema-mismatch-type",
        "data whose column type does not convert losslessly (string into BIGINT)",
        E.SchemaMismatchError,
        "cast the data or change the column type",
    ),
    BadInput(
        "schema-mismatch-column",
        "data with a column the table lacks (Python, Spark write)",
        E.SchemaMismatchError,
        "add it first with lake.add_column()",
    ),
    BadInput(
        "schema-mismatch-stream",
        "a stream with a column the table lacks",
        E.SchemaMismatchError,
        "pass merge_schema=True to add new columns, or select only the table's columns",
    ),
    BadInput("not-null", "NULLs into a NOT NULL column", E.SchemaMismatchError, "drop or fill those rows first"),
    BadInput(
        "unsupported-arrow-type",
        "an Arrow type DuckLake cannot hold (duration, decimal256(60))",
        E.UnsupportedTypeError,
        "cast it to a supported type first",
    ),
    BadInput("unsupported-spark-type", "a Spark interval column", E.UnsupportedTypeError, "cast it first"),
    BadInput(
        "table-exists",
        "creating a table that exists (a schema: `SchemaAlreadyExistsError`)",
        E.TableAlreadyExistsError,
        "pass exist_ok=True to use it, or choose another name",
    ),
    BadInput(
        "bad-identifier",
        "'a.b.c', an empty name, duplicate column names",
        E.InvalidIdentifierError,
        "use 'schema.table', or a (schema, table) tuple for names with dots",
        match="(schema, table) tuple for names with dots",
    ),
    BadInput(
        "unknown-column",
        "an unknown column in `columns=`, a filter, a delete or filtered overwrite, a rename",
        E.NoSuchColumnError,
        "names the table's columns",
        match="['id', 'name'",
    ),
    BadInput(
        "bad-filter",
        "a `scan`/`delete`/`overwrite` filter with an unknown operator or a malformed tuple",
        E.InvalidOptionError,
        "give (column, operator, value) tuples",
    ),
    BadInput(
        "narrowing-type-change",
        "set_column_type that loses information",
        E.SchemaMismatchError,
        "only lossless promotions are allowed",
    ),
    BadInput(
        "unknown-snapshot",
        "a snapshot id that does not exist, a time before the first",
        E.NoSuchSnapshotError,
        "list them with lake.snapshots()",
    ),
    BadInput(
        "snapshot-not-integer",
        "a snapshot id that is not an integer: `scan(snapshot=2.7)` (it read snapshot 2), `True`, `'3'` where Python "
        "takes ints (`scan`, `table`, `list_files`, `table_changes`, `expire_snapshots(versions=)`, `read_table`); "
        "Spark's `versionAsOf`, `startingSnapshot`, `endingSnapshot` of `'2.7'` or `'true'` (`'3'` is fine there); "
        "`changes t 2.7` on the command line",
        E.InvalidOptionError,
        "give a whole number such as 3 (list them with lake.snapshots())",
        match="as a snapshot id",
    ),
    BadInput(
        "catalog-value-corrupt",
        "a catalog value that does not parse (a hand-edited or corrupt catalog): an inlined BIGINT holding `'abc'`, a "
        "data file's `record_count` of `'x'`, a snapshot's `next_file_id` NULL, a column default that is no value of "
        "its type, a table's min/max statistics that do not parse (on a write); on any path: scan, change feed, "
        "flush, append, Spark",
        E.CorruptCatalogError,
        "names the catalog table, column, value and snapshot: restore the catalog from a backup, or correct that value",
        match="restore it from a backup, or correct that value",
    ),
    # --- values (the inlined-data codec and what it uses)
    BadInput(
        "invalid-utf8",
        "a string column holding bytes that are not UTF-8 (inlined or Parquet)",
        E.InvalidStringError,
        "clean or decode those strings first",
    ),
    BadInput(
        "extra-info-not-json",
        "`extra_info` that is not JSON (a datetime, a set, NaN, a string that does not parse)",
        E.InvalidOptionError,
        "pass a dict of JSON values or a JSON string",
    ),
    BadInput(
        "inlined-nested-not-expressible",
        "few rows whose nested strings hold `]`, `}`, quotes or backslashes; a NUL (PostgreSQL) or a JSON list "
        "element DuckDB would rewrite",
        None,
        "inlined as text DuckDB reads back exactly; what no text can hold goes to Parquet instead",
    ),
    # --- reads (spark-read): column names DuckLake reserves
    BadInput(
        "reserved-column-name",
        "column named `row_id`, `begin_snapshot`, `end_snapshot`, `_ducklake_internal_row_id` or "
        "`_ducklake_internal_snapshot_id` (any case) in `create_table`, `add_column` or `rename_column`, a table a "
        "Spark write or the sink creates, or a column the sink adds, while data inlining is on",
        E.InvalidIdentifierError,
        "rename the column, or connect with data_inlining_row_limit=0",
    ),
    BadInput(
        "filter-type-mismatch",
        "`scan`, `delete` or `overwrite(filter=)` filter pyarrow cannot compare with the column (a decimal column "
        "against an `int`, a naive datetime against a timestamptz)",
        E.InvalidOptionError,
        "give values of the column's type",
    ),
    # --- options
    BadInput(
        "option-unparseable",
        "option values that do not parse ('ten' retries, 'fast' backoff)",
        E.InvalidOptionError,
        "names the option and the value it could not parse",
        match="could not parse option",
    ),
    BadInput(
        "option-out-of-range",
        "option values out of range (negative retries, backoff < 1 or NaN, flush_rows=0)",
        E.InvalidOptionError,
        "must be >= …",
        match="must be",
    ),
    BadInput(
        "option-conflict",
        "snapshot and timestamp together",
        E.InvalidOptionError,
        "pass either snapshot or timestamp, not both",
    ),
    BadInput(
        "partition-transform",
        "an unknown partition transform (`truncate(4, k)`), year() of a number",
        E.InvalidOptionError,
        "lists the transforms there are: identity, year, month, day, hour, bucket, epoch_year, epoch_month, "
        "epoch_day, epoch_hour",
        match="is not one of identity, year, month, day, hour, bucket, epoch_year, epoch_month, epoch_day, epoch_hour",
    ),
    BadInput(
        "partition-bucket",
        "a malformed bucket key (`bucket(id)`, `bucket(0, id)`, `bucket(2147483648, id)`, `bucket(x, id)`), or "
        "`bucket()` of a nested, VARIANT or GEOMETRY column",
        E.InvalidOptionError,
        "write bucket(N, col) with N from 1 to 2147483647, a primitive column",
        match="as in bucket(16, id)",
    ),
    BadInput(
        "partition-epoch-on-1-0",
        "an `epoch_year/month/day/hour` partition key on a DuckLake 1.0 catalog (`set_partitioning`, `create_table`, "
        "Spark `partitionBy`, the sink's `partition_by`)",
        E.FormatVersionError,
        "migrate the catalog first with lake.migrate('1.1'), or use the calendar transform",
        match="migrate the catalog first with lake.migrate('1.1')",
    ),
    BadInput(
        "partition-transform-stored-unknown",
        "a write into a table partitioned by a transform a newer DuckDB stored (`truncate(4)`)",
        E.InvalidOptionError,
        "write to this table with the DuckDB that partitioned it, or repartition it",
    ),
    # --- options: one registry, one parser per kind (unknown names, strings, NaN), catalog spellings
    BadInput(
        "option-unknown",
        "an unknown or misspelt option (`versionAsOff`, `endingTimestmp`, `creat_table`, `spark.ducklake.datapth`, "
        "`connect(max_retry_cont=3)`)",
        E.InvalidOptionError,
        "did you mean 'versionAsOf'? (names the closest valid option)",
        match="did you mean",
    ),
    BadInput(
        "option-wrong-entry",
        "an option of another entry point (`maxSnapshotsPerTrigger` on a batch read, `snapshot` on a write)",
        E.InvalidOptionError,
        "says where the option applies",
        match="does not apply to",
    ),
    BadInput(
        "option-twice",
        "one option under two spellings (`snapshot` and `versionAsOf`)",
        E.InvalidOptionError,
        "give only one of them",
    ),
    BadInput(
        "option-not-finite",
        "NaN or infinite numbers (`retry_backoff=nan`, `flush_interval=inf`, `reconnect_timeout='nan'`)",
        E.InvalidOptionError,
        "must be a finite number",
        match="must be a finite",
    ),
    BadInput(
        "option-bool-strings",
        'booleans as strings (`create_table="false"`, `failOnDataLoss="FALSE"`, `merge_schema="no"`)',
        None,
        'parsed as booleans: "false" is False; anything but true/false, yes/no, on/off, 1/0 is an InvalidOptionError',
    ),
    BadInput(
        "catalog-libpq-malformed",
        "a malformed libpq string (`password=a b` unquoted, an unclosed quote)",
        E.InvalidOptionError,
        "quote values with spaces: password='a b'",
        match="libpq connection string",
    ),
    # --- checkpoints
    BadInput(
        "checkpoint-corrupt",
        "a change-feed checkpoint whose offset is garbage",
        E.InvalidOptionError,
        "use a new checkpoint location",
    ),
    BadInput(
        "checkpoint-foreign",
        "a change-feed checkpoint of another lake or table (another table of the same lake too; a table dropped and "
        "created again under the stream)",
        E.CheckpointMismatchError,
        "use a new checkpoint location",
        match="the checkpoint belongs to another lake or table; use a new checkpoint location",
    ),
    # --- what a write accepts (names, nested fields, dates, paths, encrypted lakes)
    BadInput(
        "create-case-only",
        "creating a table (or schema: `SchemaAlreadyExistsError`) whose name differs only in case from an existing one",
        E.TableAlreadyExistsError,
        "use the existing spelling, or choose another name",
        match="DuckDB's names are case-insensitive: use",
    ),
    BadInput(
        "duplicate-names",
        "two columns, or fields of one struct, differing only in case (adding or renaming to such a name: "
        "`SchemaMismatchError`)",
        E.InvalidIdentifierError,
        "give every column its own name",
    ),
    BadInput(
        "no-columns",
        "a table without columns, a struct without fields",
        E.UnsupportedTypeError,
        "give it a column (a field)",
        match="give it a",
    ),
    BadInput(
        "struct-field-unknown",
        "a struct field the table lacks (also inside a list or map), on any write path",
        E.SchemaMismatchError,
        "add it first with lake.add_column(table, ('s', 'c'), type) (a stream: merge_schema=True)",
        match="its values would be lost: add it first with lake.add_column(",
    ),
    BadInput(
        "name-case-only",
        "a column or struct field differing only in case from the table's (`ID` for `id`, `s.B` for `s.b`)",
        E.SchemaMismatchError,
        "rename it in the data to the table's spelling",
        match="differs only in case",
    ),
    BadInput(
        "date-out-of-range",
        "a date or timestamp beyond DuckDB's range (before 5877642-06-25 BC, before 290309-12-22 BC)",
        E.SchemaMismatchError,
        "DuckDB cannot hold it; correct or drop those rows",
    ),
    BadInput(
        "partition-value-too-long",
        "a partition value or key whose folder name would exceed 255 bytes (URL-encoded)",
        E.DataFileError,
        "partition by a shorter value or a transform",
    ),
    BadInput(
        "table-path-outside",
        "a catalog whose schema or table folder lies outside the data path (writes; reads still work)",
        E.DataFileError,
        "correct its path in the catalog",
    ),
    # --- encrypted lakes (#16 item 7)
    BadInput(
        "encrypted-option-mismatch",
        "`encrypted=True` (option `encrypted`) for an existing lake that is not encrypted, or `false` for an "
        "encrypted one",
        E.InvalidOptionError,
        "leave the option out to follow the catalog",
    ),
    BadInput(
        "encrypted-key-wrong",
        "an encrypted lake's file that its catalog key does not open: wrong or malformed key, corrupt or truncated "
        "file",
        E.FileDecryptionError,
        "restore the file or the catalog's encryption_key",
    ),
    BadInput(
        "encrypted-key-missing",
        "an encrypted lake's data or delete file registered without an `encryption_key`",
        E.EncryptedLakeError,
        "remove it with DuckDB or restore its key",
    ),
    BadInput(
        "encrypted-file-plain-lake",
        "an encrypted data file in a lake whose catalog does not say `encrypted`",
        E.EncryptedLakeError,
        "remove it or restore the lake's metadata",
    ),
    BadInput(
        "plain-file-encrypted-lake",
        "a plaintext file in an encrypted lake (its catalog row has a key)",
        E.EncryptedLakeError,
        "restore the encrypted file from a backup",
    ),
    # --- the attacker's pass (#14): entry points and values nobody listed
    BadInput(
        "maintenance-age",
        "a maintenance age that is negative, NaN, too large or not a time (`older_than=timedelta(hours=-1)`, "
        "`'0'`, `3600` for expire and cleanup)",
        E.InvalidOptionError,
        "names older_than and what it takes: a timedelta, '7 days', an ISO time; never negative",
        match="option older_than",
    ),
    BadInput(
        "snapshot-listing-bounds",
        "a snapshot listing's `limit` below 1 or a negative `since` (`lake.snapshots(limit=0)`, "
        "`snapshots --limit -1`, the metadata read's options)",
        E.InvalidOptionError,
        "names the option and its lower bound",
        match="must be >= ",
    ),
    BadInput(
        "retention-interval",
        "a retention setting that is not an interval (`set_retention(expire_older_than='7')`, a sink's "
        "`expire_older_than='soon'`)",
        E.InvalidOptionError,
        "names the option and gives an example interval such as '2 days'; nothing is set",
        match="as an interval (e.g. '2 days'",
    ),
    BadInput(
        "feed-start-beyond",
        "a change-feed `startingSnapshot` beyond the newest snapshot",
        E.InvalidOptionError,
        "give an existing snapshot id, 'earliest' or 'latest'",
    ),
    BadInput(
        "feed-table-gone",
        "the streamed table dropped or renamed (by DuckDB) under a running change feed",
        E.NoSuchTableError,
        "if it was renamed, restart the query with its new name (the checkpoint stays valid for it)",
    ),
    BadInput(
        "view-not-table",
        "a DuckDB view where a table is expected (reads, writes, the sink, the change feed)",
        E.NotATableError,
        "query the view with DuckDB, or read the tables it selects from",
    ),
    # --- followup (#14, #21): a table created over a view's name
    BadInput(
        "create-over-view",
        "`create_table` (or a Spark write or the sink creating a table) with the exact name of a DuckDB view, "
        "`exist_ok=True` too",
        E.NotATableError,
        "choose another name for the table, or drop the view with DuckDB",
    ),
    # --- types (#16 items 3 and 4): a column we cannot read blocks only reads that select it
    BadInput(
        "unreadable-type",
        "a read selecting a column of a DuckLake type this library cannot read (one a newer DuckLake adds); "
        "`spark.read.format('ducklake')` selects every column unless its `columns` option names some",
        E.UnsupportedTypeError,
        "select the other columns: use the columns option (spark.read.format('ducklake').option('columns', 'a, b')) "
        "or read_table",
    ),
    BadInput(
        "unknown-read-column",
        "the data source's `columns` option naming a column the table lacks",
        E.NoSuchColumnError,
        "name a column of the table (the message names the closest)",
        match="did you mean",
    ),
    BadInput(
        "spark-time-2400",
        "a Spark read of a TIME value `24:00:00` (DuckDB allows it; Spark's TIME cannot hold it)",
        E.UnsupportedTypeError,
        "read the other columns, or read it in Python (lake.scan) or with DuckDB",
    ),
    BadInput(
        "time-ns-parquet",
        "rows of a table with a TIME_NS column that would go to Parquet (an append over data_inlining_row_limit rows, "
        "a flush naming the table, a merge); DuckDB cannot read TIME_NS from Parquet",
        E.UnsupportedTypeError,
        "append at most data_inlining_row_limit rows at a time",
    ),
    BadInput(
        "spark-geography-write",
        "a Spark `geography` column written (also nested)",
        E.UnsupportedTypeError,
        "st_asbinary(col) for WKB in a BLOB column",
    ),
    # --- GEOMETRY (#16 item 3)
    BadInput(
        "geometry-malformed",
        "GEOMETRY values that are not WKB DuckDB reads (truncated, trailing bytes, an unknown type or byte order, a "
        "MULTIPOINT of lines, parts whose Z/M differ from their parent's), top-level or nested",
        E.InvalidGeometryError,
        "nothing was written",
    ),
    BadInput(
        "geometry-srid",
        "a geometry with a non-zero SRID (Spark `geometry(4326)`, a `struct<srid, wkb>` value, an EWKB SRID) or a "
        "`geoarrow.wkb` type with a CRS",
        E.UnsupportedTypeError,
        "DuckLake keeps no SRID or CRS",
    ),
    BadInput(
        "geometry-not-wkb",
        "data of another type for a GEOMETRY column (e.g. WKT strings)",
        E.SchemaMismatchError,
        "cast the data or change the column type",
    ),
    BadInput(
        "hugeint-39-digits",
        "a read selecting a HUGEINT/UHUGEINT column holding a value beyond 38 digits (DuckDB's extremes)",
        E.UnsupportedTypeError,
        "read the other columns",
        match="out of the columns you select",
    ),
    # --- VARIANT (#16 item 2)
    BadInput(
        "variant-malformed",
        "VARIANT values whose bytes are not a valid Parquet variant (truncated, a field id beyond the metadata, "
        "trailing bytes, another metadata version)",
        E.InvalidVariantError,
        "nothing was written",
    ),
    BadInput(
        "variant-not-variant",
        "data for a VARIANT column that is not the variant struct (e.g. a JSON string)",
        E.InvalidVariantError,
        "give struct<value: binary, metadata: binary>",
    ),
    BadInput(
        "variant-nested",
        "rows for a VARIANT nested in a struct, list or map (DuckDB 1.5.5 cannot write those to Parquet either)",
        E.UnsupportedTypeError,
        "make the VARIANT a top-level column",
    ),
    BadInput(
        "variant-nested-spark",
        "a Spark DataFrame with a VARIANT inside a struct, array or map, creating a table",
        E.UnsupportedTypeError,
        "DuckDB 1.5.5 writes VARIANT only as a top-level column",
    ),
    # --- deletion vectors (#16 item 5): DuckDB's puffin delete files, read and written
    BadInput(
        "dv-corrupt",
        "a deletion vector (`format='puffin'` delete file) truncated, with a wrong length, magic, CRC or bitmap, or "
        "deleting positions beyond its data file's rows",
        E.DeletionVectorError,
        "restore the file or time-travel to a snapshot before the delete that wrote it",
    ),
    BadInput(
        "puffin-footer-lies",
        "a DuckLake 1.1 puffin delete file of several deletion vectors whose footer lies (magic, flags, payload size, "
        "a blob's offset/length, type or cardinality, a `ducklake-snapshot-id` that is not a whole number)",
        E.DeletionVectorError,
        "restore the file or time-travel to a snapshot before the delete that wrote it",
    ),
    BadInput(
        "dv-history-on-1-0",
        "a deletion vector of several snapshots (DuckLake 1.1's puffin history) forced on a 1.0 catalog, which "
        "DuckDB 1.5 reads",
        E.FormatVersionError,
        "migrate the lake to 1.1",
    ),
    BadInput(
        "row-group-count-lies",
        "a DuckLake 1.1 data file or Parquet delete file whose catalog `row_group_count` (not NULL) differs from its "
        "footer's number of row groups, on any read (scan, data source, change feed, maintenance)",
        E.RowGroupCountError,
        "restore the file the catalog describes, or time-travel to a snapshot that does not need it",
    ),
    BadInput(
        "delete-format-unknown",
        "a delete file row whose `format` is neither `parquet` nor `puffin` (any case)",
        E.DataFileError,
        "read the table with a matching DuckDB",
        match="Unknown delete file format",
    ),
    BadInput(
        "delete-file-outside",
        "a delete file row pointing outside the data path and its table's folder (`../..`, an absolute path)",
        E.DataFileError,
        "correct the row's path in ducklake_delete_file",
    ),
    BadInput(
        "dv-option-not-bool",
        "a persisted `write_deletion_vectors` option that is not a boolean (`'maybe'`), on a delete",
        E.InvalidOptionError,
        "set it to true or false with DuckDB",
    ),
    # --- added files (#16 item 1): Lake.add_files / add_files(spark, ...) with DuckDB's checks
    BadInput(
        "add-files-extra-column",
        "add_files() of a file with a column the table lacks",
        E.SchemaMismatchError,
        "pass ignore_extra_columns=True to add the file anyway",
    ),
    BadInput(
        "add-files-missing-column",
        "add_files() of a file lacking a table column",
        E.SchemaMismatchError,
        "pass allow_missing=True to add it anyway",
    ),
    BadInput(
        "add-files-type",
        "add_files() of a column whose type the table's does not accept (int64 into INTEGER, as DuckDB)",
        E.SchemaMismatchError,
        "cast the column when writing the file, or change the table's column type",
    ),
    BadInput(
        "add-files-partition-missing",
        "add_files() into a partitioned table of a file whose path has no partition folder, or a `bucket=`/`year=` "
        "folder whose value does not fit (`bucket=7` for `bucket(4, id)`, `year=x`)",
        E.SchemaMismatchError,
        "invalid partition value for the table configuration",
    ),
    BadInput(
        "add-files-hive-value",
        "add_files() of a path whose `k=value` folder does not fit column k's type",
        E.SchemaMismatchError,
        "rename the folder, pass hive_partitioning=False, or change the column type",
    ),
    BadInput(
        "add-files-not-parquet",
        "add_files() of a file that is not Parquet (or is encrypted)",
        E.DataFileError,
        "add plain Parquet files",
    ),
    BadInput(
        "add-files-flag-string",
        'add_files(..., hive_partitioning="false")',
        E.InvalidOptionError,
        "must be True or False",
    ),
    BadInput(
        "add-files-glob-empty",
        "add_files() of a glob that matches no file",
        E.InvalidOptionError,
        "matches no file; check the path",
    ),
    BadInput(
        "add-files-encrypted-lake",
        "add_files() into an encrypted lake (DuckDB registers the files, then cannot read them)",
        E.EncryptedLakeError,
        "append the files' rows with lake.append instead",
    ),
    BadInput(
        "added-file-changed",
        "reading an added file that lost a column after it was registered",
        E.DataFileError,
        "restore the file as it was, or remove it from the table",
    ),
    # --- object stores (#16 item 9): gs://, az:// / abfss://
    BadInput(
        "store-option-misspelt",
        "misspelt `ducklake.gcs.*` / `ducklake.azure.*` option (or `spark.ducklake.<store>.*` conf)",
        E.InvalidOptionError,
        "did you mean 'ducklake.gcs.endpoint_url'?",
    ),
    BadInput(
        "store-extra-missing",
        "`gs://` / `az://` / `abfss://` data path without gcsfs / adlfs installed",
        E.NotInstalledError,
        "pip install 'pyspark-ducklake[gcs]'",
    ),
    # --- upserts and updates (#17)
    BadInput(
        "upsert-null-key",
        "`lake.upsert` rows with NULL in a key column",
        E.NullKeyError,
        "fill or drop those rows",
    ),
    BadInput(
        "upsert-duplicate-key",
        "`lake.upsert` rows holding one key twice, without `order_by`",
        E.DuplicateKeyError,
        "pass order_by= to keep the last of each",
    ),
    BadInput(
        "upsert-key-missing",
        "`lake.upsert(on=[...])` naming a column the table or the data lacks (`ID` for `id`)",
        E.NoSuchColumnError,
        "did you mean",
    ),
    BadInput(
        "upsert-key-nested",
        "`lake.upsert` keyed on a list, struct or map column",
        E.UnsupportedTypeError,
        "keys must be of a primitive type",
    ),
    BadInput(
        "upsert-delete-not-boolean",
        "`delete_column` of strings (`'false'`) or numbers",
        E.InvalidOptionError,
        "must be boolean (true deletes the key)",
    ),
    BadInput(
        "upsert-delete-null",
        "`delete_column` holding NULL",
        E.InvalidOptionError,
        "say true or false for each",
    ),
    BadInput(
        "txn-half",
        "`txn_app_id` without `txn_version` (or the reverse), or a negative version",
        E.InvalidOptionError,
        "pass both or neither",
    ),
    BadInput(
        "sink-delete-when-not-boolean",
        '`ducklake_sink(delete_when=...)` that is not boolean (`"op"`, `"lsn + 1"`)',
        E.InvalidOptionError,
        "must be a boolean expression (true deletes the key)",
    ),
    BadInput(
        "sink-delete-when-invalid",
        "`ducklake_sink(delete_when=...)` that does not parse or names a column the batch lacks",
        E.InvalidOptionError,
        "is not a Spark SQL expression over the micro-batch's columns",
    ),
    BadInput(
        "sink-order-by-missing",
        "`ducklake_sink(order_by=...)` or `upsert_on` (`orderBy`, `upsertOn` of `writeStream`) naming a column the "
        "micro-batch lacks",
        E.NoSuchColumnError,
        "did you mean",
    ),
    BadInput(
        "sink-upsert-option-alone",
        "`ducklake_sink(delete_when=...)` or `order_by` without `upsert_on`",
        E.InvalidOptionError,
        "give upsert_on (the key columns) too",
    ),
    BadInput(
        "delete-when-constant",
        "`delete_when`/`deleteWhen` given as `'true'`/`'false'` (a constant, not a condition)",
        E.InvalidOptionError,
        "leave it out to delete nothing",
    ),
    BadInput(
        "ws-delete-when-subset",
        "`writeStream` option `deleteWhen` outside the subset it evaluates (a function, subquery, arithmetic, `LIKE`, "
        "a string compared with a number) or naming a column the stream lacks",
        E.InvalidOptionError,
        "use foreachBatch(ducklake_sink(..., delete_when=...)) for any other Spark SQL expression",
        match="use foreachBatch(ducklake_sink(..., delete_when=...))",
    ),
    BadInput(
        "ws-upsert-option-alone",
        "`writeStream` option `deleteWhen` or `orderBy` without `upsertOn`",
        E.InvalidOptionError,
        "give upsertOn (the key columns) too",
    ),
    BadInput(
        "write-txn-half",
        "`df.write` / `write_table` with `txnAppId` but no `txnVersion` (or the reverse), a negative or "
        'non-integer version, or `"false"`/`""` as a value',
        E.InvalidOptionError,
        "give both or neither, `txnVersion` an integer ≥ 0, `txnAppId` a name",
        match="txn",
    ),
    BadInput(
        "update-unknown-column",
        "`lake.update(set={...})` naming a column the table lacks",
        E.NoSuchColumnError,
        "did you mean",
    ),
    BadInput(
        "drop-schema-not-empty",
        "`lake.drop_schema` of a schema holding tables, without `cascade`",
        E.InvalidIdentifierError,
        "pass cascade=True",
    ),
    # --- sorted tables and rewrite_data_files (#33 item 4)
    BadInput(
        "sort-key-expression",
        "`lake.set_sort_order` with a key that is not a column (`'lower(b)'`, `'s.x'`, `'a DESCENDING'`)",
        E.InvalidOptionError,
        "use 'col [ASC|DESC] [NULLS FIRST|NULLS LAST]' with a column name",
    ),
    BadInput(
        "sort-key-unknown-column",
        "`lake.set_sort_order` naming a column the table lacks",
        E.NoSuchColumnError,
        "the message lists the table's columns",
        match="(columns: [",
    ),
    BadInput(
        "sort-order-unsupported",
        "a write, flush or compaction of a table DuckDB sorted by an expression (`SET SORTED BY (lower(b))`), or a "
        "sort key of a VARIANT, GEOMETRY or TIMETZ column",
        E.UnsupportedSortOrderError,
        "sort it by columns (Lake.set_sort_order) or reset its sort order, else write to it with DuckDB",
    ),
    BadInput(
        "drop-sorted-column",
        "`lake.drop_column` of a column the table is sorted by",
        E.SchemaMismatchError,
        "reset or change the sort order (Lake.set_sort_order) to drop it",
    ),
    BadInput(
        "rewrite-delete-threshold",
        "`rewrite_data_files(delete_threshold=...)` (or the catalog's `rewrite_delete_threshold`) outside 0..1 or "
        "not a number",
        E.InvalidOptionError,
        "must be between 0 and 1",
    ),
    # --- accepted
    BadInput(
        "column-name-too-long-for-catalog",
        "a column name longer than the catalog database keeps as an identifier (PostgreSQL: 63 bytes of UTF-8, e.g. "
        "100 characters or 40 `é`), at create, `add_column` or `rename_column`",
        None,
        "as DuckDB: the table is never inlined (each column of an inlined-data table is an identifier PostgreSQL would "
        "cut); its rows go to Parquet",
    ),
    BadInput(
        "name-too-long-for-folder",
        "a schema or table name whose folder name would exceed 255 bytes",
        None,
        "its folder is cut to 238 characters plus a hash of the name (DuckDB's own such table fails every write); the "
        "catalog records it, DuckDB reads and writes it",
    ),
    BadInput(
        "file-stats-corrupt",
        "a data file's min/max statistics (`ducklake_file_column_stats`) that do not parse",
        None,
        "ignored, as DuckDB ignores them: statistics are hints, the file is read rather than pruned",
    ),
    BadInput(
        "hostile-identifiers",
        "hostile names: quotes, spaces, `; DROP TABLE x;--`, `../escape`",
        None,
        "stored verbatim; folder names sanitised, files stay under the data path",
    ),
)
BY_ID = {c.id: c for c in CASES}


def _listing(paths: Sequence[str | Path]) -> dict[str, object]:
    state: dict[str, object] = {}
    for p in map(str, paths):
        if os.path.isdir(p):
            for d, _, files in os.walk(p):
                for f in files:
                    full = os.path.join(d, f)
                    state[full] = os.path.getsize(full)
        elif os.path.isfile(p):
            state[p] = hashlib.sha256(Path(p).read_bytes()).hexdigest()
        else:
            state[p] = None
    return state


def _snapshots(lake: pdl.Lake | None) -> int | None:
    return None if lake is None else len(lake.snapshots())


@contextmanager
def expect_bad_input(
    case_id: str, lake: pdl.Lake | None = None, watch: Sequence[str | Path] = ()
) -> Iterator[pytest.ExceptionInfo[BaseException]]:
    """The block raises the case's error with its advice, and leaves ``lake`` and ``watch`` untouched.

    Spark wraps errors raised in the driver's data source or ``foreachBatch`` code; the class name and message
    then appear in the text of the Spark exception, which is accepted too.
    """
    case = BY_ID[case_id]
    assert case.error is not None, f"{case_id} is accepted input; test it directly"
    watched = [*watch, *([lake.data_path] if lake is not None else [])]
    before = (_snapshots(lake), _listing(watched))
    with pytest.raises(Exception) as info:
        yield info
    err = info.value
    if isinstance(err, case.error):
        text = str(err)
    else:
        text = str(err)
        assert f"pyspark_ducklake.exceptions.{case.error.__name__}" in text or case.error.__name__ in text, (
            f"{case_id}: expected {case.error.__name__}, got {type(err).__name__}: {text[:1500]}"
        )
    assert case.expected_text in text, f"{case_id}: the message does not say {case.expected_text!r}: {text[:1500]}"
    assert (_snapshots(lake), _listing(watched)) == before, f"{case_id}: something was written"


def render_table() -> str:
    lines = [
        "| bad input | error | what the message says to do |",
        "|---|---|---|",
    ]
    for c in CASES:
        error = f"`{c.error.__name__}`" if c.error else "none (accepted)"
        lines.append(f"| {c.what} | {error} | {c.advice} |")
    return "\n".join(lines)


def docs_table() -> str | None:
    """The table between the ``bad-input-table`` markers, in whichever docs page holds them."""
    return doc_blocks.read(BLOCK)


def write_docs() -> None:
    for path in doc_blocks.write({BLOCK: render_table()}):
        print(f"wrote {path}")


def proven_case_ids(root: Path = REPO_ROOT / "tests") -> set[str]:
    """Case ids that some test passes to ``expect_bad_input`` (or names in ``accepted_input``), literally or as the
    first item of a parametrized tuple of a test that calls ``expect_bad_input(case, ...)``."""
    found: set[str] = set()
    for path in root.rglob("test_*.py"):
        text = path.read_text()
        found |= set(re.findall(r"(?:expect_bad_input|accepted_input)\(\s*\"([a-z0-9-]+)\"", text))
        if "expect_bad_input(case," in text:  # cases listed in tuples, e.g. for parametrize
            found |= set(re.findall(r"\(\s*\"([a-z0-9-]+)\",", text)) & set(BY_ID)
    return found


def accepted_input(case_id: str) -> BadInput:
    """Marks a test as the proof of an accepted-input case (one without an error)."""
    case = BY_ID[case_id]
    assert case.error is None
    return case


if __name__ == "__main__":
    if "--write" in sys.argv[1:]:
        write_docs()
    else:
        print(render_table())
