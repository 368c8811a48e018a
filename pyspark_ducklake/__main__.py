"""``python -m pyspark_ducklake``: inspect and maintain a lake from the command line.

    python -m pyspark_ducklake --catalog sqlite:///lake.sqlite snapshots
    python -m pyspark_ducklake --catalog ... tables
    python -m pyspark_ducklake --catalog ... flush [TABLE]
    python -m pyspark_ducklake --catalog ... orphans [--older-than-hours 1] [--delete] (a dry run without --delete)
    python -m pyspark_ducklake --catalog ... changes TABLE START [END]

The catalog also comes from ``DUCKLAKE_CATALOG``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import sys

from pyspark_ducklake.exceptions import DuckLakeError
from pyspark_ducklake.lake import connect


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pyspark_ducklake", description="Inspect and maintain a DuckLake.")
    parser.add_argument(
        "--catalog", default=os.environ.get("DUCKLAKE_CATALOG"), help="catalog URL (or DUCKLAKE_CATALOG)"
    )
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("snapshots", help="list snapshots with their changes")
    sub.add_parser("tables", help="list tables")
    flush = sub.add_parser("flush", help="write inlined rows to Parquet (one snapshot)")
    flush.add_argument("table", nargs="?")
    orphans = sub.add_parser("orphans", help="files no snapshot references (dry run unless --delete)")
    orphans.add_argument("--older-than-hours", type=float, default=1.0)
    orphans.add_argument("--delete", action="store_true")
    changes = sub.add_parser("changes", help="the change feed of a table between two snapshots")
    changes.add_argument("table")
    changes.add_argument("start", type=int)
    changes.add_argument("end", type=int, nargs="?")
    args = parser.parse_args(argv)
    if not args.catalog:
        parser.error("no catalog: pass --catalog or set DUCKLAKE_CATALOG")
    try:
        lake = connect(args.catalog)
        if args.command == "snapshots":
            for s in lake.snapshots():
                when = s.snapshot.snapshot_time.isoformat() if s.snapshot.snapshot_time else ""
                print(f"{s.snapshot_id}\t{when}\t{s.changes_made or ''}\t{s.commit_extra_info or ''}")
        elif args.command == "tables":
            print("\n".join(lake.tables()))
        elif args.command == "flush":
            snapshot = lake.flush_inlined_data(args.table)
            print("nothing to flush" if snapshot is None else f"flushed in snapshot {snapshot}")
        elif args.command == "orphans":
            age = dt.timedelta(hours=args.older_than_hours)
            found = lake.delete_orphan_files(older_than=age, dry_run=not args.delete)
            verb = "deleted" if args.delete else "would delete (dry run; pass --delete)"
            print(f"{verb} {len(found)} orphan files")
            for path in found:
                print(f"  {path}")
        elif args.command == "changes":
            table = lake.table_changes(args.table, args.start, args.end)
            for row in table.to_pylist():
                print(row)
    except DuckLakeError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
