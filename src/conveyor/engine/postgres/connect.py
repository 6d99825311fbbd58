"""One connection, quickly: the probe that tells a wrong address, role or database in seconds,
with the server's own reason, instead of a pool that waits out its 30 s timeout.

A server that is up but takes no connection now (every slot taken, or starting up, or a standby
being promoted) is another matter: that passes, so the probe may be patient with it."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import psycopg

from conveyor.engine.postgres.dsn import scrub
from conveyor.errors import DatabaseUnreachableError, one_line

log = logging.getLogger("conveyor.engine")

#: Seconds a first connection may take before the database counts as unreachable.
CONNECT_TIMEOUT = 3
#: Seconds an engine opening (a node starting, an app's first call) keeps retrying a server that has
#: no free connection slot, or is starting up, before it fails with the server's reason.
BUSY_PATIENCE = 60.0
#: Seconds between those attempts: a few a minute once it lasts, so that waiting nodes add little
#: to a server short of connections.
BUSY_DELAYS = (0.5, 1.0, 2.0, 4.0, 5.0)
#: libpq reports these refusals before any session exists, often without a SQLSTATE: matched by
#: text too (53300 too_many_connections, 57P03 cannot_connect_now).
_BUSY_STATES = frozenset({"53300", "57P03"})
_BUSY_TEXTS = (
    "too many clients already",
    "remaining connection slots are reserved",
    "the database system is starting up",
    "the database system is not yet accepting connections",
    "the database system is shutting down",
)


def is_busy(exc: BaseException) -> bool:
    """True when the server refused a connection for want of a free slot, or because it is not
    accepting connections yet: trying again later may well succeed."""
    if not isinstance(exc, psycopg.OperationalError):
        return False
    text = str(exc)
    return exc.sqlstate in _BUSY_STATES or any(part in text for part in _BUSY_TEXTS)


async def connect_once(
    dsn: str,
    timeout: float = CONNECT_TIMEOUT,
    *,
    patience: float = 0.0,
    connection_class: type[psycopg.AsyncConnection[Any]] = psycopg.AsyncConnection,
) -> psycopg.AsyncConnection[Any]:
    """An autocommit connection to ``dsn``, or ``DatabaseUnreachableError`` within ``timeout``
    seconds (plus one) giving the server's reason (``database "x" does not exist`` and the like).

    With ``patience``, a server that is busy (``is_busy``) is asked again, ``BUSY_DELAYS`` apart,
    for up to that many seconds; the first refusal is logged, once. ``connection_class``: a pool's,
    for a connection handed over to it afterwards."""
    deadline = time.monotonic() + patience
    attempt = 0
    while True:
        try:
            conn = await asyncio.wait_for(
                connection_class.connect(dsn, autocommit=True, connect_timeout=max(1, round(timeout))),
                timeout + 1,
            )
            if attempt:
                log.warning("the database takes connections again")
            return conn
        except TimeoutError:
            raise DatabaseUnreachableError(
                f"cannot connect to the database: no answer within {timeout:g} seconds"
            ) from None
        except psycopg.Error as exc:
            reason = one_line(scrub(str(exc), dsn))
            left = deadline - time.monotonic()
            if not is_busy(exc) or left <= 0:
                raise DatabaseUnreachableError(f"cannot connect to the database: {reason}") from None
            if attempt == 0:
                log.warning(
                    "the database takes no connection now (%s); retrying for up to %g s", reason, patience
                )
            await asyncio.sleep(min(BUSY_DELAYS[min(attempt, len(BUSY_DELAYS) - 1)], left))
            attempt += 1
