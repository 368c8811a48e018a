"""Spark SQL tables over DuckLake tables (``CREATE TABLE ... USING ducklake OPTIONS (table ...)``), through
``spark.sql`` only, exact against DuckDB's read of the same table. One catalog (SQLite): what is under test is Spark
SQL's route to the data source, not the catalog's SQL (the data source's reads and writes on PostgreSQL run in
tests/integration/test_standalone_cluster.py and the classic Spark batch tests).

What PySpark 4.3 allows is pinned here too: ``CREATE TABLE ... AS SELECT`` and a table created with a column list
reach the data source without their OPTIONS (spark/sql_table.py), so both fail with the route to take, and nothing
is written; ``VERSION AS OF`` is Spark's own refusal (time travel goes through ``WITH ('snapshot' = ...)``).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from pyspark.sql import SparkSession

import pyspark_ducklake as pdl
from tests.support.duck import attached, connect_duckdb


def rows(spark: SparkSession, query: str) -> list[tuple[Any, ...]]:
    return sorted(tuple(r) for r in spark.sql(query).collect())


@pytest.fixture(scope="module")
def duck() -> Iterator[Any]:
    """One DuckDB connection for the module: loading its extensions is most of a connection's cost. Each use attaches
    the test's lake and detaches it again (:func:`attached`), so DuckDB holds no SQLite file while Spark writes."""
    con = connect_duckdb()
    yield con
    con.close()


def duck_rows(duck: Any, catalog: Any, query: str) -> list[tuple[Any, ...]]:
    with attached(duck, catalog) as con:
        return sorted(con.execute(query).fetchall())


def duck_run(duck: Any, catalog: Any, *statements: str) -> int:
    """Run ``statements`` in DuckDB; the lake's latest snapshot id afterwards."""
    with attached(duck, catalog) as con:
        for statement in statements:
            con.execute(statement)
        (snapshot,) = con.execute("SELECT max(snapshot_id) FROM ducklake_snapshots('lake')").fetchone()
        return int(snapshot)


@pytest.fixture
def sql_name(spark: SparkSession) -> Iterator[str]:
    """A fresh Spark table name, dropped (with the view of the same name) after the test."""
    pdl.register(spark)
    name = f"dl_{uuid.uuid4().hex[:10]}"
    yield name
    for suffix in ("", "_changes", "_copy"):
        spark.sql(f"DROP TABLE IF EXISTS {name}{suffix}")
        spark.sql(f"DROP VIEW IF EXISTS {name}{suffix}")


def table_options(catalog: Any, table: str = "main.events", **extra: str) -> str:
    options = {"table": table, "catalog": catalog.url, "dataPath": catalog.data_path, **extra}
    return ", ".join(f"{k} '{v}'" for k, v in options.items())


def test_create_select_insert_overwrite_describe(
    spark: SparkSession, sqlite_catalog: Any, duck: Any, sql_name: str
) -> None:
    catalog = sqlite_catalog
    first = duck_run(
        duck,
        catalog,
        "CREATE TABLE lake.main.events (id BIGINT, s VARCHAR, amount DECIMAL(18,3))",
        "INSERT INTO lake.main.events VALUES (1, 'it''s one', 1.5), (2, NULL, -2.25), (3, 'x,y', NULL)",
    )
    spark.sql(f"CREATE TABLE {sql_name} USING ducklake OPTIONS ({table_options(catalog)})")

    assert [(r.col_name, r.data_type) for r in spark.sql(f"DESCRIBE {sql_name}").collect()] == [
        ("id", "bigint"),
        ("s", "string"),
        ("amount", "decimal(18,3)"),
    ]
    assert rows(spark, f"SELECT * FROM {sql_name}") == duck_rows(duck, catalog, "SELECT * FROM lake.main.events")

    spark.sql(f"INSERT INTO {sql_name} VALUES (4, 'four', 4.125), (5, NULL, NULL)")
    after_insert = duck_rows(duck, catalog, "SELECT * FROM lake.main.events")
    assert [r[0] for r in after_insert] == [1, 2, 3, 4, 5]
    assert rows(spark, f"SELECT * FROM {sql_name}") == after_insert

    # INSERT ... SELECT from the table itself, then INSERT OVERWRITE: DuckDB reads exactly what Spark wrote
    spark.sql(f"INSERT INTO {sql_name} SELECT id + 10, s, amount FROM {sql_name} WHERE id > 3")
    assert [r[0] for r in duck_rows(duck, catalog, "SELECT id FROM lake.main.events")] == [1, 2, 3, 4, 5, 14, 15]
    spark.sql(f"INSERT OVERWRITE {sql_name} SELECT id * 100, s, amount FROM {sql_name} WHERE id < 3")
    overwritten = duck_rows(duck, catalog, "SELECT * FROM lake.main.events")
    assert [r[0] for r in overwritten] == [100, 200]
    assert rows(spark, f"SELECT * FROM {sql_name}") == overwritten

    # time travel through the query's options, as DuckDB reads the same snapshot
    assert rows(spark, f"SELECT * FROM {sql_name} WITH ('snapshot' = '{first}')") == duck_rows(
        duck, catalog, f"SELECT * FROM lake.main.events AT (VERSION => {first})"
    )
    # a DuckDB write after CREATE TABLE shows in the next SELECT (a SQL table reads the latest snapshot)
    duck_run(duck, catalog, "INSERT INTO lake.main.events VALUES (7, 'seven', 7)")
    assert rows(spark, f"SELECT id FROM {sql_name}") == [(7,), (100,), (200,)]


def test_change_feed_table_and_options(spark: SparkSession, sqlite_catalog: Any, duck: Any, sql_name: str) -> None:
    catalog = sqlite_catalog
    start = duck_run(duck, catalog, "CREATE TABLE lake.main.events (id BIGINT, s VARCHAR)")
    duck_run(duck, catalog, "INSERT INTO lake.main.events VALUES (1, 'a'), (2, 'b')")
    end = duck_run(
        duck, catalog, "UPDATE lake.main.events SET s = 'B' WHERE id = 2", "DELETE FROM lake.main.events WHERE id = 1"
    )
    feed = table_options(catalog, readChangeFeed="true", startingSnapshot=str(start))
    spark.sql(f"CREATE TABLE {sql_name}_changes USING ducklake OPTIONS ({feed})")
    expected = duck_rows(
        duck,
        catalog,
        f"SELECT snapshot_id, change_type, id, s FROM ducklake_table_changes('lake', 'main', 'events', {start}, {end})",
    )
    assert rows(spark, f"SELECT _snapshot_id, _change_type, id, s FROM {sql_name}_changes") == expected
    # the range's end through the query's options
    assert rows(
        spark, f"SELECT _snapshot_id, _change_type, id FROM {sql_name}_changes WITH ('endingSnapshot' = '{start + 1}')"
    ) == duck_rows(
        duck,
        catalog,
        f"SELECT snapshot_id, change_type, id FROM ducklake_table_changes('lake', 'main', 'events', {start}, {start + 1})",
    )

    with pytest.raises(Exception, match="cannot be written"):
        spark.sql(f"INSERT INTO {sql_name}_changes SELECT * FROM {sql_name}_changes")
    assert duck_rows(duck, catalog, "SELECT max(snapshot_id) FROM ducklake_snapshots('lake')") == [(end,)]

    # a table over the rows themselves cannot grow the feed's columns
    spark.sql(f"CREATE TABLE {sql_name} USING ducklake OPTIONS ({table_options(catalog)})")
    with pytest.raises(Exception, match="columns are fixed when it is created"):
        spark.sql(
            f"SELECT * FROM {sql_name} WITH ('readChangeFeed' = 'true', 'startingSnapshot' = '{start}')"
        ).collect()


def test_temporary_view_keeps_its_options(spark: SparkSession, sqlite_catalog: Any, duck: Any, sql_name: str) -> None:
    """A temporary view keeps its OPTIONS (Spark holds the data source it loaded), so INSERT works through it; like
    a DataFrame it reads the snapshot it was created at."""
    catalog = sqlite_catalog
    created = duck_run(
        duck,
        catalog,
        "CREATE TABLE lake.main.events (id BIGINT, s VARCHAR)",
        "INSERT INTO lake.main.events VALUES (1, 'a')",
    )
    spark.sql(f"CREATE TEMPORARY VIEW {sql_name} USING ducklake OPTIONS ({table_options(catalog)})")
    spark.sql(f"INSERT INTO {sql_name} VALUES (2, 'b')")
    assert duck_rows(duck, catalog, "SELECT * FROM lake.main.events") == [(1, "a"), (2, "b")]
    assert rows(spark, f"SELECT * FROM {sql_name}") == duck_rows(
        duck, catalog, f"SELECT * FROM lake.main.events AT (VERSION => {created})"
    )
    spark.sql(f"INSERT OVERWRITE {sql_name} VALUES (3, 'c')")
    assert duck_rows(duck, catalog, "SELECT * FROM lake.main.events") == [(3, "c")]


def test_what_spark_refuses(spark: SparkSession, sqlite_catalog: Any, duck: Any, sql_name: str) -> None:
    """PySpark 4.3 gives the data source no OPTIONS for CTAS or a table with a column list: both fail naming the
    route, which works, and the refused statements write nothing. If a later PySpark passes them, these fail and CTAS
    can be supported."""
    catalog = sqlite_catalog
    duck_run(duck, catalog, "CREATE TABLE lake.main.events (id BIGINT)", "INSERT INTO lake.main.events VALUES (1)")
    before = pdl.connect(catalog.url).current_snapshot_id()

    with pytest.raises(Exception, match=r"CREATE TABLE \.\.\. AS SELECT") as ctas:
        spark.sql(
            f"CREATE TABLE {sql_name}_copy USING ducklake OPTIONS ({table_options(catalog, 'main.copy')}) AS SELECT 1L AS id"
        )
    assert "no DuckLake table given" in str(ctas.value)
    assert "then CREATE TABLE events USING ducklake OPTIONS" in str(ctas.value)  # the route: CREATE TABLE, INSERT
    assert "INSERT INTO events SELECT" in str(ctas.value)
    assert not spark.catalog.tableExists(f"{sql_name}_copy")  # Spark dropped the table it had created

    # the route the error names: the DuckLake table from the DataFrame API, CREATE TABLE, INSERT INTO; a first column
    # of the table's name and type reaches the writer without the table's options (a renamed one has them)
    spark.sql("SELECT 1L AS id").write.format("ducklake").mode("append").options(
        catalog=catalog.url, dataPath=catalog.data_path
    ).save("main.copy")
    spark.sql(f"CREATE TABLE {sql_name}_copy USING ducklake OPTIONS ({table_options(catalog, 'main.copy')})")
    with pytest.raises(Exception, match=r"rename that column in the SELECT \(SELECT id AS id_"):
        spark.sql(f"INSERT INTO {sql_name}_copy SELECT 2L AS id")
    spark.sql(f"INSERT INTO {sql_name}_copy SELECT 2L AS id_")
    assert duck_rows(duck, catalog, "SELECT * FROM lake.main.copy") == [(1,), (2,)]
    spark.sql(f"DROP TABLE {sql_name}_copy")
    before = pdl.connect(catalog.url).current_snapshot_id()

    spark.sql(f"CREATE TABLE {sql_name} (id BIGINT) USING ducklake OPTIONS ({table_options(catalog)})")
    with pytest.raises(Exception, match="no DuckLake table given"):
        spark.sql(f"SELECT * FROM {sql_name}").collect()
    with pytest.raises(Exception, match="no DuckLake table given"):
        spark.sql(f"INSERT INTO {sql_name} VALUES (2)")
    spark.sql(f"DROP TABLE {sql_name}")

    spark.sql(f"CREATE TABLE {sql_name} USING ducklake OPTIONS ({table_options(catalog)})")
    with pytest.raises(Exception, match="TIME_TRAVEL"):
        spark.sql(f"SELECT * FROM {sql_name} VERSION AS OF {before}").collect()

    lake = pdl.connect(catalog.url)
    assert lake.current_snapshot_id() == before
    assert sorted(lake.tables()) == ["main.copy", "main.events"]


def test_a_dataframe_read_from_a_sql_table_writes_where_save_says(
    spark: SparkSession, sqlite_catalog: Any, duck: Any, sql_name: str
) -> None:
    """The columns of a SQL table carry its options (spark/sql_table.py); a DataFrame selected from it and written
    with ``save('main.copy')`` (the route CTAS's error names) writes main.copy, not the SQL table's own table."""
    catalog = sqlite_catalog
    duck_run(
        duck,
        catalog,
        "CREATE TABLE lake.main.events (id BIGINT, s VARCHAR)",
        "INSERT INTO lake.main.events VALUES (1, 'a'), (2, 'b')",
    )
    spark.sql(f"CREATE TABLE {sql_name} USING ducklake OPTIONS ({table_options(catalog)})")
    low = spark.sql(f"SELECT id, s FROM {sql_name} WHERE id = 1")
    low.write.format("ducklake").mode("append").options(catalog=catalog.url, dataPath=catalog.data_path).save(
        "main.copy"
    )
    assert duck_rows(duck, catalog, "SELECT * FROM lake.main.copy") == [(1, "a")]
    assert duck_rows(duck, catalog, "SELECT * FROM lake.main.events") == [(1, "a"), (2, "b")]


def test_bad_options_are_rejected_at_create(spark: SparkSession, sqlite_catalog: Any, duck: Any, sql_name: str) -> None:
    duck_run(duck, sqlite_catalog, "CREATE TABLE lake.main.events (id BIGINT)")
    with pytest.raises(Exception, match="did you mean 'snapshot'"):
        spark.sql(f"CREATE TABLE {sql_name} USING ducklake OPTIONS ({table_options(sqlite_catalog)}, snapshto '1')")
    with pytest.raises(Exception, match=r"NoSuchTable|does not exist"):
        spark.sql(f"CREATE TABLE {sql_name} USING ducklake OPTIONS ({table_options(sqlite_catalog, 'main.nope')})")
    assert not spark.catalog.tableExists(sql_name)


def test_columns_added_later(spark: SparkSession, sqlite_catalog: Any, duck: Any, sql_name: str) -> None:
    """A SQL table keeps the columns of CREATE TABLE time: after DuckDB adds one, SELECT reads the old columns and
    INSERT writes them (the new one NULL), exactly as DuckDB then reads."""
    catalog = sqlite_catalog
    duck_run(
        duck,
        catalog,
        "CREATE TABLE lake.main.events (id BIGINT, s VARCHAR)",
        "INSERT INTO lake.main.events VALUES (1, 'a')",
    )
    spark.sql(f"CREATE TABLE {sql_name} USING ducklake OPTIONS ({table_options(catalog)})")
    duck_run(
        duck,
        catalog,
        "ALTER TABLE lake.main.events ADD COLUMN k INTEGER",
        "INSERT INTO lake.main.events VALUES (2, 'b', 7)",
    )
    assert rows(spark, f"SELECT * FROM {sql_name}") == duck_rows(duck, catalog, "SELECT id, s FROM lake.main.events")
    spark.sql(f"INSERT INTO {sql_name} VALUES (3, 'c')")
    assert duck_rows(duck, catalog, "SELECT * FROM lake.main.events") == [(1, "a", None), (2, "b", 7), (3, "c", None)]
