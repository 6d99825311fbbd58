"""Insert scenarios: how fast jobs get into the database.

``insert-bulk``: one ``enqueue_many`` call fed by a generator (one transaction, streamed in chunks).
``insert-single``: ``enqueue`` one job at a time, each its own transaction, from ``concurrency``
tasks; reports the latency of each insert as well as the rate.
``insert-unique`` / ``insert-unique-bulk``: the same with unique jobs (bulk: half of them duplicates),
alternated with plain rounds in the same run and reported as the ratio of the medians.
``insert-asyncpg``: ``enqueue_many`` in a caller's asyncpg transaction against a psycopg one.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

from common import (
    BENCH_WORKER,
    Figures,
    Settings,
    Stopwatch,
    compared,
    fresh_app,
    job_requests,
    latency_figures,
    rate,
)

from conveyor import Conveyor, JobRequest

BULK_JOBS = 100_000
SINGLE_JOBS = 5_000
#: Inserts before the clock starts: connections, type caches and prepared statements warm up.
WARMUP_JOBS = 20


async def _warm_up(app: Conveyor) -> None:
    await app.enqueue_many(job_requests(WARMUP_JOBS, queue="warmup"))
    for request in job_requests(WARMUP_JOBS, queue="warmup"):
        await app.enqueue(request)


async def timed_bulk_insert(settings: Settings, jobs: int) -> float:
    """Seconds of one ``enqueue_many`` of ``jobs`` generated requests, on a fresh, warmed-up schema."""
    async with fresh_app(settings) as app:
        await _warm_up(app)
        with Stopwatch() as watch:
            ids = await app.enqueue_many(job_requests(jobs))
    if len(ids) != jobs:
        raise AssertionError(f"inserted {len(ids)} jobs, expected {jobs}")
    return watch.seconds


async def insert_bulk(settings: Settings) -> Figures:
    jobs = settings.job_count(BULK_JOBS)
    seconds = await timed_bulk_insert(settings, jobs)
    return {"jobs": jobs, "seconds": round(seconds, 4), "jobs_per_s": rate(jobs, seconds)}


async def timed_single_inserts(settings: Settings, jobs: int, workers: int) -> tuple[float, list[float]]:
    """Seconds of ``jobs`` ``enqueue`` calls from ``workers`` tasks at once, on a fresh, warmed-up
    schema, and each call's seconds."""
    latencies: list[float] = []

    async def insert_share(share: int) -> None:
        for request in job_requests(share):
            started = time.perf_counter()
            await app.enqueue(request)
            latencies.append(time.perf_counter() - started)

    shares = [jobs // workers + (1 if i < jobs % workers else 0) for i in range(workers)]
    async with fresh_app(settings) as app:
        await _warm_up(app)
        with Stopwatch() as watch:
            async with asyncio.TaskGroup() as group:
                for share in shares:
                    group.create_task(insert_share(share))
    return watch.seconds, latencies


async def insert_single(settings: Settings) -> Figures:
    jobs = settings.job_count(SINGLE_JOBS)
    workers = max(1, settings.concurrency or 1)
    seconds, latencies = await timed_single_inserts(settings, jobs, workers)
    return {
        "jobs": jobs,
        "concurrency": workers,
        "seconds": round(seconds, 4),
        "jobs_per_s": rate(jobs, seconds),
        **latency_figures(latencies),
    }


# -- unique jobs -------------------------------------------------------------------------------------
#: Rounds of each variant (``--rounds``), alternated, so a slow phase of the machine hits both alike.
UNIQUE_ROUNDS = 3
UNIQUE_SINGLE_JOBS = 2_000


def unique_requests(
    count: int, *, distinct: int | None = None, queue: str = "default"
) -> Iterator[JobRequest]:
    """Like ``job_requests``, unique (``period=None``); with ``distinct``, only that many keys."""
    for index in range(count):
        key = index if distinct is None else index % distinct
        yield JobRequest(
            worker=BENCH_WORKER,
            args={"index": key, "email": f"user{key}@example.com"},
            queue=queue,
            unique={"period": None},
        )


async def _single_round(settings: Settings, requests: Iterator[JobRequest], jobs: int) -> float:
    async with fresh_app(settings) as app:
        await _warm_up(app)
        await app.enqueue(JobRequest(BENCH_WORKER, queue="warmup", unique=True))
        with Stopwatch() as watch:
            for request in requests:
                await app.enqueue(request)
    return rate(jobs, watch.seconds)


async def insert_unique(settings: Settings) -> Figures:
    """``enqueue`` of unique jobs one at a time, against plain ones in the same run: the ratio of
    their medians (target: unique >= 0.8x plain)."""
    jobs = settings.job_count(UNIQUE_SINGLE_JOBS)
    plain: list[float] = []
    unique: list[float] = []
    for _ in range(settings.round_count(UNIQUE_ROUNDS)):
        plain.append(await _single_round(settings, job_requests(jobs), jobs))
        unique.append(await _single_round(settings, unique_requests(jobs), jobs))
    return {"jobs": jobs, **compared("unique", unique, plain)}


async def _bulk_round(settings: Settings, requests: Iterator[JobRequest], jobs: int) -> tuple[float, int]:
    async with fresh_app(settings) as app:
        await _warm_up(app)
        with Stopwatch() as watch:
            ids = await app.enqueue_many(requests)
    if len(ids) != jobs:
        raise AssertionError(f"got {len(ids)} ids, expected {jobs}")
    return rate(jobs, watch.seconds), sum(1 for i in ids if i.conflict)


async def insert_unique_bulk(settings: Settings) -> Figures:
    """One ``enqueue_many`` of unique jobs, half of them duplicates, against a plain bulk insert of
    the same size in the same run (target: >= 30k jobs/s on PostgreSQL)."""
    jobs = settings.job_count(BULK_JOBS)
    plain: list[float] = []
    unique: list[float] = []
    conflicts = 0
    for _ in range(settings.round_count(UNIQUE_ROUNDS)):
        plain.append((await _bulk_round(settings, job_requests(jobs), jobs))[0])
        speed, conflicts = await _bulk_round(
            settings, unique_requests(jobs, distinct=max(1, jobs // 2)), jobs
        )
        unique.append(speed)
    return {"jobs": jobs, "conflicts": conflicts, **compared("unique", unique, plain)}


# -- through a caller's asyncpg connection ------------------------------------------------------------
ASYNCPG_ROUNDS = 4
ASYNCPG_JOBS = 20_000


async def insert_asyncpg(settings: Settings) -> Figures:
    """``enqueue_many`` in a caller's transaction on an asyncpg connection (statements of 5,000 jobs)
    against the same on a psycopg connection (COPY), alternated in one run: the ratio of the medians."""
    import asyncpg  # the asyncpg extra; only this scenario needs it
    import psycopg

    jobs = settings.job_count(ASYNCPG_JOBS)
    plain: list[float] = []
    through_asyncpg: list[float] = []
    async with fresh_app(settings) as app:
        await _warm_up(app)
        psycopg_conn = await psycopg.AsyncConnection.connect(settings.dsn)
        asyncpg_conn = await asyncpg.connect(settings.dsn)
        try:
            for _ in range(ASYNCPG_ROUNDS):
                with Stopwatch() as watch:
                    async with psycopg_conn.transaction():
                        await app.enqueue_many(job_requests(jobs), conn=psycopg_conn)
                plain.append(rate(jobs, watch.seconds))
                with Stopwatch() as watch:
                    async with asyncpg_conn.transaction():
                        await app.enqueue_many(job_requests(jobs), conn=asyncpg_conn)
                through_asyncpg.append(rate(jobs, watch.seconds))
        finally:
            await psycopg_conn.close()
            await asyncpg_conn.close()
    return {"jobs": jobs, **compared("asyncpg", through_asyncpg, plain)}
