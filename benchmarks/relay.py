"""Relay scenarios: the round trip of enqueue + wait for the result, and what waiting costs the
database when many wait at once."""

from __future__ import annotations

import asyncio
import contextlib
import statistics
import time

import bench_jobs
import psycopg
from common import Figures, Settings, fresh_app, latency_figures
from node_runs import NODE_POOL, running_node

from conveyor import Conveyor, WaitTimeoutError

RELAY_JOBS = 300
RELAY_WARMUP = 20
WAITERS = 1000
#: Seconds of each idle and each waiting period of ``wait-many``, and how many of each alternate.
PERIOD = 5.0
ROUNDS = 3
#: Seconds for the statistics of a burst of statements to reach ``pg_stat_database``: a backend
#: reports its transactions when idle, at most every 10 s (PostgreSQL 15), not as they commit.
STATS_LAG = 11.0


async def relay(settings: Settings) -> Figures:
    """Sequential ``relay`` calls (enqueue, run on a node of the same process, wait for the recorded
    result), against the floor of the same run: enqueue and read the job back, with no node."""
    count = settings.job_count(RELAY_JOBS)
    async with fresh_app(settings, pool_size=NODE_POOL) as base:
        floor = []
        for n in range(RELAY_WARMUP + count):
            started = time.perf_counter()
            job_id = await base.enqueue(bench_jobs.echo.new(n=n).with_options(queue="floor"))
            await base.get_job(job_id)
            floor.append(time.perf_counter() - started)
        async with running_node(base, {"default": settings.concurrency or 10}):
            trips = []
            for n in range(RELAY_WARMUP + count):
                started = time.perf_counter()
                assert await base.relay(bench_jobs.echo.new(n=n), timeout=10) == n
                trips.append(time.perf_counter() - started)
    return {
        "engine": settings.engine,
        "relays": count,
        **latency_figures(trips[RELAY_WARMUP:]),
        **latency_figures(floor[RELAY_WARMUP:], prefix="floor_"),
    }


async def wait_many(settings: Settings) -> Figures:
    """``WAITERS`` concurrent waits on jobs that are not due: the database's transactions per second
    while they wait (once each has read its job), against idle periods of the same run (alternated,
    ``ROUNDS`` each), and the queries the waiters' poll made per second."""
    waiters = settings.job_count(WAITERS)
    async with fresh_app(settings, pool_size=NODE_POOL) as app:
        later = [bench_jobs.echo.new(n=n).with_options(schedule_in=3600) for n in range(waiters)]
        ids = await app.enqueue_many(later)
        await asyncio.sleep(STATS_LAG)  # the setup's statistics are in before the first count
        idle, waiting, polls = [], [], []
        for _ in range(ROUNDS):
            idle.append(await transactions_per_second(app, settings))
            tasks = [asyncio.create_task(wait_quietly(app, job_id)) for job_id in ids]
            await asyncio.sleep(0.1)
            hub = next(iter(app._binding.waiters.values()))
            while hub.settled < waiters:  # noqa: ASYNC110 (every wait has read its job: now it only listens)
                await asyncio.sleep(0.1)
            await asyncio.sleep(STATS_LAG)
            before = hub.polls
            waiting.append(await transactions_per_second(app, settings))
            polls.append((hub.polls - before) / PERIOD)
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await asyncio.sleep(STATS_LAG)  # the poll has stopped; the statistics are in
    extra = [w - i for w, i in zip(waiting, idle, strict=True)] if settings.engine == "postgres" else []
    return {
        "engine": settings.engine,
        "waiters": waiters,
        "rounds": ROUNDS,
        "hub_queries_per_s": statistics.median(polls),
        "hub_queries_range": [min(polls), max(polls)],
        "idle_tx_per_s": statistics.median(idle) if extra else None,
        "waiting_tx_per_s": statistics.median(waiting) if extra else None,
        "extra_tx_per_s": round(statistics.median(extra), 2) if extra else None,
        "extra_range": [round(min(extra), 2), round(max(extra), 2)] if extra else None,
    }


async def wait_quietly(app: Conveyor, job_id: int) -> None:
    with contextlib.suppress(WaitTimeoutError):
        await app.wait(job_id, timeout=3600)


async def transactions_per_second(app: Conveyor, settings: Settings) -> float:
    """Transactions committed in the database per second over ``PERIOD`` (PostgreSQL; elsewhere just
    the pause, 0.0)."""
    if settings.engine != "postgres":
        await asyncio.sleep(PERIOD)
        return 0.0
    async with await psycopg.AsyncConnection.connect(settings.dsn, autocommit=True) as conn:
        first = await committed(conn)
        await asyncio.sleep(PERIOD)
        # One transaction of the counting itself is left out.
        return (await committed(conn) - first - 1) / PERIOD


async def committed(conn: psycopg.AsyncConnection) -> int:
    await conn.execute("SELECT pg_stat_clear_snapshot()")
    cur = await conn.execute("SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()")
    row = await cur.fetchone()
    assert row is not None
    return int(row[0])
