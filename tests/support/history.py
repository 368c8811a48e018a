"""A lake with a long streaming history, built in seconds: what a stream committing small batches leaves behind.

One table (``main.stream``) takes ``rows_per_commit``-row appends, inlined into the catalog as any small append is,
and every so often a flush, a merge, a delete, an upsert or a schema change, each through the ordinary
:class:`~pyspark_ducklake.lake.Lake` API; a second table (``main.quiet``) gets 100 rows once and never changes.

The appends between two such events are the bulk of the history and are made cheaply, yet the catalog ends up
holding exactly the rows one commit per append writes: the run's rows are appended in one ordinary inlined commit
(``Lake.append`` with inlining up to any size: the library's own catalog writers make the inlined rows, row ids,
table and column statistics), which is then spread into one snapshot per batch: each batch's inlined rows begin at
their own snapshot, and each snapshot gets the ``ducklake_snapshot`` and ``ducklake_snapshot_changes`` rows its own
commit would have written (an inlined commit moves ``next_file_id`` on by one). Statistics after a run of appends
do not depend on how the run was cut into commits. ``tests/conformance/test_history_shape.py`` checks that the
catalog equals, row for row, one built commit by commit, and that DuckDB reads it the same.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from sqlalchemy import MetaData, Table, bindparam, func, insert, select, update

from pyspark_ducklake.catalog import reader
from pyspark_ducklake.catalog import tables as T
from pyspark_ducklake.catalog.types import TableSchema, columns_from_arrow
from pyspark_ducklake.lake import Lake
from pyspark_ducklake.table.microbatch import MicroBatchCommitter, write_task

STREAM = "main.stream"
QUIET = "main.quiet"
SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.string())])
QUIET_ROWS = 100


@dataclass(frozen=True)
class Churn:
    """Every how many commits of the stream each event happens (0: never); the other commits are appends."""

    rows_per_commit: int = 10
    flush_every: int = 100  # flush_inlined_data: the inlined rows so far become one Parquet file
    merge_every: int = 1000  # merge_adjacent_files
    delete_every: int = 0  # delete a few rows: recent ones (inlined), old ones (in files: delete files)
    upsert_every: int = 0  # upsert: two existing keys replaced (update pairs), one new key
    alter_every: int = 0  # add a column (a new schema version and inlined table)


STREAMING = Churn(delete_every=250, upsert_every=500, alter_every=5000)


class History:
    """Grows a lake's history (:meth:`grow_to`) with the churn of a stream; builds ``main.stream`` and
    ``main.quiet`` at the first call."""

    def __init__(self, lake: Lake, churn: Churn = Churn(), *, bulk: bool = True) -> None:
        self.lake = lake
        self.churn = churn
        self.bulk = bulk  # False: every append its own ordinary commit (what the bulk path must equal)
        # the same catalog, inlining a whole run of appends in one commit (see the module docstring)
        self._bulk = Lake(lake.location, data_inlining_row_limit=2**31 - 1, retry=lake.retry)
        self.commits = 0  # commits of the stream so far (events that changed nothing count too)
        self.next_id = 0
        self.columns = 0  # columns added by alter events

    def close(self) -> None:
        self._bulk.close()

    def grow_to(self, snapshots: int) -> int:
        """Commit until the lake's newest snapshot id is at least ``snapshots``; returns the newest snapshot id."""
        head = self.lake.current_snapshot_id()
        if self.commits == 0:
            self.lake.create_table(STREAM, SCHEMA)
            self.lake.create_table(QUIET, SCHEMA)
            ids = pa.array(range(-QUIET_ROWS, 0), pa.int64())
            self.lake.append(QUIET, pa.table({"id": ids, "v": pa.compute.cast(ids, pa.string())}))
            head = self.lake.current_snapshot_id()
        while head < snapshots:
            run = self._appends_before_event(snapshots - head)
            if run:
                head = self._append_run([self.batch() for _ in range(run)])
                self.commits += run
            if head < snapshots and self._event_due():
                self._event()
                self.commits += 1
                head = self.lake.current_snapshot_id()
        return head

    # --- appends ----------------------------------------------------------------------------------------------------
    def _event_due(self) -> bool:
        n, c = self.commits + 1, self.churn
        return any(every and n % every == 0 for every in self._everies(c))

    @staticmethod
    def _everies(c: Churn) -> tuple[int, ...]:
        return (c.flush_every, c.merge_every, c.delete_every, c.upsert_every, c.alter_every)

    def _appends_before_event(self, limit: int) -> int:
        """How many appends come before the next event (at most ``limit``)."""
        run = 0
        while run < limit:
            n = self.commits + run + 1
            if any(every and n % every == 0 for every in self._everies(self.churn)):
                break
            run += 1
        return run

    def batch(self, n: int | None = None) -> pa.Table:
        """The next ``n`` (default ``rows_per_commit``) rows of the stream, with ids not used before."""
        n = self.churn.rows_per_commit if n is None else n
        ids = pa.array(range(self.next_id, self.next_id + n), pa.int64())
        self.next_id += n
        data = {"id": ids, "v": pa.compute.cast(ids, pa.string())}
        for i in range(self.columns):
            data[f"c{i}"] = ids
        return pa.table(data)

    def _append_run(self, batches: list[pa.Table]) -> int:
        """Commit ``batches`` as one snapshot each; returns the last snapshot id."""
        if not self.bulk:
            return [self.lake.append(STREAM, b) for b in batches][-1]
        first = self._bulk.append(STREAM, pa.concat_tables(batches))
        if len(batches) > 1:
            self._spread(first, [b.num_rows for b in batches])
        return first + len(batches) - 1

    def _spread(self, snapshot_id: int, sizes: list[int]) -> None:
        """Cut inlined commit ``snapshot_id`` of ``sum(sizes)`` rows into one commit per ``sizes`` item."""
        s, c = T.ducklake_snapshot, T.ducklake_snapshot_changes
        with self.lake.engine.connect().execution_options(ducklake_write=True) as conn, conn.begin():
            head = conn.execute(select(s).order_by(s.c.snapshot_id.desc()).limit(1)).one()
            assert head.snapshot_id == snapshot_id, "another writer committed while the history was built"
            changes = conn.execute(select(c).where(c.c.snapshot_id == snapshot_id)).one()
            table = reader.table_by_name(conn, "main", "stream", snapshot_id)
            name = reader.inlined_tables(conn, table.table_id)[-1][0]
            names = reader.format_version(conn).inlined_system_columns
            inlined = Table(name, MetaData(), *T.inlined_system_columns(names))
            low = conn.execute(
                select(func.min(inlined.c.row_id)).where(inlined.c.begin_snapshot == snapshot_id)
            ).scalar_one()
            cuts = []
            for j, n in enumerate(sizes):
                cuts.append({"b_lo": low, "b_hi": low + n, "b_snap": snapshot_id + j})
                low += n
            conn.execute(
                update(inlined)
                .where(inlined.c.row_id >= bindparam("b_lo"), inlined.c.row_id < bindparam("b_hi"))
                .values(begin_snapshot=bindparam("b_snap")),
                cuts[1:],
            )
            later = range(1, len(sizes))
            conn.execute(
                insert(s),
                [
                    {
                        "snapshot_id": snapshot_id + j,
                        "snapshot_time": head.snapshot_time + dt.timedelta(microseconds=j),
                        "schema_version": head.schema_version,
                        "next_catalog_id": head.next_catalog_id,
                        "next_file_id": head.next_file_id + j,
                    }
                    for j in later
                ],
            )
            conn.execute(
                insert(c),
                [{**changes._asdict(), "snapshot_id": snapshot_id + j} for j in later],
            )

    # --- events -----------------------------------------------------------------------------------------------------
    def _event(self) -> None:
        n, c, lake = self.commits + 1, self.churn, self.lake
        if c.merge_every and n % c.merge_every == 0:
            lake.merge_adjacent_files(STREAM)
        elif c.flush_every and n % c.flush_every == 0:
            lake.flush_inlined_data(STREAM)
        elif c.alter_every and n % c.alter_every == 0:
            lake.add_column(STREAM, f"c{self.columns}", pa.int64())
            self.columns += 1
        elif c.delete_every and n % c.delete_every == 0:
            lake.delete(STREAM, [("id", "in", list(self._victims(n)))])
        elif c.upsert_every and n % c.upsert_every == 0:
            old = sorted(set(self._victims(n + 1)))[:2]
            ids = pa.array([*old, self.next_id], pa.int64())
            self.next_id += 1
            data: dict[str, Any] = {"id": ids, "v": pa.array([f"u{n}"] * len(ids))}
            for i in range(self.columns):
                data[f"c{i}"] = ids
            lake.upsert(STREAM, pa.table(data), on="id")

    def _victims(self, n: int) -> Iterator[int]:
        """Three ids to delete or update at commit ``n``: a recent one (likely still inlined) and two older ones."""
        top = max(self.next_id, 1)
        yield top - 1 - (n % min(top, self.churn.rows_per_commit * 50))
        yield (n * 7919) % top
        yield (n * 104_729 + top // 2) % top


def sink_batch(committer: MicroBatchCommitter, app: str, batch_id: int, data: pa.Table) -> None:
    """What ``DuckLakeSink`` does for one micro-batch, without Spark: its rows handed over by one task."""
    done, planned = committer.prepare(app, batch_id, TableSchema(tuple(columns_from_arrow(data.schema))))
    assert done is None and planned is not None
    plan, tplan = planned
    outputs = [write_task(plan, data.to_batches())]
    committer.commit(plan, tplan, outputs, app_id=app, batch_id=batch_id, started=time.monotonic())


def feed_stream(catalog: str, options: dict[str, str]) -> Any:
    """The change-feed stream reader ``spark.readStream.format("ducklake")`` makes for ``main.stream`` (planning and
    reading a micro-batch need no Spark engine)."""
    from pyspark_ducklake.spark.change_feed import feed_schema
    from pyspark_ducklake.spark.lake_config import LakeConfig
    from pyspark_ducklake.streaming.change_feed_stream import DuckLakeChangeFeedReader

    lake = Lake(catalog)
    schema = feed_schema(lake.table(STREAM).table_schema)
    lake.close()
    return DuckLakeChangeFeedReader(LakeConfig.resolve({"catalog": catalog}), STREAM, options, schema)


def feed_micro_batch(catalog: str, head: int) -> None:
    """One micro-batch of the stream's change feed over its last ten snapshots up to ``head``: the driver's offsets
    and plan, and the tasks' reads."""
    reader = feed_stream(catalog, {"startingSnapshot": str(head - 9)})
    start = reader.initialOffset()
    end = reader.latestOffset(start, reader.getDefaultReadLimit())
    for part in reader.partitions(start, end):
        for _ in reader.read(part):
            pass
    reader.stop()


def build_history(lake: Lake, snapshots: int, churn: Churn = Churn()) -> History:
    """A :class:`History` of ``lake`` grown to ``snapshots`` snapshots."""
    history = History(lake, churn)
    history.grow_to(snapshots)
    return history
