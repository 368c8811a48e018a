"""A catalog password, in every spelling a user writes, never appears in an exception (message or chained error),
a log record, a ``repr``, the command line's output, or Spark's ``SET`` output; against a real PostgreSQL that is
unreachable (a closed port) and one that accepts any password (the test server trusts loopback)."""

from __future__ import annotations

import logging
import traceback
from collections.abc import Callable
from pathlib import Path
from urllib.parse import quote, quote_plus

import pyarrow as pa
import pytest
from pyspark.sql import SparkSession

import pyspark_ducklake as pdl
from pyspark_ducklake.__main__ import main
from pyspark_ducklake.exceptions import DuckLakeError
from pyspark_ducklake.spark.lake_config import LakeConfig
from tests.support.catalogs import PgServer, create_database, drop_database

pytestmark = pytest.mark.timeout(300)

SECRET = "Sup3r s3cr@t'pw"  # a space, an @ and a quote: every spelling must quote or encode it


def spellings(host: str, port: int, user: str, db: str) -> dict[str, str]:
    q = quote(SECRET, safe="")
    libpq = SECRET.replace("\\", "\\\\").replace("'", "\\'")
    return {
        "url-userinfo": f"postgresql://{user}:{q}@{host}:{port}/{db}",
        "sqlalchemy": f"postgresql+psycopg2://{user}:{q}@{host}:{port}/{db}",
        "url-query": f"postgres://{user}@{host}:{port}/{db}?password={q}",
        "libpq-keywords": f"ducklake:postgres:dbname={db} host={host} port={port} user={user} password='{libpq}'",
        "libpq-no-prefix": f"postgres:password='{libpq}' dbname={db} host={host} port={port} user={user}",
        "libpq-uri": f"ducklake:postgres:postgresql://{user}:{q}@{host}:{port}/{db}",
    }


def leaks(text: str) -> bool:
    return any(s in text for s in (SECRET, quote(SECRET, safe=""), quote_plus(SECRET), "s3cr@t", "s3cr%40t"))


def error_text(call: Callable[[], object]) -> str:
    with pytest.raises(Exception) as info:
        call()
    return "".join(traceback.format_exception(info.value))  # message, chained errors, traceback


def log_text(caplog: pytest.LogCaptureFixture) -> str:
    return "\n".join(f"{r.getMessage()} {r.exc_text or ''}" for r in caplog.records)


@pytest.fixture
def database(pg_server: PgServer, pg_admin: object) -> str:
    db = create_database(pg_admin)  # type: ignore[arg-type]
    yield db  # type: ignore[misc]
    drop_database(pg_admin, db)  # type: ignore[arg-type]


@pytest.mark.parametrize("name", list(spellings("h", 1, "u", "d")))
def test_unreachable_catalog(
    name: str, tmp_path: Path, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    caplog.set_level(logging.DEBUG)
    catalog = spellings("127.0.0.1", 1, "postgres", "nowhere")[name]
    text = error_text(lambda: pdl.connect(catalog, str(tmp_path / "data")))
    assert "CatalogUnreachableError" in text and not leaks(text), text
    assert "***" in text
    text = error_text(lambda: LakeConfig.resolve({"catalog": catalog}).connect())
    assert not leaks(text) and not leaks(repr(LakeConfig.resolve({"catalog": catalog})))
    assert main(["--catalog", catalog, "snapshots"]) == 1
    out = capsys.readouterr()
    assert "cannot open catalog" in out.err and not leaks(out.out + out.err)
    assert not leaks(log_text(caplog))


@pytest.mark.parametrize("name", list(spellings("h", 1, "u", "d")))
def test_reachable_catalog_with_a_password(
    name: str,
    pg_server: PgServer,
    database: str,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    caplog.set_level(logging.DEBUG)
    catalog = spellings(pg_server.host, pg_server.port, pg_server.user, database)[name]
    texts = [error_text(lambda: pdl.connect(catalog))]  # a new catalog without a data path
    with pdl.connect(catalog, str(tmp_path / "data"), max_retry_count="2") as lake:
        lake.create_table("main.t", pa.schema([("id", pa.int64())]))
        lake.append("main.t", pa.table({"id": [1]}))
        texts += [repr(lake.location), str(lake.location), lake.location.redacted(), repr(lake.engine)]
        texts.append(error_text(lambda: lake.append("main.nope", pa.table({"id": [1]}))))
        attach = lake.location.duckdb_attach()
    assert SECRET in pdl.connect(attach).location.conninfo["password"]  # type: ignore[index]
    texts.append(error_text(lambda: pdl.connect(catalog, str(tmp_path / "elsewhere"))))  # another data path
    monkeypatch.setenv("DUCKLAKE_CATALOG", catalog)
    assert main(["tables"]) == 0 and main(["changes", "main.nope", "0"]) == 1
    out = capsys.readouterr()
    texts += [out.out, out.err, log_text(caplog)]
    assert "main.t" in out.out
    for text in texts:
        assert not leaks(text), text


def test_password_from_pgpassword_is_scrubbed_from_driver_errors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PGPASSWORD", SECRET)
    text = error_text(lambda: pdl.connect("postgres:host=127.0.0.1 port=1 user=postgres dbname=x", str(tmp_path)))
    assert not leaks(text)


def test_spark_errors_and_set_output_hide_the_password(spark: SparkSession, pg_server: PgServer, database: str) -> None:
    pdl.register(spark)
    for catalog in spellings("127.0.0.1", 1, "postgres", "nowhere").values():
        text = error_text(lambda c=catalog: spark.read.format("ducklake").option("catalog", c).load("main.t").count())
        assert "CatalogUnreachableError" in text and not leaks(text), text[:3000]
    catalog = spellings(pg_server.host, pg_server.port, pg_server.user, database)["url-userinfo"]
    spark.conf.set("spark.ducklake.catalog", catalog)
    try:
        pdl.register(spark)  # adds the URL-password pattern to spark.sql.redaction.options.regex
        shown = spark.sql("SET spark.ducklake.catalog").collect()[0].value
        assert not leaks(shown) and "redacted" in shown
        assert not leaks(str(spark.sql("SET").collect()))
    finally:
        spark.conf.unset("spark.ducklake.catalog")
        pdl.register(spark)


def test_sink_errors_hide_the_password(spark: SparkSession, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    catalog = spellings("127.0.0.1", 1, "postgres", "nowhere")["libpq-keywords"]
    sink = pdl.ducklake_sink("main.t", catalog=catalog, app_id="a", reconnect_timeout=0)
    with pytest.raises(DuckLakeError) as info:
        sink(spark.range(1), 0)  # type: ignore[operator]
    assert not leaks("".join(traceback.format_exception(info.value))) and not leaks(log_text(caplog))
