"""Issue #16 item 4, the write side: TIMETZ and TIME_NS columns of tables DuckDB made, written here and read back
exactly by DuckDB (inlined, in our Parquet, after our flush and after DuckDB's), with the catalog statistics DuckDB
writes for the same data.

A ``time64`` value written into a TIMETZ column means a UTC time: stored with offset ``+00``. TIME_NS stays inlined
(DuckDB can neither write nor read it in Parquet): writes that need Parquet are refused, flushes keep the rows.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import sqlalchemy as sa

import pyspark_ducklake as pdl
from tests.support.bad_inputs import expect_bad_input
from tests.support.duck import open_duckdb

# 00:00, 12:34:56.789, 23:59:59.999999, 24:00:00 (DuckDB allows it), NULL
MICROS = [0, 45_296_789_000, 86_399_999_999, 86_400_000_000, None]
SMALL = 5  # rows of the inlined append (limit 10)
# DuckDB's own row with offsets (the extremes): its statistics widen by UTC time, a flush stores UTC times
OFFSET_ROW = "(-1, '00:00:00+15:59:59', ['23:00:00-15:59:59'::TIMETZ, '12:34:56.789+05:30'::TIMETZ])"
LARGE = 30  # rows of the Parquet append


def _text(micros: int | None, zone: str = "+00") -> str:
    if micros is None:
        return "NULL"
    seconds, fraction = divmod(micros, 10**6)
    frac = f".{fraction:06d}".rstrip("0") if fraction else ""
    return f"'{seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}{frac}{zone}'"


def _arrow(ids: range) -> pa.Table:
    values = [MICROS[i % len(MICROS)] for i in ids]
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "tz": pa.array(values, pa.time64("us")),
            "l": pa.array([[v, None] for v in values], pa.list_(pa.time64("us"))),
        }
    )


def _duck_insert(con: Any, table: str, ids: range) -> None:
    rows = []
    for i in ids:
        v = _text(MICROS[i % len(MICROS)])
        rows.append(f"({i}, {v}, [{v}::TIMETZ, NULL])")
    con.execute(f"INSERT INTO lake.main.{table} VALUES {', '.join(rows)}")


def _read(con: Any, table: str) -> list[tuple[Any, ...]]:
    return con.execute(f"SELECT id, tz::VARCHAR, l::VARCHAR FROM lake.main.{table} ORDER BY id").fetchall()


def _as_duckdb_parquet(rows: list[tuple[Any, ...]], ids: range) -> list[tuple[Any, ...]]:
    """Rows as DuckDB's Parquet writer leaves them: ``24:00:00+00`` becomes ``00:00:00+00`` (ours keeps it)."""
    return [
        tuple(v.replace("24:00:00+00", "00:00:00+00") if isinstance(v, str) and r[0] in ids else v for v in r)
        for r in rows
    ]


def _stats(catalog: Any, table: str) -> dict[str, Any]:
    """The table's statistics rows and its files' TIMETZ rows, by column name (ids differ between tables)."""
    engine = sa.create_engine(catalog.url)
    with engine.connect() as conn:
        tid = conn.execute(
            sa.text("SELECT table_id FROM ducklake_table WHERE table_name = :t AND end_snapshot IS NULL"), {"t": table}
        ).scalar_one()
        names = dict(
            conn.execute(
                sa.text("SELECT column_id, column_name FROM ducklake_column WHERE table_id = :t"), {"t": tid}
            ).all()
        )
        table_rows = sorted(
            (names[r[0]], bool(r[1]), r[2], r[3])
            for r in conn.execute(
                sa.text(
                    "SELECT column_id, contains_null, min_value, max_value FROM ducklake_table_column_stats "
                    "WHERE table_id = :t"
                ),
                {"t": tid},
            )
        )
        file_rows = sorted(
            (names[r[0]], *r[1:])
            for r in conn.execute(
                sa.text(
                    "SELECT column_id, column_size_bytes, value_count, null_count, min_value, max_value, "
                    "contains_nan FROM ducklake_file_column_stats WHERE table_id = :t"
                ),
                {"t": tid},
            )
            if names[r[0]] != "id"
        )
    engine.dispose()
    return {"table": table_rows, "files": file_rows}


def test_timetz_written_here_reads_in_duckdb_as_utc_with_duckdbs_statistics(catalog: Any) -> None:
    """``ours`` is written by ``lake.append``, ``theirs`` by DuckDB with the same values at ``+00``: DuckDB reads
    both the same (``24:00:00+00`` included), the catalog statistics agree (the files' TIMETZ rows all zeros),
    after our flush too; DuckDB's own flush of our inlined rows reads as its flush of its own."""
    con = open_duckdb(catalog, inlining_row_limit=10)
    try:
        for name in ("ours", "theirs"):
            con.execute(f"CREATE TABLE lake.main.{name} (id BIGINT, tz TIMETZ, l TIMETZ[])")
            con.execute(f"INSERT INTO lake.main.{name} VALUES {OFFSET_ROW}")
        _duck_insert(con, "theirs", range(SMALL))
        _duck_insert(con, "theirs", range(100, 100 + LARGE))
    finally:
        con.close()
    lake = pdl.connect(catalog.url)
    try:
        lake.append("main.ours", _arrow(range(SMALL)))
        lake.append("main.ours", _arrow(range(100, 100 + LARGE)))
        assert _stats(catalog, "ours") == _stats(catalog, "theirs")
        assert _stats(catalog, "ours")["files"] == [
            ("element", 0, 0, 0, None, None, None),
            ("tz", 0, 0, 0, None, None, None),
        ]
        con = open_duckdb(catalog)
        try:
            expected = _read(con, "ours")
            assert _as_duckdb_parquet(expected, range(100, 200)) == _read(con, "theirs")
            assert expected[0] == (-1, "00:00:00+15:59:59", "['23:00:00-15:59:59', '12:34:56.789+05:30']")
            assert expected[1 + 3] == (3, "24:00:00+00", "['24:00:00+00', NULL]")
            assert expected[1 + SMALL + 3] == (103, "24:00:00+00", "['24:00:00+00', NULL]")
        finally:
            con.close()
        lake.flush_inlined_data("main.ours")
        con = open_duckdb(catalog)
        try:
            flushed = _read(con, "ours")
        finally:
            con.close()
        assert flushed[1:] == expected[1:]
        assert flushed[0] == (-1, "08:00:01+00", "['14:59:59+00', '07:04:56.789+00']")  # UTC, as DuckDB's flush
        assert [r[0] for r in _stats(catalog, "ours")["files"]] == ["element", "element", "tz", "tz"]
        lake.append("main.ours", _arrow(range(200, 200 + SMALL)))
    finally:
        lake.close()
    con = open_duckdb(catalog)
    try:
        _duck_insert(con, "theirs", range(200, 200 + SMALL))
        con.execute("CALL ducklake_flush_inlined_data('lake')")
        after = _read(con, "theirs")
        # DuckDB's flush normalises 24:00:00+00 to 00:00:00+00 (row 203); ours kept it (rows 3 and 103)
        assert _as_duckdb_parquet(_read(con, "ours"), range(-1, 300)) == after
        assert after[-2] == (203, "00:00:00+00", "['00:00:00+00', NULL]")
        assert _read(con, "ours")[1 + 3] == (3, "24:00:00+00", "['24:00:00+00', NULL]")
    finally:
        con.close()


def test_timetz_parquet_we_write_is_duckdbs_layout(sqlite_catalog: Any) -> None:
    """``TIME(us, isAdjustedToUTC=true)`` with converted type TIME_MICROS and no column statistics, as DuckDB's."""
    con = open_duckdb(sqlite_catalog, inlining_row_limit=0)
    try:
        con.execute("CREATE TABLE lake.main.t (id BIGINT, tz TIMETZ, l TIMETZ[])")
        con.execute("INSERT INTO lake.main.t VALUES (1, '01:02:03+00', ['01:02:03+00'::TIMETZ])")
        duck_path = con.execute("SELECT data_file FROM ducklake_list_files('lake', 't')").fetchone()[0]
    finally:
        con.close()
    lake = pdl.connect(sqlite_catalog.url)
    try:
        lake.append("main.t", _arrow(range(100, 100 + LARGE)))
    finally:
        lake.close()
    con = open_duckdb(sqlite_catalog)
    try:
        paths = [r[0] for r in con.execute("SELECT data_file FROM ducklake_list_files('lake', 't')").fetchall()]
    finally:
        con.close()
    ours = next(p for p in paths if p != duck_path)
    for path in (duck_path, ours):
        meta = pq.ParquetFile(path).metadata
        schema = meta.schema
        tz_leaves = [i for i in range(len(schema)) if schema.column(i).path in ("tz", "l.list.element")]
        assert len(tz_leaves) == 2
        for i in tz_leaves:
            logical = schema.column(i).logical_type
            assert logical.to_json() == '{"Type":"Time","isAdjustedToUTC":true,"timeUnit":"microseconds"}'
            assert schema.column(i).converted_type == "TIME_MICROS"
            assert not meta.row_group(0).column(i).is_stats_set


def test_timetz_written_by_spark_reads_in_duckdb(spark: Any, sqlite_catalog: Any) -> None:
    """The data source (inlined) and ``write_table`` (Parquet through the data source: TIMETZ is not Spark's)
    write Spark TIME(6) values as UTC."""
    from pyspark.sql import types as T

    con = open_duckdb(sqlite_catalog, inlining_row_limit=10)
    try:
        con.execute("CREATE TABLE lake.main.t (id BIGINT, tz TIMETZ)")
    finally:
        con.close()
    pdl.register(spark)
    url = sqlite_catalog.url
    times = [dt.time(0, 0), dt.time(23, 59, 59, 999999), None, dt.time(12, 34, 56, 789012)]
    schema = T.StructType([T.StructField("id", T.LongType()), T.StructField("tz", T.TimeType(6))])
    spark.createDataFrame(list(enumerate(times)), schema).write.format("ducklake").option("catalog", url).mode(
        "append"
    ).save("main.t")
    pdl.write_table(spark.createDataFrame([(i, times[i % 4]) for i in range(10, 50)], schema), "main.t", catalog=url)
    con = open_duckdb(sqlite_catalog)
    try:
        got = con.execute("SELECT id, tz::VARCHAR FROM lake.main.t ORDER BY id").fetchall()
    finally:
        con.close()

    def text(t: dt.time | None) -> str | None:
        if t is None:
            return None
        return (t.isoformat().rstrip("0").rstrip(".") if t.microsecond else t.isoformat()) + "+00"

    assert got == [(i, text(times[i % 4])) for i in [*range(4), *range(10, 50)]]


def _nanos_table(con: Any, name: str) -> None:
    con.execute(f"CREATE TABLE lake.main.{name} (id BIGINT, tn TIME_NS, l TIME_NS[])")


NANOS = [45_296_123_456_789, 0, 86_400_000_000_000, None, 1]


def test_time_ns_written_inlined_reads_exactly_in_duckdb_and_never_goes_to_parquet(sqlite_catalog: Any) -> None:
    """Inlined writes read back to the nanosecond with DuckDB's statistics; an append over the inlining limit, a
    flush naming the table and a merge are refused with nothing written; flushing every table keeps the rows."""
    con = open_duckdb(sqlite_catalog, inlining_row_limit=10)
    try:
        _nanos_table(con, "ours")
        _nanos_table(con, "theirs")
        texts = ["NULL" if v is None else f"'{_ns_text(v)}'" for v in NANOS]
        values = ", ".join(f"({i}, {t}, [{t}::TIME_NS, NULL])" for i, t in enumerate(texts))
        con.execute(f"INSERT INTO lake.main.theirs VALUES {values}")
        con.execute("CREATE TABLE lake.main.other (id BIGINT)")
        con.execute("INSERT INTO lake.main.other VALUES (1), (2)")
    finally:
        con.close()
    data = pa.table(
        {
            "id": pa.array(range(len(NANOS)), pa.int64()),
            "tn": pa.array(NANOS, pa.time64("ns")),
            "l": pa.array([[v, None] for v in NANOS], pa.list_(pa.time64("ns"))),
        }
    )
    lake = pdl.connect(sqlite_catalog.url)
    try:
        lake.append("main.ours", data)
        big = pa.table({"id": pa.array(range(100, 130), pa.int64()), "tn": pa.array([1] * 30, pa.time64("ns"))})
        with expect_bad_input("time-ns-parquet", lake) as err:
            lake.append("main.ours", big)
        assert "column 'tn'" in str(err.value)
        with expect_bad_input("time-ns-parquet", lake):
            lake.flush_inlined_data("main.ours")
        assert lake.flush_inlined_data() is not None  # flushes main.other only
        assert lake.scan("main.ours").num_rows == len(NANOS)
    finally:
        lake.close()
    assert _stats(sqlite_catalog, "ours") == _stats(sqlite_catalog, "theirs")
    con = open_duckdb(sqlite_catalog)
    try:
        q = "SELECT id, tn::VARCHAR, l::VARCHAR FROM lake.main.{} ORDER BY id"
        expected = con.execute(q.format("theirs")).fetchall()
        assert con.execute(q.format("ours")).fetchall() == expected
        assert expected[0][1] == "12:34:56.123456789"
        assert con.execute("SELECT count(*) FROM ducklake_list_files('lake', 'ours')").fetchone()[0] == 0
        assert con.execute("SELECT count(*) FROM ducklake_list_files('lake', 'other')").fetchone()[0] == 1
    finally:
        con.close()


def _ns_text(nanos: int) -> str:
    seconds, fraction = divmod(nanos, 10**9)
    frac = f".{fraction:09d}".rstrip("0") if fraction else ""
    return f"{seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}{frac}"


def test_duckdb_cannot_read_time_nanos_parquet_as_time_ns(tmp_path: Any) -> None:
    """Why TIME_NS never goes to Parquet: DuckDB 1.5.5 reads ``TIME(NANOS)`` as microsecond TIME and cannot cast
    that to TIME_NS. If a DuckDB update reads it, this fails: then write such files instead of refusing."""
    import duckdb

    from tests.support.duck import connect_duckdb

    field = pa.field("v", pa.time64("ns"), metadata={b"PARQUET:field_id": b"1"})
    path = tmp_path / "n.parquet"
    pq.write_table(pa.table([pa.array([45_296_123_456_789], pa.time64("ns"))], schema=pa.schema([field])), path)
    con = connect_duckdb()
    try:
        with pytest.raises(duckdb.ConversionException, match="TIME -> TIME_NS"):
            con.execute(
                f"SELECT v FROM read_parquet('{path}', schema=map{{1: {{name: 'v', type: 'TIME_NS', "
                "default_value: NULL}})"
            ).fetchall()
    finally:
        con.close()


def test_a_threshold_flush_of_a_time_ns_table_keeps_the_rows_inlined(spark: Any, sqlite_catalog: Any) -> None:
    """The sink's flush threshold crossed on a TIME_NS table: every batch commits, the rows stay inlined."""
    from pyspark.sql import types as T

    con = open_duckdb(sqlite_catalog, inlining_row_limit=10)
    try:
        con.execute("CREATE TABLE lake.main.t (id BIGINT, tn TIME_NS)")
    finally:
        con.close()
    schema = T.StructType([T.StructField("id", T.LongType()), T.StructField("tn", T.TimeType(6))])
    sink = pdl.ducklake_sink("main.t", catalog=sqlite_catalog.url, app_id="ns", flush_rows=3)
    for batch in range(3):
        rows = [(batch * 10 + i, dt.time(1, 2, 3, batch * 10 + i)) for i in range(2)]
        sink(spark.createDataFrame(rows, schema), batch)
    con = open_duckdb(sqlite_catalog)
    try:
        got = con.execute("SELECT id, tn::VARCHAR FROM lake.main.t ORDER BY id").fetchall()
        files = con.execute("SELECT count(*) FROM ducklake_list_files('lake', 't')").fetchone()[0]
    finally:
        con.close()
    base = (3600 + 2 * 60 + 3) * 10**9
    assert got == [(b * 10 + i, _ns_text(base + (b * 10 + i) * 1000)) for b in range(3) for i in range(2)]
    assert files == 0


def test_time_ns_on_postgresql_is_inlined_as_text_duckdb_reads(pg_catalog: Any) -> None:
    """DuckDB 1.5.5 cannot make a TIME_NS table with inlining on PostgreSQL (it declares a TIME_NS column there);
    made without inlining, our writes inline it as VARCHAR text, which DuckDB reads to the nanosecond."""
    con = open_duckdb(pg_catalog, inlining_row_limit=0)
    try:
        con.execute("CREATE TABLE lake.main.n (id BIGINT, tn TIME_NS)")
    finally:
        con.close()
    lake = pdl.connect(pg_catalog.url)
    try:
        lake.append(
            "main.n", pa.table({"id": pa.array(range(len(NANOS)), pa.int64()), "tn": pa.array(NANOS, pa.time64("ns"))})
        )
    finally:
        lake.close()
    con = open_duckdb(pg_catalog)
    try:
        got = con.execute("SELECT id, tn::VARCHAR FROM lake.main.n ORDER BY id").fetchall()
    finally:
        con.close()
    assert got == [(i, None if v is None else _ns_text(v)) for i, v in enumerate(NANOS)]


def test_timetz_files_merged_here_read_the_same_in_duckdb(catalog: Any) -> None:
    """DuckDB's Parquet (offsets normalised to UTC) and ours merged into one file: DuckDB reads every row as before,
    and the merged file's TIMETZ statistics rows are DuckDB's zeros."""
    con = open_duckdb(catalog, inlining_row_limit=0)
    try:
        con.execute("CREATE TABLE lake.main.t (id BIGINT, tz TIMETZ, l TIMETZ[])")
        con.execute(f"INSERT INTO lake.main.t VALUES {OFFSET_ROW}")
        _duck_insert(con, "t", range(SMALL))
    finally:
        con.close()
    lake = pdl.connect(catalog.url)
    try:
        lake.append("main.t", _arrow(range(100, 100 + LARGE)))
        con = open_duckdb(catalog)
        try:
            before = _read(con, "t")
        finally:
            con.close()
        report = lake.merge_adjacent_files("main.t")
        assert report.files_processed == 3
    finally:
        lake.close()
    con = open_duckdb(catalog)
    try:
        assert _read(con, "t") == before
        assert con.execute("SELECT count(*) FROM ducklake_list_files('lake', 't')").fetchone()[0] == 1
    finally:
        con.close()
    files = _stats(catalog, "t")["files"]
    assert [r for r in files if r[1:] == (0, 0, 0, None, None, None)] == files
