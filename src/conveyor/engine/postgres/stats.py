"""Counts and statistics on PostgreSQL: ``count_jobs``, ``queue_counts``, ``job_stats``.

These statements answer operators on tables of millions of rows, so each is bounded:

* ``count_jobs`` is exact; it is planned with its values (never prepared) so the index that fits
  the criteria serves it, and its cost is that of the matching rows.
* ``estimate_jobs`` (``count_jobs(estimate=True)``) asks the planner first (``EXPLAIN`` of the
  filter: a millisecond whatever the table's size); above the limit it returns that estimate,
  marked. Below, it counts, no further than one past the limit and for ``EXACT_COUNT_MS`` at most.
* ``queue_counts`` counts from the fetch index up to ``COUNT_BUDGET`` jobs per call, the smallest
  (queue, state) pairs first; larger pairs are the planner's estimates (``queue_counts.sql``).
* ``job_stats`` reads at most ``SAMPLE_BUDGET`` finished jobs per call, spread over pieces of the
  buckets, from the partial indexes on completed_at, discarded_at and cancelled_at; a piece holding
  more is extrapolated from the part of it they cover. Failed attempts are read through migration
  9's index of the jobs that failed, at most ``RETRY_BUDGET`` of them per call, spread over
  ``KEY_RANGES`` ranges of their keys (``stats_retried.sql``); a range holding more stands for the
  rest of it by the ones read.

Each runs in a transaction of its own with JIT compilation off: these plans are cheap to run but
their cost estimates (a count of millions, a sample per bucket) pass ``jit_above_cost``, and
compiling would take most of the time (``docs/decisions/postgres-jit-off.md``).
"""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg

from conveyor.engine._stats import FailureTally
from conveyor.engine.postgres.core import PostgresCore
from conveyor.engine.postgres.jobs import filter_params
from conveyor.engine.postgres.rows import naive_utc
from conveyor.filters import JobFilter
from conveyor.job import JobState
from conveyor.stats import JobCount, JobStats, QueueCounts, StatsQuery, build_stats, countable

#: Jobs ``queue_counts`` counts one by one per call at most (about 50 ms on a 2-core machine when
#: none of their pages is all-visible yet); the pairs beyond it are estimated.
COUNT_BUDGET = 50_000
#: How long ``estimate_jobs`` lets the exact count of a filter the planner expects to match few jobs
#: run (ms) before it gives the estimate instead, so the whole call stays within 100 ms: a
#: criterion the planner estimates poorly (a JSON containment: a fixed share of the rows) may have
#: to read many more rows than it expects (10M rows for a ``args_contains`` matching 2).
EXACT_COUNT_MS = 80
#: Finished jobs ``job_stats`` reads per call at most, shared evenly by the buckets.
SAMPLE_BUDGET = 20_000
#: Each bucket is sampled in this many pieces of time (fewer when there are many buckets, so that
#: there are at most ``PARTS_LIMIT`` pieces): a queue that stopped or started in the middle of a
#: bucket is then extrapolated from the piece it stopped in, not from the bucket's first jobs.
PARTS = 4
PARTS_LIMIT = 240
#: A bucket reads at least this many jobs before it extrapolates, however many buckets there are.
MIN_SAMPLE = 10
#: Jobs that may hold failures ``job_stats`` reads per call at most, shared evenly by the ranges of
#: their keys (reading one costs about 10 µs: its row, its errors).
RETRY_BUDGET = 5_000
#: The ranges the keys of the window are cut into, each sampled on its own (see ``_key_ranges``).
KEY_RANGES = 200
#: How far before the window failed jobs are looked for: a node's clock ahead of the database's.
CLOCK_SLACK = timedelta(minutes=10)
CLOCK = "SELECT coalesce(%(now)s::timestamp, timezone('UTC', now()))"
#: The final states ``job_stats`` counts, by the column that times each.
FINISHED = {
    JobState.COMPLETED: "completed_at",
    JobState.DISCARDED: "discarded_at",
    JobState.CANCELLED: "cancelled_at",
}
#: How the errors column of each layout is expanded into its entries (see ``schema.ERRORS_APPEND``).
ERROR_ENTRIES = {"jsonb": "error_entries_jsonb", "jsonb[]": "error_entries_array"}


class PostgresStats(PostgresCore):
    """``count_jobs``, ``estimate_jobs``, ``queue_counts``, ``job_stats``."""

    async def _read(self, statement: str, params: dict[str, Any]) -> list[Any]:
        """The rows of one statement, planned with its values and run without JIT (see above)."""
        async with self.pool.connection() as conn, conn.transaction():
            await conn.execute("SET LOCAL jit = off", prepare=False)
            cur = await conn.execute(statement.encode(), params, prepare=False)
            return await cur.fetchall()

    async def count_jobs(self, criteria: JobFilter) -> int:
        countable(criteria)
        statement = self.sql.compose("count_jobs", filter="job_filter")
        rows = await self._read(statement, filter_params(criteria))
        return int(rows[0][0])

    async def estimate_jobs(self, criteria: JobFilter, *, exact_up_to: int) -> JobCount:
        countable(criteria)
        params = filter_params(criteria)
        estimate = 0
        try:
            async with self.pool.connection() as conn, conn.transaction():
                await conn.execute("SET LOCAL jit = off", prepare=False)
                statement = self.sql.compose("estimate_jobs", filter="job_filter")
                cur = await conn.execute(statement.encode(), params, prepare=False)
                row = await cur.fetchone()
                assert row is not None
                estimate = _plan_rows(row[0])
                if estimate > exact_up_to:
                    return JobCount(estimate, estimated=True)
                # The planner expects few: count them, but no further than one past the limit, and
                # for no longer than an estimate is worth waiting for.
                await conn.execute(f"SET LOCAL statement_timeout = {EXACT_COUNT_MS}", prepare=False)
                statement = self.sql.compose("count_jobs_capped", filter="job_filter")
                params["cap"] = exact_up_to + 1
                cur = await conn.execute(statement.encode(), params, prepare=False)
                row = await cur.fetchone()
                assert row is not None
                counted = int(row[0])
        except psycopg.errors.QueryCanceled:
            # Far more rows to read than the planner expected (a criterion it cannot estimate).
            return JobCount(estimate, estimated=True)
        if counted <= exact_up_to:
            return JobCount(counted)
        return JobCount(max(estimate, counted), estimated=True)

    async def queue_counts(self, *, now: datetime | None = None) -> list[QueueCounts]:
        rows = await self._read(self.sql["queue_counts"], {"now": naive_utc(now), "budget": COUNT_BUDGET})
        found: dict[str, dict[str, Any]] = {}
        for state, queue, estimate, counted, oldest, measured in rows:
            figures = found.setdefault(queue, {"queue": queue, "measured_at": measured, "estimated": set()})
            if counted is not None and counted <= COUNT_BUDGET:
                figures[state] = int(counted)
            else:  # not counted, or more than the budget: the estimate, never below what was seen
                figures[state] = max(int(estimate), int(counted or 0))
                figures["estimated"].add(JobState(state))
            if oldest is not None:
                figures["oldest_available_at"] = oldest
        return [QueueCounts(**figures) for _, figures in sorted(found.items())]

    async def job_stats(self, query: StatsQuery, *, now: datetime | None = None) -> JobStats:
        async with self.pool.connection() as conn, conn.transaction():
            await conn.execute("SET LOCAL jit = off", prepare=False)
            cur = await conn.execute(CLOCK, {"now": naive_utc(now)}, prepare=False)
            row = await cur.fetchone()
            assert row is not None
            bounds: list[datetime] = query.bounds(row[0])  # one clock for both statements
            queues: dict[str, Any] = {"queues": list(query.queues) if query.queues else None}
            parts = max(1, min(PARTS, PARTS_LIMIT // query.bucket_count))
            pieces = _split(bounds, parts)
            cap = max(MIN_SAMPLE, SAMPLE_BUDGET // (len(pieces) - 1))
            params: dict[str, Any] = {"lows": pieces[:-1], "highs": pieces[1:], "cap": cap, **queues}
            cur = await conn.execute(self._finished_statement(query).encode(), params, prepare=False)
            finished = await cur.fetchall()
            lows = _key_ranges(bounds[0] - CLOCK_SLACK, bounds[-1])
            retry_cap = max(MIN_SAMPLE, RETRY_BUDGET // len(lows))
            params = {"lows": lows, "highs": [*lows[1:], None], "cap": retry_cap, **queues}
            cur = await conn.execute(self._retried_statement(query).encode(), params, prepare=False)
            failures = await cur.fetchall()
        figures: list[dict[str, Any]] = [
            {"completed": 0, "discarded": 0, "cancelled": 0, "retried": 0, "estimated": False}
            for _ in range(query.bucket_count)
        ]
        for kind, piece, seen, matched, before_last, covered, width in finished:
            count, estimated = _extrapolated(seen, matched, before_last, covered, width, cap)
            bucket = figures[piece // parts]
            bucket[kind] += count
            bucket["estimated"] = bucket["estimated"] or estimated
        tally = FailureTally(bounds)
        for _, seen, before_last, at, covered, width, total in failures:
            tally.add(at, _weight(seen, before_last, covered, width, total, retry_cap))
        for bucket, count in enumerate(tally.counts()):
            figures[bucket]["retried"] = count
            figures[bucket]["estimated"] = figures[bucket]["estimated"] or tally.estimated[bucket]
        return build_stats(query, bounds[-1].replace(tzinfo=UTC), figures)

    def _finished_statement(self, query: StatsQuery) -> str:
        matches = "j.queue = ANY(%(queues)s::text[])" if query.queues else "true"
        kinds = "\nUNION ALL\n".join(
            self.sql["stats_finished_kind"]
            .strip()
            .replace("{state}", state.value)
            .replace("{column}", column)
            .replace("{matches}", matches)
            for state, column in FINISHED.items()
        )
        return self.sql["stats_finished"].replace("{kinds}", kinds)

    def _retried_statement(self, query: StatsQuery) -> str:
        statement = self.sql.compose(
            "stats_retried",
            error_entries=ERROR_ENTRIES[self.errors_type or "jsonb"],
            failed_jobs="failed_jobs",
            failed_key="failed_key",
        )
        return statement.replace("{queues}", "queue = ANY(%(queues)s::text[])" if query.queues else "true")


def _plan_rows(plan: Any) -> int:
    """The row estimate of the top node of an ``EXPLAIN (FORMAT JSON)`` result."""
    return max(0, round(float(plan[0]["Plan"]["Plan Rows"])))


def _extrapolated(
    seen: int, matched: int, before_last: int, covered: float, width: float, cap: int
) -> tuple[int, bool]:
    """A bucket's count from its sample: exact when it read every job of the bucket (``seen`` <=
    ``cap``). Else (estimated) the matching jobs before the last one read, which the sample holds
    all of, scaled from the ``covered`` seconds they span to the bucket's ``width``; never less
    than the matching jobs read, which are there for sure (one ack may write a whole sample at one
    instant, leaving nothing before it to scale)."""
    if seen <= cap:
        return int(matched), False
    scaled = round(before_last * width / covered) if covered > 0 else 0
    return max(scaled, int(matched)), True


def _split(bounds: list[datetime], parts: int) -> list[datetime]:
    """The bucket ``bounds`` with each bucket cut into ``parts`` equal pieces."""
    pieces = [
        low + (high - low) * k / parts for low, high in itertools.pairwise(bounds) for k in range(parts)
    ]
    return [*pieces, bounds[-1]]


def _key_ranges(start: datetime, end: datetime) -> list[datetime]:
    """Where the ranges of failed jobs' keys begin: ``KEY_RANGES`` equal ones from ``start`` to
    ``end``, then one after ``end``. A range read in part stands for the rest of it by the entries
    of its earliest keys, whose failures come a little before the keys (a backoff, a run): ranges
    much shorter than the window keep that shift from moving failures between buckets."""
    step = (end - start) / KEY_RANGES
    return [start + step * i for i in range(KEY_RANGES)] + [end]


def _weight(
    seen: int, before_last: bool, covered: float | None, width: float | None, total: int | None, cap: int
) -> float:
    """How many failures one errors entry of a sampled range of keys stands for. A range read
    whole: 1. A range of time read in part: its entries before the last key read (all of which
    the sample holds) stand for the range's ``width`` over the ``covered`` seconds they span, the
    others for none; when the whole sample shares one key, each entry stands for itself. The open
    range after the window read in part: its ``total`` jobs over those read."""
    if seen <= cap:
        return 1.0
    if width is None:
        return (total or seen) / seen
    if not covered:
        return 1.0
    return width / covered if before_last else 0.0
