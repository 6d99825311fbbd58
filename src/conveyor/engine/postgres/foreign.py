"""Enqueueing through a caller's own connection: psycopg 3 connections and SQLAlchemy sessions.

The jobs join the caller's transaction. We reach the psycopg connection underneath a SQLAlchemy
session (which must use the ``postgresql+psycopg`` driver) so both paths run the same statement.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import psycopg
from psycopg.pq import TransactionStatus

from conveyor.engine import _sqlalchemy_bridge as sqlalchemy_bridge
from conveyor.errors import UnsupportedConnectionError

ASYNC_EXPECTED = (
    "a psycopg.AsyncConnection, or a SQLAlchemy AsyncSession/AsyncConnection on postgresql+psycopg"
)
SYNC_EXPECTED = "a psycopg.Connection, or a SQLAlchemy Session/Connection on postgresql+psycopg"


async def async_driver_connection(conn: Any) -> psycopg.AsyncConnection[Any]:
    if isinstance(conn, psycopg.AsyncConnection):
        return conn
    driver = await sqlalchemy_bridge.async_driver(conn)
    if isinstance(driver, psycopg.AsyncConnection):
        return driver
    raise UnsupportedConnectionError(conn, ASYNC_EXPECTED)


def sync_driver_connection(conn: Any) -> psycopg.Connection[Any]:
    if isinstance(conn, psycopg.Connection):
        return conn
    driver = sqlalchemy_bridge.sync_driver(conn)
    if isinstance(driver, psycopg.Connection):
        return driver
    raise UnsupportedConnectionError(conn, SYNC_EXPECTED)


def _needs_own_transaction(conn: psycopg.Connection[Any] | psycopg.AsyncConnection[Any]) -> bool:
    # An autocommit connection outside any transaction would commit each statement on its own.
    return conn.autocommit and conn.info.transaction_status == TransactionStatus.IDLE


@asynccontextmanager
async def atomic_async(conn: psycopg.AsyncConnection[Any]) -> AsyncIterator[None]:
    """Make several statements atomic without committing the caller's transaction.

    Inside (or about to start) a caller's transaction we use a savepoint: failure rolls back only our
    statements and leaves their transaction usable; success leaves the commit to them.
    """
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
