"""Folder names for schemas and tables that can never leave the data path, and the containment checks that keep
writes and deletions inside it whatever the catalog says (a catalog is not trusted input)."""

from __future__ import annotations

import hashlib
import os
import posixpath
import re

from pyspark_ducklake.exceptions import DataFileError

_UNSAFE = re.compile(r"[^A-Za-z0-9_.\-]")
MAX_FOLDER_NAME_BYTES = 255  # NAME_MAX of local filesystems; DuckDB fails on longer Hive folders too
_NAME_HASH_CHARS = 16


def path_component(name: str) -> str:
    """A relative folder (with trailing ``/``) for a schema or table name: no separators, no leading dot, at most
    255 bytes. A longer name (DuckDB names such a folder after it and then fails every write) is cut, and a hash of
    the whole name keeps it apart from other names cut alike; the catalog records the folder, so DuckDB finds it."""
    safe = _UNSAFE.sub("_", name)  # ASCII only: one byte per character
    if not safe:
        safe = "_"
    if safe.startswith("."):
        safe = "_" + safe[1:]
    if len(safe) > MAX_FOLDER_NAME_BYTES:
        digest = hashlib.sha256(name.encode()).hexdigest()[:_NAME_HASH_CHARS]
        safe = safe[: MAX_FOLDER_NAME_BYTES - _NAME_HASH_CHARS - 1] + "-" + digest
    return safe + "/"


def _split(path: str) -> tuple[str, str]:
    """``("s3://", "bucket/key")`` for a URL, ``("", "/abs/path")`` for a local path."""
    if path.startswith("file://"):
        return "", path[len("file://") :]
    if "://" in path:
        scheme, rest = path.split("://", 1)
        return scheme + "://", rest
    return "", path


def normalize(path: str) -> str:
    """``path`` with ``.``, ``..`` and doubled separators resolved lexically (a URL keeps its scheme); the
    identity on paths this library writes."""
    prefix, rest = _split(path)
    if not rest:
        return path
    trailing = rest.endswith("/")
    norm = posixpath.normpath(rest)
    if norm.startswith("//"):
        norm = "/" + norm.lstrip("/")
    if norm == ".":
        norm = ""
    return prefix + norm + ("/" if trailing and not norm.endswith("/") else "")


def is_inside(path: str, root: str) -> bool:
    """Whether ``path`` lies strictly below the folder ``root``, after resolving ``..`` lexically and, for local
    paths, symbolic links (a link inside the data path may point anywhere)."""
    p_prefix, _ = _split(path)
    r_prefix, _ = _split(root)
    if p_prefix != r_prefix:
        return False
    base = normalize(root).rstrip("/") + "/"
    full = normalize(path)
    if not full.startswith(base) or full == base:
        return False
    if not p_prefix:
        real_base = os.path.realpath(base.rstrip("/")) + os.sep
        return os.path.realpath(full).startswith(real_base)
    return True


def checked_table_dir(table_dir: str, data_path: str, table: str) -> str:
    """``table_dir`` if it lies inside the data path, for writing files into it.

    Raises:
        DataFileError: the catalog places the table's folder outside the data path; nothing was written.
    """
    if not is_inside(table_dir, data_path):
        raise DataFileError(
            f"the folder of table {table} ({table_dir}) lies outside the data path {data_path}: refusing to write "
            "there. Reads still work; correct its path in the catalog (ducklake_schema / ducklake_table) to write"
        )
    return table_dir


def checked_delete_file(path: str, table_dir: str, data_path: str) -> str:
    """``path``, a delete file's resolved path, if it lies inside the data path or the table's folder: DuckDB writes
    every delete file into the table's folder, so a row pointing elsewhere is never read (data files registered with
    ``ducklake_add_data_files`` may live anywhere; delete files may not).

    Raises:
        DataFileError: the row points outside; nothing is read from there.
    """
    if is_inside(path, data_path) or is_inside(path, table_dir):
        return path
    raise DataFileError(
        f"a delete file row of the catalog points outside the data path {data_path} ({path}): refusing to read it. "
        "DuckDB writes delete files only into the table's folder; correct the row's path in ducklake_delete_file"
    )


def check_folder_names(relative: str, what: str) -> None:
    """Every segment of the relative folder ``relative`` fits a folder name.

    Raises:
        DataFileError: a segment is longer than 255 bytes.
    """
    for segment in relative.split("/"):
        size = len(segment.encode())
        if size > MAX_FOLDER_NAME_BYTES:
            raise DataFileError(
                f"{what}: the folder name {segment[:60]}… is {size} bytes once URL-encoded, more than the "
                f"{MAX_FOLDER_NAME_BYTES} a folder name can hold; partition by a shorter value or a transform "
                "(nothing was written)"
            )
