"""The PostgreSQL schema: ordered migrations, applied once each and recorded.

``install_sql`` and ``uninstall_sql`` return plain SQL for migration tools (Alembic, Django);
``migrate`` applies what is missing on a live connection, under an advisory lock so two nodes
starting at once cannot race: in one transaction when it creates ``oban_jobs``, else in steps that
keep the table writable (``migration_steps``, ``migration_runner``). ``plan`` says what it would do.
"""

from __future__ import annotations

from typing import Any

import psycopg

from conveyor.engine._migrations import LATEST_VERSION as _LATEST
from conveyor.engine._migrations import MIGRATIONS, missing_from, schema_problem
from conveyor.engine._sqlfiles import SqlFiles, quote_identifier
from conveyor.engine.postgres import migration_runner
from conveyor.engine.postgres.migration_steps import (
    MigrationPlan,
    Step,
    StepKind,
    guard_stand_ins,
    phased_steps,
    stand_ins,
)
from conveyor.errors import SchemaError

#: The schema version this Conveyor installs (the same on every engine).
LATEST_VERSION = _LATEST

SQL_PACKAGE = "conveyor.engine.postgres.sql"
# An arbitrary constant that names "Conveyor is migrating" among advisory locks (with the prefix).
MIGRATION_LOCK_KEY = 0x636F6E76


def install_sql(prefix: str = "public", *, from_version: int = 0) -> str:
    """The SQL that brings a schema from ``from_version`` to the latest version (all when 0).

    Every statement is idempotent, so running the result twice, or on a database that oban-py or
    Elixir Oban installed, is safe.
    """
    files = SqlFiles(SQL_PACKAGE, prefix)
    parts = [files["migrations_table"]]
    parts += [m.sql(files) for m in MIGRATIONS if m.version > from_version]
    return guard_stand_ins("\n".join(parts), prefix, STAND_INS)


def uninstall_sql(prefix: str = "public") -> str:
    """The SQL that drops every object Conveyor's migrations create, Oban's tables included."""
    return SqlFiles(SQL_PACKAGE, prefix)["uninstall"]


def clear_jobs_sql(prefix: str = "public") -> str:
    """The SQL that deletes every job (and nothing else), for test integrations."""
    return SqlFiles(SQL_PACKAGE, prefix)["clear_jobs"]


async def installed_version(conn: psycopg.AsyncConnection[Any], prefix: str) -> int | None:
    """The latest migration recorded in ``prefix``, or None when Conveyor never installed there."""
    table = f"{quote_identifier(prefix)}.conveyor_migrations"
    cur = await conn.execute("SELECT to_regclass(%s) IS NOT NULL", (table,))
    row = await cur.fetchone()
    if not row or not row[0]:
        return None
    cur = await conn.execute(f"SELECT max(version) FROM {table}".encode())
    row = await cur.fetchone()
    return int(row[0]) if row and row[0] is not None else None


#: What each migration creates, as (version, kind, name): what ``missing_objects`` looks for, so an
#: install over a schema whose objects another tool dropped (``oban uninstall`` removes Oban's tables
#: and leaves ``conveyor_migrations``) recreates them instead of trusting the recorded version.
#: Indexes are looked for only while their table exists (a missing table says it all). The staging
#: index may be Elixir Oban's ``oban_jobs_staging_idx`` instead (see v001_oban_jobs.sql).
OBJECTS: tuple[tuple[int, str, str], ...] = (
    (1, "table", "oban_jobs"),
    (1, "table", "oban_leaders"),
    (1, "table", "oban_producers"),
    (1, "type", "oban_job_state"),
    (1, "function", "oban_count_estimate"),
    (1, "index", "oban_jobs_state_queue_priority_scheduled_at_id_index"),
    (1, "index", "oban_jobs_staging_index|oban_jobs_staging_idx"),
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
    (9, "function", "conveyor_count_estimate"),
    (10, "index", "conveyor_workflow_step_names_index"),
    (11, "table", "oban_crons"),
    (12, "table", "oban_queues"),
    (13, "table", "conveyor_workflows"),
)
#: Index name -> other names that stand in for it (``a|b`` above): created only when none exists.
STAND_INS = stand_ins(OBJECTS)
#: Every name ``OBJECTS`` looks for, stand-ins included (what ``schema_objects.sql`` looks up).
OBJECT_NAMES = sorted({name for _, _, names in OBJECTS for name in names.split("|")})
#: The statements that take the schema as a parameter, not in their text (read once).
_LOOKUPS = SqlFiles(SQL_PACKAGE, "public")


async def missing_objects(conn: psycopg.AsyncConnection[Any], prefix: str) -> list[tuple[int, str]]:
    """The objects of the installed migrations that do not exist, as (migration version, name),
    in migration order; empty when all are there (or when nothing was ever installed). Objects of
    later migrations are not missing: an upgrade creates them."""
    installed = await installed_version(conn, prefix) or 0
    cur = await conn.execute(_LOOKUPS["schema_objects"], {"prefix": prefix, "names": OBJECT_NAMES})
    present = {str(row[0]) for row in await cur.fetchall()}
    return [(version, name) for version, name in missing_from(OBJECTS, present) if version <= installed]


async def check(conn: psycopg.AsyncConnection[Any], prefix: str) -> str | None:
    """What is wrong with the schema in ``prefix`` for this Conveyor, as a sentence that says which
    command fixes it; None when it is complete and current."""
    version = await installed_version(conn, prefix)
    missing = await missing_objects(conn, prefix) if version is not None else []
    return schema_problem(f"the Conveyor schema in {prefix!r}", version, [name for _, name in missing])


#: How ``oban_jobs.errors`` stores its entries, by the column's type: the SQL fragment (a file under
#: ``sql/``) that appends one entry in ``ack_jobs.sql``.
ERRORS_APPEND = {
    # oban-py and Conveyor: one jsonb value holding a JSON array.
    "jsonb": "append_error_jsonb",
    # Elixir Oban (Ecto's {:array, :map}): a PostgreSQL array of jsonb values.
    "jsonb[]": "append_error_array",
}


async def errors_type(conn: psycopg.AsyncConnection[Any], prefix: str) -> str | None:
    """The type of ``<prefix>.oban_jobs.errors`` (``jsonb`` or ``jsonb[]``); None without the table.

    Raises ``SchemaError`` for any other type: Conveyor would not know how to append to it.
    """
    cur = await conn.execute(
        """
        SELECT format_type(a.atttypid, a.atttypmod)
        FROM pg_attribute AS a
        WHERE a.attrelid = to_regclass(%s) AND a.attname = 'errors' AND NOT a.attisdropped
        """,
        (f"{quote_identifier(prefix)}.oban_jobs",),
    )
    row = await cur.fetchone()
    if row is None:
        return None
    found = str(row[0])
    if found not in ERRORS_APPEND:
        raise SchemaError(
            f"{prefix}.oban_jobs.errors is {found}; Conveyor reads jsonb (oban-py) or jsonb[] (Elixir Oban)"
        )
    return found


async def plan(conn: psycopg.AsyncConnection[Any], prefix: str) -> MigrationPlan:
    """What ``migrate`` would do to ``prefix`` now, changing nothing (``conveyor migrate --dry-run``).

    The recorded version is not trusted alone: when an object of an applied migration is missing
    (dropped by ``oban uninstall``, or by hand), the migrations from that one on run again. Every
    statement is idempotent, so that recreates what is missing and leaves the rest as it is.
    """
    installed = await installed_version(conn, prefix)
    missing = await missing_objects(conn, prefix) if installed else []
    start = min([installed or 0, *(version - 1 for version, _ in missing)])
    cur = await conn.execute("SELECT to_regclass(%s) IS NULL", (f"{quote_identifier(prefix)}.oban_jobs",))
    row = await cur.fetchone()
    fresh = bool(row and row[0])
    steps: tuple[Step, ...] = ()
    if start < LATEST_VERSION and fresh:
        # No table that a fleet writes: one transaction, all or nothing, is the quickest.
        steps = (Step(0, StepKind.TRANSACTION, install_sql(prefix, from_version=start)),)
    elif start < LATEST_VERSION:
        steps = phased_steps(SqlFiles(SQL_PACKAGE, prefix), prefix, start, STAND_INS)
    indexes = await migration_runner.index_validity(conn, prefix)
    return MigrationPlan(prefix, installed, start, tuple(name for _, name in missing), fresh, steps, indexes)


async def migrate(
    conn: psycopg.AsyncConnection[Any],
    prefix: str,
    *,
    lock_timeout_ms: int = migration_runner.LOCK_TIMEOUT_MS,
    retry_for: float = migration_runner.RETRY_FOR_S,
    pacing: migration_runner.Pacing = migration_runner.PACING,
) -> int:
    """Apply every missing migration (see ``plan``); return the version now installed. ``conn`` is
    in autocommit mode.

    Where ``oban_jobs`` exists, its indexes are built concurrently and the other statements run in
    short transactions (``migration_steps``), so the fleet keeps inserting, claiming and acking;
    each migration is recorded once all of its steps ran. A migration that finds an ``oban_jobs`` it
    cannot work with (say, from an Elixir Oban older than its migration V9) raises ``SchemaError``
    before changing anything of that migration.
    """
    try:
        async with migration_runner.migration_lock(conn, MIGRATION_LOCK_KEY, prefix):
            # Read under the lock: another migrator may have done it all meanwhile.
            steps = await plan(conn, prefix)
            await migration_runner.run_plan(
                conn, steps, lock_timeout_ms=lock_timeout_ms, retry_for=retry_for, pacing=pacing
            )
    except psycopg.errors.RaiseException as exc:  # only the migrations' own checks RAISE
        hint = f" ({exc.diag.message_hint})" if exc.diag.message_hint else ""
        raise SchemaError(f"{exc.diag.message_primary}{hint}") from exc
    return LATEST_VERSION


async def uninstall(conn: psycopg.AsyncConnection[Any], prefix: str) -> None:
    async with conn.transaction():
        await conn.execute(uninstall_sql(prefix).encode())
