"""The lake on S3: a real S3-compatible server (moto, started here on 127.0.0.1), real s3fs, real Spark executors.

DuckDB 1.5.5 reads the same lake straight from the bucket (``httpfs`` from the ``duckdb-extension-httpfs`` wheel,
attached by ``open_in_duckdb``) and is the oracle. Storage faults are injected by a TCP proxy that cuts the server
off after a number of bytes (``tests.support.s3.CutProxy``): real pyarrow writes, real uploads dying mid-way.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import random
import re
import sqlite3
import traceback
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from sqlalchemy import MetaData, select

import pyspark_ducklake as pdl
from pyspark_ducklake.duckdb_attach import open_in_duckdb
from pyspark_ducklake.exceptions import DataFileError
from pyspark_ducklake.io.storage import describe_error
from pyspark_ducklake.spark.lake_config import LakeConfig
from tests.support.compare import canonical, canonical_rows
from tests.support.s3 import CutProxy, S3Server, start_s3_server, stop_s3_server

ZERO = dt.timedelta(0)
SCHEMA = pa.schema([("id", pa.int64()), ("kind", pa.string()), ("amount", pa.float64())])


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    """moto's S3 server on a free port of 127.0.0.1 for the whole session, stopped at the end."""
    try:
        server = start_s3_server(tmp_path_factory.mktemp("moto"))
    except Exception as e:
        pytest.fail(f"could not start the moto S3 server: {e}", pytrace=False)
    yield server
    stop_s3_server(server)


@pytest.fixture
def bucket(s3_server: S3Server) -> str:
    """A fresh bucket for one test."""
    return s3_server.create_bucket(f"lake-{uuid.uuid4().hex[:12]}")


@pytest.fixture
def proxy(s3_server: S3Server) -> Iterator[CutProxy]:
    p = CutProxy(int(s3_server.endpoint.rsplit(":", 1)[1]))
    yield p
    p.close()


def rows(first: int, n: int) -> pa.Table:
    ids = list(range(first, first + n))
    return pa.table({"id": ids, "kind": [f"k{i % 3}" for i in ids], "amount": [i * 1.5 for i in ids]}, schema=SCHEMA)


def catalog_dump(lake: pdl.Lake) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every table of the catalog database, sorted: the whole catalog as data."""
    meta = MetaData()
    meta.reflect(lake.engine)
    out = {}
    with lake.engine.connect() as conn:
        for name, table in sorted(meta.tables.items()):
            out[name] = sorted((tuple(r) for r in conn.execute(select(table))), key=repr)
    return out


def duck_rows(con: Any, table: str, snapshot: int | None = None) -> list[tuple[Any, ...]]:
    at = f" AT (VERSION => {snapshot})" if snapshot is not None else ""
    return canonical_rows(con.execute(f"SELECT * FROM lake.main.{table}{at}").to_arrow_table())


def feed(t: pa.Table, change_columns: tuple[str, ...] = ("_snapshot_id", "_rowid", "_change_type")) -> Counter[Any]:
    """A change feed as a multiset of (snapshot, rowid, change type, id, kind, amount)."""
    cols = [*change_columns, "id", "kind", "amount"]
    return Counter(tuple(canonical(v) for v in r.values()) for r in t.select(cols).to_pylist())


def duck_feed(con: Any, table: str, start: int, end: int) -> Counter[Any]:
    sql = f"SELECT * FROM ducklake_table_changes('lake', 'main', '{table}', {start}, {end})"
    return feed(con.execute(sql).to_arrow_table(), ("snapshot_id", "rowid", "change_type"))


def assert_duckdb_reads_history(lake: pdl.Lake, table: str, snapshots: list[int]) -> None:
    """DuckDB, reading the bucket itself, sees exactly our rows at every snapshot and our change feed."""
    con = open_in_duckdb(lake)
    try:
        con.execute("SET threads = 1")  # deterministic snapshot ids in DuckDB's change feed (see test_table_changes)
        for s in snapshots:
            assert duck_rows(con, table, s) == canonical_rows(lake.scan(f"main.{table}", snapshot=s)), s
        assert duck_feed(con, table, snapshots[0], snapshots[-1]) == feed(
            lake.table_changes(f"main.{table}", snapshots[0], snapshots[-1])
        )
    finally:
        con.close()


# --- options ------------------------------------------------------------------------------------------------------


def test_s3_settings_precedence_and_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    from pyspark_ducklake.exceptions import InvalidOptionError
    from pyspark_ducklake.io.storage import duckdb_secret_params, with_env_defaults

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "env-key")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "env-secret")
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://env:1")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "env-region")
    conf = {"spark.ducklake.s3.endpoint_url": "http://conf:2", "spark.ducklake.s3.region": "conf-region"}
    config = LakeConfig.resolve(
        {"catalog": "x.sqlite", "DuckLake.S3.Endpoint_URL": "http://option:3", "ducklake.s3.url_style": "path"},
        conf.get,
    )
    assert config.storage_options == {
        "endpoint_url": "http://option:3",
        "client_kwargs": {"region_name": "conf-region"},
        "config_kwargs": {"s3": {"addressing_style": "path"}},
    }
    # The environment fills in what is missing; its credentials only when none were given.
    assert with_env_defaults(config.storage_options or {})["key"] == "env-key"
    given = with_env_defaults({"key": "k", "secret": "s"})
    assert (given["key"], given["secret"], given["endpoint_url"]) == ("k", "s", "http://env:1")
    assert duckdb_secret_params({"endpoint_url": "https://minio:9000/", "key": "k", "secret": "s"}) == {
        "KEY_ID": "k",
        "SECRET": "s",
        "REGION": "env-region",
        "ENDPOINT": "minio:9000",
        "USE_SSL": "true",
        "URL_STYLE": "path",
    }
    with pytest.raises(InvalidOptionError, match=r"unknown option 'ducklake.s3.secret'.*ducklake.s3.secret_access_key"):
        LakeConfig.resolve({"catalog": "x.sqlite", "ducklake.s3.secret": "oops"})
    with pytest.raises(InvalidOptionError, match="url_style must be 'path' or 'vhost'"):
        LakeConfig.resolve({"catalog": "x.sqlite"}, {"spark.ducklake.s3.url_style": "dns"}.get)


# --- Python API ---------------------------------------------------------------------------------------------------


def test_python_api_on_s3(sqlite_catalog: Any, s3_server: S3Server, bucket: str) -> None:
    catalog = sqlite_catalog  # one backend: storage is under test here; a PostgreSQL catalog over S3: test_streaming_sink_on_s3, test_failed_upload_leaves_catalog_untouched[postgres]
    data_path = f"s3://{bucket}/lake/"
    lake = pdl.connect(catalog.url, data_path, storage_options=s3_server.storage_options(), data_inlining_row_limit=10)
    lake.create_table("main.t", SCHEMA, partition_by=["kind"])
    snaps = [
        lake.append("main.t", rows(0, 5)),  # inlined
        lake.append("main.t", rows(5, 995)),  # three Parquet files, one per partition
        lake.delete("main.t", [("id", "<", 100)]),  # delete files and inlined deletes
        lake.append("main.t", rows(1000, 4)),
    ]
    flushed = lake.flush_inlined_data("main.t")
    assert flushed is not None
    snaps.append(flushed)
    snaps.append(lake.overwrite("main.t", rows(2000, 30)))
    assert sorted(lake.scan("main.t").column("id").to_pylist()) == list(range(2000, 2030))
    assert lake.scan("main.t", snapshot=snaps[4]).num_rows == 904

    # The catalog holds the plain URL (DuckDB uses it as is) and relative file paths; no object is unreferenced.
    with lake.engine.connect() as conn:
        stored = dict(conn.exec_driver_sql("SELECT key, value FROM ducklake_metadata WHERE scope IS NULL").fetchall())
    assert stored["data_path"] == data_path
    objects = s3_server.keys(bucket)
    assert objects and all(o.startswith(data_path + "main/t/") for o in objects)
    assert lake.referenced_files(objects) == set(objects)
    assert lake.orphan_files(older_than=ZERO) == []

    assert_duckdb_reads_history(lake, "t", snaps)

    # A crashed writer's object: an orphan once older than the safety age, then removed; nothing else moves.
    stray = f"{data_path}main/t/kind=k1/ducklake-crashed-writer.parquet"
    s3_server.put(stray, b"PAR1 partial")
    assert lake.orphan_files() == []  # younger than the default hour
    assert lake.orphan_files(older_than=ZERO) == [stray]
    assert list(lake.delete_orphan_files(older_than=ZERO, dry_run=True)) == [stray]
    assert stray in s3_server.keys(bucket)
    assert list(lake.delete_orphan_files(older_than=ZERO)) == [stray]
    assert s3_server.keys(bucket) == objects

    # A writer killed mid-upload leaves a multipart upload: invisible parts, stored and billed. Orphan clean-up
    # aborts the ones under the data path once older than the age; an upload elsewhere in the bucket stays.
    client = s3_server.client()
    prefix = data_path.removeprefix(f"s3://{bucket}/")
    started = {}
    for key in (f"{prefix}main/t/ducklake-killed-mid-upload.parquet", "elsewhere/big.bin"):
        upload = client.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]
        client.upload_part(Bucket=bucket, Key=key, UploadId=upload, PartNumber=1, Body=b"x" * 1024)
        started[key] = upload

    def uploads() -> set[str]:
        return {u["UploadId"] for u in client.list_multipart_uploads(Bucket=bucket).get("Uploads", [])}

    mine = started[f"{prefix}main/t/ducklake-killed-mid-upload.parquet"]
    # (moto dates every upload 2010-11-10, so the age limit itself is not exercised against it)
    dry = lake.delete_orphan_files(older_than=ZERO, dry_run=True)
    assert [u.rsplit("=", 1)[1] for u in dry.stale_uploads] == [mine] and uploads() == set(started.values())
    report = lake.delete_orphan_files(older_than=ZERO)
    assert len(report.stale_uploads) == 1 and not report.failed and "aborted 1 incomplete upload" in report.summary()
    assert uploads() == {started["elsewhere/big.bin"]}
    assert s3_server.keys(bucket) == objects
    assert_duckdb_reads_history(lake, "t", snaps[-2:])
    lake.close()


def test_credentials_from_aws_environment(
    sqlite_catalog: Any, s3_server: S3Server, bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for key, value in s3_server.env().items():
        monkeypatch.setenv(key, value)
    lake = pdl.connect(sqlite_catalog.url, f"s3://{bucket}/lake/")  # no storage_options: AWS_* only
    lake.create_table("main.e", SCHEMA)
    lake.append("main.e", rows(0, 50))
    assert lake.scan("main.e").num_rows == 50
    assert len(s3_server.keys(bucket)) == 1
    con = open_in_duckdb(lake)  # DuckDB's S3 secret from the same variables
    try:
        assert con.execute("SELECT count(*), sum(id) FROM lake.main.e").fetchone() == (50, sum(range(50)))
    finally:
        con.close()
    lake.close()


def test_credentials_never_leak(
    catalog: Any, s3_server: S3Server, bucket: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The secret key appears in no catalog row, log record (any logger, DEBUG), error message, traceback or repr."""
    caplog.set_level(logging.DEBUG)
    secret, key_id = s3_server.secret, s3_server.key_id
    options = s3_server.storage_options()
    lake = pdl.connect(catalog.url, f"s3://{bucket}/lake/", storage_options=options)
    lake.create_table("main.c", SCHEMA)
    lake.append("main.c", rows(0, 100))
    lake.delete("main.c", [("id", "<", 10)])
    lake.table_changes("main.c", 1)
    lake.delete_orphan_files(older_than=ZERO)

    texts: list[str] = []
    folder = Path(catalog.data_path).parent
    missing_bucket = pdl.connect(
        f"sqlite:///{folder / 'other.sqlite'}",
        f"s3://no-such-bucket-{uuid.uuid4().hex[:8]}/lake/",
        storage_options=options,
    )
    no_server = pdl.connect(
        f"sqlite:///{folder / 'third.sqlite'}",
        f"s3://{bucket}/third/",
        storage_options={
            **options,
            "endpoint_url": "http://127.0.0.1:9",
            "config_kwargs": {"retries": {"max_attempts": 1}},
        },
    )
    for other in (missing_bucket, no_server):
        other.create_table("main.x", SCHEMA)
    removed = _key(lake, "main.c")
    failures = (
        lambda: missing_bucket.append("main.x", rows(0, 100)),  # the store refuses the upload
        lambda: no_server.append("main.x", rows(0, 100)),  # nothing listens at the endpoint
        lambda: (s3_server.client().delete_object(Bucket=bucket, Key=removed), lake.scan("main.c")),  # file gone
    )
    for failing in failures:
        with pytest.raises(DataFileError) as info:
            failing()
        texts += [str(info.value), repr(info.value), "".join(traceback.format_exception(info.value))]
    assert "could not write data file" in texts[0] and "could not write data file" in texts[3]
    assert "is missing" in texts[6]

    config = LakeConfig.resolve({"catalog": catalog.url, **s3_server.spark_options()})
    assert config.storage_options is not None and config.storage_options["secret"] == secret
    texts += [repr(config), repr(lake), repr(missing_bucket)]
    texts += [r.getMessage() + (r.exc_text or "") for r in caplog.records]
    texts.append(json.dumps(catalog_dump(lake), default=str))
    if catalog.backend == "sqlite":
        db = sqlite3.connect(catalog.url.removeprefix("sqlite:///"))
        texts.append("\n".join(db.iterdump()))
        db.close()
    assert caplog.records, "expected log records to check"
    for text in texts:
        assert secret not in text
    # The key id is no secret, but our own messages and the catalog carry none either.
    ours = [r.getMessage() for r in caplog.records if r.name.startswith("pyspark_ducklake")]
    assert not any(key_id in t for t in [*ours, texts[-1], repr(config)])
    # Should a store ever echo a secret, it is scrubbed from our messages.
    assert describe_error(OSError(f"denied for {secret}"), options) == "OSError: denied for ***"
    for other in (missing_bucket, no_server, lake):
        other.close()


def _key(lake: pdl.Lake, table: str) -> str:
    """The object key of one live data file of ``table``."""
    with lake.engine.connect() as conn:
        path = conn.exec_driver_sql("SELECT path FROM ducklake_data_file WHERE end_snapshot IS NULL").fetchone()[0]
    url = lake.data_path + "main/" + table.split(".")[1] + "/" + path
    return url.removeprefix("s3://").split("/", 1)[1]


# --- storage faults ---------------------------------------------------------------------------------------------


def test_failed_upload_leaves_catalog_untouched(
    catalog: Any, s3_server: S3Server, bucket: str, proxy: CutProxy
) -> None:
    """An upload cut off mid-way fails with DataFileError and changes no catalog row; the retry succeeds; the failed
    attempt's finished file is an orphan that maintenance removes; DuckDB agrees. On SQLite the files are ~5.3 MB
    (multipart uploads of 5 MiB parts), on PostgreSQL ~100 kB (single PUTs)."""
    per_file, blob_size = (530, 10_000) if catalog.backend == "sqlite" else (50, 2_000)
    options = s3_server.storage_options(
        proxy.endpoint,
        default_block_size=5 * 2**20,
        config_kwargs={"retries": {"max_attempts": 1}, "connect_timeout": 2, "read_timeout": 2},
    )
    data_path = f"s3://{bucket}/lake/"
    lake = pdl.connect(catalog.url, data_path, storage_options=options)
    lake.create_table("main.f", pa.schema([("id", pa.int64()), ("kind", pa.string()), ("blob", pa.binary())]))
    lake.set_partitioning("main.f", ["kind"])
    rng = random.Random(7)

    def blobs(first: int, n: int, size: int) -> pa.Table:
        ids = list(range(first, first + n))
        return pa.table(
            {"id": ids, "kind": [f"k{i % 2}" for i in ids], "blob": [rng.randbytes(size) for _ in ids]},
            schema=lake.table("main.f").schema,
        )

    base = lake.append("main.f", blobs(0, 30, 100))
    before, objects_before = catalog_dump(lake), set(s3_server.keys(bucket))

    big = blobs(100, 2 * per_file, blob_size)  # two partition files
    proxy.cut_after(int(1.5 * per_file * blob_size))  # the first file completes, the second dies half-way
    with pytest.raises(DataFileError, match="could not write data file") as info:
        lake.append("main.f", big)
    assert "nothing was committed" in str(info.value)
    assert proxy.is_cut
    cut_file = re.search(r"could not write data file (\S+):", str(info.value)).group(1)

    assert catalog_dump(lake) == before  # no snapshot, no file row, no id consumed
    assert lake.current_snapshot_id() == base
    leftovers = sorted(set(s3_server.keys(bucket)) - objects_before)
    assert cut_file not in leftovers  # an S3 object appears whole or not at all
    assert len(leftovers) == 1  # the finished first file: its removal failed with the store cut off
    _, body = leftovers[0].removeprefix("s3://").split("/", 1)
    finished = s3_server.client().get_object(Bucket=bucket, Key=body)["Body"].read()
    assert pq.read_table(pa.BufferReader(finished)).num_rows == per_file

    proxy.restore()
    retried = lake.append("main.f", big)
    assert retried == base + 1
    assert lake.orphan_files(older_than=ZERO) == leftovers
    assert list(lake.delete_orphan_files(older_than=ZERO)) == leftovers
    assert lake.orphan_files(older_than=ZERO) == []
    assert not s3_server.client().list_multipart_uploads(Bucket=bucket).get("Uploads")  # none left half-done
    assert lake.referenced_files(s3_server.keys(bucket)) == set(s3_server.keys(bucket))
    con = open_in_duckdb(lake)
    try:
        got = con.execute("SELECT count(*), sum(id), sum(octet_length(blob)) FROM lake.main.f").fetchone()
    finally:
        con.close()
    n = 2 * per_file
    assert got == (30 + n, sum(range(30)) + sum(range(100, 100 + n)), 30 * 100 + n * blob_size)
    lake.close()


# --- Spark ----------------------------------------------------------------------------------------------------------


def test_spark_batch_and_change_feed_on_s3(
    spark: Any, sqlite_catalog: Any, s3_server: S3Server, bucket: str, capfd: pytest.CaptureFixture[str]
) -> None:
    """Executors write and read S3 with credentials passed as options or conf (no AWS_* in the environment)."""
    from pyspark.sql import functions as F

    assert not any(os.environ.get(v) for v in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_ENDPOINT_URL"))
    pdl.register(spark)
    data_path = f"s3://{bucket}/lake/"
    lake_options = {"catalog": sqlite_catalog.url, "dataPath": data_path, **s3_server.spark_options()}
    df = spark.range(0, 3000, numPartitions=2).select(
        "id", F.concat(F.lit("k"), (F.col("id") % 3).cast("string")).alias("kind"), (F.col("id") * 1.5).alias("amount")
    )
    df.write.format("ducklake").options(**lake_options).option("partitionBy", "kind").mode("append").save("main.sp")
    df.filter("id < 40").write.format("ducklake").options(**lake_options).mode("overwrite").save("main.sp")
    lake = pdl.connect(sqlite_catalog.url, storage_options=s3_server.storage_options())
    first, second = [s.snapshot_id for s in lake.snapshots()[-2:]]
    assert len(s3_server.keys(bucket)) >= 6  # 3 partitions x 2 tasks, then the overwrite's

    # A filtered read with time travel, with the credentials in the Spark conf, captured by register()
    for key, value in s3_server.spark_options().items():
        spark.conf.set("spark." + key, value)
    try:
        pdl.register(spark)
        old = spark.read.format("ducklake").option("catalog", sqlite_catalog.url).option("versionAsOf", first)
        assert sorted(r.id for r in old.load("main.sp").filter("id >= 2990").collect()) == list(range(2990, 3000))
    finally:
        for key in s3_server.spark_options():
            spark.conf.unset("spark." + key)
        pdl.register(spark)

    changes = (
        spark.read.format("ducklake")
        .options(**lake_options)
        .option("readChangeFeed", "true")
        .option("startingSnapshot", first)
        .load("main.sp")
    )
    spark_feed = feed(pa.Table.from_pylist([r.asDict() for r in changes.collect()]))
    assert spark_feed == feed(lake.table_changes("main.sp", first, second))
    assert sum(spark_feed.values()) == 3000 + 3000 + 40
    assert_duckdb_reads_history(lake, "sp", [first, second])

    # A failing Spark write (no such bucket) neither shows nor logs the secret, in the driver or the workers.
    bad = {**lake_options, "catalog": f"sqlite:///{Path(sqlite_catalog.data_path).parent / 'bad.sqlite'}"}
    bad["dataPath"] = f"s3://no-such-bucket-{uuid.uuid4().hex[:8]}/lake/"
    with pytest.raises(Exception) as info:
        df.write.format("ducklake").options(**bad).mode("append").save("main.bad")
    message = str(info.value)
    assert "could not write data file" in message and bad["dataPath"].removesuffix("lake/") in message
    captured = capfd.readouterr()
    for text in (message, captured.out, captured.err):
        assert s3_server.secret not in text
    lake.close()


def test_streaming_sink_on_s3(spark: Any, pg_catalog: Any, s3_server: S3Server, bucket: str, tmp_path: Path) -> None:
    """A real streaming query into a PostgreSQL catalog with data on S3: inlined, Parquet (executors) and a flush."""
    from pyspark_ducklake import ducklake_sink

    source = tmp_path / "in"
    source.mkdir()
    sizes = [50, 3000, 20]  # inlined, Parquet, inlined and then flushed (70 >= flush_rows)
    first = 0
    for i, n in enumerate(sizes):
        pq.write_table(rows(first, n), source / f"part-{i}.parquet")
        os.utime(source / f"part-{i}.parquet", (1_700_000_000 + i, 1_700_000_000 + i))
        first += n
    sink = ducklake_sink(
        "main.events",
        catalog=pg_catalog.url,
        data_path=f"s3://{bucket}/lake/",
        app_id="s3-stream",
        data_inlining_row_limit=100,
        flush_rows=60,
        storage_options=s3_server.storage_options(),
    )
    query = (
        spark.readStream.schema("id BIGINT, kind STRING, amount DOUBLE")
        .option("maxFilesPerTrigger", 1)
        .parquet(str(source))
        .repartition(2)
        .writeStream.foreachBatch(sink)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    assert query.exception() is None
    assert [m.mode for m in sink.metrics] == ["inlined", "parquet", "inlined"]
    assert sink.metrics[2].flushed_rows == 70
    lake = pdl.connect(pg_catalog.url, storage_options=s3_server.storage_options())
    assert canonical_rows(lake.scan("main.events")) == canonical_rows(rows(0, sum(sizes)))
    snaps = [s.snapshot_id for s in lake.snapshots()[1:]]
    assert len(snaps) == 3
    assert lake.referenced_files(s3_server.keys(bucket)) == set(s3_server.keys(bucket))
    assert_duckdb_reads_history(lake, "events", snaps)
    lake.close()
