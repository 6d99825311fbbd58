"""``cpu-cold`` (issue 20's S5): CPU-bound jobs run by a node from its start, pool start included.

``jobs`` (default 40) pure-Python jobs of ``--job-ms`` (default 200 ms) each wait in a queue whose
executor is ``process``; a node with DEFAULT settings (default process pool size, no warm-up) and
that queue at limit ``--concurrency`` (default 10) is started and timed from the call that starts it
to its last ack written. The reference is the same jobs' work run one after another in this process
(serial), measured in the same run. What the machine allows at that moment is measured too: the
same work on a plain ``multiprocessing`` pool of the same size, started and warmed beforehand (its
start not counted). The three alternate, ``CPU_COLD_ROUNDS`` rounds each, in a rotating order.
Reported: median and range of each, the ratio serial / node of the medians (the speedup; target
>= 1.9 on 2 cores), the plain pool's speedup and the node's time against the plain pool's.
"""

from __future__ import annotations

import multiprocessing
import os
import statistics
import time
from collections.abc import Awaitable, Callable

import bench_jobs
from common import Figures, Settings, fresh_app
from cpu import calibrate, run_multiprocessing, run_sequential
from node_runs import NODE_POOL, acked, check_all_completed, running_node

from conveyor import Conveyor

CPU_COLD_JOBS = 40
CPU_COLD_JOB_MS = 200.0
CPU_COLD_CONCURRENCY = 10
#: Rounds of (serial, node, plain pool), the order rotated every round so a drift of the shared
#: machine's load weighs on all alike.
CPU_COLD_ROUNDS = 3


async def node_from_start(base: Conveyor, loops: int, jobs: int, limit: int, job_ms: float) -> float:
    """Seconds from starting a node (its process pool spawned then) to its ``jobs``-th ack written;
    the jobs are waiting before it starts."""
    await base.enqueue_many(bench_jobs.burn.new(loops=loops) for _ in range(jobs))
    queue = {"cpu": {"limit": limit, "executor": "process"}}
    started = time.perf_counter()
    async with running_node(base, queue) as app:
        await acked(app, jobs, timeout=60.0 + jobs * job_ms / 1000)
        seconds = time.perf_counter() - started
    await check_all_completed(base)
    return seconds


async def cpu_cold(settings: Settings) -> Figures:
    rounds = settings.round_count(CPU_COLD_ROUNDS)
    jobs = settings.job_count(CPU_COLD_JOBS)
    job_ms = settings.job_ms if settings.job_ms is not None else CPU_COLD_JOB_MS
    limit = settings.concurrency or CPU_COLD_CONCURRENCY
    size = os.cpu_count() or 1  # the process pool's default size
    loops = calibrate(job_ms)
    times: dict[str, list[float]] = {"serial": [], "node": [], "multiprocessing": []}
    with multiprocessing.get_context("spawn").Pool(size) as mp_pool:
        mp_pool.map(bench_jobs.spin, [1] * size * 2, chunksize=1)  # started and imported
        async with fresh_app(settings, pool_size=NODE_POOL) as base:

            async def serial() -> float:
                return run_sequential(loops, jobs)

            async def node() -> float:
                return await node_from_start(base, loops, jobs, limit, job_ms)

            async def plain() -> float:
                return run_multiprocessing(mp_pool, loops, jobs)

            variants: list[tuple[str, Callable[[], Awaitable[float]]]] = [
                ("serial", serial),
                ("node", node),
                ("multiprocessing", plain),
            ]
            for round_ in range(rounds):
                shift = round_ % len(variants)
                for name, run in variants[shift:] + variants[:shift]:
                    times[name].append(await run())
    median = {name: statistics.median(taken) for name, taken in times.items()}
    figures: Figures = {
        "jobs": jobs,
        "job_ms": job_ms,
        "concurrency": limit,
        "pool_size": size,
        "rounds": rounds,
    }
    for name, taken in times.items():
        figures[f"{name}_s"] = round(median[name], 3)
        figures[f"{name}_range"] = [round(min(taken), 3), round(max(taken), 3)]
    figures["speedup"] = round(median["serial"] / median["node"], 3)
    figures["round_speedups"] = [round(s / n, 3) for s, n in zip(times["serial"], times["node"], strict=True)]
    figures["multiprocessing_speedup"] = round(median["serial"] / median["multiprocessing"], 3)
    figures["node_vs_multiprocessing"] = round(median["multiprocessing"] / median["node"], 3)
    figures["timed_from"] = "node start (process pool started then), jobs waiting"
    figures["leadership"] = False
    return figures
