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


class LivePool(AsyncConnectionPool):
    """An ``AsyncConnectionPool`` whose ``getconn`` (and so ``connection()``) skips connections
    the server has closed (see the module's docstring)."""

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
