"""Folder names for schemas and tables that can never leave the data path."""

from __future__ import annotations

import re

_UNSAFE = re.compile(r"[^A-Za-z0-9_.\-]")


def path_component(name: str) -> str:
    """A relative folder (with trailing ``/``) for a schema or table name: no separators, no leading dot."""
    safe = _UNSAFE.sub("_", name)
    if not safe:
        safe = "_"
    if safe.startswith("."):
        safe = "_" + safe[1:]
    return safe + "/"
