"""ducklake.gcs.* / ducklake.azure.* settings: where they come from, which store a lake uses, what a mistake gets."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pyarrow as pa
import pytest

import pyspark_ducklake as pdl
from pyspark_ducklake.exceptions import InvalidOptionError, NotInstalledError
from pyspark_ducklake.io import fileio
from pyspark_ducklake.io.object_stores import duckdb_azure_secret_params, secret_values
from pyspark_ducklake.io.storage import describe_error
from pyspark_ducklake.options import Entry, check_options, check_spark_conf
from pyspark_ducklake.spark.lake_config import LakeConfig
from tests.support.bad_inputs import expect_bad_input

KEY = "c2VjcmV0LWFjY291bnQta2V5"
CONN = f"DefaultEndpointsProtocol=http;AccountName=acct;AccountKey={KEY};BlobEndpoint=http://127.0.0.1:1/acct;"


def test_store_settings_come_from_options_then_conf_and_follow_the_data_path() -> None:
    conf = {
        "spark.ducklake.gcs.endpoint_url": "http://conf:1",
        "spark.ducklake.gcs.project": "conf-project",
        "spark.ducklake.azure.account_name": "acct",
        "spark.ducklake.s3.region": "eu",
    }
    options = {"catalog": "x.sqlite", "DuckLake.GCS.Endpoint_URL": "http://option:2", "ducklake.azure.account_key": KEY}
    gcs = LakeConfig.resolve({**options, "dataPath": "gs://b/lake/"}, conf.get)
    assert gcs.storage_options == {"endpoint_url": "http://option:2", "project": "conf-project"}
    azure = LakeConfig.resolve({**options, "dataPath": "abfss://c@acct.dfs.core.windows.net/lake/"}, conf.get)
    assert azure.storage_options == {"account_name": "acct", "account_key": KEY}
    s3 = LakeConfig.resolve({**options, "dataPath": "s3://b/lake/"}, conf.get)
    assert s3.storage_options == {"client_kwargs": {"region_name": "eu"}}
    # the data path read from the catalog later: the one store configured is the one used
    only = LakeConfig.resolve({"catalog": "x.sqlite", "ducklake.azure.connection_string": CONN})
    assert only.storage_options == {"connection_string": CONN}
    for config in (azure, only):
        assert KEY not in repr(config) and KEY not in str(config)


def test_a_lake_found_in_the_catalog_gets_its_own_stores_settings(tmp_path: Path) -> None:
    """No dataPath given: the catalog's gs:// data path picks the gcs settings, never the s3 ones also configured."""
    catalog = f"sqlite:///{tmp_path / 'c.sqlite'}"
    pdl.connect(catalog, "gs://bucket/lake/").close()
    conf = {"spark.ducklake.s3.region": "eu", "spark.ducklake.gcs.project": "p"}
    lake = LakeConfig.resolve({"catalog": catalog}, conf.get).connect()
    assert lake.storage_options == {"project": "p"}
    lake.close()
    lake = LakeConfig.resolve({"catalog": catalog, "ducklake.s3.region": "eu"}).connect()
    assert lake.storage_options is None  # s3fs arguments would break gcsfs
    lake.close()


def test_misspelt_store_setting_names_the_right_one(tmp_path: Path) -> None:
    lake = pdl.connect(f"sqlite:///{tmp_path / 'c.sqlite'}", str(tmp_path / "data"))
    with expect_bad_input("store-option-misspelt", lake):
        check_options({"ducklake.gcs.endpoint": "http://x"}, Entry.WRITE)
    with expect_bad_input("store-option-misspelt", lake):
        LakeConfig.resolve({"catalog": "x.sqlite", "ducklake.gcs.endpoint": "http://x"})
    with pytest.raises(InvalidOptionError, match=r"unknown option 'ducklake.azure.key'.*ducklake.azure.account_key"):
        LakeConfig.resolve({"catalog": "x.sqlite", "ducklake.azure.key": KEY})
    with pytest.raises(InvalidOptionError, match=r"did you mean 'spark\.ducklake\.azure\.account_key'"):
        check_spark_conf(["spark.ducklake.azure.acount_key"])
    check_spark_conf(["spark.ducklake.azure.account_key", "spark.ducklake.gcs.token"])  # known: accepted
    lake.close()


@pytest.mark.parametrize(("scheme", "module", "extra"), [("gs", "gcsfs", "gcs"), ("az", "adlfs", "azure")])
def test_missing_store_package_names_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, scheme: str, module: str, extra: str
) -> None:
    monkeypatch.setitem(sys.modules, module, None)  # import fails as when not installed
    for protocol in ("gs", "gcs", "az", "abfs", "abfss"):
        monkeypatch.delitem(importlib.import_module("fsspec.registry")._registry, protocol, raising=False)
    monkeypatch.setattr(fileio, "_cache", {})
    lake = pdl.connect(f"sqlite:///{tmp_path / 'c.sqlite'}", f"{scheme}://bucket/lake/")
    lake.create_table("main.t", pa.schema([("id", pa.int64())]))
    if extra == "gcs":
        with expect_bad_input("store-extra-missing", lake):
            lake.append("main.t", pa.table({"id": list(range(100))}))
    else:
        with pytest.raises(NotInstalledError, match=rf"pip install 'pyspark-ducklake\[{extra}\]'"):
            lake.append("main.t", pa.table({"id": list(range(100))}))
        assert lake.current_snapshot_id() == 1  # the table's creation only
    lake.close()


def test_azure_secrets_are_scrubbed_and_handed_to_duckdb(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AZURE_STORAGE_CONNECTION_STRING", raising=False)
    options = {"connection_string": CONN}
    # a store quoting only the key inside the connection string is scrubbed too
    assert KEY in secret_values(options)
    assert describe_error(OSError(f"bad signature for key {KEY}"), options) == "OSError: bad signature for key ***"
    assert duckdb_azure_secret_params(options) == {"CONNECTION_STRING": CONN}
    built = duckdb_azure_secret_params({"account_name": "acct", "account_key": KEY})
    assert built == {
        "CONNECTION_STRING": f"DefaultEndpointsProtocol=https;AccountName=acct;AccountKey={KEY};"
        "EndpointSuffix=core.windows.net"
    }
    assert duckdb_azure_secret_params({"account_name": "acct"}) == {
        "PROVIDER": "credential_chain",
        "ACCOUNT_NAME": "acct",
    }
    monkeypatch.setenv("AZURE_STORAGE_CONNECTION_STRING", CONN)
    assert duckdb_azure_secret_params(None) == {"CONNECTION_STRING": CONN}
    assert describe_error(OSError(f"echo {KEY}")) == "OSError: echo ***"
