"""Every code block of README.md and the docs pages runs as written, in order, each page in an empty folder, all of
them in one Spark session (``tests/support/doc_run.py``; the rule for which blocks run, and how a block that needs a
service or cannot run says so: ``tests/support/doc_blocks.py``). The services the pages' blocks name are started
here: moto for S3 (bucket ``my-bucket``, the ``AWS_*`` variables) and Azurite (container ``lake``,
``AZURE_STORAGE_CONNECTION_STRING``)."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.catalogs import REPO_ROOT
from tests.support.doc_blocks import SERVICES, code_blocks

pytestmark = [pytest.mark.timeout(1800), pytest.mark.slow]

RUNNER = REPO_ROOT / "tests" / "support" / "doc_run.py"


def test_every_code_block_of_the_docs_runs_as_written(tmp_path: Path) -> None:
    from tests.support.emulators import start_azurite, stop
    from tests.support.s3 import start_s3_server, stop_s3_server

    blocks = code_blocks()
    runnable = [b.where for b in blocks if b.kind in ("python", "cli")]
    services = {b.service for b in blocks if b.service}
    assert services <= set(SERVICES), services
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYSPARK", "DUCKLAKE_", "AWS_", "AZURE_"))}
    env["PYTHONPATH"] = str(REPO_ROOT)
    work, state = tmp_path / "work", tmp_path / "state"
    work.mkdir()
    with contextlib.ExitStack() as stack:
        if "s3" in services:
            s3 = start_s3_server(tmp_path)
            stack.callback(stop_s3_server, s3)
            s3.create_bucket("my-bucket")
            env.update(s3.env())
        if "azure" in services:
            (tmp_path / "azurite").mkdir()
            azure = start_azurite(tmp_path / "azurite")
            stack.callback(stop, azure)
            azure.create_bucket("lake")
            env["AZURE_STORAGE_CONNECTION_STRING"] = azure.connection_string
        proc = subprocess.run(
            [sys.executable, str(RUNNER), str(work), str(state)],
            cwd=work, env=env, capture_output=True, text=True, timeout=1700, check=False,
        )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-6000:]
    results = json.loads(proc.stdout.strip().splitlines()[-1])
    failed = [f"{r['where']}:\n{r['error']}" for r in results if r["error"]]
    assert not failed, "\n\n".join(failed)
    assert [r["where"] for r in results] == runnable
