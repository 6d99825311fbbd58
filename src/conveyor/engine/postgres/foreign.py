"""Enqueueing through a caller's own connection: psycopg 3 and asyncpg connections, and SQLAlchemy
sessions on either driver.

The jobs join the caller's transaction. We reach the driver connection underneath a SQLAlchemy
session (``postgresql+psycopg``, or ``postgresql+asyncpg`` for async ones) so every path runs the
same statements. An asyncpg connection is wrapped in an ``AsyncpgSession``, which translates them.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import psycopg
from psycopg.pq import TransactionStatus
from psycopg.rows import tuple_row

from conveyor.engine import _sqlalchemy_bridge as sqlalchemy_bridge
from conveyor.engine.postgres.asyncpg_session import AsyncpgSession, is_asyncpg
from conveyor.errors import UnsupportedConnectionError

ASYNC_EXPECTED = (
    "a psycopg.AsyncConnection or an asyncpg connection, or a SQLAlchemy AsyncSession/AsyncConnection "
    "on postgresql+psycopg or postgresql+asyncpg"
)
SYNC_EXPECTED = "a psycopg.Connection, or a SQLAlchemy Session/Connection on postgresql+psycopg"

#: What the async paths run statements on: a psycopg connection as it is, or an asyncpg one wrapped.
AsyncDriver = psycopg.AsyncConnection[Any] | AsyncpgSession


async def async_driver_connection(conn: Any) -> AsyncDriver:
    if isinstance(conn, psycopg.AsyncConnection):
        return conn
    if is_asyncpg(conn):
        return AsyncpgSession(conn)
    driver = await sqlalchemy_bridge.async_driver(conn)
    if isinstance(driver, psycopg.AsyncConnection):
        return driver
    if is_asyncpg(driver):
        return AsyncpgSession(driver)
    raise UnsupportedConnectionError(conn, ASYNC_EXPECTED)


async def fetch_rows(driver: AsyncDriver, statement: bytes, params: dict[str, Any]) -> list[tuple[Any, ...]]:
    """Run one statement on a caller's connection (atomic by itself, in their transaction)."""
    if isinstance(driver, AsyncpgSession):
        return await driver.fetch(statement, params)
    async with psycopg.AsyncCursor(driver, row_factory=tuple_row) as cur:
        await cur.execute(statement, params)
        return list(await cur.fetchall())


def sync_driver_connection(conn: Any) -> psycopg.Connection[Any]:
    if isinstance(conn, psycopg.Connection):
        return conn
    driver = sqlalchemy_bridge.sync_driver(conn)
    if isinstance(driver, psycopg.Connection):
        return driver
    raise UnsupportedConnectionError(conn, SYNC_EXPECTED)


# A caller's connection may make client-side cursors by default (Django's does: ClientCursor), which
# cannot return binary results; the paths above and the inserter make server-side ones explicitly.


def _needs_own_transaction(conn: psycopg.Connection[Any] | psycopg.AsyncConnection[Any]) -> bool:
    # An autocommit connection outside any transaction would commit each statement on its own.
    return conn.autocommit and conn.info.transaction_status == TransactionStatus.IDLE


@asynccontextmanager
async def atomic_async(conn: AsyncDriver) -> AsyncIterator[None]:
    """Make several statements atomic without committing the caller's transaction.

    Inside (or about to start) a caller's transaction we use a savepoint: failure rolls back only our
    statements and leaves their transaction usable; success leaves the commit to them.
    """
    if isinstance(conn, AsyncpgSession):
        async with conn.atomic():
            yield
        return
    if _needs_own_transaction(conn):
        async with conn.transaction():
            yield
        return
    await conn.execute("SAVEPOINT conveyor_insert")
    try:
        yield
    except BaseException:
        await conn.execute("ROLLBACK TO SAVEPOINT conveyor_insert")
        raise
    await conn.execute("RELEASE SAVEPOINT conveyor_insert")


@contextmanager
def atomic_sync(conn: psycopg.Connection[Any]) -> Iterator[None]:
    """The synchronous twin of ``atomic_async``."""
    if _needs_own_transaction(conn):
        with conn.transaction():
            yield
        return
    conn.execute("SAVEPOINT conveyor_insert")
    try:
        yield
    except BaseException:
        conn.execute("ROLLBACK TO SAVEPOINT conveyor_insert")
        raise
    conn.execute("RELEASE SAVEPOINT conveyor_insert")
