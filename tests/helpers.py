"""Helpers shared by the behaviour tests: test apps, counting rows, listening for notifications."""

from __future__ import annotations

import asyncio
import inspect
import multiprocessing.context
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

import psycopg
import pytest
from psycopg import sql

from conveyor import Conveyor
from conveyor._runtime.clock import FakeClock
from conveyor._runtime.service import Service
from conveyor.engine.postgres import inserter
from tests import forked

T = TypeVar("T")

#: The most jobs one insert step writes (the statement and COPY paths chunk differently): a batch of
#: more than this is written in several steps, so tests of atomicity use more than this.
CHUNK = max(inserter.INSERT_CHUNK, getattr(inserter, "COPY_CHUNK", 0))


#: A node that reacts fast and stops soon: tests wait on it, not on production intervals.
FAST_NODE: dict[str, Any] = {
    "queues": {"default": 5},
    "poll_interval": 0.2,
    "stage_interval": 0.2,
    "shutdown_grace": 1.0,
    "processes": 1,
}


def racing_processes() -> multiprocessing.context.ForkServerContext:
    """A context for processes a test races against each other or itself: each is forked from a
    server that imported ``tests.forked.PRELOAD`` (Conveyor, its engines, the modules of the racing
    functions) once for this pytest process, so it starts in a few milliseconds of CPU instead of a
    fresh interpreter importing Conveyor and a driver again (0.4-0.6 s with "spawn"). Every process is
    still a process of its own, with its own connections; the server itself runs no test code and
    holds no connection."""
    return forked.server()


def make_app(dsn: str, prefix: str, **settings: Any) -> Conveyor:
    """An app on the test's schema with ``FAST_NODE``'s settings; ``settings`` override them."""
    return Conveyor(dsn, **{"prefix": prefix, **FAST_NODE, **settings})


def table(prefix: str, name: str = "oban_jobs") -> sql.Composed:
    return sql.SQL("{}.{}").format(sql.Identifier(prefix), sql.Identifier(name))


def count_jobs(dsn: str, prefix: str) -> int:
    """Rows in ``<prefix>.oban_jobs``, read on a fresh connection (so only committed rows count)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(sql.SQL("SELECT count(*) FROM {}").format(table(prefix))).fetchone()
        assert row is not None
        return int(row[0])


def fetch_rows(dsn: str, prefix: str, where: str = "TRUE", params: Any = None) -> list[dict[str, Any]]:
    """Rows of ``oban_jobs`` as dicts, ordered by id."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        query = sql.SQL("SELECT * FROM {} WHERE " + where + " ORDER BY id").format(table(prefix))
        cur = conn.execute(query, params)
        names = [d.name for d in cur.description or ()]
        return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]


def execute(dsn: str, query: str | sql.Composable, params: Any = None) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(query if isinstance(query, sql.Composable) else query.encode(), params)


class AsyncListener:
    """A connection that LISTENs on one channel and collects what arrives."""

    def __init__(self, conn: psycopg.AsyncConnection[Any]) -> None:
        self.conn = conn

    async def collect(self, timeout: float = 0.3) -> list[str]:
        """Every payload that arrives within ``timeout`` seconds."""
        return [n.payload async for n in self.conn.notifies(timeout=timeout)]

    async def first(self, timeout: float = 5.0) -> str | None:
        """The first payload to arrive, or None after ``timeout`` seconds."""
        async for n in self.conn.notifies(timeout=timeout, stop_after=1):
            return n.payload
        return None


@asynccontextmanager
async def listening(dsn: str, channel: str) -> AsyncIterator[AsyncListener]:
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        await conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(channel)))
        yield AsyncListener(conn)


class SyncListener:
    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self.conn = conn

    def collect(self, timeout: float = 0.3) -> list[str]:
        return [n.payload for n in self.conn.notifies(timeout=timeout)]

    def first(self, timeout: float = 5.0) -> str | None:
        for n in self.conn.notifies(timeout=timeout, stop_after=1):
            return n.payload
        return None


@contextmanager
def listening_sync(dsn: str, channel: str) -> Iterator[SyncListener]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(channel)))
        yield SyncListener(conn)


def insert_channel(prefix: str) -> str:
    return f"{prefix}.oban_insert"


def signal_channel(prefix: str) -> str:
    return f"{prefix}.oban_signal"


async def poll(
    probe: Callable[[], Awaitable[T] | T],
    done: Callable[[T], object] = bool,
    *,
    timeout: float = 10.0,
    what: str,
    every: float = 0.02,
) -> T:
    """The one way a test waits for something to happen in real time: call ``probe`` (a plain or an
    async function) until ``done(value)`` holds (the value is true, by default) and return that value;
    fail after ``timeout`` seconds, naming ``what`` and the last value. Waiting for a condition, never
    for a fixed time, keeps a test as short as the machine allows and patient when it is loaded."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if inspect.isawaitable(value):
            value = await value
        if done(value):
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}; last value: {value!r}")
        await asyncio.sleep(every)


async def holds(
    probe: Callable[[], Awaitable[T] | T],
    ok: Callable[[T], object] = bool,
    *,
    during: float,
    what: str,
    every: float = 0.05,
) -> T:
    """The one way a test checks that something does not happen for a while (a bounded negative
    check, where no event could say "never"): ``ok(probe())`` must hold at every probe for
    ``during`` seconds, and at the end; return the last value. Prefer a positive check where one
    exists (wait for a later event that is ordered after the one that must not come)."""
    deadline = time.monotonic() + during
    while True:
        value = probe()
        if inspect.isawaitable(value):
            value = await value
        assert ok(value), f"{what}: {value!r}"
        if time.monotonic() >= deadline:
            return value
        await asyncio.sleep(min(every, max(0.0, deadline - time.monotonic())))


def services_of(app: Conveyor) -> list[Service]:
    """The background loops of ``app``'s node (none before it starts)."""
    node = app.node
    if node is None:
        return []
    return [
        node.heartbeat,
        node.poller,
        node.stager,
        node.declarations,
        node.leadership,
        *node.duties,
        *node.producers.values(),
    ]


async def nodes_asleep(*apps: Conveyor) -> None:
    """On a fake clock, after moving it: until every running loop of the apps' nodes is asleep again
    with nothing due and their acks are written (each has done what the step brought, its database
    calls included). Fake time stands still meanwhile, so nothing more comes due until it moves."""

    def at_rest() -> bool:
        for app in apps:
            if app.node is None:
                continue
            if app.node.acker.held() or not all(s.asleep for s in services_of(app) if s.is_running):
                return False
        return True

    await poll(at_rest, what="the nodes' loops asleep and their acks written", every=0.002)


async def advance_nodes(clock: FakeClock, seconds: float, apps: list[Conveyor], step: float) -> None:
    """Move ``clock`` by ``seconds`` in steps of ``step``; after each, ``nodes_asleep(*apps)``
    before time moves on (so a node never falls behind its fake time)."""
    moved = 0.0
    while moved < seconds:
        await clock.advance(min(step, seconds - moved))
        moved += step
        await nodes_asleep(*apps)


class Ticks:
    """Counts the rounds a running service completes from now on (by wrapping the instance's
    ``tick``): the proof that a poll has passed, to show something did not happen in it."""

    def __init__(self, service: Service) -> None:
        self.count = 0
        run = service.tick

        async def counted() -> None:
            await run()
            self.count += 1

        setattr(service, "tick", counted)  # noqa: B010 - on the instance, its loop calls self.tick()

    async def more(self, rounds: int, what: str) -> None:
        """Until ``rounds`` more ticks than now have run to the end."""
        target = self.count + rounds
        await poll(lambda: self.count, lambda count: count >= target, what=what)


async def blocked_by(dsn: str, blocker: int) -> int:
    """How many sessions wait for a lock that session ``blocker`` holds."""
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        cur = await conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE %s = ANY(pg_blocking_pids(pid))", [blocker]
        )
        row = await cur.fetchone()
        assert row is not None
        return int(row[0])


def poll_sync(
    probe: Callable[[], T],
    done: Callable[[T], object] = bool,
    *,
    timeout: float = 10.0,
    what: str,
    every: float = 0.02,
) -> T:
    """``poll`` for a test with no event loop (a subprocess, a browser): blocks between probes."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if done(value):
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}; last value: {value!r}")
        time.sleep(every)


@dataclass
class Events:
    """Telemetry events an app emitted, in order."""

    seen: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    def __call__(self, event: str, data: dict[str, Any]) -> None:
        self.seen.append((event, data))

    def named(self, event: str) -> list[dict[str, Any]]:
        return [data for name, data in self.seen if name == event]

    async def wait(
        self,
        event: str,
        done: Callable[[list[dict[str, Any]]], bool] = bool,
        timeout: float = 10.0,
    ) -> list[dict[str, Any]]:
        """The data of every ``event`` seen, once ``done`` holds for that list (at least one, by
        default)."""

        async def probe() -> list[dict[str, Any]]:
            return self.named(event)

        return await poll(probe, done, timeout=timeout, what=f"event {event}")


async def assert_failed_start_leaves_no_workers(app: Conveyor) -> None:
    """``app`` (process queues, no schema installed) fails to start, and the pool's workers, started
    before the schema check, are stopped with it."""
    before = worker_processes()
    try:
        with pytest.raises(Exception, match="not installed"):
            await app.start()
        assert app.node is None
        assert worker_processes() - before == set()
    finally:
        await app.close()


def worker_processes() -> set[int]:
    """Pids of this process's children that are process-pool workers (Linux: read from /proc)."""
    found: set[int] = set()
    for task in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{task}/children") as children:
                pids = children.read().split()
        except OSError:
            continue  # the thread ended between the listing and the open (a pool's or the loop's)
        for pid in pids:
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
                    if b"process_worker" in cmdline.read():
                        found.add(int(pid))
            except OSError:
                continue
    return found
