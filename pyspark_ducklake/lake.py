"""The Python API: ``connect()`` returns a :class:`Lake`; no Spark needed."""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar, cast

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pyspark_ducklake.catalog import commit_rows as W
from pyspark_ducklake.catalog import reader
from pyspark_ducklake.catalog.catalog import CatalogInfo, open_catalog
from pyspark_ducklake.catalog.db import Connection
from pyspark_ducklake.catalog.entries import SnapshotInfo, TableEntry
from pyspark_ducklake.catalog.format_version import FormatVersion
from pyspark_ducklake.catalog.indexes import IndexState, create_indexes, index_states
from pyspark_ducklake.catalog.indexes import supported as indexes_supported
from pyspark_ducklake.catalog.inlined_codec import table_inline_obstacle
from pyspark_ducklake.catalog.location import CatalogLocation, parse_location, with_storage_version
from pyspark_ducklake.catalog.migration import MigrationReport, migrate_catalog
from pyspark_ducklake.catalog.partitioning import (
    parse_partition_keys,
    partition_spec,
    set_partition_spec,
)
from pyspark_ducklake.catalog.reserved import check_column_names, name_obstacle
from pyspark_ducklake.catalog.sort_order import sort_order
from pyspark_ducklake.catalog.transaction import (
    CommitContext,
    Plan,
    RetryConfig,
    SkipCommit,
    extra_info_text,
)
from pyspark_ducklake.catalog.types import (
    Column,
    TableSchema,
    column_from_arrow_field,
    columns_from_arrow,
    validate_columns,
)
from pyspark_ducklake.exceptions import (
    CommitConflictError,
    FormatVersionError,
    InvalidIdentifierError,
    InvalidOptionError,
    NoSuchColumnError,
    NoSuchSchemaError,
)
from pyspark_ducklake.io.fileio import delete_files
from pyspark_ducklake.options import (
    DATA_INLINING_ROW_LIMIT,
    DUCKDB_STORAGE_VERSION,
    FORMAT_VERSION,
    Entry,
    check_keywords,
    check_options,
    parse_format_version,
    parse_int,
    parse_snapshot_id,
    parse_storage_version,
)
from pyspark_ducklake.table import evolution
from pyspark_ducklake.table import metadata as M
from pyspark_ducklake.table.commit import (
    add_pending_files,
    commit,
    commit_replanned,
    current_schema,
    delete_everything,
    table_folder,
)
from pyspark_ducklake.table.data_files import (
    PendingFile,
    conform_to_table,
    to_arrow_table,
    write_data_files,
)
from pyspark_ducklake.table.identifiers import format_identifier, parse_identifier
from pyspark_ducklake.table.lake_table import LakeTable
from pyspark_ducklake.table.scan import execute_plan, plan_scan, virtual_names
from pyspark_ducklake.table.sort_rows import InsertOrder, SortKey, insert_order
from pyspark_ducklake.table.target import create_target

if TYPE_CHECKING:
    from pyspark_ducklake.table.maintenance.compaction import CompactionReport, MergedFile, MergeGroup
    from pyspark_ducklake.table.maintenance.expire import CleanupReport, ExpireReport
    from pyspark_ducklake.table.maintenance.orphans import OrphanReport
    from pyspark_ducklake.table.maintenance.retention import Retention
    from pyspark_ducklake.table.maintenance.rewrite import RewriteGroup, RewriteReport

log = logging.getLogger(__name__)
_G = TypeVar("_G")  # a group of files maintenance rewrites into one
_W = TypeVar("_W", bound="MergedFile | None")  # what a group was rewritten into

DATA_INLINING_ROW_LIMIT_DEFAULT = 10  # ducklake_default_data_inlining_row_limit
_PERSISTED_LIMIT = "data_inlining_row_limit (set in the catalog's ducklake_metadata)"

Filter = list[tuple[str, str, Any]]


class Lake:
    """A DuckLake: a catalog database plus a data path.

    Args:
        catalog: SQLAlchemy URL or DuckDB ``ducklake:`` spelling of the catalog.
        data_path: folder or URL of the Parquet files; required to create a new lake.
        data_inlining_row_limit: appends of at most this many rows are stored in the catalog.
        retry: commit retry settings.
        storage_options: fsspec options for the data path (credentials, endpoint...).
        keep_engine: use the engine this process keeps for the catalog (created on first use) instead of a new
            one, so the catalog queries SQLAlchemy compiled for an earlier Lake are not compiled again; for many
            short-lived Lakes in one process, as Spark's Python workers open to plan each read. ``close()``
            returns the connections either way.
    """

    def __init__(
        self,
        catalog: str | CatalogLocation,
        data_path: str | None = None,
        *,
        data_inlining_row_limit: int | None = None,
        retry: RetryConfig | None = None,
        storage_options: dict[str, Any] | None = None,
        author: str | None = None,
        encrypted: bool | None = None,
        keep_engine: bool = False,
        format_version: FormatVersion | str | None = None,
        duckdb_storage_version: str | None = None,
    ) -> None:
        if data_inlining_row_limit is not None:
            data_inlining_row_limit = parse_int(data_inlining_row_limit, DATA_INLINING_ROW_LIMIT, minimum=0)
        location = catalog if isinstance(catalog, CatalogLocation) else parse_location(catalog)
        if duckdb_storage_version is not None:
            storage_version = parse_storage_version(duckdb_storage_version, DUCKDB_STORAGE_VERSION)
            location = with_storage_version(location, storage_version)
        self.location = location
        fmt = None if format_version is None else parse_format_version(format_version, FORMAT_VERSION)
        self.engine, self.info = open_catalog(
            self.location, data_path, encrypted=encrypted, keep_engine=keep_engine, format_version=fmt
        )
        self.data_path = self.info.data_path
        self.retry = retry or RetryConfig()
        self.storage_options = storage_options
        self.author = author
        self._inlining_limit = data_inlining_row_limit

    # --- catalog ---------------------------------------------------------------------------------------------
    @property
    def catalog_info(self) -> CatalogInfo:
        return self.info

    @property
    def format_version(self) -> str:
        """The catalog's DuckLake format version as stored (``1.0``, ``1.1``, ``1.1-dev1``)."""
        return self.info.version

    def migrate(self, to: str = "1.1", *, dry_run: bool = False) -> MigrationReport:
        """Migrate the catalog to DuckLake format ``to`` in one database transaction, as DuckDB's ``ATTACH ...
        (AUTOMATIC_MIGRATION true)`` does: the inlined tables' system columns get their 1.1 names, the file tables
        ``row_group_count``, and ``ducklake_view_column_tag`` is created. No snapshot is committed. A catalog already
        at ``to`` is left as it is; with ``dry_run`` nothing is changed and the report lists what would be.

        DuckDB 1.5 cannot open a 1.1 catalog, and a catalog never goes back: migrate only when every reader and
        writer of the lake speaks 1.1 (DuckDB 2.0, this library).

        Raises:
            InvalidOptionError: ``to`` is not ``"1.0"`` or ``"1.1"``.
            MigrationError: ``to`` is older than the catalog, a column collides with a new system name, or the
                database refused a step; nothing was changed.
        """
        target = parse_format_version(to, "to")
        report = migrate_catalog(self.engine, target, dry_run=dry_run)
        if report.changed and not dry_run:
            self.info = dataclasses.replace(self.info, format=target)
        return report

    def indexes(self) -> list[IndexState]:
        """The indexes this library adds to SQLite and PostgreSQL catalogs (so reads, change feeds and commits do not
        slow down as history grows), each with whether this catalog has it; empty for a DuckDB-file catalog."""
        if not indexes_supported(self.engine):
            return []
        with self.engine.connect() as conn:
            return index_states(conn)

    def create_indexes(self) -> list[str]:
        """Create the indexes of :meth:`indexes` the catalog lacks (a catalog DuckDB created has none); their names.

        Each is built in a transaction of its own; writers wait while it builds (PostgreSQL lets readers through).
        DuckDB reads and writes the catalog as before.
        """
        return create_indexes(self.engine)

    def close(self) -> None:
        self.engine.dispose()

    def __enter__(self) -> Lake:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def data_inlining_row_limit(self, table_id: int | None = None) -> int:
        """The effective limit: the option given to connect(), else the catalog's setting, else DuckLake's 10."""
        if self._inlining_limit is not None:
            return self._inlining_limit
        with self.engine.connect() as conn:
            if table_id is not None:
                value = reader.metadata_value(conn, "data_inlining_row_limit", "table", table_id)
                if value is not None:
                    return parse_int(value, _PERSISTED_LIMIT, minimum=0)
            value = reader.metadata_value(conn, "data_inlining_row_limit")
        return parse_int(value, _PERSISTED_LIMIT, minimum=0) if value is not None else DATA_INLINING_ROW_LIMIT_DEFAULT

    def _inline_limit(self, table: LakeTable) -> int:
        # a table with a reserved column name (created while inlining was off), or one longer than the catalog
        # database's identifiers, is never inlined into
        if name_obstacle(table.table_schema.names(), self.engine.dialect.name, self.info.format) is not None:
            return -1
        return self.data_inlining_row_limit(table.table_id)

    def current_snapshot_id(self) -> int:
        with self.engine.connect() as conn:
            return reader.latest_snapshot(conn).snapshot_id

    def snapshots(self, *, limit: int | None = None, since: int | None = None) -> list[SnapshotInfo]:
        """Snapshots with their changes, author, message and extra info, oldest first.

        Without arguments every snapshot: on a lake with a long history that is a long list (a stream committing
        every second makes 86,400 a day), so give ``limit`` and ``since``, which the catalog database applies.

        Args:
            limit: at most this many (>= 1): the newest ones, or with ``since`` the first ones from it on (page
                on with ``since`` = the last id + 1), as Delta's ``DESCRIBE HISTORY ... LIMIT`` bounds a listing.
            since: only snapshots from this id on (inclusive); beyond the newest, none.

        Raises:
            InvalidOptionError: ``limit`` below 1 or ``since`` below 0 (or either not an integer).
        """
        if limit is not None:
            limit = parse_int(limit, "limit", minimum=1)
        if since is not None:
            since = parse_snapshot_id(since, "since", text=False)
        with self.engine.connect() as conn:
            return reader.snapshots(conn, limit=limit, since=since)

    def snapshots_table(self, *, limit: int | None = None, since: int | None = None) -> pa.Table:
        """Snapshots as DuckDB's ``ducklake_snapshots()`` lists them (same columns, ``changes`` as a map); ``limit``
        and ``since`` as :meth:`snapshots` takes them.

        Raises:
            InvalidOptionError: as :meth:`snapshots`.
        """
        return M.snapshots_table(self.snapshots(limit=limit, since=since))

    def table_info(self) -> pa.Table:
        """Every table with its data and delete files' counts and sizes, as DuckDB's ``ducklake_table_info()``."""
        with self.engine.connect() as conn:
            snap = reader.latest_snapshot(conn).snapshot_id
            entries = reader.tables(conn, snap)
            totals = reader.file_totals(conn, [t.table_id for t in entries], snap, self.info.format)
            tables = [(t, totals[t.table_id]) for t in entries]
        return M.table_info_table(tables)

    def list_files(self, identifier: str | Sequence[str], *, snapshot: int | None = None) -> pa.Table:
        """The data files of a table (at ``snapshot``, else the latest) with their delete files, as DuckDB's
        ``ducklake_list_files()`` lists them.

        Raises:
            NoSuchTableError: no such table at that snapshot.
        """
        schema_name, table_name = parse_identifier(identifier)
        with self.engine.connect() as conn:
            snap = reader.latest_snapshot(conn).snapshot_id if snapshot is None else _snapshot_id(snapshot)
            entry = reader.table_by_name(conn, schema_name, table_name, snap)
            files = reader.data_files(conn, entry, snap, self.data_path, self.info.format)
        return M.files_table(files)

    def referenced_files(self, paths: list[str]) -> set[str]:
        """The subset of ``paths`` (absolute, as this library wrote them) that any snapshot references."""
        with self.engine.connect() as conn:
            referenced = reader.all_referenced_paths(conn, self.data_path)
        return {p for p in paths if p in referenced}

    def schemas(self) -> list[str]:
        with self.engine.connect() as conn:
            return [s.schema_name for s in reader.schemas(conn, reader.latest_snapshot(conn).snapshot_id)]

    def tables(self, schema: str | None = None) -> list[str]:
        """Every table as ``schema.table`` (a name holding a dot or a quote in DuckDB's double quotes:
        ``"we.ird"."t"``); each string is an identifier the other methods accept."""
        return [format_identifier(s, t) for s, t in self._table_names(schema)]

    def _table_names(self, schema: str | None = None) -> list[tuple[str, str]]:
        with self.engine.connect() as conn:
            snap = reader.latest_snapshot(conn).snapshot_id
            return [(t.schema.schema_name, t.table_name) for t in reader.tables(conn, snap, schema)]

    def create_schema(self, name: str, *, exist_ok: bool = False) -> None:
        """Create a schema.

        Raises:
            SchemaAlreadyExistsError: it exists (unless ``exist_ok``), or one whose name differs only in case.
        """
        if not name:
            raise InvalidIdentifierError("schema name is empty")
        if exist_ok and name in self.schemas():
            return
        commit(self, lambda ctx: W.create_schema(ctx, name), base=None)

    def create_table(
        self,
        identifier: str | Sequence[str],
        schema: pa.Schema,
        *,
        partition_by: Sequence[str] | None = None,
        exist_ok: bool = False,
    ) -> LakeTable:
        """Create a table from an Arrow schema (column ids numbered depth first from 1).

        Raises:
            NoSuchSchemaError: the schema does not exist.
            TableAlreadyExistsError: the table exists (unless ``exist_ok``), or a table or view whose name differs
                only in case (DuckDB's names are case-insensitive; ``exist_ok`` does not apply).
            InvalidIdentifierError: an empty name, two columns (or fields of a struct) differing only in case, or a
                column name DuckLake reserves while data inlining is on (``row_id``, ``begin_snapshot``,
                ``end_snapshot``, ``_ducklake_internal_row_id``, ``_ducklake_internal_snapshot_id``, in any case).
            UnsupportedTypeError: a column type DuckLake cannot hold (the message names the column), no columns,
                or a struct without fields.
        """
        schema_name, table_name = parse_identifier(identifier)
        check_column_names(schema.names, self.data_inlining_row_limit(), self.info.format)
        columns = columns_from_arrow(schema)
        # What DuckDB refuses (no columns, names equal but for case, empty structs), before anything is committed.
        validate_columns(columns, f"table {schema_name}.{table_name}")
        keys = self._partition_keys(partition_by, TableSchema(columns)) if partition_by else []
        if exist_ok and (schema_name, table_name) in self._table_names():
            return self.table(identifier)

        def apply(ctx: CommitContext) -> None:
            create_target(ctx, schema_name, table_name, TableSchema(columns), keys, at=ctx.base.snapshot_id)

        commit(self, apply, base=None)
        return self.table(identifier)

    def set_partitioning(self, identifier: str | Sequence[str], partition_by: Sequence[str] | str) -> None:
        """Partition new data by these keys, written as in DuckDB's ``SET PARTITIONED BY``: a column (``"k"``),
        ``"year(ts)"``/``month``/``day``/``hour``, ``"bucket(16, id)"``, and on a DuckLake 1.1 catalog
        ``"epoch_day(ts)"``/``epoch_year``/``epoch_month``/``epoch_hour``; an empty list stops partitioning.

        Existing files keep their layout, as with DuckDB's ``ALTER TABLE ... SET PARTITIONED BY``.

        Raises:
            InvalidOptionError: an unknown transform (the message lists them), a malformed key or bucket count, or
                a transform the column's type does not take.
            FormatVersionError: an ``epoch_*`` transform on a DuckLake 1.0 catalog (migrate it first).
            NoSuchColumnError: a key names no column.
        """
        table = self.table(identifier)
        keys = self._partition_keys(partition_by, table.table_schema) if partition_by else []

        def apply(ctx: CommitContext) -> None:
            set_partition_spec(ctx, table.table_id, keys)
            evolution.finish_alter(ctx, table.entry)

        commit(self, apply, base=table.snapshot_id)

    def _partition_keys(self, partition_by: Sequence[str] | str, schema: TableSchema) -> list[tuple[int, str]]:
        try:
            return parse_partition_keys(partition_by, schema, format=self.info.format)
        except FormatVersionError:
            # another process may have migrated the catalog since this Lake opened it
            with self.engine.connect() as conn:
                now = reader.format_version(conn)
            if now == self.info.format:
                raise
            self.info = dataclasses.replace(self.info, format=now)
            return parse_partition_keys(partition_by, schema, format=now)

    def set_sort_order(self, identifier: str | Sequence[str], sort_by: Sequence[str] | str) -> int:
        """Sort the table's new data by these columns, as DuckDB's ``ALTER TABLE ... SET SORTED BY``; an empty list
        resets it (``RESET SORTED BY``). Existing files keep their order.

        Rows are then written in this order where DuckDB writes them sorted: appends (each file, and rows inlined
        into the catalog), flushes of inlined rows, ``merge_adjacent_files`` and ``rewrite_data_files``.

        Args:
            identifier: the table.
            sort_by: keys such as ``"ts DESC NULLS FIRST"`` or ``'"my col"'`` (a list, or one comma-separated
                string): a top-level column (matched in any case), ``ASC`` (default) or ``DESC``, ``NULLS LAST``
                (default) or ``NULLS FIRST``.

        Returns:
            The new snapshot id (DuckDB writes one even when the order is unchanged).

        Raises:
            InvalidOptionError: a key is not a column with an optional direction and NULLS order.
            NoSuchColumnError: a key names no column.
            UnsupportedSortOrderError: a column holds values this library cannot order as DuckDB does (VARIANT,
                GEOMETRY, TIMETZ).
        """
        from pyspark_ducklake.catalog.sort_order import set_sort_order
        from pyspark_ducklake.table.sort_rows import parse_sort_order

        table = self.table(identifier)
        fields, stated = parse_sort_order(sort_by, table.table_schema, table.name)

        def apply(ctx: CommitContext) -> None:
            set_sort_order(ctx, table.table_id, fields, nulls_stated=stated)
            ctx.bump_schema_version()  # no ducklake_schema_versions row and no inlined table: DuckDB writes none
            ctx.changes.altered_tables.add(table.table_id)

        result = commit(self, apply, base=table.snapshot_id)
        assert result.snapshot_id is not None
        return result.snapshot_id

    def drop_table(self, identifier: str | Sequence[str]) -> int:
        """Drop a table in one snapshot, writing the catalog rows DuckDB's ``DROP TABLE`` writes; its files stay
        until ``expire_snapshots`` and ``cleanup_old_files`` (time travel before the drop still reads it).

        Raises:
            NoSuchSchemaError, NoSuchTableError: it does not exist.
            CommitConflictError: another writer changed it meanwhile.
        """
        from pyspark_ducklake.catalog import table_ddl

        table = self.table(identifier)
        result = commit(self, lambda ctx: table_ddl.drop_table(ctx, table.entry), base=table.snapshot_id)
        assert result.snapshot_id is not None
        return result.snapshot_id

    def drop_schema(self, name: str, *, cascade: bool = False) -> int:
        """Drop a schema in one snapshot (with ``cascade`` its tables and views too), as DuckDB's ``DROP SCHEMA``.

        Raises:
            NoSuchSchemaError: it does not exist.
            InvalidIdentifierError: it holds tables or views and ``cascade`` is False (nothing is dropped).
        """
        from pyspark_ducklake.catalog import table_ddl

        with self.engine.connect() as conn:
            snap = reader.latest_snapshot(conn).snapshot_id
            schema = reader.schema_by_name(conn, name, snap)
        result = commit(self, lambda ctx: table_ddl.drop_schema(ctx, schema, cascade=cascade), base=snap)
        assert result.snapshot_id is not None
        return result.snapshot_id

    def rename_table(self, identifier: str | Sequence[str], new_name: str) -> int:
        """Rename a table within its schema in one snapshot, as DuckDB's ``ALTER TABLE .. RENAME TO`` (the table
        keeps its id, rows, history and folder). ``new_name`` is a bare table name.

        Raises:
            NoSuchSchemaError, NoSuchTableError: it does not exist.
            TableAlreadyExistsError: the name (or one differing only in case) is taken.
            InvalidIdentifierError: ``new_name`` is empty or names another schema.
        """
        from pyspark_ducklake.catalog import table_ddl

        table = self.table(identifier)
        if not isinstance(new_name, str) or not new_name:
            raise InvalidIdentifierError(f"the new table name must be a non-empty string, got {new_name!r}")
        result = commit(self, lambda ctx: table_ddl.rename_table(ctx, table.entry, new_name), base=table.snapshot_id)
        assert result.snapshot_id is not None
        return result.snapshot_id

    def table(self, identifier: str | Sequence[str], *, snapshot: int | None = None) -> LakeTable:
        """The table at the latest (or given) snapshot.

        Raises:
            NoSuchSchemaError, NoSuchTableError: it does not exist at that snapshot.
        """
        schema_name, table_name = parse_identifier(identifier)
        with self.engine.connect() as conn:
            snap = reader.latest_snapshot(conn).snapshot_id if snapshot is None else _snapshot_id(snapshot)
            entry = reader.table_by_name(conn, schema_name, table_name, snap)
            schema = reader.table_schema(conn, entry.table_id, snap)
            return LakeTable(
                entry,
                schema,
                snap,
                partition_spec(conn, entry.table_id, snap, schema),
                sort_order(conn, entry.table_id, snap),
            )

    # --- writes ----------------------------------------------------------------------------------------------
    def append(
        self,
        identifier: str | Sequence[str],
        data: Any,
        *,
        extra_info: dict[str, Any] | str | None = None,
        txn_app_id: str | None = None,
        txn_version: int | None = None,
    ) -> int:
        """Append rows; small appends are inlined into the catalog, larger ones become a Parquet file.

        Rows DuckDB could not read back exactly from the catalog (a NUL inside a nested string on PostgreSQL, a
        JSON list element DuckDB would rewrite) go to a Parquet file however few they are.

        Args:
            identifier: ``"schema.table"`` or a ``(schema, table)`` tuple.
            data: a pyarrow Table or RecordBatch, or anything ``pa.table()`` takes.
            extra_info: stored as the snapshot's ``commit_extra_info``: a dict of JSON values or a JSON string.
            txn_app_id: replay protection (Delta's ``txnAppId``), with ``txn_version``: when the app id has
                committed this version or a later one into the table, nothing is written and the snapshot that
                committed it is returned; else the version is recorded with the snapshot (the streaming sink's
                record, ``pyspark_ducklake_app_progress``).
            txn_version: the version of ``txn_app_id`` this write is (Delta's ``txnVersion``).

        Returns:
            The new snapshot id.

        Raises:
            InvalidOptionError: ``extra_info`` is not JSON (nothing is written).
            InvalidStringError: a string column holds bytes that are not UTF-8 (nothing is written).
            SchemaMismatchError: the data does not fit the table (nothing is written).
            CommitFailedError, CommitConflictError, CommitStateUnknownError: see the commit protocol.
        """
        extra = extra_info_text(extra_info)  # before any file is written
        txn = _txn(txn_app_id, txn_version)
        table = self.table(identifier)
        done = self._txn_done(table, txn)
        if done is not None:
            return done
        order = self._insert_order(table)  # a sort order this library cannot follow fails before anything is written
        arrow = conform_to_table(to_arrow_table(data), table.table_schema, table.name)
        if arrow.num_rows == 0:
            return table.snapshot_id
        skipped: list[int] = []
        if self._inlines(table, arrow):
            inlined = order.inlined_rows(arrow, table.table_schema)
            apply = self._txn_apply(table, txn, self._inline_apply(table, inlined), skipped)
            result = commit(self, apply, base=table.snapshot_id, extra_info=extra)
        else:
            files = self._write_files(table, arrow, order.keys)
            result = commit(
                self,
                self._txn_apply(table, txn, self._file_apply(table, files), skipped),
                base=table.snapshot_id,
                files=[f.written.path for f in files],
                extra_info=extra,
            )
            if result.snapshot_id is None:
                delete_files([f.written.path for f in files], self.storage_options)
        if result.snapshot_id is None:
            return skipped[-1]
        return result.snapshot_id

    def _inlines(self, table: LakeTable, arrow: pa.Table) -> bool:
        """Whether rows go into the catalog: few enough, and all of them readable back exactly from there."""
        if arrow.num_rows > self._inline_limit(table):
            return False
        why = table_inline_obstacle(table.table_schema.columns, arrow, self.engine.dialect.name, self.info.format)
        if why is not None:
            log.info("table %s: %d rows written to Parquet, not inlined: %s", table.name, arrow.num_rows, why)
        return why is None

    def _write_files(self, table: LakeTable, arrow: pa.Table, sort_by: tuple[SortKey, ...]) -> list[PendingFile]:
        return write_data_files(
            arrow,
            table_folder(table, self.data_path),
            table.table_schema,
            table.partition_keys,
            storage_options=self.storage_options,
            encrypt=self.info.encrypted,
            table_name=table.name,
            sort_by=sort_by,
        )

    def _insert_order(self, table: LakeTable) -> InsertOrder:
        """How an append to ``table`` orders its rows (its sort order, as DuckDB's INSERT sorts).

        Raises:
            UnsupportedSortOrderError: the table's sort order has a key this library cannot evaluate.
        """
        if table.sort is None:
            return InsertOrder()
        with self.engine.connect() as conn:
            return insert_order(conn, table.entry, table.sort, table.table_schema)

    @staticmethod
    def _inline_apply(table: LakeTable, arrow: pa.Table) -> Any:
        def apply(ctx: CommitContext) -> None:
            schema = current_schema(ctx, table)
            W.inlined_insert(ctx, table.entry, schema, arrow)

        return apply

    @staticmethod
    def _file_apply(table: LakeTable, files: list[PendingFile]) -> Any:
        def apply(ctx: CommitContext) -> None:
            schema = current_schema(ctx, table)
            add_pending_files(ctx, table.entry, schema, table.partition, files)

        return apply

    def overwrite(
        self, identifier: str | Sequence[str], data: Any, *, filter: Filter | pc.Expression | None = None
    ) -> int:
        """Replace the table's rows with ``data`` in one snapshot; with ``filter``, only the rows matching it.

        Without a filter every row the table has when the overwrite commits is replaced, rows other writers
        appended meanwhile included. With a filter it is a :meth:`delete` of the matching rows and an append of
        ``data`` in one snapshot (Delta's ``replaceWhere``; ``data`` is not checked against the filter): rows
        appended meanwhile stay, and the delete is planned again when its rows moved before the commit.

        Raises:
            SchemaMismatchError: the data does not fit the table (nothing is written).
            NoSuchColumnError: the filter names a column the table does not have.
            StalePlanError: (with a filter) the matching rows kept changing under it; nothing was committed.
        """
        from pyspark_ducklake.table.scan import check_filter, filter_expression

        table = self.table(identifier)
        predicate = None
        if filter is not None:
            _check_filter_columns(table, filter)
            # a bad filter (its form or its types) fails before any file is written
            predicate = filter_expression(filter, table.table_schema)
            check_filter(predicate, table.table_schema, filter)
        order = self._insert_order(table)
        arrow = conform_to_table(to_arrow_table(data), table.table_schema, table.name)
        files: list[PendingFile] = []
        inline = self._inlines(table, arrow)
        if arrow.num_rows and not inline:
            files = self._write_files(table, arrow, order.keys)
        elif inline:
            arrow = order.inlined_rows(arrow, table.table_schema)

        def insert(ctx: CommitContext, _current: LakeTable) -> None:
            if arrow.num_rows:
                if inline:
                    W.inlined_insert(ctx, table.entry, current_schema(ctx, table), arrow)
                else:
                    self._file_apply(table, files)(ctx)

        paths = [f.written.path for f in files]
        if filter is not None and predicate is not None:
            insert_rows = insert if arrow.num_rows else None
            return self._commit_deletes(
                identifier, table, predicate, insert_rows, paths, prune=_conjunction(filter), filters=filter
            )

        def apply(ctx: CommitContext) -> None:
            delete_everything(ctx, table, self.data_path)
            insert(ctx, table)
            if ctx.changes.is_empty():
                raise SkipCommit()  # an empty table overwritten with no rows

        result = commit(self, apply, base=table.snapshot_id, files=paths)
        return result.snapshot_id if result.snapshot_id is not None else self.current_snapshot_id()

    def delete(self, identifier: str | Sequence[str], filter: Filter | pc.Expression) -> int:
        """Delete the rows matching ``filter`` (pyarrow DNF tuples like ``[("id", "<", 5)]`` or an Expression).

        Rows appended by other writers meanwhile do not disturb it, and rows another writer deleted meanwhile are
        left out. When rows it planned to delete were moved (a flush, a compaction, an overwrite) or updated before
        it committed, it is planned again against the newest snapshot (up to ``max_retry_count`` times, with the
        retry backoff).

        Returns:
            The new snapshot id (the current one when nothing matched).

        Raises:
            NoSuchColumnError: the filter names a column the table does not have.
            StalePlanError: the matching rows kept changing under it in every attempt; nothing was deleted.
            CommitConflictError: the table was dropped or altered meanwhile; nothing was deleted.
        """
        table = self.table(identifier)
        _check_filter_columns(table, filter)
        from pyspark_ducklake.table.scan import check_filter, filter_expression

        predicate = filter_expression(filter, table.table_schema)
        check_filter(predicate, table.table_schema, filter)
        return self._commit_deletes(identifier, table, predicate, None, prune=_conjunction(filter), filters=filter)

    def _commit_deletes(
        self,
        identifier: str | Sequence[str],
        table: LakeTable,
        predicate: pc.Expression,
        insert: Callable[[CommitContext, LakeTable], None] | None,
        files: list[str] | None = None,
        *,
        prune: Filter | None = None,
        filters: Any = None,
    ) -> int:
        """Delete the rows matching ``predicate`` (and run ``insert``) in one snapshot, planned again against the
        newest snapshot whenever the planned rows moved before the commit. ``prune`` (the predicate as ``(column,
        op, value)`` tuples) skips files whose statistics exclude it."""
        from pyspark_ducklake.table.delete import plan_deletes, stage_deletes

        planned = [table.snapshot_id]

        def plan_at(current: LakeTable) -> Plan | None:
            planned[0] = current.snapshot_id
            with self.engine.connect() as conn:
                scan = plan_scan(
                    conn, current.entry, current.snapshot_id, self.data_path, fmt=self.info.format, filters=prune
                )
            deletes = plan_deletes(scan, predicate, self.storage_options, filters)
            if deletes.rows == 0 and insert is None:
                return None
            table_dir = table_folder(current, self.data_path)

            def apply(ctx: CommitContext) -> None:
                stage_deletes(ctx, deletes, table_dir)
                if insert is not None:
                    insert(ctx, current)

            return Plan(apply, current.snapshot_id)

        def replan() -> Plan | None:
            current = self.table(identifier)
            if current.table_id != table.table_id:
                raise CommitConflictError(f"table {table.name} was dropped and created again by another writer")
            return plan_at(current)

        try:
            first = plan_at(table)
        except BaseException:
            if files:
                delete_files(files, self.storage_options)
            raise
        if first is None:
            return table.snapshot_id
        result = commit(self, first.apply, base=first.base_snapshot_id, replan=replan, files=files)
        return result.snapshot_id if result.snapshot_id is not None else planned[0]

    def upsert(
        self,
        identifier: str | Sequence[str],
        data: Any,
        on: Sequence[str] | str = ("id",),
        *,
        delete_column: str | None = None,
        order_by: Sequence[str] | str | None = None,
        extra_info: dict[str, Any] | str | None = None,
        txn_app_id: str | None = None,
        txn_version: int | None = None,
    ) -> int:
        """Apply rows by key in one snapshot: a row whose key exists replaces it (keeping its row id, as DuckDB's
        ``UPDATE`` does, so both change feeds show an ``update_preimage``/``update_postimage`` pair), a new key is
        inserted, and a row whose ``delete_column`` is true deletes its key (that column is never stored).

        Keys compare as DuckDB compares them: strings exactly (``"A"`` and ``"a"`` are two keys), NaN equal to NaN,
        -0.0 equal to 0.0. Only the key columns of the files whose statistics may hold the keys are read, and
        nothing is rewritten: replaced rows are deleted as :meth:`delete` deletes them. When another writer changed
        the table before the commit, the upsert is planned again against the newest snapshot (so a concurrent
        upsert of the same key is never lost or doubled).

        Args:
            on: the key column(s), of the table and of ``data``.
            delete_column: a boolean column of ``data``: true deletes the key.
            order_by: column(s) of ``data``; of several rows for one key the last in this order (ties: the later
                row; NULL first) wins. Without it, a key twice in ``data`` is an error. Columns the table does not
                have are not stored.
            txn_app_id: replay protection (Delta's ``txnAppId``), with ``txn_version``: when the app id has
                committed this version or a later one into the table, nothing is written and the snapshot that
                committed it is returned.
            txn_version: the version of ``txn_app_id`` this write is (Delta's ``txnVersion``).

        Returns:
            The new snapshot id (the current one when nothing changed).

        Raises:
            NoSuchColumnError: a key column missing from the table or the data (naming the closest), or a
                ``delete_column``/``order_by`` column missing from the data.
            NullKeyError: a key column holds NULL. DuplicateKeyError: a key twice in ``data`` and no ``order_by``.
            InvalidOptionError: ``delete_column`` not boolean or holding NULL; a bad ``on``/``txn_*`` argument.
            SchemaMismatchError: the data does not fit the table.
            StalePlanError: the table kept changing under it in every attempt; nothing was committed.
        (In every case nothing is written.)
        """
        from pyspark_ducklake.table import upsert as U

        extra = extra_info_text(extra_info)
        txn = _txn(txn_app_id, txn_version)
        table = self.table(identifier)
        done = self._txn_done(table, txn)
        if done is not None:
            return done
        raw = to_arrow_table(data)
        keys = U.check_key_names(on, table.table_schema, raw.column_names, table.name)
        if delete_column is not None and delete_column in keys:
            raise InvalidOptionError(f"delete_column {delete_column!r} is also a key column; name a separate column")
        rows, deletes, order = U.split_control_columns(raw, table.table_schema, delete_column, order_by, table.name)
        rows = conform_to_table(rows, table.table_schema, table.name)
        batch = U.prepare_rows(rows, deletes, order, keys)
        if batch.rows.num_rows == 0:
            return table.snapshot_id
        prune = U.prune_filter(batch.rows, keys[0])

        def plan(current: LakeTable) -> U.RowChanges:
            with self.engine.connect() as conn:
                scan = plan_scan(
                    conn,
                    current.entry,
                    current.snapshot_id,
                    self.data_path,
                    fmt=self.info.format,
                    filters=prune,
                    columns=list(keys),
                )
            return U.plan_upsert(scan, batch, self.storage_options)

        return self._commit_changes(identifier, table, plan, extra, txn)

    def update(
        self,
        identifier: str | Sequence[str],
        set: dict[str, Any],
        filter: Filter | pc.Expression | None = None,
        *,
        extra_info: dict[str, Any] | str | None = None,
    ) -> int:
        """Set columns of the rows matching ``filter`` (every row without one) in one snapshot, as DuckDB's
        ``UPDATE``: the rows keep their row ids, and both change feeds show ``update_preimage``/``update_postimage``
        pairs.

        Args:
            set: ``{column: value}``; a value is a Python value (cast to the column's type) or a pyarrow compute
                expression over the row's columns (``pc.field("v") * 2``).
            filter: as :meth:`delete` takes it.

        Returns:
            The new snapshot id (the current one when no row matched).

        Raises:
            NoSuchColumnError: ``set`` or the filter names a column the table does not have.
            InvalidOptionError: ``set`` is empty or an expression cannot be evaluated on the rows.
            SchemaMismatchError: a new value does not fit its column.
            StalePlanError: the matching rows kept changing under it in every attempt; nothing was committed.
        """
        from pyspark_ducklake.table import upsert as U
        from pyspark_ducklake.table.scan import check_filter, filter_expression

        extra = extra_info_text(extra_info)
        table = self.table(identifier)
        if not isinstance(set, dict) or not set:
            raise InvalidOptionError(f"set= must be a non-empty dict of column: value, got {set!r}")
        names = table.table_schema.names()
        for c in set:
            if c not in names:
                raise NoSuchColumnError(f"column {c!r} is not in {table.name}{U.closest_name(str(c), list(names))}")
        predicate = None
        if filter is not None:
            _check_filter_columns(table, filter)
            predicate = filter_expression(filter, table.table_schema)
            check_filter(predicate, table.table_schema, filter)
        prune = _conjunction(filter) if filter is not None else None

        def plan(current: LakeTable) -> U.RowChanges:
            with self.engine.connect() as conn:
                scan = plan_scan(
                    conn, current.entry, current.snapshot_id, self.data_path, fmt=self.info.format, filters=prune
                )
            matched = U.read_matching(scan, predicate, filter, self.storage_options)
            new_rows = U.set_values(matched, scan.schema, set, current.name)
            return U.update_changes(scan, matched, new_rows)

        return self._commit_changes(identifier, table, plan, extra, None)

    def _txn_done(self, table: LakeTable, txn: tuple[str, int] | None) -> int | None:
        """The snapshot that committed ``txn``'s version (or a later one) of the app into the table, else None."""
        if txn is None:
            return None
        from pyspark_ducklake.catalog import app_progress

        app_progress.ensure_progress_table(self.engine)
        with self.engine.connect() as conn:
            last = app_progress.last_batch(conn, txn[0], table.table_id)
        return last[1] if last is not None and txn[1] <= last[0] else None

    @staticmethod
    def _txn_apply(table: LakeTable, txn: tuple[str, int] | None, apply: Any, skipped: list[int]) -> Any:
        """``apply`` made replay-safe: a no-op when the app committed this version meanwhile (its snapshot in
        ``skipped``), else recording the version in the same database transaction."""
        if txn is None:
            return apply
        from pyspark_ducklake.catalog import app_progress

        def guarded(ctx: CommitContext) -> None:
            last = app_progress.last_batch(ctx.conn, txn[0], table.table_id)
            if last is not None and txn[1] <= last[0]:
                skipped.append(last[1])
                raise SkipCommit()
            apply(ctx)
            app_progress.record_batch(ctx.conn, txn[0], table.table_id, txn[1], ctx.snapshot_id)

        return guarded

    def _commit_changes(
        self,
        identifier: str | Sequence[str],
        table: LakeTable,
        plan: Callable[[LakeTable], Any],
        extra: Any,
        txn: tuple[str, int] | None,
    ) -> int:
        """Commit an upsert's or update's :class:`RowChanges`, planned with ``plan`` against a table state and
        planned again whenever another writer changed the table before the commit."""
        from pyspark_ducklake.table import upsert as U

        written: list[list[str]] = []
        planned = [table.snapshot_id]
        skipped: list[int] = []

        def plan_at(current: LakeTable) -> Plan | None:
            planned[0] = current.snapshot_id
            changes = plan(current)
            if changes.is_empty():
                return None  # nothing to write (not even the txn version: replaying it changes nothing either)
            rows = pa.concat_tables([changes.replaced, changes.inserted])
            inline = rows.num_rows == 0 or self._inlines(current, rows)
            table_dir = table_folder(current, self.data_path)
            files = None
            if not inline:
                files = U.write_change_files(
                    changes,
                    table_dir,
                    current.table_schema,
                    current.partition_keys,
                    storage_options=self.storage_options,
                    encrypt=self.info.encrypted,
                )
                written.append([f.written.path for f in files[0] + files[1]])

            def apply(ctx: CommitContext) -> None:
                schema = current_schema(ctx, current)
                U.stage_changes(
                    ctx,
                    changes,
                    table_dir,
                    schema,
                    inline=inline,
                    files=files,
                    add_files=lambda c, pending: add_pending_files(
                        c, current.entry, schema, current.partition, pending
                    ),
                )

            return Plan(self._txn_apply(current, txn, apply, skipped), current.snapshot_id)

        def replan() -> Plan | None:
            current = self.table(identifier)
            if current.table_id != table.table_id:
                raise CommitConflictError(f"table {table.name} was dropped and created again by another writer")
            return plan_at(current)

        first = plan_at(table)
        if first is None:
            return table.snapshot_id
        result = commit_replanned(self, first, replan, written, extra_info=extra)
        if result.snapshot_id is not None:
            return result.snapshot_id
        return skipped[-1] if skipped else planned[0]

    def flush_inlined_data(self, identifier: str | Sequence[str] | None = None) -> int | None:
        """Write the inlined rows of one table (or of every table) to Parquet in one snapshot.

        Like DuckDB's ``ducklake_flush_inlined_data``: history is kept (time travel and the change feed read the
        same before and after). Returns the snapshot id, or None when there was nothing to flush.

        Rows of a table with a TIME_NS column stay inlined (DuckDB cannot read that type from Parquet): flushing
        every table leaves them, naming the table alone raises.

        Raises:
            UnsupportedTypeError: the named table has a TIME_NS column; nothing was written.
        """
        from pyspark_ducklake.table.flush import flush_inlined

        names = [identifier] if identifier is not None else self._table_names()
        targets = [self.table(t) for t in names]

        def apply(ctx: CommitContext) -> None:
            for t in targets:
                kept = flush_inlined(ctx, t.entry, strict=identifier is not None).kept
                if kept is not None:
                    log.info("flush: rows of %s stay inlined: %s", t.name, kept)
            if ctx.changes.is_empty():
                raise SkipCommit()

        result = commit(self, apply, base=max((t.snapshot_id for t in targets), default=None))
        return result.snapshot_id

    def table_changes(
        self,
        identifier: str | Sequence[str],
        start: int | dt.datetime,
        end: int | dt.datetime | None = None,
        *,
        columns: Sequence[str] | None = None,
    ) -> pa.Table:
        """The change feed of snapshots ``start..end`` (inclusive; ``end`` defaults to the latest), as DuckDB's
        ``ducklake_table_changes`` returns it: the table's columns at ``end`` (only those named in ``columns``, in
        table order, when given), then ``_change_type`` (``insert``, ``delete``, ``update_preimage``,
        ``update_postimage``), ``_snapshot_id``, ``_rowid``, ``_commit_timestamp``; a change column whose name the
        table has (in any case) gets ``_1``, ``_2``... appended, as DuckDB does.

        Raises:
            NoSuchColumnError: ``columns`` names a column the table does not have at ``end``.
            UnsupportedTypeError: a column read has a type this library cannot read (leave it out of ``columns``).
        """
        from pyspark_ducklake.table.change_feed import table_changes

        schema_name, table_name = parse_identifier(identifier)
        stop = self.current_snapshot_id() if end is None else end
        return table_changes(
            self.engine,
            self.data_path,
            schema_name,
            table_name,
            start,
            stop,
            fmt=self.info.format,
            storage_options=self.storage_options,
            columns=columns,
        )

    def orphan_files(self, *, older_than: dt.timedelta | float | str = dt.timedelta(hours=1)) -> list[str]:
        """Files under the data path that no snapshot references (left by crashed writers), older than the age (a
        ``timedelta``, seconds or ``'1 hour'``; 0 also lists what a writer may be about to commit).

        Raises:
            InvalidOptionError: the age is negative or not a duration.
        """
        from pyspark_ducklake.table.maintenance.orphans import find_orphans

        return list(
            find_orphans(
                self.engine, self.data_path, older_than=older_than, storage_options=self.storage_options
            ).orphans
        )

    def delete_orphan_files(
        self, *, older_than: dt.timedelta | float | str = dt.timedelta(hours=1), dry_run: bool = False
    ) -> OrphanReport:
        """Delete :meth:`orphan_files` (or only list them with ``dry_run``), as ``ducklake_delete_orphaned_files``.

        Returns:
            An :class:`~pyspark_ducklake.table.maintenance.orphans.OrphanReport`; iterating it gives the files
            deleted (or that would be), ``.bytes`` their size, ``.skipped_recent`` the unreferenced files younger than
            the age.

        Raises:
            InvalidOptionError: the age is negative or not a duration.
        """
        from pyspark_ducklake.table.maintenance.orphans import delete_orphans

        return delete_orphans(
            self.engine, self.data_path, older_than=older_than, dry_run=dry_run, storage_options=self.storage_options
        )

    def merge_adjacent_files(
        self,
        identifier: str | Sequence[str] | None = None,
        *,
        target_file_size: int | str | None = None,
        min_file_size: int | str | None = None,
        max_file_size: int | str | None = None,
        max_compacted_files: int | str | None = None,
        dry_run: bool = False,
        rewrite: Callable[[list[MergeGroup]], list[MergedFile]] | None = None,
    ) -> CompactionReport:
        """Merge adjacent small Parquet files of one table (or of every table) in one snapshot, exactly as DuckDB's
        ``ducklake_merge_adjacent_files``: time travel, row ids and the change feed read the same afterwards, and the
        old files are scheduled for deletion (:meth:`cleanup_old_files` removes them). Files that ever had deletes
        are skipped, as in DuckDB 1.5.5.

        Args:
            identifier: the table; None merges every table whose ``auto_compact`` option is not false.
            target_file_size: bytes (or ``"512MB"``) a merged file aims for; default the catalog's
                ``target_file_size`` option, else 512 MiB. Only files smaller than it are merged.
            min_file_size: only merge files of at least this size.
            max_file_size: only merge files of less than this size.
            max_compacted_files: stop after considering this many files (DuckDB's ``max_compacted_files``).
            dry_run: only report what would be merged.
            rewrite: runs :func:`~pyspark_ducklake.table.maintenance.compaction.rewrite_group` over the groups
                (e.g. as a Spark job, :func:`pyspark_ducklake.batch.compaction_job.merge_adjacent_files`); default: in
                this process.

        Returns:
            A :class:`~pyspark_ducklake.table.maintenance.compaction.CompactionReport` (``files_processed``,
            ``files_created``, bytes before and after, the new ``snapshot_id``).

        Raises:
            StalePlanError: another writer deleted from, compacted or removed the files of every group meanwhile
                (groups whose files changed are left out, the others commit); nothing was committed and the merged
                files were removed. Run it again.
            CommitConflictError: the table was dropped meanwhile.
        """
        from pyspark_ducklake.table.maintenance import compaction as C

        def size(value: int | str | None, name: str) -> int | None:
            return None if value is None else C.parse_size(value, name=name)

        options = C.MergeOptions(
            target_file_size=size(target_file_size, "target_file_size"),
            min_file_size=size(min_file_size, "min_file_size"),
            max_file_size=size(max_file_size, "max_file_size"),
            max_compacted_files=None
            if max_compacted_files is None
            else parse_int(max_compacted_files, "max_compacted_files", minimum=1),
        )
        base, tables, groups = self._plan_maintenance(
            identifier, lambda conn, e, at: C.plan_table(conn, e, at, self.data_path, self.info.format, options)
        )
        if dry_run or not groups:
            report = C.CompactionReport(dry_run=dry_run, groups=tuple(C.group_report(g) for g in groups))
            report.log()
            return report
        snapshot, done = self._rewrite_and_commit(
            base,
            groups,
            rewrite,
            lambda g: C.rewrite_group(g, self.storage_options),
            lambda ctx, pairs, skipped: C.apply_merge(ctx, tables, pairs, skipped),
        )
        report = C.CompactionReport(
            dry_run=False, groups=tuple(C.group_report(g, m) for g, m in done), snapshot_id=snapshot
        )
        report.log()
        return report

    def _plan_maintenance(
        self, identifier: str | Sequence[str] | None, plan: Callable[[Connection, TableEntry, int], list[_G]]
    ) -> tuple[int, dict[int, TableEntry], list[_G]]:
        """The newest snapshot, the table (or every table) by id, and ``plan``'s groups of files for each."""
        with self.engine.connect() as conn:
            base = reader.latest_snapshot(conn).snapshot_id
            if identifier is None:
                entries = reader.tables(conn, base)
            else:
                schema_name, table_name = parse_identifier(identifier)
                entries = [reader.table_by_name(conn, schema_name, table_name, base)]
            groups = [g for e in entries for g in plan(conn, e, base)]
        return base, {e.table_id: e for e in entries}, groups

    def _rewrite_and_commit(
        self,
        base: int,
        groups: list[_G],
        rewrite: Callable[[list[_G]], list[_W]] | None,
        one: Callable[[_G], _W],
        apply: Callable[[CommitContext, list[tuple[_G, _W]], list[int]], None],
    ) -> tuple[int | None, list[tuple[_G, _W]]]:
        """Write each group's new file (all with ``rewrite``, e.g. a Spark job; else ``one`` at a time here, files
        written before a failure removed) and commit them in one snapshot with ``apply``, which leaves out (in its
        list) the groups another writer changed meanwhile: their files are removed. Returns the snapshot and the
        groups committed with their files."""
        written: list[_W] = []
        try:
            if rewrite is not None:
                written = list(rewrite(groups))
            else:
                for g in groups:
                    written.append(one(g))
        except BaseException:
            delete_files(_written_paths(written), self.storage_options)
            raise
        pairs = list(zip(groups, written, strict=True))
        skipped: list[int] = []  # groups whose files another writer changed meanwhile: left for the next run
        result = commit(self, lambda ctx: apply(ctx, pairs, skipped), base=base, files=_written_paths(written))
        delete_files(_written_paths([pairs[i][1] for i in skipped]), self.storage_options)
        return result.snapshot_id, [pair for i, pair in enumerate(pairs) if i not in skipped]

    def rewrite_data_files(
        self,
        identifier: str | Sequence[str] | None = None,
        *,
        delete_threshold: float | str | None = None,
        dry_run: bool = False,
        rewrite: Callable[[list[RewriteGroup]], list[MergedFile | None]] | None = None,
    ) -> RewriteReport:
        """Rewrite data files that have deletes into files without the deleted rows, in one snapshot, exactly as
        DuckDB's ``ducklake_rewrite_data_files``: every row keeps its row id, time travel before the rewrite still
        reads the old files, and the change feed sees no change. The old files and their delete files end at the
        new snapshot (``rewrite_delete:<table_id>``); :meth:`expire_snapshots` and :meth:`cleanup_old_files` remove
        them later. A sorted table's new files are in its sort order.

        Args:
            identifier: the table; None rewrites every table whose ``auto_compact`` option is not false.
            delete_threshold: rewrite a file when at least this share of its rows (0 to 1) is deleted; default: the
                ``rewrite_delete_threshold`` option of the table (its schema, the lake), else 0.95, as DuckDB.
            dry_run: only report what would be rewritten.
            rewrite: runs :func:`~pyspark_ducklake.table.maintenance.rewrite.rewrite_deletes` over the groups
                (e.g. as a Spark job, :func:`pyspark_ducklake.batch.compaction_job.rewrite_data_files`); default: in
                this process.

        Returns:
            A :class:`~pyspark_ducklake.table.maintenance.rewrite.RewriteReport` (``files_processed``,
            ``files_created``, ``rows_removed``, bytes before and after, the new ``snapshot_id``).

        Raises:
            InvalidOptionError: ``delete_threshold`` (or the catalog's option) is not between 0 and 1.
            UnsupportedSortOrderError: a table to rewrite is sorted by a key this library cannot evaluate.
            StalePlanError: another writer deleted from, rewrote or removed the files of every group meanwhile
                (groups whose files changed are left out, the others commit); nothing was committed and the new
                files were removed. Run it again.
            CommitConflictError: the table was dropped meanwhile.
        """
        from pyspark_ducklake.table.maintenance import rewrite as RW

        threshold = None if delete_threshold is None else RW.parse_threshold(delete_threshold)
        base, tables, groups = self._plan_maintenance(
            identifier, lambda conn, e, at: RW.plan_table(conn, e, at, self.data_path, self.info.format, threshold)
        )
        if dry_run or not groups:
            report = RW.RewriteReport(
                dry_run=dry_run, groups=tuple(RW.group_report(g) for g in groups), delete_threshold=threshold
            )
            report.log()
            return report
        snapshot, done = self._rewrite_and_commit(
            base,
            groups,
            rewrite,
            lambda g: RW.rewrite_deletes(g, self.storage_options),
            lambda ctx, pairs, skipped: RW.apply_rewrite(ctx, tables, pairs, skipped),
        )
        report = RW.RewriteReport(
            groups=tuple(RW.group_report(g, w) for g, w in done), snapshot_id=snapshot, delete_threshold=threshold
        )
        report.log()
        return report

    def expire_snapshots(
        self,
        *,
        older_than: dt.datetime | dt.date | dt.timedelta | str | None = None,
        versions: Sequence[int] | None = None,
        dry_run: bool = False,
        batch_size: int = 1000,
        max_batches: int | None = None,
    ) -> ExpireReport:
        """Expire snapshots, as DuckDB's ``ducklake_expire_snapshots``: those committed before ``older_than`` (a time,
        or an age such as ``timedelta(days=7)``), or the ids in ``versions``. The newest snapshot is never expired.

        The metadata only expired snapshots needed goes too: data and delete files no remaining snapshot sees are
        scheduled for deletion (:meth:`cleanup_old_files` deletes them), dropped tables disappear. No snapshot is
        written. Without either argument the catalog's ``expire_older_than`` option applies (else nothing happens).

        Oldest first, ``batch_size`` snapshots per catalog transaction: writers wait for one batch at most, memory
        holds one batch however long the history, and an interrupted run keeps what it committed (run it again to
        finish). ``max_batches`` stops after that many (``report.complete`` says whether more are due).

        Returns:
            An :class:`~pyspark_ducklake.table.maintenance.expire.ExpireReport` (``snapshots``, ``expired``,
            ``files_scheduled``, ``bytes_scheduled``).

        Raises:
            InvalidOptionError: both criteria, ``versions`` naming the current snapshot, a batch size or count < 1.
            CommitFailedError: the catalog refused a batch (earlier batches stay expired).
        """
        from pyspark_ducklake.table.maintenance.expire import expire_snapshots

        return expire_snapshots(
            self.engine,
            self.data_path,
            older_than=older_than,
            versions=versions,
            dry_run=dry_run,
            batch_size=batch_size,
            max_batches=max_batches,
        )

    def cleanup_old_files(
        self,
        *,
        older_than: dt.datetime | dt.date | dt.timedelta | str | None = None,
        cleanup_all: bool = False,
        dry_run: bool = False,
        batch_size: int = 1000,
    ) -> CleanupReport:
        """Delete the files scheduled for deletion (by compaction, expiry, or rewritten delete files) before
        ``older_than`` (a time or an age), or all of them with ``cleanup_all``, as DuckDB's
        ``ducklake_cleanup_old_files``; default age: the catalog's ``delete_older_than`` option, else two days.
        The scheduled files are worked through ``batch_size`` at a time.

        Returns:
            A :class:`~pyspark_ducklake.table.maintenance.expire.CleanupReport` (``files``, ``bytes``).
        """
        from pyspark_ducklake.table.maintenance.expire import cleanup_old_files

        return cleanup_old_files(
            self.engine,
            self.data_path,
            older_than=older_than,
            cleanup_all=cleanup_all,
            dry_run=dry_run,
            storage_options=self.storage_options,
            batch_size=batch_size,
        )

    def retention(self) -> Retention:
        """The lake's retention settings, ``expire_older_than`` and ``delete_older_than`` (None: not set), which
        :meth:`apply_retention`, a sink's retention and DuckDB's maintenance functions follow."""
        from pyspark_ducklake.table.maintenance.retention import retention

        return retention(self.engine)

    def set_retention(self, *, expire_older_than: str | None = None, delete_older_than: str | None = None) -> Retention:
        """Set how long the lake keeps its history: snapshots older than ``expire_older_than`` (``'7 days'``, as
        Delta's ``logRetentionDuration``) are expired, and the files they leave deleted ``delete_older_than`` after
        (default ``'2 days'``, as Delta's ``deletedFileRetentionDuration``); ``''`` unsets one. The same catalog
        rows DuckDB's ``set_option`` writes; no snapshot.

        Raises:
            InvalidOptionError: a value that is not an interval; nothing is set.
        """
        from pyspark_ducklake.table.maintenance.retention import set_retention

        return set_retention(self.engine, expire_older_than=expire_older_than, delete_older_than=delete_older_than)

    def apply_retention(
        self, *, dry_run: bool = False, max_batches: int | None = None
    ) -> tuple[ExpireReport, CleanupReport]:
        """Expire and clean up once by the lake's retention settings (:meth:`set_retention`), as a scheduled job
        would: :meth:`expire_snapshots` then :meth:`cleanup_old_files` without arguments.

        Raises:
            InvalidOptionError: a stored setting that is not an interval.
            CommitFailedError: the catalog refused an expiry batch (earlier batches stay expired).
        """
        from pyspark_ducklake.table.maintenance.retention import apply_retention

        return apply_retention(
            self.engine, self.data_path, storage_options=self.storage_options, dry_run=dry_run, max_batches=max_batches
        )

    # --- schema evolution ------------------------------------------------------------------------------------
    def add_column(
        self, identifier: str | Sequence[str], name: str | Sequence[str], dtype: pa.DataType, *, default: Any = None
    ) -> None:
        """Add a nullable column, or a field of a struct column; old rows read ``default`` (or NULL).

        Args:
            identifier: the table.
            name: the column's name, or a path to a new struct field as DuckDB's ``ADD COLUMN s.c`` spells it:
                ``("s", "c")``, ``("l", "element", "c")`` for a struct in a list, ``("m", "value", "c")`` in a map.
            dtype: its Arrow type.
            default: the value rows written before it read.

        Raises:
            SchemaMismatchError: the name exists already (names are case-insensitive, as in DuckDB), or the path
                leads to something that is not a struct.
            NoSuchColumnError: the path names a column or field that does not exist.
            InvalidIdentifierError: ``name`` is reserved while data inlining is on (as in DuckDB).
        """
        table = self.table(identifier)
        path = (name,) if isinstance(name, str) else tuple(name)
        if not path or not all(isinstance(p, str) for p in path):
            raise InvalidIdentifierError(f"column name {name!r} must be a name or a tuple of names")
        if len(path) == 1:
            check_column_names([path[0]], self.data_inlining_row_limit(table.table_id), self.info.format)
        column = column_from_arrow_field(pa.field(path[-1], dtype), [1])
        validate_columns((column,), f"{table.name}.{'.'.join(path)}")
        commit(
            self,
            lambda ctx: evolution.add_column(ctx, table.entry, column, default, parent_path=path[:-1]),
            base=table.snapshot_id,
        )

    def rename_column(self, identifier: str | Sequence[str], old: str, new: str) -> None:
        """Rename a column; files keep matching it by its id.

        Raises:
            InvalidIdentifierError: ``new`` is reserved while data inlining is on (as in DuckDB).
        """
        table = self.table(identifier)
        check_column_names([new], self.data_inlining_row_limit(table.table_id), self.info.format)
        commit(self, lambda ctx: evolution.rename_column(ctx, table.entry, old, new), base=table.snapshot_id)

    def drop_column(self, identifier: str | Sequence[str], name: str) -> None:
        table = self.table(identifier)
        commit(self, lambda ctx: evolution.drop_column(ctx, table.entry, name), base=table.snapshot_id)

    def set_column_type(self, identifier: str | Sequence[str], name: str, dtype: pa.DataType) -> None:
        """Promote a column's type losslessly (e.g. int32 → int64)."""
        from pyspark_ducklake.catalog.types import ducklake_type

        table = self.table(identifier)
        new_type = ducklake_type(dtype, where=name)
        commit(self, lambda ctx: evolution.set_column_type(ctx, table.entry, name, new_type), base=table.snapshot_id)

    # --- reads -----------------------------------------------------------------------------------------------
    def add_files(
        self,
        identifier: str | Sequence[str],
        paths: str | Sequence[str],
        *,
        allow_missing: bool = False,
        ignore_extra_columns: bool = False,
        hive_partitioning: bool | None = None,
    ) -> int:
        """Register existing Parquet files (written by any tool, without field ids) in the table, as DuckDB's
        ``ducklake_add_data_files`` does: columns are matched by name (case-insensitively) and read through a name
        mapping; the files stay where they are and are never deleted by this library.

        Args:
            identifier: ``"schema.table"`` or a ``(schema, table)`` tuple.
            paths: a path, a glob (``"/data/k=*/*.parquet"``) or a list of them; relative paths are made absolute.
            allow_missing: table columns a file lacks read as their default (else NULL) instead of failing.
            ignore_extra_columns: file columns the table lacks are ignored instead of failing.
            hive_partitioning: take columns from ``name=value`` folders of the path (None: whenever there are
                such folders; False: never).

        Returns:
            The new snapshot id (the current one when every file is empty).

        Raises:
            SchemaMismatchError: a file has a column the table lacks, lacks one the table has, holds a type the
                table's column does not accept (DuckDB's rules), or its path does not fit the table's partitioning;
                nothing is written.
            DataFileError: a file is missing or not Parquet; nothing is written.
            InvalidOptionError: an option is not a bool, a glob matches nothing; nothing is written.
            EncryptedLakeError: the lake is encrypted: added files are plaintext without a key, which neither DuckDB
                nor this library reads there; nothing is written.
            CommitFailedError, CommitConflictError, CommitStateUnknownError: see the commit protocol.
        """
        from pyspark_ducklake.table.add_files import AddFilesOptions, check_flag
        from pyspark_ducklake.table.add_files import add_files as _add_files

        options = AddFilesOptions(
            check_flag(allow_missing, "allow_missing"),
            check_flag(ignore_extra_columns, "ignore_extra_columns"),
            None if hive_partitioning is None else check_flag(hive_partitioning, "hive_partitioning"),
        )
        return _add_files(self, self.table(identifier), paths, options)

    def resolve_snapshot(self, snapshot: int | None = None, timestamp: dt.datetime | str | None = None) -> int:
        with self.engine.connect() as conn:
            if snapshot is not None and timestamp is not None:
                raise InvalidOptionError("pass either snapshot or timestamp, not both")
            if snapshot is not None:
                return reader.snapshot_by_id(conn, _snapshot_id(snapshot)).snapshot_id
            if timestamp is not None:
                when = dt.datetime.fromisoformat(timestamp) if isinstance(timestamp, str) else timestamp
                return reader.snapshot_at_time(conn, when).snapshot_id
            return reader.latest_snapshot(conn).snapshot_id

    def scan(
        self,
        identifier: str | Sequence[str],
        *,
        snapshot: int | None = None,
        timestamp: dt.datetime | str | None = None,
        columns: Sequence[str] | None = None,
        filter: Filter | None = None,
    ) -> pa.Table:
        """Read the table at the latest snapshot, a snapshot id, or a point in time.

        ``columns`` may include the virtual columns ``rowid`` and ``snapshot_id``. ``filter`` is a pyarrow DNF
        filter (``(column, op, value)`` tuples, or lists of them OR-ed) or an Expression, evaluated by pyarrow;
        files whose statistics show that no row passes it are skipped (:mod:`pyspark_ducklake.table.pruning`).

        Raises:
            NoSuchTableError: the table does not exist at the snapshot.
            NoSuchColumnError: ``columns`` or ``filter`` name a column the table does not have.
            InvalidOptionError: the filter is malformed, or pyarrow cannot evaluate it on the column's type.
        """
        snap = self.resolve_snapshot(snapshot, timestamp)
        schema_name, table_name = parse_identifier(identifier)
        with self.engine.connect() as conn:
            entry = reader.table_by_name(conn, schema_name, table_name, snap)
            schema = reader.table_schema(conn, entry.table_id, snap)
            known = [*schema.names(), *virtual_names(schema)]
            filter_columns = [] if isinstance(filter, pc.Expression) else _filter_columns(filter)
            for c in list(columns or []) + filter_columns:
                if c not in known:
                    raise NoSuchColumnError(f"column {c!r} is not in {schema_name}.{table_name}: {known}")
            # An Expression's columns are unknown: it reads them all.
            read = None if columns is None or isinstance(filter, pc.Expression) else [*columns, *filter_columns]
            plan = plan_scan(conn, entry, snap, self.data_path, fmt=self.info.format, filters=filter, columns=read)
        return execute_plan(
            plan,
            columns=list(columns) if columns is not None else None,
            filters=filter,
            storage_options=self.storage_options,
        )


def _snapshot_id(snapshot: object) -> int:
    """A ``snapshot`` argument: an int (never a float, a bool or text; the Spark options take text).

    Raises:
        InvalidOptionError: anything else, or a negative id.
    """
    return parse_snapshot_id(snapshot, "snapshot", text=False)


def _written_paths(written: Sequence[MergedFile | None]) -> list[str]:
    return [w.written.path for w in written if w is not None]


def _filter_columns(filter: Any) -> list[str]:
    """Column names in a pyarrow DNF filter (``[(col, op, value), ...]`` or a list of such lists)."""
    if not filter:
        return []
    out: list[str] = []
    for item in filter:
        if isinstance(item, tuple) and item and isinstance(item[0], str):
            out.append(item[0])
        elif isinstance(item, list):
            out.extend(_filter_columns(item))
    return out


def _conjunction(filter: Filter | pc.Expression) -> Filter | None:
    """The filter when it is one conjunction of ``(column, op, value)`` tuples (usable to prune files), else None."""
    if isinstance(filter, list) and all(isinstance(t, tuple) and len(t) == 3 for t in filter):
        return filter
    return None


def _txn(app_id: Any, version: Any) -> tuple[str, int] | None:
    """``(txn_app_id, txn_version)`` checked: both or neither, a non-empty string and an integer >= 0.

    Raises:
        InvalidOptionError: one without the other, or a bad value.
    """
    if app_id is None and version is None:
        return None
    if app_id is None or version is None:
        raise InvalidOptionError("txn_app_id and txn_version go together: pass both or neither")
    if not isinstance(app_id, str) or not app_id:
        raise InvalidOptionError(f"txn_app_id must be a non-empty string, got {app_id!r}")
    if isinstance(version, bool) or not isinstance(version, (int, np.integer)) or version < 0:
        raise InvalidOptionError(
            f"txn_version must be an integer >= 0, got {version!r} (txn_app_id and txn_version: pass both or neither)"
        )
    return app_id, int(version)


def _check_filter_columns(table: LakeTable, filter: Filter | pc.Expression) -> None:
    known = [*table.table_schema.names(), *virtual_names(table.table_schema)]
    for c in [] if isinstance(filter, pc.Expression) else _filter_columns(filter):
        if c not in known:
            raise NoSuchColumnError(f"column {c!r} is not in {table.name}: {known}")


CONNECT_ARGUMENTS = (
    "catalog",
    "data_path",
    "data_inlining_row_limit",
    "max_retry_count",
    "retry_wait_ms",
    "retry_backoff",
    "reconnect_timeout",
    "storage_options",
    "author",
    "encrypted",
    "format_version",
    "duckdb_storage_version",
)


def connect(
    catalog: str,
    data_path: str | None = None,
    *,
    data_inlining_row_limit: int | str | None = None,
    max_retry_count: int | str | None = None,
    retry_wait_ms: int | str | None = None,
    retry_backoff: float | str | None = None,
    reconnect_timeout: float | str | None = None,
    storage_options: dict[str, Any] | None = None,
    author: str | None = None,
    encrypted: bool | str | None = None,
    format_version: str | None = None,
    duckdb_storage_version: str | None = None,
    **unknown: Any,
) -> Lake:
    """Open a lake, creating the catalog when the database is empty (then ``data_path`` is required).

    ``encrypted=True`` creates the lake encrypted (DuckDB's ``ATTACH ... (ENCRYPTED)``): every data and delete file
    is encrypted with its own key, kept in the catalog. On an existing lake it must match the lake's setting.

    ``format_version`` is the DuckLake format of a new catalog: ``"1.0"`` (the default; DuckDB 1.5 and 2.0 open it)
    or ``"1.1"`` (DuckDB 2.0's default; DuckDB 1.5 cannot open it). An existing catalog keeps its version, which the
    option must then match; :meth:`Lake.migrate` moves a 1.0 catalog to 1.1.

    ``duckdb_storage_version`` (DuckDB-file catalogs): the DuckDB storage version a new ``.ducklake`` file is written
    in, ``"v1.5.0"`` by default so that DuckDB 1.5 opens it even when this library runs on DuckDB 2.0; ``"latest"``
    writes the running DuckDB's own format.

    Numbers may also be given as strings (``max_retry_count="3"``, ``reconnect_timeout="5 min"``), as Spark options are.

    Raises:
        CatalogUnreachableError: the catalog database cannot be reached.
        NotADuckLakeCatalogError: the database holds other tables, not a DuckLake.
        UnsupportedSpecVersionError: the catalog is of another DuckLake format version.
        InvalidOptionError: an option that does not parse, or a misspelt keyword argument (naming the closest valid
            one).
    """
    # a misspelt keyword is an InvalidOptionError naming the right one, not Python's bare TypeError
    check_keywords(unknown, CONNECT_ARGUMENTS, "connect()")
    parsed = check_options(
        {
            "data_inlining_row_limit": data_inlining_row_limit,
            "max_retry_count": max_retry_count,
            "retry_wait_ms": retry_wait_ms,
            "retry_backoff": retry_backoff,
            "reconnect_timeout": reconnect_timeout,
            "storage_options": storage_options,
            "author": author,
            "encrypted": encrypted,
            "format_version": format_version,
            "duckdb_storage_version": duckdb_storage_version,
        },
        Entry.CONNECT,
    )
    defaults = RetryConfig()
    retry = RetryConfig(
        max_retry_count=cast(int, parsed.get("max_retry_count", defaults.max_retry_count)),
        retry_wait_ms=cast(int, parsed.get("retry_wait_ms", defaults.retry_wait_ms)),
        retry_backoff=cast(float, parsed.get("retry_backoff", defaults.retry_backoff)),
        reconnect_timeout=cast(float, parsed.get("reconnect_timeout", defaults.reconnect_timeout)),
    )
    return Lake(
        catalog,
        data_path,
        data_inlining_row_limit=cast("int | None", parsed.get("data_inlining_row_limit")),
        retry=retry,
        storage_options=storage_options,
        author=author,
        encrypted=cast("bool | None", parsed.get("encrypted")),
        format_version=cast("FormatVersion | None", parsed.get("format_version")),
        duckdb_storage_version=cast("str | None", parsed.get("duckdb_storage_version")),
    )


__all__ = [
    "Column",
    "Lake",
    "LakeTable",
    "NoSuchSchemaError",
    "connect",
    "format_identifier",
    "np",
    "parse_identifier",
]
