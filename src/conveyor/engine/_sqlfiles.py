"""Loading the SQL files that sit beside each engine.

Statements name their objects through placeholders, filled once per prefix and cached:
``{prefix}`` becomes the quoted schema identifier and ``{prefix_literal}`` the schema name as a
string literal (for catalog lookups inside DO blocks).
"""

from __future__ import annotations

import functools
from importlib import resources


def quote_identifier(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def quote_literal(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


@functools.lru_cache(maxsize=512)  # the same few statements for every engine of a process
def without_comment_lines(text: str) -> str:
    """``text`` without its blank lines, whole-line ``--`` comments and indentation (lines inside a
    quoted literal are kept as they are; text with dollar quoting is returned as it is).

    For the statements the hot path sends hundreds of times a second: psycopg caches its conversion
    of a query (placeholders to ``$n``) only up to 4,096 bytes, and the commented fetch and ack were
    over that (the ack at 5.6 kB), so each call split the whole text again."""
    if "$$" in text:
        return text
    kept = []
    quoted = False
    for line in text.splitlines():
        stripped = line.strip()
        if not quoted and (not stripped or stripped.startswith("--")):
            continue
        kept.append(line if quoted else line.lstrip())
        if line.count("'") % 2:
            quoted = not quoted
    return "\n".join(kept)


@functools.cache
def _file_text(package: str, name: str) -> str:
    """The text of one ``.sql`` file, read once per process: every engine built (a CLI command, a
    test, each node of a process) would otherwise find and read the same files again."""
    return resources.files(package).joinpath(f"{name}.sql").read_text("utf-8")


class SqlFiles:
    """The ``.sql`` files of one package, rendered for one schema prefix."""

    def __init__(self, package: str, prefix: str) -> None:
        self._package = package
        self.prefix = prefix

    @functools.cache  # noqa: B019 - one SqlFiles per engine; the cache lives as long as it does
    def __getitem__(self, name: str) -> str:
        text = _file_text(self._package, name)
        return text.replace("{prefix_literal}", quote_literal(self.prefix)).replace(
            "{prefix}", quote_identifier(self.prefix)
        )

    @functools.cache  # noqa: B019
    def compose(self, name: str, **parts: str) -> str:
        """File ``name`` with each ``{part}`` replaced by the text of the file named by the value."""
        text = self[name]
        for placeholder, part in parts.items():
            text = text.replace("{" + placeholder + "}", self[part].strip())
        return text
