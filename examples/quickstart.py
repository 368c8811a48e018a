"""Quick start: a DuckLake on the embedded default (SQLite catalog, local Parquet files), from Python.

Run with ``make demo``. It creates ``demo-lake/`` (catalog + data) next to this repo, writes a small history
(inlined and Parquet appends, a delete, a new column), time-travels through it, and, when DuckDB with its
``ducklake`` extension is installed (the test dependencies), shows DuckDB reading exactly the same rows.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import shutil

import pyarrow as pa

import pyspark_ducklake as pdl


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lake", default=os.path.join(os.path.dirname(__file__), "..", "demo-lake"))
    parser.add_argument("--keep", action="store_true", help="keep an existing lake instead of starting fresh")
    args = parser.parse_args()
    root = os.path.abspath(args.lake)
    if not args.keep and os.path.exists(root):
        shutil.rmtree(root)
    os.makedirs(root, exist_ok=True)
    catalog = f"sqlite:///{root}/catalog.sqlite"
    lake = pdl.connect(catalog, data_path=f"{root}/data")
    print(f"lake: catalog {catalog}, data {lake.data_path}")

    schema = pa.schema(
        [
            ("id", pa.int64()),
            ("kind", pa.string()),
            ("amount", pa.decimal128(12, 2)),
            ("at", pa.timestamp("us", tz="UTC")),
        ]
    )
    lake.create_table("main.events", schema, exist_ok=True)
    now = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)

    def events(first: int, n: int) -> pa.Table:
        return pa.table(
            {
                "id": list(range(first, first + n)),
                "kind": ["click" if i % 3 else "buy" for i in range(first, first + n)],
                "amount": pa.array([f"{i * 1.25:.2f}" for i in range(first, first + n)]).cast(pa.decimal128(12, 2)),
                "at": [now + dt.timedelta(seconds=i) for i in range(first, first + n)],
            },
            schema=schema,
        )

    s1 = lake.append("main.events", events(0, 5))  # small: inlined into the catalog
    s2 = lake.append("main.events", events(5, 10_000))  # large: one Parquet file
    s3 = lake.delete("main.events", [("kind", "=", "buy"), ("id", "<", 100)])
    lake.add_column("main.events", "country", pa.string(), default="NL")
    s4 = lake.append("main.events", pa.table({"id": [20_000], "kind": ["refund"], "country": ["DE"]}))

    for snap in (s1, s2, s3, s4):
        print(f"snapshot {snap}: {lake.scan('main.events', snapshot=snap).num_rows} rows")
    print("latest, id < 8:")
    print(lake.scan("main.events", filter=[("id", "<", 8)]).to_pandas().to_string(index=False))
    print("snapshots:")
    for info in lake.snapshots():
        print(f"  {info.snapshot_id:>3}  {info.changes_made}")

    from pyspark_ducklake.duckdb_attach import open_in_duckdb
    from pyspark_ducklake.exceptions import NotInstalledError

    try:
        con = open_in_duckdb(lake)
    except NotInstalledError as e:
        print(f"(DuckDB is optional; {e})")
        return
    total = con.execute("SELECT count(*) FROM lake.main.events").fetchone()[0]
    per_snapshot = [
        con.execute(f"SELECT count(*) FROM lake.main.events AT (VERSION => {s})").fetchone()[0]
        for s in (s1, s2, s3, s4)
    ]
    print(f"DuckDB reads {total} rows now; per snapshot {per_snapshot}")
    ours = lake.scan("main.events").num_rows
    assert total == ours, f"DuckDB read {total} rows, we read {ours}"
    con.close()
    lake.close()


if __name__ == "__main__":
    main()
