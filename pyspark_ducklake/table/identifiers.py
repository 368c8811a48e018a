"""Table identifiers: ``schema.table`` strings, ``(schema, table)`` tuples and DuckDB's quoted spelling."""

from __future__ import annotations

from collections.abc import Sequence

from pyspark_ducklake.exceptions import InvalidIdentifierError


def parse_identifier(identifier: str | Sequence[str]) -> tuple[str, str]:
    """``"main.t"``, ``("main", "t")`` or DuckDB's quoted spelling ``'"we.ird"."t"'`` to (schema, table); a bare
    name is in ``main``.

    A part wholly in double quotes is a quoted identifier (``""`` inside stands for ``"``), so names holding dots or
    quotes can be written in one string, as in DuckDB's SQL; other parts are taken as they are.

    Raises:
        InvalidIdentifierError: empty names or more than two parts.
    """
    if isinstance(identifier, str):
        quoted = _split_quoted(identifier) if '"' in identifier else None
        if quoted is not None:
            parts = quoted if len(quoted) != 1 else ["main", quoted[0]]
        else:
            parts = identifier.split(".") if "." in identifier else ["main", identifier]
            if any(p.startswith('"') for p in parts):
                parts = []  # meant as quoted, but not well formed: refuse rather than guess
    else:
        parts = list(identifier)
    if len(parts) != 2 or not all(isinstance(p, str) and p for p in parts):
        raise InvalidIdentifierError(
            f"table identifier {identifier!r} must be 'schema.table' (or a (schema, table) tuple for names with dots, "
            """or DuckDB's quoted spelling '"we.ird"."t"')"""
        )
    return parts[0], parts[1]


def _split_quoted(text: str) -> list[str] | None:
    """``'"a.b"."c""d"'`` to ``['a.b', 'c"d']`` (parts separated by dots, each bare or wholly double-quoted); None
    when ``text`` is not in that form (a quote inside a bare part)."""
    parts: list[str] = []
    i, n = 0, len(text)
    while True:
        if i < n and text[i] == '"':
            j, buf = i + 1, []
            while True:
                if j >= n:
                    return None
                if text[j] == '"':
                    if j + 1 < n and text[j + 1] == '"':
                        buf.append('"')
                        j += 2
                        continue
                    break
                buf.append(text[j])
                j += 1
            parts.append("".join(buf))
            i = j + 1
        else:
            j = text.find(".", i)
            j = n if j < 0 else j
            bare = text[i:j]
            if '"' in bare:
                return None
            parts.append(bare)
            i = j
        if i == n:
            return parts
        if text[i] != ".":
            return None
        i += 1


def format_identifier(schema: str, table: str) -> str:
    """``schema.table``, with a part in DuckDB's double quotes when it holds a dot or a quote, so that
    :func:`parse_identifier` reads it back to the same names."""

    def part(name: str) -> str:
        return '"' + name.replace('"', '""') + '"' if ("." in name or '"' in name or not name) else name

    return f"{part(schema)}.{part(table)}"
