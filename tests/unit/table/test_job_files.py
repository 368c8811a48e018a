"""A failed job's files are found by their names: a job's token is in every file it names, in DuckDB's
``ducklake-<uuid7>.parquet`` shape; removing a job's files never touches another job's files or a committed one."""

from __future__ import annotations

import re
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
from sqlalchemy import update

import pyspark_ducklake as pdl
from pyspark_ducklake.catalog import reader as R
from pyspark_ducklake.catalog import tables as T
from pyspark_ducklake.table.commit import table_folder
from pyspark_ducklake.table.data_files import write_data_files
from pyspark_ducklake.table.job_files import JobToken, remove_job_files
from tests.support.duck import open_duckdb

NAME = re.compile(r"^ducklake-[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}\.parquet$")


def test_job_file_names_are_uuid7_names_that_only_their_job_owns() -> None:
    jobs = [JobToken.new() for _ in range(50)]
    names = {job: [job.file_name() for _ in range(200)] for job in jobs}
    every = [n for ns in names.values() for n in ns]
    assert len(set(every)) == len(every)
    for job, ns in names.items():
        for n in ns:
            assert NAME.match(n), n
            assert uuid.UUID(n[len("ducklake-") : -len(".parquet")]).version == 7
            assert job.owns("/lake/main/t/k=1/" + n)
            assert not any(other.owns(n) for other in jobs if other != job)
    plain = f"ducklake-{uuid.uuid4()}.parquet"
    assert not jobs[0].owns(plain)
    assert not jobs[0].owns("part-00000-x.snappy.parquet")
    assert JobToken.derived("q\0main.t\x005") == JobToken.derived("q\0main.t\x005")
    assert JobToken.derived("q\0main.t\x005") != JobToken.derived("q\0main.t\x006")


def test_removing_a_failed_jobs_files_keeps_committed_and_other_jobs_files(sqlite_catalog: Any) -> None:
    lake = pdl.connect(sqlite_catalog.url, sqlite_catalog.data_path)
    schema = pa.schema([("k", pa.string()), ("v", pa.int64())])
    lake.create_table("main.t", schema, partition_by=["k"])
    table = lake.table("main.t")
    table_dir = table_folder(table, lake.data_path)
    data = pa.table({"k": ["a", "b"], "v": [1, 2]}, schema=schema)
    failed, other = JobToken.new(), JobToken.new()
    # the failed job's files: one partition folder each, never committed
    mine = write_data_files(data, table_dir, table.table_schema, table.partition_keys, job=failed)
    theirs = write_data_files(data, table_dir, table.table_schema, table.partition_keys, job=other)
    # a file carrying the failed job's token that a snapshot references (a commit of the same job that landed)
    lake.append("main.t", pa.table({"k": ["c"] * 20, "v": list(range(20))}, schema=schema))
    with lake.engine.connect() as conn:
        committed = sorted(R.all_referenced_paths(conn, lake.data_path))
    renamed = []
    for path in committed:
        target = str(Path(path).with_name(failed.file_name()))
        Path(path).rename(target)
        renamed.append(target)
    with lake.engine.begin() as conn:
        for path, target in zip(committed, renamed, strict=True):
            conn.execute(
                update(T.ducklake_data_file)
                .where(T.ducklake_data_file.c.path == path[len(table_dir) :])
                .values(path=target[len(table_dir) :])
            )
    deleted = remove_job_files(lake.engine, lake.data_path, table_dir, failed)
    assert sorted(deleted) == sorted(f.written.path for f in mine)
    assert all(Path(f.written.path).exists() for f in theirs)
    assert all(Path(p).exists() for p in renamed)
    assert lake.scan("main.t").num_rows == 20
    con = open_duckdb(sqlite_catalog)
    try:
        assert con.execute("SELECT count(*) FROM lake.main.t").fetchone() == (20,)
    finally:
        con.close()
