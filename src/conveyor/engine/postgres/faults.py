"""Telling a passing PostgreSQL failure (retry it) from a refused statement (isolate its data), and
saying either to a user."""

from __future__ import annotations

import psycopg
from psycopg_pool import PoolTimeout

from conveyor.engine.postgres.pooler import is_pooler_error
from conveyor.errors import EngineClosedError, one_line

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


def explain(exc: BaseException) -> str | None:
    """What a user is told of a psycopg failure (see ``Engine.explain``); None for anything else."""
    if isinstance(exc, PoolTimeout):
        return f"no database connection in time: {one_line(str(exc))}"
    if isinstance(exc, psycopg.OperationalError):
        return f"the database is unavailable: {one_line(str(exc))}"
    if isinstance(exc, psycopg.Error):
        return f"the database refused the command: {one_line(str(exc))}"
    return None
