"""Google Cloud Storage and Azure Blob / ADLS Gen2 data paths: ``ducklake.gcs.*`` and ``ducklake.azure.*`` settings.

S3 keeps its own module (:mod:`pyspark_ducklake.io.storage`); these two stores follow the same rules: the lake's
data path stays a plain URL (``gs://bucket/prefix/``, ``az://container/prefix/``,
``abfss://container@account.dfs.core.windows.net/prefix/``), and the settings come, first to last, from
``storage_options`` given to ``connect()`` (gcsfs / adlfs arguments), the Spark option ``ducklake.<store>.<name>``,
the Spark conf ``spark.ducklake.<store>.<name>``, and the environment, which gcsfs (``STORAGE_EMULATOR_HOST``,
``GOOGLE_APPLICATION_CREDENTIALS``) and adlfs (``AZURE_STORAGE_*``) read themselves. Secrets never appear in a
message or a ``repr`` (:func:`secret_values` feeds :func:`pyspark_ducklake.io.storage.redact`).
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pyspark_ducklake.exceptions import InvalidOptionError


@dataclass(frozen=True)
class Store:
    """One object store: its URL schemes, its settings (``ducklake.<name>.<setting>``) and the pip extra."""

    name: str
    protocols: tuple[str, ...]
    settings: tuple[str, ...]  # each is also the fsspec implementation's keyword argument
    secrets: tuple[str, ...]
    secret_env: tuple[str, ...]  # environment variables the fsspec implementation reads that hold secrets
    extra: str

    @property
    def option_prefix(self) -> str:
        return f"ducklake.{self.name}."

    @property
    def conf_prefix(self) -> str:
        return f"spark.ducklake.{self.name}."


GCS = Store(
    "gcs",
    ("gs", "gcs"),
    ("endpoint_url", "project", "token"),
    ("token",),
    (),
    "gcs",
)
AZURE = Store(
    "azure",
    ("az", "abfs", "abfss"),
    ("account_name", "account_key", "connection_string", "sas_token", "tenant_id", "client_id", "client_secret"),
    ("account_key", "connection_string", "sas_token", "client_secret"),
    (
        "AZURE_STORAGE_ACCOUNT_KEY",
        "AZURE_STORAGE_CONNECTION_STRING",
        "AZURE_STORAGE_SAS_TOKEN",
        "AZURE_STORAGE_CLIENT_SECRET",
    ),
    "azure",
)
STORES = (GCS, AZURE)
CONF_KEYS = tuple(store.conf_prefix + name for store in STORES for name in store.settings)


def store_of(path: str | None) -> Store | None:
    """The store of a data path's URL scheme; None for a local path or another scheme (S3 included)."""
    if not path or "://" not in path:
        return None
    protocol = path.split("://", 1)[0].lower()
    return next((s for s in STORES if protocol in s.protocols), None)


def store_of_option(key: str) -> Store | None:
    """The store whose ``ducklake.<store>.`` prefix ``key`` starts with (case-insensitive)."""
    lower = key.lower()
    return next((s for s in STORES if lower.startswith(s.option_prefix)), None)


def unknown_setting_error(key: str, store: Store, where: str = "", hint: str = "") -> InvalidOptionError:
    names = ", ".join(store.option_prefix + n for n in store.settings)
    if not hint:
        close = difflib.get_close_matches(key.lower(), [store.option_prefix + n for n in store.settings], n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
    # hint: "; did you mean '...'?" or empty
    return InvalidOptionError(f"unknown option {key!r}{where}{hint or ';'} the {store.name} options are {names}")


def settings_from_options(
    options: Mapping[str, str], spark_conf: Callable[[str], str | None] | None = None
) -> dict[str, dict[str, str]]:
    """The ``ducklake.gcs.*`` / ``ducklake.azure.*`` settings of Spark options (case-insensitive), over those of the
    Spark conf, by store name.

    Raises:
        InvalidOptionError: an unknown setting name (the message lists the store's settings).
    """
    out: dict[str, dict[str, str]] = {}
    if spark_conf is not None:
        for store in STORES:
            for name in store.settings:
                value = spark_conf(store.conf_prefix + name)
                if value:
                    out.setdefault(store.name, {})[name] = str(value)
    for key, value in options.items():
        found = store_of_option(key)
        if found is None:
            continue
        name = key[len(found.option_prefix) :].lower()
        if name not in found.settings:
            raise unknown_setting_error(key, found)
        if value:
            out.setdefault(found.name, {})[name] = str(value)
    return out


def fsspec_options(settings: Mapping[str, str]) -> dict[str, Any]:
    """Settings of one store as its fsspec implementation's arguments (the names are the same)."""
    return {name: value for name, value in settings.items() if value}


def secret_values(options: Mapping[str, Any] | None) -> list[str]:
    """Every secret in gcsfs / adlfs ``options`` and in the Azure environment, the account key inside a connection
    string included (a store's error may quote it alone)."""
    values: list[str] = []
    secret_names = {n for s in STORES for n in s.secrets}
    for key, value in (options or {}).items():
        if key in secret_names and isinstance(value, str) and value:
            values.append(value)
    values += [os.environ[v] for s in STORES for v in s.secret_env if os.environ.get(v)]
    for text in list(values):
        values += re.findall(r"(?i)(?:AccountKey|SharedAccessSignature)=([^;]+)", text)
    return values


def open_filesystem(protocol: str, options: Mapping[str, Any]) -> Any:
    """gcsfs / adlfs filesystem for ``protocol``, or None to let fsspec choose.

    gcsfs >= 2025 probes every bucket over gRPC for Google's zonal / hierarchical buckets, which a custom endpoint
    (an emulator, a proxy) does not serve: each probe waits 60 s. With ``endpoint_url`` (or
    ``STORAGE_EMULATOR_HOST``) set the plain JSON-API filesystem is used instead.
    """
    if protocol in GCS.protocols and (options.get("endpoint_url") or os.environ.get("STORAGE_EMULATOR_HOST")):
        from gcsfs.core import GCSFileSystem

        return GCSFileSystem(**options)
    return None


def duckdb_azure_secret_params(options: Mapping[str, Any] | None) -> dict[str, str]:
    """adlfs ``options`` (else ``AZURE_STORAGE_*``) as the parameters of DuckDB's ``CREATE SECRET (TYPE azure)``: a
    connection string, given or built from an account name and key; else the account name for DuckDB's credential
    chain (``az login``, managed identity, environment)."""
    opts = dict(options or {})
    for name, variable in (
        ("connection_string", "AZURE_STORAGE_CONNECTION_STRING"),
        ("account_name", "AZURE_STORAGE_ACCOUNT_NAME"),
        ("account_key", "AZURE_STORAGE_ACCOUNT_KEY"),
    ):
        if not opts.get(name) and os.environ.get(variable):
            opts[name] = os.environ[variable]
    if opts.get("connection_string"):
        return {"CONNECTION_STRING": str(opts["connection_string"])}
    if opts.get("account_name") and opts.get("account_key"):
        return {
            "CONNECTION_STRING": f"DefaultEndpointsProtocol=https;AccountName={opts['account_name']};"
            f"AccountKey={opts['account_key']};EndpointSuffix=core.windows.net"
        }
    if opts.get("account_name"):
        return {"PROVIDER": "credential_chain", "ACCOUNT_NAME": str(opts["account_name"])}
    return {}
