"""The engine's connection pool: psycopg_pool's, never handing out a connection the server has
already closed.

A pooled connection the server terminated while it sat idle (a restart, a failover, an operator's
``pg_terminate_backend``, an idle-session timeout) is only found out by the next statement sent on
it, which then fails: after a database restart, the first call of every web worker would fail.
psycopg_pool's ``check=`` callback could test each connection on checkout, but its test is a round
trip to the server on every checkout (doubling the cost of a one-statement call such as an enqueue),
and it sleeps 1, 2, 4 ... seconds between dead connections it finds.

The server tells a client when it closes its connection: the error message it sends (``57P01
terminating connection due to administrator command``) and the end of the stream reach the socket
at once. An idle connection in autocommit otherwise receives nothing (the engine LISTENs only on
the listener's own connection), so a readable socket on checkout means the connection is gone (or
in a state no statement should meet). Asking the socket costs one ``select`` call, no round trip;
such a connection is closed and handed back, the pool replaces it, and the next one is tried at
once.

What this cannot see is a connection that dies after the checkout, during the statement: that one
still fails, as it must, since whether the server committed it (an insert) cannot be known.

The engine's probe (the first connection, which tells a wrong address in seconds) is handed over to
the pool as its first connection (``hand_over``) rather than closed: a server session's start and
exit cost the server about 4 ms of CPU, and the pool would open another one at once.
"""

from __future__ import annotations

import select
from typing import Any

import psycopg
from psycopg.pq import ConnStatus, TransactionStatus
from psycopg_pool import AsyncConnectionPool


def is_dead(conn: psycopg.AsyncConnection[Any] | psycopg.Connection[Any]) -> bool:
    """Whether an idle pooled connection is closed, or has data waiting that no statement asked for
    (the server's goodbye)."""
    pgconn = conn.pgconn
    if pgconn.status != ConnStatus.OK or pgconn.transaction_status != TransactionStatus.IDLE:
        return True
    try:
        return _readable(pgconn.socket)
    except (OSError, ValueError, psycopg.OperationalError):  # no socket any more
        return True


def _readable(fd: int) -> bool:
    # poll, not select: select refuses a descriptor above 1023, which a busy web process reaches.
    if hasattr(select, "poll"):
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        return bool(poller.poll(0))
    readable, _, _ = select.select([fd], [], [], 0)  # Windows: no poll, and no FD_SETSIZE limit
    return bool(readable)


def _handing_over(base: type[Any], handed: list[Any]) -> type[Any]:
    """A subclass of the connection class ``base`` whose ``connect`` returns the connections in
    ``handed`` first, one per call, and opens new ones once there are none."""

    async def connect(cls: type[Any], /, conninfo: str = "", **kwargs: Any) -> Any:
        if handed:
            return handed.pop()
        return await super(handing, cls).connect(conninfo, **kwargs)

    handing: type[Any] = type(base.__name__, (base,), {"connect": classmethod(connect)})
    return handing


class LivePool(AsyncConnectionPool):
    """An ``AsyncConnectionPool`` whose ``getconn`` (and so ``connection()``) skips connections
    the server has closed, and which takes a connection made for it (``hand_over``) as its next
    new one (see the module's docstring)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._handed: list[Any] = []
        self.connection_class = _handing_over(self.connection_class, self._handed)

    def hand_over(self, conn: Any) -> None:
        """Make ``conn`` (of this pool's ``connection_class``, with the pool's ``kwargs``) the next
        connection the pool adds, configured as any new one, instead of opening another."""
        self._handed.append(conn)

    async def close(self, timeout: float = 5.0) -> None:
        while self._handed:  # handed over, never taken (a pool of min_size 0 that never grew)
            await self._handed.pop().close()
        await super().close(timeout)

    async def getconn(self, timeout: float | None = None) -> Any:
        # Each dead connection is replaced as it is handed back, so after a restart the pool
        # holds at most max_size of them: one more try than that always ends on a live (or a new)
        # connection, or on the pool's own timeout.
        for _ in range(self.max_size):
            conn = await super().getconn(timeout)
            if not is_dead(conn):
                return conn
            await conn.close()  # closed, it is discarded by putconn and a new one is made
            await self.putconn(conn)
        return await super().getconn(timeout)
