"""``latency``: how soon an idle node starts a job after its insert has committed.

``jobs`` (default 200) jobs are enqueued one at a time 50 ms apart and each is timed from the moment
its insert has committed (``enqueue`` returned) to its first line. Between two samples, the floor: a
job of a queue no node serves is inserted and claimed by a bare ``fetch_jobs`` (the claim's round trip
and commit, which every pickup pays), timed the same way.

The nodes run with ``leadership=False`` (``node_runs.running_node``): rescue, pruning and cron are
leader duties with nothing to do here. Everything else (listener, heartbeat, stager, acker) runs as
in production.
"""

from __future__ import annotations

import asyncio
import time

import bench_jobs
from common import Figures, Settings, fresh_app, latency_figures, percentile
from node_runs import NODE_POOL, running_node, written

LATENCY_JOBS = 200
LATENCY_GAP = 0.050
#: Jobs enqueued (and not counted) before the latency clock starts: statements get prepared.
LATENCY_WARMUP = 20
#: A queue no node serves: the latency scenario's floor claims its jobs with bare fetches.
FLOOR_QUEUE = "latency_floor"


async def latency(settings: Settings) -> Figures:
    return await latency_once(settings, settings.job_count(LATENCY_JOBS))


async def latency_once(settings: Settings, jobs: int, synchronous_commit: bool = True) -> Figures:
    """Pickup latency of ``jobs`` jobs enqueued one at a time (see the module doc)."""
    concurrency = settings.concurrency or 10
    committed: dict[int, float] = {}
    bench_jobs.STARTED.clear()
    async with (
        fresh_app(settings, pool_size=NODE_POOL, synchronous_commit=synchronous_commit) as base,
        running_node(base, {"default": concurrency}) as app,
    ):
        warmup = min(LATENCY_WARMUP, jobs)
        engine = await base.engine()
        floor: list[float] = []
        for n in range(-warmup, jobs):
            await app.enqueue(bench_jobs.mark.new(n=n))
            committed[n] = time.perf_counter()
            await asyncio.sleep(LATENCY_GAP / 2)
            # The floor, between two samples: the claim of a job just committed, by a bare fetch
            # (no notification, no node): what any pickup pays, whatever the machine's load.
            await app.enqueue(bench_jobs.mark.new(n=n).with_options(queue=FLOOR_QUEUE))
            began = time.perf_counter()
            claimed = await engine.fetch_jobs(FLOOR_QUEUE, 1, node="floor", producer="floor")
            if n >= 0 and claimed:
                floor.append(time.perf_counter() - began)
            await asyncio.sleep(LATENCY_GAP / 2)
        await written(app, warmup + jobs, timeout=30.0)
    seconds = [bench_jobs.STARTED[n] - committed[n] for n in range(jobs)]
    figures = latency_figures(seconds)
    return {
        "jobs": jobs,
        "concurrency": concurrency,
        "gap_ms": LATENCY_GAP * 1000,
        **figures,
        **latency_figures(floor, prefix="floor_"),
        "p50_over_floor_ms": round(figures["p50_ms"] - percentile(floor, 0.5) * 1000, 3),
        "leadership": False,
    }
