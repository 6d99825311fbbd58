"""The sides ``enqueue-one`` compares, in one process: the app's enqueues and the bare drivers.

``Sides`` times one block of calls of one side at a time (``block``), so that ``enqueue_one``
can interleave the sides in blocks of ``BLOCK`` calls: each side then meets the same load on a
busy machine, where whole series a few seconds apart met different ones. Sides:

* ``plain``, ``unique``, ``lock``: ``app.enqueue`` (mode ``async``, from the loop) or
  ``app.enqueue_sync`` (mode ``sync``, from a plain thread) of one request per call, an app of
  default settings (``Conveyor(url, prefix=...)``);
* ``driver``: the bare driver doing the same work. PostgreSQL: one ``INSERT … RETURNING`` with
  ``pg_notify`` in the same statement, async on a connection of the app's own pool, sync on a
  blocking ``psycopg_pool.ConnectionPool`` connection (autocommit, as the app's). SQLite: one
  ``INSERT`` per transaction through ``sqlite3`` on a connection set up as the engine's writer;
* ``floor`` (SQLite only, issue 34's target 6): the statements the engine runs for one job, through
  the same ``sqlite3`` connection with no Python job layer: ``BEGIN IMMEDIATE``, the job's ``INSERT
  … RETURNING id``, the notification row other processes read, ``COMMIT``.

The drivers run in the calling thread. ``serve`` answers block requests on stdin (``paired.py``).
"""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from datetime import UTC, datetime
from typing import Any

from common import BENCH_WORKER, DEFAULT_DSN, Settings, drop_schema
from psycopg_pool import ConnectionPool

from conveyor import Conveyor, JobRequest
from conveyor.engine.postgres import PostgresEngine
from conveyor.engine.sqlite import SqliteEngine

VARIANTS = ("plain", "unique", "lock")
MODES = ("async", "sync")
WARMUP = 50

_PG_BARE = (
    "WITH inserted AS (INSERT INTO {prefix}.oban_jobs (state, queue, worker, args)"
    " VALUES ('available', %s, %s, %s::jsonb) RETURNING id, queue)"
    " SELECT id, pg_notify(%s, json_build_object('queue', queue)::text) FROM inserted"
)
_SQLITE_BARE = "INSERT INTO oban_jobs (state, queue, worker, args) VALUES ('available', ?, ?, ?)"
_SQLITE_JOB = (
    "INSERT INTO oban_jobs (state, queue, worker, args, meta, tags, priority, max_attempts,"
    " scheduled_at, inserted_at) VALUES ('available', ?, ?, ?, '{}', '[]', 0, 20, ?, ?) RETURNING id"
)
_SQLITE_NOTIFY = (
    "INSERT INTO conveyor_notifications (channel, payload, source, created_at) VALUES ('insert', ?, ?, ?)"
)


def request(variant: str, index: int) -> JobRequest:
    args = {"index": index, "email": f"user{index}@example.com"}
    if variant == "unique":
        return JobRequest(worker=BENCH_WORKER, args=args, unique={"period": None})
    if variant == "lock":
        return JobRequest(worker=BENCH_WORKER, args=args, queueing_lock=f"lock-{index}")
    return JobRequest(worker=BENCH_WORKER, args=args)


def _args(index: int) -> str:
    return json.dumps({"index": index, "email": f"user{index}@example.com"})


Call = Callable[[int], Any]


class Sides:
    """An app and the bare drivers on one database (see the module's docstring)."""

    def __init__(self, app: Conveyor, drivers: dict[str, Call]) -> None:
        self.app = app
        #: Blocking calls by side name, run in the calling thread (the loop's for mode async).
        self.drivers = drivers
        self.names = ("driver", *(("floor",) if "floor" in drivers else ()), *VARIANTS)

    async def warm(self, start: int) -> None:
        """The pools, prepared statements and caches (indexes from ``start`` on)."""
        index = start
        for _ in range(WARMUP):
            for mode in MODES:
                for side in self.names:
                    await self.block(mode, side, range(index, index + 1))
                    index += 1

    async def block(self, mode: str, side: str, indexes: range) -> float:
        """Seconds ``side`` takes for one call per index, in ``mode``."""
        if side in VARIANTS:
            requests = [request(side, index) for index in indexes]
            if mode == "async":
                enqueue = self.app.enqueue
                started = time.perf_counter()
                for one in requests:
                    await enqueue(one)
                return time.perf_counter() - started
            return await asyncio.to_thread(_loop, self.app.enqueue_sync, requests)
        call = self.drivers[side]
        if mode == "async":  # a bare driver call from the loop (PostgreSQL's awaits)
            if side == "driver" and "driver_async" in self.drivers:
                call_async = self.drivers["driver_async"]
                started = time.perf_counter()
                for index in indexes:
                    await call_async(index)
                return time.perf_counter() - started
            return _loop(call, indexes)
        return await asyncio.to_thread(_loop, call, indexes)


def _loop(call: Call, items: Any) -> float:
    started = time.perf_counter()
    for item in items:
        call(item)
    return time.perf_counter() - started


@asynccontextmanager
async def open_sides(settings: Settings) -> AsyncIterator[Sides]:
    """An app of default settings and the drivers, on a schema (or file) installed for this run."""
    async with AsyncExitStack() as stack:
        if settings.engine == "sqlite":
            folder = stack.enter_context(tempfile.TemporaryDirectory(prefix="conveyor-bench-"))
            path = os.path.join(folder, "bench.db")
            await _install(SqliteEngine(path))
            app = Conveyor(f"sqlite:///{path}")
            drivers = _sqlite_drivers(path, stack)
        else:
            prefix = f"conveyor_bench_{uuid.uuid4().hex[:10]}"
            stack.push_async_callback(drop_schema, settings.dsn, prefix)
            await _install(PostgresEngine(settings.dsn, prefix=prefix))
            app = Conveyor(settings.dsn, prefix=prefix)
            drivers = await _pg_drivers(app, settings.dsn, prefix, stack)
        stack.callback(app.close_sync)
        stack.push_async_callback(app.close)
        yield Sides(app, drivers)


async def _pg_drivers(app: Conveyor, dsn: str, prefix: str, stack: AsyncExitStack) -> dict[str, Call]:
    statement = _PG_BARE.format(prefix=prefix).encode()
    channel = f"{prefix}.oban_insert"
    pool = stack.enter_context(ConnectionPool(dsn, min_size=1, max_size=1, kwargs={"autocommit": True}))
    await app.enqueue(request("plain", -1))  # opens the app's own pool, which the async driver uses
    engine = app._binding._engine
    assert isinstance(engine, PostgresEngine)

    def insert(index: int) -> None:
        with pool.connection() as conn, conn.cursor() as cur:
            cur.execute(statement, ("default", BENCH_WORKER, _args(index), channel))
            cur.fetchall()

    async def insert_async(index: int) -> None:
        async with engine.pool.connection() as conn, conn.cursor() as cur:
            await cur.execute(statement, ("default", BENCH_WORKER, _args(index), channel))
            await cur.fetchall()

    return {"driver": insert, "driver_async": insert_async}


def _sqlite_drivers(path: str, stack: AsyncExitStack) -> dict[str, Call]:
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=5.0)
    stack.callback(conn.close)
    conn.execute("PRAGMA synchronous = NORMAL")
    source = f"bench-{os.getpid()}"

    def insert(index: int) -> None:
        conn.execute(_SQLITE_BARE, ("default", BENCH_WORKER, _args(index)))

    def floor(index: int) -> None:
        now = datetime.now(UTC).replace(tzinfo=None).isoformat(" ", timespec="microseconds")
        conn.execute("BEGIN IMMEDIATE")
        conn.execute(_SQLITE_JOB, ("default", BENCH_WORKER, _args(index), now, now)).fetchall()
        conn.execute(_SQLITE_NOTIFY, ('{"queue":"default"}', source, now))
        conn.execute("COMMIT")

    return {"driver": insert, "floor": floor}


async def _install(engine: PostgresEngine | SqliteEngine) -> None:
    await engine.open()
    try:
        await engine.install()
    finally:
        await engine.close()


async def serve(engine: str, dsn: str) -> None:
    """Answer ``{"mode", "side", "start", "count"}`` lines on stdin with ``{"seconds"}`` lines
    (``{"warm": start}``: warm up first; ``{"names": true}``: the sides), until stdin ends."""
    async with open_sides(Settings(engine=engine, dsn=dsn)) as sides:
        while line := await asyncio.to_thread(sys.stdin.readline):
            asked = json.loads(line)
            if "warm" in asked:
                await sides.warm(asked["warm"])
                answer: dict[str, Any] = {"warm": True}
            elif "names" in asked:
                answer = {"names": list(sides.names)}
            else:
                indexes = range(asked["start"], asked["start"] + asked["count"])
                answer = {"seconds": await sides.block(asked["mode"], asked["side"], indexes)}
            print(json.dumps(answer), flush=True)


if __name__ == "__main__":
    asyncio.run(serve(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else DEFAULT_DSN))
