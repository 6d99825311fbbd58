"""MariaDB's own floor: the statements the MySQL engine runs, sent by asyncmy with no Conveyor layer.

Each measurement runs on a database made for it by ``fresh_app`` (the engine installs the schema
and, for a drain, enqueues the backlog as ``drain`` does). The statements are the engine's own
``.sql`` files for that database (``engine.files``), sent on asyncmy connections with the engine's
session settings (``connect.connect``: UTC, ``ANSI_QUOTES``, no notes; autocommit, with ``BEGIN`` and
``COMMIT`` around each transaction as ``connect.transaction`` does), opened and warmed up before
the clock starts. A transaction the server picks as a deadlock's victim runs again at once
(``deadlocks`` counts them). What is left out is the Python around the statements: requests and their checks,
building rows (done before the clock, by the engine's ``InsertRows``), decoding rows into jobs, and
the node's producer, runner and acker.

* ``bulk``: one transaction: ``BEGIN``, ``insert_jobs.sql`` of 500 rows at a time (the engine's
  ``ROWS_PER_STATEMENT``), the queue's ``notify.sql``, ``COMMIT``.
* ``single``: the same with one row per transaction, from ``workers`` connections at once.
* ``drain``: two connections (as the PostgreSQL floor's two pgbench clients), each claiming up to
  ``level`` jobs (``fetch_jobs.sql`` ``FOR UPDATE SKIP LOCKED``, ``claim_update.sql`` by id, the rows
  read back by ``jobs_by_id.sql``, ``COMMIT``), then acking them completed as the engine acks a
  batch of plain completions (``ack_targets.sql`` ``FOR UPDATE``, one ``ack_completed.sql`` for the
  rows it read, ``notify.sql`` on "ended", ``COMMIT``), until a claim comes back empty. Fails unless
  every job ended completed.
* ``pickup``: a job inserted as ``single`` does, then claimed (demand 10, as a node at limit 10)
  by the claim above on another connection, timed from the insert's commit to the claim's;
  ``LATENCY_GAP`` between samples, as ``latency`` waits.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import replace
from typing import Any, TypeVar

import bench_jobs
import orjson
from common import Settings, Stopwatch, fresh_app, job_requests, rate
from latency import LATENCY_GAP
from node_runs import enqueue_all

from conveyor.engine.mysql import MysqlEngine
from conveyor.engine.mysql.connect import DEADLOCK, connect, error_code
from conveyor.engine.mysql.inserter import ROWS_PER_STATEMENT, _statement
from conveyor.engine.mysql.rows import INSERT_COLUMNS, InsertRows, utc_clock

#: Connections the drain floor claims and acks on (the PostgreSQL floor's pgbench clients).
CLIENTS = 2
#: The pickup floor's claim asks for as many jobs as a node at limit 10 has free slots.
PICKUP_DEMAND = 10
T = TypeVar("T")
#: Rows each side inserts before its clock starts (``insert._warm_up``'s count).
WARMUP_ROWS = 20


class Floor:
    """asyncmy connections to one engine's database and the engine's statements for it."""

    def __init__(self, engine: MysqlEngine, connections: list[Any]) -> None:
        self.engine = engine
        self.connections = connections
        files = engine.files
        self.notify = files["notify"]
        self.fetch = files.compose("fetch_jobs", lock_free="lock_free")
        self.claim = files["claim_update"]
        self.read = files.compose("jobs_by_id", columns="job_columns")
        self.ack_targets = files["ack_targets"]
        self.complete = files["ack_completed"]
        #: Transactions the server rolled back as a deadlock's victim, and that ran again.
        self.deadlocks = 0

    def rows(self, count: int, queue: str = "default") -> list[list[Any]]:
        """The values of ``count`` typical jobs (``job_requests``), one list per job, as the engine
        writes them now."""
        requests = list(job_requests(count, queue=queue))
        values = InsertRows(utc_clock(None)).values(requests)
        return [values[i : i + INSERT_COLUMNS] for i in range(0, len(values), INSERT_COLUMNS)]

    async def transaction(self, conn: Any, work: Callable[[Any], Awaitable[T]]) -> T:
        """``work(cursor)`` between ``BEGIN`` and ``COMMIT``; run again at once when the server
        picks it as a deadlock's victim (claims and acks of two connections may lock the fetch
        index's entries in opposite orders), as the node's producer and acker retry theirs."""
        while True:
            await conn.begin()
            try:
                async with conn.cursor() as cursor:
                    done = await work(cursor)
                await conn.commit()
                return done
            except Exception as exc:
                await conn.rollback()
                if error_code(exc) != DEADLOCK:
                    raise
                self.deadlocks += 1

    async def insert(self, conn: Any, rows: Sequence[list[Any]], queue: str = "default") -> None:
        """``rows`` in one transaction, ``ROWS_PER_STATEMENT`` a statement, and the queue's notification."""

        async def work(cursor: Any) -> None:
            for start in range(0, len(rows), ROWS_PER_STATEMENT):
                part = rows[start : start + ROWS_PER_STATEMENT]
                await cursor.execute(
                    _statement(self.engine.files, len(part)), [v for row in part for v in row]
                )
            await cursor.execute(self.notify, ("insert", orjson.dumps({"queue": queue}).decode()))

        await self.transaction(conn, work)

    async def claim_jobs(self, conn: Any, demand: int, node: str) -> list[Any]:
        """One claim of up to ``demand`` available jobs of queue ``default``: their rows."""

        async def work(cursor: Any) -> list[Any]:
            await cursor.execute(self.fetch, {"queue": "default", "demand": demand})
            ids = tuple(int(row[0]) for row in await cursor.fetchall())
            if not ids:
                return []
            params = {"ids": ids, "now": utc_clock(None), "node": node, "producer": node}
            await cursor.execute(self.claim, params)
            await cursor.execute(self.read, {"ids": ids})
            return list(await cursor.fetchall())

        return await self.transaction(conn, work)

    async def ack_completed(self, conn: Any, ids: Sequence[int]) -> None:
        """The acks of ``ids`` as ``completed``, in one transaction."""

        async def work(cursor: Any) -> None:
            await cursor.execute(self.ack_targets, {"ids": tuple(sorted(ids))})
            # The engine checks each row's attempt and node here, in Python.
            done = tuple(int(row[0]) for row in await cursor.fetchall())
            if done:
                await cursor.execute(self.complete, {"ids": done, "now": utc_clock(None)})
            await cursor.execute(self.notify, ("ended", orjson.dumps({"ids": list(ids)}).decode()))

        await self.transaction(conn, work)

    async def warm(self) -> None:
        """Each connection's first statements, on rows of a queue no measurement reads."""
        for conn in self.connections:
            await self.insert(conn, self.rows(WARMUP_ROWS, queue="warmup"), queue="warmup")
            async with conn.cursor() as cursor:
                await cursor.execute(self.fetch, {"queue": "warmup", "demand": 0})
                await cursor.fetchall()


@asynccontextmanager
async def floor_on(settings: Settings, connections: int, backlog: int = 0) -> AsyncIterator[Floor]:
    """A fresh database holding ``backlog`` available no-op jobs (enqueued as ``drain`` does), and
    ``connections`` warm asyncmy connections to it."""
    async with AsyncExitStack() as stack:
        base = await stack.enter_async_context(fresh_app(replace(settings, engine="mariadb"), pool_size=2))
        if backlog:
            await enqueue_all(base, (bench_jobs.noop.new(n=n) for n in range(backlog)))
        engine = await base.engine()
        assert isinstance(engine, MysqlEngine)
        opened = []
        for _ in range(connections):
            # The driver's own connection, with the settings the engine's pool gives each of its own.
            conn = await connect(engine.address, engine.database)
            stack.callback(conn.close)
            opened.append(conn)
        floor = Floor(engine, opened)
        await floor.warm()
        yield floor


async def bulk(settings: Settings, jobs: int) -> tuple[float, int]:
    """Jobs per second of the bulk insert's statements (and the deadlocks met, as every figure)."""
    async with floor_on(settings, 1) as floor:
        rows = floor.rows(jobs)
        with Stopwatch() as watch:
            await floor.insert(floor.connections[0], rows)
    return rate(jobs, watch.seconds), floor.deadlocks


async def single(settings: Settings, jobs: int, workers: int) -> tuple[float, int]:
    """Jobs per second of one-row insert transactions from ``workers`` connections at once."""
    async with floor_on(settings, workers) as floor:
        rows = floor.rows(jobs)
        shares = [rows[i::workers] for i in range(workers)]

        async def share(conn: Any, mine: list[list[Any]]) -> None:
            for row in mine:
                await floor.insert(conn, [row])

        with Stopwatch() as watch:
            await asyncio.gather(*(share(c, s) for c, s in zip(floor.connections, shares, strict=True)))
    return rate(jobs, watch.seconds), floor.deadlocks


async def drain(settings: Settings, jobs: int, level: int) -> tuple[float, int]:
    """Jobs per second of claims of ``level`` and their acks on ``CLIENTS`` connections."""
    async with floor_on(settings, CLIENTS, backlog=jobs) as floor:

        async def client(conn: Any, node: str) -> None:
            while rows := await floor.claim_jobs(conn, level, node):
                await floor.ack_completed(conn, [int(row[0]) for row in rows])

        with Stopwatch() as watch:
            await asyncio.gather(*(client(conn, f"floor-{i}") for i, conn in enumerate(floor.connections)))
        async with floor.connections[0].cursor() as cursor:
            await cursor.execute(
                f'SELECT count(*) FROM "{floor.engine.database}".oban_jobs '
                "WHERE queue = 'default' AND state = 'completed'"
            )
            ((completed,),) = await cursor.fetchall()
    if completed != jobs:
        raise RuntimeError(f"the MariaDB floor completed {completed} of {jobs} jobs")
    return rate(jobs, watch.seconds), floor.deadlocks


async def pickup(settings: Settings, jobs: int) -> tuple[list[float], int]:
    """Seconds from each insert's commit to the claim's, ``jobs`` samples."""
    async with floor_on(settings, 2) as floor:
        inserter, claimer = floor.connections
        rows = floor.rows(jobs)
        seconds = []
        for row in rows:
            await floor.insert(inserter, [row])
            committed = time.perf_counter()
            claimed = await floor.claim_jobs(claimer, PICKUP_DEMAND, "floor")
            seconds.append(time.perf_counter() - committed)
            if len(claimed) != 1:
                raise RuntimeError(f"the pickup floor claimed {len(claimed)} jobs, not the one inserted")
            await floor.ack_completed(claimer, [int(claimed[0][0])])
            await asyncio.sleep(LATENCY_GAP)
    return seconds, floor.deadlocks
