"""The SQLite schema: ordered migrations, applied once each and recorded in ``conveyor_migrations``.

``install_sql`` and ``uninstall_sql`` return plain SQL (``conveyor install --print-sql``);
``migrate`` applies what is missing on the writer connection inside a ``BEGIN IMMEDIATE``
transaction, which also keeps two processes starting at once from migrating together.

SQLite has no schemas: ``prefix`` may only be the default ``"public"`` (see ``check_prefix``).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator

from conveyor.engine.migrations import LATEST_VERSION as _LATEST
from conveyor.engine.migrations import MIGRATIONS
from conveyor.engine.sqlfiles import SqlFiles
from conveyor.errors import ValidationError

#: The schema version this Conveyor installs (the same on every engine).
LATEST_VERSION = _LATEST

SQL_PACKAGE = "conveyor.engine.sqlite.sql"
DEFAULT_PREFIX = "public"
FILES = SqlFiles(SQL_PACKAGE, DEFAULT_PREFIX)


def check_prefix(prefix: str) -> str:
    """SQLite has no schemas, so the only prefix it takes is the default one."""
    if prefix != DEFAULT_PREFIX:
        raise ValidationError(
            "prefix",
            prefix,
            f"SQLite has no schemas: use one database file per installation and keep the default "
            f"prefix {DEFAULT_PREFIX!r} (prefixes are a PostgreSQL feature)",
        )
    return prefix


def install_sql(prefix: str = DEFAULT_PREFIX, *, from_version: int = 0) -> str:
    """The SQL that brings a database from ``from_version`` to the latest version (all when 0).

    Every statement is idempotent (``IF NOT EXISTS``), so running the result twice is safe.
    """
    check_prefix(prefix)
    parts = [FILES["migrations_table"]]
    parts += [m.sql(FILES) for m in MIGRATIONS if m.version > from_version]
    return "\n".join(parts)


def uninstall_sql(prefix: str = DEFAULT_PREFIX) -> str:
    """The SQL that drops every table Conveyor's migrations create, ``oban_jobs`` included."""
    check_prefix(prefix)
    return FILES["uninstall"]


def statements(script: str) -> Iterator[str]:
    """The statements of ``script`` one by one (``executescript`` would commit our transaction)."""
    buffer: list[str] = []
    for line in script.splitlines(keepends=True):
        buffer.append(line)
        text = "".join(buffer)
        if sqlite3.complete_statement(text):
            yield text.strip()
            buffer = []
    rest = "".join(buffer).strip()
    if rest and not all(line.strip().startswith("--") or not line.strip() for line in buffer):
        yield rest


def installed_version(conn: sqlite3.Connection) -> int | None:
    """The latest migration recorded, or None when Conveyor never installed in this database."""
    row = conn.execute(FILES["migrations_installed"]).fetchone()
    if not row or not row[0]:
        return None
    row = conn.execute(FILES["migrations_version"]).fetchone()
    return int(row[0]) if row and row[0] is not None else None


def migrate(conn: sqlite3.Connection) -> int:
    """Apply every missing migration; the caller holds a write transaction. Return the version."""
    current = installed_version(conn) or 0
    if current < LATEST_VERSION:
        for statement in statements(install_sql(from_version=current)):
            conn.execute(statement)
    return LATEST_VERSION


def uninstall(conn: sqlite3.Connection) -> None:
    """Drop every table; the caller holds a write transaction."""
    for statement in statements(uninstall_sql()):
        conn.execute(statement)
