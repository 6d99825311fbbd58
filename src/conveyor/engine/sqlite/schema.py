"""The SQLite schema: ordered migrations, applied once each and recorded in ``conveyor_migrations``.

``install_sql`` and ``uninstall_sql`` return plain SQL (``conveyor install --print-sql``);
``migrate`` applies what is missing on the writer connection inside a ``BEGIN IMMEDIATE``
transaction, which also keeps two processes starting at once from migrating together.

SQLite has no schemas: ``prefix`` may only be the default ``"public"`` (see ``check_prefix``).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator

from conveyor.engine._migrations import LATEST_VERSION as _LATEST
from conveyor.engine._migrations import MIGRATIONS, missing_from, schema_problem
from conveyor.engine._sqlfiles import SqlFiles
from conveyor.errors import SchemaError, ValidationError

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


def clear_jobs_sql(prefix: str = DEFAULT_PREFIX) -> str:
    """The SQL that deletes every job (and nothing else), for test integrations."""
    check_prefix(prefix)
    return FILES["clear_jobs"]


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


#: What each migration creates, as (version, kind, name): see ``missing_objects``.
OBJECTS: tuple[tuple[int, str, str], ...] = (
    (1, "table", "oban_jobs"),
    (1, "table", "oban_leaders"),
    (1, "table", "oban_producers"),
    (1, "table", "conveyor_notifications"),
    (1, "index", "oban_jobs_state_queue_priority_scheduled_at_id_index"),
    (1, "index", "oban_jobs_staging_index"),
    (1, "index", "oban_jobs_completed_at_index"),
    (1, "index", "oban_jobs_cancelled_at_index"),
    (1, "index", "oban_jobs_discarded_at_index"),
    (2, "table", "conveyor_cron_ticks"),
    (3, "table", "conveyor_queue_states"),
    (4, "index", "conveyor_unique_jobs_index"),
    (5, "index", "conveyor_ordered_lock_index"),
    (7, "table", "conveyor_queue_starts"),
    (7, "table", "conveyor_queue_limits"),
    (8, "index", "conveyor_workflow_waiting_index"),
    (9, "index", "conveyor_failed_jobs_index"),
    (10, "index", "conveyor_workflow_step_names_index"),
    (11, "table", "oban_crons"),
    (12, "table", "oban_queues"),
    (13, "table", "conveyor_workflows"),
)


def missing_objects(conn: sqlite3.Connection) -> list[tuple[int, str]]:
    """The tables and indexes of the migrations that do not exist, as (migration version, name)."""
    rows = conn.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'index')").fetchall()
    return missing_from(OBJECTS, {str(row[0]) for row in rows})


def check(conn: sqlite3.Connection, where: str, options: str = "") -> str | None:
    """What is wrong with the schema of this database (``where`` names it) for this Conveyor, as a
    sentence that says which command fixes it (``options`` follow the command); None when it is
    complete and current."""
    version = installed_version(conn)
    missing = missing_objects(conn) if version is not None else []
    return schema_problem(where, version, [name for _, name in missing], options)


def migrate(conn: sqlite3.Connection) -> int:
    """Apply every missing migration; the caller holds a write transaction. Return the version.

    As on PostgreSQL, the recorded version is not trusted alone: when a table or index of an
    applied migration is missing, the migrations from that one on run again (every statement is
    ``IF NOT EXISTS``, so only what is missing is created).
    """
    current = installed_version(conn) or 0
    missing = missing_objects(conn) if current else []
    start = min([current, *(version - 1 for version, _ in missing)])
    if start < LATEST_VERSION:
        for statement in statements(install_sql(from_version=start)):
            try:
                conn.execute(statement)
            except sqlite3.IntegrityError as exc:
                raise _refused(conn, exc) from exc
    return LATEST_VERSION


def _refused(conn: sqlite3.Connection, exc: sqlite3.IntegrityError) -> Exception:
    """The error for a unique index a migration cannot build over the rows stored: for step names
    stored twice in a workflow (before migration 10 kept them unique), which ones."""
    twice = conn.execute(FILES["step_names_twice"]).fetchone()
    if twice is None:
        return exc
    return SchemaError(
        f"workflow {twice[0]!r} has {twice[2]} steps named {twice[1]!r}: a name must be unique within "
        "its workflow (delete or rename (meta.name) all but one of each such step, then migrate again)"
    )


def uninstall(conn: sqlite3.Connection) -> None:
    """Drop every table; the caller holds a write transaction."""
    for statement in statements(uninstall_sql()):
        conn.execute(statement)
