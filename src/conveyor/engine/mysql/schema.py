"""The MySQL/MariaDB schema: ordered migrations, applied once each and recorded in
``conveyor_migrations`` of the engine's database.

MySQL commits every DDL statement on its own, so a migration is not one transaction: ``migrate``
holds a named lock (``GET_LOCK``) so two processes never migrate together, and every statement is
safe to run again (``IF NOT EXISTS``, or an error saying the object exists, which is skipped:
MySQL 8 has no ``ADD COLUMN IF NOT EXISTS``/``CREATE INDEX IF NOT EXISTS``, and the statements
keep to what MySQL 8 and MariaDB share).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from conveyor.engine._migrations import LATEST_VERSION, MIGRATIONS, missing_from, schema_problem
from conveyor.engine._sqlfiles import SqlFiles
from conveyor.engine.mysql.connect import error_code
from conveyor.errors import ConveyorError, SchemaError

SQL_PACKAGE = "conveyor.engine.mysql.sql"
#: Errors a repeated statement meets when what it creates is there already: table exists,
#: duplicate column, duplicate key name, can't drop a missing index.
ALREADY_DONE = frozenset({1050, 1060, 1061, 1091})
#: Duplicate entry: a unique index the rows stored cannot satisfy.
DUPLICATE_ENTRY = 1062
#: Seconds ``migrate`` waits for another process's migration to finish.
LOCK_TIMEOUT = 60

#: What each migration creates, as (version, kind, name): see ``missing_objects``.
OBJECTS: tuple[tuple[int, str, str], ...] = (
    (1, "table", "oban_jobs"),
    (1, "table", "oban_peers"),
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


def files(database: str) -> SqlFiles:
    """The statements of this engine for one database (``{prefix}`` is the quoted database name)."""
    return _files(database)


_cache: dict[str, SqlFiles] = {}


def _files(database: str) -> SqlFiles:
    found = _cache.get(database)
    if found is None:
        found = _cache[database] = SqlFiles(SQL_PACKAGE, database)
    return found


def install_sql(database: str, *, from_version: int = 0) -> str:
    """The SQL that brings ``database`` from ``from_version`` to the latest version (all when 0)."""
    sql = files(database)
    parts = [sql["migrations_table"]]
    parts += [m.sql(sql) for m in MIGRATIONS if m.version > from_version]
    return "\n".join(parts)


def uninstall_sql(database: str) -> str:
    """The SQL that drops every table Conveyor's migrations create, ``oban_jobs`` included."""
    return files(database)["uninstall"]


def statements(script: str) -> Iterator[str]:
    """The statements of ``script``: comment lines dropped, split where a line ends with ``;``."""
    buffer: list[str] = []
    for line in script.splitlines():
        if line.lstrip().startswith("--") or not line.strip():
            continue
        buffer.append(line)
        if line.rstrip().endswith(";"):
            yield "\n".join(buffer).rstrip().rstrip(";")
            buffer = []
    if buffer:
        yield "\n".join(buffer)


async def installed_version(cursor: Any, database: str) -> int | None:
    """The latest migration recorded, or None when Conveyor never installed in ``database``."""
    present = await present_objects(cursor, database)
    if "conveyor_migrations" not in present:
        return None
    await cursor.execute(files(database)["migrations_version"])
    row = await cursor.fetchone()
    return int(row[0]) if row and row[0] is not None else None


async def present_objects(cursor: Any, database: str) -> set[str]:
    await cursor.execute(files(database)["schema_objects"])
    return {str(row[0]) for row in await cursor.fetchall()}


async def missing_objects(cursor: Any, database: str) -> list[tuple[int, str]]:
    """The tables and indexes of the migrations that do not exist, as (migration version, name)."""
    return missing_from(OBJECTS, await present_objects(cursor, database))


async def problem(cursor: Any, database: str, where: str, options: str) -> str | None:
    """What is wrong with the schema for this Conveyor, as a sentence naming the command that fixes
    it; None when it is complete and current."""
    version = await installed_version(cursor, database)
    missing = await missing_objects(cursor, database) if version is not None else []
    return schema_problem(where, version, [name for _, name in missing], options)


async def migrate(cursor: Any, database: str) -> int:
    """Apply every missing migration on ``cursor`` (autocommit), under a named lock. As on the other
    engines, the recorded version is not trusted alone: when an object of an applied migration is
    missing, the migrations from that one on run again."""
    lock = f"conveyor_migrate:{database}"[:64]
    await cursor.execute("SELECT GET_LOCK(%s, %s)", (lock, LOCK_TIMEOUT))
    row = await cursor.fetchone()
    if not row or row[0] != 1:
        raise ConveyorError(f"another process has been migrating {database!r} for {LOCK_TIMEOUT} s")
    try:
        current = await installed_version(cursor, database) or 0
        missing = await missing_objects(cursor, database) if current else []
        start = min([current, *(version - 1 for version, _ in missing)])
        if start < LATEST_VERSION:
            for statement in statements(install_sql(database, from_version=start)):
                await _apply(cursor, statement)
    finally:
        await cursor.execute("SELECT RELEASE_LOCK(%s)", (lock,))
        await cursor.fetchall()
    return LATEST_VERSION


async def _apply(cursor: Any, statement: str) -> None:
    try:
        await cursor.execute(statement)
    except Exception as exc:
        code = error_code(exc)
        if code in ALREADY_DONE:
            return
        if code == DUPLICATE_ENTRY and "conveyor_workflow_step_names_index" in statement:
            raise SchemaError(
                "a workflow has two steps of one name: a name must be unique within its workflow "
                f"(delete or rename (meta.name) all but one of each such step, then migrate again): {exc}"
            ) from exc
        raise


async def uninstall(cursor: Any, database: str) -> None:
    for statement in statements(uninstall_sql(database)):
        await cursor.execute(statement)
