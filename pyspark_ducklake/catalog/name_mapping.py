"""The name-mapping tables: how the columns of a file registered with ``ducklake_add_data_files`` map to the
table's columns (ducklake-format-2.md §1.1-1.2).

A data file with a ``mapping_id`` has no field ids (or they are ignored); its columns are found by the names the
mapping stores, spelled as in the file, and each node points at a DuckLake column id (``target_field_id``). The
nodes form a tree through ``parent_column`` (the node ids of the mapping itself, numbered in pre-order from 0).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sqlalchemy import Connection, select

from pyspark_ducklake.catalog import tables as T

if TYPE_CHECKING:
    from pyspark_ducklake.catalog.entries import DataFileEntry

MAP_BY_NAME = "map_by_name"


@dataclass(frozen=True)
class MappingNode:
    """One field of the file: ``source_name`` in the file is DuckLake column ``target_field_id``."""

    source_name: str
    target_field_id: int
    is_partition: bool
    children: tuple[MappingNode, ...] = ()


@dataclass(frozen=True)
class NameMapping:
    """A mapping's top-level nodes (plain data, so Spark can ship it to executors with the file)."""

    mapping_id: int
    table_id: int
    nodes: tuple[MappingNode, ...]

    def flat(self) -> list[tuple[int, str, int, int | None, bool]]:
        """``(node_id, source_name, target_field_id, parent_node_id, is_partition)`` in pre-order, as stored."""
        out: list[tuple[int, str, int, int | None, bool]] = []

        def walk(node: MappingNode, parent: int | None) -> None:
            me = len(out)
            out.append((me, node.source_name, node.target_field_id, parent, node.is_partition))
            for child in node.children:
                walk(child, me)

        for n in self.nodes:
            walk(n, None)
        return out


def build_tree(rows: Sequence[tuple[int, str, int, int | None, bool]]) -> tuple[MappingNode, ...]:
    """Nodes from the stored rows ``(column_id, source_name, target_field_id, parent_column, is_partition)``."""
    kids: dict[int | None, list[tuple[int, str, int, int | None, bool]]] = {}
    for r in sorted(rows, key=lambda r: r[0]):
        kids.setdefault(r[3], []).append(r)

    def make(r: tuple[int, str, int, int | None, bool], seen: frozenset[int]) -> MappingNode:
        if r[0] in seen:  # a cycle in a damaged catalog: stop rather than recurse forever
            return MappingNode(r[1], r[2], r[4])
        children = tuple(make(c, seen | {r[0]}) for c in kids.get(r[0], []))
        return MappingNode(r[1], int(r[2]), bool(r[4]), children)

    return tuple(make(r, frozenset()) for r in kids.get(None, []))


def load_mappings(conn: Connection, mapping_ids: set[int]) -> dict[int, NameMapping]:
    """``{mapping_id: NameMapping}`` for the given ids (mappings have no snapshot range: they never change)."""
    if not mapping_ids:
        return {}
    m, n = T.ducklake_column_mapping, T.ducklake_name_mapping
    ids = sorted(mapping_ids)
    tables = {int(r.mapping_id): int(r.table_id) for r in conn.execute(select(m).where(m.c.mapping_id.in_(ids)))}
    rows: dict[int, list[tuple[int, str, int, int | None, bool]]] = {}
    for r in conn.execute(select(n).where(n.c.mapping_id.in_(ids))):
        parent = None if r.parent_column is None else int(r.parent_column)
        rows.setdefault(int(r.mapping_id), []).append(
            (int(r.column_id), str(r.source_name), int(r.target_field_id), parent, bool(r.is_partition))
        )
    return {i: NameMapping(i, tables.get(i, -1), build_tree(rows.get(i, []))) for i in ids}


def with_mappings(conn: Connection, files: list[DataFileEntry]) -> list[DataFileEntry]:
    """The files, each with its name mapping attached when it has a ``mapping_id`` (one catalog query for all)."""
    wanted = {f.mapping_id for f in files if f.mapping_id is not None}
    if not wanted:
        return files
    mappings = load_mappings(conn, wanted)
    return [f if f.mapping_id is None else dataclasses.replace(f, name_mapping=mappings[f.mapping_id]) for f in files]


__all__ = ["MAP_BY_NAME", "MappingNode", "NameMapping", "build_tree", "load_mappings", "with_mappings"]
