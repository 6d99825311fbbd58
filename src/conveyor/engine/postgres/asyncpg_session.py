"""Running the engine's statements on a caller's asyncpg connection, inside the caller's transaction.

The engine's SQL is written for psycopg (``%(name)s`` placeholders, ``%%`` for a percent sign).
asyncpg takes numbered ``$n`` placeholders and positional arguments, so each statement is translated
once (and cached): every distinct name gets a number, a name used twice keeps its number. asyncpg
prepares the statement and learns each parameter's type from the server, so the values psycopg
takes (str for ``jsonb``, lists for arrays, naive datetimes for ``timestamp``) pass unchanged.

Inserts through asyncpg always use the statement path, never COPY: asyncpg's COPY API copies into a
table by name, not through the engine's ``insert_copy.sql``, and the statement path is one round trip
per 5,000 jobs.
"""

from __future__ import annotations

import functools
import re
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

_PLACEHOLDER = re.compile(r"%\((\w+)\)s|%%")
#: asyncpg's SAVEPOINT name for our statements in a caller's transaction (as psycopg's path names it).
SAVEPOINT = "conveyor_insert"


def is_asyncpg(conn: Any) -> bool:
    """Is ``conn`` an asyncpg connection (or a pool's proxy of one)? Checked by module, so asyncpg
    stays an optional dependency."""
    module = type(conn).__module__
    return module.startswith("asyncpg") and hasattr(conn, "is_in_transaction")


@functools.lru_cache(maxsize=512)
def translate(query: bytes | str) -> tuple[str, tuple[str, ...]]:
    """``query`` with ``$n`` placeholders, and the parameter names in their numbers' order."""
    text = query.decode() if isinstance(query, bytes) else query
    names: list[str] = []

    def number(match: re.Match[str]) -> str:
        name = match[1]
        if name is None:
            return "%"
        if name not in names:
            names.append(name)
        return f"${names.index(name) + 1}"

    return _PLACEHOLDER.sub(number, text), tuple(names)


class AsyncpgSession:
    """A caller's asyncpg connection, seen the way the engine uses a psycopg one."""

    #: COPY is psycopg's path only (see the module's docstring).
    copy_capable = False

    def __init__(self, conn: Any) -> None:
        self.conn = conn

    async def fetch(self, query: bytes | str, params: Mapping[str, Any]) -> list[tuple[Any, ...]]:
        """Run one statement; its rows as tuples."""
        sql, names = translate(query)
        try:
            arguments = [params[name] for name in names]
        except KeyError as missing:  # a bug of ours, not the caller's: say which statement
            raise RuntimeError(f"statement parameter {missing} was not given: {sql[:80]!r}") from None
        records = await self.conn.fetch(sql, *arguments)
        return [tuple(record) for record in records]

    @asynccontextmanager
    async def atomic(self) -> AsyncIterator[None]:
        """Make several statements atomic without committing the caller's transaction: a savepoint
        inside it (a failure rolls back our statements only), or a transaction of our own when none
        is open (asyncpg commits each statement by itself outside a transaction)."""
        if not self.conn.is_in_transaction():
            async with self.conn.transaction():
                yield
            return
        await self.conn.execute(f"SAVEPOINT {SAVEPOINT}")
        try:
            yield
        except BaseException:
            await self.conn.execute(f"ROLLBACK TO SAVEPOINT {SAVEPOINT}")
            raise
        await self.conn.execute(f"RELEASE SAVEPOINT {SAVEPOINT}")
