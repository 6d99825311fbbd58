"""Writing new jobs: chunked, atomic, notifications included.

Two ways in, chosen per call by its size:

* Fewer than ``COPY_THRESHOLD`` jobs: ``insert_jobs.sql``, one statement per chunk of a JSON array
  (one job without unique or lock: ``insert_one_job.sql``, its values as parameters). A single job
  (or a small batch) is one round trip, atomic by itself.
* Larger batches: COPY, which PostgreSQL ingests much faster than it decodes and inserts JSON.
  ``insert_clock.sql`` reads the insert clock once, and whether the table has the column types of
  Conveyor's migrations: then rows go in COPY's binary format (``copy_rows.BinaryRows``, which the
  server ingests about 13% faster), else in its text format (``copy_rows.TextRows``: a table Elixir
  Oban created, ``integer`` priority, ``varchar[]`` tags, where the server converts each value to
  the column's own type). Rows get the state and times ``insert_jobs.sql`` would give them.
  Per chunk, ``insert_reserve.sql`` reserves their ids from the table's sequence (so they are
  returned in input order) and ``insert_copy.sql`` streams them. Chunks grow from
  ``FIRST_COPY_CHUNK`` to ``COPY_CHUNK`` jobs; the next chunk is pulled from the caller's iterable
  and formatted a slice between the blocks of the current one (``Lookahead``), so the server
  ingests while Python formats, and its ids are reserved on a second connection of the pool while
  the current COPY ends (``insert_steps.SideConnection``; on a caller's connection, in line).
  ``insert_notify.sql`` finally notifies the queues that gained available jobs.

Either way all chunks run in one transaction (or a savepoint inside the caller's), so a batch is
atomic, and memory stays bounded by a chunk on both sides.

The steps are written once, as a generator of ``Step`` values (``Inserter.steps``), like the SQLite
inserter's; ``insert_steps.run_async`` drives them on an async connection (the pool's or a caller's)
and ``insert_steps.run_sync`` on a caller's blocking one.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Generator, Iterable, Iterator, Sequence
from datetime import datetime
from typing import Any

import psycopg
from psycopg.rows import tuple_row
from psycopg_pool import AsyncConnectionPool

from conveyor.engine._sqlfiles import SqlFiles, without_comment_lines
from conveyor.engine._unique_plan import claims_by_insert
from conveyor.engine.postgres import foreign
from conveyor.engine.postgres.asyncpg_session import AsyncpgSession
from conveyor.engine.postgres.copy_rows import CopyRows, Pushback, copy_rows
from conveyor.engine.postgres.insert_steps import (
    Atomic,
    CopyIn,
    Execute,
    Step,
    Steps,
    run_async,
    run_sync,
)
from conveyor.engine.postgres.rows import (
    naive_utc,
    one_job_params,
    records_json,
    request_chunks,
    request_record,
    single_insert_id,
    take_requests,
)
from conveyor.engine.postgres.unique_claims import (
    HeldUniques,
    UniqueClaims,
    one_unique_params,
    take_unique_run,
)
from conveyor.job_ids import JobIds, JobIdsBuilder
from conveyor.request import JobRequest, request_stream

#: Jobs per ``insert_jobs.sql`` statement: large enough to amortise round trips, small enough that a
#: big batch streams through bounded memory on both sides.
INSERT_CHUNK = 5_000
#: From this many jobs in one call on, COPY is used: below it the extra round trips (transaction,
#: clock, id reservation, COPY start and end, notify) cost more than skipping JSON saves.
COPY_THRESHOLD = 200
#: Jobs per COPY at most: rows are held in memory and ids reserved a chunk at a time.
COPY_CHUNK = 5_000
#: Jobs of the first COPY: formatted before the server has anything to do, so kept small. Each
#: next COPY is ``COPY_GROWTH`` times larger (up to ``COPY_CHUNK``); the next chunk is formatted while
#: the server ingests the current one, and formatting is about twice as fast as ingesting.
FIRST_COPY_CHUNK = 500
COPY_GROWTH = 4


def _copy_capable(conn: psycopg.Connection[Any] | foreign.AsyncDriver) -> bool:
    # COPY data is formatted as UTF-8; on a connection with another client encoding the statement
    # path lets psycopg encode the parameters instead. asyncpg connections take the statement path.
    if isinstance(conn, AsyncpgSession):
        return False
    return conn.info.encoding == "utf-8"


class Inserter:
    """Inserts a stream of requests on an async or a sync connection (see the module's docstring)."""

    def __init__(self, sql: SqlFiles, insert_channel: str, errors_append: dict[str, str]) -> None:
        # Sent without comment lines (``without_comment_lines``): psycopg caches its conversion of
        # a query only up to 4,096 bytes, and the unique insert was 4.5 kB with them.
        def text(name: str, **parts: str) -> bytes:
            return without_comment_lines(sql.compose(name, **parts)).encode()

        self._statement = text("insert_jobs")
        self._one_statements = (text("insert_one_job"), text("insert_one_now"))
        self._clock = text("insert_clock")
        self._reserve = text("insert_reserve")
        self._copy = text("insert_copy")
        self._copy_binary = text("insert_copy_binary", insert_copy="insert_copy")
        self._notify = text("insert_notify")
        self._unique_statement = text("insert_unique_jobs", unique_predicate="unique_predicate")
        self._one_unique_statement = text("insert_one_unique", unique_predicate="unique_predicate")
        #: ``replace_jobs`` appends an error (a job it leaves no attempt is discarded), composed for
        #: each type the errors column may have (``errors_type``, set when the engine reads it).
        self._replace_statements = {
            kind: text("replace_jobs", append_error=fragment) for kind, fragment in errors_append.items()
        }
        self.errors_type: str | None = None
        self._hold_statement = text("hold_jobs")
        self._channel = insert_channel

    async def insert(
        self,
        conn: foreign.AsyncDriver,
        requests: Iterable[JobRequest],
        now: datetime | None,
        hold: Sequence[int] = (),
        side: AsyncConnectionPool | None = None,
    ) -> JobIds:
        """``side``: a pool a second connection may be taken from, to reserve ids there while COPY
        runs on ``conn`` (see ``insert_steps.SideConnection``)."""
        single = self._single(requests, hold, now)
        if single is not None and not isinstance(conn, AsyncpgSession):
            # The call a web request makes: one job, one statement, atomic by itself; the steps
            # below cost ~10 generator and context layers more, a tenth of the call's CPU.
            async with psycopg.AsyncCursor(conn, row_factory=tuple_row) as cur:
                await cur.execute(*single)
                return single_insert_id(await cur.fetchall())
        steps = self.steps(requests, now, copy=_copy_capable(conn), hold=hold)
        return await run_async(conn, steps, side)

    def insert_sync(
        self,
        conn: psycopg.Connection[Any],
        requests: Iterable[JobRequest],
        now: datetime | None,
        hold: Sequence[int] = (),
        *,
        own: bool = False,
    ) -> JobIds:
        """``own``: ``conn`` is the engine's (autocommit, idle), not a caller's (``run_sync``)."""
        if own and (single := self._single(requests, hold, now)) is not None:  # as in ``insert``
            with psycopg.Cursor(conn, row_factory=tuple_row) as cur:
                cur.execute(*single)
                return single_insert_id(cur.fetchall())
        return run_sync(conn, self.steps(requests, now, copy=_copy_capable(conn), hold=hold), own=own)

    def _single(
        self, requests: Iterable[JobRequest], hold: Sequence[int], now: datetime | None
    ) -> tuple[bytes, dict[str, Any]] | None:
        """The one statement (and its parameters) inserting the request of a one-request tuple or
        list (what ``enqueue`` passes); None for anything else, a unique request whose claim takes
        more than its insert among them (``claims_by_insert``)."""
        if hold or not isinstance(requests, tuple | list) or len(requests) != 1:
            return None
        if type(request := requests[0]) is not JobRequest:
            return None
        if (unique := request.unique) is None:
            return self._one(request, naive_utc(now))
        if not claims_by_insert(unique):
            return None
        params = one_unique_params(request, unique, unique.base_key(request))
        params.update(now=naive_utc(now), channel=self._channel)
        return self._one_unique_statement, params

    def _one(self, request: JobRequest, now: datetime | None) -> tuple[bytes, dict[str, Any]]:
        """``insert_one_job.sql`` (``insert_one_now.sql`` for a job due now) and its parameters."""
        params = one_job_params(request)
        params["channel"] = self._channel
        if now is None and request.scheduled_at is None and request.schedule_in is None:
            return self._one_statements[1], params
        params.update(now=now, scheduled_at=request.scheduled_at_utc, schedule_in=request.schedule_in)
        return self._one_statements[0], params

    def steps(
        self, requests: Iterable[JobRequest], now: datetime | None, *, copy: bool, hold: Sequence[int] = ()
    ) -> Steps:
        """The statements of one insert; returns the ids in input order. The jobs at the positions
        in ``hold`` are then held suspended, in the same transaction (workflow steps)."""
        if not hold:
            return (yield from self._insert_steps(requests, now, copy=copy))
        yield Atomic()
        ids = yield from self._insert_steps(requests, now, copy=copy)
        yield Execute(self._hold_statement, {"ids": [int(ids[position]) for position in hold]})
        return ids

    def _insert_steps(self, requests: Iterable[JobRequest], now: datetime | None, *, copy: bool) -> Steps:
        clock = naive_utc(now)
        source = request_stream(requests)
        head = take_requests(source, COPY_THRESHOLD)
        if not head:
            return JobIds()
        source = itertools.chain(head, source)
        if len(head) < COPY_THRESHOLD or not copy:
            return (yield from self._statement_steps(source, clock))
        yield Atomic()
        return (yield from self._copy_steps(Pushback(source), clock))

    def _statement_steps(self, requests: Iterator[JobRequest], now: datetime | None) -> Steps:
        chunks = request_chunks(requests, INSERT_CHUNK)
        first = next(chunks, None)
        if first is None:
            return JobIds()
        second = next(chunks, None)
        if second is None:
            # One statement is atomic by itself: no transaction round trips. A unique request that
            # may replace fields of a stored job takes a second statement.
            if not any(request.unique is not None for request in first):
                single = JobIdsBuilder()
                single.extend_new(row[0] for row in (yield self._plain(first, now)))
                return single.build()
            if any(r.unique is not None and r.unique.replace for r in first):
                yield Atomic()
            return JobIds((yield from self._unique_steps(first, now, UniqueClaims())))
        yield Atomic()
        held = HeldUniques()
        ids = JobIdsBuilder()
        for chunk in (first, second, *chunks):
            if not any(request.unique is not None for request in chunk):
                ids.extend_new(row[0] for row in (yield self._plain(chunk, now)))
                continue
            # The plain requests go in now with ids reserved for the whole chunk, the unique ones
            # are held back with theirs (see ``unique_claims``).
            reserved = _first((yield self._reservation(chunk)))
            plain = [
                request_record(request) | {"id": job_id}
                for job_id, request in zip(reserved, chunk, strict=True)
                if request.unique is None
            ]
            if plain:
                yield Execute(
                    self._unique_statement,
                    {"jobs": records_json(plain), "now": now, "channel": self._channel},
                )
            self._hold(held, ids, reserved, chunk)
        yield from self._held_steps(held, ids, now)
        return ids.build()

    def _plain(self, chunk: list[JobRequest], now: datetime | None) -> Execute:
        records = records_json([request_record(request) for request in chunk])
        return Execute(self._statement, {"jobs": records, "now": now, "channel": self._channel})

    @staticmethod
    def _hold(held: HeldUniques, ids: JobIdsBuilder, reserved: list[int], chunk: list[JobRequest]) -> None:
        """Hold back the unique requests of ``chunk``, which come next in ``ids`` with the ids
        ``reserved`` for them (placeholders until ``_held_steps``)."""
        start = len(ids)
        for offset, (job_id, request) in enumerate(zip(reserved, chunk, strict=True)):
            if request.unique is not None:
                held.hold(start + offset, job_id, request)
        ids.extend_new(reserved)

    def _held_steps(
        self, held: HeldUniques, ids: JobIdsBuilder, now: datetime | None
    ) -> Generator[Step, Any, None]:
        """Claim the held unique requests in key order, and put their ids (see ``unique_claims``)."""
        for batch in held.batches(INSERT_CHUNK):
            records = records_json(held.records(batch))
            rows = yield Execute(
                self._unique_statement, {"jobs": records, "now": now, "channel": self._channel}
            )
            replacing = [
                request_record(claim.request) | {"id": job_id, "replace": claim.unique.replace_spec()}
                for claim, job_id in held.settle(batch, rows, ids)
                if claim.unique.replace
            ]
            if replacing:
                yield self._replace(replacing, now)

    def _replace(self, replacing: list[dict[str, Any]], now: datetime | None) -> Execute:
        """``replace_jobs`` for the errors column's type, over the records of the requests that
        conflicted and replace fields of the stored jobs."""
        statement = self._replace_statements[self.errors_type or "jsonb"]
        return Execute(statement, {"jobs": records_json(replacing), "now": now})

    def _unique_steps(
        self, chunk: list[JobRequest], now: datetime | None, claims: UniqueClaims
    ) -> Generator[Step, Any, list[int]]:
        """One ``insert_unique_jobs.sql`` for an insert of one chunk holding unique requests (see
        ``UniqueClaims``)."""
        keys, records = claims.plan(chunk)
        rows = yield Execute(
            self._unique_statement, {"jobs": records_json(records), "now": now, "channel": self._channel}
        )
        ids, conflicted = claims.resolve(keys, rows)
        replacing = [
            request_record(chunk[i]) | {"id": int(ids[i]), "replace": unique.replace_spec()}
            for i in conflicted
            if (unique := chunk[i].unique) is not None and unique.replace
        ]
        if replacing:
            yield self._replace(replacing, now)
        return ids

    def _copy_steps(self, source: Pushback, now: datetime | None) -> Steps:
        clock, binary = (yield Execute(self._clock, {"now": now}))[0]
        formatter = copy_rows(clock, binary=binary)
        statement = self._copy_binary if binary else self._copy
        held = HeldUniques()
        ids = JobIdsBuilder()
        size = FIRST_COPY_CHUNK
        rows = formatter.take(source, size)
        reserved: list[int] | None = None  # the ids of ``rows``, when reserved ahead
        while True:
            if rows:
                chunk_ids = reserved if reserved is not None else _first((yield self._reservation(rows)))
                size = min(COPY_CHUNK, size * COPY_GROWTH)
                upcoming = Lookahead(formatter, source, size, blocks=-(-len(rows) // formatter.block_rows))
                blocks = upcoming.between(formatter.blocks(rows, chunk_ids))
                finish = functools.partial(upcoming.finish, ids, chunk_ids)
                rows, ahead = yield CopyIn(statement, blocks, finish, self._reservation_ahead)
                reserved = None if ahead is None else _first(ahead)
                continue
            # Stopped before a unique request (or at the end): the unique ones that follow are held
            # back with ids reserved in their place, for a statement that can skip what conflicts
            # at the end (in key order: see ``unique_claims``), and COPY takes over again.
            uniques = take_unique_run(source, INSERT_CHUNK)
            if not uniques:
                break
            self._hold(held, ids, _first((yield self._reservation(uniques))), uniques)
            rows = formatter.take(source, size)
        yield from self._held_steps(held, ids, clock)
        if formatter.available_queues:
            queues = sorted(formatter.available_queues)
            yield Execute(self._notify, {"channel": self._channel, "queues": queues})
        return ids.build()

    def _reservation(self, rows: Sequence[object]) -> Execute:
        """The statement reserving the ids of ``rows`` (formatted ones, or requests)."""
        return Execute(self._reserve, {"count": len(rows)}, binary=True)

    def _reservation_ahead(self, rows: list[bytes]) -> Execute | None:
        """The statement reserving the ids of the next ``rows`` beside the COPY (None: no rows)."""
        return self._reservation(rows) if rows else None


class Lookahead:
    """The rows of the next COPY, formatted a slice at a time between the blocks of the current
    one: the server ingests a block while the next slice is formatted, so neither side waits long
    for the other (formatting a whole chunk after writing one left the server idle meanwhile)."""

    def __init__(self, formatter: CopyRows, source: Pushback, size: int, *, blocks: int) -> None:
        self.rows: list[bytes] = []
        self._formatter = formatter
        self._source = source
        self._size = size
        self._slice = -(-size // max(1, blocks))
        self._open = True

    def between(self, blocks: Iterator[bytes]) -> Iterator[bytes]:
        """``blocks``, with a slice of the next rows formatted after each."""
        for block in blocks:
            yield block
            self._more(self._slice)

    def _more(self, count: int) -> None:
        count = min(count, self._size - len(self.rows))
        if self._open and count > 0:
            taken = self._formatter.take(self._source, count)
            self.rows += taken
            # Short: the stream ended, or a unique request is next (handed back to the source).
            self._open = len(taken) == count

    def finish(self, ids: JobIdsBuilder, chunk_ids: list[int]) -> list[bytes]:
        """Once the blocks are written, before the COPY ends: the current chunk's ids join ``ids``
        (8 bytes each, while the server still ingests), and the next rows are complete."""
        ids.extend_new(chunk_ids)
        self._more(self._size)
        return self.rows


def _first(rows: list[tuple[Any, ...]]) -> Any:
    """The only column of a one-row result."""
    return rows[0][0]
