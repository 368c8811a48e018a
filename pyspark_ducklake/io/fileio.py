"""File access through fsspec, one filesystem per protocol and options."""

from __future__ import annotations

import logging
import posixpath
import threading
from typing import Any

import fsspec
from fsspec.core import url_to_fs

from pyspark_ducklake.exceptions import DataFileError, NotInstalledError

log = logging.getLogger(__name__)

_lock = threading.Lock()
_cache: dict[tuple[str, tuple[tuple[str, str], ...]], fsspec.AbstractFileSystem] = {}


def filesystem(path: str, storage_options: dict[str, Any] | None = None) -> tuple[fsspec.AbstractFileSystem, str]:
    """The filesystem for ``path`` and the path as that filesystem spells it.

    Raises:
        NotInstalledError: the protocol's fsspec implementation is missing (e.g. s3fs).
    """
    opts = storage_options or {}
    protocol = path.split("://", 1)[0] if "://" in path else "file"
    key = (protocol, tuple(sorted((k, repr(v)) for k, v in opts.items())))
    with _lock:
        fs = _cache.get(key)
    try:
        if fs is None:
            fs, _ = url_to_fs(path, **opts)
            with _lock:
                _cache[key] = fs
    except ImportError as e:
        extra = "s3" if protocol in ("s3", "s3a") else protocol
        raise NotInstalledError(
            f"no filesystem for {protocol}:// paths: pip install 'pyspark-ducklake[{extra}]' ({e})"
        ) from e
    return fs, fs._strip_protocol(path) if protocol != "file" else path


def ensure_parent(path: str, storage_options: dict[str, Any] | None = None) -> None:
    fs, p = filesystem(path, storage_options)
    if fs.protocol in ("file", "local") or "file" in (fs.protocol if isinstance(fs.protocol, tuple) else ()):
        fs.makedirs(posixpath.dirname(p), exist_ok=True)


def delete_files(paths: list[str], storage_options: dict[str, Any] | None = None) -> list[str]:
    """Delete files, best effort; returns the ones that could not be deleted."""
    failed = []
    for path in paths:
        fs, p = filesystem(path, storage_options)
        try:
            if fs.exists(p):
                fs.rm_file(p)
        except OSError as e:
            log.warning("could not delete %s: %s", path, e)
            failed.append(path)
    return failed


def file_size(path: str, storage_options: dict[str, Any] | None = None) -> int:
    fs, p = filesystem(path, storage_options)
    try:
        return int(fs.size(p))
    except FileNotFoundError as e:
        raise DataFileError(f"data file {path} is missing; the lake is damaged or its data_path moved") from e
