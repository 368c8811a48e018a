"""A real S3-compatible server for tests: moto's server mode on 127.0.0.1, and a TCP proxy that can cut it off.

``start_s3_server(folder)`` runs ``python -m moto.server`` on a free port (its log in ``folder``), waits until it
answers and returns an :class:`S3Server`; ``stop_s3_server`` ends that process (by its pid). Credentials are made
up per run (moto accepts any); tests grep for them to prove they leak nowhere.

:class:`CutProxy` forwards TCP to the server; ``cut_after(n)`` lets ``n`` more bytes from clients through and then
drops every connection (and refuses new ones) until ``restore()``: an upload that dies mid-way, without losing the
server's state as stopping moto would.
"""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REGION = "us-east-1"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class S3Server:
    """A running moto server; ``endpoint`` is ``http://127.0.0.1:<port>``."""

    endpoint: str
    process: subprocess.Popen[bytes]
    key_id: str = field(default_factory=lambda: "AKID" + uuid.uuid4().hex[:16].upper())
    secret: str = field(default_factory=lambda: "s3cr3t-" + uuid.uuid4().hex)
    region: str = REGION

    def storage_options(self, endpoint: str | None = None, **extra: Any) -> dict[str, Any]:
        """s3fs options for this server (or for a proxy in front of it)."""
        return {
            "key": self.key_id,
            "secret": self.secret,
            "endpoint_url": endpoint or self.endpoint,
            "client_kwargs": {"region_name": self.region},
            **extra,
        }

    def spark_options(self, endpoint: str | None = None) -> dict[str, str]:
        """The same as the lake's ``ducklake.s3.*`` options."""
        return {
            "ducklake.s3.access_key_id": self.key_id,
            "ducklake.s3.secret_access_key": self.secret,
            "ducklake.s3.endpoint_url": endpoint or self.endpoint,
            "ducklake.s3.region": self.region,
        }

    def env(self) -> dict[str, str]:
        """The same as the usual AWS variables."""
        return {
            "AWS_ACCESS_KEY_ID": self.key_id,
            "AWS_SECRET_ACCESS_KEY": self.secret,
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_REGION": self.region,
        }

    def client(self) -> Any:
        import boto3

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id=self.key_id,
            aws_secret_access_key=self.secret,
            region_name=self.region,
        )

    def create_bucket(self, name: str) -> str:
        self.client().create_bucket(Bucket=name)
        return name

    def keys(self, bucket: str, prefix: str = "") -> list[str]:
        """``s3://bucket/key`` of every object under ``prefix``."""
        pages = self.client().get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
        return sorted(f"s3://{bucket}/{o['Key']}" for page in pages for o in page.get("Contents", []))

    def put(self, url: str, data: bytes) -> None:
        bucket, _, key = url.removeprefix("s3://").partition("/")
        self.client().put_object(Bucket=bucket, Key=key, Body=data)


def start_s3_server(folder: Path, timeout: float = 60.0) -> S3Server:
    """Start moto's S3 server on a free port of 127.0.0.1 and wait until it answers."""
    port = free_port()
    log = (folder / "moto.log").open("wb")
    process = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    log.close()
    server = S3Server(f"http://127.0.0.1:{port}", process)
    deadline = time.monotonic() + timeout
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"moto server exited with {process.returncode}: {(folder / 'moto.log').read_text()}")
        try:
            server.client().list_buckets()
            return server
        except Exception:
            if time.monotonic() > deadline:
                stop_s3_server(server)
                raise RuntimeError(f"moto server on port {port} did not answer within {timeout:.0f} s") from None
            time.sleep(0.2)


def stop_s3_server(server: S3Server) -> None:
    server.process.terminate()
    try:
        server.process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        server.process.kill()
        server.process.wait(timeout=10)


class CutProxy:
    """TCP proxy on 127.0.0.1 in front of ``target_port`` that can be cut after a number of client bytes.

    Cut, it drops every open connection and stops listening, so that new connections are refused at once.
    """

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self._lock = threading.Lock()
        self._budget: int | None = None  # client bytes still allowed; None: unlimited
        self._cut = False
        self._open: set[socket.socket] = set()
        self._listener: socket.socket | None = None
        self.port = self._listen(0)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def is_cut(self) -> bool:
        return self._cut

    def cut_after(self, n_bytes: int) -> None:
        """Let ``n_bytes`` more bytes from clients through, then drop everything."""
        with self._lock:
            self._budget = n_bytes
        if n_bytes <= 0:
            self._do_cut()

    def restore(self) -> None:
        with self._lock:
            self._budget = None
            self._cut = False
        if self._listener is None:
            self._listen(self.port)

    def close(self) -> None:
        self._do_cut()

    def _listen(self, port: int) -> int:
        listener = socket.create_server(("127.0.0.1", port))
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()
        return int(listener.getsockname()[1])

    def _do_cut(self) -> None:
        with self._lock:
            self._cut = True
            listener, self._listener = self._listener, None
            sockets, self._open = list(self._open), set()
        if listener is not None:
            with contextlib.suppress(OSError):
                listener.close()
        for s in sockets:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                s.close()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target_port))
            except OSError:
                client.close()
                continue
            with self._lock:
                self._open.update((client, upstream))
            threading.Thread(target=self._pump, args=(client, upstream, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client, False), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, from_client: bool) -> None:
        cut = False
        try:
            while not cut:
                data = src.recv(65536)
                if not data:
                    break
                if from_client:
                    with self._lock:
                        if self._budget is not None:
                            allowed = max(0, min(len(data), self._budget))
                            self._budget -= allowed
                            cut = self._budget <= 0
                            data = data[:allowed]
                if data:
                    dst.sendall(data)
        except OSError:
            pass
        if cut:
            self._do_cut()
            return
        with self._lock:
            self._open.difference_update((src, dst))
        for s in (src, dst):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                s.close()
