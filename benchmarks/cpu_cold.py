"""``cpu-cold`` (issue 20's S5): CPU-bound jobs run by a node from its start, pool start included.

``jobs`` (default 40) pure-Python jobs of ``--job-ms`` (default 200 ms) each wait in a queue whose
executor is ``process``; a node with DEFAULT settings (default process pool size, no warm-up) and
that queue at limit ``--concurrency`` (default 10) is started and timed from the call that starts it
to its last ack written. The reference is the same jobs' work run one after another in this process
(serial), measured in the same run; the two alternate, ``CPU_COLD_ROUNDS`` rounds each. Reported:
median and range of each, and the ratio serial / node of the medians (the speedup; target >= 1.9 on
2 cores).
"""

from __future__ import annotations

import statistics
import time

import bench_jobs
from common import Figures, Settings, fresh_app
from runtime import CPU_POLL, NODE_POOL, calibrate, check_all_completed, run_sequential, running_node, written

from conveyor import Conveyor

CPU_COLD_JOBS = 40
CPU_COLD_JOB_MS = 200.0
CPU_COLD_CONCURRENCY = 10
#: Rounds of (serial, node), the order swapped every other round so a drift of the shared
#: machine's load weighs on both alike.
CPU_COLD_ROUNDS = 3


async def node_from_start(base: Conveyor, loops: int, jobs: int, limit: int, job_ms: float) -> float:
    """Seconds from starting a node (its process pool spawned then) to its ``jobs``-th ack written;
    the jobs are waiting before it starts."""
    await base.enqueue_many(bench_jobs.burn.new(loops=loops) for _ in range(jobs))
    queue = {"cpu": {"limit": limit, "executor": "process"}}
    started = time.perf_counter()
    async with running_node(base, queue) as app:
        await written(app, jobs, timeout=60.0 + jobs * job_ms / 1000, poll=CPU_POLL)
        seconds = time.perf_counter() - started
    await check_all_completed(base)
    return seconds


async def cpu_cold(settings: Settings) -> Figures:
    jobs = settings.job_count(CPU_COLD_JOBS)
    job_ms = settings.job_ms if settings.job_ms is not None else CPU_COLD_JOB_MS
    limit = settings.concurrency or CPU_COLD_CONCURRENCY
    loops = calibrate(job_ms)
    serial: list[float] = []
    node: list[float] = []
    async with fresh_app(settings, pool_size=NODE_POOL) as base:
        for round_ in range(CPU_COLD_ROUNDS):
            if round_ % 2:
                node.append(await node_from_start(base, loops, jobs, limit, job_ms))
                serial.append(run_sequential(loops, jobs))
            else:
                serial.append(run_sequential(loops, jobs))
                node.append(await node_from_start(base, loops, jobs, limit, job_ms))
    speedups = [s / n for s, n in zip(serial, node, strict=True)]
    return {
        "jobs": jobs,
        "job_ms": job_ms,
        "concurrency": limit,
        "rounds": CPU_COLD_ROUNDS,
        "serial_s": round(statistics.median(serial), 3),
        "serial_range": [round(min(serial), 3), round(max(serial), 3)],
        "node_s": round(statistics.median(node), 3),
        "node_range": [round(min(node), 3), round(max(node), 3)],
        "speedup": round(statistics.median(serial) / statistics.median(node), 3),
        "round_speedups": [round(s, 3) for s in speedups],
        "timed_from": "node start (process pool spawned then), jobs waiting",
        "leadership": False,
    }
