"""Options: parsed once, at the edge, into frozen dataclasses; errors name the option and the value."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pyspark_ducklake.catalog.location import redact_location
from pyspark_ducklake.catalog.transaction import RetryConfig
from pyspark_ducklake.exceptions import InvalidOptionError, LakeNotConfiguredError
from pyspark_ducklake.io.storage import CONF_KEYS as S3_CONF_KEYS
from pyspark_ducklake.io.storage import s3_settings_from_options, s3fs_options

CATALOG = "catalog"
DATA_PATH = "dataPath"
DATA_INLINING_ROW_LIMIT = "data_inlining_row_limit"
MAX_RETRY_COUNT = "max_retry_count"
RETRY_WAIT_MS = "retry_wait_ms"
RETRY_BACKOFF = "retry_backoff"
RECONNECT_TIMEOUT = "reconnect_timeout"

SPARK_CONF_CATALOG = "spark.ducklake.catalog"
SPARK_CONF_DATA_PATH = "spark.ducklake.dataPath"
ENV_CATALOG = "DUCKLAKE_CATALOG"
ENV_DATA_PATH = "DUCKLAKE_DATA_PATH"
# Spark conf keys a lake reads: where it is and the object-store settings (spark.ducklake.s3.*).
SPARK_CONF_KEYS = (SPARK_CONF_CATALOG, SPARK_CONF_DATA_PATH, *S3_CONF_KEYS)


def _get(options: Mapping[str, str], key: str) -> str | None:
    """Case-insensitive lookup: Spark lowercases option keys."""
    if key in options:
        return options[key]
    lower = key.lower()
    for k, v in options.items():
        if k.lower() == lower:
            return v
    return None


def option_as_int(
    options: Mapping[str, str], key: str, default: int | None, *, minimum: int | None = None
) -> int | None:
    raw = _get(options, key)
    if raw is None:
        return default
    try:
        value = int(str(raw).strip())
    except ValueError as e:
        raise InvalidOptionError(f"could not parse option {key} to an integer: {raw!r}") from e
    if minimum is not None and value < minimum:
        raise InvalidOptionError(f"option {key} must be >= {minimum}, got {value}")
    return value


def option_as_float(options: Mapping[str, str], key: str, default: float) -> float:
    raw = _get(options, key)
    if raw is None:
        return default
    try:
        return float(str(raw).strip())
    except ValueError as e:
        raise InvalidOptionError(f"could not parse option {key} to a number: {raw!r}") from e


def option_as_bool(options: Mapping[str, str], key: str, default: bool) -> bool:
    raw = _get(options, key)
    if raw is None:
        return default
    text = str(raw).strip().lower()
    if text in ("true", "1", "yes"):
        return True
    if text in ("false", "0", "no"):
        return False
    raise InvalidOptionError(f"could not parse option {key} to a boolean (true/false): {raw!r}")


def retry_config(options: Mapping[str, str]) -> RetryConfig:
    d = RetryConfig()
    return RetryConfig(
        max_retry_count=option_as_int(options, MAX_RETRY_COUNT, d.max_retry_count, minimum=0) or 0,
        retry_wait_ms=option_as_int(options, RETRY_WAIT_MS, d.retry_wait_ms, minimum=0) or 0,
        retry_backoff=option_as_float(options, RETRY_BACKOFF, d.retry_backoff),
        reconnect_timeout=option_as_float(options, RECONNECT_TIMEOUT, d.reconnect_timeout),
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

    def __repr__(self) -> str:
        # the catalog URL may carry a password and the s3 settings secrets: neither appears
        return (
            f"LakeConfig(catalog={redact_location(self.catalog)!r}, data_path={self.data_path!r}, "
            f"data_inlining_row_limit={self.data_inlining_row_limit!r}, retry={self.retry!r}, "
            f"catalog_source={self.catalog_source!r})"
        )

    @property
    def storage_options(self) -> dict[str, Any] | None:
        """fsspec (s3fs) options for the data path; the environment's ``AWS_*`` fill in what is not set."""
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
        catalog, source = _get(options, CATALOG), "option 'catalog'"
        if not catalog:
            catalog, source = conf(SPARK_CONF_CATALOG), f"Spark conf {SPARK_CONF_CATALOG}"
        if not catalog:
            catalog, source = env.get(ENV_CATALOG), f"environment {ENV_CATALOG}"
        if not catalog:
            raise LakeNotConfiguredError(
                "no DuckLake catalog configured: pass .option('catalog', 'sqlite:///lake.sqlite'), or set the Spark "
                f"conf {SPARK_CONF_CATALOG}, or the environment variable {ENV_CATALOG} "
                "(SQLAlchemy URL or DuckDB spelling such as 'ducklake:sqlite:lake.sqlite')"
            )
        data_path = _get(options, DATA_PATH) or conf(SPARK_CONF_DATA_PATH) or env.get(ENV_DATA_PATH)
        return cls(
            catalog=catalog,
            data_path=data_path,
            data_inlining_row_limit=option_as_int(options, DATA_INLINING_ROW_LIMIT, None, minimum=0),
            retry=retry_config(options),
            catalog_source=source,
            s3=_s3_settings(options, conf),
        )

    def connect(self, **kwargs: Any) -> Any:
        from pyspark_ducklake.lake import Lake

        settings: dict[str, Any] = {
            "data_inlining_row_limit": self.data_inlining_row_limit,
            "retry": self.retry,
            "storage_options": self.storage_options,
        }
        return Lake(self.catalog, self.data_path, **{**settings, **kwargs})
