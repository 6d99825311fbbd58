"""Insert scenarios: how fast jobs get into the database.

``insert-bulk``: one ``enqueue_many`` call fed by a generator (one transaction, streamed in chunks).
``insert-single``: ``enqueue`` one job at a time, each its own transaction, from ``concurrency``
tasks; reports the latency of each insert as well as the rate.
"""

from __future__ import annotations

import asyncio
import time

from common import Figures, Settings, Stopwatch, fresh_app, job_requests, latency_figures, rate

from conveyor import Conveyor

BULK_JOBS = 100_000
SINGLE_JOBS = 5_000
#: Inserts before the clock starts: connections, type caches and prepared statements warm up.
WARMUP_JOBS = 20


async def _warm_up(app: Conveyor) -> None:
    await app.enqueue_many(job_requests(WARMUP_JOBS, queue="warmup"))
    for request in job_requests(WARMUP_JOBS, queue="warmup"):
        await app.enqueue(request)


async def insert_bulk(settings: Settings) -> Figures:
    jobs = settings.job_count(BULK_JOBS)
    async with fresh_app(settings) as app:
        await _warm_up(app)
        with Stopwatch() as watch:
            ids = await app.enqueue_many(job_requests(jobs))
    if len(ids) != jobs:
        raise AssertionError(f"inserted {len(ids)} jobs, expected {jobs}")
    return {"jobs": jobs, "seconds": round(watch.seconds, 4), "jobs_per_s": rate(jobs, watch.seconds)}


async def insert_single(settings: Settings) -> Figures:
    jobs = settings.job_count(SINGLE_JOBS)
    workers = max(1, settings.concurrency or 1)
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
    return {
        "jobs": jobs,
        "concurrency": workers,
        "seconds": round(watch.seconds, 4),
        "jobs_per_s": rate(jobs, watch.seconds),
        **latency_figures(latencies),
    }
