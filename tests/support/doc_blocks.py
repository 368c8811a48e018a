"""Generated blocks in the documentation, found by their markers in whichever page holds them; and the pages' code
blocks, which ``tests/integration/test_docs_run.py`` runs as written (:func:`code_blocks`, the rule below).

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
from dataclasses import dataclass
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


# --- code blocks ----------------------------------------------------------------------------------------------------
#
# The rule for every fenced block of README.md and docs/*.md (tests/unit/test_doc_blocks.py enforces it):
# - ``python`` blocks run, in page order, each page in an empty folder of its own with a fresh namespace holding only
#   ``spark`` (a SparkSession, as the pyspark shell gives one), all pages in one Spark session;
# - ``sh`` / ``bash`` blocks whose every command is this package's command line (``pyspark-ducklake ...`` or
#   ``python -m pyspark_ducklake ...``) run too, in the page's folder, where they stand among its Python blocks;
# - a block needing a service says so on the line before it, ``<!-- doc-test: with s3 -->`` (or ``azure``): it runs
#   with that service started (S3: moto, bucket ``my-bucket``, the ``AWS_*`` variables set; Azure: Azurite,
#   container ``lake``, ``AZURE_STORAGE_CONNECTION_STRING`` set);
# - any other block says why it does not run, ``<!-- doc-test: not run: <reason> -->`` (installs, make targets,
#   docker, a Kafka broker, the test suite itself);
# - a fence without a language, or ``text``, is output or a diagram, not code.

SERVICES = ("s3", "azure")
_FENCE = re.compile(r"^```([\w-]*)[^\n]*\n(.*?)^```[ \t]*$", re.M | re.S)
_MARKER = re.compile(r"<!--\s*doc-test:\s*(.*?)\s*-->\s*\n\s*$")
_CLI = re.compile(r"^(?:pyspark-ducklake|python -m pyspark_ducklake)(?:\s|$)")


@dataclass(frozen=True)
class CodeBlock:
    """One fenced block: where it is, its language, its text, and how the docs test treats it."""

    page: str  # relative to the repository, e.g. "docs/spark.md"
    line: int  # of the opening fence
    language: str
    text: str
    marker: str | None  # what ``<!-- doc-test: ... -->`` on the line before says

    @property
    def kind(self) -> str:
        """``python`` / ``cli`` (run), ``output`` (not code), ``skip`` (marked not run), or ``unmarked``."""
        if self.marker is not None and self.marker.startswith("not run:") and self.marker[8:].strip():
            return "skip"
        if self.language in ("", "text"):
            return "output"
        if self.language == "python":
            return "python"
        if self.language in ("sh", "bash") and _cli_only(self.text):
            return "cli"
        return "unmarked"

    @property
    def service(self) -> str | None:
        """The service the block runs with (``with s3``), None for none."""
        m = re.fullmatch(r"with (\w+)", self.marker or "")
        return m.group(1) if m else None

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"


def _cli_only(text: str) -> bool:
    commands = [line.strip() for line in text.splitlines() if line.strip() and not line.strip().startswith("#")]
    return bool(commands) and all(_CLI.match(c) for c in commands)


def code_blocks(root: Path = REPO_ROOT) -> list[CodeBlock]:
    """Every fenced block of README.md and the docs pages, in page order."""
    out = []
    for path in doc_files(root):
        text = path.read_text()
        for m in _FENCE.finditer(text):
            marker = _MARKER.search(text, 0, m.start())
            found = marker.group(1) if marker and marker.end() == m.start() else None
            page = path.relative_to(root).as_posix()
            out.append(CodeBlock(page, text.count("\n", 0, m.start()) + 1, m.group(1), m.group(2), found))
    return out
