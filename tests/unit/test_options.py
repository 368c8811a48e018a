"""Lake configuration resolves options, then Spark conf, then the environment."""

from __future__ import annotations

import pytest

from pyspark_ducklake.exceptions import InvalidOptionError, LakeNotConfiguredError
from pyspark_ducklake.options import LakeConfig


def conf(values: dict[str, str]):
    return values.get


def test_precedence() -> None:
    env = {"DUCKLAKE_CATALOG": "sqlite:///env.sqlite", "DUCKLAKE_DATA_PATH": "/env"}
    spark = {"spark.ducklake.catalog": "sqlite:///conf.sqlite", "spark.ducklake.dataPath": "/conf"}
    assert LakeConfig.resolve({}, conf({}), env).catalog == "sqlite:///env.sqlite"
    assert LakeConfig.resolve({}, conf(spark), env).catalog == "sqlite:///conf.sqlite"
    c = LakeConfig.resolve({"catalog": "sqlite:///opt.sqlite", "datapath": "/opt"}, conf(spark), env)
    assert (c.catalog, c.data_path) == ("sqlite:///opt.sqlite", "/opt")
    assert LakeConfig.resolve({}, conf(spark), env).data_path == "/conf"


def test_missing_catalog_says_how_to_set_it() -> None:
    with pytest.raises(LakeNotConfiguredError, match=r"spark\.ducklake\.catalog.*DUCKLAKE_CATALOG"):
        LakeConfig.resolve({}, conf({}), {})


@pytest.mark.parametrize(
    ("key", "value"),
    [("max_retry_count", "ten"), ("retry_wait_ms", "-1"), ("retry_backoff", "fast"), ("data_inlining_row_limit", "x")],
)
def test_unparseable_values_name_key_and_value(key: str, value: str) -> None:
    with pytest.raises(InvalidOptionError, match=key):
        LakeConfig.resolve({"catalog": "sqlite:///x.sqlite", key: value}, None, {})


def test_retry_options_parse() -> None:
    c = LakeConfig.resolve(
        {"catalog": "c", "MAX_RETRY_COUNT": "3", "retry_wait_ms": "7", "retry_backoff": "2"}, None, {}
    )
    assert (c.retry.max_retry_count, c.retry.retry_wait_ms, c.retry.retry_backoff) == (3, 7, 2.0)


@pytest.mark.parametrize(
    "catalog",
    [
        "postgresql://writer:s3cretpw@db.example/lake",
        "ducklake:postgres:dbname=lake host=db.example password=s3cretpw",
        "nonsense://writer:s3cretpw@db.example",
    ],
)
def test_lake_config_repr_hides_the_catalog_password(catalog: str) -> None:
    config = LakeConfig.resolve({"catalog": catalog})
    assert "s3cretpw" not in repr(config)
    assert "***" in repr(config)
    assert config.catalog == catalog  # the real value is still there to connect with
