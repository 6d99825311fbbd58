"""``priority-aging``: is a low-priority job's wait bounded under a sustained high-priority flood?

A node serves one queue (limit 5) whose jobs each take 10 ms. A feeder keeps at least ``BACKLOG``
priority-0 jobs available, all the time, so the queue never runs dry of them. Once the flood is
going, one priority-9 job is enqueued, and its wait (enqueue to completion) is measured: with
priority aging (``priority_aging_after`` 1 s, a step every 0.5 s: a bound of about 1 + 9 x 0.5 s
plus the flood jobs older than it) and without (starved: it is cut off at ``CUTOFF`` seconds and
reported as not run). The two sides alternate, round by round, on one database.
"""

from __future__ import annotations

import asyncio
import contextlib
import statistics
import time

import bench_jobs
from common import Figures, Settings, fresh_app
from node_runs import NODE_POOL, engine_like

from conveyor import Conveyor, JobState

BACKLOG = 200
CUTOFF = 20.0
AFTER = 1.0
INTERVAL = 0.5
ROUNDS = 3


async def priority_aging(settings: Settings) -> Figures:
    rounds = settings.round_count(ROUNDS)
    waits: dict[str, list[float | None]] = {"aging": [], "plain": []}
    async with fresh_app(settings, pool_size=NODE_POOL) as base:
        for index in range(rounds):
            for side in ("aging", "plain") if index % 2 == 0 else ("plain", "aging"):
                waits[side].append(await _round(base, f"flood_{side}_{index}", aging=side == "aging"))
    figures: Figures = {"rounds": rounds, "backlog": BACKLOG, "cutoff_s": CUTOFF}
    for side, taken in waits.items():
        done = [w for w in taken if w is not None]
        figures[f"{side}_waits_s"] = ", ".join("starved" if w is None else f"{w:.2f}" for w in taken)
        figures[f"{side}_median_s"] = round(statistics.median(done), 2) if done else "starved"
        figures[f"{side}_starved"] = len(taken) - len(done)
    return figures


async def _round(base: Conveyor, queue: str, *, aging: bool) -> float | None:
    """The priority-9 job's wait in seconds, None when it did not run within ``CUTOFF``."""
    options = {"priority_aging_after": AFTER, "priority_aging_interval": INTERVAL} if aging else {}
    node = Conveyor(
        engine=engine_like(await base.engine()), queues={queue: 5}, node=f"aging-{queue}", **options
    )
    flood = asyncio.create_task(_feed(base, queue))
    await node.start()
    try:
        await asyncio.sleep(1.0)  # the flood is going
        started = time.perf_counter()
        low = await base.enqueue(bench_jobs.nap.new(seconds=0.01).with_options(queue=queue, priority=9))
        while time.perf_counter() - started < CUTOFF:
            job = await base.get_job(low)
            if job is not None and job.state is JobState.COMPLETED:
                return time.perf_counter() - started
            await asyncio.sleep(0.05)
        return None
    finally:
        flood.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await flood
        await node.stop()


async def _feed(base: Conveyor, queue: str) -> None:
    """Keep at least ``BACKLOG`` priority-0 jobs waiting in ``queue``."""
    while True:
        waiting = await base.count_jobs(states=["available"], queues=[queue])
        if waiting < BACKLOG:
            batch = BACKLOG - waiting + 50
            await base.enqueue_many(
                bench_jobs.nap.new(seconds=0.01).with_options(queue=queue, priority=0) for _ in range(batch)
            )
        await asyncio.sleep(0.02)
