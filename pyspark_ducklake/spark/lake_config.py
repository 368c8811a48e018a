"""Where a lake is for Spark and the sink: options, then Spark conf, then the environment, in a picklable config."""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pyspark_ducklake.catalog.location import redact_location
from pyspark_ducklake.catalog.transaction import RetryConfig
from pyspark_ducklake.exceptions import LakeNotConfiguredError
from pyspark_ducklake.io.object_stores import STORES, fsspec_options, settings_from_options, store_of
from pyspark_ducklake.io.storage import s3_settings_from_options, s3fs_options
from pyspark_ducklake.lake import Lake
from pyspark_ducklake.options import (
    CATALOG,
    DATA_INLINING_ROW_LIMIT,
    DATA_PATH,
    DUCKDB_STORAGE_VERSION,
    ENCRYPTED,
    ENV_CATALOG,
    ENV_DATA_PATH,
    FORMAT_VERSION,
    MAX_RETRY_COUNT,
    RECONNECT_TIMEOUT,
    RETRY_BACKOFF,
    RETRY_WAIT_MS,
    SPARK_CONF_CATALOG,
    SPARK_CONF_DATA_PATH,
    SPARK_CONF_KEYS,
    SPARK_CONF_PREFIX,
    canonical_conf,
    option_as_float,
    option_as_int,
    option_as_seconds,
    option_value,
    parse_bool,
    parse_format_version,
    parse_storage_version,
)
from pyspark_ducklake.spark.connect import is_connect

log = logging.getLogger(__name__)


def retry_config(options: Mapping[str, Any]) -> RetryConfig:
    """The commit retry settings of ``options`` (DuckLake's defaults for those not given).

    Raises:
        InvalidOptionError: a value that does not parse or is out of range.
    """
    d = RetryConfig()
    return RetryConfig(
        max_retry_count=option_as_int(options, MAX_RETRY_COUNT, d.max_retry_count, minimum=0) or 0,
        retry_wait_ms=option_as_int(options, RETRY_WAIT_MS, d.retry_wait_ms, minimum=0) or 0,
        retry_backoff=option_as_float(options, RETRY_BACKOFF, d.retry_backoff, minimum=1.0),
        reconnect_timeout=option_as_seconds(options, RECONNECT_TIMEOUT, d.reconnect_timeout),
    )


def _s3_settings(options: Mapping[str, str], conf: Callable[[str], str | None]) -> tuple[tuple[str, str], ...]:
    settings = s3_settings_from_options(options, conf)
    s3fs_options(settings)  # a bad value fails here, on the driver, not later in a task
    return tuple(sorted(settings.items()))


@dataclass(frozen=True)
class LakeConfig:
    """Where the lake is and how to commit to it; pickles to executors."""

    catalog: str
    data_path: str | None
    data_inlining_row_limit: int | None
    retry: RetryConfig
    catalog_source: str
    # ducklake.s3.* settings from options and Spark conf (secrets: never in the repr)
    s3: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    encrypted: bool | None = None  # option 'encrypted': create the lake encrypted / check the lake's setting
    format_version: str | None = None  # option 'format_version': a new catalog's version / check the lake's
    duckdb_storage_version: str | None = None  # option 'duckdb_storage_version': a new DuckDB-file catalog's
    # ducklake.gcs.* / ducklake.azure.* settings as (store, name, value) (secrets: never in the repr)
    stores: tuple[tuple[str, str, str], ...] = field(default=(), repr=False)

    def __repr__(self) -> str:
        # the catalog URL may carry a password and the s3 settings secrets: neither appears
        return (
            f"LakeConfig(catalog={redact_location(self.catalog)!r}, data_path={self.data_path!r}, "
            f"data_inlining_row_limit={self.data_inlining_row_limit!r}, retry={self.retry!r}, "
            f"catalog_source={self.catalog_source!r})"
        )

    __str__ = __repr__

    @property
    def storage_options(self) -> dict[str, Any] | None:
        """fsspec options for the data path (see :meth:`storage_options_for`)."""
        return self.storage_options_for(self.data_path)

    def storage_options_for(self, data_path: str | None) -> dict[str, Any] | None:
        """fsspec options for ``data_path``: gcsfs / adlfs ones for a ``gs://`` / ``az://`` path (or, the path
        unknown, when only that store is configured), else s3fs ones (the environment's ``AWS_*`` fill in what is
        not set)."""
        store = store_of(data_path)
        configured = {name for name, _, _ in self.stores}
        if store is None and data_path is None and len(configured) == 1 and not self.s3:
            store = next(s for s in STORES if s.name in configured)
        if store is not None:
            return fsspec_options({k: v for name, k, v in self.stores if name == store.name}) or None
        return s3fs_options(dict(self.s3)) or None

    @classmethod
    def resolve(
        cls,
        options: Mapping[str, str] | None = None,
        spark_conf: Callable[[str], str | None] | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> LakeConfig:
        """Resolve the lake from explicit options, then Spark conf, then the environment.

        Raises:
            LakeNotConfiguredError: no catalog anywhere; the message says the three ways to set one.
            InvalidOptionError: an option value does not parse.
        """
        options = options or {}
        env = os.environ if environ is None else environ
        conf = spark_conf or (lambda _key: None)
        catalog, source = option_value(options, CATALOG), "option 'catalog'"
        if not catalog:
            catalog, source = conf(SPARK_CONF_CATALOG), f"Spark conf {SPARK_CONF_CATALOG}"
        if not catalog:
            catalog, source = env.get(ENV_CATALOG), f"environment {ENV_CATALOG}"
        if not catalog:
            raise LakeNotConfiguredError(
                "no DuckLake catalog configured: pass .option('catalog', 'sqlite:///lake.sqlite') (in SQL: OPTIONS "
                f"(catalog '...')), or set the Spark conf {SPARK_CONF_CATALOG} and call "
                "pyspark_ducklake.register(spark) (a data source Spark finds by itself sees no session conf), or the "
                f"environment variable {ENV_CATALOG} of the driver and executors "
                "(SQLAlchemy URL or DuckDB spelling such as 'ducklake:sqlite:lake.sqlite')"
            )
        data_path = option_value(options, DATA_PATH) or conf(SPARK_CONF_DATA_PATH) or env.get(ENV_DATA_PATH)
        encrypted = option_value(options, ENCRYPTED)
        fmt = option_value(options, FORMAT_VERSION)
        storage = option_value(options, DUCKDB_STORAGE_VERSION)
        return cls(
            catalog=str(catalog),
            data_path=data_path,
            data_inlining_row_limit=option_as_int(options, DATA_INLINING_ROW_LIMIT, None, minimum=0),
            retry=retry_config(options),
            catalog_source=source,
            s3=_s3_settings(options, conf),
            stores=tuple(
                sorted((st, k, v) for st, kv in settings_from_options(options, conf).items() for k, v in kv.items())
            ),
            encrypted=None if encrypted is None else parse_bool(encrypted, ENCRYPTED),
            format_version=None if fmt is None else parse_format_version(fmt, FORMAT_VERSION).tag,
            duckdb_storage_version=None if storage is None else parse_storage_version(storage, DUCKDB_STORAGE_VERSION),
        )

    def connect(self, **kwargs: Any) -> Lake:
        """Open the lake (``kwargs`` override ``retry``, ``storage_options``...)."""
        settings: dict[str, Any] = {
            "data_inlining_row_limit": self.data_inlining_row_limit,
            "retry": self.retry,
            "storage_options": self.storage_options,
            "encrypted": self.encrypted,
            "format_version": self.format_version,
            "duckdb_storage_version": self.duckdb_storage_version,
        }
        lake = Lake(self.catalog, self.data_path, **{**settings, **kwargs})
        if self.data_path is None and "storage_options" not in kwargs:
            # the data path came from the catalog: the settings of its store, not of another one configured
            lake.storage_options = self.storage_options_for(lake.data_path)
        return lake


def spark_conf(spark: Any) -> dict[str, str]:
    """The session's ``spark.ducklake.*`` conf (its SparkConf, then its runtime conf) under the documented keys.

    Also makes the session hide passwords in URLs from its UI (see :func:`hide_url_passwords_in_spark_ui`).

    Raises:
        InvalidOptionError: a ``spark.ducklake.*`` key this library does not know (with the closest valid key).
    """
    hide_url_passwords_in_spark_ui(spark)
    if is_connect(spark):
        # No SparkContext on a Connect client: the session's conf, which starts from the server's SparkConf, holds
        # the spark.ducklake.* settings the server was started with as well as those set at run time.
        static = {k: str(v) for k, v in spark.conf.getAll.items()}
        static.setdefault(STATIC_REDACTION_CONF, spark.conf.get(STATIC_REDACTION_CONF, STATIC_REDACTION_DEFAULT))
    else:
        static = dict(spark.sparkContext.getConf().getAll())
    found = {k: v for k, v in static.items() if k.lower().startswith(SPARK_CONF_PREFIX)}
    _warn_static_passwords(found, static.get(STATIC_REDACTION_CONF, STATIC_REDACTION_DEFAULT))
    runtime = getattr(spark.conf, "getAll", None)  # a dict in PySpark >= 4.0
    if isinstance(runtime, Mapping):
        found.update({k: v for k, v in runtime.items() if k.lower().startswith(SPARK_CONF_PREFIX)})
    for key in SPARK_CONF_KEYS:  # settings that only the runtime conf lists on some deployments
        value = spark.conf.get(key, None)
        if value is not None:
            found[key] = value
    return canonical_conf({k: str(v) for k, v in found.items()})


OPTIONS_REDACTION_CONF = "spark.sql.redaction.options.regex"
STATIC_REDACTION_CONF = "spark.redaction.regex"
STATIC_REDACTION_DEFAULT = "(?i)secret|password|token|access[.]?key"
# A value holding a URL with a password (scheme://user:password@host): Spark redacts a conf or option whose key or
# value matches its redaction regexes.
URL_PASSWORD_REGEX = r"://[^/\s@:]*:[^/\s@]*@"
# ducklake.azure.account_key / connection_string (and an AccountKey= inside a value): Spark's default patterns
# (secret, password, token, access key) miss them
STORE_SECRET_REGEX = r"(?i)account_?key|connection_?string"
_warned: set[str] = set()


def hide_url_passwords_in_spark_ui(spark: Any) -> None:
    """Add :data:`URL_PASSWORD_REGEX` and :data:`STORE_SECRET_REGEX` to the session's
    ``spark.sql.redaction.options.regex``, so that a catalog URL with a password, or an Azure account key or
    connection string, set as runtime conf (``spark.conf.set``) or option shows as ``*********(redacted)`` in the
    SQL tab of the Spark UI, ``SET`` output and plans. (libpq's ``password=`` is already matched by Spark's default
    ``spark.redaction.regex``.)"""
    current = spark.conf.get(OPTIONS_REDACTION_CONF, None) or "(?i)url"
    if URL_PASSWORD_REGEX not in current:
        current = f"{current}|{URL_PASSWORD_REGEX}"
        spark.conf.set(OPTIONS_REDACTION_CONF, current)
    if STORE_SECRET_REGEX not in current:
        spark.conf.set(OPTIONS_REDACTION_CONF, f"{current}|{STORE_SECRET_REGEX}")


def _warn_static_passwords(conf: Mapping[str, str], static_regex: str) -> None:
    """A password in a URL set when the session was built is in the UI's Environment tab unless the static
    ``spark.redaction.regex`` hides it; say so once, without the password."""
    for key, value in conf.items():
        if key in _warned or not re.search(URL_PASSWORD_REGEX, value):
            continue
        if re.search(_java_to_python(static_regex), key) or re.search(_java_to_python(static_regex), value):
            continue
        _warned.add(key)
        log.warning(
            "Spark conf %s holds a URL with a password: Spark's UI (Environment tab) and event log show it. Set "
            "spark.redaction.regex to include %r when building the session, or give the password through "
            "PGPASSWORD or ~/.pgpass",
            key,
            URL_PASSWORD_REGEX,
        )


def _java_to_python(regex: str) -> str:
    try:
        re.compile(regex)
        return regex
    except re.error:
        return STATIC_REDACTION_DEFAULT
