"""Moving a catalog from DuckLake 1.0 to 1.1, as DuckDB's ``ATTACH ... (AUTOMATIC_MIGRATION true)`` does
(the reference's ``MigrateV10``), in one database transaction.

What changes: the three system columns of every registered inlined-data table are renamed ``_ducklake_row_id``,
``_ducklake_begin_snapshot``, ``_ducklake_end_snapshot`` (first, so a collision stops the migration before anything
else); ``ducklake_data_file`` and ``ducklake_delete_file`` get ``row_group_count`` (NULL for existing rows);
``ducklake_view_column_tag`` is created; the ``version`` row becomes ``1.1``. No snapshot is committed (DuckDB commits
none either). A catalog never goes back: DuckDB 1.5 cannot open a 1.1 catalog.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import BigInteger, Connection, Engine, text, update
from sqlalchemy.exc import DBAPIError, SQLAlchemyError
from sqlalchemy.schema import CreateTable

from pyspark_ducklake.catalog import dialects, reader
from pyspark_ducklake.catalog import tables as T
from pyspark_ducklake.catalog.format_version import V1_0, V1_1, FormatVersion
from pyspark_ducklake.exceptions import MigrationError


@dataclass(frozen=True)
class MigrationReport:
    """What a migration did (or, dry, would do): the versions, and each step in the order it runs."""

    from_version: str
    to_version: str
    steps: tuple[str, ...] = field(default_factory=tuple)
    dry_run: bool = False

    @property
    def changed(self) -> bool:
        return bool(self.steps)

    def summary(self) -> str:
        if not self.steps:
            return f"the catalog is DuckLake {self.from_version} already: nothing to migrate"
        verb = "would migrate (dry run)" if self.dry_run else "migrated"
        return f"{verb} the catalog from DuckLake {self.from_version} to {self.to_version} in {len(self.steps)} steps"

    def to_dict(self) -> dict[str, Any]:
        return {
            "from_version": self.from_version,
            "to_version": self.to_version,
            "steps": list(self.steps),
            "dry_run": self.dry_run,
        }


def migrate_catalog(engine: Engine, target: FormatVersion, *, dry_run: bool = False) -> MigrationReport:
    """Migrate the catalog to ``target`` in one transaction; a catalog already there is left alone.

    Raises:
        MigrationError: ``target`` is older than the catalog (no downgrade), a user column of an inlined table has
            one of the new system names, an inlined table has an unexpected layout, or the database refused a step
            (on PostgreSQL the migration needs the owner of the metadata tables); nothing was changed.
        UnsupportedSpecVersionError: the catalog's version is unknown.
    """
    with engine.connect().execution_options(ducklake_write=True) as conn:
        try:
            with conn.begin():
                current = reader.format_version(conn)
                if current.release > target.release:
                    raise MigrationError(
                        f"the catalog is DuckLake {current.tag}, newer than the {target.name} asked for: a DuckLake "
                        "catalog cannot be downgraded"
                    )
                if current.release == target.release:
                    return MigrationReport(current.tag, current.tag, dry_run=dry_run)
                steps = _steps_1_0_to_1_1(conn)
                if dry_run:
                    return MigrationReport(current.tag, target.tag, tuple(s for s, _ in steps), dry_run=True)
                for _, run in steps:
                    run()
            return MigrationReport(current.tag, target.tag, tuple(s for s, _ in steps))
        except MigrationError:
            raise
        except (DBAPIError, SQLAlchemyError) as e:
            raise MigrationError(
                f"the catalog database refused the migration to DuckLake {target.name} ({getattr(e, 'orig', e)}); "
                "nothing was changed. On PostgreSQL, migrate as the owner of the ducklake_* tables"
            ) from e


Step = tuple[str, Callable[[], Any]]


def _steps_1_0_to_1_1(conn: Connection) -> list[Step]:
    """The migration's steps, each a description and what runs it; every inlined table is checked first."""
    old, new = V1_0.inlined_system_columns, V1_1.inlined_system_columns
    steps: list[Step] = []
    i, t = T.ducklake_inlined_data_tables, T.ducklake_table
    rows = conn.execute(
        i.select()
        .with_only_columns(i.c.table_name, t.c.table_name.label("user_table"))
        .select_from(i.outerjoin(t, (i.c.table_id == t.c.table_id) & t.c.end_snapshot.is_(None)))
        .order_by(i.c.table_id, i.c.schema_version)
    ).all()
    quote = conn.dialect.identifier_preparer.quote
    for name, user_table in rows:
        if not dialects.has_table(conn, name):
            continue
        columns = dialects.column_names(conn, name)
        system, user = columns[:3], {c.lower() for c in columns[3:]}
        renames = []
        for have, before, after in zip(system, old, new, strict=False):
            if have.lower() == after:
                continue
            if have.lower() != before or len(system) < 3:
                raise MigrationError(
                    f"inlined-data table {name!r} has an unexpected column layout ({', '.join(columns[:3])}): it is "
                    "not a DuckLake 1.0 inlined table; nothing was migrated"
                )
            if after in user:
                raise MigrationError(
                    f"table {user_table or name!r} has a column {after!r}, the name DuckLake 1.1 gives the inlined "
                    "data's system column: rename the column and flush the table's inlined data before migrating "
                    "(lake.flush_inlined_data, or DuckDB's ducklake_flush_inlined_data); nothing was migrated"
                )
            renames.append((have, after))
        for before, after in renames:
            sql = f"ALTER TABLE {quote(name)} RENAME COLUMN {quote(before)} TO {quote(after)}"
            steps.append((f"rename {name}.{before} to {after}", _statement(conn, sql)))
    for table in ("ducklake_data_file", "ducklake_delete_file"):
        if "row_group_count" not in dialects.column_names(conn, table):
            sql = f"ALTER TABLE {quote(table)} ADD COLUMN row_group_count {BigInteger().compile(conn.dialect)}"
            steps.append((f"add {table}.row_group_count", _statement(conn, sql)))
    if not dialects.has_table(conn, T.ducklake_view_column_tag.name):
        create = CreateTable(T.ducklake_view_column_tag)
        steps.append((f"create {T.ducklake_view_column_tag.name}", lambda: conn.execute(create)))
    m = T.ducklake_metadata
    set_version = update(m).where(m.c.key == "version", m.c.scope.is_(None)).values(value=V1_1.tag)
    steps.append((f"set version {V1_1.tag}", lambda: conn.execute(set_version)))
    return steps


def _statement(conn: Connection, sql: str) -> Callable[[], Any]:
    return lambda: conn.execute(text(sql))


__all__ = ["MigrationReport", "migrate_catalog"]
