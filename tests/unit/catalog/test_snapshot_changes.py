"""changes_made: rendering and parsing agree with each other and with the reference's spelling."""

from __future__ import annotations

import pytest

from pyspark_ducklake.catalog.snapshot_changes import ChangeSet


@pytest.mark.parametrize(
    "text",
    [
        'created_schema:"main"',
        'created_table:"s1"."t"',
        "inlined_insert:2",
        "inserted_into_table:2",
        "inlined_insert:2,inlined_delete:2",
        "deleted_from_table:2,deleted_from_table:3,inline_flush:2,inline_flush:3",
        "altered_table:2",
        "merge_adjacent:1",
        'created_schema:"a""b",created_table:"a""b"."x,y.z"',
        "dropped_table:4",
    ],
)
def test_render_parse_round_trip(text: str) -> None:
    assert ChangeSet.parse(text).render() == text


def test_render_order_matches_reference() -> None:
    c = ChangeSet()
    c.inlined_insert.add(3)
    c.inserted_into.update({5, 2})
    c.created_tables.append(("main", "t"))
    c.altered_tables.add(2)
    assert (
        c.render()
        == 'created_table:"main"."t",inserted_into_table:2,inserted_into_table:5,altered_table:2,inlined_insert:3'
    )


def test_parse_alias_and_unknown_keys() -> None:
    c = ChangeSet.parse("flushed_inlined:7,compacted_table:1,something_new:9")
    assert c.inline_flush == {7}
    assert c.render() == "inline_flush:7"


# The table-level rules left once rows and files are checked where they are applied (README, "Isolation").
@pytest.mark.parametrize(
    ("mine", "theirs", "conflict"),
    [
        ("inserted_into_table:1", "inserted_into_table:1", False),
        ("inlined_insert:1", "inlined_insert:1", False),
        ("inserted_into_table:1", "deleted_from_table:1", False),  # DuckDB: conflict
        ("inlined_insert:1", "inlined_delete:1", False),  # DuckDB: conflict
        ("inserted_into_table:1", "altered_table:1", True),
        ("inserted_into_table:1", "dropped_table:1", True),
        ("inserted_into_table:1", "deleted_from_table:2", False),
        ("deleted_from_table:1", "inserted_into_table:1", False),  # DuckDB: conflict
        ("deleted_from_table:1", "deleted_from_table:1", False),  # checked per file
        ("inlined_delete:1", "inline_flush:1", False),  # checked per row, then planned again
        ("inlined_delete:1", "inlined_delete:1", False),  # checked per row
        ("deleted_from_table:1", "merge_adjacent:1", False),  # checked per file, then planned again
        ("deleted_from_table:1", "altered_table:1", True),
        ("inlined_delete:1", "dropped_table:1", True),
        ("inline_flush:1", "inline_flush:1", False),  # a flush reads the rows inside its own commit
        ("inline_flush:1", "inlined_delete:1", False),
        ("inline_flush:1", "inlined_insert:1", False),
        ("inline_flush:1", "dropped_table:1", True),
        ("merge_adjacent:1", "deleted_from_table:1", False),  # checked per source file
        ("merge_adjacent:1", "dropped_table:1", True),
        ("altered_table:1", "altered_table:1", True),
        ("dropped_table:1", "dropped_table:1", True),
        ('created_table:"main"."t"', 'created_table:"main"."t"', True),
        ('created_table:"main"."t"', 'created_table:"main"."u"', False),
    ],
)
def test_conflict_matrix(mine: str, theirs: str, conflict: bool) -> None:
    assert (ChangeSet.parse(mine).conflict_with(ChangeSet.parse(theirs)) is not None) == conflict
