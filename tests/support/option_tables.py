"""The README's option tables, rendered from the registry in ``pyspark_ducklake.options``.

``python -m tests.support.option_tables`` prints them; ``--write`` puts them into README.md between the
``options-<section>`` markers. ``tests/unit/test_options.py`` fails when README and registry differ.
"""

from __future__ import annotations

import sys

from pyspark_ducklake.options import SECTIONS, readme_tables, render_table, write_readme_tables
from tests.support.catalogs import REPO_ROOT

README = REPO_ROOT / "README.md"


def stale_sections() -> list[str]:
    """Sections whose README table differs from the registry (or whose markers are missing)."""
    tables = readme_tables(README.read_text())
    return [s for s in SECTIONS if tables[s] != render_table(s)]


if __name__ == "__main__":
    if "--write" in sys.argv[1:]:
        README.write_text(write_readme_tables(README.read_text()))
    else:
        for section in SECTIONS:
            print(f"{section}:\n{render_table(section)}\n")
