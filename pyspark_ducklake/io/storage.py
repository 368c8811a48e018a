"""Object-store settings: ``ducklake.s3.*`` options and the usual AWS variables, as fsspec (s3fs) options.

A lake's data path stays a plain ``s3://bucket/prefix/`` (DuckDB reads the same catalog); where the bucket is and
how to sign in come from, first to last: ``storage_options`` given to ``connect()`` (s3fs arguments), the Spark
option ``ducklake.s3.<name>``, the Spark conf ``spark.ducklake.s3.<name>``, the environment (``AWS_*``). Secrets
never leave this process's memory except to executors: no log line, error message or ``repr`` shows them and
nothing is stored in the catalog (:func:`redact` scrubs error texts from the store).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

from pyspark_ducklake.exceptions import InvalidOptionError
from pyspark_ducklake.io.object_stores import secret_values

S3_PROTOCOLS = ("s3", "s3a")
OPTION_PREFIX = "ducklake.s3."
CONF_PREFIX = "spark.ducklake.s3."

# ducklake.s3.<name> -> environment variables read when the option is not given (first set wins)
S3_SETTINGS: dict[str, tuple[str, ...]] = {
    "access_key_id": ("AWS_ACCESS_KEY_ID",),
    "secret_access_key": ("AWS_SECRET_ACCESS_KEY",),
    "session_token": ("AWS_SESSION_TOKEN",),
    "endpoint_url": ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"),
    "region": ("AWS_REGION", "AWS_DEFAULT_REGION"),
    "url_style": (),
}
SECRET_SETTINGS = ("secret_access_key", "session_token")
CONF_KEYS = tuple(CONF_PREFIX + name for name in S3_SETTINGS)
_CREDENTIAL_KWARGS = ("key", "secret", "token", "profile", "anon", "session")
_URL_STYLES = {"path": "path", "vhost": "virtual"}


def s3_settings_from_options(
    options: Mapping[str, str], spark_conf: Callable[[str], str | None] | None = None
) -> dict[str, str]:
    """The ``ducklake.s3.*`` settings of Spark options (case-insensitive), then of the Spark conf.

    Raises:
        InvalidOptionError: an unknown ``ducklake.s3.*`` name (the message lists the known ones).
    """
    out: dict[str, str] = {}
    if spark_conf is not None:
        for name in S3_SETTINGS:
            value = spark_conf(CONF_PREFIX + name)
            if value:
                out[name] = str(value)
    for key, value in options.items():
        if not key.lower().startswith(OPTION_PREFIX):
            continue
        name = key[len(OPTION_PREFIX) :].lower()
        if name not in S3_SETTINGS:
            raise InvalidOptionError(
                f"unknown option {key!r}; the object-store options are "
                f"{', '.join(OPTION_PREFIX + n for n in S3_SETTINGS)}"
            )
        if value:
            out[name] = str(value)
    return out


def s3_settings_from_env(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The ``AWS_*`` variables as ``ducklake.s3.*`` settings."""
    env = os.environ if environ is None else environ
    out: dict[str, str] = {}
    for name, variables in S3_SETTINGS.items():
        for var in variables:
            if env.get(var):
                out[name] = env[var]
                break
    return out


def s3fs_options(settings: Mapping[str, str]) -> dict[str, Any]:
    """``ducklake.s3.*`` settings as ``s3fs.S3FileSystem`` arguments.

    Raises:
        InvalidOptionError: ``url_style`` other than ``path`` or ``vhost``.
    """
    out: dict[str, Any] = {}
    for name, kwarg in (("access_key_id", "key"), ("secret_access_key", "secret"), ("session_token", "token")):
        if settings.get(name):
            out[kwarg] = settings[name]
    if settings.get("endpoint_url"):
        out["endpoint_url"] = settings["endpoint_url"]
    if settings.get("region"):
        out["client_kwargs"] = {"region_name": settings["region"]}
    style = settings.get("url_style")
    if style:
        if style.lower() not in _URL_STYLES:
            raise InvalidOptionError(f"option {OPTION_PREFIX}url_style must be 'path' or 'vhost', got {style!r}")
        out["config_kwargs"] = {"s3": {"addressing_style": _URL_STYLES[style.lower()]}}
    return out


def with_env_defaults(options: Mapping[str, Any], environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """s3fs ``options`` completed from the ``AWS_*`` variables: credentials only when none were given."""
    env = s3fs_options(s3_settings_from_env(environ))
    out = dict(options)
    if any(k in out for k in _CREDENTIAL_KWARGS):
        for k in ("key", "secret", "token"):
            env.pop(k, None)
    for key, value in env.items():
        if key == "client_kwargs":
            merged = dict(value)
            merged.update(out.get("client_kwargs") or {})
            out["client_kwargs"] = merged
        else:
            out.setdefault(key, value)
    return out


def secrets_of(options: Mapping[str, Any] | None) -> list[str]:
    """Every secret value in s3fs ``options`` and the environment, to scrub from texts."""
    values = [str(v) for k, v in (options or {}).items() if k in ("secret", "token") and v]
    env = s3_settings_from_env()
    values += [env[name] for name in SECRET_SETTINGS if env.get(name)]
    values += secret_values(options)
    return [v for v in values if len(v) >= 4]


def redact(text: str, options: Mapping[str, Any] | None = None) -> str:
    """``text`` with every secret of ``options`` (and of the environment) replaced by ``***``."""
    for secret in secrets_of(options):
        text = text.replace(secret, "***")
    return text


def describe_error(error: BaseException, options: Mapping[str, Any] | None = None) -> str:
    """``Class: message`` of a storage error, secrets scrubbed."""
    return redact(f"{type(error).__name__}: {error}", options)


def scrubbed(error: BaseException, options: Mapping[str, Any] | None = None) -> BaseException:
    """``error`` to chain (``raise ... from``) under our own error: itself, or, when its text or a cause's holds a
    secret (gcsfs puts a raw OAuth token in the URL it reports), a bare ``OSError`` with the text scrubbed, so that no
    printed traceback shows the secret."""
    secrets = secrets_of(options)
    texts: list[str] = []
    seen: set[int] = set()
    e: BaseException | None = error
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        texts.append(str(e))
        e = e.__cause__ or e.__context__
    if any(secret in text for secret in secrets for text in texts):
        return OSError(describe_error(error, options))
    return error


def duckdb_secret_params(options: Mapping[str, Any] | None) -> dict[str, str]:
    """s3fs ``options`` (completed from the environment) as the parameters of DuckDB's ``CREATE SECRET (TYPE s3)``.

    A custom endpoint without ``url_style`` is addressed path-style (as MinIO and most S3-compatible servers
    expect); the endpoint's scheme sets ``USE_SSL``.
    """
    opts = with_env_defaults(options or {})
    out: dict[str, str] = {}
    for kwarg, param in (("key", "KEY_ID"), ("secret", "SECRET"), ("token", "SESSION_TOKEN")):
        if opts.get(kwarg):
            out[param] = str(opts[kwarg])
    region = (opts.get("client_kwargs") or {}).get("region_name")
    if region:
        out["REGION"] = str(region)
    style = ((opts.get("config_kwargs") or {}).get("s3") or {}).get("addressing_style")
    endpoint = opts.get("endpoint_url")
    if endpoint:
        scheme, _, host = str(endpoint).rpartition("://")
        out["ENDPOINT"] = host.rstrip("/")
        out["USE_SSL"] = "false" if scheme == "http" else "true"
        style = style or "path"
    if style:
        out["URL_STYLE"] = "path" if style == "path" else "vhost"
    return out
