"""What an idle node costs the database: ``idle``.

A node with default settings (leadership on) serves N queues (1, 20 and 200, or ``--concurrency``
queues) where no job ever arrives. Its cost is the transactions it makes the server commit (or roll
back) per second, read from ``pg_stat_database`` for a database made for this run alone, so the
other users of the server (other benchmarks, test suites) never count. The same window is first
measured with no node at all (autovacuum, our own reads: the floor), and that is subtracted.

``pg_stat_database`` is fed by each backend at most once a second, and by one that went idle only
10 s later: the window is long (``IDLE_SECONDS``) and begins once the node's start (a first fetch
per queue, on connections idle since) has been counted (``IDLE_WARMUP``). pg_stat_statements
(read for the same database only, when it is loaded) tells which statements the transactions were.

The target (issue 20): at most 5 transactions/s whatever the number of queues.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import psycopg
from common import Figures, Settings, drop_schema
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from conveyor import Conveyor
from conveyor.engine._sqlfiles import quote_identifier
from conveyor.engine.postgres import PostgresEngine

IDLE_QUEUES = (1, 20, 200)
#: The measured window, after the node has run ``IDLE_WARMUP`` seconds.
IDLE_SECONDS = 20.0
IDLE_WARMUP = 20.0
#: The target: transactions per second, whatever the number of queues.
IDLE_TARGET = 5.0
#: The key under which a reading of pg_stat_statements keeps its reset time and evictions.
RESET_KEY = "\x00reset"
#: Statements shown per variant (the most frequent).
TOP_STATEMENTS = 6


async def idle(settings: Settings) -> list[Figures]:
    if settings.engine != "postgres":
        raise SystemExit("idle: transactions are counted by PostgreSQL; run it with --engine postgres")
    counts = (settings.concurrency,) if settings.concurrency else IDLE_QUEUES
    async with own_database(settings.dsn) as dsn:
        floor = await measure(settings.dsn, dsn, queues=0)
        results = []
        for queues in counts:
            figures = await measure(settings.dsn, dsn, queues=queues)
            per_second = round(figures.pop("xact_per_s") - floor["xact_per_s"], 2)
            results.append(
                {
                    "queues": queues,
                    "xact_per_s": per_second,
                    "floor_xact_per_s": floor["xact_per_s"],
                    "target_xact_per_s": IDLE_TARGET,
                    "met": per_second <= IDLE_TARGET,
                    **figures,
                    "seconds": IDLE_SECONDS,
                    "leadership": True,
                }
            )
    return results


async def measure(admin_dsn: str, dsn: str, *, queues: int) -> Figures:
    """Transactions/s in the database of ``dsn`` over the window, with a node of ``queues`` idle
    queues running (none: no node, the floor), and the statements it ran most."""
    prefix = f"conveyor_idle_{uuid.uuid4().hex[:8]}"
    engine = PostgresEngine(dsn, prefix=prefix, min_connections=1, max_connections=10)
    await engine.open()
    await engine.install()
    app = Conveyor(engine=engine, queues={f"q{n}": 10 for n in range(queues)}) if queues else None
    try:
        if app is not None:
            await app.start()
        await asyncio.sleep(IDLE_WARMUP)
        before, statements_before = await read_counters(admin_dsn, dsn)
        started = time.perf_counter()
        await asyncio.sleep(IDLE_SECONDS)
        after, statements_after = await read_counters(admin_dsn, dsn)
        seconds = time.perf_counter() - started
    finally:
        if app is not None:
            await app.stop()
            await app.close()
        await engine.close()
        await drop_schema(dsn, prefix)
    return {
        "xact_per_s": round((after - before) / seconds, 2),
        **top_statements(statements_before, statements_after, seconds),
    }


async def read_counters(admin_dsn: str, dsn: str) -> tuple[int, dict[str, int] | None]:
    """Committed plus rolled back transactions of the database, and pg_stat_statements' calls per
    statement in it (None when the extension is not there). Read from ``admin_dsn``'s database, so
    the reading itself is not counted."""
    name = database_name(dsn)
    async with await psycopg.AsyncConnection.connect(admin_dsn, autocommit=True) as conn:
        cur = await conn.execute(
            "SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = %s", (name,)
        )
        row = await cur.fetchone()
        assert row is not None, f"database {name} has no statistics"
        try:
            cur = await conn.execute(
                "SELECT s.query, sum(s.calls)::bigint FROM pg_stat_statements AS s"
                " JOIN pg_database AS d ON d.oid = s.dbid WHERE d.datname = %s GROUP BY s.query",
                (name,),
            )
            statements = {query: calls for query, calls in await cur.fetchall()}
            cur = await conn.execute("SELECT stats_reset::text, dealloc FROM pg_stat_statements_info")
            # Told apart from any statement text: a reset or an eviction since the first reading.
            statements[RESET_KEY] = hash(await cur.fetchone())
        except (psycopg.errors.UndefinedTable, psycopg.errors.ObjectNotInPrerequisiteState):
            # The extension is not installed in this database, or not loaded by the server.
            statements = None
    return int(row[0]), statements


def top_statements(before: dict[str, int] | None, after: dict[str, int] | None, seconds: float) -> Figures:
    """The statements run most in the window, per second (empty when pg_stat_statements is absent
    or was reset by someone meanwhile)."""
    if before is None or after is None:
        return {"statements": "pg_stat_statements not loaded"}
    if before.pop(RESET_KEY) != after.pop(RESET_KEY):
        return {"statements": "pg_stat_statements was reset (or evicted entries) during the window"}
    calls = {query: count - before.get(query, 0) for query, count in after.items()}
    ranked = sorted(((count, query) for query, count in calls.items() if count > 0), reverse=True)
    return {
        "statements_per_s": round(sum(calls.values()) / seconds, 2),
        "top": [
            f"{count / seconds:.2f}/s {' '.join(query.split())[:90]}"
            for count, query in ranked[:TOP_STATEMENTS]
        ],
    }


def database_name(dsn: str) -> str:
    return str(conninfo_to_dict(dsn)["dbname"])


@asynccontextmanager
async def own_database(admin_dsn: str) -> AsyncIterator[str]:
    """A database made for this run (its statistics are ours alone), dropped afterwards."""
    name = f"conveyor_idle_{uuid.uuid4().hex[:10]}"
    async with await psycopg.AsyncConnection.connect(admin_dsn, autocommit=True) as conn:
        await conn.execute(f"CREATE DATABASE {quote_identifier(name)}".encode())
    try:
        yield make_conninfo(admin_dsn, dbname=name)
    finally:
        async with await psycopg.AsyncConnection.connect(admin_dsn, autocommit=True) as conn:
            await conn.execute(f"DROP DATABASE IF EXISTS {quote_identifier(name)} WITH (FORCE)".encode())
