"""Limits scenarios: what a fleet-wide limit adds to a claim, and whether a rate limit holds.

``fetch-overhead``: ``fetch_jobs`` then the ack of what it took, plain, with a global limit and
with a global limit per tenant, call by call. ``rate-limit`` and ``rate-limit-tenants``: three nodes
share a rate limit (per tenant, in the second) on a deep backlog; starts counted per second.

The nodes run with ``leadership=False`` (``node_runs.running_node``): rescue, pruning and cron are
leader duties with nothing to do here. Everything else (listener, heartbeat, stager, acker) runs as
in production.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from typing import Any

import bench_jobs
from common import Figures, Settings, fresh_app
from node_runs import NODE_POOL, engine_like, enqueue_all

from conveyor import Conveyor, JobState
from conveyor.acks import Ack
from conveyor.limits import FetchLimits, GlobalLimit, Partition

OVERHEAD_CALLS = 400
OVERHEAD_DEMAND = 10


async def fetch_overhead(settings: Settings) -> Figures:
    """What a limit adds to one claim: ``fetch_jobs`` of demand 10 then the ack of what it took, timed
    call by call on a backlog of ten tenants' jobs, plain, with ``global_limit`` (one partition) and
    with a global limit per ``args.tenant``, the three kinds interleaved so a drift of the machine's load
    touches each alike. Reported: the median and p95 of each, and the medians as ratios to plain."""
    calls = settings.jobs or OVERHEAD_CALLS
    kinds: dict[str, FetchLimits | None] = {
        "plain": None,
        "global": FetchLimits(global_limit=1000),
        "partitioned": FetchLimits(global_limit=GlobalLimit(1000, Partition(args=("tenant",)))),
    }
    timings: dict[str, list[float]] = {kind: [] for kind in kinds}
    async with fresh_app(settings, pool_size=4) as base:
        engine = await base.engine()
        backlog = calls * OVERHEAD_DEMAND * len(kinds) + 1000
        await enqueue_all(base, (bench_jobs.noop.new(n=n, tenant=f"t{n % 10}") for n in range(backlog)))
        for call in range(calls):
            for kind, limits in kinds.items():
                started = time.perf_counter()
                jobs = await engine.fetch_jobs(
                    "default", OVERHEAD_DEMAND, node="bench", producer=f"bench-{call}", limits=limits
                )
                timings[kind].append(time.perf_counter() - started)
                await engine.ack_jobs([Ack(j.id, j.attempt, JobState.COMPLETED) for j in jobs])
    figures: Figures = {"calls": calls, "demand": OVERHEAD_DEMAND}
    plain = statistics.median(timings["plain"])
    for kind, taken in timings.items():
        ordered = sorted(taken)
        figures[f"{kind}_median_ms"] = round(statistics.median(ordered) * 1000, 3)
        figures[f"{kind}_p95_ms"] = round(ordered[int(len(ordered) * 0.95)] * 1000, 3)
        if kind != "plain":
            figures[f"{kind}_ratio"] = round(statistics.median(ordered) / plain, 2)
    return figures


RATE_ALLOWED = 50
RATE_SECONDS = 30
RATE_NODES = 3


async def rate_limit(settings: Settings) -> Figures:
    """Three nodes (each with its own engine, on one schema) share ``rate_limit`` 50 starts a second
    on a queue with a deep backlog, for 30 s (``--jobs`` sets the seconds). The starts are counted per
    1 s window of the start times the database recorded, from the first start on; every window after
    the first should hold 50 +/- 5%."""
    return await _rated_fleet(settings, tenants=None)


async def rate_limit_tenants(settings: Settings) -> Figures:
    """As ``rate-limit``, with the rate partitioned by ``args.tenant`` and three tenants' jobs mixed in
    one backlog: each tenant should get its own 50 starts a second, every window after the first."""
    return await _rated_fleet(settings, tenants=["a", "b", "c"])


async def _rated_fleet(settings: Settings, tenants: list[str] | None) -> Figures:
    seconds = settings.jobs or RATE_SECONDS
    rate: dict[str, Any] = {"allowed": RATE_ALLOWED, "period": 1}
    if tenants:
        rate["partition"] = {"args": ["tenant"]}
    queue = {"rated": {"limit": 20, "rate_limit": rate}}
    groups = tenants or [None]
    async with fresh_app(settings, pool_size=NODE_POOL) as base:
        backlog = RATE_ALLOWED * (seconds + 5)
        requests = (
            bench_jobs.noop.new(n=n, tenant=group).with_options(queue="rated")
            for n in range(backlog)
            for group in groups
        )
        await enqueue_all(base, requests)
        engines = [engine_like(await base.engine()) for _ in range(RATE_NODES)]
        nodes = [
            Conveyor(engine=engine, queues=queue, leadership=False, node=f"rate-{i}")
            for i, engine in enumerate(engines)
        ]
        for node in nodes:
            await node.start()
        try:
            await asyncio.sleep(seconds + 1)
        finally:
            for node in nodes:
                await node.stop()
        started = await base.list_jobs(states=["completed", "executing"], queues=["rated"], limit=10_000)
    moments = [j.attempted_at for j in started if j.attempted_at is not None]
    first = min(moments)
    measured: list[int] = []
    for group in groups:
        windows = [0] * (seconds + 1)
        for job in started:
            if job.attempted_at is not None and job.args.get("tenant") == group:
                index = int((job.attempted_at - first).total_seconds())
                if index < len(windows):
                    windows[index] += 1
        measured += windows[1:seconds]  # after the first, before the last (cut short by the stop)
    within = sum(1 for count in measured if abs(count - RATE_ALLOWED) <= RATE_ALLOWED * 0.05)
    return {
        "jobs": len(moments),
        "nodes": RATE_NODES,
        "allowed_per_s": RATE_ALLOWED,
        "partitions": len(groups),
        "windows": len(measured),
        "median_per_s": statistics.median(measured),
        "min_per_s": min(measured),
        "max_per_s": max(measured),
        "windows_within_5pct": within,
    }
