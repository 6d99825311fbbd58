"""``conveyor migrate --dry-run``: which migrations would run, and their statements, read from the
database without changing it."""

from __future__ import annotations

from conveyor.cli.common import SchemaState
from conveyor.engine.postgres import schema as postgres_schema
from conveyor.engine.postgres.connect import CONNECT_TIMEOUT, connect_once
from conveyor.engine.sqlite import schema as sqlite_schema
from conveyor.engine.urls import default_database_url, is_sqlite_url


async def migration_plan(url: str | None, prefix: str, state: SchemaState) -> str:
    """The plan as text: a headline, then each step's SQL under a comment saying how it runs."""
    url = url or default_database_url()
    if is_sqlite_url(url):
        return _sqlite_plan(prefix, state)
    conn = await connect_once(url.replace("postgresql+psycopg://", "postgresql://", 1), CONNECT_TIMEOUT)
    async with conn:
        plan = await postgres_schema.plan(conn, prefix)
    body = plan.render()
    return f"schema {prefix!r}: {plan.headline('would apply')}" + (f"\n{body}" if body else "")


def _sqlite_plan(prefix: str, state: SchemaState) -> str:
    """SQLite applies its migrations in one write transaction: the plan is their script. A repair
    (objects missing) runs from the first migration, every statement being ``IF NOT EXISTS``."""
    start = 0 if state.missing else state.version or 0
    latest = sqlite_schema.LATEST_VERSION
    if start >= latest:
        return f"{state.where} is already at version {latest}: nothing to apply"
    count = latest - start
    headline = (
        f"{state.where}: version {state.version if state.version is not None else 'absent'} → {latest}: "
        f"would apply {count} migration{'s' if count != 1 else ''} in one transaction"
    )
    return f"{headline}\n{sqlite_schema.install_sql(prefix, from_version=start)}"
