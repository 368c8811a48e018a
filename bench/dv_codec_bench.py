"""Deletion-vector codec: our numpy Roaring encoder/decoder against pyroaring's BitMap64 on 10M positions.

``python bench/dv_codec_bench.py`` prints the median of 5 runs for each shape: every other row of 20M (all bitmap
containers), 10M random rows of 100M (bitmaps), and 10M rows in one run (bitmaps; DuckDB writes no run containers).
pyroaring's times include turning the bitmap into a numpy array, which every reader of the positions needs.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import numpy as np

from pyspark_ducklake.io.deletion_vector import decode, encode


def timed(fn: Callable[[], object], runs: int = 5) -> float:
    out = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return statistics.median(out)


def main() -> None:
    from pyroaring import BitMap64

    rng = np.random.default_rng(0)
    shapes = {
        "every other of 20M": np.arange(0, 20_000_000, 2, dtype=np.int64),
        "10M random of 100M": np.sort(rng.choice(100_000_000, 10_000_000, replace=False)).astype(np.int64),
        "10M in one run": np.arange(10_000_000, dtype=np.int64),
    }
    print(f"{'positions':<22}{'encode':>9}{'decode':>9}{'pyroaring enc':>15}{'pyroaring dec':>15}  blob")
    for name, p in shapes.items():
        blob = encode(p)
        assert np.array_equal(decode(blob, "bench"), p)
        ours_enc = timed(lambda p=p: encode(p))
        ours_dec = timed(lambda blob=blob: decode(blob, "bench"))
        roar_enc = timed(lambda p=p: BitMap64(p).serialize())
        roar_dec = timed(lambda blob=blob: np.array(BitMap64.deserialize(blob[8:-4]), dtype=np.int64))
        print(f"{name:<22}{ours_enc:>8.2f}s{ours_dec:>8.2f}s{roar_enc:>14.2f}s{roar_dec:>14.2f}s  {len(blob):,} B")


if __name__ == "__main__":
    main()
