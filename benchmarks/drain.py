"""Drain scenarios: how fast one node works through a backlog of no-op jobs, from its start.

``drain``: ``jobs`` no-op async jobs (default 50,000) are inserted first; then one node with
``queues={"default": C}`` is started and timed until the acker has written the last ack. Run for
C = 20 and C = 100 unless ``--concurrency`` names one; one result per concurrency.
``drain-global``: ``drain`` at C = 100 with ``global_limit=100`` against a plain drain, rounds
alternated in one run.
``drain-history``: ``drain`` at C = 100 on a table that already holds ``--history`` (default
2,000,000) completed jobs, against a plain ``drain`` measured in the same run (before and after).

The nodes run with ``leadership=False`` (``node_runs.running_node``): rescue, pruning and cron are
leader duties with nothing to do here. Everything else (listener, heartbeat, stager, acker) runs as
in production. A pruner deleting the history in the middle of a measurement would only
add noise.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

import bench_jobs
import statement_times
from common import Figures, Settings, alternate, compared, fresh_app, guarded, rate
from cpu_account import CpuWindow
from loading import load_without_indexes
from node_runs import NODE_POOL, check_all_completed, enqueue_all, running_node, written
from statement_times import StatementTimes

from conveyor import Conveyor
from conveyor.engine.postgres import PostgresEngine

DRAIN_JOBS = 50_000
DRAIN_CONCURRENCY = (20, 100)
HISTORY_CONCURRENCY = 100
HISTORY_ROWS = 2_000_000


async def drain_once(
    settings: Settings,
    jobs: int,
    concurrency: int,
    history: int = 0,
    global_limit: int | None = None,
    prepare: Callable[[Conveyor], object] | None = None,
    window: CpuWindow | None = None,
    synchronous_commit: bool = True,
    statements: StatementTimes | None = None,
) -> Figures:
    """Drain ``jobs`` no-op jobs with one node from its start; ``window`` (if given) measures the
    CPU used over the same span (``cpu_account.py``), ``statements`` the server's execution time of
    its statements (``statement_times.py``; read just outside the span)."""
    queue: Any = concurrency if global_limit is None else {"limit": concurrency, "global_limit": global_limit}
    async with fresh_app(settings, pool_size=NODE_POOL, synchronous_commit=synchronous_commit) as base:
        if history:
            await load_history(base, history)
        await enqueue_all(base, (bench_jobs.noop.new(n=n) for n in range(jobs)))
        before = await statement_times.read(settings.dsn) if statements is not None else None
        if window is not None:
            window.start()
        started = time.perf_counter()
        async with running_node(base, {"default": queue}, prepare) as app:
            await written(app, jobs, timeout=max(60.0, jobs / 500))
            seconds = time.perf_counter() - started
            if window is not None:
                window.stop()
        if statements is not None and before is not None:
            after = await statement_times.read(settings.dsn)
            if after is not None:
                statements.add(before, after, jobs)
        await check_all_completed(base)
    return {
        "jobs": jobs,
        "concurrency": concurrency,
        "seconds": round(seconds, 4),
        "jobs_per_s": rate(jobs, seconds),
        "leadership": False,
    }


async def drain(settings: Settings) -> list[Figures]:
    jobs = settings.job_count(DRAIN_JOBS)
    levels = (settings.concurrency,) if settings.concurrency is not None else DRAIN_CONCURRENCY
    return [await drain_once(settings, jobs, level) for level in levels]


#: Rounds of each variant of ``drain-global``, alternated.
GLOBAL_ROUNDS = 5
#: The best round of ``drain-global`` below this fails the run: 2026-11-28, load 5-11, best rounds
#: 0.55 before the held acks' hashed test, 0.70-0.82 after, 0.86-1.11 with the claim in two
#: statements (benchmarks/README.md).
GLOBAL_GUARD = 0.7


async def drain_global(settings: Settings) -> Figures:
    """Drain at c=100 with ``global_limit=100`` against a plain drain in the same run: what a
    fleet-wide cap costs one node (each capped claim takes the queue's lock and counts its running
    jobs). Target (issue 34): >= 0.8x plain. Guard: the best round's ratio >= ``GLOBAL_GUARD``."""
    jobs = settings.job_count(DRAIN_JOBS)
    concurrency = settings.concurrency or 100
    plain: list[float] = []
    capped: list[float] = []
    for round_number in range(settings.round_count(GLOBAL_ROUNDS)):
        # Which side goes first alternates, so a drift of the machine's load weighs on both alike.
        for side in alternate(round_number, ("plain", "capped")):
            if side == "plain":
                plain.append((await drain_once(settings, jobs, concurrency))["jobs_per_s"])
            else:
                limited = await drain_once(settings, jobs, concurrency, global_limit=concurrency)
                capped.append(limited["jobs_per_s"])
    figures = compared("capped", capped, plain)
    full = len(capped) >= GLOBAL_ROUNDS
    return {"jobs": jobs, "concurrency": concurrency, **guarded(figures, GLOBAL_GUARD, full)}


async def load_history(base: Conveyor, rows: int) -> None:
    """``rows`` completed jobs spread over the last day, written by one INSERT ... SELECT with the
    indexes built afterwards, then vacuumed and analyzed (as autovacuum would have done long ago on
    a live table; doing it now also keeps an autovacuum of the fresh rows out of the measurement)."""
    engine = await base.engine()
    assert isinstance(engine, PostgresEngine)  # drain_history checked the engine
    await load_without_indexes(engine, [(HISTORY, {"rows": rows})])


#: The completed jobs of ``load_history``.
HISTORY = """
    INSERT INTO {table} (state, queue, worker, args, attempt, max_attempts, attempted_by,
                         inserted_at, scheduled_at, attempted_at, completed_at)
    SELECT 'completed', 'default', 'bench_jobs.noop', jsonb_build_object('n', g), 1, 20,
           ARRAY['bench-history-node', 'bench-history-producer'], t, t, t, t + interval '1 ms'
    FROM generate_series(1, %(rows)s) AS g,
         LATERAL (SELECT timezone('UTC', now()) - make_interval(secs => 86000.0 * g / %(rows)s)) AS c(t)
"""


async def drain_history(settings: Settings) -> Figures:
    if settings.engine != "postgres":
        raise RuntimeError("drain-history runs on PostgreSQL only (it writes the history in SQL)")
    jobs = settings.job_count(DRAIN_JOBS)
    history = settings.history if settings.history is not None else HISTORY_ROWS
    concurrency = settings.concurrency or HISTORY_CONCURRENCY
    # A plain drain before and after the history drain, so a drift of the shared machine's load
    # shows in both sides of the ratio.
    before = await drain_once(settings, jobs, concurrency)
    loaded = time.perf_counter()
    measured = await drain_once(settings, jobs, concurrency, history=history)
    total = time.perf_counter() - loaded
    after = await drain_once(settings, jobs, concurrency)
    plain = statistics.mean([before["jobs_per_s"], after["jobs_per_s"]])
    return {
        "jobs": jobs,
        "history": history,
        "concurrency": concurrency,
        "seconds": measured["seconds"],
        "jobs_per_s": measured["jobs_per_s"],
        "plain_jobs_per_s": round(plain, 1),
        "plain_runs_jobs_per_s": [before["jobs_per_s"], after["jobs_per_s"]],
        "ratio": round(measured["jobs_per_s"] / plain, 3),
        "history_setup_s": round(total - measured["seconds"], 1),
        "leadership": False,
    }
