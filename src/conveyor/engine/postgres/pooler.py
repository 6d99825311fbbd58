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
from collections.abc import Callable
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


def migration_refusal(pooler: str) -> str:
    """The one line that refuses to migrate through a transaction pooler without a direct URL
    (``pooler``: the setting; other than "transaction" when the pooler was found, not declared)."""
    if pooler == TRANSACTION:
        found, hint = 'pooler = "transaction" says the database URL goes through a transaction pooler', ""
    else:
        found = "the database URL goes through a connection pooler, taken for a transaction pooler"
        hint = '; if the pooler gives each client a server session of its own, set pooler = "session"'
    return (
        f"cannot migrate: {found}, and migrations need a session of their own (an advisory lock "
        "and settings kept across their steps). Set listen_url (CONVEYOR_LISTEN_URL) to a direct "
        "connection to the database, which migrations then use, or run `conveyor migrate` with "
        f"--dsn set to the direct URL{hint}"
    )


#: Logged once when a pooler error shows up on an engine that did not know of the pooler.
RUNTIME_WARNING = (
    "a statement failed as it does through a transaction pooler (%s): Conveyor prepares no more "
    "statements and sets nothing on new sessions. What its sessions set when they opened may have "
    "reached other clients of the pooler, and LISTEN hears nothing through it: set pooler = "
    '"transaction" (and listen_url) to have none of that from the start'
)


def hot_settings(*, synchronous_commit: bool = True) -> dict[str, str]:
    """What fetches and acks through a transaction pooler set with ``SET LOCAL`` in their own
    transaction. The plan settings of ``sessions.hot_session`` serve the generic plans of prepared
    statements, which such a pooler rules out (each statement is planned for its own parameters);
    ``synchronous_commit = off``, where asked for, still applies, transaction by transaction."""
    return {} if synchronous_commit else {"synchronous_commit": "off"}


def configure(conn: psycopg.AsyncConnection[Any] | psycopg.Connection[Any]) -> None:
    """A new connection through a transaction pooler: no server-side prepared statements, and
    times read in UTC without ``SET TIME ZONE``. No ``SET jit = off`` either: the heavy reads (stats,
    counts) turn it off with ``SET LOCAL`` anyway."""
    conn.prepare_threshold = None
    conn.adapters.register_loader("timestamptz", UtcTimestamptzLoader)


def watched_connection(
    on_error: Callable[[BaseException], None], pooled: Callable[[], bool]
) -> type[psycopg.AsyncConnection[Any]]:
    """The pools' connection class: ``execute`` tells ``on_error`` of a pooler error
    (``is_pooler_error``) before raising it, whichever caller retries the statement, so that an
    engine not told of the pooler stops preparing statements at the first sign of one; and a
    connection made before that (``pooled()`` now true) stops preparing at its next statement.

    Not a pool ``reset`` callback: with one, psycopg_pool hands every returned connection to a
    worker task, a task switch on each fetch and ack, and a task that outlives a loop an app left."""

    class WatchedConnection(psycopg.AsyncConnection[Any]):
        async def execute(self, *args: Any, **kwargs: Any) -> Any:
            if self.prepare_threshold is not None and pooled():
                self.prepare_threshold = None
            try:
                return await super().execute(*args, **kwargs)
            except psycopg.Error as exc:
                if is_pooler_error(exc):
                    on_error(exc)
                raise

    return WatchedConnection


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
