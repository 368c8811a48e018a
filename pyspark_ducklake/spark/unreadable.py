"""Columns of a type this library cannot read, in a Spark DataFrame of the fast read path.

Each becomes a Python UDF (typed ``binary``) that raises the column's
:class:`~pyspark_ducklake.exceptions.UnsupportedTypeError`: Spark's optimizer prunes it when the query does not
select it, so the other columns stay readable. Not ``raise_error()``: Spark evaluates a projection over a local
relation (the inlined rows) while optimizing, before pruning, and would raise for every query.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from pyspark_ducklake.catalog.types import Column, unreadable_type


class _Refuse:
    """A picklable UDF body raising the column's error."""

    def __init__(self, name: str, type_name: str) -> None:
        self.name = name
        self.type_name = type_name

    def __call__(self) -> bytes:
        raise unreadable_type(self.name, self.type_name)


def with_unreadable(frame: DataFrame, columns: Sequence[Column], order: Sequence[str]) -> DataFrame:
    """``frame`` with an erroring column for each of ``columns``, all in the table's ``order``."""
    with warnings.catch_warnings():
        # PySpark warns that it cannot infer a pandas eval type from the hints; this is a plain row UDF.
        warnings.simplefilter("ignore", UserWarning)
        errors = {c.name: F.udf(_Refuse(c.name, c.type), T.BinaryType())() for c in columns}
    return frame.select(
        *[errors[n].alias(n) if n in errors else F.col("`" + n.replace("`", "``") + "`") for n in order]
    )


__all__ = ["with_unreadable"]
