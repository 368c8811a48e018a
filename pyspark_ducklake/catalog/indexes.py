"""The indexes this library adds to a catalog, so that reads, change feeds and commits cost the same however long
the history grows.

DuckLake's reference declares only primary keys, so without these the catalog database scans every file row the
lake ever had to find a table's live files, the changes of a range, or a file's statistics. Each is an ordinary,
non-unique index on the columns the queries of ``catalog/reader.py`` filter by; DuckDB never sees them (it reads
and writes the tables through its SQLite and PostgreSQL scanners, which the indexes do not change), and its
attach, writes, expiry and cleanup work on a catalog that has them (``tests/conformance/test_catalog_indexes.py``).
They are created on SQLite and PostgreSQL catalogs only (a DuckDB-file catalog is DuckDB's own database): when
this library creates a catalog, when a sink starts, and by ``pyspark-ducklake indexes --create``
(``Lake.create_indexes()``); ``pyspark-ducklake indexes`` lists them.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import BigInteger, Column, Connection, Engine, Index, MetaData, Table, inspect
from sqlalchemy.exc import DBAPIError

_md = MetaData()


def _table(name: str, *columns: str) -> Table:
    return Table(name, _md, *(Column(c, BigInteger) for c in columns))


_data_file = _table("ducklake_data_file", "data_file_id", "table_id", "end_snapshot")
_delete_file = _table("ducklake_delete_file", "delete_file_id", "table_id", "end_snapshot", "data_file_id")
_column_stats = _table("ducklake_file_column_stats", "data_file_id", "column_id")
_partition_value = _table("ducklake_file_partition_value", "data_file_id", "partition_key_index")

INDEXES: tuple[Index, ...] = (
    # a table's files live at a snapshot (end_snapshot IS NULL OR > S), and those ended in a range
    Index("pyspark_ducklake_data_file_table_end", _data_file.c.table_id, _data_file.c.end_snapshot),
    Index("pyspark_ducklake_delete_file_table_end", _delete_file.c.table_id, _delete_file.c.end_snapshot),
    # a table's files written since a snapshot (ids come from the snapshots' counter): a change feed's range
    Index("pyspark_ducklake_data_file_table_id", _data_file.c.table_id, _data_file.c.data_file_id),
    Index("pyspark_ducklake_delete_file_table_id", _delete_file.c.table_id, _delete_file.c.delete_file_id),
    # the delete files of given data files (change feed, expiry)
    Index("pyspark_ducklake_delete_file_data_file", _delete_file.c.data_file_id),
    # statistics and partition values of given data files (pruning, compaction, expiry)
    Index("pyspark_ducklake_file_column_stats_file", _column_stats.c.data_file_id, _column_stats.c.column_id),
    Index("pyspark_ducklake_file_partition_value_file", _partition_value.c.data_file_id),
)
BACKENDS = ("sqlite", "postgresql")


@dataclass(frozen=True)
class IndexState:
    """One of :data:`INDEXES`: its name, table and columns, and whether the catalog has it."""

    name: str
    table: str
    columns: tuple[str, ...]
    present: bool

    @property
    def definition(self) -> str:
        return f"{self.table} ({', '.join(self.columns)})"


def supported(engine: Engine | Connection) -> bool:
    """Whether this library adds indexes to a catalog of this database (SQLite and PostgreSQL)."""
    return engine.dialect.name in BACKENDS


def index_states(conn: Connection) -> list[IndexState]:
    """Each of :data:`INDEXES` and whether the catalog has it (by name)."""
    inspector = inspect(conn)
    present: dict[str, set[str]] = {}
    out = []
    for index in INDEXES:
        table = index.table
        assert table is not None
        if table.name not in present:
            present[table.name] = {str(i["name"]) for i in inspector.get_indexes(table.name)}
        columns = tuple(c.name for c in index.columns)
        out.append(IndexState(str(index.name), table.name, columns, str(index.name) in present[table.name]))
    return out


def create_indexes(engine: Engine) -> list[str]:
    """Create the indexes the catalog lacks (nothing on a database this library adds none to); the names created.

    Each is created in a transaction of its own, which holds writers back only while it builds (PostgreSQL's
    ``CREATE INDEX`` lets readers through). Another process creating the same index at the same moment is fine.
    """
    if not supported(engine):
        return []
    with engine.connect() as conn:
        missing = [s.name for s in index_states(conn) if not s.present]
    created = []
    for index in INDEXES:
        if index.name not in missing:
            continue
        try:
            with engine.connect().execution_options(ducklake_write=True) as conn, conn.begin():
                index.create(conn, checkfirst=True)
            created.append(str(index.name))
        except DBAPIError:
            with engine.connect() as conn:  # a concurrent creator won the race: fine once it exists
                if not any(s.name == index.name and s.present for s in index_states(conn)):
                    raise
    return created


def create_indexes_in(conn: Connection) -> None:
    """Create every index in the caller's transaction (a new catalog's)."""
    if supported(conn):
        for index in INDEXES:
            index.create(conn, checkfirst=True)
