"""Format versions: which tags a catalog may carry, which a user may ask for, and what each changes."""

from __future__ import annotations

import pytest

from pyspark_ducklake.catalog.format_version import V1_0, V1_1, V1_1_DEV1, catalog_format, requested_format
from pyspark_ducklake.catalog.reserved import check_column_names
from pyspark_ducklake.exceptions import InvalidIdentifierError, InvalidOptionError, UnsupportedSpecVersionError


def test_catalog_tags_known_and_the_development_tag_is_1_1() -> None:
    assert catalog_format("1.0", "x") is V1_0
    assert catalog_format("1.1", "x") is V1_1
    assert catalog_format("1.1-dev1", "x") is V1_1_DEV1
    assert V1_1_DEV1.name == "1.1" and V1_1_DEV1.inlined_system_columns == V1_1.inlined_system_columns


@pytest.mark.parametrize("tag", ["0.4", "1.2", "2.0", "", "1.1-dev2", "v1.1"])
def test_unknown_catalog_tags_name_the_tag_and_the_known_ones(tag: str) -> None:
    with pytest.raises(UnsupportedSpecVersionError) as err:
        catalog_format(tag, "sqlite:///x")
    assert repr(tag) in str(err.value) and "1.0, 1.1, 1.1-dev1" in str(err.value)


@pytest.mark.parametrize("value", ["1.1-dev1", "1", "1.10", "true", "0.4"])
def test_only_released_versions_are_requested(value: str) -> None:
    with pytest.raises(InvalidOptionError) as err:
        requested_format(value)
    assert "format_version" in str(err.value) and "'1.0', '1.1'" in str(err.value)
    assert requested_format(" 1.1 ") is V1_1


def test_what_each_version_changes() -> None:
    assert V1_0.inlined_system_columns == ("row_id", "begin_snapshot", "end_snapshot")
    assert V1_1.inlined_system_columns == ("_ducklake_row_id", "_ducklake_begin_snapshot", "_ducklake_end_snapshot")
    flags = ("row_group_counts", "view_column_tags", "epoch_transforms", "multi_snapshot_deletion_vectors")
    assert [getattr(V1_0, f) for f in flags] == [False] * 4
    assert [getattr(V1_1, f) for f in flags] == [True] * 4


def test_reserved_names_per_version() -> None:
    # 1.0: the inlined tables' own names, only while inlining is on; a _ducklake_ prefix alone is fine
    check_column_names(["row_id", "_ducklake_x"], 0, V1_0)
    check_column_names(["_ducklake_x", "_DuckLake_Row_Id"], 10, V1_0)
    with pytest.raises(InvalidIdentifierError, match="'Row_ID' is reserved by DuckLake for inlined data"):
        check_column_names(["Row_ID"], 10, V1_0)
    # 1.1: every name starting with _ducklake_ (any case), inlining on or off; the old names are free
    check_column_names(["row_id", "begin_snapshot", "end_snapshot"], 10, V1_1)
    for name in ("_ducklake_row_id", "_DUCKLAKE_anything", "_ducklake_"):
        with pytest.raises(InvalidIdentifierError, match=r"reserved by DuckLake 1\.1"):
            check_column_names([name], 0, V1_1)
