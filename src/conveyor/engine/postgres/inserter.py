"""Writing new jobs: chunked, atomic, notifications included.

Two ways in, chosen per call by its size:

* Fewer than ``COPY_THRESHOLD`` jobs: ``insert_jobs.sql``, one statement per chunk of a JSON array.
  A single job (or a small batch) is one round trip, atomic by itself.
* Larger batches: COPY, which PostgreSQL ingests much faster than it decodes and inserts JSON.
  ``insert_clock.sql`` reads the insert clock once; then per chunk of ``COPY_CHUNK`` jobs the rows
  are formatted (``rows.CopyRows``, with the state and times ``insert_jobs.sql`` would give them),
  ``insert_reserve.sql`` reserves their ids from the table's sequence (so they are returned in input
  order) and ``insert_copy.sql`` streams them. The next chunk is pulled from the caller's iterable
  and formatted while the server still ingests the current one, so the two processes overlap.
  ``insert_notify.sql`` finally notifies the queues that gained available jobs. COPY's text format
  is used, not the binary one (which the server parses about 15% faster): text lets the server
  convert each value to the column's own type, so a table that Elixir Oban created (``integer``
  priority, ``varchar[]`` tags) takes the same rows.

Either way all chunks run in one transaction (or a savepoint inside the caller's), so a batch is
atomic, and memory stays bounded by a chunk on both sides.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator
from datetime import datetime
from typing import Any

import psycopg
from psycopg.rows import tuple_row

from conveyor.engine.postgres import foreign
from conveyor.engine.postgres.rows import CopyRows, chunked_payloads, naive_utc, take_requests
from conveyor.engine.sqlfiles import SqlFiles
from conveyor.request import JobRequest

#: Jobs per ``insert_jobs.sql`` statement: large enough to amortise round trips, small enough that a
#: big batch streams through bounded memory on both sides.
INSERT_CHUNK = 5_000
#: From this many jobs in one call on, COPY is used: below it the extra round trips (transaction,
#: clock, id reservation, COPY start and end, notify) cost more than skipping JSON saves.
COPY_THRESHOLD = 200
#: Jobs per COPY: rows are held in memory and ids reserved a chunk at a time.
COPY_CHUNK = 5_000
#: Rows per write into a COPY (about 80 KB: psycopg splits writes over 128 KB into copies).
COPY_WRITE_ROWS = 500


def _copy_capable(conn: psycopg.Connection[Any] | psycopg.AsyncConnection[Any]) -> bool:
    # COPY data is formatted as UTF-8; on a connection with another client encoding the statement
    # path lets psycopg encode the parameters instead.
    return conn.info.encoding == "utf-8"


class Inserter:
    """Inserts a stream of requests on an async or a sync connection (see the module's docstring)."""

    def __init__(self, sql: SqlFiles, insert_channel: str) -> None:
        self._statement = sql["insert_jobs"].encode()
        self._clock = sql["insert_clock"].encode()
        self._reserve = sql["insert_reserve"].encode()
        self._copy = sql["insert_copy"].encode()
        self._notify = sql["insert_notify"].encode()
        self._channel = insert_channel

    def _params(self, payload: str, now: datetime | None) -> dict[str, Any]:
        return {"jobs": payload, "now": now, "channel": self._channel}

    def _notify_params(self, formatter: CopyRows) -> dict[str, Any]:
        return {"channel": self._channel, "queues": sorted(formatter.available_queues)}

    # -- async -------------------------------------------------------------------------------
    async def insert(
        self,
        conn: psycopg.AsyncConnection[Any],
        requests: Iterable[JobRequest],
        now: datetime | None,
    ) -> list[int]:
        clock = naive_utc(now)
        source = iter(requests)
        head = take_requests(source, COPY_THRESHOLD)
        if not head:
            return []
        source = itertools.chain(head, source)
        async with conn.cursor(row_factory=tuple_row) as cur:
            if len(head) < COPY_THRESHOLD or not _copy_capable(conn):
                return await self._insert_statements(conn, cur, source, clock)
            async with foreign.atomic_async(conn):
                return await self._insert_copy(cur, source, clock)

    async def _insert_copy(
        self, cur: psycopg.AsyncCursor[tuple[Any, ...]], source: Iterator[JobRequest], now: datetime | None
    ) -> list[int]:
        await cur.execute(self._clock, {"now": now})
        formatter = CopyRows(_first(await cur.fetchone()))
        ids: list[int] = []
        rows = formatter.take(source, COPY_CHUNK)
        while rows:
            await cur.execute(self._reserve, {"count": len(rows)}, binary=True)
            chunk_ids: list[int] = _first(await cur.fetchone())
            async with cur.copy(self._copy) as copy:
                for start in range(0, len(rows), COPY_WRITE_ROWS):
                    end = start + COPY_WRITE_ROWS
                    await copy.write(formatter.with_ids(rows[start:end], chunk_ids[start:end]))
                # Format the next chunk while the server is still ingesting this one.
                rows = formatter.take(source, COPY_CHUNK)
            ids += chunk_ids
        if formatter.available_queues:
            await cur.execute(self._notify, self._notify_params(formatter))
        return ids

    async def _insert_statements(
        self,
        conn: psycopg.AsyncConnection[Any],
        cur: psycopg.AsyncCursor[tuple[Any, ...]],
        requests: Iterable[JobRequest],
        now: datetime | None,
    ) -> list[int]:
        payloads = chunked_payloads(requests, INSERT_CHUNK)
        first = next(payloads, None)
        if first is None:
            return []
        second = next(payloads, None)
        if second is None:  # One statement is atomic by itself: no transaction round trips.
            await cur.execute(self._statement, self._params(first, now))
            return [row[0] for row in await cur.fetchall()]
        ids: list[int] = []
        async with foreign.atomic_async(conn):
            for payload in (first, second, *payloads):
                await cur.execute(self._statement, self._params(payload, now))
                ids += [row[0] for row in await cur.fetchall()]
        return ids

    # -- sync: the same steps on a caller's blocking connection ------------------------------
    def insert_sync(
        self,
        conn: psycopg.Connection[Any],
        requests: Iterable[JobRequest],
        now: datetime | None,
    ) -> list[int]:
        clock = naive_utc(now)
        source = iter(requests)
        head = take_requests(source, COPY_THRESHOLD)
        if not head:
            return []
        source = itertools.chain(head, source)
        with conn.cursor(row_factory=tuple_row) as cur, foreign.atomic_sync(conn):
            if len(head) < COPY_THRESHOLD or not _copy_capable(conn):
                return self._insert_statements_sync(cur, source, clock)
            return self._insert_copy_sync(cur, source, clock)

    def _insert_copy_sync(
        self, cur: psycopg.Cursor[tuple[Any, ...]], source: Iterator[JobRequest], now: datetime | None
    ) -> list[int]:
        cur.execute(self._clock, {"now": now})
        formatter = CopyRows(_first(cur.fetchone()))
        ids: list[int] = []
        rows = formatter.take(source, COPY_CHUNK)
        while rows:
            cur.execute(self._reserve, {"count": len(rows)}, binary=True)
            chunk_ids: list[int] = _first(cur.fetchone())
            with cur.copy(self._copy) as copy:
                for start in range(0, len(rows), COPY_WRITE_ROWS):
                    end = start + COPY_WRITE_ROWS
                    copy.write(formatter.with_ids(rows[start:end], chunk_ids[start:end]))
                rows = formatter.take(source, COPY_CHUNK)
            ids += chunk_ids
        if formatter.available_queues:
            cur.execute(self._notify, self._notify_params(formatter))
        return ids

    def _insert_statements_sync(
        self, cur: psycopg.Cursor[tuple[Any, ...]], requests: Iterable[JobRequest], now: datetime | None
    ) -> list[int]:
        ids: list[int] = []
        for payload in chunked_payloads(requests, INSERT_CHUNK):
            cur.execute(self._statement, self._params(payload, now))
            ids += [row[0] for row in cur.fetchall()]
        return ids


def _first(row: tuple[Any, ...] | None) -> Any:
    """The only column of a one-row result."""
    assert row is not None
    return row[0]
