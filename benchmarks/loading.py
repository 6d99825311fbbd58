"""Loading big tables fast for the scenarios that need millions of rows (``stats``, ``large-tables``).

Rows are written by ``INSERT ... SELECT generate_series`` with the table's secondary indexes
dropped, which are then built again in one pass each (far faster than maintaining them row by
row), and the table is vacuumed and analyzed, as autovacuum would long have done on a live table.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import psycopg

from conveyor.engine._sqlfiles import quote_identifier
from conveyor.engine.postgres import PostgresEngine

#: One statement of a load and its parameters. ``{table}`` and ``{enum}`` are filled in.
Statement = tuple[str, dict[str, Any]]


def names(engine: PostgresEngine) -> dict[str, str]:
    """The quoted names a load statement's ``{table}`` and ``{enum}`` stand for."""
    schema = quote_identifier(engine.prefix)
    return {"table": f"{schema}.oban_jobs", "enum": f"{schema}.oban_job_state"}


async def load_without_indexes(engine: PostgresEngine, statements: Sequence[Statement]) -> dict[str, float]:
    """Run ``statements`` with the job table's secondary indexes dropped, build them again, then
    ``VACUUM (ANALYZE)``; the seconds each step took (``insert_s``, ``index_s``, ``vacuum_s``)."""
    table = names(engine)["table"]
    took: dict[str, float] = {}
    async with await psycopg.AsyncConnection.connect(engine.dsn, autocommit=True) as conn:
        started = time.perf_counter()
        cur = await conn.execute(
            "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = %s AND tablename = 'oban_jobs' "
            "AND indexname <> 'oban_jobs_pkey'",
            (engine.prefix,),
        )
        indexes = await cur.fetchall()
        for name, _ in indexes:
            await conn.execute(
                f"DROP INDEX {quote_identifier(engine.prefix)}.{quote_identifier(name)}".encode()
            )
        await run_all(conn, engine, statements)
        took["insert_s"] = time.perf_counter() - started
        started = time.perf_counter()
        for _, definition in indexes:
            await conn.execute(definition.encode())
        took["index_s"] = time.perf_counter() - started
        started = time.perf_counter()
        await conn.execute(f"VACUUM (ANALYZE) {table}".encode())
        took["vacuum_s"] = time.perf_counter() - started
    return {name: round(seconds, 1) for name, seconds in took.items()}


async def run_all(
    conn: psycopg.AsyncConnection[Any], engine: PostgresEngine, statements: Sequence[Statement]
) -> None:
    """Each statement with the table's names filled in, in order."""
    for text, params in statements:
        await conn.execute(text.format(**names(engine)).encode(), params)


async def run_on(engine: PostgresEngine, statements: Sequence[Statement]) -> None:
    """``run_all`` on a connection of its own (autocommit), with the indexes in place."""
    async with await psycopg.AsyncConnection.connect(engine.dsn, autocommit=True) as conn:
        await run_all(conn, engine, statements)
