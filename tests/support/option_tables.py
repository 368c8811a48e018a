"""The option tables of the docs, rendered from the registry in ``pyspark_ducklake.options``.

``python -m tests.support.option_tables`` prints them; ``--write`` puts each between its ``options-<section>``
markers, in whichever page of README.md and docs/ holds them (``tests.support.doc_blocks``).
``tests/unit/test_options.py`` fails when a page and the registry differ.
"""

from __future__ import annotations

import sys

from pyspark_ducklake.options import SECTIONS, render_table
from tests.support import doc_blocks


def blocks() -> dict[str, str]:
    """Every option table by its marker name."""
    return {f"options-{section}": render_table(section) for section in SECTIONS}


def stale_sections() -> list[str]:
    """Sections whose docs table differs from the registry (or whose markers are missing)."""
    return [name.removeprefix("options-") for name in doc_blocks.stale(blocks())]


if __name__ == "__main__":
    if "--write" in sys.argv[1:]:
        for path in doc_blocks.write(blocks()):
            print(f"wrote {path}")
    else:
        for section in SECTIONS:
            print(f"{section}:\n{render_table(section)}\n")
