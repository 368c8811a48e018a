"""The sink as Spark Connect ships it: pickled on the client, run by a copy on the server."""

from __future__ import annotations

import pickle

import pyspark_ducklake as pdl
from pyspark_ducklake.streaming.sink import DuckLakeSink


def test_a_pickled_sink_keeps_its_settings_and_gets_a_lock_of_its_own() -> None:
    sink = pdl.ducklake_sink("main.t", catalog="sqlite:////tmp/x.sqlite", app_id="q1", flush_rows=5)
    assert isinstance(sink, DuckLakeSink)
    copy = pickle.loads(pickle.dumps(sink))
    assert (copy.table, copy.app_id, copy.settings, copy.config_options) == (
        "main.t",
        "q1",
        sink.settings,
        sink.config_options,
    )
    assert copy._lock is not sink._lock and copy._lock.acquire(blocking=False)
    assert copy._committer is None and copy.metrics == []
