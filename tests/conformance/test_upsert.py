"""``lake.upsert`` and ``lake.update`` against DuckDB 1.5.5 as the oracle.

The same sequence of changes is applied by this library to one lake and by DuckDB's own ``MERGE INTO`` / ``UPDATE``
to a twin lake: the tables and both change feeds (``rowid``, change type, values, snapshot) must be equal, and DuckDB
must read our lake exactly as we do. Inlined and Parquet, SQLite and PostgreSQL catalogs, after our flush and
compaction, hostile inputs (nothing written), replay protection and two writers with a forced interleaving.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import pyspark_ducklake as pdl
from pyspark_ducklake._faults import before_next_commit
from pyspark_ducklake.catalog import reader
from pyspark_ducklake.exceptions import (
    DuplicateKeyError,
    InvalidOptionError,
    NoSuchColumnError,
    SchemaMismatchError,
)
from pyspark_ducklake.table.scan import plan_scan
from pyspark_ducklake.table.upsert import prune_filter
from tests.support.bad_inputs import expect_bad_input
from tests.support.duck import connect_duckdb, open_duckdb

SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.string())])
FEED = ("_snapshot_id", "_rowid", "_change_type", "id", "v")

# (rows (id, v, deleted), order column) per upsert; duplicates resolved by lsn, the last wins
BATCHES: list[list[tuple[int, str | None, bool, int]]] = [
    [(2, "u2", False, 1), (5, "u5", False, 1), (20, "n20", False, 1), (7, None, True, 1)],
    [(3, "a", False, 2), (3, "b", False, 1), (21, "c", False, 1), (20, "n20b", False, 1)],
    [(21, None, True, 1), (22, "x", False, 1), (99, None, True, 1), (0, "z", False, 1)],
    [(21, "back", False, 1), (2, "u2b", False, 2), (2, "u2c", False, 3)],
]


def batch_table(rows: list[tuple[int, str | None, bool, int]]) -> pa.Table:
    ids, vs, ds, lsns = zip(*rows, strict=True)
    return pa.table({"id": list(ids), "v": list(vs), "op_delete": list(ds), "lsn": list(lsns)})


def last_by_lsn(rows: list[tuple[int, str | None, bool, int]]) -> dict[int, tuple[str | None, bool]]:
    out: dict[int, tuple[str | None, bool, int]] = {}
    for i, v, d, lsn in rows:
        if i not in out or lsn >= out[i][2]:
            out[i] = (v, d, lsn)
    return {i: (v, d) for i, (v, d, _) in out.items()}


def merge_sql(rows: list[tuple[int, str | None, bool, int]]) -> str:
    """DuckDB's own upsert of the batch in one transaction (one snapshot): a DELETE of the deleted keys, then a
    MERGE (DuckLake's MERGE takes a single UPDATE/DELETE action)."""
    final = last_by_lsn(rows)
    gone = [i for i, (_, d) in final.items() if d]
    kept = {i: v for i, (v, d) in final.items() if not d}
    sql = "BEGIN; "
    if gone:
        sql += f"DELETE FROM t WHERE id IN ({', '.join(map(str, gone))}); "
    if kept:
        values = ", ".join(f"({i}, {'NULL' if v is None else repr(v)})" for i, v in kept.items())
        sql += (
            f"MERGE INTO t USING (SELECT * FROM (VALUES {values}) s(id, v)) s ON t.id = s.id "
            "WHEN MATCHED THEN UPDATE SET v = s.v WHEN NOT MATCHED THEN INSERT VALUES (s.id, s.v); "
        )
    return sql + "COMMIT"


def feed_here(lake: pdl.Lake, start: int = 1, table: str = "main.t") -> list[tuple[Any, ...]]:
    t = lake.table_changes(table, start)
    return sorted(zip(*(t.column(c).to_pylist() for c in FEED), strict=True), key=_sort_key)


def feed_duck(con: Any, end: int, start: int = 1, schema: str = "main", table: str = "t") -> list[tuple[Any, ...]]:
    rows = con.execute(
        f"SELECT snapshot_id, rowid, change_type, id, v FROM ducklake_table_changes('lake', '{schema}', '{table}', "
        f"{start}, {end})"
    ).fetchall()
    return sorted(rows, key=_sort_key)


def _sort_key(r: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple((x is None, x) for x in r)


def rows_here(lake: pdl.Lake, table: str = "main.t") -> list[tuple[Any, ...]]:
    t = lake.scan(table, columns=["rowid", "id", "v"])
    return sorted(zip(*(t.column(c).to_pylist() for c in ("rowid", "id", "v")), strict=True))


def rows_duck(con: Any, table: str = "t") -> list[tuple[Any, ...]]:
    return sorted(con.execute(f"SELECT rowid, id, v FROM lake.{table}").fetchall())


def duck_twin(tmp_path: Path, limit: int) -> Any:
    """DuckDB's own lake (DuckDB-file catalog) with the same table and first rows."""
    con = connect_duckdb()
    con.execute(
        f"ATTACH 'ducklake:{tmp_path / 'twin.ducklake'}' AS lake (DATA_PATH '{tmp_path / 'twin'}/', "
        f"DATA_INLINING_ROW_LIMIT {limit})"
    )
    con.execute("USE lake")
    con.execute("CREATE TABLE t(id BIGINT, v VARCHAR)")
    con.execute("INSERT INTO t SELECT i, 'v' || i FROM range(10) r(i)")
    return con


def lake_with_rows(location: Any, limit: int) -> pdl.Lake:
    lake = pdl.connect(location.url, location.data_path, data_inlining_row_limit=limit)
    lake.create_table("main.t", SCHEMA)
    lake.append("main.t", pa.table({"id": list(range(10)), "v": [f"v{i}" for i in range(10)]}, schema=SCHEMA))
    return lake


@pytest.mark.parametrize("limit", [0, 100], ids=["parquet", "inlined"])
def test_upserts_equal_duckdb_merge(catalog: Any, tmp_path: Path, limit: int) -> None:
    lake = lake_with_rows(catalog, limit)
    twin = duck_twin(tmp_path, limit)
    try:
        for rows in BATCHES:
            before = lake.current_snapshot_id()
            snap = lake.upsert("main.t", batch_table(rows), on=["id"], delete_column="op_delete", order_by="lsn")
            assert snap == before + 1  # one snapshot per upsert
            twin.execute(merge_sql(rows))
        end = lake.current_snapshot_id()
        assert twin.execute("SELECT max(snapshot_id) FROM lake.snapshots()").fetchone()[0] == end
        assert rows_here(lake) == rows_duck(twin)
        assert feed_here(lake) == feed_duck(twin, end)
        # update pairs keep the rowid: one pair per replaced key, with the same rowid and snapshot
        kinds = [r[2] for r in feed_here(lake)]
        assert kinds.count("update_preimage") == kinds.count("update_postimage") > 0
        ours = open_duckdb(catalog)
        try:
            assert rows_duck(ours) == rows_here(lake)  # DuckDB reads our lake as we do
            assert feed_duck(ours, end) == feed_here(lake)
        finally:
            ours.close()
    finally:
        twin.close()


@pytest.mark.parametrize("limit", [0, 100], ids=["parquet", "inlined"])
def test_update_equals_duckdb_update(catalog: Any, tmp_path: Path, limit: int) -> None:
    lake = lake_with_rows(catalog, limit)
    twin = duck_twin(tmp_path, limit)
    try:
        lake.update("main.t", {"v": pc.binary_join_element_wise(pc.field("v"), "!", "")}, [("id", "<", 3)])
        twin.execute("UPDATE t SET v = v || '!' WHERE id < 3")
        lake.update("main.t", {"v": "same"}, [("id", ">=", 8)])
        twin.execute("UPDATE t SET v = 'same' WHERE id >= 8")
        lake.update("main.t", {"v": None, "id": pc.field("id") + 100}, [("id", "=", 5)])
        twin.execute("UPDATE t SET v = NULL, id = id + 100 WHERE id = 5")
        head = lake.current_snapshot_id()
        assert lake.update("main.t", {"v": "x"}, [("id", "=", 12345)]) == head  # nothing matched: no snapshot
        end = lake.current_snapshot_id()
        assert rows_here(lake) == rows_duck(twin)
        assert feed_here(lake) == feed_duck(twin, end)
        ours = open_duckdb(catalog)
        try:
            assert rows_duck(ours) == rows_here(lake)
            assert feed_duck(ours, end) == feed_here(lake)
        finally:
            ours.close()
    finally:
        twin.close()


@pytest.mark.parametrize("limit", [0, 100], ids=["parquet", "inlined"])
def test_upserts_after_flush_and_compaction(catalog: Any, limit: int) -> None:
    lake = lake_with_rows(catalog, limit)
    for rows in BATCHES[:2]:
        lake.upsert("main.t", batch_table(rows), on="id", delete_column="op_delete", order_by="lsn")
    feed_before, rows_before = feed_here(lake), rows_here(lake)
    lake.flush_inlined_data("main.t")
    lake.merge_adjacent_files("main.t")
    assert rows_here(lake) == rows_before
    assert [r for r in feed_here(lake) if r[0] <= feed_before[-1][0]] == feed_before  # history kept
    # upserts into rows that now live in flushed / merged files (their row ids in _ducklake_internal_row_id)
    for rows in BATCHES[2:]:
        lake.upsert("main.t", batch_table(rows), on="id", delete_column="op_delete", order_by="lsn")
    model = {i: f"v{i}" for i in range(10)}
    for rows in BATCHES:
        for i, (v, d) in last_by_lsn(rows).items():
            if d:
                model.pop(i, None)
            else:
                model[i] = v
    assert sorted((i, v) for _, i, v in rows_here(lake)) == sorted(model.items())
    end = lake.current_snapshot_id()
    ours = open_duckdb(catalog)
    try:
        assert rows_duck(ours) == rows_here(lake)
        start = feed_before[-1][0] + 1
        got = [r for r in feed_here(lake, start) if r[0] > start]  # after our flush and merge
        assert got == feed_duck(ours, end, start + 1)
    finally:
        ours.close()
    rowids = [r[0] for r in rows_here(lake)]
    assert len(rowids) == len(set(rowids))


def test_upsert_reads_only_files_that_may_hold_the_keys_and_rewrites_none(sqlite_catalog: Any) -> None:
    lake = pdl.connect(sqlite_catalog.url, sqlite_catalog.data_path, data_inlining_row_limit=0)
    lake.create_table("main.t", SCHEMA)
    for f in range(8):
        ids = list(range(f * 1000, f * 1000 + 1000))
        lake.append("main.t", pa.table({"id": ids, "v": [str(i) for i in ids]}, schema=SCHEMA))
    files_before = live_file_ids(lake)
    keys = pa.table({"id": [*range(3000, 3999, 3), 10**6], "v": ["new"] * 334})
    prune = prune_filter(keys, "id")
    table = lake.table("main.t")
    with lake.engine.connect() as conn:
        scan = plan_scan(
            conn, table.entry, table.snapshot_id, lake.data_path, fmt=lake.info.format, filters=prune, columns=["id"]
        )
    assert len(scan.files) == 1 and scan.pruned_files == 7
    snap = lake.upsert("main.t", keys, on=["id"])
    changes = lake.snapshots()[-1].changes_made or ""
    assert snap == lake.current_snapshot_id() and changes == "inserted_into_table:1,deleted_from_table:1"
    assert lake.scan("main.t").num_rows == 8001
    assert files_before < live_file_ids(lake)  # every file stays: deletes go to delete files


def test_upsert_reads_only_the_key_columns(sqlite_catalog: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from pyspark_ducklake.table import scan as scan_module

    lake = pdl.connect(sqlite_catalog.url, sqlite_catalog.data_path, data_inlining_row_limit=0)
    wide = pa.schema([("id", pa.int64()), ("v", pa.string()), ("blob", pa.binary())])
    lake.create_table("main.w", wide)
    lake.append("main.w", pa.table({"id": [1, 2], "v": ["a", "b"], "blob": [b"x" * 100, b"y"]}, schema=wide))
    picked: list[list[str] | None] = []
    real = scan_module.read_columns

    def spy(path: str, pick: Any, **kwargs: Any) -> pa.Table:
        def recording(schema: pa.Schema) -> list[str] | None:
            picked.append(pick(schema))
            return picked[-1]

        return real(path, recording, **kwargs)

    monkeypatch.setattr(scan_module, "read_columns", spy)
    lake.upsert("main.w", pa.table({"id": [2], "v": ["B"], "blob": [b"z"]}), on=["id"])
    assert picked == [["id"]]
    monkeypatch.undo()
    assert sorted(lake.scan("main.w").to_pylist(), key=lambda r: r["id"]) == [
        {"id": 1, "v": "a", "blob": b"x" * 100},
        {"id": 2, "v": "B", "blob": b"z"},
    ]


def live_file_ids(lake: pdl.Lake) -> set[int]:
    table = lake.table("main.t")
    with lake.engine.connect() as conn:
        return {
            f.data_file_id
            for f in reader.data_files(conn, table.entry, table.snapshot_id, lake.data_path, lake.info.format)
        }


def test_small_upsert_is_inlined(sqlite_catalog: Any) -> None:
    lake = pdl.connect(sqlite_catalog.url, sqlite_catalog.data_path, data_inlining_row_limit=10)
    lake.create_table("main.t", SCHEMA)
    lake.append("main.t", pa.table({"id": list(range(100)), "v": ["a"] * 100}, schema=SCHEMA))  # a Parquet file
    lake.upsert("main.t", pa.table({"id": [1, 200], "v": ["b", "c"]}), on=["id"])
    assert set((lake.snapshots()[-1].changes_made or "").split(",")) == {"inlined_insert:1", "deleted_from_table:1"}


# --- hostile inputs: a typed error and nothing written ------------------------------------------------------------


@pytest.mark.parametrize(
    ("case", "data", "kwargs"),
    [
        ("upsert-null-key", {"id": [1, None], "v": ["a", "b"]}, {}),
        ("upsert-duplicate-key", {"id": [1, 1], "v": ["a", "b"]}, {}),
        ("upsert-key-missing", {"ID": [1], "v": ["a"]}, {"on": ["ID"]}),
        ("upsert-key-missing", {"Id": [1], "v": ["a"]}, {}),
        ("upsert-delete-not-boolean", {"id": [1], "v": ["a"], "d": ["false"]}, {"delete_column": "d"}),
        ("upsert-delete-not-boolean", {"id": [1], "v": ["a"], "d": [0]}, {"delete_column": "d"}),
        ("upsert-delete-not-boolean", {"id": [1], "v": ["a"], "d": [None]}, {"delete_column": "d"}),
        ("upsert-delete-null", {"id": [1], "v": ["a"], "d": pa.array([None], pa.bool_())}, {"delete_column": "d"}),
        ("txn-half", {"id": [1], "v": ["a"]}, {"txn_app_id": "app"}),
        ("txn-half", {"id": [1], "v": ["a"]}, {"txn_version": 3}),
        ("txn-half", {"id": [1], "v": ["a"]}, {"txn_app_id": "app", "txn_version": -1}),
    ],
)
def test_bad_upsert_input_writes_nothing(catalog: Any, case: str, data: dict[str, Any], kwargs: dict[str, Any]) -> None:
    lake = lake_with_rows(catalog, 0)
    with expect_bad_input(case, lake):
        lake.upsert("main.t", pa.table(data), **{"on": ["id"], **kwargs})


@pytest.mark.parametrize(
    ("data", "kwargs", "error", "match"),
    [
        ({"id": [1], "v": ["a"]}, {"delete_column": "gone"}, NoSuchColumnError, "delete_column"),
        ({"id": [1], "v": ["a"]}, {"order_by": "lsn"}, NoSuchColumnError, "order_by"),
        ({"id": [1], "v": ["a"]}, {"on": []}, InvalidOptionError, "key columns"),
        ({"id": [1], "v": ["a"]}, {"on": ["id", "id"]}, InvalidOptionError, "twice"),
        ({"id": [1], "v": ["a"], "d": [True]}, {"on": ["id"], "delete_column": "id"}, InvalidOptionError, "key"),
        ({"id": [1], "v": ["a"], "x": [1]}, {}, SchemaMismatchError, "x"),
    ],
)
def test_other_bad_upsert_arguments_write_nothing(
    sqlite_catalog: Any, data: dict[str, Any], kwargs: dict[str, Any], error: type[Exception], match: str
) -> None:
    lake = lake_with_rows(sqlite_catalog, 100)
    head = lake.current_snapshot_id()
    with pytest.raises(error, match=match):
        lake.upsert("main.t", pa.table(data), **{"on": ["id"], **kwargs})
    assert lake.current_snapshot_id() == head


def test_bad_update_and_drop_write_nothing(sqlite_catalog: Any) -> None:
    lake = lake_with_rows(sqlite_catalog, 0)
    with expect_bad_input("update-unknown-column", lake):
        lake.update("main.t", {"vv": "x"}, [("id", "=", 1)])
    lake.create_schema("s2")
    lake.create_table("s2.x", SCHEMA)
    with expect_bad_input("drop-schema-not-empty", lake):
        lake.drop_schema("s2")
    with pytest.raises(SchemaMismatchError):  # a value that does not fit its column: nothing written
        head = lake.current_snapshot_id()
        lake.update("main.t", {"id": "not a number"}, [("id", "=", 1)])
    assert lake.current_snapshot_id() == head


def test_upsert_on_a_nested_key_is_refused(sqlite_catalog: Any) -> None:
    lake = pdl.connect(sqlite_catalog.url, sqlite_catalog.data_path)
    lake.create_table("main.n", pa.schema([("k", pa.list_(pa.int64())), ("v", pa.string())]))
    with expect_bad_input("upsert-key-nested", lake):
        lake.upsert("main.n", pa.table({"k": [[1]], "v": ["a"]}), on=["k"])


@pytest.mark.parametrize("limit", [0, 100], ids=["parquet", "inlined"])
def test_float_and_string_keys_compare_as_duckdb_does(sqlite_catalog: Any, limit: int) -> None:
    lake = pdl.connect(sqlite_catalog.url, sqlite_catalog.data_path, data_inlining_row_limit=limit)
    lake.create_table("main.f", pa.schema([("k", pa.float64()), ("v", pa.string())]))
    lake.append("main.f", pa.table({"k": [0.0, math.nan, 1.5], "v": ["zero", "nan", "x"]}))
    lake.upsert("main.f", pa.table({"k": [-0.0, float("nan"), 2.5], "v": ["z2", "n2", "y"]}), on=["k"])
    got = float_rows(lake.scan("main.f").to_pylist())
    assert got == float_rows(
        [{"k": -0.0, "v": "z2"}, {"k": math.nan, "v": "n2"}, {"k": 1.5, "v": "x"}, {"k": 2.5, "v": "y"}]
    )  # the row replaced 0.0's row whole, its key spelt -0.0 as given
    # NaN twice, -0.0 and 0.0: duplicates of one key each
    with pytest.raises(DuplicateKeyError):
        lake.upsert("main.f", pa.table({"k": [0.0, -0.0], "v": ["a", "b"]}), on=["k"])
    with pytest.raises(DuplicateKeyError):
        lake.upsert("main.f", pa.table({"k": [math.nan, float("nan")], "v": ["a", "b"]}), on=["k"])
    con = open_duckdb(sqlite_catalog)
    try:
        want = con.execute("SELECT k, v FROM lake.f").fetchall()
        assert float_rows([{"k": k, "v": v} for k, v in want]) == got
        # DuckDB's own join agrees: -0.0 matches 0.0, NaN matches NaN
        assert con.execute("SELECT count(*) FROM lake.f WHERE k = -0.0 OR k = 'nan'::DOUBLE").fetchone() == (2,)
    finally:
        con.close()
    lake.create_table("main.s", SCHEMA.remove(0).insert(0, pa.field("id", pa.string())))
    lake.append("main.s", pa.table({"id": ["a", "A"], "v": ["1", "2"]}))
    lake.upsert("main.s", pa.table({"id": ["a"], "v": ["3"]}), on=["id"])
    assert sorted(lake.scan("main.s").to_pylist(), key=str) == sorted(
        [{"id": "a", "v": "3"}, {"id": "A", "v": "2"}], key=str
    )


def float_rows(rows: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return sorted((repr(r["k"]), r["v"]) for r in rows)


# --- replay protection ---------------------------------------------------------------------------------------------


def test_txn_version_makes_append_and_upsert_replay_safe(catalog: Any) -> None:
    lake = lake_with_rows(catalog, 100)
    one = pa.table({"id": [100], "v": ["a"]}, schema=SCHEMA)
    s1 = lake.append("main.t", one, txn_app_id="job", txn_version=1)
    assert lake.append("main.t", one, txn_app_id="job", txn_version=1) == s1  # a replay: no-op
    assert lake.append("main.t", one, txn_app_id="job", txn_version=0) == s1  # older: no-op
    assert lake.current_snapshot_id() == s1
    s2 = lake.upsert("main.t", pa.table({"id": [100], "v": ["b"]}), on=["id"], txn_app_id="job", txn_version=2)
    assert s2 == s1 + 1
    assert lake.upsert("main.t", pa.table({"id": [100], "v": ["c"]}), on=["id"], txn_app_id="job", txn_version=2) == s2
    assert lake.append("main.t", one, txn_app_id="other", txn_version=1) == s2 + 1  # app ids are independent
    # a version whose upsert changes nothing (deleting a key that is not there) commits nothing
    gone = pa.table({"id": [12345], "v": ["x"], "d": [True]})
    assert lake.upsert("main.t", gone, on="id", delete_column="d", txn_app_id="job", txn_version=3) == s2 + 1
    assert [r for r in lake.scan("main.t").to_pylist() if r["id"] == 100] == [
        {"id": 100, "v": "b"},
        {"id": 100, "v": "a"},
    ]


def test_txn_version_committed_by_a_concurrent_writer_is_a_no_op(sqlite_catalog: Any) -> None:
    lake = lake_with_rows(sqlite_catalog, 100)
    other = pdl.connect(sqlite_catalog.url)
    one = pa.table({"id": [100], "v": ["a"]}, schema=SCHEMA)
    landed: list[int] = []
    with before_next_commit(lambda: landed.append(other.append("main.t", one, txn_app_id="j", txn_version=7))):
        assert lake.append("main.t", one, txn_app_id="j", txn_version=7) == landed[0]
    assert lake.scan("main.t", filter=[("id", "=", 100)]).num_rows == 1


# --- two writers -----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("limit", [0, 100], ids=["parquet", "inlined"])
def test_concurrent_upserts_of_one_key_lose_no_update(catalog: Any, limit: int) -> None:
    lake = lake_with_rows(catalog, limit)
    other = pdl.connect(catalog.url, data_inlining_row_limit=limit)
    start = lake.current_snapshot_id()
    with before_next_commit(lambda: other.upsert("main.t", pa.table({"id": [3, 50], "v": ["theirs", "t50"]}), on="id")):
        lake.upsert("main.t", pa.table({"id": [3, 50], "v": ["ours", "o50"]}), on="id")
    got = {r["id"]: r["v"] for r in lake.scan("main.t").to_pylist()}
    assert lake.scan("main.t").num_rows == 11 and got[3] == "ours" and got[50] == "o50"
    feed = feed_here(lake, start + 1)
    # theirs: an update pair for 3, an insert of 50; ours (planned again): update pairs for both
    assert [(r[2], r[3], r[4]) for r in feed if r[0] == start + 2] == [
        ("update_postimage", 3, "ours"),
        ("update_preimage", 3, "theirs"),
        ("update_postimage", 50, "o50"),
        ("update_preimage", 50, "t50"),
    ] or sorted((r[2], r[3], r[4]) for r in feed if r[0] == start + 2) == sorted(
        [
            ("update_postimage", 3, "ours"),
            ("update_preimage", 3, "theirs"),
            ("update_postimage", 50, "o50"),
            ("update_preimage", 50, "t50"),
        ]
    )
    con = open_duckdb(catalog)
    try:
        assert rows_duck(con) == rows_here(lake)
        assert feed_duck(con, lake.current_snapshot_id(), start + 1) == feed
    finally:
        con.close()


def test_upsert_replans_when_duckdb_updates_the_key_meanwhile(catalog: Any) -> None:
    lake = lake_with_rows(catalog, 0)
    con = open_duckdb(catalog)
    try:
        with before_next_commit(lambda: con.execute("UPDATE lake.t SET v = 'duck' WHERE id = 4") and None):
            lake.upsert("main.t", pa.table({"id": [4], "v": ["ours"]}), on="id")
        assert con.execute("SELECT v FROM lake.t WHERE id = 4").fetchall() == [("ours",)]
    finally:
        con.close()
    assert lake.scan("main.t").num_rows == 10


def test_upsert_into_a_partitioned_table_with_deletion_vectors(catalog: Any) -> None:
    lake = pdl.connect(catalog.url, catalog.data_path, data_inlining_row_limit=0)
    schema = pa.schema([("id", pa.int64()), ("kind", pa.string()), ("v", pa.string())])
    lake.create_table("main.p", schema, partition_by=["kind"])
    lake.append("main.p", pa.table({"id": list(range(20)), "kind": ["a", "b"] * 10, "v": ["x"] * 20}, schema=schema))
    con = open_duckdb(catalog)
    try:
        con.execute("CALL lake.set_option('write_deletion_vectors', true)")
    finally:
        con.close()
    start = lake.current_snapshot_id()
    rowid = dict(
        zip(*(lake.scan("main.p", columns=["id", "rowid"]).column(c).to_pylist() for c in ("id", "rowid")), strict=True)
    )
    # a key may move between partitions: its new version goes to the new partition's folder with its row id
    lake.upsert("main.p", pa.table({"id": [0, 1, 50], "kind": ["b", "b", "a"], "v": ["moved", "same", "new"]}), on="id")
    got = sorted((r["id"], r["kind"], r["v"]) for r in lake.scan("main.p").to_pylist())
    assert got[:2] == [(0, "b", "moved"), (1, "b", "same")] and got[-1] == (50, "a", "new") and len(got) == 21
    con = open_duckdb(catalog)
    try:
        assert sorted(con.execute("SELECT id, kind, v FROM lake.p").fetchall()) == got
        feed = con.execute(
            f"SELECT rowid, change_type, id FROM ducklake_table_changes('lake', 'main', 'p', {start + 1}, "
            f"{lake.current_snapshot_id()}) ORDER BY ALL"
        ).fetchall()
        assert feed == sorted(
            [
                (rowid[0], "update_postimage", 0),
                (rowid[0], "update_preimage", 0),
                (rowid[1], "update_postimage", 1),
                (rowid[1], "update_preimage", 1),
                (22, "insert", 50),  # after the 20 rows and the two ids DuckDB's layout reserves for the new versions
            ]
        )
        puffins = "SELECT count(*) FROM __ducklake_metadata_lake.ducklake_delete_file WHERE path LIKE '%.puffin'"
        assert con.execute(puffins).fetchone() == (2,)  # one deletion vector per partition's file
    finally:
        con.close()


def test_two_threads_upserting_the_same_keys_keep_one_row_per_key(pg_catalog: Any) -> None:
    import threading

    lake = lake_with_rows(pg_catalog, 0)
    start = lake.current_snapshot_id()
    errors: list[BaseException] = []

    def writer(name: str) -> None:
        mine = pdl.connect(pg_catalog.url, max_retry_count=50, retry_wait_ms=5)
        try:
            for n in range(4):
                mine.upsert("main.t", pa.table({"id": [1, 2, 30 + n], "v": [f"{name}{n}"] * 3}), on="id")
        except BaseException as e:
            errors.append(e)
        finally:
            mine.close()

    threads = [threading.Thread(target=writer, args=(n,)) for n in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    rows = lake.scan("main.t").to_pylist()
    ids = [r["id"] for r in rows]
    assert len(ids) == len(set(ids)) == 14  # 10 + keys 30..33, each once
    feed = feed_here(lake, start + 1)
    # every upsert after the first replaced 1 and 2 (and 30+n when the other writer inserted it first)
    assert sum(1 for r in feed if r[2] == "update_preimage" and r[3] in (1, 2)) == 2 * 8
    assert sum(1 for r in feed if r[2] == "insert") == 4
