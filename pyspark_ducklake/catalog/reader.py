"""Reading the catalog as of one snapshot. Every query binds its values; nothing is spliced into SQL."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator, Sequence
from typing import Any

from sqlalchemy import (
    BigInteger,
    CompoundSelect,
    Connection,
    MetaData,
    Select,
    Table,
    and_,
    cast,
    func,
    or_,
    select,
    union,
    union_all,
)
from sqlalchemy.sql.elements import ColumnElement

from pyspark_ducklake.catalog import dialects
from pyspark_ducklake.catalog import tables as T
from pyspark_ducklake.catalog.corrupt import corrupt
from pyspark_ducklake.catalog.entries import (
    DataFileEntry,
    DeleteFileEntry,
    FileTotals,
    SchemaEntry,
    Snapshot,
    SnapshotInfo,
    TableEntry,
)
from pyspark_ducklake.catalog.format_version import FormatVersion, catalog_format
from pyspark_ducklake.catalog.name_mapping import with_mappings
from pyspark_ducklake.catalog.paths import checked_delete_file
from pyspark_ducklake.catalog.types import Column, TableSchema
from pyspark_ducklake.exceptions import (
    EncryptedLakeError,
    NoSuchSchemaError,
    NoSuchSnapshotError,
    NoSuchTableError,
    NotATableError,
)
from pyspark_ducklake.io.deletion_vector import delete_file_format

_IN_CHUNK = 500  # ids bound into one IN (...): statements stay small (SQLite allows 32,766 parameters)


def visible(table: Table, snapshot_id: int) -> ColumnElement[bool]:
    """``begin_snapshot <= S AND (end_snapshot IS NULL OR end_snapshot > S)``."""
    return and_(
        table.c.begin_snapshot <= snapshot_id,
        or_(table.c.end_snapshot.is_(None), table.c.end_snapshot > snapshot_id),
    )


def visible_parts(query: Select[Any], table: Table, snapshot_id: int) -> CompoundSelect:
    """``query`` (over ``table``, filtered by table id) restricted to the rows visible at the snapshot, as the union
    of two index ranges on ``(table_id, end_snapshot)``: live rows (``end_snapshot IS NULL``) and rows ended after
    it, each begun by it. With the OR of :func:`visible` SQLite walked every row the table ever had."""
    begun = table.c.begin_snapshot <= snapshot_id
    return union_all(
        query.where(begun, table.c.end_snapshot.is_(None)), query.where(begun, table.c.end_snapshot > snapshot_id)
    )


def _snapshot(row: Any) -> Snapshot:
    """Raises: CorruptCatalogError: a NULL where DuckDB writes an id (schema version, next catalog or file id)."""
    for name in ("schema_version", "next_catalog_id", "next_file_id"):
        if getattr(row, name) is None:
            error = corrupt(
                f"ducklake_snapshot.{name} of snapshot {row.snapshot_id}", None, "an id (DuckDB writes one for each)"
            )
            error.snapshot_id = row.snapshot_id  # named already
            raise error
    return Snapshot(row.snapshot_id, row.snapshot_time, row.schema_version, row.next_catalog_id, row.next_file_id)


def latest_snapshot(conn: Connection) -> Snapshot:
    """The newest snapshot.

    Raises:
        NoSuchSnapshotError: the catalog has no snapshot at all.
    """
    s = T.ducklake_snapshot
    row = conn.execute(select(s).order_by(s.c.snapshot_id.desc()).limit(1)).first()
    if row is None:
        raise NoSuchSnapshotError("the catalog has no snapshots; it was not initialised")
    return _snapshot(row)


def head_and_format(conn: Connection) -> tuple[Snapshot, FormatVersion]:
    """The newest snapshot and the catalog's format version, in one statement (a commit reads both first).

    Raises:
        NoSuchSnapshotError: the catalog has no snapshot at all.
        UnsupportedSpecVersionError: the version row is missing or names a version this library does not know.
    """
    s, m = T.ducklake_snapshot, T.ducklake_metadata
    version = select(m.c.value).where(m.c.key == "version", m.c.scope.is_(None)).limit(1).scalar_subquery()
    row = conn.execute(select(s, version.label("ducklake_version")).order_by(s.c.snapshot_id.desc()).limit(1)).first()
    if row is None:
        raise NoSuchSnapshotError("the catalog has no snapshots; it was not initialised")
    tag = row.ducklake_version
    return _snapshot(row), catalog_format("" if tag is None else tag, "(its ducklake_metadata 'version' row)")


def snapshot_by_id(conn: Connection, snapshot_id: int) -> Snapshot:
    """The snapshot with this id.

    Raises:
        NoSuchSnapshotError: no such snapshot (never existed, or expired).
    """
    s = T.ducklake_snapshot
    row = conn.execute(select(s).where(s.c.snapshot_id == snapshot_id)).first()
    if row is None:
        raise NoSuchSnapshotError(f"no snapshot with id {snapshot_id}; list them with lake.snapshots()")
    return _snapshot(row)


def snapshot_at_time(conn: Connection, when: dt.datetime) -> Snapshot:
    """The newest snapshot committed at or before ``when`` (naive means UTC).

    Raises:
        NoSuchSnapshotError: every snapshot is newer than ``when``.
    """
    when = when if when.tzinfo is not None else when.replace(tzinfo=dt.timezone.utc)
    s = T.ducklake_snapshot
    query = select(s).where(dialects.time_at_most(conn, s.c.snapshot_time, when))
    for snap in _snapshots_in_pages(conn, query, newest_first=True):
        if snap.snapshot_time is not None and snap.snapshot_time <= when:
            return snap
    raise NoSuchSnapshotError(f"no snapshot at or before {when.isoformat()}; list them with lake.snapshots()")


def first_snapshot_from(conn: Connection, when: dt.datetime) -> Snapshot | None:
    """The oldest snapshot committed at or after ``when`` (naive means UTC), as DuckDB's ``table_changes`` takes a
    start time; None when every snapshot is older."""
    when = when if when.tzinfo is not None else when.replace(tzinfo=dt.timezone.utc)
    s = T.ducklake_snapshot
    query = select(s).where(dialects.time_at_least(conn, s.c.snapshot_time, when))
    for snap in _snapshots_in_pages(conn, query, newest_first=False):
        if snap.snapshot_time is not None and snap.snapshot_time >= when:
            return snap
    return None


def _snapshots_in_pages(conn: Connection, query: Any, *, newest_first: bool) -> Iterator[Snapshot]:
    """The snapshots ``query`` selects, in id order, fetched a page at a time (a small one first: the caller
    mostly wants the first)."""
    s = T.ducklake_snapshot
    last: int | None = None
    page = 8
    while True:
        q = query
        if last is not None:
            q = q.where(s.c.snapshot_id < last if newest_first else s.c.snapshot_id > last)
        rows = conn.execute(q.order_by(s.c.snapshot_id.desc() if newest_first else s.c.snapshot_id).limit(page))
        snaps = [_snapshot(r) for r in rows]
        yield from snaps
        if len(snaps) < page:
            return
        last, page = snaps[-1].snapshot_id, 500


def oldest_unbroken(conn: Connection) -> int:
    """The oldest snapshot from which on none is missing (snapshot ids are consecutive, so a missing one was
    expired): where a reader of every change still recorded can start. -1 when the catalog has none."""
    s = T.ducklake_snapshot
    previous = s.alias("previous")
    gap_before = ~select(previous.c.snapshot_id).where(previous.c.snapshot_id == s.c.snapshot_id - 1).exists()
    found = conn.execute(select(func.max(s.c.snapshot_id)).where(gap_before)).scalar()
    return -1 if found is None else int(found)


def oldest_snapshot(conn: Connection) -> Snapshot:
    """The oldest snapshot not expired.

    Raises:
        NoSuchSnapshotError: the catalog has no snapshot at all.
    """
    s = T.ducklake_snapshot
    row = conn.execute(select(s).order_by(s.c.snapshot_id).limit(1)).first()
    if row is None:
        raise NoSuchSnapshotError("the catalog has no snapshots; it was not initialised")
    return _snapshot(row)


def snapshots(conn: Connection, *, limit: int | None = None, since: int | None = None) -> list[SnapshotInfo]:
    """Snapshots with their changes, oldest first: every one, those from ``since`` on (inclusive), and with
    ``limit`` at most that many: the first ones from ``since`` on, or without ``since`` the newest ones (as
    Delta's ``DESCRIBE HISTORY ... LIMIT``). Bounded in SQL: a limited listing reads only its rows."""
    s, c = T.ducklake_snapshot, T.ducklake_snapshot_changes
    q = select(s, c.c.changes_made, c.c.author, c.c.commit_message, c.c.commit_extra_info).select_from(
        s.outerjoin(c, s.c.snapshot_id == c.c.snapshot_id)
    )
    if since is not None:
        q = q.where(s.c.snapshot_id >= since)
    newest = limit is not None and since is None
    q = q.order_by(s.c.snapshot_id.desc() if newest else s.c.snapshot_id)
    if limit is not None:
        q = q.limit(limit)
    out = [
        SnapshotInfo(_snapshot(r), r.changes_made, r.author, r.commit_message, r.commit_extra_info)
        for r in conn.execute(q)
    ]
    return out[::-1] if newest else out


def expired_between(conn: Connection, first: int, last: int) -> tuple[int, int] | None:
    """The first run of snapshot ids missing from ``[first, last]`` (expired; ids are consecutive), as
    ``(from, to)``, or None when every one exists. Counts the range by the primary key; looks for the run only
    when some are missing."""
    if first > last:
        return None
    s = T.ducklake_snapshot
    inside = and_(s.c.snapshot_id >= first, s.c.snapshot_id <= last)
    if conn.execute(select(func.count()).where(inside)).scalar_one() == last - first + 1:
        return None
    oldest = conn.execute(select(func.min(s.c.snapshot_id)).where(inside)).scalar()
    if oldest is None:
        return first, last
    if oldest > first:
        return first, int(oldest) - 1
    later = s.alias("later")
    gap = conn.execute(
        select(func.min(s.c.snapshot_id + 1)).where(
            inside,
            s.c.snapshot_id < last,
            ~select(later.c.snapshot_id).where(later.c.snapshot_id == s.c.snapshot_id + 1).exists(),
        )
    ).scalar()
    if gap is None:  # expired meanwhile and a newer one committed: count again next time
        return None
    after = conn.execute(
        select(func.min(s.c.snapshot_id)).where(s.c.snapshot_id > gap, s.c.snapshot_id <= last)
    ).scalar()
    return int(gap), (last if after is None else int(after) - 1)


def snapshot_changes_after(conn: Connection, snapshot_id: int) -> list[SnapshotInfo]:
    """Snapshots newer than ``snapshot_id`` with their changes (the commit's conflict check)."""
    s, c = T.ducklake_snapshot, T.ducklake_snapshot_changes
    q = (
        select(s, c.c.changes_made, c.c.author, c.c.commit_message, c.c.commit_extra_info)
        .select_from(s.outerjoin(c, s.c.snapshot_id == c.c.snapshot_id))
        .where(s.c.snapshot_id > snapshot_id)
        .order_by(s.c.snapshot_id)
    )
    return [
        SnapshotInfo(_snapshot(r), r.changes_made, r.author, r.commit_message, r.commit_extra_info)
        for r in conn.execute(q)
    ]


def metadata_value(conn: Connection, key: str, scope: str | None = None, scope_id: int | None = None) -> str | None:
    m = T.ducklake_metadata
    cond = m.c.key == key
    cond = and_(cond, m.c.scope.is_(None) if scope is None else m.c.scope == scope)
    if scope_id is not None:
        cond = and_(cond, m.c.scope_id == scope_id)
    row = conn.execute(select(m.c.value).where(cond).limit(1)).first()
    return None if row is None else row[0]


def format_version(conn: Connection) -> FormatVersion:
    """The catalog's format version, as it is now (DuckDB may have migrated it since the lake was opened).

    Raises:
        UnsupportedSpecVersionError: the catalog's version row is missing or names a version this library does not
            know.
    """
    tag = metadata_value(conn, "version")
    return catalog_format("" if tag is None else tag, "(its ducklake_metadata 'version' row)")


def scoped_metadata_value(conn: Connection, key: str, table: TableEntry) -> str | None:
    """A persisted option of the table, else of its schema, else of the lake (None when none is set): DuckDB's
    order (``TryGetScopedConfigOption``)."""
    for scope, scope_id in (("table", table.table_id), ("schema", table.schema.schema_id)):
        value = metadata_value(conn, key, scope, scope_id)
        if value is not None:
            return value
    return metadata_value(conn, key)


def write_deletion_vectors(conn: Connection, table: TableEntry) -> str | None:
    """The persisted ``write_deletion_vectors`` option (see :func:`scoped_metadata_value`)."""
    return scoped_metadata_value(conn, "write_deletion_vectors", table)


def lake_encrypted(conn: Connection) -> bool:
    """Whether the catalog says ``encrypted = true`` (DuckDB's ``ATTACH ... (ENCRYPTED)``)."""
    return (metadata_value(conn, "encrypted") or "").strip().lower() == "true"


def file_key(row: Any, encrypted: bool, path: str) -> str | None:
    """The key a data or delete file row is read with: its ``encryption_key`` in an encrypted lake, else None.

    Like DuckDB, an unencrypted lake ignores the column and puffin deletion vectors are never encrypted.

    Raises:
        EncryptedLakeError: the lake is encrypted and a Parquet file has no key (DuckDB refuses it too).
    """
    if not encrypted or (getattr(row, "format", None) or "parquet").lower() != "parquet":
        return None
    key: str | None = row.encryption_key
    if not key:
        raise EncryptedLakeError(
            f"the lake is encrypted, but file {path} has no encryption_key in the catalog (DuckDB refuses it too: "
            "'Database is encrypted, but file does not have an encryption key'); the file was registered by a "
            "writer that ignored the lake's encryption: remove it with DuckDB or restore its key"
        )
    return key


def schema_by_name(conn: Connection, name: str, snapshot_id: int) -> SchemaEntry:
    """Raises: NoSuchSchemaError."""
    s = T.ducklake_schema
    row = conn.execute(select(s).where(s.c.schema_name == name, visible(s, snapshot_id))).first()
    if row is None:
        raise NoSuchSchemaError(f"schema {name!r} does not exist; create it with lake.create_schema({name!r})")
    return SchemaEntry(row.schema_id, row.schema_name, row.path or "", bool(row.path_is_relative is not False))


def schemas(conn: Connection, snapshot_id: int) -> list[SchemaEntry]:
    s = T.ducklake_schema
    rows = conn.execute(select(s).where(visible(s, snapshot_id)).order_by(s.c.schema_id))
    return [SchemaEntry(r.schema_id, r.schema_name, r.path or "", r.path_is_relative is not False) for r in rows]


def table_by_name(conn: Connection, schema: str, name: str, snapshot_id: int) -> TableEntry:
    """Raises: NoSuchSchemaError, NoSuchTableError."""
    sch = schema_by_name(conn, schema, snapshot_id)
    t = T.ducklake_table
    row = conn.execute(
        select(t).where(t.c.schema_id == sch.schema_id, t.c.table_name == name, visible(t, snapshot_id))
    ).first()
    if row is None:
        v = T.ducklake_view
        view = conn.execute(
            select(v.c.view_id).where(v.c.schema_id == sch.schema_id, v.c.view_name == name, visible(v, snapshot_id))
        ).first()
        if view is not None:
            raise NotATableError(
                f"{schema}.{name} is a view, not a table: this library reads and writes tables only; query the view "
                "with DuckDB, or read the tables it selects from"
            )
        raise NoSuchTableError(
            f"table {schema}.{name} does not exist at snapshot {snapshot_id}; create it with lake.create_table()"
        )
    return _table(row, sch)


def _table(row: Any, sch: SchemaEntry) -> TableEntry:
    return TableEntry(
        row.table_id,
        row.table_uuid,
        sch,
        row.table_name,
        row.path or "",
        row.path_is_relative is not False,
        row.begin_snapshot,
    )


def tables(conn: Connection, snapshot_id: int, schema: str | None = None) -> list[TableEntry]:
    out: list[TableEntry] = []
    for sch in schemas(conn, snapshot_id):
        if schema is not None and sch.schema_name != schema:
            continue
        t = T.ducklake_table
        rows = conn.execute(select(t).where(t.c.schema_id == sch.schema_id, visible(t, snapshot_id)))
        out.extend(_table(r, sch) for r in rows)
    return out


def table_schema(conn: Connection, table_id: int, snapshot_id: int) -> TableSchema:
    """The table's columns (nested fields as children) visible at the snapshot."""
    c = T.ducklake_column
    rows = conn.execute(
        select(c).where(c.c.table_id == table_id, visible(c, snapshot_id)).order_by(c.c.column_order, c.c.column_id)
    ).all()
    return build_schema(rows)


def build_schema(rows: Any) -> TableSchema:
    by_parent: dict[int | None, list[Any]] = {}
    for r in rows:
        by_parent.setdefault(r.parent_column, []).append(r)

    def build(r: Any) -> Column:
        kids = tuple(build(k) for k in by_parent.get(r.column_id, []))
        return Column(
            r.column_id,
            r.column_name,
            r.column_type,
            # NOT NULL binds top-level columns only: DuckDB stores nulls_allowed=false for struct fields it adds or
            # renames with ALTER, yet they hold NULLs.
            r.nulls_allowed is not False or r.parent_column is not None,
            kids,
            r.initial_default,
            r.default_value,
        )

    return TableSchema(tuple(build(r) for r in by_parent.get(None, [])))


def columns_changed_since_creation(conn: Connection, table: TableEntry) -> bool:
    """Whether any column of the table was added, altered, renamed or dropped after the table was created.

    If not, every data file holds exactly the table's columns in the table's types (files are written with the
    schema of their snapshot).
    """
    c = T.ducklake_column
    row = conn.execute(
        select(c.c.column_id)
        .where(
            c.c.table_id == table.table_id,
            or_(c.c.begin_snapshot != table.begin_snapshot, c.c.end_snapshot.is_not(None)),
        )
        .limit(1)
    ).first()
    return row is not None


def table_schema_version_snapshot(conn: Connection, table_id: int, schema_version: int) -> int | None:
    """The snapshot at which a table's schema version began (for the columns of an old inlined table)."""
    v = T.ducklake_schema_versions
    row = conn.execute(
        select(func.min(v.c.begin_snapshot)).where(v.c.table_id == table_id, v.c.schema_version == schema_version)
    ).first()
    if row is not None and row[0] is not None:
        return int(row[0])
    s = T.ducklake_snapshot
    row = conn.execute(select(func.min(s.c.snapshot_id)).where(s.c.schema_version == schema_version)).first()
    return None if row is None or row[0] is None else int(row[0])


def table_schema_version(conn: Connection, table_id: int, snapshot_id: int) -> int:
    """The schema version of the table's latest DDL at or before the snapshot."""
    v = T.ducklake_schema_versions
    row = conn.execute(
        select(func.max(v.c.schema_version)).where(v.c.table_id == table_id, v.c.begin_snapshot <= snapshot_id)
    ).first()
    if row is not None and row[0] is not None:
        return int(row[0])
    row = conn.execute(select(func.max(v.c.schema_version)).where(v.c.begin_snapshot <= snapshot_id)).first()
    return 0 if row is None or row[0] is None else int(row[0])


def data_files(
    conn: Connection,
    table: TableEntry,
    snapshot_id: int,
    data_path: str,
    fmt: FormatVersion,
    *,
    among: Select[Any] | CompoundSelect | None = None,
) -> list[DataFileEntry]:
    """Data files of the table visible at the snapshot, each with its live delete file (with their
    ``row_group_count`` on catalogs of format ``fmt`` that have one, for reads to check against the footers);
    ``among``: only those whose id that subquery selects."""
    d, x = T.data_file_table(fmt), T.delete_file_table(fmt)
    file_query = select(d).where(d.c.table_id == table.table_id)
    delete_query = select(x).where(x.c.table_id == table.table_id)
    if among is not None:
        file_query = file_query.where(d.c.data_file_id.in_(among))
        delete_query = delete_query.where(x.c.data_file_id.in_(among))
    # sorted here: an ORDER BY makes SQLite walk the (table_id, data_file_id) index over every file ever
    files = sorted(conn.execute(visible_parts(file_query, d, snapshot_id)).all(), key=lambda r: int(r.data_file_id))
    deletes: dict[int, list[Any]] = {}
    for dr in conn.execute(visible_parts(delete_query, x, snapshot_id)):
        deletes.setdefault(dr.data_file_id, []).append(dr)
    base = table_path(table, data_path)
    encrypted = lake_encrypted(conn) if files else False

    def delete_entry(dr: Any, earlier: tuple[DeleteFileEntry, ...] = ()) -> DeleteFileEntry:
        dpath = delete_file_path(base, dr, data_path)
        return DeleteFileEntry(
            dr.delete_file_id,
            dr.data_file_id,
            dpath,
            dr.delete_count or 0,
            dr.file_size_bytes,
            dr.footer_size,
            dr.begin_snapshot,
            dr.partial_max,
            delete_file_format(dr.format, dr.path),
            file_key(dr, encrypted, dpath),
            row_group_count(dr, fmt),
            earlier,
        )

    out = []
    for r in files:
        rows = sorted(deletes.get(r.data_file_id, ()), key=lambda d: (int(d.begin_snapshot), int(d.delete_file_id)))
        delete = None
        if rows:  # the newest; any others (DuckDB's flush of a rewritten file's deletes) ride along
            delete = delete_entry(rows[-1], tuple(delete_entry(d) for d in rows[:-1]))
        path = resolve(base, r.path, r.path_is_relative)
        out.append(
            DataFileEntry(
                r.data_file_id,
                path,
                r.record_count or 0,
                r.file_size_bytes,
                r.footer_size,
                r.row_id_start,
                r.begin_snapshot,
                r.partial_max,
                r.mapping_id,
                delete,
                r.partition_id,
                file_key(r, encrypted, path),
                row_group_count=row_group_count(r, fmt),
            )
        )
    return with_mappings(conn, out)


def file_totals(
    conn: Connection, table_ids: Sequence[int], snapshot_id: int, fmt: FormatVersion
) -> dict[int, FileTotals]:
    """Per table id: its data files and delete files visible at the snapshot, counted and summed in SQL, as
    DuckDB's ``GetTableSizes`` counts them (every visible delete file); one row per table and kind comes back (a
    sum is cast back to BIGINT: PostgreSQL sums a BIGINT as NUMERIC)."""
    out: dict[int, FileTotals] = {}
    for table_id in table_ids:
        values: list[int] = []
        for files in (T.data_file_table(fmt), T.delete_file_table(fmt)):
            rows = visible_parts(
                select(files.c.file_size_bytes).where(files.c.table_id == table_id), files, snapshot_id
            )
            sizes = rows.subquery()
            count, size = conn.execute(
                select(func.count(), cast(func.coalesce(func.sum(sizes.c.file_size_bytes), 0), BigInteger))
            ).one()
            values += [int(count), int(size)]
        out[table_id] = FileTotals(*values)
    return out


def row_group_count(row: Any, fmt: FormatVersion) -> int | None:
    """A data or delete file row's ``row_group_count`` (None on a 1.0 catalog, which has no such column, or NULL)."""
    if not fmt.row_group_counts or row.row_group_count is None:
        return None
    return int(row.row_group_count)


def table_path(table: TableEntry, data_path: str) -> str:
    """The table's folder: ``data_path + schema.path + table.path`` when relative."""
    schema_base = resolve(data_path, table.schema.path, table.schema.path_is_relative)
    path = resolve(schema_base, table.path, table.path_is_relative)
    return path if path.endswith("/") or not path else path + "/"


def delete_file_path(table_dir: str, row: Any, data_path: str) -> str:
    """The absolute path of a ``ducklake_delete_file`` row, checked to lie inside the lake.

    Raises:
        DataFileError: the row points outside the data path and the table's folder.
    """
    return checked_delete_file(resolve(table_dir, row.path, row.path_is_relative), table_dir, data_path)


def resolve(base: str, path: str, is_relative: bool | None) -> str:
    if is_relative is False:
        return path
    if base and not base.endswith("/"):
        base += "/"
    return base + (path or "")


def has_table(conn: Connection, name: str) -> bool:
    return dialects.has_table(conn, name)


def column_names(conn: Connection, name: str) -> list[str]:
    return dialects.column_names(conn, name)


def inlined_tables(conn: Connection, table_id: int) -> list[tuple[str, int]]:
    """Registered inlined-data tables of a table: ``(table_name, schema_version)``, oldest first."""
    i = T.ducklake_inlined_data_tables
    rows = conn.execute(
        select(i.c.table_name, i.c.schema_version).where(i.c.table_id == table_id).order_by(i.c.schema_version)
    )
    return [(r.table_name, int(r.schema_version)) for r in rows]


def inlined_rows_waiting(conn: Connection, table_id: int, fmt: FormatVersion) -> tuple[int, dt.datetime | None]:
    """Rows (all versions) in the table's inlined-data tables (of a catalog of format ``fmt``), and the commit time
    of the oldest one's snapshot."""
    count = 0
    oldest: int | None = None
    for name, _ in inlined_tables(conn, table_id):
        if has_table(conn, name):
            t = Table(name, MetaData(), *T.inlined_system_columns(fmt.inlined_system_columns))
            n, first = conn.execute(select(func.count(), func.min(t.c.begin_snapshot))).one()
            count += int(n)
            if first is not None:
                oldest = int(first) if oldest is None else min(oldest, int(first))
    if oldest is None:
        return count, None
    s = T.ducklake_snapshot
    return count, conn.execute(select(s.c.snapshot_time).where(s.c.snapshot_id == oldest)).scalar()


def table_stats(conn: Connection, table_id: int) -> Any:
    s = T.ducklake_table_stats
    return conn.execute(select(s).where(s.c.table_id == table_id)).first()


def table_column_stats(conn: Connection, table_id: int) -> dict[int, Any]:
    s = T.ducklake_table_column_stats
    return {r.column_id: r for r in conn.execute(select(s).where(s.c.table_id == table_id))}


def file_column_stats(
    conn: Connection, table_id: int, column_ids: list[int], data_file_ids: Sequence[int]
) -> dict[int, dict[int, Any]]:
    """``{data_file_id: {column_id: row}}`` of these files, for pruning."""
    s = T.ducklake_file_column_stats
    out: dict[int, dict[int, Any]] = {}
    for i in range(0, len(data_file_ids), _IN_CHUNK):
        chunk = list(data_file_ids[i : i + _IN_CHUNK])
        query = select(s).where(s.c.data_file_id.in_(chunk), s.c.table_id == table_id, s.c.column_id.in_(column_ids))
        for r in conn.execute(query):
            out.setdefault(r.data_file_id, {})[r.column_id] = r
    return out


def column_types_ever(conn: Connection, table_id: int, column_ids: list[int]) -> dict[int, set[str]]:
    """``{column_id: types}``: every type each column has had (statistics keep the type of their file)."""
    c = T.ducklake_column
    out: dict[int, set[str]] = {}
    query = select(c.c.column_id, c.c.column_type).where(c.c.table_id == table_id, c.c.column_id.in_(column_ids))
    for r in conn.execute(query.distinct()):
        out.setdefault(int(r.column_id), set()).add(str(r.column_type))
    return out


def name_mapping(conn: Connection, mapping_id: int) -> list[Any]:
    n = T.ducklake_name_mapping
    return list(conn.execute(select(n).where(n.c.mapping_id == mapping_id).order_by(n.c.column_id)))


def referenced_file_names(conn: Connection, names: list[str]) -> set[str]:
    """Which of these file names (uuid-named, so unique) any data or delete file row references."""
    out: set[str] = set()
    for table in (T.ducklake_data_file, T.ducklake_delete_file):
        for i in range(0, len(names), 500):
            chunk = names[i : i + 500]
            out.update(r[0] for r in conn.execute(select(table.c.path).where(table.c.path.in_(chunk))))
    return out


def referenced_among(conn: Connection, data_path: str, paths: Sequence[str]) -> set[str]:
    """Which of these absolute file paths a data or delete file row references (as stored: relative to its table's
    folder, or absolute). Reads only the rows whose stored path could name one of them."""
    forms: set[str] = set()
    for path in paths:
        parts = path.split("/")
        forms.update("/".join(parts[i:]) for i in range(len(parts)))
    matches: list[Any] = []
    spelled = sorted(forms)
    for table in (T.ducklake_data_file, T.ducklake_delete_file):
        for i in range(0, len(spelled), _IN_CHUNK):
            query = select(table.c.table_id, table.c.path, table.c.path_is_relative)
            matches += conn.execute(query.where(table.c.path.in_(spelled[i : i + _IN_CHUNK]))).all()
    if not matches:
        return set()
    dirs = _table_dirs(conn, {int(r.table_id) for r in matches}, data_path)
    found = {resolve(dirs.get(int(r.table_id), data_path), r.path, r.path_is_relative) for r in matches}
    return found & set(paths)


def _table_dirs(conn: Connection, table_ids: set[int], data_path: str) -> dict[int, str]:
    """The folders of these tables (dropped ones too)."""
    schemas = {
        r.schema_id: SchemaEntry(r.schema_id, r.schema_name, r.path or "", r.path_is_relative is not False)
        for r in conn.execute(select(T.ducklake_schema))
    }
    out: dict[int, str] = {}
    t = T.ducklake_table
    for r in conn.execute(select(t).where(t.c.table_id.in_(sorted(table_ids)))):
        sch = schemas.get(r.schema_id)
        if sch is not None:
            out[int(r.table_id)] = table_path(_table(r, sch), data_path)
    return out


def all_referenced_paths(conn: Connection, data_path: str, *, include_scheduled: bool = True) -> set[str]:
    """Absolute paths of every data and delete file any snapshot references, and files scheduled for deletion."""
    schemas_by_id = {
        r.schema_id: SchemaEntry(r.schema_id, r.schema_name, r.path or "", r.path_is_relative is not False)
        for r in conn.execute(select(T.ducklake_schema))
    }
    tables_by_id: dict[int, TableEntry] = {}
    for r in conn.execute(select(T.ducklake_table)):
        sch = schemas_by_id.get(r.schema_id)
        if sch is not None:
            tables_by_id[r.table_id] = _table(r, sch)
    out: set[str] = set()
    for table in (T.ducklake_data_file, T.ducklake_delete_file):
        for r in conn.execute(select(table.c.table_id, table.c.path, table.c.path_is_relative)):
            entry = tables_by_id.get(r.table_id)
            base = table_path(entry, data_path) if entry is not None else data_path
            out.add(resolve(base, r.path, r.path_is_relative))
    if include_scheduled:
        f = T.ducklake_files_scheduled_for_deletion
        for r in conn.execute(select(f.c.path, f.c.path_is_relative)):
            out.add(resolve(data_path, r.path, r.path_is_relative))
    return out


# --- what the change feed and compaction read ------------------------------------------------------------------


def snapshot_changes_between(conn: Connection, start: int, end: int) -> list[tuple[int, bool, str | None]]:
    """Every snapshot in ``[start, end]``: its id, whether ``ducklake_snapshot_changes`` has a row for it, and that
    row's ``changes_made``."""
    s, c = T.ducklake_snapshot, T.ducklake_snapshot_changes
    rows = conn.execute(
        select(s.c.snapshot_id, c.c.snapshot_id.label("changes_id"), c.c.changes_made)
        .select_from(s.outerjoin(c, s.c.snapshot_id == c.c.snapshot_id))
        .where(s.c.snapshot_id >= start, s.c.snapshot_id <= end)
    )
    return [(int(r.snapshot_id), r.changes_id is not None, r.changes_made) for r in rows]


def commit_times(conn: Connection, start: int, end: int) -> dict[int, dt.datetime]:
    """The commit time of each snapshot in ``[start, end]`` that has one."""
    s = T.ducklake_snapshot
    rows = conn.execute(
        select(s.c.snapshot_id, s.c.snapshot_time).where(and_(s.c.snapshot_id >= start, s.c.snapshot_id <= end))
    )
    return {int(r.snapshot_id): r.snapshot_time for r in rows if r.snapshot_time is not None}


def file_counter_before(conn: Connection, snapshot_id: int) -> int:
    """The catalog's file-id counter before ``snapshot_id`` committed: ``next_file_id`` of the newest snapshot older
    than it (0 when none is left). Every writer numbers a new data or delete file from the committing snapshot's
    counter, so a file row with a smaller id was written before ``snapshot_id`` and holds nothing that happened at
    or after it."""
    s = T.ducklake_snapshot
    row = conn.execute(
        select(s.c.next_file_id).where(s.c.snapshot_id < snapshot_id).order_by(s.c.snapshot_id.desc()).limit(1)
    ).first()
    return 0 if row is None or row[0] is None else int(row[0])


def changed_data_file_rows(conn: Connection, table_id: int, start: int, end: int, fmt: FormatVersion) -> Sequence[Any]:
    """The table's ``ducklake_data_file`` rows that may hold a change in ``[start, end]``, by data file id: rows
    begun by ``end`` and not ended before ``start`` that were written at or after ``start`` (inserts of the range,
    and flushed or merged files that keep older rows' snapshots), that end in the range, or that have a delete file
    written at or after ``start`` or an inlined deletion in the range.

    A file written before ``start`` records only what happened by then (``begin_snapshot``, ``partial_max`` and any
    per-row snapshot are at most the snapshot that wrote it), so unless it ended or lost rows since, it holds no
    change of the range; whether a file was written before ``start`` is told by its id (see
    :func:`file_counter_before`), which the primary keys look up. The rows have ``row_group_count`` where the
    catalog's format ``fmt`` has it.
    """
    d, x = T.data_file_table(fmt), T.ducklake_delete_file
    written = file_counter_before(conn, start)
    # One part per index (catalog/indexes.py): an OR of them would scan the table's whole history.
    parts = [
        select(d.c.data_file_id).where(d.c.table_id == table_id, d.c.data_file_id >= written),
        select(d.c.data_file_id).where(d.c.table_id == table_id, d.c.end_snapshot >= start, d.c.end_snapshot <= end),
        select(x.c.data_file_id).where(x.c.table_id == table_id, x.c.delete_file_id >= written),
    ]
    if has_table(conn, T.inlined_delete_table_name(table_id)):
        i = T.inlined_delete_table(table_id)
        parts.append(select(i.c.file_id).where(i.c.begin_snapshot >= start, i.c.begin_snapshot <= end))
    query = select(d).where(
        d.c.data_file_id.in_(union(*parts).scalar_subquery()),
        _by_key(d.c.table_id) == table_id,
        d.c.begin_snapshot <= end,
        or_(d.c.end_snapshot.is_(None), d.c.end_snapshot >= start),
    )
    return conn.execute(query.order_by(d.c.data_file_id)).all()


def _by_key(column: ColumnElement[int]) -> ColumnElement[int]:
    """``column + 0``: the same value, but no index on ``column`` serves it. SQLite's planner, which has no
    statistics, otherwise prefers an index on the column to a range of the primary key (and scans the table's
    whole history)."""
    return column + 0


def delete_file_rows_of(
    conn: Connection, table_id: int, data_file_ids: Sequence[int], end: int, fmt: FormatVersion
) -> Sequence[Any]:
    """The ``ducklake_delete_file`` rows of these data files begun by ``end`` (ended ones too), oldest first (with
    ``row_group_count`` where the catalog's format ``fmt`` has it)."""
    x = T.delete_file_table(fmt)
    out: list[Any] = []
    for i in range(0, len(data_file_ids), _IN_CHUNK):
        chunk = list(data_file_ids[i : i + _IN_CHUNK])
        out += conn.execute(
            select(x).where(x.c.table_id == table_id, x.c.data_file_id.in_(chunk), x.c.begin_snapshot <= end)
        ).all()
    return sorted(out, key=lambda r: (int(r.begin_snapshot), int(r.delete_file_id)))


def snapshot_changes_of(conn: Connection, snapshot_ids: Sequence[int]) -> list[tuple[int, bool, str | None]]:
    """These snapshots (those that exist): each id, whether ``ducklake_snapshot_changes`` has a row for it, and
    that row's ``changes_made``."""
    s, c = T.ducklake_snapshot, T.ducklake_snapshot_changes
    out: list[tuple[int, bool, str | None]] = []
    ids = sorted(set(snapshot_ids))
    for i in range(0, len(ids), _IN_CHUNK):
        rows = conn.execute(
            select(s.c.snapshot_id, c.c.snapshot_id.label("changes_id"), c.c.changes_made)
            .select_from(s.outerjoin(c, s.c.snapshot_id == c.c.snapshot_id))
            .where(s.c.snapshot_id.in_(ids[i : i + _IN_CHUNK]))
        )
        out += [(int(r.snapshot_id), r.changes_id is not None, r.changes_made) for r in rows]
    return out


def schema_version_starts(conn: Connection, table_id: int) -> list[tuple[int, int]]:
    """``(begin_snapshot, schema_version)`` of each of the table's schema versions, oldest first."""
    v = T.ducklake_schema_versions
    rows = conn.execute(
        select(v.c.begin_snapshot, v.c.schema_version).where(v.c.table_id == table_id).order_by(v.c.begin_snapshot)
    )
    return [(int(r.begin_snapshot), int(r.schema_version)) for r in rows]


def file_partition_values(conn: Connection, table_id: int) -> dict[int, tuple[str | None, ...]]:
    """Each data file's partition values, in partition key order."""
    p = T.ducklake_file_partition_value
    out: dict[int, list[str | None]] = {}
    query = select(p).where(p.c.table_id == table_id).order_by(p.c.data_file_id, p.c.partition_key_index)
    for r in conn.execute(query):
        out.setdefault(int(r.data_file_id), []).append(r.partition_value)
    return {k: tuple(v) for k, v in out.items()}


def count_live_files(conn: Connection, data_file_ids: list[int]) -> int:
    """How many of these data files are not ended."""
    d = T.ducklake_data_file
    return int(
        conn.execute(
            select(func.count()).where(d.c.data_file_id.in_(data_file_ids), d.c.end_snapshot.is_(None))
        ).scalar_one()
    )
