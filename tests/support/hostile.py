"""Hypothesis strategies for hostile input: strings, identifiers, nested Arrow types and their values.

Shared by the property-based suites (``tests/property``). The hypothesis profiles they run under (``ci``, the
default, and ``fuzz`` for ``make fuzz``) are registered in ``tests/conftest.py``.
"""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa
from hypothesis import strategies as st

# What DuckDB's nested-text reader and writer treat specially, plus blanks, NULL spellings and path characters.
SPECIAL_CHARS = "\"'(),:=[]{}\\ \t\n\r\v\f;./%*?_$"
UNICODE_CHARS = "é✓ßİı\u00a0\u2028\u200b😀\ufeff"
STRING_SEEDS = (
    "",
    " ",
    "NULL",
    "null",
    "nUlL",
    "it's",
    "it''s",
    "\\'",
    "\\",
    "a\\",
    "a}",
    "]",
    "[",
    "}",
    "{a=1}",
    "{'a': 1}",
    "['x']",
    "CAST('x' AS DATE)",
    "CONCAT('a', chr(0), 'b')",
    "..",
    "../x",
    "a/b",
)


def hostile_text(*, nul: bool = True, max_size: int = 8) -> st.SearchStrategy[str]:
    """Short strings made of the characters nested text, SQL and paths care about (``nul``: NUL too)."""
    chars = SPECIAL_CHARS + UNICODE_CHARS + "aZ0" + ("\x00" if nul else "")
    return st.one_of(
        st.text(alphabet=st.sampled_from(chars), max_size=max_size),
        st.sampled_from(STRING_SEEDS),
        st.text(max_size=4).filter(lambda s: "\x00" not in s or nul),
        st.lists(st.sampled_from(STRING_SEEDS), min_size=2, max_size=3).map("".join),
    )


def hostile_identifier() -> st.SearchStrategy[str]:
    """A non-empty name with quotes, dots, blanks, unicode, ``..`` or ``/`` (never NUL)."""
    return st.one_of(
        st.text(alphabet=st.sampled_from(SPECIAL_CHARS + UNICODE_CHARS + "aZ0-"), min_size=1, max_size=10),
        st.sampled_from(
            (
                "..",
                ".",
                "/",
                "../../escape",
                "a.b",
                "a b",
                '"',
                "'",
                '""',
                "x;DROP TABLE y;--",
                "ünï",
                "%2e%2e",
                "con",
                "a\\b",
                " lead",
                "trail ",
            )
        ),
    ).filter(lambda s: s.strip() != "" and "\x00" not in s)


def distinct_names(n_min: int, n_max: int) -> st.SearchStrategy[list[str]]:
    """Hostile identifiers that differ from each other in more than case (case-only twins are a separate error)."""
    return st.lists(hostile_identifier(), min_size=n_min, max_size=n_max, unique_by=lambda s: s.casefold())


def _json_text() -> st.SearchStrategy[str]:
    scalars = st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-(2**70), 2**70),
        st.floats(allow_nan=False, allow_infinity=False),
        hostile_text(nul=True),
    )
    documents = st.recursive(
        scalars, lambda c: st.lists(c, max_size=3) | st.dictionaries(hostile_text(), c, max_size=3), max_leaves=5
    )
    compact = documents.map(lambda v: json.dumps(v, ensure_ascii=False, separators=(",", ":")))
    spaced = documents.map(lambda v: json.dumps(v, ensure_ascii=True))
    return st.one_of(compact, compact, spaced)


LEAF_TYPES: tuple[pa.DataType, ...] = (
    pa.string(),
    pa.string(),
    pa.string(),
    pa.string(),
    pa.json_(),
    pa.int32(),
    pa.int64(),
    pa.float64(),
    pa.bool_(),
    pa.date32(),
    pa.timestamp("us"),
    pa.binary(),
    pa.uuid(),
    pa.decimal128(10, 3),
)
MAP_KEY_TYPES: tuple[pa.DataType, ...] = (pa.string(), pa.string(), pa.int32())


def nested_types(*, max_leaves: int = 6) -> st.SearchStrategy[pa.DataType]:
    """Random LIST / STRUCT / MAP types (hostile field names) over :data:`LEAF_TYPES`."""

    def extend(children: st.SearchStrategy[pa.DataType]) -> st.SearchStrategy[pa.DataType]:
        return st.one_of(
            st.builds(pa.list_, children),
            st.builds(pa.map_, st.sampled_from(MAP_KEY_TYPES), children),
            st.builds(
                lambda names, types: pa.struct(list(zip(names, types, strict=False))),
                distinct_names(1, 3),
                st.lists(children, min_size=3, max_size=3),
            ),
        )

    return st.recursive(st.sampled_from(LEAF_TYPES), extend, max_leaves=max_leaves).filter(pa.types.is_nested)


def values_of(dtype: pa.DataType, *, nul: bool = True) -> st.SearchStrategy[Any]:
    """Python values of ``dtype`` as ``as_py()`` gives them (maps as lists of pairs with unique keys)."""
    if isinstance(dtype, pa.JsonType):
        return _json_text()
    if isinstance(dtype, pa.UuidType):
        return st.uuids()
    if pa.types.is_string(dtype):
        return hostile_text(nul=nul)
    if pa.types.is_int32(dtype):
        return st.integers(-(2**31), 2**31 - 1)
    if pa.types.is_int64(dtype):
        return st.integers(-(2**63), 2**63 - 1)
    if pa.types.is_float64(dtype):
        return st.floats()
    if pa.types.is_boolean(dtype):
        return st.booleans()
    if pa.types.is_date32(dtype):
        return st.dates()
    if pa.types.is_timestamp(dtype):
        return st.datetimes()
    if pa.types.is_binary(dtype):
        return st.binary(max_size=6)
    if pa.types.is_decimal(dtype):
        return st.decimals(min_value=-(10**6), max_value=10**6, places=3, allow_nan=False, allow_infinity=False)
    if pa.types.is_map(dtype):
        entry = st.tuples(values_of(dtype.key_type, nul=nul), st.none() | values_of(dtype.item_type, nul=nul))
        return st.lists(entry, max_size=3, unique_by=lambda kv: kv[0])
    if pa.types.is_list(dtype):
        return st.lists(st.none() | values_of(dtype.value_type, nul=nul), max_size=3)
    if pa.types.is_struct(dtype):
        return st.fixed_dictionaries({f.name: st.none() | values_of(f.type, nul=nul) for f in dtype})
    raise TypeError(f"no strategy for {dtype}")


@st.composite
def nested_rows(draw: st.DrawFn, *, max_rows: int = 4, nul: bool = True) -> tuple[pa.DataType, list[Any]]:
    """A nested type and 1..max_rows values of it (NULL rows included)."""
    dtype = draw(nested_types())
    values = draw(st.lists(st.none() | values_of(dtype, nul=nul), min_size=1, max_size=max_rows))
    return dtype, values


def examples(share: float) -> int:
    """``max_examples`` for one test: ``share`` of the loaded profile's (``ci``: 100, ``fuzz``: 5000)."""
    from hypothesis import settings

    return max(1, round(settings.default.max_examples * share))
