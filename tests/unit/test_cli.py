"""The command line: real lakes, real output."""

from __future__ import annotations

import json
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
    assert code == 0 and "would delete 3 files" in out
    code, out, _ = run("cleanup", "--older-than-hours", "1", "--json")  # scheduled just now: too young
    assert json.loads(out)["files"] == []
    code, out, _ = run("cleanup", "--all", "--json")
    deleted = json.loads(out)["files"]
    assert code == 0 and len(deleted) == 3 and not any(Path(p).exists() for p in deleted)
    code, out, _ = run("orphans", "--older-than-hours", "0", "--json")
    assert json.loads(out)["orphans"] == []
    assert sorted(lake.scan("main.t").column("id").to_pylist()) == [0, 1, 2, 10, 11, 12]


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
    assert code == 2 and "--json is an option of the command cleanup, expire, merge, orphans" in err
    code, out, err = run("expire", "--versions", "99")
    assert code == 0 and "no snapshot 99 (never existed or already expired)" in out
    assert [s.snapshot_id for s in lake.snapshots()] == list(range(head + 1))
