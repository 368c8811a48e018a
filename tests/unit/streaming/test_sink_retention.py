"""A sink's retention options: off unless asked for, parsed once when the sink is made, bad values refused there."""

from __future__ import annotations

import datetime as dt
import pickle
from typing import Any

import pytest

import pyspark_ducklake as pdl
from pyspark_ducklake.exceptions import InvalidOptionError
from pyspark_ducklake.streaming.write_stream import sink_settings
from pyspark_ducklake.table.maintenance.retention import RetentionSpec


def test_retention_is_off_unless_asked_for() -> None:
    assert pdl.ducklake_sink("main.t").settings.retention is None  # type: ignore[attr-defined]
    sink: Any = pdl.ducklake_sink("main.t", expire_older_than="7 days", delete_older_than="1 day")
    assert sink.settings.retention == RetentionSpec(3600.0, dt.timedelta(days=7), dt.timedelta(days=1))
    assert pickle.loads(pickle.dumps(sink)).settings.retention == sink.settings.retention
    sink = pdl.ducklake_sink("main.t", retention_interval="10 min")  # the lake's settings apply
    assert sink.settings.retention == RetentionSpec(600.0, None, None)
    spark = sink_settings({"expire_older_than": "2 hours", "retention_interval": "60"}, None)
    assert spark.retention == RetentionSpec(60.0, dt.timedelta(hours=2), None)


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"expire_older_than": "7"}, "could not parse option expire_older_than as an interval"),
        ({"expire_older_than": "-1 day"}, "could not parse option expire_older_than"),
        ({"retention_interval": "soon"}, "could not parse option retention_interval"),
        ({"delete_older_than": "1 day"}, "give expire_older_than or retention_interval too"),
        ({"expire_older_thn": "1 day"}, "expire_older_than"),
    ],
)
def test_bad_retention_options_are_refused(kw: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidOptionError, match=message):
        pdl.ducklake_sink("main.t", **kw)
