"""MkDocs hooks (mkdocs.yml `hooks:`): repository files that the docs pages link outside docs/ go into the site.

The pages link such files as GitHub shows them (``../bench/README.md``, ``../bench/results/sink.png``), so the links
work when browsing docs/ in the repository. Here each linked file that exists is added to the site under ``repo/``
(Markdown as plain text, ``.md.txt``, so its own relative links are not pages to check) and the page's link is
rewritten to it. A link to a file that does not exist is left alone, and the strict build fails on it.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

_LINK = re.compile(r"(\]\()((?:\.\./)+)([^)#\s]+)(#[^)\s]*)?(\))")


def _repo_root(config: Any) -> Path:
    return Path(config["config_file_path"]).resolve().parent


def _site_path(target: str) -> str:
    return f"repo/{target}.txt" if target.endswith(".md") else f"repo/{target}"


def _outside_target(page_uri: str, ups: str, target: str, docs: Path, root: Path) -> str | None:
    """The repository-relative path a ``../`` link of a page points at, if it leaves docs/ for an existing file."""
    path = (docs / Path(page_uri).parent / ups / target).resolve()
    if docs in path.parents or not path.is_file() or root not in path.parents:
        return None
    return path.relative_to(root).as_posix()


def on_files(files: Files, config: Any) -> Files:
    docs, root = Path(config["docs_dir"]).resolve(), _repo_root(config)
    added: set[str] = set()
    for page in [f for f in files if f.src_uri.endswith(".md")]:
        text = Path(page.abs_src_path or "").read_text(encoding="utf-8")
        for m in _LINK.finditer(text):
            target = _outside_target(page.src_uri, m.group(2), m.group(3), docs, root)
            if target and target not in added:
                added.add(target)
                files.append(File.generated(config, _site_path(target), abs_src_path=str(root / target)))
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Files) -> str:
    docs, root = Path(config["docs_dir"]).resolve(), _repo_root(config)
    depth = page.file.src_uri.count("/")

    def rewrite(m: re.Match[str]) -> str:
        target = _outside_target(page.file.src_uri, m.group(2), m.group(3), docs, root)
        if target is None:
            return m.group(0)
        anchor = "" if target.endswith(".md") else (m.group(4) or "")
        return f"{m.group(1)}{'../' * depth}{_site_path(target)}{anchor}{m.group(5)}"

    return _LINK.sub(rewrite, markdown)
