"""Inserts from a plain thread on blocking PyMySQL connections (the engine role ``BlockingInserts``).

``Conveyor.enqueue_sync`` otherwise runs on the app's portal, an event loop in a thread of its own:
each call is handed to that thread and its result handed back, and it waits while that loop is busy.
Here the caller's thread takes a connection of a small pool of PyMySQL connections and runs the
very code of ``MysqlEngine.insert``: its awaits are on ``BlockingConnection`` and
``caller.Blocking``, which never suspend, so ``caller.run_blocking`` drives it to its end without an
event loop. The sessions are set up as the async pool's (``connect.SESSION_SETUP``), and the
notifications reach this process's listeners when the insert commits, as the async inserts' do
(``fanout``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Iterable, Iterator
from contextlib import asynccontextmanager, contextmanager, suppress
from datetime import datetime
from typing import Any

from conveyor.engine.mysql.address import Address
from conveyor.engine.mysql.caller import Blocking, run_blocking
from conveyor.engine.mysql.connect import blocking_settings, in_transaction
from conveyor.engine.mysql.fanout import Hub
from conveyor.engine.mysql.rows import check_now
from conveyor.errors import ConveyorError, EngineClosedError
from conveyor.job_ids import JobIds
from conveyor.request import JobRequest

#: Seconds a connection may stay unused before it is closed rather than used again.
MAX_IDLE = 60.0
#: Seconds an insert waits for a connection while all the pool may open are in use.
ACQUIRE_TIMEOUT = 30.0

#: ``MysqlEngine``'s insert in transactions of a given kind: (transaction, requests, now, hold).
OwnInsert = Callable[
    [Any, Iterable[JobRequest], datetime | None, tuple[int, ...]], Coroutine[Any, Any, JobIds]
]


def blocking_driver() -> Any:
    """The PyMySQL module, or a clear error naming the extra that brings it."""
    try:
        import pymysql
    except ImportError:  # pragma: no cover - the mysql extra installs it
        raise ConveyorError(
            "the MySQL/MariaDB engine's blocking inserts need the PyMySQL driver: "
            "pip install 'conveyor[mysql]'"
        ) from None
    return pymysql


class BlockingConnection:
    """A PyMySQL connection with the awaitable methods ``connect.in_transaction`` calls."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn

    async def begin(self) -> None:
        self.conn.begin()

    async def commit(self) -> None:
        self.conn.commit()

    async def rollback(self) -> None:
        self.conn.rollback()

    def close(self) -> None:
        with suppress(Exception):  # closed already
            self.conn.close()

    @asynccontextmanager
    async def cursor(self) -> AsyncIterator[Blocking]:
        cursor = self.conn.cursor()
        try:
            yield Blocking(cursor)
        finally:
            cursor.close()


class BlockingPool:
    """Up to ``size`` PyMySQL connections, shared by the threads that insert; one that sat unused
    for ``MAX_IDLE`` seconds, or was in use when an error came, is closed instead of used again."""

    def __init__(self, address: Address, size: int) -> None:
        self._settings = blocking_settings(address)
        self._slots = threading.BoundedSemaphore(size)
        self._lock = threading.Lock()
        self._idle: list[tuple[float, BlockingConnection]] = []  # the most recently used last
        self._closed = False

    @contextmanager
    def connection(self) -> Iterator[BlockingConnection]:
        if not self._slots.acquire(timeout=ACQUIRE_TIMEOUT):
            raise TimeoutError(f"every blocking MySQL connection stayed in use for {ACQUIRE_TIMEOUT:g} s")
        try:
            conn = self._take() or BlockingConnection(blocking_driver().connect(**self._settings))
            try:
                yield conn
            except BaseException:
                conn.close()
                raise
            self._give_back(conn)
        finally:
            self._slots.release()

    def _take(self) -> BlockingConnection | None:
        stale: list[BlockingConnection] = []
        with self._lock:
            if self._idle:
                since, conn = self._idle.pop()
                if time.monotonic() - since < MAX_IDLE and conn.conn.open:
                    return conn
                # The rest sat unused longer still.
                stale = [conn, *(one for _, one in self._idle)]
                self._idle.clear()
        for conn in stale:
            conn.close()
        return None

    def _give_back(self, conn: BlockingConnection) -> None:
        with self._lock:
            if not self._closed and conn.conn.open:
                self._idle.append((time.monotonic(), conn))
                return
        conn.close()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for _, conn in idle:
            conn.close()


class MysqlBlockingInsert:
    """Blocking inserts of one open ``MysqlEngine``, in the calling thread (any thread)."""

    def __init__(
        self, insert: OwnInsert, *, address: Address, size: int, hub: Hub, is_open: Callable[[], bool]
    ) -> None:
        self._insert = insert
        self._hub = hub
        self._is_open = is_open
        self._pool = BlockingPool(address, size)

    def insert(self, requests: Iterable[JobRequest], *, now: datetime | None = None) -> JobIds:
        check_now(now)
        return run_blocking(self._insert(self._transaction, requests, now, ()))

    @asynccontextmanager
    async def _transaction(self, *, keyed: bool = False) -> AsyncIterator[Any]:
        if not self._is_open():
            raise EngineClosedError("the MySQL engine is not open; call await engine.open()")
        with self._pool.connection() as conn:
            async with in_transaction(conn, keyed=keyed, hub=self._hub) as cursor:
                yield cursor

    def close(self) -> None:
        self._pool.close()
