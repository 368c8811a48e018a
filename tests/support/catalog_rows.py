"""A SQLite catalog as rows, for comparing two catalogs that should be equal (built two ways, expired two ways)."""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, text


def catalog_rows(path: Path, *, skip: Collection[str] = (), unsized: Collection[str] = ()) -> dict[str, list[Any]]:
    """Every table of the SQLite catalog at ``path``, rows sorted, without the columns in ``skip`` and without
    ``file_size_bytes``/``footer_size`` in the tables ``unsized``; the catalog's folder is cut out of every text
    (so two catalogs in two folders compare equal)."""
    engine = create_engine(f"sqlite:///{path}")
    here = str(path.parent)
    out = {}
    with engine.connect() as conn:
        names = [r[0] for r in conn.execute(text("SELECT name FROM sqlite_master WHERE type = 'table'"))]
        for name in sorted(names):
            drop = set(skip) | ({"file_size_bytes", "footer_size"} if name in unsized else set())
            cols = [r[1] for r in conn.execute(text(f'PRAGMA table_info("{name}")')) if r[1] not in drop]
            quoted = ", ".join('"' + c + '"' for c in cols)
            rows = conn.execute(text(f'SELECT {quoted} FROM "{name}"'))
            out[name] = sorted(
                (tuple(v.replace(here, "") if isinstance(v, str) else v for v in r) for r in rows), key=repr
            )
    engine.dispose()
    return out
