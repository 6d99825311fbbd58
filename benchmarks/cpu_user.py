"""``cpu-user`` (issue 34, target 5): CPU jobs from cold, shaped like a user's, against a plain pool.

The job module (``user_jobs``) imports psycopg and pydantic at the top and its job does ``--job-ms``
(default 100 ms) of pure-Python work. ``--jobs`` (default 40) such jobs wait in a queue whose
executor is ``process``, at limit ``--concurrency`` (default 10). A node of a new app with default
settings (its own connections, leadership, the default pool size ``os.cpu_count()``;
``imports=["user_jobs"]``, as a program names its job modules) is timed from the call to
``start()`` to its last ack written: connecting, the schema check, the pool's start and the
workers' imports are all inside the time. In the same run, rotated round by round (``CPU_USER_ROUNDS``
rounds): a plain ``concurrent.futures.ProcessPoolExecutor`` of spawned processes of the same size,
started cold on the same module in a script of its own (``cpu_user_pool.py``, timed from the pool's
creation to its last result), and the same work run one job after another in this process (serial).
Reported: each side's median and range, ``node_vs_pool`` (pool time over node time; target >= 0.95),
its per-round values, and each side's speedup over serial. The guard fails a full run whose median
``node_vs_pool`` is under ``CPU_USER_GUARD``.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable

import user_jobs
from common import Figures, Settings, fresh_app
from node_runs import acked, check_all_completed

from conveyor import Conveyor
from conveyor.engine.postgres import PostgresEngine
from conveyor.engine.sqlite import SqliteEngine

CPU_USER_JOBS = 40
CPU_USER_JOB_MS = 100.0
CPU_USER_CONCURRENCY = 10
CPU_USER_ROUNDS = 5
#: A run of CPU_USER_ROUNDS rounds or more fails when the median node_vs_pool falls under this.
CPU_USER_GUARD = 0.6
POOL_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "cpu_user_pool.py")


def calibrate(job_ms: float) -> int:
    """The loop count that makes ``user_jobs.work`` take about ``job_ms`` here."""
    loops = 100_000
    while True:
        started = time.perf_counter()
        user_jobs.work(loops)
        took = time.perf_counter() - started
        if took > 0.05 or took * 1000 > job_ms:
            return max(1, round(loops * job_ms / 1000 / took))
        loops *= 4


async def database_url(base: Conveyor) -> tuple[str, str]:
    """The URL and prefix a new app reaches ``base``'s schema with."""
    engine = await base.engine()
    if isinstance(engine, PostgresEngine):
        return engine.dsn, engine.prefix
    if isinstance(engine, SqliteEngine):
        return f"sqlite:///{engine.path}", "public"
    raise SystemExit(f"cpu-user does not run on {type(engine).__name__}")


async def node_from_start(base: Conveyor, loops: int, jobs: int, limit: int) -> float:
    """Seconds from ``start()`` of a new app (not connected yet) to its ``jobs``-th ack."""
    await base.enqueue_many(user_jobs.crunch.new(loops=loops) for _ in range(jobs))
    url, prefix = await database_url(base)
    app = Conveyor(
        database_url=url,
        prefix=prefix,
        queues={"cpu": {"limit": limit, "executor": "process"}},
        imports=["user_jobs"],
    )
    started = time.perf_counter()
    try:
        await app.start()
        await acked(app, jobs, timeout=120.0)
        seconds = time.perf_counter() - started
    finally:
        await app.stop()
    await check_all_completed(base)
    return seconds


def plain_pool(size: int, loops: int, jobs: int) -> float:
    """Seconds a cold spawned ``ProcessPoolExecutor`` of ``size`` takes for the same work."""
    out = subprocess.run(
        [sys.executable, POOL_SCRIPT, str(size), str(jobs), str(loops)],
        check=True,
        capture_output=True,
        text=True,
    )
    return float(out.stdout.strip())


def serial(loops: int, jobs: int) -> float:
    started = time.perf_counter()
    for _ in range(jobs):
        user_jobs.work(loops)
    return time.perf_counter() - started


async def cpu_user(settings: Settings) -> Figures:
    rounds = settings.round_count(CPU_USER_ROUNDS)
    jobs = settings.job_count(CPU_USER_JOBS)
    job_ms = settings.job_ms if settings.job_ms is not None else CPU_USER_JOB_MS
    limit = settings.concurrency or CPU_USER_CONCURRENCY
    size = os.cpu_count() or 1  # the node's default process pool size
    loops = calibrate(job_ms)
    times: dict[str, list[float]] = {"serial": [], "node": [], "pool": []}
    async with fresh_app(settings, pool_size=2) as base:

        async def run_serial() -> float:
            return serial(loops, jobs)

        async def run_node() -> float:
            return await node_from_start(base, loops, jobs, limit)

        async def run_pool() -> float:
            return plain_pool(size, loops, jobs)

        variants: list[tuple[str, Callable[[], Awaitable[float]]]] = [
            ("node", run_node),
            ("pool", run_pool),
            ("serial", run_serial),
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
    per_round = [p / n for p, n in zip(times["pool"], times["node"], strict=True)]
    figures["node_vs_pool"] = round(statistics.median(per_round), 3)
    figures["node_vs_pool_range"] = [round(min(per_round), 3), round(max(per_round), 3)]
    figures["round_node_vs_pool"] = [round(r, 3) for r in per_round]
    figures["node_speedup"] = round(median["serial"] / median["node"], 3)
    figures["pool_speedup"] = round(median["serial"] / median["pool"], 3)
    figures["timed_from"] = "start() of a new app (not connected), jobs waiting"
    if rounds >= CPU_USER_ROUNDS and figures["node_vs_pool"] < CPU_USER_GUARD:
        figures["exceeded"] = f"median node_vs_pool {figures['node_vs_pool']} < {CPU_USER_GUARD}"
    return figures
