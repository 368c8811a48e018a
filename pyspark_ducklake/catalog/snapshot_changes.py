"""The ``changes_made`` string of ``ducklake_snapshot_changes``: render, parse, and the conflict rules.

Spelled and ordered exactly as the reference writes it (``DuckLakeTransactionState::WriteSnapshotChanges``) and
checked with its conflict matrix (``DuckLakeTransactionState::CheckForConflicts``).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields

from pyspark_ducklake.exceptions import CatalogError

# Keys whose value is a table/schema id, in the order the reference writes them.
_ID_KEYS: tuple[tuple[str, str], ...] = (
    ("dropped_schema", "dropped_schemas"),
    ("dropped_table", "dropped_tables"),
    ("dropped_view", "dropped_views"),
    ("inserted_into_table", "inserted_into"),
    ("deleted_from_table", "deleted_from"),
    ("altered_table", "altered_tables"),
    ("altered_view", "altered_views"),
    ("inlined_insert", "inlined_insert"),
    ("inlined_delete", "inlined_delete"),
    ("inline_flush", "inline_flush"),
    ("merge_adjacent", "merge_adjacent"),
    ("rewrite_delete", "rewrite_delete"),
)
_ALIASES = {"flushed_inlined": "inline_flush"}
_IGNORED_KEYS = frozenset(
    {"compacted_table", "dropped_scalar_macro", "dropped_table_macro", "created_scalar_macro", "created_table_macro"}
)


def quote_identifier(name: str) -> str:
    """A double-quoted SQL identifier, as DuckDB's ``SQLIdentifierToString`` writes it."""
    return '"' + name.replace('"', '""') + '"'


@dataclass
class ChangeSet:
    """What one snapshot changed; sets of ids, plus names for created schemas and tables."""

    created_schemas: list[str] = field(default_factory=list)
    created_tables: list[tuple[str, str]] = field(default_factory=list)
    created_views: list[tuple[str, str]] = field(default_factory=list)
    dropped_schemas: set[int] = field(default_factory=set)
    dropped_tables: set[int] = field(default_factory=set)
    dropped_views: set[int] = field(default_factory=set)
    inserted_into: set[int] = field(default_factory=set)
    deleted_from: set[int] = field(default_factory=set)
    altered_tables: set[int] = field(default_factory=set)
    altered_views: set[int] = field(default_factory=set)
    inlined_insert: set[int] = field(default_factory=set)
    inlined_delete: set[int] = field(default_factory=set)
    inline_flush: set[int] = field(default_factory=set)
    merge_adjacent: set[int] = field(default_factory=set)
    rewrite_delete: set[int] = field(default_factory=set)

    def is_empty(self) -> bool:
        return not any(getattr(self, f.name) for f in fields(self))

    def merge(self, other: ChangeSet) -> None:
        for f in fields(self):
            mine, theirs = getattr(self, f.name), getattr(other, f.name)
            if isinstance(mine, set):
                mine |= theirs
            else:
                mine.extend(x for x in theirs if x not in mine)

    def tables_touched(self) -> set[int]:
        return (
            self.dropped_tables
            | self.inserted_into
            | self.deleted_from
            | self.altered_tables
            | self.inlined_insert
            | self.inlined_delete
            | self.inline_flush
            | self.merge_adjacent
            | self.rewrite_delete
        )

    def render(self) -> str:
        """The ``changes_made`` text, e.g. ``created_table:"main"."t",inlined_insert:2``."""
        parts: list[str] = [f"dropped_schema:{i}" for i in sorted(self.dropped_schemas)]
        parts += [f"dropped_table:{i}" for i in sorted(self.dropped_tables)]
        parts += [f"dropped_view:{i}" for i in sorted(self.dropped_views)]
        parts += [f"created_schema:{quote_identifier(s)}" for s in self.created_schemas]
        parts += [f"created_table:{quote_identifier(s)}.{quote_identifier(t)}" for s, t in self.created_tables]
        parts += [f"created_view:{quote_identifier(s)}.{quote_identifier(t)}" for s, t in self.created_views]
        for key, attr in _ID_KEYS[3:]:
            parts += [f"{key}:{i}" for i in sorted(getattr(self, attr))]
        return ",".join(parts)

    @classmethod
    def parse(cls, text: str | None) -> ChangeSet:
        """Parse a ``changes_made`` string (unknown keys are kept out of the result, never fatal)."""
        result = cls()
        if not text:
            return result
        for key, value in _split_entries(text):
            key = _ALIASES.get(key, key)
            if key == "created_schema":
                result.created_schemas.append(_unquote(value))
            elif key in ("created_table", "created_view"):
                schema, table = _split_qualified(value)
                (result.created_tables if key == "created_table" else result.created_views).append((schema, table))
            else:
                attr = dict(_ID_KEYS).get(key)
                if attr is None or not value.strip().lstrip("-").isdigit():
                    continue
                getattr(result, attr).add(int(value))
        return result

    def conflict_with(self, other: ChangeSet) -> str | None:
        """Why committing ``self`` after ``other`` (committed concurrently) would be wrong, or None.

        Only table-level rules are left here: a drop or a schema change of the table. Appends, deletes, flushes and
        compactions of one table are checked row by row and file by file where they are applied (``commit_rows.py``): a
        change whose planned rows were moved or ended is planned again or fails, one that touches other rows and
        files commits. So, unlike the reference's matrix, an append never conflicts with a delete, a flush or a
        compaction, and a delete never with an append.
        """
        adds = self.inserted_into | self.inlined_insert
        ends = self.deleted_from | self.inlined_delete
        moves = self.inline_flush | self.merge_adjacent | self.rewrite_delete
        checks: list[tuple[set[int], set[int], str]] = [
            (adds, other.dropped_tables, "insert into table {}: another writer dropped it"),
            (adds, other.altered_tables, "insert into table {}: another writer altered it"),
            (ends, other.dropped_tables, "delete from table {}: another writer dropped it"),
            (ends, other.altered_tables, "delete from table {}: another writer altered it"),
            (moves, other.dropped_tables, "rewrite table {}: another writer dropped it"),
            (self.altered_tables, other.dropped_tables, "alter table {}: another writer dropped it"),
            (self.altered_tables, other.altered_tables, "alter table {}: another writer altered it"),
            (self.dropped_tables, other.dropped_tables, "drop table {}: another writer dropped it already"),
            (self.dropped_schemas, other.dropped_schemas, "drop schema {}: another writer dropped it already"),
        ]
        for mine, theirs, message in checks:
            both = mine & theirs
            if both:
                return message.format(min(both))
        for name in self.created_schemas:
            if name in other.created_schemas:
                return f"create schema {name!r}: another writer created it"
        for entry in self.created_tables:
            if entry in other.created_tables or entry in other.created_views:
                return f"create table {entry[0]}.{entry[1]}: another writer created it"
        return None


def _split_entries(text: str) -> list[tuple[str, str]]:
    """Split ``k:v,k:"a"."b"`` into pairs, honouring double-quoted identifiers that contain commas."""
    out: list[tuple[str, str]] = []
    i, n = 0, len(text)
    while i < n:
        colon = text.find(":", i)
        if colon < 0:
            raise CatalogError(f"malformed changes_made {text!r}: expected a colon after position {i}")
        key = text[i:colon]
        j = colon + 1
        in_quotes = False
        while j < n:
            c = text[j]
            if c == '"':
                if in_quotes and j + 1 < n and text[j + 1] == '"':
                    j += 2
                    continue
                in_quotes = not in_quotes
            elif c == "," and not in_quotes:
                break
            j += 1
        out.append((key, text[colon + 1 : j]))
        i = j + 1
    return out


def _unquote(value: str) -> str:
    v = value.strip()
    if len(v) >= 2 and v[0] == '"' and v[-1] == '"':
        return v[1:-1].replace('""', '"')
    return v


def _split_qualified(value: str) -> tuple[str, str]:
    """Split ``"schema"."table"`` at the dot between the two quoted identifiers."""
    in_quotes = False
    i = 0
    while i < len(value):
        c = value[i]
        if c == '"':
            if in_quotes and i + 1 < len(value) and value[i + 1] == '"':
                i += 2
                continue
            in_quotes = not in_quotes
        elif c == "." and not in_quotes:
            return _unquote(value[:i]), _unquote(value[i + 1 :])
        i += 1
    return "main", _unquote(value)
