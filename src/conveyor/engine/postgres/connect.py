"""One connection, quickly: the probe that tells a wrong address, role or database in seconds,
with the server's own reason, instead of a pool that waits out its 30 s timeout."""

from __future__ import annotations

import asyncio
from typing import Any

import psycopg

from conveyor.engine.postgres.dsn import scrub
from conveyor.errors import DatabaseUnreachableError

#: Seconds a first connection may take before the database counts as unreachable.
CONNECT_TIMEOUT = 3


def one_line(text: str) -> str:
    """``text`` on one line: the lines of a multi-line message joined, blanks collapsed."""
    return "; ".join(" ".join(line.split()) for line in text.splitlines() if line.strip())


async def connect_once(dsn: str, timeout: float = CONNECT_TIMEOUT) -> psycopg.AsyncConnection[Any]:
    """An autocommit connection to ``dsn``, or ``DatabaseUnreachableError`` within ``timeout``
    seconds (plus one) giving the server's reason (``database "x" does not exist`` and the like)."""
    try:
        return await asyncio.wait_for(
            psycopg.AsyncConnection.connect(dsn, autocommit=True, connect_timeout=max(1, round(timeout))),
            timeout + 1,
        )
    except TimeoutError:
        raise DatabaseUnreachableError(
            f"cannot connect to the database: no answer within {timeout:g} seconds"
        ) from None
    except psycopg.Error as exc:
        reason = one_line(scrub(str(exc), dsn))
        raise DatabaseUnreachableError(f"cannot connect to the database: {reason}") from None
