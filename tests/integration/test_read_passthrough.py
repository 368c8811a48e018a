"""A one-column read of each type the batch benchmark times (bench/batch_bench.py) hands Spark the row group's
decoded arrays themselves, as the floor reader does (bench/floor_source.py): no cast, copy or list rebuild, so the
data source costs no more per batch than the fastest Python reader. Values, NULLs, empty lists and deletes are
DuckDB's (the oracle), on files DuckDB wrote and on files this library wrote."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pytest

import pyspark_ducklake as pdl
from pyspark_ducklake.batch import reader as batch_reader
from pyspark_ducklake.batch.reader import DuckLakeBatchReader, read_schema
from pyspark_ducklake.spark.lake_config import LakeConfig
from pyspark_ducklake.table.file_stream import stream_file_task

COLUMNS = {
    "id": "BIGINT",
    "i32": "INTEGER",
    "dbl": "DOUBLE",
    "text": "VARCHAR",
    "ts": "TIMESTAMPTZ",
    "amount": "DECIMAL(18,3)",
    "day": "DATE",
    "flag": "BOOLEAN",
    "tags": "INTEGER[]",
}
VALUES = {
    "id": "i",
    "i32": "CASE WHEN i % 5 = 0 THEN NULL ELSE (i * 7919 % 1000003)::INTEGER END",
    "dbl": "CASE WHEN i % 17 = 0 THEN NULL ELSE i / 7.0 END",
    "text": "CASE WHEN i % 13 = 0 THEN NULL ELSE repeat('x', (i % 40)::INTEGER) END",
    "ts": "CASE WHEN i % 11 = 0 THEN NULL ELSE TIMESTAMPTZ '2020-09-13 12:26:40+00' + to_microseconds(i * 1234567) END",
    "amount": "CASE WHEN i % 9 = 0 THEN NULL ELSE (i * 104729 % 100000000)::DECIMAL(18,0)::DECIMAL(18,3) END",
    "day": "CASE WHEN i % 8 = 0 THEN NULL ELSE DATE '2000-01-01' + (i % 10000)::INTEGER END",
    "flag": "CASE WHEN i % 6 = 0 THEN NULL ELSE i % 3 = 0 END",
    "tags": "CASE WHEN i % 10 = 0 THEN NULL ELSE [(i % 100)::INTEGER, NULL, (i % 11)::INTEGER][1:(i % 4)::INTEGER] END",
}


def _batches(
    catalog: Any, table: str, column: str, monkeypatch: pytest.MonkeyPatch
) -> tuple[list[pa.RecordBatch], list[pa.Array]]:
    """Spark's batches of one column as the data source's read() yields them, and the arrays the row groups decoded
    to (stream_file_task's tables, recorded on their way to the reader's conversion)."""
    options = {"catalog": catalog.url, "dataPath": catalog.data_path, "columns": column}
    config = LakeConfig.resolve(options)
    schema, snapshot, plan = read_schema(config, table, options)
    reader = DuckLakeBatchReader(config, table, options, schema, snapshot=snapshot, plan=plan)
    decoded: list[pa.Array] = []

    def recording(*args: Any, **kwargs: Any) -> Iterator[pa.Table]:
        for rows in stream_file_task(*args, **kwargs):
            decoded.append(rows.column(0).chunk(0))
            yield rows

    with monkeypatch.context() as m:
        m.setattr(batch_reader, "stream_file_task", recording)
        batches = [b for part in reader.partitions() for b in reader.read(part)]
    return batches, decoded


@pytest.mark.parametrize("writer", ["duckdb", "pyspark_ducklake"])
def test_each_type_passes_to_spark_as_decoded(
    catalog: Any, duckdb_lake: Any, writer: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    con = duckdb_lake(catalog)
    columns = ", ".join(f"{n} {t}" for n, t in COLUMNS.items())
    con.execute(f"CREATE TABLE lake.t ({columns})")
    select = ", ".join(f"{v} AS {n}" for n, v in VALUES.items())
    source = f"SELECT {select} FROM range(0, 30000) r(i)"
    if writer == "duckdb":
        con.execute(f"INSERT INTO lake.t {source}")
    else:
        with pdl.connect(catalog.url, catalog.data_path) as lake:
            lake.append("main.t", con.execute(source).to_arrow_table())
    con.execute("DELETE FROM lake.t WHERE id % 97 = 0 OR id BETWEEN 1000 AND 1200")
    for column in COLUMNS:
        batches, decoded = _batches(catalog, "main.t", column, monkeypatch)
        assert batches and len(batches) == len(decoded)
        for batch, array in zip(batches, decoded, strict=True):
            sent = batch.column(0)
            # the very buffers the row group decoded to (filtered where rows were deleted): nothing converted
            assert [b.address if b else None for b in sent.buffers()] == [
                b.address if b else None for b in array.buffers()
            ], column
        want = con.execute(f"SELECT {column} FROM lake.t ORDER BY id").to_arrow_table().column(0).to_pylist()
        ids = con.execute("SELECT id FROM lake.t ORDER BY id").to_arrow_table().column(0).to_pylist()
        if column == "id":
            got = sorted(v for b in batches for v in b.column(0).to_pylist())
            assert got == ids
        else:
            id_batches, _ = _batches(catalog, "main.t", "id", monkeypatch)
            got_ids = [v for b in id_batches for v in b.column(0).to_pylist()]
            got = [v for b in batches for v in b.column(0).to_pylist()]
            pairs = sorted(zip(got_ids, got, strict=True), key=lambda p: p[0])
            assert pairs == list(zip(ids, want, strict=True)), column
