"""Lake configuration resolves options, then Spark conf, then the environment."""

from __future__ import annotations

import pytest

from pyspark_ducklake.exceptions import InvalidOptionError, LakeNotConfiguredError
from pyspark_ducklake.spark.lake_config import LakeConfig


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


# --- the registry: unknown names, one parser per kind, README tables ----------------------------------------------

import ast  # noqa: E402
import datetime as dt  # noqa: E402
import math  # noqa: E402
from pathlib import Path  # noqa: E402

import pyarrow as pa  # noqa: E402

import pyspark_ducklake as pdl  # noqa: E402
from pyspark_ducklake import options as O  # noqa: E402
from pyspark_ducklake.options import Entry, check_options, check_spark_conf  # noqa: E402
from tests.support.bad_inputs import accepted_input, expect_bad_input  # noqa: E402
from tests.support.option_tables import stale_sections  # noqa: E402


def test_docs_option_tables_are_rendered_from_the_registry() -> None:
    assert stale_sections() == [], "docs are stale: run python -m tests.support.option_tables --write"


def test_options_module_imports_nothing_above_it() -> None:
    tree = ast.parse(Path(O.__file__).read_text())
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    imported |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    ours = {m for m in imported if m.startswith("pyspark_ducklake")}
    assert ours <= {
        "pyspark_ducklake.exceptions",
        "pyspark_ducklake.io.storage",
        "pyspark_ducklake.io.object_stores",
        "pyspark_ducklake.catalog.format_version",  # plain values, no SQL
        "pyspark_ducklake.catalog.partition_keys",  # text splitting, no SQL
    }, ours
    assert not any(m.split(".")[0] in ("pyspark", "sqlalchemy") for m in imported)


def test_every_spelling_is_unique_per_entry_and_documented() -> None:
    for entry in Entry:
        seen: set[str] = set()
        for option in O.options_for(entry):
            for spelling in option.spellings:
                assert spelling.lower() not in seen, (entry, spelling)
                seen.add(spelling.lower())
            assert option.section is None or option.doc, option.name


@pytest.mark.parametrize(
    ("entry", "given", "suggested"),
    [
        (Entry.READ, "versionAsOff", "versionAsOf"),
        (Entry.READ, "endingTimestmp", "endingTimestamp"),
        (Entry.READ, "timestampasof ", "timestampAsOf"),
        (Entry.STREAM_READ, "maxSnapshotPerTrigger", "maxSnapshotsPerTrigger"),
        (Entry.WRITE, "targetFileRow", "targetFileRows"),
        (Entry.STREAM_WRITE, "flushrows", "flush_rows"),
        (Entry.SINK, "creat_table", "create_table"),
        (Entry.WRITE, "ducklake.s3.regoin", "ducklake.s3.region"),
    ],
)
def test_unknown_options_name_the_closest_valid_one(entry: Entry, given: str, suggested: str) -> None:
    with expect_bad_input("option-unknown") as err:
        check_options({given: "1"}, entry)
    assert f"did you mean {suggested!r}" in str(err.value)


def test_misspelt_sink_argument_is_rejected_with_the_closest_name() -> None:
    with expect_bad_input("option-unknown") as err:
        pdl.ducklake_sink("main.t", creat_table=False)
    assert "did you mean 'create_table'" in str(err.value)
    with pytest.raises(InvalidOptionError, match="did you mean 'snapshot'"):
        pdl.read_table(object(), "main.t", snapshott=3)


def test_misspelt_spark_conf_key_names_the_closest_valid_one() -> None:
    with expect_bad_input("option-unknown") as err:
        check_spark_conf(["spark.ducklake.catalog", "spark.ducklake.datapth"])
    assert "did you mean 'spark.ducklake.dataPath'" in str(err.value)
    check_spark_conf(["spark.ducklake.DATAPATH", "spark.ducklake.s3.region", "spark.sql.shuffle.partitions"])
    assert O.canonical_conf({"spark.ducklake.datapath": "/x"}) == {"spark.ducklake.dataPath": "/x"}


@pytest.mark.parametrize(
    ("entry", "given"),
    [
        (Entry.READ, "maxSnapshotsPerTrigger"),
        (Entry.WRITE, "snapshot"),
        (Entry.WRITE, "startingSnapshot"),
        (Entry.READ, "flush_rows"),
        (Entry.SINK, "versionAsOf"),
    ],
)
def test_options_of_another_entry_point_are_rejected(entry: Entry, given: str) -> None:
    with expect_bad_input("option-wrong-entry"):
        check_options({given: "1"}, entry)


def test_spark_adds_path_and_checkpoint_location_which_are_accepted() -> None:
    check_options({"path": "main.t", "catalog": "c"}, Entry.READ)
    check_options({"path": "main.t", "checkpointlocation": "/ck"}, Entry.STREAM_WRITE)


def test_one_option_under_two_spellings_is_rejected() -> None:
    with expect_bad_input("option-twice"):
        check_options({"snapshot": "1", "versionAsOf": "2"}, Entry.READ)
    with expect_bad_input("option-twice"):
        check_options({"partitionBy": "k", "partition_by": "k"}, Entry.STREAM_WRITE)


@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda: pdl.ducklake_sink("main.t", flush_interval=float("nan")), "flush_interval"),
        (lambda: pdl.ducklake_sink("main.t", flush_interval=math.inf), "flush_interval"),
        (lambda: pdl.ducklake_sink("main.t", retry_backoff=float("nan")), "retry_backoff"),
        (lambda: pdl.ducklake_sink("main.t", reconnect_timeout="nan"), "reconnect_timeout"),
        (lambda: LakeConfig.resolve({"catalog": "x.sqlite", "retry_backoff": "NaN"}), "retry_backoff"),
        (lambda: LakeConfig.resolve({"catalog": "x.sqlite", "retry_backoff": "inf"}), "retry_backoff"),
        (lambda: check_options({"flush_interval": "-inf"}, Entry.STREAM_WRITE), "flush_interval"),
    ],
)
def test_nan_and_infinite_thresholds_are_rejected(call, name: str) -> None:
    with expect_bad_input("option-not-finite") as err:
        call()
    assert name in str(err.value)


def test_nan_retry_backoff_is_rejected_by_connect(tmp_path: Path) -> None:
    with expect_bad_input("option-not-finite", watch=[tmp_path]):
        pdl.connect(f"sqlite:///{tmp_path}/c.sqlite", str(tmp_path / "data"), retry_backoff=float("nan"))


def test_negative_durations_and_sizes_are_rejected() -> None:
    for given in ({"flush_interval": "-1"}, {"flush_bytes": -5}, {"flush_bytes": "0"}, {"flush_rows": "-1"}):
        with expect_bad_input("option-out-of-range") as err:
            check_options(given, Entry.STREAM_WRITE)
        assert next(iter(given)) in str(err.value)


def test_false_as_a_string_means_false_everywhere() -> None:
    accepted_input("option-bool-strings")
    sink = pdl.ducklake_sink("main.t", create_table="false", merge_schema="TRUE", flush_interval="5 min")
    assert sink.settings.create_table is False  # type: ignore[attr-defined]
    assert sink.settings.merge_schema is True  # type: ignore[attr-defined]
    assert sink.settings.flush_interval == 300.0  # type: ignore[attr-defined]
    for text, value in (("false", False), ("FALSE", False), ("no", False), ("0", False), (" off ", False)):
        assert O.parse_bool(text, "x") is value
    for text in ("true", "True", "yes", "1", "on"):
        assert O.parse_bool(text, "x") is True
    for bad in ("", "fals", "2", "none", 2, 1.0):
        with pytest.raises(InvalidOptionError, match="as a boolean"):
            O.parse_bool(bad, "x")
    parsed = check_options({"failOnDataLoss": "FALSE", "readChangeFeed": "no"}, Entry.STREAM_READ)
    assert parsed == {"failOnDataLoss": False, "readChangeFeed": False}


def test_numbers_given_as_strings_to_connect_parse(tmp_path: Path) -> None:
    lake = pdl.connect(
        f"sqlite:///{tmp_path}/c.sqlite",
        str(tmp_path / "data"),
        max_retry_count="3",
        retry_backoff="2",
        reconnect_timeout="1 min",
        data_inlining_row_limit="0",
    )
    assert (lake.retry.max_retry_count, lake.retry.retry_backoff, lake.retry.reconnect_timeout) == (3, 2.0, 60.0)
    lake.create_table("main.t", pa.schema([("id", pa.int64())]))
    lake.append("main.t", pa.table({"id": [1]}))  # limit 0: a Parquet file, not inlined
    assert list((tmp_path / "data").rglob("*.parquet"))
    with pytest.raises(InvalidOptionError, match="to an integer"):
        pdl.connect(f"sqlite:///{tmp_path}/c.sqlite", max_retry_count=True)


@pytest.mark.parametrize(
    ("text", "size"),
    [("512MB", 512_000_000), ("512MiB", 512 * 2**20), ("1.5 GB", 1_500_000_000), ("10", 10), (64, 64)],
)
def test_sizes(text: object, size: int) -> None:
    assert O.parse_size(text, "x") == size


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("300", 300.0), (2.5, 2.5), ("5 min", 300.0), ("1 hour 30 minutes", 5400.0), ("250ms", 0.25)],
)
def test_durations(text: object, seconds: float) -> None:
    assert O.parse_seconds(text, "x") == seconds
    assert O.parse_seconds(dt.timedelta(seconds=seconds), "x") == seconds


def test_partition_keys_split_at_top_level_commas_only() -> None:
    from pyspark_ducklake.options import parse_keys

    assert parse_keys('k, bucket(4, id), "a,b", year(ts),', "partition_by") == (
        "k",
        "bucket(4, id)",
        '"a,b"',
        "year(ts)",
    )
    assert parse_keys(["bucket(4, id)", " k "], "partition_by") == ("bucket(4, id)", "k")
