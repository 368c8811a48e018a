"""``pyspark-ducklake`` (or ``python -m pyspark_ducklake``): inspect and maintain a lake from the command line.

    pyspark-ducklake --catalog sqlite:///lake.sqlite snapshots [--limit N] [--since ID]
    pyspark-ducklake --catalog ... tables
    pyspark-ducklake --catalog ... flush [TABLE]
    pyspark-ducklake --catalog ... orphans [--older-than-hours 1] [--delete] (a dry run without --delete)
    pyspark-ducklake --catalog ... changes TABLE START [END]
    pyspark-ducklake --catalog ... merge [TABLE] [--target-file-size 512MB] [--dry-run] [--json]
    pyspark-ducklake --catalog ... rewrite [TABLE] [--delete-threshold 0.95] [--dry-run] [--json]
    pyspark-ducklake --catalog ... expire (--older-than TIME | --older-than-hours H | --versions 3,4)
    pyspark-ducklake --catalog ... cleanup (--older-than TIME | --older-than-hours H | --all)
    pyspark-ducklake --catalog ... retention [--expire-older-than '7 days'] [--delete-older-than '2 days'] [--apply]
    pyspark-ducklake --catalog ... indexes [--create]

Every command takes ``--json``: its output as one JSON document on stdout (``snapshots``: a list of objects with
the snapshot's columns; ``tables``: a list of names; ``flush``: ``{"snapshot_id": ...}``, null when there was
nothing to flush; ``changes``: a list of row objects, times in ISO 8601, decimals as strings, binaries as hex; the
maintenance commands: their report). An error is then a JSON object ``{"error": {"type": ..., "message": ...}}`` on
stdout too. Maintenance commands take ``--dry-run`` (report, change nothing).

Exit codes: 0 done, 1 the lake refused or failed (a ``DuckLakeError``: its message, no traceback), 2 a usage error.

TABLE is ``schema.table``, a bare table (schema ``main``), or DuckDB's quoted spelling for names holding dots or
quotes: ``'"we.ird"."t.1"'`` (``""`` for a quote inside). ``tables`` prints names in that spelling.

The catalog also comes from ``DUCKLAKE_CATALOG``.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import decimal
import difflib
import json
import os
import sys
from collections.abc import Callable
from typing import Any, NoReturn

from pyspark_ducklake.exceptions import DuckLakeError, InvalidOptionError
from pyspark_ducklake.lake import connect
from pyspark_ducklake.options import parse_float, parse_int, parse_size, parse_snapshot_id


class _Parser(argparse.ArgumentParser):
    """Exact flag names only (no abbreviations), and a misspelt flag gets the closest valid one."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        if message.startswith("unrecognized arguments:"):
            for word in message.split(":", 1)[1].split():
                hint = _flag_hint(self, word.split("=")[0])
                if hint:
                    message += f" ({hint})"
                    break
        super().error(message)


def _flag_hint(parser: argparse.ArgumentParser, word: str) -> str | None:
    """The closest valid flag, or where a valid flag given in the wrong place belongs."""
    owners = sorted(name for name, sub in _subcommands(parser).items() if word in _all_flags(sub))
    if owners:
        return f"{word} is an option of the command {', '.join(owners)}: put it after the command"
    close = difflib.get_close_matches(word, sorted(_all_flags(parser)), n=1, cutoff=0.6)
    return f"did you mean {close[0]}?" if close else None


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _all_flags(parser: argparse.ArgumentParser) -> set[str]:
    flags: set[str] = set()
    for action in parser._actions:
        flags.update(s for s in action.option_strings if s.startswith("--"))
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                flags |= _all_flags(sub)
    return flags


def _arg(parse: Callable[[str, str], object], name: str) -> Callable[[str], object]:
    """An argparse ``type`` from one of the option parsers (argparse shows only ArgumentTypeError's message)."""

    def convert(text: str) -> object:
        try:
            return parse(text, name)
        except InvalidOptionError as e:
            raise argparse.ArgumentTypeError(str(e)) from e

    return convert


def _hours(text: str, name: str) -> dt.timedelta:
    try:
        return dt.timedelta(hours=parse_float(text, name, minimum=0))
    except OverflowError:  # beyond timedelta's 999999999 days
        raise InvalidOptionError(f"option {name} is too large: {text!r} hours") from None


def main(argv: list[str] | None = None) -> int:
    parser = _Parser(prog=_prog(), description="Inspect and maintain a DuckLake.")
    parser.add_argument(
        "--catalog", default=os.environ.get("DUCKLAKE_CATALOG"), help="catalog URL (or DUCKLAKE_CATALOG)"
    )
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    as_json = _Parser(add_help=False)
    as_json.add_argument("--json", action="store_true", help="print the output as JSON")
    listing = sub.add_parser("snapshots", parents=[as_json], help="list snapshots with their changes, oldest first")
    listing.add_argument(
        "--limit",
        type=_arg(_positive, "--limit"),
        help="at most N: the newest N, or with --since the first N from it (a long history is a long list)",
    )
    listing.add_argument(
        "--since", type=_arg(parse_snapshot_id, "--since"), help="from this snapshot id on (inclusive)"
    )
    sub.add_parser("tables", parents=[as_json], help="list tables")
    flush = sub.add_parser("flush", parents=[as_json], help="write inlined rows to Parquet (one snapshot)")
    flush.add_argument("table", nargs="?")
    report = _Parser(add_help=False, parents=[as_json])
    report.add_argument("--dry-run", action="store_true", help="report what would be done, change nothing")
    orphans = sub.add_parser(
        "orphans",
        parents=[report],
        help="delete Parquet files no snapshot references and abort stale S3 uploads (dry run unless --delete)",
    )
    orphans.add_argument(
        "--older-than-hours", type=_arg(_hours, "--older-than-hours"), default=dt.timedelta(hours=1), help="safety age"
    )
    orphans.add_argument("--delete", action="store_true")
    merge = sub.add_parser("merge", parents=[report], help="merge adjacent small files (one snapshot)")
    merge.add_argument("table", nargs="?", help="one table (default: every table)")
    merge.add_argument(
        "--target-file-size",
        type=_arg(parse_size, "--target-file-size"),
        help="bytes or e.g. 512MB (default: catalog option, else 512MiB)",
    )
    merge.add_argument("--min-file-size", type=_arg(parse_size, "--min-file-size"))
    merge.add_argument("--max-file-size", type=_arg(parse_size, "--max-file-size"))
    merge.add_argument("--max-compacted-files", type=_arg(_positive, "--max-compacted-files"))
    rewrite = sub.add_parser(
        "rewrite", parents=[report], help="rewrite data files with deletes without the deleted rows (one snapshot)"
    )
    rewrite.add_argument("table", nargs="?", help="one table (default: every table)")
    rewrite.add_argument(
        "--delete-threshold",
        type=_arg(_ratio, "--delete-threshold"),
        help="rewrite files with at least this share of rows deleted, 0 to 1 (default: catalog option, else 0.95)",
    )
    expire = sub.add_parser("expire", parents=[report], help="expire snapshots (never the newest)")
    which = expire.add_mutually_exclusive_group(required=True)
    which.add_argument("--older-than", help="ISO time: expire snapshots committed before it")
    which.add_argument(
        "--older-than-hours",
        type=_arg(_hours, "--older-than-hours"),
        help="expire snapshots older than this many hours",
    )
    which.add_argument("--versions", type=_id_list, help="comma-separated snapshot ids")
    expire.add_argument(
        "--batch-size",
        type=_arg(_positive, "--batch-size"),
        default=1000,
        help="snapshots expired per catalog transaction (writers wait for one batch at most; default 1000)",
    )
    cleanup = sub.add_parser("cleanup", parents=[report], help="delete files scheduled for deletion")
    cutoff = cleanup.add_mutually_exclusive_group()
    cutoff.add_argument("--older-than", help="ISO time: files scheduled before it (default: 2 days ago)")
    cutoff.add_argument("--older-than-hours", type=_arg(_hours, "--older-than-hours"))
    cutoff.add_argument("--all", action="store_true", help="every scheduled file")
    migrate = sub.add_parser(
        "migrate",
        parents=[report],
        help="migrate the catalog to another DuckLake format version in one transaction (DuckDB 1.5 cannot open 1.1)",
    )
    migrate.add_argument("--to", required=True, choices=["1.1"], help="the format version to migrate to")
    keep = sub.add_parser(
        "retention",
        parents=[report],
        help="show or set how long the lake keeps its history (expire_older_than, delete_older_than); --apply "
        "expires and cleans up by it (from cron)",
    )
    keep.add_argument("--expire-older-than", help="expire snapshots older than this interval ('7 days'; '' unsets)")
    keep.add_argument("--delete-older-than", help="delete the files they leave this long after ('2 days'; '' unsets)")
    keep.add_argument("--apply", action="store_true", help="expire and clean up by the settings now")
    keep.add_argument(
        "--max-batches", type=_arg(_positive, "--max-batches"), help="with --apply: at most N expiry batches"
    )
    indexes = sub.add_parser(
        "indexes",
        parents=[as_json],
        help="the indexes pyspark-ducklake adds to SQLite and PostgreSQL catalogs (so long histories stay fast), "
        "present or missing",
    )
    indexes.add_argument("--create", action="store_true", help="create the missing ones")
    changes = sub.add_parser("changes", parents=[as_json], help="the change feed of a table between two snapshots")
    changes.add_argument("table")
    changes.add_argument("start", type=_arg(parse_snapshot_id, "START"))
    changes.add_argument("end", type=_arg(parse_snapshot_id, "END"), nargs="?")
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:  # a usage error (already printed) or --help: the exit code, as for other errors
        return e.code if isinstance(e.code, int) else 2
    if not args.catalog:
        parser.error("no catalog: pass --catalog or set DUCKLAKE_CATALOG")
    try:
        lake = connect(args.catalog)
        if args.command == "snapshots":
            snapshots = lake.snapshots(limit=args.limit, since=args.since)
            if args.json:
                _print_json([_snapshot_dict(s) for s in snapshots])
            else:
                for s in snapshots:
                    when = s.snapshot.snapshot_time.isoformat() if s.snapshot.snapshot_time else ""
                    print(f"{s.snapshot_id}\t{when}\t{s.changes_made or ''}\t{s.commit_extra_info or ''}")
        elif args.command == "tables":
            tables = lake.tables()
            if args.json:
                _print_json(tables)
            else:
                print("\n".join(tables))
        elif args.command == "flush":
            snapshot = lake.flush_inlined_data(args.table)
            if args.json:
                _print_json({"snapshot_id": snapshot})
            else:
                print("nothing to flush" if snapshot is None else f"flushed in snapshot {snapshot}")
        elif args.command == "orphans":
            found = lake.delete_orphan_files(older_than=args.older_than_hours, dry_run=args.dry_run or not args.delete)
            if args.json:
                _print_report(found, True)
            else:
                verb = "deleted" if not found.dry_run else "would delete (dry run; pass --delete)"
                print(f"{verb} {len(found)} orphan files")
                for path in found:
                    print(f"  {path}")
        elif args.command == "merge":
            merged = lake.merge_adjacent_files(
                args.table,
                target_file_size=args.target_file_size,
                min_file_size=args.min_file_size,
                max_file_size=args.max_file_size,
                max_compacted_files=args.max_compacted_files,
                dry_run=args.dry_run,
            )
            _print_report(
                merged, args.json, [f"  {g.table}: {len(g.sources)} files -> {g.target or '?'}" for g in merged.groups]
            )
        elif args.command == "rewrite":
            rewritten = lake.rewrite_data_files(
                args.table, delete_threshold=args.delete_threshold, dry_run=args.dry_run
            )
            _print_report(
                rewritten,
                args.json,
                [
                    f"  {g.table}: {len(g.sources)} files, {g.rows_deleted} of {g.rows_before} rows deleted -> "
                    f"{g.target or ('?' if rewritten.dry_run else 'no file (every row deleted)')}"
                    for g in rewritten.groups
                ],
            )
        elif args.command == "expire":
            older = args.older_than_hours if args.older_than_hours is not None else args.older_than
            expired = lake.expire_snapshots(
                older_than=older, versions=args.versions, dry_run=args.dry_run, batch_size=args.batch_size
            )
            _print_report(expired, args.json, [f"  {p}" for p in expired.files_scheduled])
        elif args.command == "cleanup":
            older = args.older_than_hours if args.older_than_hours is not None else args.older_than
            cleaned = lake.cleanup_old_files(older_than=older, cleanup_all=args.all, dry_run=args.dry_run)
            _print_report(cleaned, args.json, [f"  {p}" for p in cleaned.files])
        elif args.command == "migrate":
            migrated = lake.migrate(args.to, dry_run=args.dry_run)
            _print_report(migrated, args.json, [f"  {step}" for step in migrated.steps])
        elif args.command == "retention":
            kept = lake.retention()
            if args.expire_older_than is not None or args.delete_older_than is not None:
                if args.dry_run:
                    raise InvalidOptionError("--dry-run applies to --apply only; settings are set or not")
                kept = lake.set_retention(
                    expire_older_than=args.expire_older_than, delete_older_than=args.delete_older_than
                )
            out: dict[str, Any] = {"retention": kept.to_dict()}
            if args.apply:
                expired, cleaned = lake.apply_retention(dry_run=args.dry_run, max_batches=args.max_batches)
                out.update(expire=expired.to_dict(), cleanup=cleaned.to_dict())
            if args.json:
                _print_json(out)
            else:
                print(kept.summary())
                if args.apply:
                    print(expired.summary())
                    print(cleaned.summary())
        elif args.command == "indexes":
            created = lake.create_indexes() if args.create else []
            states = lake.indexes()
            if args.json:
                _print_json([dataclasses.asdict(i) for i in states])
            elif not states:
                print("this catalog's database gets no indexes from pyspark-ducklake (DuckDB-file catalog)")
            else:
                for i in states:
                    state = "created" if i.name in created else "present" if i.present else "missing (--create)"
                    print(f"{i.name}\t{i.definition}\t{state}")
        elif args.command == "changes":
            rows = lake.table_changes(args.table, args.start, args.end).to_pylist()
            if args.json:
                _print_json(rows)
            else:
                for row in rows:
                    print(row)
    except DuckLakeError as e:
        if getattr(args, "json", False):
            print(json.dumps({"error": {"type": type(e).__name__, "message": str(e)}}, indent=2))
        else:
            print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


def _prog() -> str:
    """The name the command was run by: ``pyspark-ducklake`` (the console script) or ``python -m ...``."""
    name = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    return "python -m pyspark_ducklake" if name in ("", "__main__.py", "-c") else name


def _snapshot_dict(s: Any) -> dict[str, Any]:
    return {
        "snapshot_id": s.snapshot_id,
        "snapshot_time": s.snapshot.snapshot_time,
        "schema_version": s.snapshot.schema_version,
        "changes_made": s.changes_made,
        "author": s.author,
        "commit_message": s.commit_message,
        "commit_extra_info": s.commit_extra_info,
    }


def _json_value(value: Any) -> Any:
    """JSON for what a lake returns beyond JSON's types: times in ISO 8601, decimals as strings, bytes as hex."""
    if isinstance(value, (dt.datetime, dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, dt.timedelta):
        return value.total_seconds()
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).hex()
    return str(value)


def _print_json(value: Any) -> None:
    print(json.dumps(value, indent=2, default=_json_value))


def _positive(text: str, name: str) -> int:
    return parse_int(text, name, minimum=1)


def _ratio(text: str, name: str) -> float:
    return parse_float(text, name, minimum=0, maximum=1)


def _id_list(text: str) -> list[int]:
    try:
        return [parse_snapshot_id(v, "--versions") for v in text.split(",") if v.strip()]
    except InvalidOptionError as e:
        raise argparse.ArgumentTypeError(f"expected comma-separated snapshot ids such as 3,4: {e}") from e


def _print_report(report: Any, as_json: bool, details: list[str] | None = None) -> None:
    if as_json:
        print(json.dumps(report.to_dict(), indent=2, default=str))
        return
    print(report.summary())
    for line in details or []:
        print(line)


if __name__ == "__main__":
    raise SystemExit(main())
