"""A lake DuckDB created with ``ATTACH ... (ENCRYPTED)``: every write path refuses it, reads of its encrypted files
raise a typed error naming the file, and DuckDB still reads the whole table afterwards.

A plaintext file from us would make DuckDB refuse the whole table ("Database is encrypted, but file ... does not
have an encryption key"), and pyarrow cannot decrypt DuckDB's files (no AAD; ducklake-format-2.md §3).
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

import pyspark_ducklake as pdl
from pyspark_ducklake.duckdb_attach import extension_path, sql_string
from pyspark_ducklake.exceptions import EncryptedLakeError
from tests.support.bad_inputs import expect_bad_input
from tests.support.duck import attach_sql, connect_duckdb


def duck_encrypted(catalog: Any) -> Any:
    con = connect_duckdb()
    con.execute(f"LOAD {sql_string(extension_path('duckdb_extension_httpfs', 'httpfs'))}")  # OpenSSL for writing
    con.execute(attach_sql(catalog, inlining_row_limit=5)[:-1] + ", ENCRYPTED)")
    return con


def test_writes_to_an_encrypted_lake_are_refused_and_its_files_read_as_a_typed_error(catalog: Any) -> None:
    con = duck_encrypted(catalog)
    try:
        con.execute("CREATE TABLE lake.main.t (id INT, s VARCHAR)")
        con.execute("INSERT INTO lake.main.t SELECT i, 's' || i FROM range(100) r(i)")  # an encrypted Parquet file
        con.execute("INSERT INTO lake.main.t VALUES (1000, 'inlined')")
        before = sorted(con.execute("SELECT * FROM lake.main.t").fetchall())
    finally:
        con.close()
    lake = pdl.connect(catalog.url, data_inlining_row_limit=10)
    assert lake.catalog_info.encrypted
    for write in (
        lambda: lake.append("main.t", pa.table({"id": pa.array([1], pa.int32()), "s": ["x"]})),
        lambda: lake.append("main.t", pa.table({"id": pa.array(range(50), pa.int32()), "s": ["x"] * 50})),
        lambda: lake.overwrite("main.t", pa.table({"id": pa.array([1], pa.int32()), "s": ["x"]})),
        lambda: lake.delete("main.t", [("id", "=", 1000)]),
        lambda: lake.flush_inlined_data("main.t"),
        lambda: lake.flush_inlined_data(),
        lambda: lake.merge_adjacent_files("main.t"),
    ):
        with expect_bad_input("encrypted-lake", lake):
            write()
    lake.add_column("main.t", "note", pa.string())  # DDL writes no data file: allowed, as in DuckDB
    with pytest.raises(EncryptedLakeError, match=r"data file .*ducklake-.*\.parquet is encrypted") as err:
        lake.scan("main.t")
    assert "not supported yet" in str(err.value)
    con = duck_encrypted(catalog)
    try:
        after = sorted(r[:2] for r in con.execute("SELECT * FROM lake.main.t").fetchall())
    finally:
        con.close()
    assert after == before
