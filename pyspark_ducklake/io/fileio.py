"""File access through fsspec, one filesystem per protocol and options."""

from __future__ import annotations

import datetime as dt
import logging
import posixpath
import threading
from typing import Any

import fsspec
from fsspec.core import url_to_fs
from fsspec.registry import known_implementations

from pyspark_ducklake.exceptions import DataFileError, NotInstalledError
from pyspark_ducklake.io.extras import require_extra
from pyspark_ducklake.io.object_stores import open_filesystem, store_of
from pyspark_ducklake.io.storage import S3_PROTOCOLS, describe_error, with_env_defaults

log = logging.getLogger(__name__)

_lock = threading.Lock()
_cache: dict[tuple[str, tuple[tuple[str, str], ...]], fsspec.AbstractFileSystem] = {}


def filesystem(path: str, storage_options: dict[str, Any] | None = None) -> tuple[fsspec.AbstractFileSystem, str]:
    """The filesystem for ``path`` and the path as that filesystem spells it.

    Raises:
        NotInstalledError: the protocol's fsspec implementation is missing (e.g. s3fs), or older than its extra's
            floor.
    """
    protocol = path.split("://", 1)[0] if "://" in path else "file"
    opts = storage_options or {}
    if protocol in S3_PROTOCOLS:
        opts = with_env_defaults(opts)
        # Other processes (executors, other writers) add files: a cached listing would hide them from reads.
        opts.setdefault("use_listings_cache", False)
    elif store_of(path) is not None:
        opts = {"use_listings_cache": False, **opts}  # as for S3
    key = (protocol, tuple(sorted((k, repr(v)) for k, v in opts.items())))
    with _lock:
        fs = _cache.get(key)
    if fs is None:
        extra = _extra(protocol)
        if extra is not None:
            require_extra(extra)
    try:
        if fs is None:
            fs = open_filesystem(protocol, opts)
            if fs is None:
                fs, _ = url_to_fs(path, **opts)
            with _lock:
                _cache[key] = fs
    except ImportError as e:
        extra = _extra(protocol) or protocol
        raise NotInstalledError(
            f"no filesystem for {protocol}:// paths: pip install 'pyspark-ducklake[{extra}]' ({e})"
        ) from e
    return fs, fs._strip_protocol(path) if protocol != "file" else path


def _extra(protocol: str) -> str | None:
    """The pip extra of a URL scheme's filesystem (None: fsspec's own, or one we do not ship)."""
    if protocol in S3_PROTOCOLS:
        return "s3"
    store = store_of(f"{protocol}://")
    return store.extra if store else None


def known_protocol(path: str) -> bool:
    """Whether fsspec has a filesystem for ``path``'s protocol (installed or not); a plain path is local."""
    if "://" not in path:
        return True
    protocol = path.split("://", 1)[0].lower()
    return protocol in known_implementations or protocol in fsspec.registry


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
        except Exception as e:  # any store failure: the file stays, an orphan that maintenance removes later
            log.warning("could not delete %s: %s", path, describe_error(e, storage_options))
            failed.append(path)
    return failed


def file_size(path: str, storage_options: dict[str, Any] | None = None) -> int:
    fs, p = filesystem(path, storage_options)
    try:
        return int(fs.size(p))
    except FileNotFoundError as e:
        raise DataFileError(f"data file {path} is missing; the lake is damaged or its data_path moved") from e


def list_files(root: str, storage_options: dict[str, Any] | None = None) -> list[tuple[str, dt.datetime | None]]:
    """Every file under the folder or URL ``root``, spelled as ``root`` spells paths (``s3://bucket/...`` stays a
    URL, a local folder stays a path), with its modification time when the store gives one. A missing root is empty.
    """
    fs, p = filesystem(root, storage_options)
    prefix = root.split("://", 1)[0] + "://" if "://" in root and not root.startswith("file://") else ""
    try:
        found = fs.find(p, detail=True)
    except FileNotFoundError:
        return []
    out = []
    for path, info in sorted(found.items()):
        if info.get("type", "file") != "file":
            continue
        out.append((_spelled_as_root(root, p, path, prefix), _mtime(info)))
    return out


def _spelled_as_root(root: str, stripped_root: str, path: str, prefix: str) -> str:
    if not prefix or path.startswith(prefix):
        return path
    base = stripped_root.rstrip("/")
    # abfss://container@account.dfs.core.windows.net/x lists as container/x: keep the root's spelling
    if base and path.startswith(base + "/"):
        return root.rstrip("/") + path[len(base) :]
    return prefix + path.lstrip("/")


def _mtime(info: dict[str, Any]) -> dt.datetime | None:
    for key in ("mtime", "LastModified", "last_modified", "updated"):
        value = info.get(key)
        if value is None:
            continue
        if isinstance(value, dt.datetime):
            return value if value.tzinfo else value.replace(tzinfo=dt.timezone.utc)
        try:
            return dt.datetime.fromtimestamp(float(value), dt.timezone.utc)
        except (TypeError, ValueError):
            continue
    return None


def incomplete_uploads(
    root: str, storage_options: dict[str, Any] | None = None
) -> list[tuple[str, str, dt.datetime | None]]:
    """S3 multipart uploads started under ``root`` and never completed or aborted (a writer killed mid-upload leaves
    them: invisible parts that are stored and billed): ``(url, upload id, initiated)``. Empty for other stores."""
    if root.split("://", 1)[0] not in S3_PROTOCOLS:
        return []
    fs, p = filesystem(root, storage_options)
    bucket, _, prefix = p.partition("/")
    scheme = root.split("://", 1)[0]
    out: list[tuple[str, str, dt.datetime | None]] = []
    markers: dict[str, str] = {}
    while True:
        page = fs.call_s3("list_multipart_uploads", Bucket=bucket, Prefix=prefix, **markers)
        for upload in page.get("Uploads", []):
            out.append(
                (f"{scheme}://{bucket}/{upload['Key']}", upload["UploadId"], _mtime({"mtime": upload.get("Initiated")}))
            )
        if not page.get("IsTruncated"):
            return out
        markers = {"KeyMarker": page["NextKeyMarker"], "UploadIdMarker": page["NextUploadIdMarker"]}


def abort_upload(url: str, upload_id: str, storage_options: dict[str, Any] | None = None) -> None:
    """Abort one S3 multipart upload (its parts are deleted)."""
    fs, p = filesystem(url, storage_options)
    bucket, _, key = p.partition("/")
    fs.call_s3("abort_multipart_upload", Bucket=bucket, Key=key, UploadId=upload_id)
