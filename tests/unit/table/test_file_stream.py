"""``stream_file_task`` (the data source's row-group stream) gives exactly the rows of ``execute_file_task`` (the
whole-file read every other reader uses), on real Parquet files: deletes across row groups, partial files cut at the
snapshot, added and promoted columns, nested fields renamed or replaced, files without field ids."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pyspark_ducklake.catalog.entries import DataFileEntry, DeleteFileEntry
from pyspark_ducklake.catalog.types import Column, TableSchema, arrow_field
from pyspark_ducklake.exceptions import DataFileError
from pyspark_ducklake.io.parquet import FIELD_ID_KEY
from pyspark_ducklake.table.file_stream import stream_file_task
from pyspark_ducklake.table.scan import SNAPSHOT_ID_FIELD_ID, FileTask, execute_file_task, table_columns

ROWS = 5_000
GROUP = 700  # 8 row groups, the last one short

ID = Column(1, "id", "int64")
SMALL = Column(2, "small", "int32")
TAGS = Column(3, "tags", "list", children=(Column(4, "element", "int32"),))
POINT = Column(5, "point", "struct", children=(Column(6, "x", "float64"), Column(7, "y", "varchar")))
TEXT = Column(8, "text", "varchar")
WRITTEN = TableSchema((ID, SMALL, TAGS, POINT, TEXT))


def _tagged(name: str, t: pa.DataType, fid: int) -> pa.Field:
    return pa.field(name, t, metadata={FIELD_ID_KEY: str(fid).encode()})


def _data(n: int = ROWS) -> pa.Table:
    ids = np.arange(n, dtype=np.int64)
    tags = pa.array([None if i % 9 == 0 else [int(i % 5), int(i % 3)][: i % 3] for i in range(n)], pa.list_(pa.int32()))
    point = pa.array(
        [None if i % 11 == 0 else {"x": i / 4, "y": None if i % 2 else f"y{i}"} for i in range(n)],
        pa.struct([("x", pa.float64()), ("y", pa.string())]),
    )
    text = pa.array([None if i % 13 == 0 else "t" * (i % 40) for i in range(n)])
    arrays = [pa.array(ids), pa.array((ids * 7 % 1000).astype(np.int32)), tags, point, text]
    return pa.Table.from_arrays(arrays, schema=pa.schema([arrow_field(c) for c in WRITTEN.columns]))


def _write(path: Path, table: pa.Table) -> DataFileEntry:
    pq.write_table(table, path, row_group_size=GROUP)
    return DataFileEntry(
        data_file_id=1,
        path=str(path),
        record_count=table.num_rows,
        file_size_bytes=path.stat().st_size,
        footer_size=None,
        row_id_start=100,
        begin_snapshot=1,
        partial_max=None,
        mapping_id=None,
        delete_file=None,
    )


def _deletes(path: Path, positions: list[int]) -> DeleteFileEntry:
    pq.write_table(pa.table({"file_path": ["x"] * len(positions), "pos": pa.array(positions, pa.int64())}), path)
    return DeleteFileEntry(1, 1, str(path), len(positions), path.stat().st_size, None, 2, None)


def _same(task: FileTask, schema: TableSchema) -> list[pa.Table]:
    """The streamed tables, asserted equal (values and types) to the whole-file read."""
    whole = table_columns(execute_file_task(task, schema), schema)
    parts = list(stream_file_task(task, schema))
    streamed = pa.concat_tables(parts) if parts else whole.slice(0, 0)
    assert streamed.schema == whole.schema
    assert streamed.to_pylist() == whole.to_pylist()
    return parts


def test_every_row_group_comes_alone_without_deletes(tmp_path: Path) -> None:
    f = _write(tmp_path / "a.parquet", _data())
    parts = _same(FileTask(f, 1), WRITTEN)
    assert [p.num_rows for p in parts] == [GROUP] * 7 + [ROWS - 7 * GROUP]


@pytest.mark.parametrize(
    "deleted",
    [[0], [GROUP - 1, GROUP, GROUP + 1], list(range(GROUP, 2 * GROUP)), list(range(0, ROWS, 3)), [ROWS - 1, ROWS + 5]],
    ids=["first", "group-edges", "a-whole-group", "every-third", "last-and-beyond"],
)
def test_deletes_apply_by_position_in_the_file(tmp_path: Path, deleted: list[int]) -> None:
    # half in a delete file, half inlined in the catalog (positions past the file's end are ignored, as DuckDB does)
    f = _write(tmp_path / "a.parquet", _data())
    f = dataclasses.replace(f, delete_file=_deletes(tmp_path / "d.parquet", deleted[::2]))
    parts = _same(FileTask(f, 2, tuple(sorted(deleted[1::2]))), WRITTEN)
    assert sum(p.num_rows for p in parts) == ROWS - len({p for p in deleted if p < ROWS})


def test_a_partial_file_is_cut_at_the_snapshot(tmp_path: Path) -> None:
    data = _data()
    snaps = pa.array(np.where(np.arange(ROWS) % 4 == 0, 5, 3).astype(np.int64))
    data = data.append_column(_tagged("_ducklake_internal_snapshot_id", pa.int64(), SNAPSHOT_ID_FIELD_ID), snaps)
    f = _write(tmp_path / "a.parquet", data)
    f = dataclasses.replace(f, partial_max=5)
    parts = _same(FileTask(f, 4), WRITTEN)
    assert sum(p.num_rows for p in parts) == ROWS - (ROWS + 3) // 4
    _same(FileTask(f, 5), WRITTEN)


def test_evolved_schemas_convert_as_the_whole_file_read(tmp_path: Path) -> None:
    f = _write(tmp_path / "a.parquet", _data())
    evolved = TableSchema(
        (
            Column(1, "renamed_id", "int64"),
            Column(2, "small", "int64"),  # promoted
            Column(3, "tags", "list", children=(Column(4, "element", "int64"),)),  # promoted element
            # y dropped, a new field named y added: equal Arrow types, other field ids
            Column(5, "point", "struct", children=(Column(6, "x", "float64"), Column(9, "y", "varchar"))),
            Column(10, "added", "int32", initial_default="42"),
        )
    )
    parts = _same(FileTask(f, 1), evolved)
    assert parts[0].column("added").to_pylist()[:2] == [42, 42]
    assert parts[0].column("point").to_pylist()[1] == {"x": 0.25, "y": None}  # the new y is not the old one


def test_only_the_schemas_columns_are_decoded(tmp_path: Path) -> None:
    f = _write(tmp_path / "a.parquet", _data())
    _same(FileTask(f, 1), TableSchema((TEXT, ID)))
    _same(FileTask(f, 1), TableSchema((Column(11, "missing", "varchar"),)))  # rows of defaults only


def test_a_file_without_field_ids_is_read_whole_by_position(tmp_path: Path) -> None:
    plain = _data().rename_columns(["a", "b", "c", "d", "e"])
    plain = plain.replace_schema_metadata(None).cast(pa.schema([pa.field(f.name, f.type) for f in plain.schema]))
    f = _write(tmp_path / "a.parquet", plain)
    parts = _same(FileTask(f, 1), WRITTEN)
    assert len(parts) == 1


def test_an_empty_file_streams_nothing(tmp_path: Path) -> None:
    f = _write(tmp_path / "a.parquet", _data(0))
    assert sum(p.num_rows for p in _same(FileTask(f, 1), WRITTEN)) == 0


def _ranges(path: Path, parts: int) -> list[tuple[int, int | None]]:
    step = path.stat().st_size // parts + 1
    return [(k * step, None if k == parts - 1 else (k + 1) * step) for k in range(parts)]


@pytest.mark.parametrize("parts", [2, 3, 20])
def test_byte_ranges_that_tile_the_file_read_each_row_group_once(tmp_path: Path, parts: int) -> None:
    f = _write(tmp_path / "a.parquet", _data())
    f = dataclasses.replace(f, delete_file=_deletes(tmp_path / "d.parquet", list(range(0, ROWS, 5))))
    task = FileTask(f, 2, (GROUP, 3 * GROUP + 1))
    whole = table_columns(execute_file_task(task, WRITTEN), WRITTEN)
    pieces = [list(stream_file_task(task, WRITTEN, byte_range=r)) for r in _ranges(tmp_path / "a.parquet", parts)]
    assert pa.concat_tables([t for piece in pieces for t in piece]).to_pylist() == whole.to_pylist()
    assert sum(len(piece) for piece in pieces) == 8  # no row group twice
    if parts == 20:
        assert any(not piece for piece in pieces)  # ranges without a row group's middle read nothing


def test_a_file_without_field_ids_is_read_whole_by_the_first_range_only(tmp_path: Path) -> None:
    plain = _data().rename_columns(["a", "b", "c", "d", "e"])
    plain = plain.cast(pa.schema([pa.field(f.name, f.type) for f in plain.schema]))
    f = _write(tmp_path / "a.parquet", plain)
    pieces = [list(stream_file_task(FileTask(f, 1), WRITTEN, byte_range=r)) for r in _ranges(tmp_path / "a.parquet", 3)]
    assert [len(piece) for piece in pieces] == [1, 0, 0]
    assert pieces[0][0].to_pylist() == table_columns(execute_file_task(FileTask(f, 1), WRITTEN), WRITTEN).to_pylist()


def test_a_missing_file_is_a_data_file_error(tmp_path: Path) -> None:
    f = _write(tmp_path / "a.parquet", _data(10))
    (tmp_path / "a.parquet").unlink()
    with pytest.raises(DataFileError, match="is missing"):
        list(stream_file_task(FileTask(f, 1), WRITTEN))
