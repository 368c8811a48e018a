"""Generated tables are found by their markers in whichever page holds them (tests/support/doc_blocks.py): the
generators keep working when a table moves between pages or a merge brings a stale copy."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.support import doc_blocks


def tree(tmp_path: Path, pages: dict[str, str]) -> Path:
    (tmp_path / "docs").mkdir()
    (tmp_path / "README.md").write_text("# project\n")
    for name, text in pages.items():
        (tmp_path / name).write_text(text)
    return tmp_path


def test_write_finds_the_page_and_replaces_only_the_block(tmp_path: Path) -> None:
    root = tree(
        tmp_path,
        {
            "docs/a.md": "# A\n\nbefore\n<!-- t:start -->\n| old |\n<!-- t:end -->\nafter\n",
            "docs/b.md": "# B\n<!-- u:start -->\n<!-- u:end -->\n",
        },
    )
    assert doc_blocks.stale({"t": "| new |", "u": "| u |"}, root) == ["t", "u"]
    changed = doc_blocks.write({"t": "| new |", "u": "| u |"}, root)
    assert sorted(p.name for p in changed) == ["a.md", "b.md"]
    assert (root / "docs/a.md").read_text() == "# A\n\nbefore\n<!-- t:start -->\n| new |\n<!-- t:end -->\nafter\n"
    assert (root / "docs/b.md").read_text() == "# B\n<!-- u:start -->\n| u |\n<!-- u:end -->\n"
    assert doc_blocks.stale({"t": "| new |", "u": "| u |"}, root) == []
    assert doc_blocks.write({"t": "| new |"}, root) == []  # up to date: nothing rewritten


def test_a_block_moved_to_another_page_is_found_there(tmp_path: Path) -> None:
    root = tree(tmp_path, {"docs/a.md": "# A\n", "docs/b.md": "# B\n<!-- t:start -->\nx\n<!-- t:end -->\n"})
    assert doc_blocks.locate("t", root) == root / "docs/b.md"
    (root / "docs/b.md").write_text("# B\n")
    (root / "README.md").write_text("# project\n<!-- t:start -->\nx\n<!-- t:end -->\n")
    assert doc_blocks.locate("t", root) == root / "README.md"
    assert doc_blocks.read("t", root) == "x"


def test_missing_or_doubled_markers_name_the_files(tmp_path: Path) -> None:
    root = tree(
        tmp_path,
        {
            "docs/a.md": "<!-- t:start -->\nx\n<!-- t:end -->\n",
            "docs/b.md": "<!-- t:start -->\ny\n<!-- t:end -->\n",  # a merge left a second copy
        },
    )
    with pytest.raises(SystemExit, match=r"found in docs/a\.md, docs/b\.md"):
        doc_blocks.write({"t": "z"}, root)
    assert doc_blocks.read("t", root) is None and doc_blocks.stale({"t": "x"}, root) == ["t"]
    with pytest.raises(SystemExit, match=r"'missing'.*found in no file"):
        doc_blocks.locate("missing", root)
    (root / "docs/b.md").write_text("<!-- t:start -->\nno end\n")
    (root / "docs/a.md").write_text("")
    with pytest.raises(SystemExit, match=r"has no <!-- t:end -->"):
        doc_blocks.write({"t": "z"}, root)


def test_anchor_links_point_at_the_page_with_the_heading(tmp_path: Path) -> None:
    """A table text linking ``#object-storage`` lands as ``object-storage.md`` (the page's title) or
    ``page.md#section``; an anchor of the page itself stays; an unknown one is left for the link test."""
    root = tree(
        tmp_path,
        {
            "docs/object-storage.md": "# Object storage\n\n## Google Cloud Storage and Azure\n",
            "docs/config.md": "# Configuration\n\n## Retries\n<!-- t:start -->\n<!-- t:end -->\n",
        },
    )
    table = "| a | see [Object storage](#object-storage), [GCS](#google-cloud-storage-and-azure), [r](#retries), [x](#nope) |"
    doc_blocks.write({"t": table}, root)
    assert doc_blocks.read("t", root) == (
        "| a | see [Object storage](object-storage.md), [GCS](object-storage.md#google-cloud-storage-and-azure), "
        "[r](#retries), [x](#nope) |"
    )
    assert doc_blocks.stale({"t": table}, root) == []


def test_code_blocks_are_sorted_by_the_rule(tmp_path: Path) -> None:
    """python runs; a shell block of the command line only runs; a marked block runs with its service or is left out
    with its reason; output and diagrams are not code; anything else is unmarked (which the next test refuses)."""
    page = "\n".join(
        [
            "# A",
            "```python",
            "x = 1",
            "```",
            "```sh",
            "pyspark-ducklake --catalog sqlite:///lake.sqlite tables   # a comment",
            "python -m pyspark_ducklake --catalog sqlite:///lake.sqlite snapshots",
            "```",
            "```sh",
            "pip install pyspark-ducklake",
            "```",
            "<!-- doc-test: not run: installs a package -->",
            "```sh",
            "pip install pyspark-ducklake",
            "```",
            "<!-- doc-test: not run: -->",
            "```bash",
            "make demo",
            "```",
            "<!-- doc-test: with s3 -->",
            "```python",
            "y = 2",
            "```",
            "```",
            "batch 1: 3 rows",
            "```",
            "```text",
            "DuckLakeError",
            "```",
            "",
        ]
    )
    root = tree(tmp_path, {"docs/a.md": page})
    found = [(b.line, b.kind, b.service) for b in doc_blocks.code_blocks(root)]
    assert found == [
        (2, "python", None),
        (5, "cli", None),
        (9, "unmarked", None),
        (13, "skip", None),
        (17, "unmarked", None),  # a marker without a reason
        (21, "python", "s3"),
        (24, "output", None),
        (27, "output", None),
    ]


def test_every_code_block_of_the_docs_runs_or_says_why_not() -> None:
    """The pages follow the rule: tests/integration/test_docs_run.py runs their python and command-line blocks."""
    blocks = doc_blocks.code_blocks()
    unmarked = [f"{b.where} ({b.language})" for b in blocks if b.kind == "unmarked"]
    assert unmarked == [], f"say why these do not run (<!-- doc-test: not run: why -->), or make them run: {unmarked}"
    assert {b.service for b in blocks if b.service} <= set(doc_blocks.SERVICES)
    markers = sum(len(re.findall(r"^<!--\s*doc-test:", p.read_text(), re.M)) for p in doc_blocks.doc_files())
    assert markers == sum(b.marker is not None for b in blocks), "a doc-test marker stands before no code block"
    assert sum(b.kind == "python" for b in blocks) >= 30
