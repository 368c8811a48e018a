"""Real local emulators of Google Cloud Storage and Azure Blob Storage for tests, each on a free port of 127.0.0.1.

``start_gcs(folder)`` runs ``gcp-storage-emulator`` (PyPI, the ``test`` dependency group; gcsfs talks to its JSON
API); ``start_azurite(folder)`` runs Azurite's blob service, installed into ``.cache/azurite`` by
``scripts/azurite.sh install`` (idempotent; run here too, so a bare ``pytest`` works). Each returns an
:class:`Emulator`; ``stop(emulator)`` ends that process by its pid. Credentials are made up per run where the emulator
allows (Azurite accepts only its well-known development key, so the Azure tests grep for that one).
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.support.s3 import free_port

ROOT = Path(__file__).resolve().parents[2]
# Azurite's fixed development account (https://learn.microsoft.com/azure/storage/common/storage-use-azurite)
AZURITE_ACCOUNT = "devstoreaccount1"
AZURITE_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="


@dataclass
class Emulator:
    kind: str  # "gcs" or "azure"
    endpoint: str
    process: subprocess.Popen[bytes]
    project: str = field(default_factory=lambda: "proj-" + uuid.uuid4().hex[:8])

    @property
    def connection_string(self) -> str:
        return (
            f"DefaultEndpointsProtocol=http;AccountName={AZURITE_ACCOUNT};AccountKey={AZURITE_KEY};"
            f"BlobEndpoint={self.endpoint}/{AZURITE_ACCOUNT};"
        )

    def storage_options(self) -> dict[str, Any]:
        """gcsfs / adlfs arguments for ``connect(storage_options=...)``."""
        if self.kind == "gcs":
            return {"endpoint_url": self.endpoint, "project": self.project, "token": "anon"}
        return {"connection_string": self.connection_string}

    def spark_options(self) -> dict[str, str]:
        """The same as ``ducklake.<store>.*`` options."""
        return {f"ducklake.{self.kind}.{k}": v for k, v in self.storage_options().items()}

    def filesystem(self) -> Any:
        if self.kind == "gcs":
            from gcsfs.core import GCSFileSystem

            return GCSFileSystem(**self.storage_options())
        from adlfs import AzureBlobFileSystem

        return AzureBlobFileSystem(**self.storage_options())

    def create_bucket(self, name: str) -> str:
        self.filesystem().mkdir(name)
        return name

    def keys(self, bucket: str, scheme: str) -> list[str]:
        """``<scheme>://bucket/key`` of every object in ``bucket``."""
        fs = self.filesystem()
        fs.invalidate_cache()
        return sorted(f"{scheme}://{p}" for p, info in fs.find(bucket, detail=True).items() if info["type"] == "file")


def _start(kind: str, command: list[str], folder: Path, ready: Callable[[Emulator], Any], timeout: float) -> Emulator:
    log = (folder / f"{kind}.log").open("wb")
    process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
    log.close()
    port = command[command.index("--port" if kind == "gcs" else "--blobPort") + 1]
    emulator = Emulator(kind, f"http://127.0.0.1:{port}", process)
    deadline = time.monotonic() + timeout
    # The port first: a client's request to a port that is not listening yet backs off (the Azure SDK's retries
    # took 16 s where Azurite listens after 1 s); a refused TCP connect costs nothing.
    while not _listening(int(port)) and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    while True:
        if process.poll() is not None:
            raise RuntimeError(
                f"{kind} emulator exited with {process.returncode}: {(folder / f'{kind}.log').read_text()}"
            )
        try:
            ready(emulator)
            return emulator
        except Exception:
            if time.monotonic() > deadline:
                stop(emulator)
                raise RuntimeError(f"{kind} emulator on port {port} did not answer within {timeout:.0f} s") from None
            time.sleep(0.3)


def _listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except OSError:
        return False
    return True


def start_gcs(folder: Path, timeout: float = 60.0) -> Emulator:
    """gcp-storage-emulator (in memory) on a free port."""
    port = free_port()
    command = [sys.executable, "-m", "gcp_storage_emulator", "start", "--host", "127.0.0.1", "--port", str(port)]
    command.append("--in-memory")
    return _start("gcs", command, folder, lambda e: e.filesystem().ls(""), timeout)


def azurite_binary() -> str:
    """Install Azurite when missing (``scripts/azurite.sh install``) and return its ``azurite-blob``."""
    out = subprocess.run(
        ["bash", str(ROOT / "scripts" / "azurite.sh"), "install"], check=True, capture_output=True, text=True
    )
    return out.stdout.strip().splitlines()[-1]


def start_azurite(folder: Path, timeout: float = 60.0) -> Emulator:
    """Azurite's blob service on a free port, its data in ``folder``."""
    port = free_port()
    command = [azurite_binary(), "--blobHost", "127.0.0.1", "--blobPort", str(port), "--location", str(folder)]
    command += ["--silent", "--skipApiVersionCheck", "--loose"]
    return _start("azure", command, folder, lambda e: e.filesystem().ls(""), timeout)


def stop(emulator: Emulator) -> None:
    """Ends the emulator: SIGTERM, then SIGKILL after 2 s (Azurite never exits on SIGTERM while a client, such as
    the adlfs filesystem fsspec caches, keeps a connection open: a longer wait only delayed the kill)."""
    emulator.process.terminate()
    try:
        emulator.process.wait(timeout=2)
    except subprocess.TimeoutExpired:
        emulator.process.kill()
        emulator.process.wait(timeout=10)
