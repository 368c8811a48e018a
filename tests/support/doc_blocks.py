"""Generated blocks in the documentation: found by their markers in whichever page holds them.

A generated table sits between ``<!-- NAME:start -->`` and ``<!-- NAME:end -->`` in README.md or a page under docs/.
The generators (``tests.support.option_tables``, ``bad_inputs``, ``reliability``) do not know the page: they look
the markers up, so a table can move between pages (or a merge can bring a page that holds it) and ``--write`` still
finds it. A block's markers must be in exactly one file: none, or two copies, is an error that names the files.

A rendered table may link a section by its anchor alone (``[Object storage](#object-storage)``, as the options
registry's texts do): the link is pointed at the page that has that heading (``object-storage.md``), relative to the
page the table lands in, so the registry need not know how the docs are split.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from tests.support.catalogs import REPO_ROOT

DOCS = REPO_ROOT / "docs"


def doc_files(root: Path = REPO_ROOT) -> list[Path]:
    """README.md and every Markdown page of the docs site."""
    return [root / "README.md", *sorted((root / "docs").rglob("*.md"))]


def markers(name: str) -> tuple[str, str]:
    return f"<!-- {name}:start -->", f"<!-- {name}:end -->"


def _pattern(name: str) -> re.Pattern[str]:
    start, end = markers(name)
    return re.compile(re.escape(start) + r"\n(.*?)\n?" + re.escape(end), re.S)


def locate(name: str, root: Path = REPO_ROOT) -> Path:
    """The one file holding ``name``'s markers."""
    start, _ = markers(name)
    found = [p for p in doc_files(root) if start in p.read_text()]
    if len(found) != 1:
        where = ", ".join(str(p.relative_to(root)) for p in found) or "no file"
        raise SystemExit(
            f"the generated block {name!r} must be in exactly one of README.md and docs/*.md, found in {where}: "
            f"put {start} ... {markers(name)[1]} where the table belongs (once)"
        )
    return found[0]


def read(name: str, root: Path = REPO_ROOT) -> str | None:
    """The text between ``name``'s markers (None when the markers are missing, twice, or broken)."""
    try:
        path = locate(name, root)
    except SystemExit:
        return None
    m = _pattern(name).search(path.read_text())
    return m.group(1) if m else None


def heading_anchor(heading: str) -> str:
    """The anchor GitHub and mkdocs' toc give a Markdown heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _headings(path: Path) -> list[str]:
    """The anchors of ``path``'s headings, in order (the first is the page's title); code blocks left out."""
    text = re.sub(r"^```.*?^```", "", path.read_text(), flags=re.M | re.S)
    return [heading_anchor(h) for h in re.findall(r"^#{1,6} (.+)$", text, re.M)]


def resolve_anchors(content: str, page: Path, root: Path = REPO_ROOT) -> str:
    """``content`` with each ``](#anchor)`` that ``page`` lacks pointed at the one docs page that has it."""
    own = set(_headings(page))

    def resolve(m: re.Match[str]) -> str:
        anchor = m.group(1)
        if anchor in own:
            return m.group(0)
        holders = [p for p in doc_files(root)[1:] if anchor in _headings(p)]
        if len(holders) != 1:
            return m.group(0)  # none or ambiguous: left for the link test to report
        target = Path(os.path.relpath(holders[0], page.parent)).as_posix()
        return f"]({target})" if _headings(holders[0])[0] == anchor else f"]({target}#{anchor})"

    return re.sub(r"\]\(#([^)\s]+)\)", resolve, content)


def write(blocks: dict[str, str], root: Path = REPO_ROOT) -> list[Path]:
    """Put each rendered block between its markers, in the file that holds them; returns the files changed."""
    changed: list[Path] = []
    for name, content in blocks.items():
        path = locate(name, root)
        content = resolve_anchors(content, path, root)
        start, end = markers(name)
        text = path.read_text()
        new = _pattern(name).sub(lambda _m, s=start, c=content, e=end: f"{s}\n{c}\n{e}", text, count=1)
        if new == text and f"{start}\n{content}\n{end}" not in text:
            raise SystemExit(f"{path.relative_to(root)}: {start} has no {end} after it")
        if new != text:
            path.write_text(new)
            changed.append(path)
    return changed


def stale(blocks: dict[str, str], root: Path = REPO_ROOT) -> list[str]:
    """Names of the blocks whose page differs from the rendering (or whose markers are missing)."""
    stale = []
    for name, content in blocks.items():
        try:
            page = locate(name, root)
        except SystemExit:
            stale.append(name)
            continue
        if read(name, root) != resolve_anchors(content, page, root):
            stale.append(name)
    return stale
