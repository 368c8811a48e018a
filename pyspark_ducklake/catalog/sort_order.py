"""Sorted tables: ``ducklake_sort_info`` / ``ducklake_sort_expression``, as DuckDB's ``SET SORTED BY`` writes them.

A sort order is a list of expressions in DuckDB's SQL text, each ``ASC``/``DESC`` and ``NULLS_FIRST``/``NULLS_LAST``
(the reference's ``DuckLakeMetadataManager::WriteNewSortKeys``). Only expressions that are a bare column reference
can be evaluated here (see ``table/sort_rows.py``); this module reads and writes the rows whatever they hold.

What DuckDB 1.5.5 writes, and this module with it:

* ``SET SORTED BY``: a new ``sort_id`` from ``next_catalog_id`` (taken even when nothing changes), the current rows
  ended and the new ones begun at the snapshot, ``altered_table:<id>`` and a new schema version, but no
  ``ducklake_schema_versions`` row and no new inlined-data table. When every key states its ``NULLS`` order and the
  order equals the current one, no rows are written (DuckDB compares an unstated order as unequal to the stored one).
* ``RESET SORTED BY``: the current rows ended; nothing when the table has no sort order.
* ``RENAME COLUMN`` of a sorted table: a new ``sort_id`` is taken, and the expressions naming the column (in any
  case) are written again under the new name with it.
* ``DROP COLUMN`` of a column the table is sorted by is refused.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import Connection, insert, select, update

from pyspark_ducklake.catalog import reader
from pyspark_ducklake.catalog import tables as T
from pyspark_ducklake.catalog.duckdb_keywords import KEYWORDS
from pyspark_ducklake.catalog.transaction import CommitContext
from pyspark_ducklake.exceptions import SchemaMismatchError, UnsupportedSortOrderError

DUCKDB_DIALECT = "duckdb"
_PLAIN_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_BARE_NAME = re.compile(r"[^\W\d]\w*")
# identifiers in an expression's text: double-quoted (""-escaped) or bare; string literals are skipped
_TOKEN = re.compile(r"'(?:[^']|'')*'|\"((?:[^\"]|\"\")*)\"|([^\W\d]\w*)")


@dataclass(frozen=True)
class SortField:
    """One key of a sort order: DuckDB's expression text, its direction and where NULLs go."""

    expression: str
    descending: bool = False
    nulls_first: bool = False
    dialect: str = DUCKDB_DIALECT

    @property
    def direction_text(self) -> str:
        return "DESC" if self.descending else "ASC"

    @property
    def null_order_text(self) -> str:
        return "NULLS_FIRST" if self.nulls_first else "NULLS_LAST"

    def describe(self) -> str:
        """``expr DESC NULLS FIRST``, as SQL spells it."""
        return f"{self.expression} {self.direction_text} NULLS {'FIRST' if self.nulls_first else 'LAST'}"


@dataclass(frozen=True)
class SortOrder:
    """A table's sort order at a snapshot (``ducklake_sort_info.sort_id`` and its expressions in key order)."""

    sort_id: int
    fields: tuple[SortField, ...]


def column_expression(name: str) -> str:
    """A column reference as DuckDB writes it back as text: bare when it is a plain identifier that is no keyword,
    else double-quoted (``ColumnRefExpression::ToString``)."""
    if _PLAIN_NAME.fullmatch(name) and name.lower() not in KEYWORDS:
        return name
    return '"' + name.replace('"', '""') + '"'


def column_reference(expression: str) -> str | None:
    """The column an expression names when it is a bare (or quoted) column reference, else None."""
    text = expression.strip()
    while text.startswith("(") and text.endswith(")"):
        text = text[1:-1].strip()
    if len(text) >= 2 and text[0] == '"' and text[-1] == '"':
        inner = text[1:-1]
        if '"' not in inner.replace('""', ""):
            return inner.replace('""', '"')
        return None
    return text if _BARE_NAME.fullmatch(text) else None


def names_in(expression: str) -> list[str]:
    """Every identifier in an expression's text (column names, and function names too)."""
    out = []
    for m in _TOKEN.finditer(expression):
        if m.group(1) is not None:
            out.append(m.group(1).replace('""', '"'))
        elif m.group(2) is not None:
            out.append(m.group(2))
    return out


def sort_order(conn: Connection, table_id: int, snapshot_id: int) -> SortOrder | None:
    """The table's sort order at the snapshot, or None."""
    info, expr = T.ducklake_sort_info, T.ducklake_sort_expression
    row = conn.execute(
        select(info.c.sort_id)
        .where(info.c.table_id == table_id, reader.visible(info, snapshot_id))
        .order_by(info.c.sort_id.desc())
        .limit(1)
    ).first()
    if row is None:
        return None
    rows = conn.execute(select(expr).where(expr.c.sort_id == row.sort_id).order_by(expr.c.sort_key_index)).all()
    return SortOrder(
        int(row.sort_id),
        tuple(
            SortField(
                str(r.expression),
                str(r.sort_direction or "").upper() == "DESC",
                str(r.null_order or "").upper() == "NULLS_FIRST",
                str(r.dialect),
            )
            for r in rows
        ),
    )


def set_sort_order(ctx: CommitContext, table_id: int, fields: Sequence[SortField], *, nulls_stated: bool) -> None:
    """``SET SORTED BY`` (``RESET SORTED BY`` with no fields) in this commit, as DuckDB writes it.

    ``nulls_stated``: every key said ``NULLS FIRST``/``LAST``; only then can an unchanged order be recognised (and
    written as nothing), as in DuckDB.
    """
    current = sort_order(ctx.conn, table_id, ctx.snapshot_id)
    if not fields:
        if current is not None:
            _end(ctx, table_id)
        return
    sort_id = ctx.allocate_catalog_id()  # taken even when the order turns out unchanged, as DuckDB does
    if nulls_stated and current is not None and current.fields == tuple(fields):
        return
    _replace(ctx, table_id, sort_id, fields, current)


def rename_sorted_column(ctx: CommitContext, table_id: int, old: str, new: str, table_name: str) -> None:
    """Write the sort order again with ``old`` renamed ``new`` where a key names it (a RENAME COLUMN's part).

    Raises:
        UnsupportedSortOrderError: an expression other than a column reference names the column (this library
            cannot rewrite it); reset or change the sort order first.
    """
    current = sort_order(ctx.conn, table_id, ctx.snapshot_id)
    if current is None:
        return
    sort_id = ctx.allocate_catalog_id()
    renamed = []
    for f in current.fields:
        name = column_reference(f.expression) if f.dialect == DUCKDB_DIALECT else None
        if name is not None and name.lower() == old.lower():
            f = SortField(column_expression(new), f.descending, f.nulls_first, f.dialect)
        elif name is None and f.dialect == DUCKDB_DIALECT and _mentions(f.expression, old):
            raise UnsupportedSortOrderError(
                f"cannot rename column {old!r} of {table_name}: its sort order uses it in the expression "
                f"{f.expression!r}, which pyspark-ducklake cannot rewrite; reset the sort order "
                "(Lake.set_sort_order(table, [])) or rename the column with DuckDB"
            )
        renamed.append(f)
    if tuple(renamed) != current.fields:
        _replace(ctx, table_id, sort_id, renamed, current)


def check_column_not_sorted(conn: Connection, table_id: int, snapshot_id: int, column: str, table_name: str) -> None:
    """DuckDB refuses to drop a column the table is sorted by (named in any sort expression, in any case).

    Raises:
        SchemaMismatchError: the table is sorted by the column.
    """
    current = sort_order(conn, table_id, snapshot_id)
    if current is None:
        return
    for f in current.fields:
        if f.dialect == DUCKDB_DIALECT and _mentions(f.expression, column):
            raise SchemaMismatchError(
                f'cannot drop column "{column}" of {table_name}: the table is sorted by this column '
                f"({f.expression}); reset or change the sort order (Lake.set_sort_order) to drop it"
            )


def _mentions(expression: str, column: str) -> bool:
    return any(n.lower() == column.lower() for n in names_in(expression))


def _end(ctx: CommitContext, table_id: int) -> None:
    info = T.ducklake_sort_info
    ctx.conn.execute(
        update(info)
        .where(info.c.table_id == table_id, info.c.end_snapshot.is_(None))
        .values(end_snapshot=ctx.snapshot_id)
    )


def _replace(
    ctx: CommitContext, table_id: int, sort_id: int, fields: Sequence[SortField], current: SortOrder | None
) -> None:
    if current is not None:
        _end(ctx, table_id)
    ctx.conn.execute(
        insert(T.ducklake_sort_info).values(
            sort_id=sort_id, table_id=table_id, begin_snapshot=ctx.snapshot_id, end_snapshot=None
        )
    )
    ctx.conn.execute(
        insert(T.ducklake_sort_expression),
        [
            {
                "sort_id": sort_id,
                "table_id": table_id,
                "sort_key_index": i,
                "expression": f.expression,
                "dialect": f.dialect,
                "sort_direction": f.direction_text,
                "null_order": f.null_order_text,
            }
            for i, f in enumerate(fields)
        ],
    )


__all__ = [
    "DUCKDB_DIALECT",
    "SortField",
    "SortOrder",
    "check_column_not_sorted",
    "column_expression",
    "column_reference",
    "names_in",
    "rename_sorted_column",
    "set_sort_order",
    "sort_order",
]
