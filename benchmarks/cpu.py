"""``cpu``: how well a node's process pool uses the cores, warm.

``jobs`` (default 40) pure-Python jobs of ``--job-ms`` (default 100 ms) each, run by a node with
``processes=2`` and ``executor="process"`` (queue limit 4 unless ``--concurrency``), against the same
work run one job after another in this process (the sequential baseline) and by a plain
``multiprocessing`` pool of 2 (what the machine allows), in alternating rounds of one run. The
helpers that calibrate and run the work serve ``cpu-cold`` too.

The nodes run with ``leadership=False`` (``node_runs.running_node``): rescue, pruning and cron are
leader duties with nothing to do here. Everything else (listener, heartbeat, stager, acker) runs as
in production.
"""

from __future__ import annotations

import multiprocessing
import statistics
import time
from typing import Any

import bench_jobs
from common import Figures, Settings, fresh_app
from node_runs import NODE_POOL, acked, check_all_completed, enqueue_all, running_node, written

from conveyor import Conveyor

CPU_JOBS = 40
CPU_JOB_MS = 100.0
CPU_PROCESSES = 2
#: Rounds of (sequential, Conveyor, plain multiprocessing), the second in reverse order, so a drift
#: of the shared machine's load weighs on every variant alike.
CPU_ROUNDS = 2


def calibrate(job_ms: float) -> int:
    """The loop count that makes ``bench_jobs.spin`` take about ``job_ms`` on this machine."""
    loops = 100_000
    while True:
        started = time.perf_counter()
        bench_jobs.spin(loops)
        took = time.perf_counter() - started
        if took > 0.05 or took * 1000 > job_ms:
            return max(1, round(loops * job_ms / 1000 / took))
        loops *= 4


def run_sequential(loops: int, jobs: int) -> float:
    """Seconds to run the jobs' work one after another in this process (one core)."""
    started = time.perf_counter()
    for _ in range(jobs):
        bench_jobs.spin(loops)
    return time.perf_counter() - started


def run_multiprocessing(pool: Any, loops: int, jobs: int) -> float:
    """Seconds for a plain ``multiprocessing`` pool to run the same work, one job per task: what the
    machine allows, to read Conveyor's figure against."""
    started = time.perf_counter()
    pool.map(bench_jobs.spin, [loops] * jobs, chunksize=1)
    return time.perf_counter() - started


async def run_conveyor(app: Conveyor, loops: int, jobs: int, job_ms: float) -> float:
    """Seconds from enqueueing the jobs to the last ack written."""
    assert app.node is not None
    target = app.node.acker.written + jobs
    started = time.perf_counter()
    await enqueue_all(app, (bench_jobs.burn.new(loops=loops) for _ in range(jobs)))
    await acked(app, target, timeout=60.0 + jobs * job_ms / 1000)
    return time.perf_counter() - started


async def cpu(settings: Settings) -> Figures:
    jobs = settings.job_count(CPU_JOBS)
    job_ms = settings.job_ms if settings.job_ms is not None else CPU_JOB_MS
    processes = CPU_PROCESSES
    # Twice as many slots as processes: a freed process takes the next claimed job at once instead of
    # waiting for an ack and a fetch; the process pool still runs one job per process at a time.
    limit = settings.concurrency or 2 * processes
    loops = calibrate(job_ms)
    sequential: list[float] = []
    pooled: list[float] = []
    plain: list[float] = []
    queue = {"cpu": {"limit": limit, "executor": "process"}}
    with multiprocessing.get_context("spawn").Pool(processes) as mp_pool:
        mp_pool.map(bench_jobs.spin, [1] * processes * 2, chunksize=1)  # spawned and imported
        async with (
            fresh_app(settings, pool_size=NODE_POOL) as base,
            running_node(base, queue, processes=processes) as app,
        ):
            # A process executor on the queue spawns the pool at node start; one short job per
            # process (all at once, each sleeping) also gets every process past its imports and
            # first job before the clock starts.
            await enqueue_all(app, (bench_jobs.pause.new(seconds=0.2) for _ in range(processes)))
            await written(app, processes, timeout=60.0)
            for round_ in range(CPU_ROUNDS):
                # The sequential runs block this loop (and the idle node) for their duration: harmless.
                variants = [
                    lambda: sequential.append(run_sequential(loops, jobs)),
                    lambda: plain.append(run_multiprocessing(mp_pool, loops, jobs)),
                ]
                if round_ % 2:
                    variants.reverse()
                variants[0]()
                pooled.append(await run_conveyor(app, loops, jobs, job_ms))
                variants[1]()
            await check_all_completed(app)
    return {
        "jobs": jobs,
        "job_ms": job_ms,
        "processes": processes,
        "concurrency": limit,
        "rounds": CPU_ROUNDS,
        "sequential_s": round(statistics.mean(sequential), 4),
        "process_pool_s": round(statistics.mean(pooled), 4),
        "speedup": round(sum(sequential) / sum(pooled), 3),
        "multiprocessing_s": round(statistics.mean(plain), 4),
        "multiprocessing_speedup": round(sum(sequential) / sum(plain), 3),
        "warmup": "pool spawned at node start (queue executor=process), then one job per process",
        "leadership": False,
    }
