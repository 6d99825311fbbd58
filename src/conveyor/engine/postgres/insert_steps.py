"""The steps of a PostgreSQL insert, and the drivers that run them on a connection.

``Inserter.steps`` (``inserter.py``) yields ``Step`` values and gets back what the database said;
``run_async`` sends them over an async connection (the pool's, or a caller's psycopg or asyncpg
one), with a second connection of the pool beside a COPY when one is free (``SideConnection``), and
``run_sync`` over a blocking psycopg connection: a caller's, always inside a savepoint, or one of
the engine's blocking pool (``blocking``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Generator, Iterator
from contextlib import AsyncExitStack, ExitStack
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg.rows import tuple_row
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from conveyor.engine.postgres import foreign
from conveyor.engine.postgres.asyncpg_session import AsyncpgSession
from conveyor.job_ids import JobIds


@dataclass(frozen=True, slots=True)
class Atomic:
    """Make the rest of the steps one unit: a transaction, or a savepoint in the caller's."""


@dataclass(frozen=True, slots=True)
class Execute:
    """Run a statement; the driver sends back its rows."""

    query: bytes
    params: dict[str, Any]
    binary: bool = False


@dataclass(frozen=True, slots=True)
class CopyIn:
    """Stream ``blocks`` into ``COPY query``. ``meanwhile`` runs once they are written, before the
    COPY ends (so the next chunk is prepared while the server still ingests this one). ``ahead``
    may name, from what ``meanwhile`` returned, a statement that a driver with a second connection
    runs there while the COPY ends. The driver sends back ``(meanwhile's result, the rows of that
    statement or None when it did not run it)``."""

    query: bytes
    blocks: Iterator[bytes]
    meanwhile: Callable[[], Any]
    ahead: Callable[[Any], Execute | None]


Step = Atomic | Execute | CopyIn
Steps = Generator[Step, Any, JobIds]


async def run_async(
    conn: foreign.AsyncDriver, steps: Steps, side: AsyncConnectionPool | None = None
) -> JobIds:
    """Run the steps on an async connection: psycopg's, or a caller's asyncpg one (which is never
    asked for COPY: see ``inserter._copy_capable``). With ``side``, ``CopyIn.ahead`` statements run on a
    second connection from it (``SideConnection``)."""
    async with AsyncExitStack() as stack:
        cur = None
        if not isinstance(conn, AsyncpgSession):
            # Server-side binding whatever the connection's cursor_factory (Django's is ClientCursor).
            cur = await stack.enter_async_context(psycopg.AsyncCursor(conn, row_factory=tuple_row))
        second = None if side is None else SideConnection(side, stack)
        result: Any = None
        while True:
            try:
                step = steps.send(result)
            except StopIteration as stop:
                ids: JobIds = stop.value
                return ids
            result = None
            if isinstance(step, Atomic):
                await stack.enter_async_context(foreign.atomic_async(conn))
            elif cur is None:
                assert isinstance(step, Execute) and isinstance(conn, AsyncpgSession)
                result = await conn.fetch(step.query, step.params)
            elif isinstance(step, Execute):
                await cur.execute(step.query, step.params, binary=step.binary)
                result = await cur.fetchall()
            else:
                result = await _copy_in(cur, step, second)
    raise AssertionError("unreachable")  # pragma: no cover


async def _copy_in(
    cur: psycopg.AsyncCursor[Any], step: CopyIn, second: SideConnection | None
) -> tuple[Any, list[tuple[Any, ...]] | None]:
    ahead: asyncio.Task[list[tuple[Any, ...]] | None] | None = None
    try:
        async with cur.copy(step.query) as copy:
            for block in step.blocks:
                await copy.write(block)
            done = step.meanwhile()
            statement = None if second is None else step.ahead(done)
            if second is not None and statement is not None and await second.ready():
                # While the server ingests the last blocks, and the COPY ends.
                ahead = asyncio.create_task(second.fetch(statement))
        return done, None if ahead is None else await ahead
    finally:
        if ahead is not None:
            if not ahead.done():  # the COPY failed: its error is the one raised
                ahead.cancel()
                await asyncio.wait([ahead])
            if not ahead.cancelled():
                ahead.exception()  # retrieved, so that it is not reported again


class SideConnection:
    """A second connection of the pool, for the statements a COPY insert can run beside its own
    connection: the reservation of the next chunk's ids (``nextval`` is not transactional, so ids
    taken on any session are the insert's alone) while the current chunk's COPY ends. Taken on first
    use if the pool has one free at once, else never (the steps then reserve on the insert's own
    connection), and held until the insert ends."""

    #: Seconds to wait for a free connection: beyond it, not worth its while.
    WAIT = 0.005

    def __init__(self, pool: AsyncConnectionPool, stack: AsyncExitStack) -> None:
        self._pool = pool
        self._stack = stack
        self._conn: psycopg.AsyncConnection[Any] | None = None
        self._unavailable = False

    async def ready(self) -> bool:
        """Whether there is a second connection (taking it, the first time)."""
        if self._conn is None and not self._unavailable:
            try:
                self._conn = await self._stack.enter_async_context(self._pool.connection(self.WAIT))
            except PoolTimeout:
                self._unavailable = True
        return self._conn is not None

    async def fetch(self, step: Execute) -> list[tuple[Any, ...]]:
        assert self._conn is not None
        async with psycopg.AsyncCursor(self._conn, row_factory=tuple_row) as cur:
            await cur.execute(step.query, step.params, binary=step.binary)
            return await cur.fetchall()


def run_sync(conn: psycopg.Connection[Any], steps: Steps, *, own: bool = False) -> JobIds:
    """Run the steps on a blocking connection. A caller's: always inside a savepoint (or
    transaction), so a failure leaves the caller's transaction usable. The engine's own (``own``,
    autocommit and idle): a transaction only from an ``Atomic`` step on, as ``run_async`` does, so
    a one-statement insert is one round trip."""
    with ExitStack() as stack:
        # Server-side binding whatever the connection's cursor_factory (Django's is ClientCursor).
        cur = stack.enter_context(psycopg.Cursor(conn, row_factory=tuple_row))
        if not own:
            stack.enter_context(foreign.atomic_sync(conn))
        result: Any = None
        while True:
            try:
                step = steps.send(result)
            except StopIteration as stop:
                ids: JobIds = stop.value
                return ids
            result = None
            if isinstance(step, Atomic):
                if own:
                    stack.enter_context(foreign.atomic_sync(conn))
            elif isinstance(step, Execute):
                cur.execute(step.query, step.params, binary=step.binary)
                result = cur.fetchall()
            else:
                with cur.copy(step.query) as copy:
                    for block in step.blocks:
                        copy.write(block)
                    result = (step.meanwhile(), None)
    raise AssertionError("unreachable")  # pragma: no cover
