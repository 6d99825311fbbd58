"""Connections to a MySQL/MariaDB server through asyncmy: the pool, one transaction, and what the
driver's errors mean.

Every connection starts with the same session settings (``SESSION_SETUP``): UTC as the session time
zone (the schema stores naive UTC ``DATETIME(6)``, as Oban's Dolphin engine does), ``ANSI_QUOTES``
so the ``.sql`` files quote identifiers as PostgreSQL's do (``"db"."oban_jobs"``), and no notes
(``IF NOT EXISTS`` meeting what exists) for the driver to fetch and log. The isolation level
stays the server's (REPEATABLE READ by default): claims are locking reads, which read the latest
committed rows whatever the level, and the variable that sets it is spelled differently by MariaDB
10.11 (``tx_isolation``) and MySQL 8 (``transaction_isolation``).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Collection
from contextlib import asynccontextmanager
from typing import Any, TypeVar

from conveyor.engine.mysql.address import Address
from conveyor.engine.mysql.fanout import Hub, collecting
from conveyor.errors import ConveyorError, EngineClosedError, one_line

SESSION_SETUP = "SET time_zone = '+00:00', sql_mode = CONCAT(@@sql_mode, ',ANSI_QUOTES'), sql_notes = 0"
#: Server error codes worth retrying unchanged: lock wait timeout, deadlock, too many connections,
#: server shutting down, lost connection, and the client's own "can't connect" family.
TRANSIENT_CODES = frozenset({1040, 1053, 1205, 1213, 2002, 2003, 2006, 2013, 2055})
#: Seconds to wait for a server to answer when connecting.
CONNECT_TIMEOUT = 10
#: The server's error numbers for a transaction it rolled back whole as a deadlock's victim, and for
#: a lock wait that timed out.
DEADLOCK = 1213
LOCK_WAIT_TIMEOUT = 1205
#: A transaction the server picked as a deadlock's victim runs again, up to this many times in all.
VICTIM_TRIES = 5

T = TypeVar("T")


def driver() -> Any:
    """The asyncmy module, or a clear error naming the extra that brings it."""
    try:
        import asyncmy
    except ImportError:  # pragma: no cover - the dev extra installs it
        raise ConveyorError(
            "the MySQL/MariaDB engine needs the asyncmy driver: pip install 'conveyor[mysql]'"
        ) from None
    return asyncmy


def _settings(address: Address, database: str | None) -> dict[str, Any]:
    return {
        "host": address.host,
        "port": address.port,
        "user": address.user,
        "password": address.password,
        "db": database,
        "autocommit": True,
        "connect_timeout": CONNECT_TIMEOUT,
        "init_command": SESSION_SETUP,
        "charset": "utf8mb4",
    }


def blocking_settings(address: Address) -> dict[str, Any]:
    """PyMySQL's arguments for a connection set up as the pool's (``blocking.BlockingPool``)."""
    settings = _settings(address, None)
    del settings["db"]  # PyMySQL's is "database"; no default database either
    return settings


async def create_pool(address: Address, *, size: int) -> Any:
    """A pool of up to ``size`` connections, with no default database: statements name it."""
    return await driver().create_pool(minsize=1, maxsize=size, pool_recycle=3600, **_settings(address, None))


async def connect(address: Address, database: str | None = None) -> Any:
    """One connection of its own (schema inspection, the listener's watcher)."""
    return await driver().connect(**_settings(address, database))


@asynccontextmanager
async def _acquire(pool: Any) -> AsyncIterator[Any]:
    """A connection of ``pool``; on a loop other than the pool's (an engine handed to an app, used
    from the loop of its portal thread), a connection of its own on the running loop, closed after
    use: asyncmy's connections belong to the loop that opened them."""
    if pool._loop is asyncio.get_running_loop():
        async with pool.acquire() as conn:
            yield conn
        return
    conn = await driver().connect(**pool._conn_kwargs)
    try:
        yield conn
    finally:
        conn.close()


@asynccontextmanager
async def transaction(
    pool: Any, *, keyed: bool = False, committed: bool = False, hub: Hub | None = None
) -> AsyncIterator[Any]:
    """A cursor in one transaction on a pooled connection (see ``in_transaction``)."""
    if pool is None:
        raise EngineClosedError("the MySQL engine is not open; call await engine.open()")
    async with (
        _acquire(pool) as conn,
        in_transaction(conn, keyed=keyed, committed=committed, hub=hub) as cursor,
    ):
        yield cursor


@asynccontextmanager
async def in_transaction(
    conn: Any, *, keyed: bool = False, committed: bool = False, hub: Hub | None = None
) -> AsyncIterator[Any]:
    """A cursor in one transaction on ``conn`` (asyncmy's, or ``blocking.BlockingConnection``):
    committed when the block ends, rolled back when it raises. The notifications it wrote reach
    ``hub``'s listeners once it commits (``fanout``).

    ``keyed``: the transaction serialises on named locks (``GET_LOCK``, taken by the statements),
    which are released once it ends; it runs READ COMMITTED, so its reads see what the previous
    holder of a lock committed and its locking reads take no gap locks (which deadlock inserts).

    ``committed``: READ COMMITTED too, for a transaction whose locking reads scan rows they do not
    take (the pruner's): under REPEATABLE READ each row scanned stays locked until the end (every
    row of a small table, read whole), and claims meanwhile skip jobs that are available."""
    with collecting(hub) as notes:
        try:
            if keyed or committed:
                async with conn.cursor() as cursor:
                    await cursor.execute(READ_COMMITTED)
            await conn.begin()
            try:
                async with conn.cursor() as cursor:
                    yield cursor
                await conn.commit()
            except asyncio.CancelledError:
                conn.close()  # cut short mid-statement: the server rolls back when it goes
                raise
            except BaseException:
                await _rollback(conn)
                raise
            finally:
                if keyed:
                    await _release_locks(conn)
        except BaseException:
            if notes is not None:
                notes.forget()
            raise
    if notes is not None:
        notes.send()


#: The next transaction of the session only (the statement MySQL 8 and MariaDB share).
READ_COMMITTED = "SET TRANSACTION ISOLATION LEVEL READ COMMITTED"


async def _release_locks(conn: Any) -> None:
    try:
        async with conn.cursor() as cursor:
            await cursor.execute("SELECT RELEASE_ALL_LOCKS()")
            await cursor.fetchall()
    except Exception:  # the connection is gone, and its locks with it
        conn.close()


async def _rollback(conn: Any) -> None:
    try:
        await conn.rollback()
    except Exception:  # the connection is gone: the server rolled back already
        conn.close()


@asynccontextmanager
async def reading(pool: Any) -> AsyncIterator[Any]:
    """A cursor on a pooled connection in autocommit: each statement sees what is committed."""
    if pool is None:
        raise EngineClosedError("the MySQL engine is not open; call await engine.open()")
    async with _acquire(pool) as conn:
        try:
            async with conn.cursor() as cursor:
                yield cursor
        except BaseException:
            # A statement cut short (a cancelled task) leaves the protocol mid-reply: the pool must
            # not hand this connection out again ("Command Out of Sync").
            conn.close()
            raise


def error_code(exc: BaseException) -> int | None:
    """The server's (or the client's) error number of a driver error, else None."""
    args = getattr(exc, "args", ())
    if args and isinstance(args[0], int):
        return args[0]
    return None


async def rerun_victims(
    transaction: Callable[[], Awaitable[T]], *, codes: Collection[int] = (DEADLOCK,), once: bool = False
) -> T:
    """``transaction()``, one whole transaction of the engine's own, run again at once when it fails
    with one of ``codes`` (a deadlock's victim, rolled back whole by the server and by
    ``in_transaction``: nothing of it stands), up to ``VICTIM_TRIES`` times in all; the last error is
    raised. ``once``: run it once, the error raised as it comes, where running it again is not
    ours to do: in a caller's transaction (``conn=``) the rollback took the caller's work too."""
    for attempt in range(1, VICTIM_TRIES + 1):
        try:
            return await transaction()
        except Exception as exc:
            if once or attempt == VICTIM_TRIES or error_code(exc) not in codes:
                raise
    raise AssertionError("unreachable")  # pragma: no cover


def is_driver_error(exc: BaseException) -> bool:
    return type(exc).__module__.startswith(("asyncmy", "pymysql"))


def is_transient(exc: BaseException) -> bool:
    if isinstance(exc, EngineClosedError | ConnectionError | TimeoutError):
        return True
    if not is_driver_error(exc):
        return False
    code = error_code(exc)
    return code in TRANSIENT_CODES or type(exc).__name__ in ("InterfaceError",)


def explain(exc: BaseException) -> str | None:
    if not is_driver_error(exc):
        return None
    code = error_code(exc)
    message = exc.args[1] if len(exc.args) > 1 else str(exc)
    return f"MySQL error {code}: {one_line(str(message))}" if code else f"MySQL error: {one_line(str(exc))}"
