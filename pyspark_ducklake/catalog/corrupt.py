"""Catalog values that do not parse (a hand-edited or corrupt catalog): one typed error, naming the catalog table,
the column, the value and the snapshot being read, instead of a Python exception from deep inside.

The decoders raise it where the value is read (the column types of ``sqltypes``, the inlined-value and statistics
decoders); :func:`reading` adds the snapshot that a scan, a change feed or a commit was reading.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from pyspark_ducklake.exceptions import CorruptCatalogError, DuckLakeError, InlinedDataError

# what a decoder raises on text it cannot parse (ValueError covers pyarrow's ArrowInvalid, ArithmeticError
# decimal's InvalidOperation); our own errors are typed already, and only InlinedDataError among them is a parse error
_PARSE_ERRORS = (ValueError, ArithmeticError, TypeError)


def is_parse_error(error: BaseException) -> bool:
    """Whether a decoder raised ``error`` because the value did not parse (not, e.g., an unsupported type)."""
    if isinstance(error, DuckLakeError):
        return isinstance(error, InlinedDataError)
    return isinstance(error, _PARSE_ERRORS)


def corrupt(
    where: str,
    value: object,
    expected: str,
    *,
    snapshot: int | None = None,
    inserted_by: int | None = None,
) -> CorruptCatalogError:
    """The error for ``value`` read from ``where`` (``table.column``, and which row when known): ``snapshot`` is the
    one being read, ``inserted_by`` the one that wrote the row (an inlined value). An inlined value's is an
    ``InlinedDataError``."""
    shown = repr(value) if len(repr(value)) <= 200 else repr(value)[:200] + "…"
    by = "" if inserted_by is None else f" (inserted by snapshot {inserted_by})"
    error = (InlinedDataError if inserted_by is not None else CorruptCatalogError)(
        f"the catalog's {where}{by} holds {shown}, which is not {expected}: the catalog was edited by hand or written "
        f"by a faulty writer (DuckDB fails on it too); restore it from a backup, or correct that value{_at(snapshot)}"
    )
    error.snapshot_id = snapshot if inserted_by is None else inserted_by
    return error


@contextmanager
def reading(snapshot: int, last: int | None = None) -> Iterator[None]:
    """Name ``snapshot`` (or the range ``snapshot..last``) in a :class:`CorruptCatalogError` raised inside that names
    none yet."""
    try:
        yield
    except CorruptCatalogError as e:
        if e.snapshot_id is not None:
            raise
        error = type(e)(f"{e}{_at(snapshot, last)}")
        error.snapshot_id = snapshot
        raise error from e


def _at(snapshot: int | None, last: int | None = None) -> str:
    if snapshot is None:
        return ""
    return f" (reading snapshot {snapshot})" if last is None else f" (reading snapshots {snapshot}..{last})"


__all__ = ["corrupt", "is_parse_error", "reading"]
