"""Partitioned tables: our partition values and folders match DuckDB's, and each side reads the other's files."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pyarrow as pa
import pytest
from sqlalchemy import create_engine, text

import pyspark_ducklake as pdl
from pyspark_ducklake.exceptions import InvalidOptionError, NoSuchColumnError
from tests.support.compare import canonical_rows
from tests.support.duck import open_duckdb

UTC = dt.timezone.utc
SCHEMA = pa.schema(
    [
        ("id", pa.int32()),
        ("k", pa.string()),
        ("ts", pa.timestamp("us")),
        ("d", pa.date32()),
        ("tz", pa.timestamp("us", tz="UTC")),
    ]
)
KEYS = ["k", "year(ts)", "month(ts)", "day(d)", "hour(tz)"]


def rows(n: int) -> pa.Table:
    return pa.table(
        {
            "id": pa.array(range(n), pa.int32()),
            "k": [None if i % 9 == 8 else ("a/b" if i % 2 == 0 else "x y") for i in range(n)],
            "ts": [
                None if i % 11 == 10 else dt.datetime(2024, 3, 15, 10) + dt.timedelta(days=40 * i) for i in range(n)
            ],
            "d": [dt.date(2024, 1, 31) + dt.timedelta(days=i) for i in range(n)],
            "tz": [dt.datetime(2024, 1, 1, 23, 30, tzinfo=UTC) + dt.timedelta(hours=i) for i in range(n)],
        },
        schema=SCHEMA,
    )


def partition_values(url: str, table_id: int) -> set[tuple[Any, ...]]:
    engine = create_engine(url)
    with engine.connect() as conn:
        result = conn.execute(
            text(
                "SELECT f.data_file_id, v.partition_key_index, v.partition_value FROM ducklake_file_partition_value v "
                "JOIN ducklake_data_file f USING (data_file_id) WHERE f.table_id = :t ORDER BY 1, 2"
            ),
            {"t": table_id},
        ).all()
    engine.dispose()
    by_file: dict[int, list[Any]] = {}
    for file_id, _, value in result:
        by_file.setdefault(file_id, []).append(value)
    return {tuple(v) for v in by_file.values()}


def test_partition_values_match_duckdb(catalog: Any) -> None:
    lake = pdl.connect(catalog.url, catalog.data_path, data_inlining_row_limit=0)
    ours = lake.create_table("main.ours", SCHEMA, partition_by=KEYS)
    assert ours.partition_by == KEYS
    data = rows(40)
    lake.append("main.ours", data)
    con = open_duckdb(catalog, inlining_row_limit=0)
    try:
        con.execute("CREATE TABLE lake.main.theirs (id INT, k VARCHAR, ts TIMESTAMP, d DATE, tz TIMESTAMPTZ)")
        con.execute("ALTER TABLE lake.main.theirs SET PARTITIONED BY (k, year(ts), month(ts), day(d), hour(tz))")
        con.register("src", data)
        con.execute("INSERT INTO lake.main.theirs SELECT * FROM src")
        theirs_id = con.execute(
            "SELECT table_id FROM __ducklake_metadata_lake.ducklake_table WHERE table_name = 'theirs'"
        ).fetchone()[0]
        assert canonical_rows(con.execute("SELECT * FROM lake.main.ours").to_arrow_table()) == canonical_rows(data)
        assert con.execute("SELECT count(*) FROM lake.main.ours WHERE k = 'a/b' AND year(ts) = 2025").fetchone()[
            0
        ] == sum(1 for r in data.to_pylist() if r["k"] == "a/b" and r["ts"] and r["ts"].year == 2025)
        ours_paths = sorted(
            p.split("/ducklake-")[0]
            for (p,) in con.execute(
                "SELECT path FROM __ducklake_metadata_lake.ducklake_data_file WHERE table_id = ?", [ours.table_id]
            ).fetchall()
        )
        theirs_paths = sorted(
            p.split("/ducklake-")[0]
            for (p,) in con.execute(
                "SELECT path FROM __ducklake_metadata_lake.ducklake_data_file WHERE table_id = ?", [theirs_id]
            ).fetchall()
        )
        # DuckDB keeps writing into our partitioned table with our spec.
        con.execute("INSERT INTO lake.main.ours SELECT id + 1000, k, ts, d, tz FROM src")
        after = canonical_rows(con.execute("SELECT * FROM lake.main.ours").to_arrow_table())
    finally:
        con.close()
    assert partition_values(catalog.url, ours.table_id) == partition_values(catalog.url, theirs_id)
    assert ours_paths == theirs_paths
    assert canonical_rows(lake.scan("main.ours")) == after
    assert canonical_rows(lake.scan("main.theirs")) == canonical_rows(data)
    # And we append into DuckDB's partitioned table with DuckDB's spec.
    assert lake.table("main.theirs").partition_by == KEYS
    lake.append("main.theirs", rows(5))
    con = open_duckdb(catalog)
    try:
        assert con.execute("SELECT count(*) FROM lake.main.theirs").fetchone()[0] == 45
    finally:
        con.close()


def test_repartition_and_bad_keys(catalog: Any) -> None:
    lake = pdl.connect(catalog.url, catalog.data_path, data_inlining_row_limit=0)
    lake.create_table("main.p", SCHEMA)
    lake.append("main.p", rows(20))
    lake.set_partitioning("main.p", ["k"])
    lake.append("main.p", rows(20))
    lake.set_partitioning("main.p", [])
    lake.append("main.p", rows(3))
    assert lake.table("main.p").partition_by == []
    con = open_duckdb(catalog)
    try:
        assert con.execute("SELECT count(*) FROM lake.main.p").fetchone()[0] == 43
    finally:
        con.close()
    with pytest.raises(InvalidOptionError, match=r"year.*needs a date or timestamp"):
        lake.set_partitioning("main.p", ["year(k)"])
    with pytest.raises(InvalidOptionError, match="bucket"):
        lake.set_partitioning("main.p", ["bucket(k)"])
    with pytest.raises(NoSuchColumnError):
        lake.set_partitioning("main.p", ["nope"])
