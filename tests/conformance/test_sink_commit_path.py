"""The sink's driver-side commit path without Spark: few statements per batch, yet foreign commits are never missed.

``MicroBatchCommitter`` remembers what its own last commit left in the catalog and reads none of it again while
that snapshot is the newest. These tests count the statements of a steady-state batch and let DuckDB commit
between two batches (rows, an ALTER), checking that the next batch sees them: row ids, table and column
statistics, the inlined-data table and the flush threshold, all as DuckDB reads them.
"""

from __future__ import annotations

import time
from typing import Any

import pyarrow as pa
from sqlalchemy import event, text

from pyspark_ducklake.catalog.types import TableSchema, columns_from_arrow
from pyspark_ducklake.lake import Lake
from pyspark_ducklake.table.microbatch import BatchMetrics, MicroBatchCommitter, SinkSettings, write_task

SCHEMA = pa.schema([("id", pa.int64()), ("kind", pa.string()), ("amount", pa.float64())])


def rows(start: int, n: int) -> pa.Table:
    ids = list(range(start, start + n))
    return pa.table({"id": ids, "kind": [f"k{i % 3}" for i in ids], "amount": [i * 1.5 for i in ids]}, schema=SCHEMA)


def commit_batch(committer: MicroBatchCommitter, batch_id: int, data: pa.Table, app: str = "app") -> BatchMetrics:
    """What ``DuckLakeSink`` does for one batch, with the rows handed over by two 'tasks'."""
    started = time.monotonic()
    done, planned = committer.prepare(app, batch_id, TableSchema(tuple(columns_from_arrow(data.schema))))
    assert done is None and planned is not None
    plan, tplan = planned
    half = data.num_rows // 2
    outputs = [write_task(plan, data.slice(0, half).to_batches()), write_task(plan, data.slice(half).to_batches())]
    return committer.commit(plan, tplan, outputs, app_id=app, batch_id=batch_id, started=started)


def catalog_stats(lake: Lake) -> tuple[Any, dict[str, tuple[Any, Any]]]:
    with lake.engine.connect() as conn:
        table = conn.execute(text("SELECT record_count, next_row_id FROM ducklake_table_stats")).one()
        columns = conn.execute(
            text(
                "SELECT c.column_name, s.min_value, s.max_value FROM ducklake_table_column_stats s "
                "JOIN ducklake_column c ON c.table_id = s.table_id AND c.column_id = s.column_id "
                "AND c.end_snapshot IS NULL"
            )
        ).all()
    return tuple(table), {r[0]: (r[1], r[2]) for r in columns}


def test_steady_inlined_batch_reads_only_the_head(catalog: Any) -> None:
    lake = Lake(catalog.url, catalog.data_path)
    committer = MicroBatchCommitter(lake, "main.events", SinkSettings())
    for b in range(2):
        commit_batch(committer, b, rows(b * 100, 100))
    statements: list[str] = []

    @event.listens_for(lake.engine, "before_cursor_execute")
    def _count(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        # BEGIN, and on PostgreSQL the read snapshot and the commit lock (SET TRANSACTION, SET LOCAL lock_timeout,
        # pg_advisory_xact_lock), are not catalog work
        skip = ("BEGIN", "SET TRANSACTION", "SET LOCAL", "SELECT PG_ADVISORY_XACT_LOCK")
        if not statement.lstrip().upper().startswith(skip):
            statements.append(" ".join(statement.split()))

    metrics = commit_batch(committer, 2, rows(200, 100))
    assert metrics.mode == "inlined" and metrics.attempts == 1
    reads = [s for s in statements if s.upper().startswith("SELECT")]
    # the replay check with the plan, and the commit, each read the head snapshot, and nothing else
    assert len(reads) == 2 and all("FROM ducklake_snapshot ORDER BY" in s for s in reads), reads
    writes = [s.split(" (")[0].split(" SET")[0] for s in statements if not s.upper().startswith("SELECT")]
    assert writes == [
        "INSERT INTO ducklake_snapshot",
        "INSERT INTO ducklake_inlined_data_1_1",
        "UPDATE pyspark_ducklake_app_progress",
        "UPDATE ducklake_table_stats",
        "UPDATE ducklake_table_column_stats",  # only the widened columns, in one executemany
        "UPDATE ducklake_snapshot",  # next_file_id moves on an inlined commit, as DuckDB's stats cache expects
        "INSERT INTO ducklake_snapshot_changes",
    ]
    lake.close()


def test_duckdb_commits_between_batches_are_seen(catalog: Any, duckdb_lake: Any) -> None:
    lake = Lake(catalog.url, catalog.data_path)
    # 100 + 5 (DuckDB's) + 100 crosses 203 only if the DuckDB rows are counted
    committer = MicroBatchCommitter(lake, "main.events", SinkSettings(flush_rows=203))
    commit_batch(committer, 0, rows(0, 100))
    con = duckdb_lake(catalog, inlining_row_limit=10)
    con.execute("INSERT INTO lake.main.events SELECT 1000000 + i, 'zz', -1.0 FROM range(5) t(i)")
    second = commit_batch(committer, 1, rows(100, 100))
    assert second.flushed_rows == 205
    third = commit_batch(committer, 2, rows(200, 100))
    assert third.flushed_rows == 0
    con.execute("ALTER TABLE lake.main.events ADD COLUMN note VARCHAR")
    con.execute("INSERT INTO lake.main.events VALUES (2000000, 'yy', 2.0, 'duck')")
    commit_batch(committer, 3, rows(300, 100))  # a new schema version, so a new inlined-data table

    total = 100 + 5 + 100 + 100 + 1 + 100
    assert con.execute("SELECT count(*), count(DISTINCT rowid), count(note) FROM lake.main.events").fetchone() == (
        total,
        total,
        1,
    )
    assert con.execute("SELECT max(id), min(amount) FROM lake.main.events").fetchone() == (2000000, -1.0)
    table, columns = catalog_stats(lake)
    assert table == (total, total)
    assert columns["id"] == ("0", "2000000") and columns["kind"] == ("k0", "zz")
    # time travel: each batch's snapshot holds it on top of DuckDB's commits, the flush changed nothing
    counts = [
        con.execute(f"SELECT count(*) FROM lake.main.events AT (VERSION => {v})").fetchone()[0] for v in range(1, 8)
    ]
    assert counts == [100, 105, 205, 305, 305, 306, total]
    lake.close()


def test_sink_batch_adding_two_columns_leaves_one_inlined_table_with_both(catalog: Any) -> None:
    """merge_schema adds every new column (and struct field) in the batch's one snapshot, hence one schema version:
    its inlined-data table was created at the first addition and, existing already, not re-created at the second,
    so it lacked the later columns. The batch's own inlined rows then failed to commit ('has no column named ...'),
    and after a Parquet batch a later inlined insert failed the same way."""
    from tests.support.duck import open_duckdb

    lake = Lake(catalog.url, catalog.data_path)
    lake.create_table("main.m", pa.schema([("id", pa.int64())]))
    lake.append("main.m", pa.table({"id": [0]}))
    wider = pa.schema(
        [("id", pa.int64()), ("a", pa.int64()), ("s", pa.struct([("x", pa.string())])), ("b", pa.string())]
    )
    widest = pa.schema([*wider, pa.field("c", pa.float64()), pa.field("d", pa.int32())])
    committer = MicroBatchCommitter(lake, "main.m", SinkSettings(merge_schema=True))

    def batch(schema: pa.Schema, ids: list[int]) -> dict[str, list[Any]]:
        columns: dict[str, list[Any]] = {"id": ids}
        for f in schema:
            if f.name == "s":
                columns["s"] = [{"x": f"x{i}"} for i in ids]
            elif f.name != "id":
                columns[f.name] = [str(i) if pa.types.is_string(f.type) else i for i in ids]
        return columns

    commit_batch(committer, 0, pa.table(batch(wider, [1, 2]), schema=wider))  # inlined, 3 columns added
    commit_batch(committer, 1, pa.table(batch(widest, list(range(3, 2003))), schema=widest))  # Parquet, 2 added
    lake.append("main.m", pa.table(batch(widest, [2003]), schema=widest))  # inlined into the new version
    expected = [
        (
            i,
            None if i == 0 else i,
            None if i == 0 else f"x{i}",
            None if i == 0 else str(i),
            None if i < 3 else float(i),
            None if i < 3 else i,
        )
        for i in range(2004)
    ]
    got = lake.scan("main.m").to_pylist()
    assert sorted((r["id"], r["a"], r["s"] and r["s"]["x"], r["b"], r["c"], r["d"]) for r in got) == expected
    con = open_duckdb(catalog)
    try:
        duck = con.execute("SELECT id, a, s.x, b, c, d FROM lake.main.m ORDER BY id").fetchall()
        tables = con.execute(
            "SELECT table_name, count(*) FROM __ducklake_metadata_lake.ducklake_inlined_data_tables "
            "GROUP BY table_name HAVING count(*) > 1"
        ).fetchall()
    finally:
        con.close()
    assert duck == expected
    assert tables == []  # each inlined-data table registered once
