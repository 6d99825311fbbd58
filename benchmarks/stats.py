"""Counts and stats scenarios (PostgreSQL): what operators' questions cost on a big table, and what
the index behind the failure counts costs the hot path.

``stats``: a table of ``--history`` (default 10,000,000) completed jobs spread over the last day
(the default pruning age), 2 % of them retried once, plus 10,000 discarded and 5,000 cancelled,
``--jobs`` (default 100,000) available jobs in three queues and a thousand retryable ones. It is
built by ``INSERT ... SELECT generate_series`` without the secondary indexes, which are created
afterwards; everything older than an hour is then vacuumed (as autovacuum would have long done),
the last hour and the waiting jobs are not (their pages are not all-visible, as on a live table),
and the table is analyzed. Then each call is timed ``ROUNDS`` times, the calls interleaved within a
round: ``count_jobs`` with typical filters, ``queue_counts``, ``job_stats`` (the last hour by
minute, one queue's, the last day by hour). Reported per call: the median and the range in ms,
the figures returned (so a wrong answer shows), how far ``queue_counts``' estimates are from the
exact counts, and which medians are within 100 ms. A reference (the server counting a series of
200,000 numbers, no table involved) is timed in the same rounds: the machine is shared, and its
median, compared between runs, says how loaded it was.

``stats-write-cost``: fetch and ack (demand 20; 98 % complete, 2 % fail and wait to be retried) of
``--jobs`` (default 5,000) jobs per round on two schemas, one with migration 9's index of failed jobs
and one without it, a batch on one then a batch on the other: jobs per second of each (fetch and ack
time only), medians and ranges over the rounds, and their ratio.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
from common import Figures, Settings, fresh_app
from loading import Statement, load_without_indexes, run_on

from conveyor import Conveyor, JobCount, JobRequest, JobState, QueueCounts
from conveyor.acks import Ack
from conveyor.engine._sqlfiles import quote_identifier
from conveyor.engine.postgres import PostgresEngine

HISTORY_ROWS = 10_000_000
AVAILABLE_ROWS = 100_000
ROUNDS = 11
#: The exact count of every completed job reads them all: a few rounds say enough.
SLOW_ROUNDS = 3
TARGET_MS = 100.0
QUEUES = (
    "ARRAY['default', 'default', 'default', 'mail', 'mail', 'reports', 'billing', 'search', 'media', "
    "'exports']"
)
WORKERS = (
    "ARRAY['app.mail.SendEmail', 'app.mail.ResendEmail', 'app.reports.Build', 'app.billing.Charge', "
    "'app.search.Index']"
)
#: A completed job of the history: g in 1..rows, spread evenly over the day before now; one in 50
#: failed once, 30 seconds before it completed.
HISTORY = f"""
INSERT INTO {{table}} (state, queue, worker, args, attempt, max_attempts, errors, attempted_by,
                       inserted_at, scheduled_at, attempted_at, completed_at)
SELECT 'completed', ({QUEUES})[1 + g %% 10], ({WORKERS})[1 + (g / 10) %% 5], jsonb_build_object('n', g),
       CASE WHEN g %% 50 = 0 THEN 2 ELSE 1 END, 20,
       CASE WHEN g %% 50 = 0 THEN jsonb_build_array(jsonb_build_object(
           'attempt', 1, 'error', 'boom',
           'at', to_char(t.at - interval '30 s', 'YYYY-MM-DD"T"HH24:MI:SS.US"+00:00"')))
       ELSE '[]' END,
       ARRAY['bench-node', 'bench-producer'], t.at - interval '1 min', t.at - interval '1 min',
       t.at - interval '1 s', t.at
FROM generate_series(%(first)s::bigint, %(last)s::bigint) AS g,
     LATERAL (
         SELECT timezone('UTC', now()) - make_interval(secs => 86400.0 * (%(rows)s - g) / %(rows)s)
     ) AS t(at)
"""
#: Jobs that ended otherwise over the day (discarded after 20 failures, cancelled while waiting).
ENDED = f"""
INSERT INTO {{table}} (state, queue, worker, attempt, max_attempts, errors, inserted_at, scheduled_at,
                       attempted_at, discarded_at, cancelled_at)
SELECT s.state::{{enum}}, ({QUEUES})[1 + g %% 10], ({WORKERS})[1 + g %% 5],
       CASE WHEN s.state = 'discarded' THEN 20 ELSE 0 END, 20,
       CASE WHEN s.state = 'discarded' THEN jsonb_build_array(jsonb_build_object(
           'attempt', 20, 'error', 'boom', 'at', to_char(t.at, 'YYYY-MM-DD"T"HH24:MI:SS.US"+00:00"')))
       ELSE '[]' END,
       t.at - interval '1 h', t.at - interval '1 h',
       CASE WHEN s.state = 'discarded' THEN t.at END,
       CASE WHEN s.state = 'discarded' THEN t.at END, CASE WHEN s.state = 'cancelled' THEN t.at END
FROM (VALUES ('discarded', 10000), ('cancelled', 5000)) AS s(state, n),
     LATERAL generate_series(1, s.n) AS g,
     LATERAL (SELECT timezone('UTC', now()) - make_interval(secs => 86400.0 * g / s.n)) AS t(at)
"""
#: The waiting jobs: available in three queues over the last ten minutes, retrying ones.
WAITING = f"""
INSERT INTO {{table}} (state, queue, worker, args, inserted_at, scheduled_at)
SELECT 'available', (ARRAY['default', 'mail', 'reports'])[1 + g %% 3], ({WORKERS})[1 + g %% 5],
       jsonb_build_object('n', g), t.at, t.at
FROM generate_series(1, %(available)s) AS g,
     LATERAL (SELECT timezone('UTC', now()) - make_interval(secs => 600.0 * g / %(available)s)) AS t(at);
INSERT INTO {{table}} (state, queue, worker, attempt, errors, attempted_at, scheduled_at)
SELECT 'retryable', ({QUEUES})[1 + g %% 10], ({WORKERS})[1 + g %% 5], 1,
       jsonb_build_array(jsonb_build_object('attempt', 1, 'error', 'boom',
           'at', to_char(t.at, 'YYYY-MM-DD"T"HH24:MI:SS.US"+00:00"'))),
       t.at - interval '1 s', t.at + interval '10 min'
FROM generate_series(1, 1000) AS g,
     LATERAL (SELECT timezone('UTC', now()) - make_interval(secs => 3600.0 * g / 1000)) AS t(at)
"""


async def build_table(engine: PostgresEngine, history: int, available: int) -> dict[str, float]:
    """The table of the ``stats`` scenario; the seconds each step took."""
    recent = max(1, history // 24)  # the last hour of a day's history
    old = {"first": 1, "last": history - recent, "rows": history}
    took = await load_without_indexes(engine, [(HISTORY, old), (ENDED, {})])
    started = time.perf_counter()
    fresh: list[Statement] = [(HISTORY, {"first": history - recent + 1, "last": history, "rows": history})]
    fresh += [(statement, {"available": available}) for statement in WAITING.split(";")]
    await run_on(engine, [*fresh, ("ANALYZE {table}", {})])
    return {**took, "recent_s": round(time.perf_counter() - started, 1)}


async def reference(engine: PostgresEngine) -> int:
    async with engine.pool.connection() as conn:
        cur = await conn.execute("SELECT count(*) FROM generate_series(1, 200000)")
        row = await cur.fetchone()
        assert row is not None
        return int(row[0])


def describe(value: Any) -> Any:
    """What a call returned, in a few numbers (a wrong answer shows in the report)."""
    if isinstance(value, int):
        return value
    if isinstance(value, JobCount):
        return {"count": value.count, "estimated": value.estimated}
    if isinstance(value, list):  # queue_counts
        estimated = sum(len(c.estimated) for c in value)
        return {"queues": len(value), "jobs": sum(c.total for c in value), "estimated_pairs": estimated}
    return {  # job_stats
        "completed": value.completed,
        "retried": value.retried,
        "discarded": value.discarded,
        "estimated_buckets": sum(b.estimated for b in value.buckets),
    }


def counter(
    app: Conveyor, filters: dict[str, Any], *, estimate: bool = False
) -> Callable[[], Awaitable[Any]]:
    """A ``count_jobs`` call of ``filters``, exact or (``estimate``) maybe estimated."""
    if estimate:
        return lambda: app.count_jobs(estimate=True, **filters)
    return lambda: app.count_jobs(**filters)


async def stats(settings: Settings) -> Figures:
    if settings.engine != "postgres":
        raise RuntimeError("stats runs on PostgreSQL only (it writes the table in SQL)")
    history = settings.history if settings.history is not None else HISTORY_ROWS
    available = settings.job_count(AVAILABLE_ROWS)
    async with fresh_app(settings, pool_size=2) as app:
        engine = await app.engine()
        assert isinstance(engine, PostgresEngine)
        built = await build_table(engine, history, available)
        now = datetime.now(UTC)
        counts: dict[str, dict[str, Any]] = {
            "count_available_in_queue": {"states": "available", "queues": "mail"},
            "count_available_by_worker": {"states": "available", "worker_suffix": "SendEmail"},
            "count_retryable_in_queue": {"states": "retryable", "queues": "billing"},
            "count_discarded_last_hour": {"states": "discarded", "attempted_after": now - timedelta(hours=1)},
            "count_completed_last_5_min_by_worker": {
                "completed_after": now - timedelta(minutes=5),
                "worker_suffix": "Build",
            },
            "count_completed_last_hour": {"completed_after": now - timedelta(hours=1)},
        }
        calls: dict[str, Callable[[], Awaitable[Any]]] = {
            **{name: counter(app, filters) for name, filters in counts.items()},
            # The same counts with estimate=True: exact up to 10,000 matches, the planner's above.
            **{f"estimate_{name[6:]}": counter(app, f, estimate=True) for name, f in counts.items()},
            "estimate_all_completed": counter(app, {"states": "completed"}, estimate=True),
            "queue_counts": app.queue_counts,
            "job_stats_hour_by_minute": app.job_stats,
            "job_stats_hour_one_queue": lambda: app.job_stats(queues="mail"),
            "job_stats_day_by_hour": lambda: app.job_stats(window=86400, bucket=3600),
            # No Conveyor call: how fast the database server runs a fixed piece of work right now.
            "reference_count_200k_series": lambda: reference(engine),
        }
        slow = {"count_all_completed": counter(app, {"states": "completed"})}
        timings: dict[str, list[float]] = {name: [] for name in [*calls, *slow]}
        answers: dict[str, Any] = {}
        for round_ in range(ROUNDS):
            chosen = {**calls, **(slow if round_ < SLOW_ROUNDS else {})}
            for name, call in chosen.items():
                started = time.perf_counter()
                answers[name] = await call()
                timings[name].append((time.perf_counter() - started) * 1000)
        error = await estimate_error(engine, answers["queue_counts"])
    figures: Figures = {"history": history, "available": available, "rounds": ROUNDS, **built}
    within: list[str] = []
    reference_ms = statistics.median(timings["reference_count_200k_series"])
    for name, taken in timings.items():
        median = statistics.median(taken)
        figures[f"{name}_ms"] = round(median, 1)
        figures[f"{name}_per_reference"] = round(median / reference_ms, 2)
        figures[f"{name}_range_ms"] = [round(min(taken), 1), round(max(taken), 1)]
        figures[f"{name}_returned"] = describe(answers[name])
        if median <= TARGET_MS and not name.startswith("reference"):
            within.append(name)
    figures["queue_counts_estimates_off_by"] = error
    figures["count_estimates_off_by"] = {
        name: round(found.count / max(1, answers[f"count_{name[9:]}"]), 3)
        for name, found in answers.items()
        if name.startswith("estimate_") and found.estimated
    }
    figures["within_100_ms"] = within
    return figures


async def estimate_error(engine: PostgresEngine, counted: list[QueueCounts]) -> list[float]:
    """How far ``queue_counts``' estimates are from the exact counts (one GROUP BY over the table,
    after the timing): the smallest and largest ratio of estimate to truth, as [low, high]."""
    table = f"{quote_identifier(engine.prefix)}.oban_jobs"
    async with await psycopg.AsyncConnection.connect(engine.dsn, autocommit=True) as conn:
        cur = await conn.execute(f"SELECT queue, state::text, count(*) FROM {table} GROUP BY 1, 2".encode())
        exact = {(queue, state): count for queue, state, count in await cur.fetchall()}
    ratios = [c.count(state) / exact[(c.queue, state.value)] for c in counted for state in c.estimated]
    return [round(min(ratios), 3), round(max(ratios), 3)] if ratios else []


# -- what migration 9's index costs fetch and ack ------------------------------------------------------
WRITE_JOBS = 5_000
WRITE_ROUNDS = 5
DEMAND = 20


def error_of(attempt: int) -> dict[str, Any]:
    return {"attempt": attempt, "at": datetime.now(UTC).isoformat(), "error": "boom"}


async def claim_and_ack(engine: PostgresEngine) -> tuple[int, float]:
    """One fetch of ``DEMAND`` jobs and the ack of all of them (every 50th fails and waits an hour):
    how many, and the seconds both took."""
    started = time.perf_counter()
    claimed = await engine.fetch_jobs("default", DEMAND, node="bench", producer="bench-producer")
    acks = [
        Ack(j.id, j.attempt, JobState.RETRYABLE, schedule_in=3600, error=error_of(j.attempt))
        if j.id % 50 == 0
        else Ack(j.id, j.attempt, JobState.COMPLETED)
        for j in claimed
    ]
    if acks:
        await engine.ack_jobs(acks)
    return len(claimed), time.perf_counter() - started


async def stats_write_cost(settings: Settings) -> Figures:
    """Two schemas side by side, one without the index; each round enqueues ``jobs`` in both, then
    claims and acks them a batch here, a batch there, so a change in the machine's load touches both
    alike. Jobs per second of each side, per round."""
    if settings.engine != "postgres":
        raise RuntimeError("stats-write-cost runs on PostgreSQL only (it drops the index)")
    jobs = settings.job_count(WRITE_JOBS)
    rates: dict[str, list[float]] = {"with_index": [], "without_index": []}
    async with fresh_app(settings, pool_size=2) as indexed, fresh_app(settings, pool_size=2) as plain:
        sides: dict[str, tuple[Conveyor, PostgresEngine]] = {}
        for name, app in (("with_index", indexed), ("without_index", plain)):
            engine = await app.engine()
            assert isinstance(engine, PostgresEngine)
            sides[name] = (app, engine)
        plain_engine = sides["without_index"][1]
        async with await psycopg.AsyncConnection.connect(plain_engine.dsn, autocommit=True) as conn:
            index = f"{quote_identifier(plain_engine.prefix)}.conveyor_failed_jobs_index"
            await conn.execute(f"DROP INDEX {index}".encode())
        for _ in range(WRITE_ROUNDS):
            took = dict.fromkeys(sides, 0.0)
            done = dict.fromkeys(sides, 0)
            for app, _engine in sides.values():
                await app.enqueue_many(
                    JobRequest(worker="benchmarks.jobs.noop", args={"n": n}) for n in range(jobs)
                )
            while any(done[name] < jobs for name in sides):
                for name, (_app, engine) in sides.items():
                    count, seconds = await claim_and_ack(engine)
                    done[name] += count
                    took[name] += seconds
            for name in sides:
                rates[name].append(done[name] / took[name])
    medians = {name: statistics.median(values) for name, values in rates.items()}
    return {
        "jobs": jobs,
        "rounds": WRITE_ROUNDS,
        "failing": "1 in 50",
        **{f"{name}_jobs_per_s": round(medians[name], 1) for name in rates},
        **{f"{name}_range": [round(min(v), 1), round(max(v), 1)] for name, v in rates.items()},
        "ratio": round(medians["with_index"] / medians["without_index"], 3),
    }
