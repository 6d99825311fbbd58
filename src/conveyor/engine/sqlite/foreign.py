"""Enqueueing through a caller's own SQLite connection: the jobs join the caller's transaction.

Blocking: a ``sqlite3.Connection``, or a SQLAlchemy ``Session``/``Connection`` on ``sqlite://``
(pysqlite), whose ``sqlite3`` connection we use. Async: an ``aiosqlite.Connection``, or a SQLAlchemy
``AsyncSession``/``AsyncConnection`` on ``sqlite+aiosqlite://``. Anything else is refused with
``UnsupportedConnectionError``.

How the insert joins the caller's transaction (``atomic_sync`` / ``atomic_async``), mirroring
PostgreSQL's engine:

* inside a transaction: a savepoint. A failure rolls back our statements only and leaves the
  caller's transaction usable; success leaves the commit to the caller.
* no transaction open, and the connection opens them implicitly (sqlite3's default
  ``isolation_level``, also what SQLAlchemy uses): we open it (``BEGIN IMMEDIATE``, so the write
  lock is taken before anything is read) plus a savepoint; the caller's commit publishes the jobs.
* an autocommit connection (``isolation_level=None``) outside a transaction: a transaction of our
  own, committed before we return, as each statement would be.

The notifications are rows written in the same transaction, picked up by every process's listener
within milliseconds of the caller's commit.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import sqlite3
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any, TypeVar

from conveyor.engine import _payloads as payloads
from conveyor.engine import _sqlalchemy_bridge as sqlalchemy_bridge
from conveyor.engine.sqlite.database import FIRST_BUSY_PAUSE, MAX_BUSY_PAUSE, SQL, is_busy
from conveyor.errors import CallerTransactionLockedError, UnsupportedConnectionError

ASYNC_EXPECTED = "an aiosqlite.Connection, or a SQLAlchemy AsyncSession/AsyncConnection on sqlite+aiosqlite"
SYNC_EXPECTED = "a sqlite3.Connection, or a SQLAlchemy Session/Connection on sqlite (pysqlite)"
SAVEPOINT = "conveyor_insert"
#: Seconds we retry taking the write lock on a caller's connection (on top of its own timeout).
BEGIN_TIMEOUT = 30.0

T = TypeVar("T")


def _is_aiosqlite(obj: Any) -> bool:
    return type(obj).__module__.startswith("aiosqlite") and type(obj).__name__ == "Connection"


async def async_driver_connection(conn: Any) -> Any:
    """The ``aiosqlite.Connection`` to insert through, or UnsupportedConnectionError."""
    if _is_aiosqlite(conn):
        return conn
    driver = await sqlalchemy_bridge.async_driver(conn)
    if _is_aiosqlite(driver):
        return driver
    raise UnsupportedConnectionError(conn, ASYNC_EXPECTED)


def sync_driver_connection(conn: Any) -> sqlite3.Connection:
    """The ``sqlite3.Connection`` to insert through, or UnsupportedConnectionError."""
    if isinstance(conn, sqlite3.Connection):
        return conn
    driver = sqlalchemy_bridge.sync_driver(conn)
    if isinstance(driver, sqlite3.Connection):
        return driver
    raise UnsupportedConnectionError(conn, SYNC_EXPECTED)


def _autocommit(conn: Any) -> bool:
    """Does ``conn`` commit each statement by itself when no transaction is open?"""
    mode = getattr(conn, "autocommit", None)  # Python 3.12+: True, False or legacy (-1)
    if mode is True:
        return True
    if mode is False:
        return False
    return conn.isolation_level is None


def _pause(attempt: int) -> float:
    return float(min(FIRST_BUSY_PAUSE * 2**attempt, MAX_BUSY_PAUSE) * (0.5 + random.random()))


def _begin_sync(conn: sqlite3.Connection) -> None:
    deadline = time.monotonic() + BEGIN_TIMEOUT
    attempt = 0
    while True:
        try:
            conn.execute("BEGIN IMMEDIATE")
            return
        except sqlite3.OperationalError as exc:
            if not is_busy(exc) or time.monotonic() >= deadline:
                raise
        time.sleep(_pause(attempt))
        attempt += 1


async def _begin_async(conn: Any) -> None:
    deadline = time.monotonic() + BEGIN_TIMEOUT
    attempt = 0
    while True:
        try:
            await conn.execute("BEGIN IMMEDIATE")
            return
        except sqlite3.OperationalError as exc:
            if not is_busy(exc) or time.monotonic() >= deadline:
                raise
        await asyncio.sleep(_pause(attempt))
        attempt += 1


#: SQLITE_BUSY_SNAPSHOT: a read transaction's snapshot is older than the last commit, so it can
#: never become a write transaction.
BUSY_SNAPSHOT = 517


def locked_in_caller_tx(exc: sqlite3.OperationalError) -> CallerTransactionLockedError:
    """The error to raise for SQLITE_BUSY inside the caller's own transaction: its cause and fix."""
    if getattr(exc, "sqlite_errorcode", None) == BUSY_SNAPSHOT:
        why = "another connection wrote to the database after your transaction first read it"
    else:
        why = "another connection holds the write lock"
    return CallerTransactionLockedError(
        f"cannot write the jobs inside your transaction on this SQLite connection ({exc}): {why}, "
        "and SQLite does not let a transaction that began deferred (BEGIN, or sqlite3's implicit "
        "BEGIN) and has read wait for the write lock. Begin the transaction with BEGIN IMMEDIATE "
        "(sqlite3: isolation_level=None and conn.execute('BEGIN IMMEDIATE'); SQLAlchemy: emit "
        "BEGIN IMMEDIATE in a 'begin' event), so the lock is taken before the first read, and run "
        "it again"
    )


@contextmanager
def atomic_sync(conn: sqlite3.Connection) -> Iterator[None]:
    """Make the insert atomic inside (or as) the caller's transaction; see the module doc."""
    callers = conn.in_transaction  # begun by the caller (deferred, perhaps after reads), not by us
    if not callers:
        _begin_sync(conn)
        if _autocommit(conn):
            try:
                yield
            except BaseException:
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return
    conn.execute(f"SAVEPOINT {SAVEPOINT}")
    try:
        yield
    except BaseException as exc:
        with contextlib.suppress(sqlite3.Error):
            conn.execute(f"ROLLBACK TO SAVEPOINT {SAVEPOINT}")
            conn.execute(f"RELEASE SAVEPOINT {SAVEPOINT}")
        if callers and is_busy(exc):
            raise locked_in_caller_tx(exc) from exc  # type: ignore[arg-type]
        raise
    conn.execute(f"RELEASE SAVEPOINT {SAVEPOINT}")


@asynccontextmanager
async def atomic_async(conn: Any) -> AsyncIterator[None]:
    """The ``aiosqlite`` twin of ``atomic_sync``."""
    callers = conn.in_transaction
    if not callers:
        await _begin_async(conn)
        if _autocommit(conn):
            try:
                yield
            except BaseException:
                with contextlib.suppress(sqlite3.Error):
                    await conn.execute("ROLLBACK")
                raise
            await conn.execute("COMMIT")
            return
    await conn.execute(f"SAVEPOINT {SAVEPOINT}")
    try:
        yield
    except BaseException as exc:
        with contextlib.suppress(sqlite3.Error):
            await conn.execute(f"ROLLBACK TO SAVEPOINT {SAVEPOINT}")
            await conn.execute(f"RELEASE SAVEPOINT {SAVEPOINT}")
        if callers and is_busy(exc):
            raise locked_in_caller_tx(exc) from exc  # type: ignore[arg-type]
        raise
    await conn.execute(f"RELEASE SAVEPOINT {SAVEPOINT}")


class CallerTx:
    """A caller's open transaction, as the engine's write functions (``database.WriteTx``) see it.
    Notifications are rows only (no source process), which every process's listener delivers once
    the caller commits; a rollback takes them away with the rest."""

    __slots__ = ("conn",)

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def notify(self, channel: str, payload: dict[str, Any], created: str, *, written: bool = False) -> None:
        if not written:
            self.conn.execute(SQL["notify"], (channel, payloads.encode(payload), None, created))


async def write_in_caller_tx(conn: Any, write: Callable[[CallerTx], T]) -> T:
    """Run an engine write function inside the transaction of a caller's async connection (an
    ``aiosqlite`` connection or a SQLAlchemy async session on it), on that connection's thread."""
    driver = await async_driver_connection(conn)
    async with atomic_async(driver):
        # aiosqlite runs everything on its own thread; the function needs the sqlite3 connection
        # underneath, on that thread, so it goes through the same queue as aiosqlite's own calls.
        result: T = await driver._execute(lambda: write(CallerTx(driver._conn)))
        return result
