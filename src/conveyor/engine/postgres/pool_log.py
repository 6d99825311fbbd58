"""One log line per change of a pool's state, instead of psycopg_pool's own.

While the server is away (a failover, a restart), psycopg_pool logs every failed attempt to connect,
about once a second per pool, each time with libpq's message over two or three lines, and a second
warning whenever a series of attempts gives up. A filter on its logger keeps the first failure of a
pool, on one line and without a password; ``connected`` logs the pool's return. Other records of
that logger pass unchanged.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from conveyor.engine.postgres.dsn import scrub
from conveyor.errors import one_line

log = logging.getLogger("conveyor.engine")

POOL_LOGGER = "psycopg.pool"
#: psycopg_pool's messages (pool_async.py) for a failed attempt, and for a series that gave up.
_FAILED = "error connecting in %r: %s"
_GAVE_UP = "reconnection attempt in pool %r failed after %s sec"


class PoolStates(logging.Filter):
    """Which pools (by name) cannot connect now; the filter of psycopg_pool's logger."""

    def __init__(self) -> None:
        super().__init__()
        self._lost: set[str] = set()
        self._dsns: dict[str, str] = {}

    def watch(self, name: str, dsn: str) -> None:
        """Pool ``name`` connects to ``dsn`` (whose passwords are masked in its messages)."""
        self._dsns[name] = dsn

    def lost(self, name: str) -> bool:
        return name in self._lost

    def filter(self, record: logging.LogRecord) -> bool:
        args: Any = record.args
        if record.msg not in (_FAILED, _GAVE_UP) or not isinstance(args, tuple) or len(args) != 2:
            return True
        name = str(args[0])
        if record.msg == _GAVE_UP or name in self._lost:
            return False  # the pool is known to be down: said once already
        self._lost.add(name)
        reason = one_line(scrub(str(args[1]), self._dsns.get(name, "")))
        record.msg = "pool %r cannot connect to the database (%s); retrying, quietly until it is back"
        record.args = (name, reason)
        return True

    def connected(self, name: str) -> None:
        """Pool ``name`` made a connection: if it had lost the server, say that it is back."""
        if name in self._lost:
            self._lost.discard(name)
            log.warning("pool %r is connected to the database again", name)


#: The one filter on psycopg_pool's logger, whichever engines a process opens.
POOL_STATES = PoolStates()


def install() -> PoolStates:
    logger = logging.getLogger(POOL_LOGGER)
    if POOL_STATES not in logger.filters:
        logger.addFilter(POOL_STATES)
    return POOL_STATES


def reporting(
    name: str, dsn: str, configure: Callable[[Any], Awaitable[None]]
) -> Callable[[Any], Awaitable[None]]:
    """``configure`` for pool ``name``, which also tells ``POOL_STATES`` that it connected."""
    install().watch(name, dsn)

    async def configured(conn: Any) -> None:
        await configure(conn)
        POOL_STATES.connected(name)

    return configured
