"""Running a ``MigrationPlan`` on a live database (see ``migration_steps`` for what each step is).

The connection is in autocommit mode and stays outside any transaction between steps: a concurrent
index build waits for every transaction older than it, so a transaction of our own left open would
make it wait for itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
import zlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import psycopg

from conveyor.engine._sqlfiles import quote_identifier
from conveyor.engine.postgres.migration_steps import MigrationPlan, Step, StepKind
from conveyor.errors import SchemaError

#: How long a transactional step may wait for one lock. While it waits, every insert, claim and ack
#: that needs a conflicting lock queues behind it, so this is the longest it may stall them; the
#: fleet's own transactions last milliseconds, so a lock they hold comes free well within it.
LOCK_TIMEOUT_MS = 100
#: How long a transactional step keeps trying (a long transaction of an application may hold the
#: lock it needs) before the migration gives up, changing nothing more.
RETRY_FOR_S = 120.0
#: The longest pause between two attempts, and between two looks at the migration lock.
MAX_PAUSE_S = 2.0
LOCK_POLL_S = 0.2


@dataclass(frozen=True, slots=True)
class Pacing:
    """How much of the server the steps may take from the fleet that shares it.

    ``parallel_workers``: ``max_parallel_maintenance_workers`` (index builds) and
    ``max_parallel_workers_per_gather`` (the checks that read the table) for the migration's
    session; None keeps the server's. Conveyor migrates with 0: a build's workers each take a core
    for its scan and sort, and the fleet's statements and commits then queue for the CPU and for
    the WAL behind them. A migration takes longer so: it is rare, a stall of every enqueue is not
    (figures: ``docs/decisions/migration-pacing.md``). Both are settings any session may change
    for itself.
    """

    parallel_workers: int | None = 0

    def settings(self) -> str:
        if self.parallel_workers is None:
            return ""
        workers = int(self.parallel_workers)
        return (
            f"; SET max_parallel_maintenance_workers = {workers}"
            f"; SET max_parallel_workers_per_gather = {workers}"
        )

    def resets(self) -> str:
        if self.parallel_workers is None:
            return ""
        return "; RESET max_parallel_maintenance_workers; RESET max_parallel_workers_per_gather"


#: The pacing ``conveyor migrate`` uses.
PACING = Pacing()


@contextlib.asynccontextmanager
async def migration_lock(conn: psycopg.AsyncConnection[Any], key: int, prefix: str) -> AsyncIterator[None]:
    """Hold the session advisory lock (``key``, the prefix's hash): one migrator of a prefix at a
    time, until the block ends.

    It is tried, not waited for: a ``SELECT pg_advisory_lock()`` waiting for another migrator is a
    statement open with a snapshot, which that migrator's concurrent index build would wait for in
    turn. The lock is the prefix's own, so the installs of other prefixes (say, of a test suite
    that makes one per test) neither wait for a long index build nor make it wait.
    """
    lock = (key, int.from_bytes(zlib.crc32(prefix.encode()).to_bytes(4, "big"), "big", signed=True))
    while True:
        cur = await conn.execute("SELECT pg_try_advisory_lock(%s, %s)", lock)
        row = await cur.fetchone()
        if row and row[0]:
            break
        await asyncio.sleep(LOCK_POLL_S)
    try:
        yield
    finally:
        with contextlib.suppress(psycopg.Error):  # a lost connection released it already
            await conn.execute("SELECT pg_advisory_unlock(%s, %s)", lock)


async def run_plan(
    conn: psycopg.AsyncConnection[Any],
    plan: MigrationPlan,
    *,
    lock_timeout_ms: int = LOCK_TIMEOUT_MS,
    retry_for: float = RETRY_FOR_S,
    pacing: Pacing = PACING,
) -> None:
    """Apply ``plan``'s steps in order. A statement timeout set for the role would cut an index
    build short (and leave it INVALID), so the session runs without one until the plan is done."""
    if conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
        raise SchemaError("migrations run on a connection outside any transaction (autocommit)")
    await conn.execute(f"SET statement_timeout = 0; SET lock_timeout = 0{pacing.settings()}".encode())
    try:
        for step in plan.steps:
            if step.kind is StepKind.TRANSACTION:
                await run_transaction(conn, step.sql, lock_timeout_ms=lock_timeout_ms, retry_for=retry_for)
            elif step.kind is StepKind.BUILD_INDEX:
                await build_index(conn, plan.prefix, step)
            else:
                await conn.execute(step.sql.encode())
    finally:
        with contextlib.suppress(psycopg.Error):
            await conn.execute(f"RESET statement_timeout; RESET lock_timeout{pacing.resets()}".encode())


async def run_transaction(
    conn: psycopg.AsyncConnection[Any], sql: str, *, lock_timeout_ms: int, retry_for: float
) -> int:
    """Run ``sql`` in one transaction that waits at most ``lock_timeout_ms`` for each lock; after a
    timeout (or a deadlock) roll back, pause and try again, for up to ``retry_for`` seconds.
    Return the number of attempts."""
    deadline = time.monotonic() + retry_for
    attempt = 0
    while True:
        attempt += 1
        try:
            async with conn.transaction():
                await conn.execute(f"SET LOCAL lock_timeout = {int(lock_timeout_ms)}".encode())
                await conn.execute(sql.encode())
            return attempt
        except (psycopg.errors.LockNotAvailable, psycopg.errors.DeadlockDetected) as exc:
            # Paused a random share of a doubling time, so that the fleet's writes queued behind the
            # attempt get through, and two migrators never retry in step.
            pause = min(MAX_PAUSE_S, lock_timeout_ms / 1000 * 2**attempt) * random.uniform(0.5, 1.0)
            if time.monotonic() + pause > deadline:
                raise SchemaError(
                    f"a migration step could not take its locks within {lock_timeout_ms} ms in "
                    f"{attempt} attempts over {retry_for:g} s ({exc.diag.message_primary}); a long "
                    "transaction holds them (see pg_stat_activity): run the migration again once it "
                    "ended. What was applied so far is kept and recorded."
                ) from exc
            await asyncio.sleep(pause)


async def build_index(conn: psycopg.AsyncConnection[Any], prefix: str, step: Step) -> None:
    """Build ``step.index`` concurrently, unless it or a stand-in exists and is valid. An INVALID
    index of that name, which an interrupted concurrent build leaves behind (and ``IF NOT EXISTS``
    would take for done), is dropped first."""
    validity = await index_validity(conn, prefix, (step.index, *step.stand_ins))
    if any(validity.values()):
        return
    name = f"{quote_identifier(prefix)}.{quote_identifier(step.index)}"
    if step.index in validity:
        await conn.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {name}".encode())
    try:
        await conn.execute(step.sql.encode())
    except psycopg.Error:
        # Left INVALID, the index would still be written by every insert; the next run drops it
        # anyway, should this fail too (say, on a lost connection).
        with contextlib.suppress(psycopg.Error):
            await conn.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {name}".encode())
        raise


async def index_validity(
    conn: psycopg.AsyncConnection[Any], prefix: str, names: tuple[str, ...] | None = None
) -> dict[str, bool]:
    """The indexes of ``prefix`` (only ``names``, when given): name -> valid."""
    cur = await conn.execute(
        """
        SELECT c.relname, i.indisvalid
        FROM pg_index AS i
        JOIN pg_class AS c ON c.oid = i.indexrelid
        JOIN pg_namespace AS n ON n.oid = c.relnamespace
        WHERE n.nspname = %s AND (%s::text[] IS NULL OR c.relname = ANY(%s::text[]))
        """,
        (prefix, None if names is None else list(names), None if names is None else list(names)),
    )
    return {str(name): bool(valid) for name, valid in await cur.fetchall()}
