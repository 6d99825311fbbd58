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

The steps are written once, as a generator of ``Step`` values (``Inserter.steps``), like the SQLite
inserter's; ``run_async`` drives them on an async connection (the pool's or a caller's) and
``run_sync`` on a caller's blocking one.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Generator, Iterable, Iterator
from contextlib import AsyncExitStack, ExitStack
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg
from psycopg.rows import tuple_row

from conveyor.engine._sqlfiles import SqlFiles
from conveyor.engine.postgres import foreign
from conveyor.engine.postgres.rows import CopyRows, chunked_payloads, naive_utc, take_requests
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


@dataclass(frozen=True, slots=True)
class Atomic:
    """Make the rest of the steps one unit: a transaction, or a savepoint in the caller's."""


@dataclass(frozen=True, slots=True)
class Execute:
    """Run a statement; the driver sends back its rows."""

    query: bytes
    params: dict[str, Any]
    binary: bool = False


@dataclass(frozen=True, slots=True)
class CopyIn:
    """Stream ``blocks`` into ``COPY query``. ``meanwhile`` runs once they are written, before the
    COPY ends (so the next chunk is prepared while the server still ingests this one); the driver
    sends back what it returns."""

    query: bytes
    blocks: Iterator[bytes]
    meanwhile: Callable[[], Any]


Step = Atomic | Execute | CopyIn
Steps = Generator[Step, Any, list[int]]


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

    async def insert(
        self, conn: psycopg.AsyncConnection[Any], requests: Iterable[JobRequest], now: datetime | None
    ) -> list[int]:
        return await run_async(conn, self.steps(requests, now, copy=_copy_capable(conn)))

    def insert_sync(
        self, conn: psycopg.Connection[Any], requests: Iterable[JobRequest], now: datetime | None
    ) -> list[int]:
        return run_sync(conn, self.steps(requests, now, copy=_copy_capable(conn)))

    def steps(self, requests: Iterable[JobRequest], now: datetime | None, *, copy: bool) -> Steps:
        """The statements of one insert; returns the ids in input order."""
        clock = naive_utc(now)
        source = iter(requests)
        head = take_requests(source, COPY_THRESHOLD)
        if not head:
            return []
        source = itertools.chain(head, source)
        if len(head) < COPY_THRESHOLD or not copy:
            return (yield from self._statement_steps(source, clock))
        yield Atomic()
        return (yield from self._copy_steps(source, clock))

    def _statement_steps(self, requests: Iterator[JobRequest], now: datetime | None) -> Steps:
        payloads = chunked_payloads(requests, INSERT_CHUNK)
        first = next(payloads, None)
        if first is None:
            return []
        second = next(payloads, None)
        if second is not None:  # One statement is atomic by itself: no transaction round trips.
            yield Atomic()
        ids: list[int] = []
        for payload in (first, *(() if second is None else (second,)), *payloads):
            rows = yield Execute(self._statement, {"jobs": payload, "now": now, "channel": self._channel})
            ids += [row[0] for row in rows]
        return ids

    def _copy_steps(self, source: Iterator[JobRequest], now: datetime | None) -> Steps:
        formatter = CopyRows(_first((yield Execute(self._clock, {"now": now}))))
        ids: list[int] = []
        rows = formatter.take(source, COPY_CHUNK)
        while rows:
            chunk_ids: list[int] = _first((yield Execute(self._reserve, {"count": len(rows)}, binary=True)))
            blocks = (
                formatter.with_ids(
                    rows[start : start + COPY_WRITE_ROWS], chunk_ids[start : start + COPY_WRITE_ROWS]
                )
                for start in range(0, len(rows), COPY_WRITE_ROWS)
            )
            next_rows = functools.partial(formatter.take, source, COPY_CHUNK)
            rows = yield CopyIn(self._copy, blocks, next_rows)
            ids += chunk_ids
        if formatter.available_queues:
            queues = sorted(formatter.available_queues)
            yield Execute(self._notify, {"channel": self._channel, "queues": queues})
        return ids


async def run_async(conn: psycopg.AsyncConnection[Any], steps: Steps) -> list[int]:
    """Run the steps on an async connection."""
    async with AsyncExitStack() as stack:
        cur = await stack.enter_async_context(conn.cursor(row_factory=tuple_row))
        result: Any = None
        while True:
            try:
                step = steps.send(result)
            except StopIteration as stop:
                ids: list[int] = stop.value
                return ids
            result = None
            if isinstance(step, Execute):
                await cur.execute(step.query, step.params, binary=step.binary)
                result = await cur.fetchall()
            elif isinstance(step, CopyIn):
                async with cur.copy(step.query) as copy:
                    for block in step.blocks:
                        await copy.write(block)
                    result = step.meanwhile()
            else:
                await stack.enter_async_context(foreign.atomic_async(conn))
    raise AssertionError("unreachable")  # pragma: no cover


def run_sync(conn: psycopg.Connection[Any], steps: Steps) -> list[int]:
    """Run the steps on a caller's blocking connection: always inside a savepoint (or transaction),
    so a failure leaves the caller's transaction usable."""
    with ExitStack() as stack:
        cur = stack.enter_context(conn.cursor(row_factory=tuple_row))
        stack.enter_context(foreign.atomic_sync(conn))
        result: Any = None
        while True:
            try:
                step = steps.send(result)
            except StopIteration as stop:
                ids: list[int] = stop.value
                return ids
            result = None
            if isinstance(step, Execute):
                cur.execute(step.query, step.params, binary=step.binary)
                result = cur.fetchall()
            elif isinstance(step, CopyIn):
                with cur.copy(step.query) as copy:
                    for block in step.blocks:
                        copy.write(block)
                    result = step.meanwhile()
    raise AssertionError("unreachable")  # pragma: no cover


def _first(rows: list[tuple[Any, ...]]) -> Any:
    """The only column of a one-row result."""
    return rows[0][0]
