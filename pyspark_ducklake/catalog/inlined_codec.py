"""Values of the catalog's inlined-data tables (``ducklake_inlined_data_<table_id>_<schema_version>``).

DuckDB 1.5.5 declares each user column of an inlined table with a backend-specific type
(``GetColumnTypeInternal`` / ``TypeIsNativelySupported`` in ``sqlite_metadata_manager.cpp`` and
``postgres_metadata_manager.cpp``, then translated by the sqlite/postgres scanners):

======================================  ===========  ====================================================
DuckLake type                           SQLite       PostgreSQL
======================================  ===========  ====================================================
boolean                                 BIGINT 0/1   boolean
int8, int16                             BIGINT       smallint
int32 / int64                           BIGINT       integer / bigint
uint8, uint16 / uint32                  BIGINT       integer / bigint
uint64, int128, uint128                 VARCHAR      varchar (decimal text)
float32 / float64                       VARCHAR      real / double precision (NaN, ±Infinity native)
decimal(p,s)                            VARCHAR      numeric(p,s)
date, timestamp*, timestamptz           VARCHAR      varchar (DuckDB text: 'infinity', BC, ns, '+00')
time                                    VARCHAR      time
timetz                                  VARCHAR      time with time zone ('12:34:56+00')
time_ns                                 VARCHAR      (none: DuckDB cannot create the table)
interval                                VARCHAR      interval
varchar, json                           VARCHAR      bytea (UTF-8; PostgreSQL text cannot hold NUL)
blob                                    BLOB         bytea
uuid                                    VARCHAR      uuid
list, struct, map                       VARCHAR      varchar (DuckDB's VARCHAR cast text)
======================================  ===========  ====================================================

Text values are DuckDB's own VARCHAR text (:func:`~pyspark_ducklake.catalog.stats_values.duckdb_text`), which
DuckDB reads back with ``CAST(col AS <type>)``. Nested values are written for DuckDB's *reader* (the VARCHAR to
LIST/STRUCT/MAP cast of ``vector_cast_helpers.cpp``), not copied from its writer, which it cannot always read back:

* A leaf string is left bare unless it is empty, starts/ends with whitespace, spells ``null`` or holds one of
  ``"'(),:=[]{}`` (DuckDB's own rule); then it is single-quoted with ``\\'`` and ``\\\\`` escapes. A map key that
  ends with a backslash is quoted too: bare, that backslash escapes the quote opening the value after ``=``.
  Struct field names are always quoted. SQL's ``''`` doubling is NOT an escape.
* A nested child (a list in a struct, a struct in a map...) is handed on by DuckDB's ``HandleString``, which
  counts brackets without seeing quotes: a ``}`` or ``]`` inside a quoted string closes the child early and the
  rest is unquoted, so the child no longer parses (or two map entries merge). Such a child is written as one
  quoted string (its text, escaped), which ``HandleString`` unquotes exactly; a child it would pass through intact
  stays bare, so ordinary values read like DuckDB's own text.

Lists of JSON are the exception, following DuckDB's json extension: ``[{"a":1}, 2]`` with raw elements, which
DuckDB parses as one JSON document, writing every element back minified and unable to express a SQL NULL element.

Some values have no inlined text DuckDB reads back exactly: a NUL inside a nested string on PostgreSQL (a
``varchar`` cannot hold it; top-level strings are ``bytea`` there), a NULL element of a JSON list, a JSON list
element not already in yyjson's minified form. :func:`inline_obstacle` names them and the writers put such a batch
into a Parquet file instead, where DuckDB reads every value exactly; inlining is a storage choice, so the data is
kept as given rather than refused. :func:`encode_values` raises ``UnsupportedTypeError`` if asked anyway.

DuckDB's own inlined writer is not that careful: inside a STRUCT it writes SQL (``'it''s'`` field names and
strings, ``CAST('2024-01-01' AS DATE)``, ``CAST('nan' AS VARCHAR)``) and it quotes JSON list elements. DuckDB
reads ``'it''s'`` strings back as ``its`` (and so does :func:`decode_values`, which follows DuckDB's reader
wherever DuckDB can read); the rest DuckDB cannot read at all (on PostgreSQL it even invalidates the DuckDB
instance), and :func:`decode_values` unwraps it instead. Text that neither can read raises
:class:`~pyspark_ducklake.exceptions.InlinedDataError`, never a wrong value.

On PostgreSQL, ``-0.0`` is bound as the text ``'-0'`` because psycopg2's ``-0.0`` literal loses its sign.

Infinite dates and timestamps decode to DuckDB's own sentinels (``±(2**31-1)`` days, ``±(2**63-1)`` units), the
values DuckDB itself exports to Arrow, so they round-trip; INTERVAL nanoseconds are truncated to microseconds as
DuckDB does; an INT128/UINT128 beyond 38 digits cannot be held by ``decimal128(38,0)`` and raises.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import re
from collections.abc import Sequence
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql
from sqlalchemy.sql.elements import ColumnElement

from pyspark_ducklake.catalog.format_version import FormatVersion
from pyspark_ducklake.catalog.inlined_duckdb import InlinedColumnType, duckdb_type, nested_storage, variant_storage
from pyspark_ducklake.catalog.inlined_duckdb import select_expression as duckdb_select_expression
from pyspark_ducklake.catalog.reserved import inlining_obstacle
from pyspark_ducklake.catalog.stats_values import (
    conform_array,
    duckdb_text,
    format_decimal,
    format_float,
    from_python,
    parse_blob,
    parse_duckdb_text,
    round_float32,
    storage_values,
    to_python,
)
from pyspark_ducklake.catalog.types import Column, arrow_type, decimal_params
from pyspark_ducklake.exceptions import InlinedDataError, UnsupportedTypeError

BACKENDS = ("sqlite", "postgresql", "duckdb")
_INTEGER_COLUMNS = frozenset({"boolean", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32"})
_PG_NATIVE: dict[str, sa.types.TypeEngine[Any]] = {
    "boolean": sa.BOOLEAN(),
    "int8": sa.SMALLINT(),
    "int16": sa.SMALLINT(),
    "int32": sa.INTEGER(),
    "int64": sa.BIGINT(),
    "uint8": sa.INTEGER(),
    "uint16": sa.INTEGER(),
    "uint32": sa.BIGINT(),
    "float32": sa.REAL(),
    "float64": sa.DOUBLE_PRECISION(),
    "time": sa.TIME(),
    "timetz": sa.TIME(timezone=True),
    "interval": postgresql.INTERVAL(),
    "varchar": postgresql.BYTEA(),
    "json": postgresql.BYTEA(),
    "blob": postgresql.BYTEA(),
    "uuid": sa.UUID(as_uuid=False),
}
_SPACES = " \t\n\v\f\r"  # DuckDB's StringUtil::CharacterIsSpace
_SPECIAL = frozenset("\"'(),:=[]{}")  # NestedToVarcharCast::LOOKUP_TABLE


def _backend(backend: str) -> str:
    name = backend.lower()
    if name == "postgres":
        name = "postgresql"
    if name not in BACKENDS:
        raise UnsupportedTypeError(f"inlined data on catalog backend {backend!r} is not supported")
    return name


def inlined_sql_type(column: Column, backend: str) -> sa.types.TypeEngine[Any]:
    """The SQL type DuckDB declares for ``column`` in an inlined-data table on ``backend``.

    Args:
        column: a top-level column (nested columns are one text column).
        backend: ``"sqlite"`` or ``"postgresql"`` (SQLAlchemy dialect names).

    Returns:
        A SQLAlchemy type rendering DuckDB's DDL name: ``BIGINT``/``VARCHAR``/``BLOB`` on SQLite; ``BOOLEAN``,
        ``SMALLINT``, ``INTEGER``, ``BIGINT``, ``REAL``, ``DOUBLE PRECISION``, ``NUMERIC(p, s)``, ``TIME``,
        ``INTERVAL``, ``BYTEA``, ``UUID`` or ``VARCHAR`` on PostgreSQL.
    """
    name = _backend(backend)
    t = column.type
    if name == "duckdb":
        return InlinedColumnType(duckdb_type(column))
    if name == "sqlite":
        if t in _INTEGER_COLUMNS:
            return sa.BIGINT()
        return sa.BLOB() if t == "blob" else sa.VARCHAR()
    dec = decimal_params(t)
    if dec is not None:
        return sa.NUMERIC(*dec)
    return _PG_NATIVE.get(t, sa.VARCHAR())


def inlined_select_expression(column: Column, backend: str, expression: ColumnElement[Any]) -> ColumnElement[Any]:
    """The expression to SELECT for ``column`` so that :func:`decode_values` gets exact values.

    psycopg2 turns PostgreSQL intervals into ``timedelta`` (a month becomes 30 days) and ``24:00:00`` into
    ``00:00:00``; reading those columns as text keeps them exact. Other columns are returned unchanged.
    """
    if _backend(backend) == "duckdb":
        return duckdb_select_expression(column, expression)
    if _backend(backend) == "postgresql" and column.type in ("interval", "time", "timetz", "time_ns"):
        return sa.cast(expression, sa.Text)
    return expression


# ---------------------------------------------------------------------------------------------------------------
# Nested text: rendering (DuckDB's VARCHAR cast of LIST / STRUCT / MAP).


def _needs_quotes(text: str) -> bool:
    if not text or text[0] in _SPACES or (len(text) >= 2 and text[-1] in _SPACES):
        return True
    return text.lower() == "null" or any(ch in _SPECIAL for ch in text)


def _quote(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _escape(text: str, *, map_key: bool = False) -> str:
    # A bare trailing backslash escapes the next character, which after a map key's '=' is the quote that opens
    # its value (DuckDB's own writer leaves it bare); elsewhere a blank or bracket follows, which it cannot escape.
    return _quote(text) if _needs_quotes(text) or (map_key and text.endswith("\\")) else text


def _is_json_list(column: Column) -> bool:
    return column.type == "list" and column.children[0].type == "json"


def _render_child(column: Column, value: Any, *, map_key: bool = False) -> str:
    if value is None:
        return "NULL"
    if column.is_nested:
        text = _render_raw(column, value)
        # DuckDB hands a child on through HandleString, whose bracket count ignores quotes: quote it unless intact
        return text if _unquote(text, 0, len(text)) == text else _quote(text)
    return _escape(duckdb_text(column, value), map_key=map_key)


def _render_raw(column: Column, value: Any) -> str:
    if column.type == "list":
        child = column.children[0]
        if child.type == "json":
            # the json extension casts JSON[] to VARCHAR without quoting its elements
            return "[" + ", ".join("NULL" if v is None else v for v in value) + "]"
        return "[" + ", ".join(_render_child(child, v) for v in value) + "]"
    if column.type == "struct":
        fields = (f"{_quote(c.name)}: {_render_child(c, value.get(c.name))}" for c in column.children)
        return "{" + ", ".join(fields) + "}"
    if column.type == "map":
        key, val = column.children
        return "{" + ", ".join(f"{_render_child(key, k, map_key=True)}={_render_child(val, v)}" for k, v in value) + "}"
    raise UnsupportedTypeError(f"column {column.name!r} of type {column.type!r} is not nested")


# ---------------------------------------------------------------------------------------------------------------
# Nested text: parsing, a port of DuckDB's VectorStringToList / Map / Struct splitting (vector_cast_helpers.cpp).


class _Scan:
    __slots__ = ("buf", "escaped", "pos")

    def __init__(self, buf: str) -> None:
        self.buf = buf
        self.pos = 0
        self.escaped = False

    def at_end(self) -> bool:
        return self.pos >= len(self.buf)

    def char(self) -> str:
        return self.buf[self.pos]

    def skip_space(self) -> None:
        while self.pos < len(self.buf) and self.buf[self.pos] in _SPACES:
            self.pos += 1
            self.escaped = False

    def skip_quoted(self) -> bool:
        """From an opening quote to its closing quote (backslash escapes the next character)."""
        quote = self.buf[self.pos]
        self.pos += 1
        while self.pos < len(self.buf):
            ch = self.buf[self.pos]
            set_escaped = False
            if ch == "\\":
                set_escaped = not self.escaped
            elif ch == quote and not self.escaped:
                return True
            self.escaped = set_escaped
            self.pos += 1
        return False

    def skip_brackets(self) -> bool:
        """From an opening bracket to the bracket that closes it."""
        closers: list[str] = []
        pairs = {"{": "}", "(": ")", "[": "]"}
        while self.pos < len(self.buf):
            ch = self.buf[self.pos]
            set_escaped = False
            if ch in "\"'":
                if not self.escaped and not self.skip_quoted():
                    return False
            elif ch in pairs:
                closers.append(pairs[ch])
            elif closers and ch == closers[-1]:
                closers.pop()
                if not closers:
                    return True
            elif ch == "\\":
                set_escaped = True
            self.escaped = set_escaped
            self.pos += 1
        return False

    def value_step(self, span: list[int]) -> bool:
        """One step inside a value; ``span`` is [start, end] of its non-blank text (start -1 before any)."""
        ch = self.buf[self.pos]
        set_escaped = False
        if ch in "\"'":
            if span[0] < 0:
                span[0] = self.pos
            if not self.escaped and not self.skip_quoted():
                return False
            span[1] = self.pos
        elif ch in "{([":
            if span[0] < 0:
                span[0] = self.pos
            if not self.skip_brackets():
                return False
            span[1] = self.pos
        elif ch == "\\":
            if span[0] < 0:
                span[0] = self.pos
            set_escaped = True
            span[1] = self.pos
        elif ch not in _SPACES:
            if span[0] < 0:
                span[0] = self.pos
            span[1] = self.pos
        self.escaped = set_escaped
        self.pos += 1
        return True

    def value_until(self, stops: str) -> tuple[int, int] | None:
        """Scan one value up to (not past) a character of ``stops``; None on malformed text."""
        span = [-1, -1]
        while self.pos < len(self.buf) and self.buf[self.pos] not in stops:
            if not self.value_step(span):
                return None
        if self.pos >= len(self.buf):
            return None
        return span[0], span[1] + 1


def _is_null_token(buf: str, span: tuple[int, int]) -> bool:
    start, end = span
    return start >= 0 and end - start == 4 and buf[start:end].lower() == "null"


def _unquote(buf: str, start: int, end: int, *, respect_scopes: bool = True) -> str:
    """DuckDB's HandleString: drop the quoting of the outermost level, keep everything inside brackets."""
    out: list[str] = []
    escaped = quoted = False
    quote_char = ""
    scopes: list[str] = []
    i = start
    while i < end:
        ch = buf[i]
        i += 1
        if escaped:
            out.append(ch)
            escaped = False
            continue
        if not scopes and ch == "\\" and (quoted or (i < end and buf[i] in "\"'")):
            escaped = True
            continue
        if not scopes and ch in "\"'":
            if quoted and ch == quote_char:
                quoted = False
                continue
            if not quoted:
                quoted, quote_char = True, ch
                continue
        if not quoted and scopes and ch == scopes[-1]:
            scopes.pop()
        if not quoted and respect_scopes and ch in "[{(":
            scopes.append({"[": "]", "{": "}", "(": ")"}[ch])
        out.append(ch)
    return "".join(out)


def _element(buf: str, span: tuple[int, int]) -> str | None:
    if span[0] < 0:
        return ""
    return None if _is_null_token(buf, span) else _unquote(buf, *span)


def _split_list(text: str) -> list[str | None]:
    s = _Scan(text)
    s.skip_space()
    if s.at_end() or s.char() != "[":
        raise ValueError(f"not a list: {text!r}")
    s.pos += 1
    s.skip_space()
    items: list[str | None] = []
    while not s.at_end():
        span = s.value_until(",]")
        if span is None:
            raise ValueError(f"malformed list: {text!r}")
        if s.char() != "]" or span[0] >= 0 or items:
            items.append(_element(text, span))
        if s.char() == "]":
            break
        s.pos += 1
        s.skip_space()
    else:
        raise ValueError(f"malformed list: {text!r}")
    s.pos += 1
    s.skip_space()
    if not s.at_end():
        raise ValueError(f"trailing text after list: {text!r}")
    return items


def _split_map(text: str) -> list[tuple[str | None, str | None]]:
    s = _Scan(text)
    s.skip_space()
    if s.at_end() or s.char() != "{":
        raise ValueError(f"not a map: {text!r}")
    s.pos += 1
    s.skip_space()
    entries: list[tuple[str | None, str | None]] = []
    if not s.at_end() and s.char() == "}":
        s.pos += 1
    else:
        while True:
            key_span = s.value_until("=")
            if key_span is None:
                raise ValueError(f"malformed map: {text!r}")
            s.pos += 1
            s.skip_space()
            value_span = s.value_until(",}")
            if value_span is None:
                raise ValueError(f"malformed map: {text!r}")
            entries.append((_element(text, key_span), _element(text, value_span)))
            if s.char() == "}":
                s.pos += 1
                break
            s.pos += 1
            s.skip_space()
    s.skip_space()
    if not s.at_end():
        raise ValueError(f"trailing text after map: {text!r}")
    return entries


def _split_struct(text: str, names: list[str]) -> dict[str, str | None]:
    s = _Scan(text)
    s.skip_space()
    if s.at_end() or s.char() not in "{(":
        raise ValueError(f"not a struct: {text!r}")
    closer = "}" if s.char() == "{" else ")"
    s.pos += 1
    s.skip_space()
    fields: dict[str, str | None] = {}
    if not s.at_end() and s.char() == closer:
        s.pos += 1
    elif closer == ")":
        index = 0
        while True:
            span = s.value_until(",)")
            if span is None or index >= len(names):
                raise ValueError(f"malformed struct: {text!r}")
            fields[names[index]] = _element(text, span)
            index += 1
            if s.char() == ")":
                s.pos += 1
                break
            s.pos += 1
            s.skip_space()
    else:
        while True:
            key = _struct_key(s, text, names)
            s.pos += 1
            s.skip_space()
            span = s.value_until(",}")
            if span is None:
                raise ValueError(f"malformed struct: {text!r}")
            fields[key] = _element(text, span)
            if s.char() == "}":
                s.pos += 1
                break
            s.pos += 1
            s.skip_space()
    s.skip_space()
    if not s.at_end():
        raise ValueError(f"trailing text after struct: {text!r}")
    return fields


def _struct_key(s: _Scan, text: str, names: list[str]) -> str:
    start = end = -1
    while not s.at_end() and s.char() != ":":
        ch = s.char()
        set_escaped = False
        if s.escaped:
            start = s.pos if start < 0 else start
            end = s.pos
        elif ch in "\"'":
            start = s.pos if start < 0 else start
            if not s.skip_quoted():
                raise ValueError(f"malformed struct: {text!r}")
            end = s.pos
        elif ch == "\\":
            start = s.pos if start < 0 else start
            set_escaped = True
            end = s.pos
        elif ch not in _SPACES:
            start = s.pos if start < 0 else start
            end = s.pos
        s.escaped = set_escaped
        s.pos += 1
    if s.at_end() or start < 0 or _is_null_token(text, (start, end + 1)):
        raise ValueError(f"malformed struct key in {text!r}")
    key = _unquote(text, start, end + 1, respect_scopes=False)
    if key in names:
        return key
    raw = text[start : end + 1]
    if len(raw) >= 2 and raw[0] == raw[-1] == "'" and raw[1:-1].replace("''", "'") in names:
        # DuckDB's inlined writer doubles quotes in field names (SQL style), which DuckDB then cannot read
        return raw[1:-1].replace("''", "'")
    raise ValueError(f"unknown struct field {key!r} in {text!r}")


def _split_json_list(text: str) -> list[str | None]:
    """Elements of a JSON-style list (``[{"a": 1}, NULL, "x"]``): raw JSON text, ``NULL`` for SQL NULL."""
    decoder = json.JSONDecoder()
    s = text.strip()
    if not s.startswith("[") or not s.endswith("]"):
        raise ValueError(f"not a JSON list: {text!r}")
    items: list[str | None] = []
    pos = 1
    while True:
        while pos < len(s) and s[pos] in _SPACES:
            pos += 1
        if s[pos] == "]" and not items:
            return items
        if s.startswith("NULL", pos):
            items.append(None)
            pos += 4
        else:
            _, end = decoder.raw_decode(s, pos)
            items.append(s[pos:end])
            pos = end
        while pos < len(s) and s[pos] in _SPACES:
            pos += 1
        if s[pos] == "]":
            if pos != len(s) - 1:
                raise ValueError(f"trailing text after JSON list: {text!r}")
            return items
        if s[pos] != ",":
            raise ValueError(f"malformed JSON list: {text!r}")
        pos += 1


# DuckDB's inlined writer renders leaves inside a STRUCT as SQL (``CAST('2024-01-01' AS DATE)``,
# ``CAST('nan' AS VARCHAR)``), which DuckDB itself then fails to read; such leaves are unwrapped here.
_SQL_CAST_RE = re.compile(r"\s*CAST\s*\(\s*'((?:[^']|'')*)'\s+AS\s+[A-Za-z_ ]+\)\s*", re.I | re.S)


def _parse_child(column: Column, text: str | None, utc: bool = False) -> Any:
    if text is None:
        return None
    if column.is_nested:
        return _parse_raw(column, text, utc)
    try:
        return parse_duckdb_text(column, text, timetz_utc=utc)
    except ValueError:
        m = _SQL_CAST_RE.fullmatch(text)
        if m is None:
            raise
        return parse_duckdb_text(column, m.group(1).replace("''", "'"), timetz_utc=utc)


def _parse_raw(column: Column, text: str, utc: bool = False) -> Any:
    if column.type == "list":
        child = column.children[0]
        if child.type == "json":
            try:
                return _split_json_list(text)
            except ValueError:
                # DuckDB's inlined writer quotes JSON list elements (['{"a":1}']), which DuckDB cannot read back
                return _split_list(text)
        return [_parse_child(child, item, utc) for item in _split_list(text)]
    if column.type == "struct":
        fields = _split_struct(text, [c.name for c in column.children])
        return {c.name: _parse_child(c, fields.get(c.name), utc) for c in column.children}
    if column.type == "map":
        key, val = column.children
        return [(_parse_child(key, k, utc), _parse_child(val, v, utc)) for k, v in _split_map(text)]
    raise UnsupportedTypeError(f"column {column.name!r} of type {column.type!r} is not nested")


# ---------------------------------------------------------------------------------------------------------------
# Python values <-> nested storage values (lists, dicts by field name, lists of (key, value) pairs).


def _from_python_tree(column: Column, value: Any) -> Any:
    if value is None:
        return None
    if column.type == "list":
        child = column.children[0]
        if child.type == "json":
            return [None if v is None else str(v) for v in value]
        return [_from_python_tree(child, v) for v in value]
    if column.type == "struct":
        if isinstance(value, dict):
            return {c.name: _from_python_tree(c, value.get(c.name)) for c in column.children}
        return {c.name: _from_python_tree(c, v) for c, v in zip(column.children, value, strict=True)}
    if column.type == "map":
        key, val = column.children
        pairs = value.items() if isinstance(value, dict) else value
        return [(_from_python_tree(key, k), _from_python_tree(val, v)) for k, v in pairs]
    return from_python(column, value)


def _to_python_tree(column: Column, value: Any) -> Any:
    if value is None:
        return None
    if column.type == "list":
        child = column.children[0]
        return list(value) if child.type == "json" else [_to_python_tree(child, v) for v in value]
    if column.type == "struct":
        return {c.name: _to_python_tree(c, value.get(c.name)) for c in column.children}
    if column.type == "map":
        key, val = column.children
        return [(_to_python_tree(key, k), _to_python_tree(val, v)) for k, v in value]
    return to_python(column, value)


def render_nested(column: Column, value: Any) -> str:
    """DuckDB's VARCHAR cast text of a LIST / STRUCT / MAP value (not NULL).

    Args:
        column: the nested column.
        value: a Python value as pyarrow's ``as_py()`` gives it: a list; a dict by field name (or a sequence in
            field order) for a struct; a list of ``(key, value)`` pairs (or a dict) for a map.

    Returns:
        Text that DuckDB's ``CAST(text AS <type>)`` and :func:`parse_nested` read back as exactly ``value``.
    """
    return _render_raw(column, _from_python_tree(column, value))


def parse_nested(column: Column, text: str) -> Any:
    """The Python value of DuckDB's text of a LIST / STRUCT / MAP (the inverse of :func:`render_nested`).

    Also reads what DuckDB writes itself (bare strings such as ``[a, x y]``, ``NULL`` in any case, ``{k=v}``
    maps, ``(1, 2)`` unnamed structs). Maps come back as lists of ``(key, value)`` pairs, like ``as_py()``.

    Raises:
        ValueError: the text is malformed.
    """
    return _to_python_tree(column, _parse_raw(column, text))


# ---------------------------------------------------------------------------------------------------------------
# Arrow <-> storage values.


def storage_tree(column: Column, array: pa.Array) -> list[Any]:
    """Storage values of an array of ``column``'s type: leaves as in
    :func:`~pyspark_ducklake.catalog.stats_values.storage_values`, lists as lists, structs as dicts by field name,
    maps as lists of ``(key, value)`` pairs, NULL as None.
    """
    if not column.is_nested:
        return storage_values(column, array)
    valid = array.is_valid().to_pylist()
    if column.type == "struct":
        children = [storage_tree(c, array.field(i)) for i, c in enumerate(column.children)]
        return [
            {c.name: values[i] for c, values in zip(column.children, children, strict=True)} if ok else None
            for i, ok in enumerate(valid)
        ]
    offsets = array.offsets.to_pylist()
    if column.type == "list":
        child = storage_tree(column.children[0], array.values)
        return [child[offsets[i] : offsets[i + 1]] if ok else None for i, ok in enumerate(valid)]
    keys = storage_tree(column.children[0], array.keys)
    items = storage_tree(column.children[1], array.items)
    return [
        list(zip(keys[offsets[i] : offsets[i + 1]], items[offsets[i] : offsets[i + 1]], strict=True)) if ok else None
        for i, ok in enumerate(valid)
    ]


def _leaf_to_arrow(column: Column, values: list[Any]) -> pa.Array:
    target = arrow_type(column)
    t = column.type
    if t == "uuid":
        storage = pa.array([None if v is None else v.bytes for v in values], pa.binary(16))
        return pa.ExtensionArray.from_storage(target, storage)
    if t == "json":
        return pa.ExtensionArray.from_storage(target, pa.array(values, pa.string()))
    if t == "interval":
        values = [None if v is None else (v[0], v[1], _interval_nanos(column, v[2])) for v in values]
    elif t in ("int128", "uint128"):
        values = [None if v is None else Decimal(v) for v in values]
    try:
        return pa.array(values, target)
    except (pa.ArrowInvalid, OverflowError) as exc:
        raise UnsupportedTypeError(
            f"column {column.name!r}: value does not fit Arrow type {target}: {exc}; read the other columns (leave "
            f"{column.name!r} out of the columns you select) or have DuckDB cast it to text"
        ) from exc


def _interval_nanos(column: Column, micros: int) -> int:
    nanos = micros * 1000
    if not -(2**63) <= nanos < 2**63:
        raise UnsupportedTypeError(f"column {column.name!r}: interval of {micros} microseconds overflows nanoseconds")
    return nanos


def _raw_to_arrow(column: Column, values: list[Any]) -> pa.Array:
    if not column.is_nested:
        return _leaf_to_arrow(column, values)
    target = arrow_type(column)
    mask = pa.array([v is None for v in values], pa.bool_())
    if column.type == "struct":
        children = [_raw_to_arrow(c, [None if v is None else v.get(c.name) for v in values]) for c in column.children]
        return pa.StructArray.from_arrays(children, fields=list(target), mask=mask)
    offsets = [0]
    flat: list[Any] = []
    for v in values:
        if v is not None:
            flat.extend(v)
        offsets.append(len(flat))
    offset_array = pa.array(offsets, pa.int32())
    if column.type == "list":
        child = _raw_to_arrow(column.children[0], flat)
        return pa.ListArray.from_arrays(offset_array, child, type=target, mask=mask)
    keys = _raw_to_arrow(column.children[0], [k for k, _ in flat])
    items = _raw_to_arrow(column.children[1], [v for _, v in flat])
    return pa.MapArray.from_arrays(offset_array, keys, items, type=target, mask=mask)


def python_to_arrow(column: Column, values: Sequence[Any]) -> pa.Array:
    """An array of exactly ``arrow_type(column)`` from Python values (as ``as_py()`` gives them; NULL = None).

    Unlike ``pa.array`` this handles UUID / JSON extension types at any nesting level and DuckDB's temporal
    sentinels given as storage integers.
    """
    return _raw_to_arrow(column, [_from_python_tree(column, v) for v in values])


# ---------------------------------------------------------------------------------------------------------------
# Backend encodings.


def _encode_leaf(column: Column, value: Any, backend: str) -> Any:
    t = column.type
    if backend in ("sqlite", "duckdb"):  # a DuckDB file casts the same text to the column's type
        if t == "boolean":
            return 1 if value else 0
        if t in _INTEGER_COLUMNS:
            return int(value)
        if t == "blob":
            return bytes(value)
        return duckdb_text(column, value)
    if t == "boolean":
        return bool(value)
    if t in _INTEGER_COLUMNS:
        return int(value)
    if t in ("float32", "float64"):
        if value == 0 and math.copysign(1.0, value) < 0:
            # psycopg2 sends -0.0 as the numeric literal -0.0, which PostgreSQL folds to +0; text keeps the sign
            return "-0"
        return float(value)
    if t in ("varchar", "json"):
        return str(value).encode()
    if t == "blob":
        return bytes(value)
    if t == "time" and value < 86400 * 10**6:
        seconds, micros = divmod(value, 10**6)
        return dt.time(seconds // 3600, seconds // 60 % 60, seconds % 60, micros)
    dec = decimal_params(t)
    if dec is not None:
        return Decimal(format_decimal(value, *dec))
    return duckdb_text(column, value)  # time 24:00:00, interval, uuid and everything PostgreSQL stores as text


_LOWER_HEX_ESCAPE = re.compile(r"\\u00[01][a-f]")  # yyjson writes \u001F where Python writes \u001f


def _json_element_obstacle(text: str) -> str | None:
    """Why DuckDB would not give back ``text`` as it is when it reads an inlined JSON list, or None.

    DuckDB parses the list as one JSON document and writes each element back minified (yyjson): only elements
    already in that form survive. Python's compact dump agrees with yyjson's except for floats (``1e2`` comes back
    as ``100.0``) and control characters (``\\u001F`` in upper case), so elements holding those are refused too.
    """

    def no_constants(name: str) -> Any:
        raise ValueError(name)

    try:
        value = json.loads(text, parse_float=lambda _: no_constants("float"), parse_constant=no_constants)
    except ValueError:
        return f"the JSON list element {text[:40]!r} is not JSON, or holds a float or NaN"
    canonical = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    if canonical != text:
        return f"DuckDB would read the JSON list element {text[:40]!r} back as {canonical[:40]!r}"
    if _LOWER_HEX_ESCAPE.search(text):
        return f"DuckDB would write the control characters of the JSON list element {text[:40]!r} in upper case"
    return None


def _span(array: pa.Array, values: pa.Array) -> pa.Array:
    """The part of ``values`` (a list's values, a map's keys or items) that the rows of ``array`` use."""
    # .values / .keys / .items ignore a slice, and flatten() cannot build JSON arrays: go by the offsets
    first, last = (array.offsets[0].as_py(), array.offsets[-1].as_py()) if len(array) else (0, 0)
    return values.slice(first, last - first)


def _obstacle(column: Column, array: pa.Array, backend: str) -> str | None:
    t = column.type
    if t == "list":
        child = column.children[0]
        valid = array.filter(array.is_valid()) if array.null_count else array
        values = _span(valid, valid.values)
        if child.type != "json":
            return _obstacle(child, values, backend)
        if values.null_count:
            return "a NULL element of a JSON list (DuckDB reads the list as one JSON document)"
        for text in values.storage.to_pylist():
            why = _json_element_obstacle(text)
            if why is not None:
                return why
        return None
    if t == "map":
        valid = array.filter(array.is_valid()) if array.null_count else array
        keys, items = _span(valid, valid.keys), _span(valid, valid.items)
        return _obstacle(column.children[0], keys, backend) or _obstacle(column.children[1], items, backend)
    if t == "struct":
        for child, values in zip(column.children, array.flatten(), strict=True):
            why = _obstacle(child, values, backend)
            if why is not None:
                return why
        return None
    if backend == "postgresql" and t in ("varchar", "json"):
        storage = array.storage if isinstance(array, pa.ExtensionArray) else array
        if pc.any(pc.match_substring(storage, "\x00")).as_py():
            return "a NUL character in a nested string (a PostgreSQL varchar cannot hold it)"
    return None


def inline_obstacle(column: Column, array: pa.Array | pa.ChunkedArray, backend: str) -> str | None:
    """Why ``array`` cannot be inlined into ``column`` on ``backend`` so that DuckDB reads it back exactly, or None.

    Only nested columns have such values: a NUL in a nested string on PostgreSQL, a NULL or non-minified element
    of a JSON list (see :func:`_json_element_obstacle`). The caller writes those rows to Parquet instead.

    Raises:
        UnsupportedTypeError: an unsupported backend.
        SchemaMismatchError: the array cannot be cast to the column's type.
    """
    name = _backend(backend)
    if not column.is_nested:
        return None
    return _obstacle(column, conform_array(column, array), name)


def table_inline_obstacle(columns: Sequence[Column], data: pa.Table, backend: str, fmt: FormatVersion) -> str | None:
    """Why ``data`` cannot be inlined: the table never is (``reserved.inlining_obstacle``), or the
    :func:`inline_obstacle` of the first column of ``data`` (matched by name) that has one, naming it."""
    why = inlining_obstacle(columns, backend, fmt)
    if why is not None:
        return why
    for column in columns:
        if column.is_nested and column.name in data.column_names:
            why = inline_obstacle(column, data.column(column.name), backend)
            if why is not None:
                return f"column {column.name!r}: {why}"
    return None


def encode_values(column: Column, array: pa.Array | pa.ChunkedArray, backend: str) -> list[Any]:
    """The values to bind for one top-level column of an inlined-data table, NULL as ``None``.

    Args:
        column: the top-level column.
        array: its values (cast to ``arrow_type(column)`` when the type differs).
        backend: ``"sqlite"`` or ``"postgresql"``.

    Returns:
        One Python value per row, matching :func:`inlined_sql_type`: ints, ``bytes``, ``Decimal``,
        ``datetime.time``, ``float`` (PostgreSQL) or DuckDB's text.

    Raises:
        UnsupportedTypeError: an unsupported backend, or a value DuckDB could not read back.
        SchemaMismatchError: the array cannot be cast to the column's type.
    """
    name = _backend(backend)
    array = conform_array(column, array)
    raw = storage_tree(column, array)
    if not column.is_nested:
        return [None if v is None else _encode_leaf(column, v, name) for v in raw]
    why = _obstacle(column, array, name)
    if why is not None:
        raise UnsupportedTypeError(f"column {column.name!r} cannot be inlined: {why}; write it to Parquet")
    return [None if v is None else _render_raw(column, v) for v in raw]


def _decode_leaf(column: Column, value: Any, utc: bool = False) -> Any:
    t = column.type
    if isinstance(value, (memoryview, bytearray)):
        value = bytes(value)
    if t == "blob":
        return value if isinstance(value, bytes) else parse_blob(str(value))
    if isinstance(value, bytes):
        value = value.decode()  # PostgreSQL BYTEA of a VARCHAR / JSON column
    if isinstance(value, str):
        return parse_duckdb_text(column, value, timetz_utc=utc)
    if t == "float32":
        return round_float32(float(value))
    if t == "float64":
        return float(value)
    if t == "boolean":
        return bool(value)
    if decimal_params(t) is not None and isinstance(value, float):
        return Decimal(format_float(value))
    # ints, Decimal, datetime.time / date / datetime, timedelta, uuid.UUID
    return from_python(column, value)


def decode_values(column: Column, values: Sequence[Any], backend: str, *, timetz_utc: bool = False) -> pa.Array:
    """An Arrow array of exactly ``arrow_type(column)`` from the stored values of one inlined column.

    ``timetz`` values read as their time with the offset dropped (DuckDB's Arrow read), or with ``timetz_utc`` as
    their UTC time (what a flush writes to Parquet).

    Reads what DuckDB writes (see the module docstring) as well as :func:`encode_values` output, and the Python
    types drivers return: ``str``/``int``/``float`` from sqlite3; ``bool``, ``Decimal``, ``float`` (NaN and
    infinities), ``memoryview``/``bytes`` (BYTEA), ``uuid.UUID`` or ``str``, ``datetime.time`` and interval text
    from psycopg2 (a ``timedelta`` interval is accepted but has lost its months: select intervals as text, see
    :func:`inlined_select_expression`).

    Raises:
        InlinedDataError: a nested value's text is malformed (DuckDB cannot read it either).
        ValueError: a stored text is not a value of the column's type.
        UnsupportedTypeError: a value does not fit the Arrow type (e.g. an INT128 beyond 38 digits).
    """
    name = _backend(backend)
    raw: list[Any] = []
    for value in values:
        if value is None:
            raw.append(None)
        elif column.type == "variant" and name == "duckdb":
            raw.append(variant_storage(value))
        elif column.is_nested and name == "duckdb" and not isinstance(value, str):
            raw.append(nested_storage(column, value, _parse_child))
        elif column.is_nested:
            text = bytes(value).decode() if isinstance(value, (bytes, memoryview, bytearray)) else str(value)
            try:
                raw.append(_parse_raw(column, text, timetz_utc))
            except ValueError as e:
                raise InlinedDataError(
                    f"column {column.name!r}: the inlined value {text[:200]!r} is not a {column.type} DuckDB can "
                    f"read ({e}); DuckDB's own writer leaves such text for some STRUCT values, which DuckDB cannot "
                    "read either: delete or rewrite the row with the writer that made it"
                ) from e
        else:
            raw.append(_decode_leaf(column, value, timetz_utc))
    return _raw_to_arrow(column, raw)


__all__ = [
    "BACKENDS",
    "decode_values",
    "encode_values",
    "inline_obstacle",
    "inlined_select_expression",
    "inlined_sql_type",
    "parse_nested",
    "python_to_arrow",
    "render_nested",
    "storage_tree",
    "table_inline_obstacle",
]
