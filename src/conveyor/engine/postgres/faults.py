"""Telling a passing PostgreSQL failure (retry it) from a refused statement (isolate its data)."""

from __future__ import annotations

import psycopg

from conveyor.engine.postgres.pooler import is_pooler_error
from conveyor.errors import EngineClosedError

#: SQLSTATE classes of failures that say nothing about the statement's data: connection exceptions
#: (08), transaction rollbacks such as deadlocks (40), insufficient resources (53), objects not in
#: the needed state such as locks not available (55), operator intervention such as a shutdown or a
#: cancelled query (57), and system errors such as I/O failures (58).
TRANSIENT_CLASSES = frozenset({"08", "40", "53", "55", "57", "58"})


def is_transient(exc: BaseException) -> bool:
    """True when retrying the same statement later may succeed (see ``Engine.is_transient``)."""
    if isinstance(exc, psycopg.InterfaceError | EngineClosedError):
        return True
    if is_pooler_error(exc):  # the server refused the statement before running any of it
        return True
    if isinstance(exc, psycopg.OperationalError):
        # No SQLSTATE: the client's side failed (no connection, pool timeout or closed).
        state = exc.sqlstate
        return state is None or state[:2] in TRANSIENT_CLASSES
    return False
