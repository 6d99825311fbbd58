"""Large-table scenario (PostgreSQL): what 10 million rows of history cost the work of a live queue.

``large-tables``: two schemas side by side. The big one holds ``--history`` (default 10,000,000)
completed jobs, written once per run by ``INSERT ... SELECT generate_series`` (indexes built
afterwards, then vacuumed and analyzed); ``PRUNABLE`` of them ended more than a day ago (the default
pruning age), the rest over the last day. The empty one holds no history. Both get the same backlog
of ``--jobs`` (default 100,000) available jobs. Then, on both, in one run:

* fetch+ack: ``fetch_jobs`` of ``BATCH`` jobs then the ack of all of them, timed call by call, a call
  on one schema then a call on the other (the order swapped every call), ``CALLS`` times each.
  Reported: the median and p95 per batch of each side, and the ratio of the medians (big / empty).
  Target: <= 1.2.
* staging: as many scheduled jobs as the backlog (``--jobs``), all come due, are staged by
  ``stage_jobs`` batches of the default ``stage_limit`` until a batch comes back short (what the
  stager does), on each schema in turn, ``STAGE_ROUNDS`` rounds. Reported: the seconds (median,
  p95, range) of each side. Target: 100,000 in <= 2 s on the big one.
* pruning: the default retention (``prune_max_age`` a day, ``prune_limit`` per call) run by
  ``prune_all`` as the pruner does, on the big schema: half the old jobs while nothing else runs,
  the other half while one connection fetches and completes jobs as fast as it can on the same
  table (a fresh backlog of ``--jobs``). Reported: rows deleted per second in each phase, the
  completions per second during the second. Targets: >= 5,000/s in both (the completions a busy
  node writes), and faster than the completions that arrive meanwhile (the completed count stays
  bounded).
"""

from __future__ import annotations

import asyncio
import statistics
import time

from common import Figures, Settings, alternate, fresh_app, percentile
from loading import Statement, load_without_indexes, run_on

from conveyor import Conveyor, JobState, Pruned
from conveyor._runtime.duties import prune_all
from conveyor.acks import Ack
from conveyor.engine.postgres import PostgresEngine
from conveyor.settings import Settings as NodeSettings

HISTORY_ROWS = 10_000_000
AVAILABLE_ROWS = 100_000
#: Completed jobs of the history that ended more than a day ago: what one prune has to delete.
PRUNABLE = 1_000_000
BATCH = 100
CALLS = 300
STAGE_ROUNDS = 3
TARGET_RATIO = 1.2
TARGET_STAGE_S = 2.0
TARGET_PRUNE_PER_S = 5_000

#: Completed jobs: g in 1..rows; the first %(old)s ended a day and an hour ago (over an hour), the
#: others over the last 23 hours.
HISTORY = """
INSERT INTO {table} (state, queue, worker, args, attempt, max_attempts, attempted_by,
                     inserted_at, scheduled_at, attempted_at, completed_at)
SELECT 'completed', 'default', 'bench_jobs.noop', jsonb_build_object('n', g), 1, 20,
       ARRAY['bench-node', 'bench-producer'], t.at - interval '2 s', t.at - interval '2 s',
       t.at - interval '1 s', t.at
FROM generate_series(1, %(rows)s::bigint) AS g,
     LATERAL (SELECT timezone('UTC', now()) - CASE
         WHEN g <= %(old)s THEN make_interval(secs => 86400 + 3600 + 3600.0 * (%(old)s - g) / %(old)s)
         ELSE make_interval(secs => 82800.0 * (%(rows)s - g) / greatest(%(rows)s - %(old)s, 1))
     END) AS t(at)
"""
#: The backlog: available jobs of the default queue, over the last ten minutes.
AVAILABLE = """
INSERT INTO {table} (state, queue, worker, args, inserted_at, scheduled_at)
SELECT 'available', 'default', 'bench_jobs.noop', jsonb_build_object('n', g), t.at, t.at
FROM generate_series(1, %(count)s) AS g,
     LATERAL (SELECT timezone('UTC', now()) - make_interval(secs => 600.0 * g / %(count)s)) AS t(at)
"""
#: Scheduled jobs that came due over the last minute, in a queue of their own.
SCHEDULED = """
INSERT INTO {table} (state, queue, worker, args, inserted_at, scheduled_at)
SELECT 'scheduled', 'staged', 'bench_jobs.noop', jsonb_build_object('n', g), t.at - interval '1 h', t.at
FROM generate_series(1, %(count)s) AS g,
     LATERAL (SELECT timezone('UTC', now()) - make_interval(secs => 60.0 * g / %(count)s)) AS t(at)
"""
STAGED_AWAY = "DELETE FROM {table} WHERE queue = 'staged'"
ANALYZE = "VACUUM (ANALYZE) {table}"


async def fetch_and_ack(engine: PostgresEngine, call: int) -> float:
    """Seconds to claim ``BATCH`` jobs and complete them all."""
    started = time.perf_counter()
    jobs = await engine.fetch_jobs("default", BATCH, node="bench", producer=f"bench-{call}")
    await engine.ack_jobs([Ack(j.id, j.attempt, JobState.COMPLETED) for j in jobs])
    took = time.perf_counter() - started
    if len(jobs) != BATCH:
        raise AssertionError(f"fetched {len(jobs)} jobs, not {BATCH}: the backlog ran out")
    return took


async def stage_all(engine: PostgresEngine, limit: int) -> tuple[int, float]:
    """Stage every due job as the stager does (batches of ``limit`` until one is short): how many,
    and the seconds it took."""
    staged = 0
    started = time.perf_counter()
    while True:
        batch = sum((await engine.stage_jobs(limit)).values())
        staged += batch
        if batch < limit:
            return staged, time.perf_counter() - started


def summary(name: str, seconds: list[float], scale: float = 1000.0, unit: str = "ms") -> Figures:
    return {
        f"{name}_median_{unit}": round(statistics.median(seconds) * scale, 3),
        f"{name}_p95_{unit}": round(percentile(seconds, 0.95) * scale, 3),
        f"{name}_range_{unit}": [round(min(seconds) * scale, 3), round(max(seconds) * scale, 3)],
    }


async def engines(*apps: Conveyor) -> list[PostgresEngine]:
    found = []
    for app in apps:
        engine = await app.engine()
        assert isinstance(engine, PostgresEngine)
        found.append(engine)
    return found


async def large_tables(settings: Settings) -> Figures:
    if settings.engine != "postgres":
        raise RuntimeError("large-tables runs on PostgreSQL only (it writes the table in SQL)")
    history = settings.history if settings.history is not None else HISTORY_ROWS
    available = settings.job_count(AVAILABLE_ROWS)
    node = NodeSettings()
    figures: Figures = {"history": history, "available": available, "batch": BATCH}
    async with fresh_app(settings, pool_size=4) as big_app, fresh_app(settings, pool_size=4) as empty_app:
        big, empty = await engines(big_app, empty_app)
        old = min(PRUNABLE, history)
        load: list[Statement] = [(HISTORY, {"rows": history, "old": old})] if history else []
        figures |= await load_without_indexes(big, [*load, (AVAILABLE, {"count": available})])
        await load_without_indexes(empty, [(AVAILABLE, {"count": available})])
        sides = {"big": big, "empty": empty}

        timings: dict[str, list[float]] = {name: [] for name in sides}
        calls = min(CALLS, available // BATCH)
        for call in range(calls):
            order = alternate(call, list(sides))
            for name in order:
                timings[name].append(await fetch_and_ack(sides[name], call))
        for name, taken in timings.items():
            figures |= summary(f"fetch_ack_{name}", taken)
        figures["fetch_ack_ratio"] = round(
            statistics.median(timings["big"]) / statistics.median(timings["empty"]), 3
        )

        staging: dict[str, list[float]] = {name: [] for name in sides}
        for round_ in range(STAGE_ROUNDS):
            order = alternate(round_, list(sides))
            for name in order:
                await run_on(sides[name], [(SCHEDULED, {"count": available}), (ANALYZE, {})])
            for name in order:
                count, seconds = await stage_all(sides[name], node.stage_limit)
                if count != available:
                    raise AssertionError(f"{name}: staged {count} jobs, not {available}")
                staging[name].append(seconds)
            for name in order:
                await run_on(sides[name], [(STAGED_AWAY, {})])
        for name, taken in staging.items():
            figures |= summary(f"stage_{name}", taken, scale=1.0, unit="s")
        figures["stage_limit"] = node.stage_limit

        figures |= await pruning(big, node, old, available)
    prune_rates = (figures["prune_rows_per_s"], figures["prune_during_completions_rows_per_s"])
    figures["targets_met"] = {
        "fetch_ack_ratio": figures["fetch_ack_ratio"] <= TARGET_RATIO,
        "stage_big": statistics.median(staging["big"]) <= TARGET_STAGE_S,
        "prune_rows_per_s": min(prune_rates) >= TARGET_PRUNE_PER_S,
        "prune_outpaces_completions": prune_rates[1] >= figures["completions_per_s_during_prune"],
    }
    return figures


async def prune_phase(
    engine: PostgresEngine, node: NodeSettings, name: str, *, stop_at: int | None = None
) -> tuple[Figures, int]:
    """Prune the big schema with the default policy as the pruner does (``prune_all``), until a
    call comes back short or (``stop_at``) that many rows are gone: its figures, and the count."""
    batches: list[float] = []
    last = [time.perf_counter()]
    total = [0]

    def lap(pruned: Pruned) -> None:
        now = time.perf_counter()
        batches.append(now - last[0])
        last[0] = now
        total[0] = pruned.count

    started = time.perf_counter()
    pruned = await prune_all(
        engine,
        node.retention,
        limit=node.prune_limit,
        on_batch=lap,
        going_on=lambda: stop_at is None or total[0] < stop_at,
    )
    seconds = time.perf_counter() - started
    figures = {
        f"{name}_pruned": pruned.count,
        f"{name}_s": round(seconds, 2),
        f"{name}_rows_per_s": round(pruned.count / seconds, 1) if seconds else 0.0,
        **summary(f"{name}_call", batches),
    }
    return figures, pruned.count


async def completions(engine: PostgresEngine, going: asyncio.Event) -> tuple[int, float]:
    """Fetch and complete batches of ``BATCH`` jobs while ``going`` is set: how many, in how long."""
    done = 0
    started = time.perf_counter()
    call = 0
    while going.is_set():
        jobs = await engine.fetch_jobs("default", BATCH, node="bench", producer=f"bench-c{call}")
        if not jobs:
            break
        await engine.ack_jobs([Ack(j.id, j.attempt, JobState.COMPLETED) for j in jobs])
        done += len(jobs)
        call += 1
    return done, time.perf_counter() - started


async def pruning(engine: PostgresEngine, node: NodeSettings, prunable: int, backlog: int) -> Figures:
    """Half the old jobs pruned alone, the other half while completions arrive on the same table
    as fast as one connection fetches and acks them (a backlog of ``backlog`` more jobs)."""
    figures, alone = await prune_phase(engine, node, "prune", stop_at=prunable // 2)
    await run_on(engine, [(AVAILABLE, {"count": backlog})])
    going = asyncio.Event()
    going.set()
    completing = asyncio.create_task(completions(engine, going))
    try:
        during, rest = await prune_phase(engine, node, "prune_during_completions")
    finally:
        going.clear()
        completed, seconds = await completing
    figures |= during
    figures["completions_per_s_during_prune"] = round(completed / seconds, 1) if seconds else 0.0
    figures["pruned_total"] = alone + rest
    figures["prune_limit"] = node.prune_limit
    return figures
