"""Writing new jobs: chunked, atomic, one statement per chunk, notifications included."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

import psycopg

from conveyor.engine.postgres import foreign
from conveyor.engine.postgres.rows import chunked_payloads, naive_utc
from conveyor.request import JobRequest

#: Jobs per insert statement: large enough to amortise round trips, small enough that 100k jobs
#: stream through bounded memory on both sides.
INSERT_CHUNK = 5_000


class Inserter:
    """Runs ``insert_jobs.sql`` for a stream of requests on an async or a sync connection."""

    def __init__(self, statement: str, insert_channel: str) -> None:
        self._statement = statement.encode()
        self._channel = insert_channel

    def _params(self, payload: str, now: datetime | None) -> dict[str, Any]:
        return {"jobs": payload, "now": naive_utc(now), "channel": self._channel}

    async def insert(
        self,
        conn: psycopg.AsyncConnection[Any],
        requests: Iterable[JobRequest],
        now: datetime | None,
    ) -> list[int]:
        payloads = chunked_payloads(requests, INSERT_CHUNK)
        first = next(payloads, None)
        if first is None:
            return []
        second = next(payloads, None)
        if second is None:  # One statement is atomic by itself: no transaction round trips.
            cur = await conn.execute(self._statement, self._params(first, now))
            return [row[0] for row in await cur.fetchall()]
        ids: list[int] = []
        async with foreign.atomic_async(conn):
            for payload in (first, second, *payloads):
                cur = await conn.execute(self._statement, self._params(payload, now))
                ids += [row[0] for row in await cur.fetchall()]
        return ids

    def insert_sync(
        self,
        conn: psycopg.Connection[Any],
        requests: Iterable[JobRequest],
        now: datetime | None,
    ) -> list[int]:
        ids: list[int] = []
        with foreign.atomic_sync(conn):
            for payload in chunked_payloads(requests, INSERT_CHUNK):
                cur = conn.execute(self._statement, self._params(payload, now))
                ids += [row[0] for row in cur.fetchall()]
        return ids
