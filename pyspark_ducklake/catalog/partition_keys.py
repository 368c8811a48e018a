"""Partition keys as text (``"k, bucket(4, id)"``): split into keys without SQL, for the options registry too."""

from __future__ import annotations


def split_keys(text: str) -> list[str]:
    """``"k, bucket(4, id)"`` to ``["k", "bucket(4, id)"]``: commas inside parentheses or double quotes stay."""
    items, depth, quoted, start = [], 0, False, 0
    for i, ch in enumerate(text):
        if ch == '"':
            quoted = not quoted
        elif not quoted and ch == "(":
            depth += 1
        elif not quoted and ch == ")":
            depth -= 1
        elif not quoted and depth == 0 and ch == ",":
            items.append(text[start:i])
            start = i + 1
    items.append(text[start:])
    return [item.strip() for item in items]


__all__ = ["split_keys"]
