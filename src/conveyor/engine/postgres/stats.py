"""Counts and statistics on PostgreSQL: ``count_jobs``, ``queue_counts``, ``job_stats``.

These statements answer operators on tables of millions of rows, so each is bounded:

* ``count_jobs`` is exact; it is planned with its values (never prepared) so the index that fits
  the criteria serves it, and its cost is that of the matching rows.
* ``queue_counts`` counts from the fetch index up to ``COUNT_BUDGET`` jobs per call, the smallest
  (queue, state) pairs first; larger pairs are the planner's estimates (``queue_counts.sql``).
* ``job_stats`` reads at most ``SAMPLE_BUDGET`` finished jobs per call, spread over the buckets, from
  the partial indexes on completed_at, discarded_at and cancelled_at; a bucket holding more is
  extrapolated from the part of it they cover. Failed attempts are exact, read through migration
  9's index of the jobs that failed (``stats_retried.sql``).

Each runs in a transaction of its own with JIT compilation off: these plans are cheap to run but
their cost estimates (a count of millions, a sample per bucket) pass ``jit_above_cost``, and
compiling took 0.9 s of a 1.1 s ``queue_counts`` when measured.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from conveyor.engine.postgres.core import PostgresCore
from conveyor.engine.postgres.jobs import filter_params
from conveyor.engine.postgres.rows import naive_utc
from conveyor.filters import JobFilter
from conveyor.job import JobState
from conveyor.stats import JobStats, QueueCounts, StatsQuery, build_stats, countable

#: Jobs ``queue_counts`` counts one by one per call at most (about 50 ms on a 2-core machine when
#: none of their pages is all-visible yet); the pairs beyond it are estimated.
COUNT_BUDGET = 50_000
#: Finished jobs ``job_stats`` reads per call at most, shared evenly by the buckets.
SAMPLE_BUDGET = 100_000
#: A bucket reads at least this many jobs before it extrapolates, however many buckets there are.
MIN_SAMPLE = 100
#: The final states ``job_stats`` counts, by the column that times each.
FINISHED = {
    JobState.COMPLETED: "completed_at",
    JobState.DISCARDED: "discarded_at",
    JobState.CANCELLED: "cancelled_at",
}
#: How the errors column of each layout is expanded into its entries (see ``schema.ERRORS_APPEND``).
ERROR_ENTRIES = {"jsonb": "error_entries_jsonb", "jsonb[]": "error_entries_array"}


class PostgresStats(PostgresCore):
    """``count_jobs``, ``queue_counts``, ``job_stats``."""

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
        offsets = query.offsets()
        params: dict[str, Any] = {
            "now": naive_utc(now),
            "starts": offsets[:-1],
            "ends": offsets[1:],
            "queues": list(query.queues) if query.queues else None,
            "cap": max(MIN_SAMPLE, SAMPLE_BUDGET // query.bucket_count),
        }
        figures: list[dict[str, Any]] = [
            {"completed": 0, "discarded": 0, "cancelled": 0, "retried": 0, "estimated": False}
            for _ in range(query.bucket_count)
        ]
        async with self.pool.connection() as conn, conn.transaction():
            await conn.execute("SET LOCAL jit = off", prepare=False)
            cur = await conn.execute(
                "SELECT coalesce(%(now)s::timestamp, timezone('UTC', now()))", params, prepare=False
            )
            row = await cur.fetchone()
            assert row is not None
            params["now"] = row[0]  # one clock for both statements
            cur = await conn.execute(self._finished_statement(query).encode(), params, prepare=False)
            for kind, bucket, seen, matched, before_last, covered, width in await cur.fetchall():
                count, estimated = _extrapolated(seen, matched, before_last, covered, width, params["cap"])
                figures[bucket][kind] = count
                figures[bucket]["estimated"] = figures[bucket]["estimated"] or estimated
            cur = await conn.execute(self._retried_statement().encode(), params, prepare=False)
            for bucket, count in await cur.fetchall():
                figures[bucket]["retried"] = int(count)
        return build_stats(query, params["now"].replace(tzinfo=UTC), figures)

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

    def _retried_statement(self) -> str:
        return self.sql.compose(
            "stats_retried",
            error_entries=ERROR_ENTRIES[self.errors_type or "jsonb"],
            error_time="error_time",
            failed_jobs="failed_jobs",
            failed_key="failed_key",
        )


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
