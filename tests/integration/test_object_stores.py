"""Lakes on Google Cloud Storage and Azure Blob Storage: real local emulators started here on free ports of 127.0.0.1
(gcp-storage-emulator from PyPI, Azurite from npm via scripts/azurite.sh), real gcsfs / adlfs, real Spark executors.

DuckDB 1.5.5 reads and writes the Azurite lake itself (the ``duckdb-extension-azure`` wheel, attached by
``open_in_duckdb``). It cannot reach the GCS emulator: DuckDB's ``gs://`` speaks Google's S3-interoperable XML API
with HMAC keys, which gcp-storage-emulator does not serve, so the GCS lake is checked by our own reads.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import traceback
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import pyspark_ducklake as pdl
from pyspark_ducklake.duckdb_attach import open_in_duckdb
from pyspark_ducklake.exceptions import DataFileError
from pyspark_ducklake.io.storage import describe_error
from pyspark_ducklake.spark.lake_config import LakeConfig
from tests.support.compare import canonical_rows
from tests.support.emulators import AZURITE_KEY, Emulator, start_azurite, start_gcs, stop

ZERO = dt.timedelta(0)
SCHEMA = pa.schema([("id", pa.int64()), ("kind", pa.string()), ("amount", pa.float64())])
SCHEMES = {"gcs": "gs", "azure": "az"}


@pytest.fixture(scope="session", params=["gcs", "azure"])
def emulator(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Emulator]:
    start = start_gcs if request.param == "gcs" else start_azurite
    server = start(tmp_path_factory.mktemp(request.param))
    yield server
    stop(server)


@pytest.fixture
def bucket(emulator: Emulator) -> str:
    return emulator.create_bucket(f"lake-{uuid.uuid4().hex[:12]}")


def rows(first: int, n: int) -> pa.Table:
    ids = list(range(first, first + n))
    return pa.table({"id": ids, "kind": [f"k{i % 3}" for i in ids], "amount": [i * 1.5 for i in ids]}, schema=SCHEMA)


def feed(t: pa.Table) -> Counter[Any]:
    cols = [c for c in t.column_names if c not in ("_snapshot_id", "_rowid")]
    return Counter(tuple(r[c] for c in cols) for r in t.to_pylist())


def assert_duckdb_reads(lake: pdl.Lake, table: str, snapshots: list[int]) -> None:
    """DuckDB, reading the container itself, sees exactly our rows at every snapshot (Azure only: see above)."""
    if not lake.data_path.startswith("az://"):
        return
    con = open_in_duckdb(lake)
    try:
        for s in snapshots:
            got = con.execute(f"SELECT id, kind, amount FROM lake.main.{table} AT (VERSION => {s})").to_arrow_table()
            assert canonical_rows(got) == canonical_rows(lake.scan(f"main.{table}", snapshot=s)), s
    finally:
        con.close()


def test_python_api_on_object_store(sqlite_catalog: Any, emulator: Emulator, bucket: str) -> None:
    """Create, append (Parquet and inlined), delete, flush, change feed, orphans on gs:// / az://; DuckDB agrees."""
    scheme = SCHEMES[emulator.kind]
    data_path = f"{scheme}://{bucket}/lake/"
    lake = pdl.connect(
        sqlite_catalog.url, data_path, storage_options=emulator.storage_options(), data_inlining_row_limit=10
    )
    assert lake.data_path == data_path  # stored verbatim, as DuckDB attaches it
    lake.create_table("main.t", SCHEMA)
    lake.append("main.t", rows(0, 100))
    lake.append("main.t", rows(100, 5))  # inlined
    lake.delete("main.t", [("id", "<", 10)])
    lake.flush_inlined_data("main.t")
    snaps = [s.snapshot_id for s in lake.snapshots()[2:]]
    assert canonical_rows(lake.scan("main.t")) == canonical_rows(rows(10, 95))
    objects = emulator.keys(bucket, scheme)
    assert objects and all(o.startswith(f"{data_path}main/t/") for o in objects)
    assert lake.referenced_files(objects) == set(objects)
    changes = lake.table_changes("main.t", snaps[0], snaps[-1])
    assert sum(feed(changes).values()) == 100 + 5 + 10
    # the store's listing spells paths as the catalog does: only a stray object is an orphan
    stray = f"{data_path}main/t/ducklake-stray.parquet"
    emulator.filesystem().pipe(stray.split("://", 1)[1], b"PAR1 partial")
    assert lake.orphan_files(older_than=ZERO) == [stray]
    lake.delete_orphan_files(older_than=ZERO)
    assert emulator.keys(bucket, scheme) == objects
    assert_duckdb_reads(lake, "t", snaps)
    if scheme == "az":  # and what DuckDB writes there, we read
        con = open_in_duckdb(lake)
        con.execute("INSERT INTO lake.main.t SELECT i, 'duck', i * 0.5 FROM range(1000, 1100) r(i)")
        con.close()
        assert lake.scan("main.t").column("kind").to_pylist().count("duck") == 100
        assert_duckdb_reads(lake, "t", [lake.current_snapshot_id()])
    lake.close()


def test_store_credentials_never_leak(
    sqlite_catalog: Any, emulator: Emulator, bucket: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A failing write or read names the store's error, never its secret (the Azurite key, the GCS token)."""
    caplog.set_level(logging.DEBUG)
    scheme = SCHEMES[emulator.kind]
    options = emulator.storage_options()
    secret, failing = AZURITE_KEY, dict(options)
    if emulator.kind == "gcs":  # a raw OAuth token, made up: gcsfs checks it with Google, which fails here
        secret = failing["token"] = "ya29." + uuid.uuid4().hex
    folder = Path(sqlite_catalog.data_path).parent
    lake = pdl.connect(sqlite_catalog.url, f"{scheme}://{bucket}/lake/", storage_options=options)
    lake.create_table("main.c", SCHEMA)
    lake.append("main.c", rows(0, 100))
    missing = pdl.connect(
        f"sqlite:///{folder / 'missing.sqlite'}",
        f"{scheme}://no-such-{uuid.uuid4().hex[:8]}/lake/",
        storage_options=failing,
    )
    missing.create_table("main.x", SCHEMA)
    texts: list[str] = []
    with pytest.raises(DataFileError) as info:
        missing.append("main.x", rows(0, 100))
    texts += [str(info.value), repr(info.value), "".join(traceback.format_exception(info.value))]
    assert "could not write data file" in texts[0]
    assert missing.snapshots()[-1].snapshot_id == 1  # nothing committed
    given = {f"ducklake.{emulator.kind}.{k}": v for k, v in failing.items()}
    config = LakeConfig.resolve({"catalog": sqlite_catalog.url, "dataPath": missing.data_path, **given})
    assert config.storage_options == failing
    texts += [repr(config), repr(lake), repr(missing)]
    texts += [r.getMessage() + (r.exc_text or "") for r in caplog.records]
    for text in texts:
        assert secret not in text
    # Should a store echo a secret (or the account key inside a connection string), it is scrubbed.
    assert describe_error(OSError(f"denied for {secret}"), failing) == "OSError: denied for ***"
    lake.close()
    missing.close()


def test_spark_batch_change_feed_and_sink_on_object_store(
    spark: Any, sqlite_catalog: Any, emulator: Emulator, bucket: str, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """Executors write and read gs:// / az:// with the settings as ``ducklake.<store>.*`` options, then as Spark conf
    (also read by the sink), then as writeStream options; no credentials in the environment."""
    from pyspark.sql import functions as F

    from pyspark_ducklake import ducklake_sink

    assert not any(k.startswith(("AZURE_STORAGE_", "STORAGE_EMULATOR")) for k in os.environ)
    scheme = SCHEMES[emulator.kind]
    pdl.register(spark)
    data_path = f"{scheme}://{bucket}/lake/"
    lake_options = {"catalog": sqlite_catalog.url, "dataPath": data_path, **emulator.spark_options()}
    df = spark.range(0, 3000, numPartitions=2).select(
        "id", F.concat(F.lit("k"), (F.col("id") % 3).cast("string")).alias("kind"), (F.col("id") * 1.5).alias("amount")
    )
    df.write.format("ducklake").options(**lake_options).option("partitionBy", "kind").mode("append").save("main.sp")
    df.filter("id < 40").write.format("ducklake").options(**lake_options).mode("overwrite").save("main.sp")
    lake = pdl.connect(sqlite_catalog.url, storage_options=emulator.storage_options())
    first, second = [s.snapshot_id for s in lake.snapshots()[-2:]]
    assert len(emulator.keys(bucket, scheme)) >= 6  # 3 partitions x 2 tasks, then the overwrite's

    for key, value in emulator.spark_options().items():
        spark.conf.set("spark." + key, value)
    try:
        pdl.register(spark)
        if emulator.kind == "azure":  # SET shows the conf; its secrets are redacted as Spark's own are
            shown = str(spark.sql("SET").collect())
            assert "spark.ducklake.azure.connection_string" in shown and AZURITE_KEY not in shown
        old = spark.read.format("ducklake").option("catalog", sqlite_catalog.url).option("versionAsOf", first)
        assert sorted(r.id for r in old.load("main.sp").filter("id >= 2990").collect()) == list(range(2990, 3000))
        changes = (
            spark.read.format("ducklake")
            .option("catalog", sqlite_catalog.url)
            .option("readChangeFeed", "true")
            .option("startingSnapshot", first)
            .load("main.sp")
        )
        spark_feed = Counter((r["id"], r["kind"], r["amount"], r["_change_type"]) for r in changes.collect())
        ours = lake.table_changes("main.sp", first, second)
        assert spark_feed == feed(ours.select(["id", "kind", "amount", "_change_type"]))
        assert sum(spark_feed.values()) == 3000 + 3000 + 40

        # the sink takes its storage settings from the same conf
        source = tmp_path / "in"
        source.mkdir()
        pq.write_table(rows(10_000, 2000), source / "part-0.parquet")
        sink = ducklake_sink(
            "main.events", catalog=sqlite_catalog.url, app_id="store-stream", data_inlining_row_limit=0
        )
        query = (
            spark.readStream.schema("id BIGINT, kind STRING, amount DOUBLE")
            .parquet(str(source))
            .repartition(2)
            .writeStream.foreachBatch(sink)
            .option("checkpointLocation", str(tmp_path / "checkpoint"))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination(120)
        assert query.exception() is None
    finally:
        for key in emulator.spark_options():
            spark.conf.unset("spark." + key)
        pdl.register(spark)
    assert canonical_rows(lake.scan("main.events")) == canonical_rows(rows(10_000, 2000))

    # writeStream.format('ducklake'), the settings as its options (the conf is unset by now)
    query = (
        spark.readStream.schema("id BIGINT, kind STRING, amount DOUBLE")
        .parquet(str(source))
        .writeStream.format("ducklake")
        .options(**lake_options)
        .option("data_inlining_row_limit", "0")
        .option("checkpointLocation", str(tmp_path / "checkpoint-ws"))
        .trigger(availableNow=True)
        .start("main.ws")
    )
    query.awaitTermination(120)
    assert query.exception() is None
    assert canonical_rows(lake.scan("main.ws")) == canonical_rows(rows(10_000, 2000))
    assert any(k.startswith(f"{data_path}main/ws/") for k in emulator.keys(bucket, scheme))
    assert any(k.startswith(f"{data_path}main/events/") for k in emulator.keys(bucket, scheme))
    assert_duckdb_reads(lake, "sp", [first, second])
    assert_duckdb_reads(lake, "events", [lake.snapshots()[-1].snapshot_id])

    captured = capfd.readouterr()
    secret = AZURITE_KEY if emulator.kind == "azure" else None
    for text in (captured.out, captured.err, json.dumps(lake_options.get("catalog"))):
        assert secret is None or secret not in text
    lake.close()


@pytest.mark.parametrize("emulator", ["azure"], indirect=True)
def test_abfss_data_path_keeps_its_spelling(sqlite_catalog: Any, emulator: Emulator, bucket: str) -> None:
    """``abfss://container@account.dfs.core.windows.net/…`` (adlfs over Azurite's blob API): the store lists it as
    ``container/…``; the orphan scan spells it back as the catalog does (it listed ``abfss://container/…`` before,
    outside the data path, and found no orphan at all)."""
    data_path = f"abfss://{bucket}@devstoreaccount1.dfs.core.windows.net/lake/"
    lake = pdl.connect(
        sqlite_catalog.url, data_path, storage_options=emulator.storage_options(), data_inlining_row_limit=0
    )
    lake.create_table("main.t", SCHEMA)
    lake.append("main.t", rows(0, 100))
    lake.delete("main.t", [("id", "<", 10)])
    stray = f"{data_path}main/t/ducklake-stray.parquet"
    emulator.filesystem().pipe(f"{bucket}/lake/main/t/ducklake-stray.parquet", b"PAR1 partial")
    assert lake.orphan_files(older_than=ZERO) == [stray]
    lake.delete_orphan_files(older_than=ZERO)
    assert canonical_rows(lake.scan("main.t")) == canonical_rows(rows(10, 90))
    assert len(emulator.keys(bucket, "az")) == 2  # the data file and the delete file
    lake.close()
