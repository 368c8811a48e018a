"""The command line: real lakes, real output."""

from __future__ import annotations

import datetime as dt
import json
import re
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pytest

import pyspark_ducklake as pdl
from pyspark_ducklake.__main__ import main


def test_cli_lists_flushes_and_cleans(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"sqlite:///{tmp_path}/c.sqlite"
    lake = pdl.connect(url, str(tmp_path / "data"))
    lake.create_table("main.t", pa.schema([("id", pa.int64())]))
    lake.append("main.t", pa.table({"id": [1, 2]}))
    (tmp_path / "data" / "main" / "t").mkdir(parents=True, exist_ok=True)
    (tmp_path / "data" / "main" / "t" / "ducklake-crashed.parquet").write_bytes(b"x")
    assert main(["--catalog", url, "tables"]) == 0
    assert capsys.readouterr().out.strip() == "main.t"
    assert main(["--catalog", url, "flush", "main.t"]) == 0
    assert "flushed in snapshot 3" in capsys.readouterr().out
    assert main(["--catalog", url, "snapshots"]) == 0
    assert "inline_flush:1" in capsys.readouterr().out
    assert main(["--catalog", url, "orphans", "--older-than-hours", "0"]) == 0
    assert "would delete (dry run; pass --delete) 1 orphan files" in capsys.readouterr().out
    assert main(["--catalog", url, "orphans", "--older-than-hours", "0", "--delete"]) == 0
    assert not (tmp_path / "data" / "main" / "t" / "ducklake-crashed.parquet").exists()
    assert main(["--catalog", url, "changes", "main.t", "0"]) == 0
    assert capsys.readouterr().out.count("'insert'") == 2
    assert main(["--catalog", url, "changes", "main.nope", "0"]) == 1
    assert "main.nope" in capsys.readouterr().err


def test_cli_maintenance(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"sqlite:///{tmp_path}/c.sqlite"
    lake = pdl.connect(url, str(tmp_path / "data"), data_inlining_row_limit=0)
    lake.create_table("main.t", pa.schema([("id", pa.int64())]))
    for i in range(3):
        lake.append("main.t", pa.table({"id": [i, i + 10]}))
    head = lake.current_snapshot_id()

    def run(*args: str) -> tuple[int, str, str]:
        code = main(["--catalog", url, *args])
        out = capsys.readouterr()
        return code, out.out, out.err

    code, out, _ = run("merge", "main.t", "--dry-run", "--json")
    report = json.loads(out)
    assert code == 0 and report["dry_run"] and report["files_processed"] == 3 and report["files_created"] == 1
    assert lake.current_snapshot_id() == head
    code, out, _ = run("merge", "--target-file-size", "1MB")
    assert code == 0 and "merged 3 files" in out and f"in snapshot {head + 1}" in out
    lake.delete("main.t", [("id", "in", [0, 1])])
    code, out, _ = run("rewrite", "main.t", "--dry-run", "--json")
    report = json.loads(out)
    assert code == 0 and report == {**report, "dry_run": True, "files_processed": 0}  # 2 of 6 rows: below 0.95
    code, out, _ = run("rewrite", "--delete-threshold", "0.3")
    assert code == 0 and "rewrote 1 files (" in out and "2 deleted rows" in out and f"in snapshot {head + 3}" in out
    code, _, err = run("rewrite", "--delete-threshold", "1.5")
    assert code == 2 and "--delete-threshold must be <= 1" in err
    head += 2
    code, _, err = run("expire", "--versions", str(head + 1))
    assert code == 1 and "current snapshot" in err
    code, _, err = run("merge", "--target-file-size", "lots")
    assert code == 2 and "--target-file-size" in err and "lots" in err
    code, out, _ = run("expire", "--older-than-hours", "0", "--dry-run", "--json")
    assert json.loads(out)["snapshots"] == list(range(head + 1))
    assert len(lake.snapshots()) == head + 2  # the dry run kept them all
    code, out, _ = run("expire", "--older-than-hours", "0")
    assert code == 0 and f"expired {head + 1} snapshots" in out
    assert [s.snapshot_id for s in lake.snapshots()] == [head + 1]
    code, out, _ = run("cleanup", "--all", "--dry-run")
    assert code == 0 and "would delete 5 files" in out  # the merge's 3 sources; the rewritten file and its deletes
    code, out, _ = run("cleanup", "--older-than-hours", "1", "--json")  # scheduled just now: too young
    assert json.loads(out)["files"] == []
    code, out, _ = run("cleanup", "--all", "--json")
    deleted = json.loads(out)["files"]
    assert code == 0 and len(deleted) == 5 and not any(Path(p).exists() for p in deleted)
    code, out, _ = run("orphans", "--older-than-hours", "0", "--json")
    assert json.loads(out)["orphans"] == []
    assert sorted(lake.scan("main.t").column("id").to_pylist()) == [2, 10, 11, 12]


def test_cli_errors_exit_1_stay_json_and_huge_ages_are_usage_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A DuckLakeError exited 2 like a usage error and printed text under --json; --older-than-hours 1e300 raised
    a bare OverflowError with a traceback; --json before the command was 'did you mean --json?'."""
    url = f"sqlite:///{tmp_path}/c.sqlite"
    lake = pdl.connect(url, str(tmp_path / "data"))
    lake.create_table("main.t", pa.schema([("id", pa.int64())]))
    lake.append("main.t", pa.table({"id": [1]}))
    head = lake.current_snapshot_id()

    def run(*args: str) -> tuple[int, str, str]:
        code = main(["--catalog", url, *args])
        out = capsys.readouterr()
        return code, out.out, out.err

    code, out, err = run("merge", "main.nope", "--json")
    assert code == 1 and err == ""
    assert json.loads(out)["error"]["type"] == "NoSuchTableError" and "main.nope" in json.loads(out)["error"]["message"]
    code, out, err = run("expire", "--versions", str(head), "--json")
    assert code == 1 and json.loads(out)["error"]["type"] == "InvalidOptionError"
    code, out, err = run("flush", '"unterminated')
    assert code == 1 and out == "" and err.startswith("error: ") and "Traceback" not in err
    for hours in ("1e300", "-1", "nan", "inf"):
        code, out, err = run("orphans", "--older-than-hours", hours)
        assert code == 2 and "--older-than-hours" in err and "Traceback" not in err, (hours, err)
    code, out, err = run("--json", "tables")
    assert (
        code == 2
        and "--json is an option of the command changes, cleanup, expire, flush, indexes, merge, migrate, orphans, "
        "retention, rewrite, snapshots, tables"
        in err
    )
    code, out, err = run("expire", "--versions", "99")
    assert code == 0 and "no snapshot 99 (never existed or already expired)" in out
    assert [s.snapshot_id for s in lake.snapshots()] == list(range(head + 1))


def _commands(capsys: pytest.CaptureFixture[str]) -> set[str]:
    """The subcommands the parser offers, from its usage line ``{snapshots,tables,...}``."""
    assert main(["--help"]) == 0
    usage = capsys.readouterr().out
    return set(re.search(r"\{([a-z,]+)\}", usage).group(1).split(","))  # type: ignore[union-attr]


def test_cli_json_for_every_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Every subcommand prints one JSON document under --json, with the values a script needs (times in ISO 8601,
    decimals as strings, binaries as hex)."""
    url = f"sqlite:///{tmp_path}/c.sqlite"
    lake = pdl.connect(url, str(tmp_path / "data"), author="cli-test")
    schema = pa.schema(
        [
            ("id", pa.int64()),
            ("amount", pa.decimal128(9, 2)),
            ("at", pa.timestamp("us", tz="UTC")),
            ("blob", pa.binary()),
        ]
    )
    lake.create_table("main.t", schema)
    at = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.timezone.utc)
    first = lake.append(
        "main.t",
        pa.table({"id": [1], "amount": [Decimal("12.50")], "at": [at], "blob": [b"\x00\xff"]}, schema=schema),
        extra_info={"job": "a"},
    )
    (tmp_path / "data" / "main" / "t").mkdir(parents=True, exist_ok=True)
    (tmp_path / "data" / "main" / "t" / "ducklake-crashed.parquet").write_bytes(b"x")

    def run(*args: str) -> object:
        code = main(["--catalog", url, *args, "--json"])
        out = capsys.readouterr()
        assert code == 0 and out.err == "", out.err
        return json.loads(out.out)

    tried = set()

    def command(name: str, *args: str) -> object:
        tried.add(name)
        return run(name, *args)

    assert command("tables") == ["main.t"]
    assert command("snapshots") == [
        {
            "snapshot_id": s.snapshot_id,
            "snapshot_time": s.snapshot.snapshot_time.isoformat(),
            "schema_version": s.snapshot.schema_version,
            "changes_made": s.changes_made,
            "author": s.author,
            "commit_message": s.commit_message,
            "commit_extra_info": s.commit_extra_info,
        }
        for s in lake.snapshots()
    ]
    last = lake.snapshots()[-1]
    assert (
        last.snapshot_id == first and last.author == "cli-test" and json.loads(last.commit_extra_info) == {"job": "a"}
    )
    (change,) = command("changes", "main.t", str(first))  # type: ignore[misc]
    committed = lake.snapshots()[-1].snapshot.snapshot_time
    assert dt.datetime.fromisoformat(change.pop("_commit_timestamp")) == committed
    assert change == {
        "id": 1,
        "amount": "12.50",
        "at": "2026-01-02T03:04:05+00:00",
        "blob": "00ff",
        "_change_type": "insert",
        "_snapshot_id": first,
        "_rowid": 0,
    }
    flushed = command("flush", "main.t")
    assert flushed == {"snapshot_id": lake.current_snapshot_id()} and flushed["snapshot_id"] == first + 1  # type: ignore[index]
    assert command("flush") == {"snapshot_id": None}  # nothing left to flush
    assert command("orphans", "--older-than-hours", "0")["orphans"] == [  # type: ignore[index]
        str(tmp_path / "data" / "main" / "t" / "ducklake-crashed.parquet")
    ]
    assert command("merge", "--dry-run")["dry_run"] is True  # type: ignore[index]
    assert command("rewrite", "--dry-run")["operation"] == "rewrite_data_files"  # type: ignore[index]
    assert command("expire", "--versions", str(first), "--dry-run")["snapshots"] == [first]  # type: ignore[index]
    assert command("cleanup", "--all", "--dry-run")["files"] == []  # type: ignore[index]
    assert command("migrate", "--to", "1.1", "--dry-run")["to_version"] == "1.1"  # type: ignore[index]
    kept = command("retention", "--apply", "--dry-run")
    assert kept["retention"]["expire_older_than"] is None and kept["expire"]["expired"] == 0  # type: ignore[index]
    assert {i["name"]: i["present"] for i in command("indexes")}["pyspark_ducklake_data_file_table_end"]  # type: ignore[union-attr,index]
    assert tried == _commands(capsys), "a subcommand without a --json test"


def test_console_script_runs_the_cli(tmp_path: Path) -> None:
    """`pyspark-ducklake` (pyproject's [project.scripts]) is installed beside the interpreter and runs main()."""
    script = Path(sys.executable).parent / "pyspark-ducklake"
    assert script.exists(), "run make install: the console script is missing from the venv"
    url = f"sqlite:///{tmp_path}/c.sqlite"
    pdl.connect(url, str(tmp_path / "data")).create_table("main.t", pa.schema([("id", pa.int64())]))
    out = subprocess.run([str(script), "--catalog", url, "tables", "--json"], capture_output=True, text=True)
    assert out.returncode == 0 and json.loads(out.stdout) == ["main.t"], out.stderr
    usage = subprocess.run([str(script), "tables", "--bogus"], capture_output=True, text=True)
    assert usage.returncode == 2 and usage.stderr.startswith("usage: pyspark-ducklake "), usage.stderr
