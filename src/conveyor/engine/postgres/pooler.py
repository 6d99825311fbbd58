"""Running behind a connection pooler (PgBouncer, RDS Proxy, Supavisor and the like).

A pooler in *transaction* mode hands a client's transactions to whichever server session is free.
State kept in a session then goes wrong: a prepared statement made on one session is missing on
the next (``prepared statement "_pg3_1" does not exist``) or another client's is bound instead; a
``SET`` stays on a server session that other applications get next; ``LISTEN`` registers on a
session that the client then leaves, so nothing is ever received. In that mode the engine keeps no
session state: no server-side prepared statements (psycopg's ``prepare_threshold=None``), no
``SET`` (the one setting that is more than a plan hint, the hot path's ``synchronous_commit=off``,
goes with ``SET LOCAL`` into the transaction of each fetch and ack), and notifications are heard
on ``listen_url`` (a direct connection) or not at all: nodes then poll.

``pooler="auto"`` (the default) tells a pooler from a direct connection when the engine opens: a
server reports its own process id in the startup handshake, while a pooler answers that handshake
itself with an id of its own, so ``pg_backend_pid()`` differs from it. Which mode a pooler runs in
cannot be read from the client side, so a pooler found this way is treated as a transaction pooler
(the mode that is safe for both) with a warning saying how to declare it.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any

import psycopg
from psycopg import pq
from psycopg.adapt import Loader

from conveyor.errors import ValidationError

log = logging.getLogger("conveyor.engine")

AUTO, NONE, SESSION, TRANSACTION = "auto", "none", "session", "transaction"
#: The values of the ``pooler`` setting.
MODES = (AUTO, NONE, SESSION, TRANSACTION)

#: SQLSTATEs of errors a transaction pooler causes when session state is used through it anyway:
#: a prepared statement missing on this server session (26000) or already there under the name
#: (42P05), and a bind message meant for another statement (08P01, protocol violation). The server
#: refused the statement before running it: nothing in it was wrong, nothing of it was applied.
POOLER_STATES = frozenset({"26000", "42P05", "08P01"})


def check_pooler(value: Any, field: str = "pooler") -> str:
    if not isinstance(value, str) or value.lower() not in MODES:
        raise ValidationError(field, value, f"must be one of {', '.join(MODES)}")
    return value.lower()


def is_pooler_error(exc: BaseException) -> bool:
    """True for the errors of session state used through a transaction pooler (``POOLER_STATES``)."""
    return isinstance(exc, psycopg.Error) and exc.sqlstate in POOLER_STATES


async def detect(conn: psycopg.AsyncConnection[Any]) -> bool:
    """Whether ``conn`` reaches its server through a pooler: the process id given in the handshake
    is not the server session's own."""
    cur = await conn.execute("SELECT pg_backend_pid()", prepare=False)
    row = await cur.fetchone()
    return row is not None and row[0] != conn.info.backend_pid


def detected_warning() -> str:
    return (
        "the database connection goes through a connection pooler (the server's process id is not "
        "the one the handshake gave), so Conveyor uses no prepared statements, no session settings "
        'and no LISTEN on it, as a transaction pooler needs. Set pooler = "transaction" to say so '
        '(and silence this warning), or pooler = "session" if the pooler gives each client a server '
        "session of its own (PgBouncer's pool_mode=session)"
    )


POLLING_WARNING = (
    "notifications are off: LISTEN hears nothing through a transaction pooler and no listen_url is "
    "set, so nodes find new jobs by polling, and their poll_interval (1 s by default) is the pickup "
    "latency of a job inserted into an idle queue. Set listen_url to a direct connection to the "
    "database (not through the pooler) to be notified at once"
)


class UtcTimestamptzLoader(Loader):
    """``timestamptz`` values as aware datetimes in UTC whatever the session's time zone.

    Direct sessions are set to UTC once (``SET TIME ZONE``); a transaction pooler's sessions keep
    the zone of the server's configuration, and psycopg would attach that zone to every time read.
    """

    def __init__(self, oid: int, context: Any = None) -> None:
        super().__init__(oid, context)
        base = psycopg.adapters.get_loader(oid, pq.Format.TEXT)
        assert base is not None  # psycopg always has a timestamptz loader
        self._load = base(oid, context).load

    def load(self, data: Any) -> datetime:
        value: datetime = self._load(data)
        return value.astimezone(UTC)


class SilentListener:
    """What ``listen`` returns when notifications cannot be heard (a transaction pooler and no
    ``listen_url``): it never calls the handler, so nodes and waiters rely on their polls."""

    async def start(self) -> None:
        return None

    async def stop(self) -> None:
        return None
