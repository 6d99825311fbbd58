"""Installing Conveyor's schema through Django: the migration and ``conveyor_install --print-sql``.

The migration runs the same idempotent SQL as ``conveyor install --print-sql`` on the migration's
own connection, inside its transaction, and only on the database the jobs live in (other aliases of
a multi-database project are left alone). Running it on a database where Conveyor (or oban-py, or
Elixir Oban) already installed the schema changes nothing.
"""

from __future__ import annotations

from typing import Any

from conveyor.contrib.django.config import database_alias, django_options
from conveyor.engine.postgres import schema as postgres_schema
from conveyor.engine.sqlite import schema as sqlite_schema


def _prefix() -> str:
    prefix = django_options().get("prefix", "public")
    return prefix if isinstance(prefix, str) else "public"


def schema_sql(vendor: str, *, uninstall: bool = False) -> list[str]:
    """The statements that install (or drop) the schema on a database of ``vendor``."""
    if vendor == "postgresql":
        make = postgres_schema.uninstall_sql if uninstall else postgres_schema.install_sql
        return [make(_prefix())]  # one script: psycopg sends it as one simple query
    if vendor == "sqlite":
        make = sqlite_schema.uninstall_sql if uninstall else sqlite_schema.install_sql
        return list(sqlite_schema.statements(make(_prefix())))
    raise ValueError(f"Conveyor keeps jobs in PostgreSQL or SQLite, not {vendor}")


def clear_jobs(connection: Any) -> None:
    """Delete every job, on Django's ``connection`` (Conveyor's tables are no models of Django's,
    so its ``flush`` leaves them alone)."""
    if connection.vendor == "postgresql":
        script = [postgres_schema.clear_jobs_sql(_prefix())]
    elif connection.vendor == "sqlite":
        script = list(sqlite_schema.statements(sqlite_schema.clear_jobs_sql(_prefix())))
    else:
        raise ValueError(f"Conveyor keeps jobs in PostgreSQL or SQLite, not {connection.vendor}")
    with connection.cursor() as cursor:
        for statement in script:
            cursor.execute(statement)


def _run(schema_editor: Any, *, uninstall: bool) -> None:
    connection = schema_editor.connection
    if connection.alias != database_alias(django_options()):
        return
    with connection.cursor() as cursor:
        for statement in schema_sql(connection.vendor, uninstall=uninstall):
            cursor.execute(statement)


def install(apps: Any, schema_editor: Any) -> None:
    """``RunPython`` forwards: create or upgrade the schema."""
    _run(schema_editor, uninstall=False)


def uninstall(apps: Any, schema_editor: Any) -> None:
    """``RunPython`` backwards (``migrate conveyor zero``): drop every Conveyor table and its jobs."""
    _run(schema_editor, uninstall=True)
