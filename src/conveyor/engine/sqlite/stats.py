"""Counts and statistics on SQLite: ``count_jobs``, ``queue_counts``, ``job_stats``.

Every figure is exact: a SQLite database serves one machine, and each statement reads an index
(the fetch index for the counts by queue, the partial indexes on completed_at, discarded_at and
cancelled_at for the finished jobs, migration 9's index for the failed attempts).
"""

from __future__ import annotations

import itertools
import sqlite3
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson

from conveyor.engine._stats import FailureTally
from conveyor.engine.sqlite.core import FILES, SqliteCore, compose
from conveyor.engine.sqlite.jobs import filter_condition
from conveyor.engine.sqlite.rows import parse_time, time_text, utc_clock
from conveyor.filters import JobFilter
from conveyor.job import JobState
from conveyor.stats import JobCount, JobStats, QueueCounts, StatsQuery, build_stats, countable

#: The final states ``job_stats`` counts, by the column that times each.
FINISHED = {
    JobState.COMPLETED: "completed_at",
    JobState.DISCARDED: "discarded_at",
    JobState.CANCELLED: "cancelled_at",
}
#: How far before the window the failed jobs are looked for: a node's clock ahead of this one's.
CLOCK_SLACK = timedelta(minutes=10)
_ALL_QUEUES = "1"
_SOME_QUEUES = "j.queue IN (SELECT value FROM json_each(:queues))"


class SqliteStats(SqliteCore):
    """``count_jobs``, ``estimate_jobs``, ``queue_counts``, ``job_stats``."""

    async def count_jobs(self, criteria: JobFilter) -> int:
        countable(criteria)
        condition, params = filter_condition(criteria)
        statement = compose("count_jobs", condition)

        def run(conn: sqlite3.Connection) -> int:
            return int(conn.execute(statement, params).fetchone()[0])

        return await self.database.read(run)

    async def estimate_jobs(self, criteria: JobFilter, *, exact_up_to: int) -> JobCount:
        """Always the exact count: SQLite keeps no row estimates to answer from, and counting is
        a local read of the fetch index or the rows (see ``docs/guides/operating.md``)."""
        return JobCount(await self.count_jobs(criteria))

    async def queue_counts(self, *, now: datetime | None = None) -> list[QueueCounts]:
        measured = utc_clock(now).replace(tzinfo=UTC)
        statement = FILES["queue_counts"]

        def run(conn: sqlite3.Connection) -> list[Any]:
            return conn.execute(statement).fetchall()

        found: dict[str, dict[str, Any]] = {}
        for state, queue, count, oldest in await self.database.read(run):
            figures = found.setdefault(queue, {"queue": queue, "measured_at": measured})
            figures[state] = count
            if oldest is not None:
                figures["oldest_available_at"] = parse_time(oldest)
        return [QueueCounts(**figures) for _, figures in sorted(found.items())]

    async def job_stats(self, query: StatsQuery, *, now: datetime | None = None) -> JobStats:
        end = utc_clock(now)
        bounds = query.bounds(end)
        texts = [time_text(bound) for bound in bounds]
        queues = _SOME_QUEUES if query.queues else _ALL_QUEUES
        finished = "\nUNION ALL\n".join(
            FILES["stats_finished_kind"]
            .strip()
            .replace("{state}", state.value)
            .replace("{column}", column)
            .replace("{index}", f"oban_jobs_{column}_index")
            .replace("{queues}", queues)
            for state, column in FINISHED.items()
        )
        retried = FILES.compose("stats_retried", failed_jobs="failed_jobs", failed_key="failed_key").replace(
            "{queues}", queues
        )
        params: dict[str, Any] = {
            "buckets": orjson.dumps(list(itertools.pairwise(texts))).decode(),
            "since": time_text(bounds[0] - CLOCK_SLACK),
        }
        if query.queues:
            params["queues"] = orjson.dumps(list(query.queues)).decode()

        def run(conn: sqlite3.Connection) -> tuple[list[Any], list[Any]]:
            return conn.execute(finished, params).fetchall(), conn.execute(retried, params).fetchall()

        finished_rows, failures = await self.database.read(run)
        figures: list[dict[str, Any]] = [
            {"completed": 0, "discarded": 0, "cancelled": 0, "retried": 0} for _ in range(query.bucket_count)
        ]
        for kind, bucket, count in finished_rows:
            figures[bucket][kind] = count
        tally = FailureTally(bounds)
        for (at,) in failures:
            tally.add(at)
        for bucket, count in enumerate(tally.counts()):
            figures[bucket]["retried"] = count
        return build_stats(query, end.replace(tzinfo=UTC), figures)
