"""Run by ``tests/integration/test_install.py`` with the python of a venv holding the extras at their floors.

Imports nothing from the repository but the installed package. ``check`` runs, for each extra in the spec, what the
library does with its packages: a lake whose data path is on the object store (s3fs against a moto server, gcsfs
against gcp-storage-emulator, adlfs against Azurite) written as Parquet, with a delete file, read back, its files
listed for orphans; a PostgreSQL catalog (psycopg2); a DuckDB-file catalog (duckdb, duckdb-engine). ``refuse`` runs
with older versions first on the path: the first use of each extra fails with ``NotInstalledError`` naming the
installed version and the floor. Prints one JSON line.

    python floors_smoke.py check|refuse WORKDIR SPEC_JSON
"""

from __future__ import annotations

import datetime as dt
import json
import os
import sys
from typing import Any


def lake_round_trip(catalog: str, data_path: str, storage_options: dict[str, Any] | None) -> dict[str, Any]:
    import pyarrow as pa

    import pyspark_ducklake as pdl

    with pdl.connect(catalog, data_path, storage_options=storage_options, data_inlining_row_limit=0) as lake:
        lake.create_table("main.t", pa.schema([("id", pa.int64()), ("s", pa.string())]))
        lake.append("main.t", pa.table({"id": [1, 2, 3], "s": ["a", "b", "c"]}))
        lake.append("main.t", pa.table({"id": [4, 5], "s": ["d", "e"]}))
        lake.delete("main.t", [("id", "=", 2)])
        rows = sorted(lake.scan("main.t").to_pylist(), key=lambda r: r["id"])
        files = lake.list_files("main.t").num_rows
        orphans = len(list(lake.delete_orphan_files(older_than=dt.timedelta(0), dry_run=True)))
    return {"ids": [r["id"] for r in rows], "files": files, "orphans": orphans}


def uses(work: str, spec: dict[str, Any]) -> dict[str, tuple[str, str, dict[str, Any] | None]]:
    """The lake of each extra in ``spec``: catalog, data path, storage options."""
    out: dict[str, tuple[str, str, dict[str, Any] | None]] = {}
    for extra, given in spec.items():
        if extra in ("s3", "gcs", "azure"):  # a data path on the object store, the catalog in SQLite
            out[extra] = (f"sqlite:///{work}/{extra}.sqlite", given["data_path"], given["storage_options"])
        elif extra == "postgres":  # the catalog's URL
            out[extra] = (given, f"{work}/pg-data", None)
        elif extra == "duckdb":
            out[extra] = (f"ducklake:{work}/lake.ducklake", f"{work}/duck-data", None)
    return out


def check(work: str, spec: dict[str, Any]) -> dict[str, Any]:
    from importlib import metadata

    from pyspark_ducklake.io.extras import EXTRAS, installed_version

    out: dict[str, Any] = {"versions": {"fsspec": metadata.version("fsspec")}}
    for extra in spec:
        out["versions"].update(dict(filter(None, (installed_version(f) for f in EXTRAS[extra]))))
    for extra, (catalog, data_path, options) in uses(work, spec).items():
        out[extra] = lake_round_trip(catalog, data_path, options)
    return out


def refuse(work: str, spec: dict[str, Any]) -> dict[str, Any]:
    from pyspark_ducklake.exceptions import NotInstalledError

    out = {}
    for extra, (catalog, data_path, options) in uses(work, spec).items():
        try:
            lake_round_trip(catalog, data_path, options)
            out[extra] = "no error"
        except NotInstalledError as e:
            out[extra] = str(e)
    return out


def main(argv: list[str]) -> int:
    mode, work, spec_text = argv
    os.makedirs(work, exist_ok=True)
    import pyspark_ducklake

    assert "site-packages" in pyspark_ducklake.__file__, pyspark_ducklake.__file__
    spec = json.loads(spec_text)
    print(json.dumps(check(work, spec) if mode == "check" else refuse(work, spec)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
