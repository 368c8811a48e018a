"""The command line: real lakes, real output."""

from __future__ import annotations

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
    assert main(["--catalog", url, "changes", "main.nope", "0"]) == 2
    assert "main.nope" in capsys.readouterr().err
