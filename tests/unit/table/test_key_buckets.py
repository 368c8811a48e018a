"""Hash buckets of upsert keys: keys DuckDB finds equal share a bucket, in every process; ranges stay bounded."""

from __future__ import annotations

import datetime as dt
import decimal
import itertools
import subprocess
import sys
import uuid

import numpy as np
import pyarrow as pa
from hypothesis import given
from hypothesis import strategies as st

from pyspark_ducklake.table.key_buckets import BUCKETS, bucket_ranges, key_buckets, key_hash
from pyspark_ducklake.table.upsert import key_table


def hashes(columns: dict[str, pa.Array]) -> list[int]:
    t = pa.table(columns)
    return key_hash(key_table(t, list(columns))).tolist()


def test_equal_keys_share_a_hash_whatever_their_encoding() -> None:
    nan, neg = float("nan"), -0.0
    assert hashes({"f": pa.array([nan, 0.0])}) == hashes({"f": pa.array([float("-nan"), neg])})
    plain = hashes({"s": pa.array(["a", "é", ""]), "i": pa.array([1, 2, 3], pa.int32())})
    dictionary = hashes({"s": pa.array(["a", "é", ""]).dictionary_encode(), "i": pa.array([1, 2, 3], pa.int32())})
    assert plain == dictionary
    sliced = pa.array(["x", "a", "é", ""]).slice(1)  # an array with an offset
    assert hashes({"s": sliced, "i": pa.array([1, 2, 3], pa.int32())}) == plain


def test_every_key_type_hashes_and_unequal_keys_differ() -> None:
    columns = {
        "b": pa.array([True, False]),
        "d": pa.array([decimal.Decimal("1.50"), decimal.Decimal("-1.50")], pa.decimal128(18, 2)),
        "day": pa.array([dt.date(1, 1, 1), dt.date(9999, 12, 31)]),
        "ts": pa.array([dt.datetime(2026, 1, 1), dt.datetime(2026, 1, 1, 0, 0, 1)], pa.timestamp("us")),
        "t": pa.array([dt.time(1), dt.time(2)], pa.time64("us")),
        "bin": pa.array([b"\x00", b"\x00\x00"]),
        "u": pa.array([uuid.UUID(int=1).bytes, uuid.UUID(int=2).bytes], pa.binary(16)),
        "iv": pa.array([(1, 2, 3), (1, 2, 4)], pa.month_day_nano_interval()),
    }
    for name, values in columns.items():
        a, b = hashes({name: values})
        assert a != b, name


def test_the_hash_is_the_same_in_another_process() -> None:
    code = (
        "import pyarrow as pa; from pyspark_ducklake.table.key_buckets import key_hash; "
        "from pyspark_ducklake.table.upsert import key_table; "
        "print(key_hash(key_table(pa.table({'s': ['a', 'b'], 'i': [1, 2]}), ['s', 'i'])).tolist())"
    )
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert other.strip() == str(hashes({"s": pa.array(["a", "b"]), "i": pa.array([1, 2])}))


@given(
    st.lists(st.integers(min_value=0, max_value=50), min_size=1, max_size=200), st.integers(min_value=1, max_value=80)
)
def test_ranges_cover_every_bucket_once_and_hold_at_most_the_limit(counts: list[int], most: int) -> None:
    full = np.zeros(BUCKETS, dtype=np.int64)
    full[: len(counts)] = counts
    ranges = bucket_ranges(full, most)
    assert ranges[0][0] == 0 and ranges[-1][1] == BUCKETS - 1
    assert all(b[0] == a[1] + 1 for a, b in itertools.pairwise(ranges))
    for first, last in ranges:
        held = int(full[first : last + 1].sum())
        assert held <= most or first == last or int(full[first:last].sum()) == 0


def test_buckets_spread_keys() -> None:
    buckets = key_buckets(key_table(pa.table({"id": np.arange(100_000, dtype=np.int64)}), ["id"]))
    counts = np.bincount(buckets, minlength=BUCKETS)
    assert counts.min() > 0 and counts.max() < 3 * 100_000 / BUCKETS
