"""The schema as plain SQL, for migration tools (Alembic, Django, Flyway...) that own the schema.

``install_sql(prefix)`` is every migration's SQL, each statement idempotent; ``uninstall_sql(prefix)``
drops it all. Here a plain psycopg transaction stands in for the migration tool.
"""

from __future__ import annotations

import asyncio

import psycopg
from _support import DATABASE_URL, PREFIX
from psycopg import sql

from conveyor import Conveyor
from conveyor.engine.postgres.schema import install_sql, uninstall_sql


def tables() -> list[str]:
    with psycopg.connect(DATABASE_URL, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = %s ORDER BY tablename", (PREFIX,)
        ).fetchall()
        return [row[0] for row in rows]


def main() -> None:
    with psycopg.connect(DATABASE_URL) as conn:  # one transaction, committed at the end of the block
        conn.execute(uninstall_sql(PREFIX).encode())  # start from nothing
        conn.execute(install_sql(PREFIX).encode())
        conn.execute(install_sql(PREFIX).encode())  # a second run changes nothing
    print(f"tables after install_sql: {tables()}")
    with psycopg.connect(DATABASE_URL, autocommit=True) as conn:
        query = sql.SQL("SELECT version, name FROM {} ORDER BY version")
        rows = conn.execute(query.format(sql.Identifier(PREFIX, "conveyor_migrations"))).fetchall()
        print(f"conveyor_migrations: {[f'{version}:{name}' for version, name in rows]}")

    async def install_again() -> int:
        app = Conveyor(DATABASE_URL, prefix=PREFIX)
        try:
            return await app.install()  # finds every migration recorded: nothing to do
        finally:
            await app.close()

    print(f"app.install() afterwards reports version {asyncio.run(install_again())} (latest: {rows[-1][0]})")

    with psycopg.connect(DATABASE_URL) as conn:
        conn.execute(uninstall_sql(PREFIX).encode())
    print(f"tables after uninstall_sql: {tables()}")


if __name__ == "__main__":
    main()
