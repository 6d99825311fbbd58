"""MkDocs hooks (mkdocs.yml ``hooks:``): the pages that live outside docs/, and links that leave docs/.

The guides link to the README, the examples and the benchmarks with paths that work when read on the
repository (``../../examples/outcomes.py``). The site has no repository beside it, so these files become
pages of their own (the README is the home page, each example a page showing its source) and links to
them are rewritten to those pages. A link to another file of the repository (a test module) becomes its
path as text. A link to nothing is left as it is, so ``mkdocs build --strict`` still reports it.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files
from mkdocs.structure.pages import Page

ROOT = Path(__file__).resolve().parent.parent

#: Markdown files of the repository published as pages: repository path -> page in the site.
MARKDOWN_PAGES = {
    "README.md": "index.md",
    "examples/README.md": "examples/index.md",
    "benchmarks/README.md": "benchmarks.md",
}

# An inline link or image: [text](target) or [text](target "title"). Fenced code is skipped
# (_outside_code below).
_LINK = re.compile(r"\[(?P<text>[^\]]*)\]\((?P<target>[^)\s]+)(?P<title>\s+\"[^\"]*\")?\)")
_FENCE = re.compile(r"^(```|~~~).*?^\1", re.MULTILINE | re.DOTALL)
# A link, or a code span (left as it is): whichever starts first, a link's text may hold code.
_LINK_OR_CODE = re.compile(_LINK.pattern + r"|(?P<ticks>`+)(?!`).*?(?<!`)(?P=ticks)", re.DOTALL)
_SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


def _examples() -> list[str]:
    """The example scripts shown as pages (the helpers named with a leading underscore are not)."""
    return sorted(p.name for p in (ROOT / "examples").glob("*.py") if not p.name.startswith("_"))


def _page_for(repo_path: str) -> str | None:
    """The site page showing a repository file, or None when the site does not show it."""
    if repo_path.startswith("docs/"):
        return repo_path.removeprefix("docs/")
    if repo_path in MARKDOWN_PAGES:
        return MARKDOWN_PAGES[repo_path]
    if repo_path in ("examples", "examples/"):
        return "examples/index.md"
    name = repo_path.removeprefix("examples/")
    if repo_path.startswith("examples/") and name in _examples():
        return f"examples/{name.removesuffix('.py')}.md"
    return None


def _rewrite(markdown: str, repo_path: str, page_uri: str) -> str:
    """Point the links of the page at ``page_uri`` (read from ``repo_path``) at the site's pages."""

    def replace(match: re.Match[str]) -> str:
        target = match["target"]
        if target is None or target.startswith("#") or _SCHEME.match(target):  # code, or not a file
            return match[0]
        path, _, anchor = target.partition("#")
        resolved = posixpath.normpath(posixpath.join(posixpath.dirname(repo_path), path))
        if resolved.startswith("docs/") and repo_path.startswith("docs/"):
            return match[0]  # a link between pages of docs/: MkDocs checks it
        page = _page_for(resolved)
        if page is not None:
            new = posixpath.relpath(page, posixpath.dirname(page_uri) or ".")
            return f"[{match['text']}]({new}{'#' + anchor if anchor else ''}{match['title'] or ''})"
        if (ROOT / resolved).exists():
            # A file the site does not show: keep the words, say where the file is.
            return f"{match['text']} (`{resolved}` in the repository)"
        return match[0]  # a link to nothing: strict mode reports it

    return _outside_code(markdown, lambda text: _LINK_OR_CODE.sub(replace, text))


def _outside_code(markdown: str, change: Callable[[str], str]) -> str:
    """Apply ``change`` to the text between fenced code blocks only."""
    parts, last = [], 0
    for fence in _FENCE.finditer(markdown):
        parts += [change(markdown[last : fence.start()]), fence[0]]
        last = fence.end()
    parts.append(change(markdown[last:]))
    return "".join(parts)


def on_config(config: MkDocsConfig) -> MkDocsConfig:
    """Add the examples to the navigation: one entry per script, found on disk."""
    nav = config.nav or []
    entries: list[Any] = [{"Overview": "examples/index.md"}]
    entries += [{name: f"examples/{name.removesuffix('.py')}.md"} for name in _examples()]
    nav.append({"Examples": entries})
    config.nav = nav
    return config


def on_files(files: Files, config: MkDocsConfig) -> Files:
    """Publish the README, the examples' README, the benchmarks and each example as pages."""
    for repo_path, uri in MARKDOWN_PAGES.items():
        text = (ROOT / repo_path).read_text(encoding="utf-8")
        files.append(File.generated(config, uri, content=_rewrite(text, repo_path, uri)))
    for name in _examples():
        source = (ROOT / "examples" / name).read_text(encoding="utf-8")
        content = f"# {name}\n\n`examples/{name}` in the repository.\n\n```python\n{source}```\n"
        files.append(File.generated(config, f"examples/{name.removesuffix('.py')}.md", content=content))
    return files


def on_page_markdown(markdown: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    """Rewrite the links of docs/ pages that leave docs/."""
    if page.file.generated_by is not None:
        return markdown  # rewritten when it was generated
    return _rewrite(markdown, f"docs/{page.file.src_uri}", page.file.src_uri)
