"""The controls of the batch benchmark: the fastest Python data source read and write PySpark 4.3 allows.

Neither knows DuckLake: the reader takes a list of Parquet files and the Spark schema, the writer a folder. They are
what any Python data source costs (the JVM turning Arrow batches into rows and back), so ``ducklake / floor`` tells
our own cost apart from the API's (/work/shared/spark-notes.md, "How fast a Python data source can be in 4.3"):

- ``floor-read``: ``partitions()`` packs the files by bytes into two partitions per core; ``read()`` yields one
  ``RecordBatch`` per row group (``ParquetFile.read_row_group(..., use_threads=False)``) whose schema is exactly
  ``to_arrow_schema(schema)``; the schema is given (``.schema(...)``), and only its columns are decoded. Options:
  ``paths`` (a JSON list of files), ``cores`` (the packing; default this machine's).
- ``floor-write``: a ``DataSourceArrowWriter`` writing each task's batches to one snappy Parquet file under
  ``path`` (an overwrite first removes the folder's files, as ``df.write.parquet`` does); commit and abort do
  nothing.

``batch_bench.py`` registers both, shipping this module to the Python workers by value.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    DataSourceWriter,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import StructType


@dataclass(frozen=True)
class Files(InputPartition):
    paths: tuple[str, ...]


class FloorReader(DataSourceReader):
    def __init__(self, paths: list[str], schema: StructType, cores: int) -> None:
        self.paths = paths
        self.schema = schema
        self.cores = cores

    def partitions(self) -> list[InputPartition]:
        count = max(1, min(len(self.paths), 2 * self.cores))
        loads = [0] * count
        bins: list[list[str]] = [[] for _ in range(count)]
        for path in sorted(self.paths, key=lambda p: -os.path.getsize(p)):
            i = loads.index(min(loads))
            bins[i].append(path)
            loads[i] += os.path.getsize(path)
        return [Files(tuple(b)) for b in bins if b]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, Files)
        target = to_arrow_schema(self.schema, timezone="UTC", prefers_large_types=False)
        names = target.names
        for path in partition.paths:
            pf = pq.ParquetFile(path)
            for i in range(pf.num_row_groups):
                group = pf.read_row_group(i, columns=names, use_threads=False)
                yield pa.RecordBatch.from_arrays([c.chunk(0) for c in group.columns], schema=target)


class FloorRead(DataSource):
    @classmethod
    def name(cls) -> str:
        return "floor-read"

    def reader(self, schema: StructType) -> DataSourceReader:
        paths = json.loads(self.options["paths"])
        return FloorReader(paths, schema, int(self.options.get("cores") or os.cpu_count() or 1))


@dataclass(frozen=True)
class Written(WriterCommitMessage):
    path: str
    rows: int


class FloorWriter(DataSourceArrowWriter):
    def __init__(self, folder: str) -> None:
        self.folder = folder

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        path = os.path.join(self.folder, f"part-{uuid.uuid4().hex}.parquet")
        rows = 0
        writer: Any = None
        for batch in iterator:
            if writer is None:
                writer = pq.ParquetWriter(path, batch.schema, compression="snappy")
            writer.write_batch(batch)
            rows += batch.num_rows
        if writer is not None:
            writer.close()
        return Written(path, rows)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        pass

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        pass


class FloorWrite(DataSource):
    @classmethod
    def name(cls) -> str:
        return "floor-write"

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        folder = self.options["path"]
        os.makedirs(folder, exist_ok=True)
        if overwrite:
            for name in os.listdir(folder):
                os.remove(os.path.join(folder, name))
        return FloorWriter(folder)


def register(spark: Any) -> None:
    """Register both controls, this module shipped to the workers by value (it is not installed there)."""
    import sys

    from pyspark import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    spark.dataSource.register(FloorRead)
    spark.dataSource.register(FloorWrite)
