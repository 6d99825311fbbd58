"""Joining a caller's transaction on MySQL/MariaDB (``conn=``): an application's own asyncmy
connection, or its PyMySQL one for the blocking twins (``insert_sync``, ``list_jobs_sync``).

The engine's statements need its session settings (``connect.SESSION_SETUP``: ``ANSI_QUOTES``,
UTC): ``joined`` saves the caller's ``sql_mode`` and ``time_zone``, sets the engine's for the
operation and puts the caller's back afterwards (``SET`` does not end a transaction). The operation
runs inside a savepoint: one that fails is rolled back to it and leaves the caller's transaction as
it was and usable; nothing is committed, the caller commits (or rolls back) everything together.

The blocking twins reuse the async code: ``Blocking`` wraps a PyMySQL cursor in the cursor methods
the engine awaits, which never suspend, and ``run_blocking`` drives such a coroutine to its end in
the calling thread, with no event loop.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Coroutine
from contextlib import asynccontextmanager, suppress
from typing import Any, TypeVar

from conveyor.engine.mysql.fanout import collecting
from conveyor.errors import UnsupportedConnectionError

T = TypeVar("T")

SAVE = "SELECT @@SESSION.sql_mode, @@SESSION.time_zone"
SETUP = "SET SESSION sql_mode = CONCAT(@@SESSION.sql_mode, ',ANSI_QUOTES'), time_zone = '+00:00'"
RESTORE = "SET SESSION sql_mode = %s, time_zone = %s"
SAVEPOINT = "SAVEPOINT conveyor_operation"
ROLLBACK = "ROLLBACK TO SAVEPOINT conveyor_operation"
RELEASE = "RELEASE SAVEPOINT conveyor_operation"


class Blocking:
    """A PyMySQL cursor with the awaitable methods the engine's code calls."""

    def __init__(self, cursor: Any) -> None:
        self._cursor = cursor

    async def execute(self, statement: str, params: Any = None) -> int:
        return int(self._cursor.execute(statement, params))

    async def executemany(self, statement: str, params: Any) -> int:
        return int(self._cursor.executemany(statement, params) or 0)

    async def fetchall(self) -> Any:
        return self._cursor.fetchall()

    async def fetchone(self) -> Any:
        return self._cursor.fetchone()

    @property
    def lastrowid(self) -> int:
        return int(self._cursor.lastrowid)


def run_blocking(coroutine: Coroutine[Any, Any, T]) -> T:
    """The result of a coroutine that never suspends (its awaits are ``Blocking``'s)."""
    try:
        coroutine.send(None)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
    coroutine.close()
    raise RuntimeError("a blocking MySQL operation tried to wait on an event loop")


@asynccontextmanager
async def _cursor(conn: Any, blocking: bool) -> AsyncIterator[Any]:
    if blocking:
        cursor = conn.cursor()
        try:
            yield Blocking(cursor)
        finally:
            cursor.close()
    else:
        async with conn.cursor() as cursor:
            yield cursor


#: What ``conn=`` takes, named in the error for anything else.
ASYNC_EXPECTED = "an asyncmy connection to the engine's server"
SYNC_EXPECTED = "a PyMySQL connection to the engine's server"


def _check(conn: Any, blocking: bool) -> None:
    module = type(getattr(conn, "conn", conn)).__module__
    if not module.startswith("pymysql" if blocking else "asyncmy"):
        raise UnsupportedConnectionError(conn, SYNC_EXPECTED if blocking else ASYNC_EXPECTED)


@asynccontextmanager
async def joined(conn: Any, *, blocking: bool = False) -> AsyncIterator[Any]:
    """A cursor on the caller's connection, in its transaction, with the engine's session settings
    for the time of the block (see the module's notes)."""
    _check(conn, blocking)
    # Its notifications reach this process's listeners by the poll: only the caller knows when
    # (and whether) it commits.
    with collecting(None):
        async with _cursor(conn, blocking) as cursor:
            await cursor.execute(SAVE)
            saved = await cursor.fetchone()
            await cursor.execute(SETUP)
            try:
                await cursor.execute(SAVEPOINT)
                try:
                    yield cursor
                except BaseException:
                    with suppress(Exception):  # autocommit (no savepoint kept), or the connection is gone
                        await cursor.execute(ROLLBACK)
                    raise
                await cursor.execute(RELEASE)
            finally:
                await cursor.execute(RESTORE, (saved[0], saved[1]))
