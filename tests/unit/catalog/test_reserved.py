"""Columns whose names the reader uses itself: the virtual ``rowid`` / ``snapshot_id``, the change feed's columns
and the internal ones. Every name a table can have reads as its values; the names DuckLake reserves for inlined
data are refused while inlining is on, as DuckDB refuses them."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import pyspark_ducklake as pdl
from pyspark_ducklake.exceptions import NoSuchColumnError
from tests.support.bad_inputs import expect_bad_input

CLASHING = [
    "rowid",
    "snapshot_id",
    "_change_type",
    "_snapshot_id",
    "_rowid",
    "_commit_timestamp",
    "_file_position",
    "_change_type_1",
]
RESERVED = ["row_id", "begin_snapshot", "end_snapshot", "_ducklake_internal_row_id", "_ducklake_internal_snapshot_id"]


def _lake(folder: Path, limit: int = 10) -> pdl.Lake:
    return pdl.connect(f"sqlite:///{folder}/lake.sqlite", data_path=str(folder / "data"), data_inlining_row_limit=limit)


def _history(lake: pdl.Lake, names: list[str]) -> None:
    """Inlined rows, a file, a delete of each: rows 0..24, their k columns 1000 + id."""
    lake.create_table("main.t", pa.schema([("id", pa.int64())] + [(n, pa.int64()) for n in names]))
    lake.append("main.t", pa.table({"id": [0, 1], **{n: [1000, 1001] for n in names}}))
    lake.append("main.t", pa.table({"id": list(range(2, 25)), **{n: list(range(1002, 1025)) for n in names}}))
    lake.delete("main.t", [("id", "in", [1, 3])])


@pytest.mark.parametrize("limit", [10, 0])
def test_columns_named_like_the_readers_own_read_as_their_values(tmp_path: Path, limit: int) -> None:
    names = CLASHING + (RESERVED if limit == 0 else [])
    lake = _lake(tmp_path, limit)
    _history(lake, names)
    rows = lake.scan("main.t").sort_by("id")
    assert rows.column_names == ["id", *names]
    expected = [i for i in range(25) if i not in (1, 3)]
    assert rows.column("id").to_pylist() == expected
    for n in names:
        assert rows.column(n).to_pylist() == [1000 + i for i in expected], n
    # the table's column wins, as in DuckDB; the virtual columns stay reachable by their aliases
    picked = lake.scan("main.t", columns=["rowid", "snapshot_id"], filter=[("rowid", "=", 1010)])
    assert picked.to_pylist() == [{"rowid": 1010, "snapshot_id": 1010}]
    if limit:
        virtual = lake.scan("main.t", columns=["id", "_ducklake_internal_row_id"], filter=[("id", "=", 10)])
        assert virtual.to_pylist() == [{"id": 10, "_ducklake_internal_row_id": 10}]
    else:  # the table has the aliases' names too: the virtual columns are hidden
        with pytest.raises(NoSuchColumnError):
            lake.scan("main.t", columns=["_ducklake_internal_snapshot_id_"])
    lake.delete("main.t", [("rowid", "=", 1004)])  # the table's column, not the row id 1004
    assert 4 not in lake.scan("main.t").column("id").to_pylist()
    assert lake.scan("main.t", filter=pc.field("_rowid") > 1020).column("id").to_pylist() == [21, 22, 23, 24]


def test_a_column_differing_from_a_virtual_one_in_case_hides_it_as_in_duckdb(tmp_path: Path) -> None:
    lake = _lake(tmp_path)
    _history(lake, ["RowId"])
    assert lake.scan("main.t", columns=["RowId"], filter=[("id", "=", 7)]).to_pylist() == [{"RowId": 1007}]
    with pytest.raises(NoSuchColumnError):
        lake.scan("main.t", columns=["rowid"])
    assert lake.scan("main.t", columns=["_ducklake_internal_row_id"], filter=[("id", "=", 7)]).to_pylist() == [
        {"_ducklake_internal_row_id": 7}
    ]


def test_the_change_feed_renames_its_columns_where_the_table_has_their_names(tmp_path: Path) -> None:
    lake = _lake(tmp_path)
    _history(lake, CLASHING)
    feed = lake.table_changes("main.t", 0)
    # DuckDB appends _1 to a duplicate name; _change_type_1 is taken too, so the change type is _change_type_2
    assert feed.column_names == ["id", *CLASHING, "_change_type_2", "_snapshot_id_1", "_rowid_1", "_commit_timestamp_1"]
    for row in feed.to_pylist():
        for n in CLASHING:
            assert row[n] == 1000 + row["id"], (n, row)
        assert row["_rowid_1"] == row["id"]
    kinds = sorted((r["_change_type_2"], r["id"]) for r in feed.to_pylist() if r["_change_type_2"] == "delete")
    assert kinds == [("delete", 1), ("delete", 3)]


@pytest.mark.parametrize("name", [*RESERVED, "ROW_ID", "End_Snapshot"])
def test_names_reserved_for_inlined_data_are_refused_while_inlining_is_on(tmp_path: Path, name: str) -> None:
    lake = _lake(tmp_path)
    with expect_bad_input("reserved-column-name", lake):
        lake.create_table("main.t", pa.schema([("id", pa.int64()), (name, pa.int64())]))
    lake.create_table("main.t", pa.schema([("id", pa.int64())]))
    with expect_bad_input("reserved-column-name", lake):
        lake.add_column("main.t", name, pa.int64())
    with expect_bad_input("reserved-column-name", lake):
        lake.rename_column("main.t", "id", name)


def test_a_table_with_a_reserved_name_is_never_inlined_into(tmp_path: Path) -> None:
    off = _lake(tmp_path, 0)
    off.create_table("main.t", pa.schema([("id", pa.int64()), ("row_id", pa.int64())]))
    off.close()
    on = _lake(tmp_path, 10)
    on.append("main.t", pa.table({"id": [1, 2], "row_id": [10, 20]}))  # two rows, yet a Parquet file
    assert on.snapshots()[-1].changes_made == "inserted_into_table:1"
    assert on.scan("main.t").to_pylist() == [{"id": 1, "row_id": 10}, {"id": 2, "row_id": 20}]
