"""Counts and statistics on MySQL/MariaDB: ``queue_counts`` and ``job_stats`` (``count_jobs`` and
``estimate_jobs`` are in ``jobs.py``).

Every figure is exact, read through an index: the fetch index for the counts by queue, the indexes
on completed_at, discarded_at and cancelled_at for the finished jobs, migration 9's virtual column
``conveyor_failed_key`` and its index for the failed attempts.
"""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson

from conveyor.engine._stats import FailureTally
from conveyor.engine.mysql.core import MysqlCore
from conveyor.engine.mysql.rows import utc_clock
from conveyor.job import JobState
from conveyor.stats import JobStats, QueueCounts, StatsQuery, build_stats

#: The final states ``job_stats`` counts, by the column that times each.
FINISHED = {
    JobState.COMPLETED: "completed_at",
    JobState.DISCARDED: "discarded_at",
    JobState.CANCELLED: "cancelled_at",
}
#: How far before the window the failed jobs are looked for: a node's clock ahead of this one's.
CLOCK_SLACK = timedelta(minutes=10)
_ALL_QUEUES = "TRUE"
_SOME_QUEUES = "j.queue IN %(queues)s"


def _text(moment: datetime) -> str:
    return moment.isoformat(sep=" ", timespec="microseconds")


class MysqlStats(MysqlCore):
    """``queue_counts``, ``job_stats``."""

    async def queue_counts(self, *, now: datetime | None = None) -> list[QueueCounts]:
        measured = utc_clock(now).replace(tzinfo=UTC)
        async with self.reading() as cursor:
            await cursor.execute(self.files["queue_counts"])
            rows = await cursor.fetchall()
        found: dict[str, dict[str, Any]] = {}
        for state, queue, count, oldest in rows:
            figures = found.setdefault(queue, {"queue": queue, "measured_at": measured})
            figures[state] = int(count)
            if oldest is not None:
                figures["oldest_available_at"] = oldest.replace(tzinfo=UTC)
        return [QueueCounts(**figures) for _, figures in sorted(found.items())]

    async def job_stats(self, query: StatsQuery, *, now: datetime | None = None) -> JobStats:
        end = utc_clock(now)
        bounds = query.bounds(end)
        queues = _SOME_QUEUES if query.queues else _ALL_QUEUES
        params: dict[str, Any] = {
            "buckets": orjson.dumps([[_text(a), _text(b)] for a, b in itertools.pairwise(bounds)]).decode(),
            "since": bounds[0] - CLOCK_SLACK,
        }
        if query.queues:
            params["queues"] = tuple(query.queues)
        figures: list[dict[str, Any]] = [
            {"completed": 0, "discarded": 0, "cancelled": 0, "retried": 0} for _ in range(query.bucket_count)
        ]
        finished = self.files["stats_finished"].replace("{queues}", queues)
        retried = self.files["stats_retried"].replace("{queues}", queues)
        tally = FailureTally(bounds)
        async with self.reading() as cursor:
            for state, column in FINISHED.items():
                await cursor.execute(finished.replace("{column}", column), {**params, "state": state.value})
                for bucket, count in await cursor.fetchall():
                    figures[int(bucket)][state.value] = int(count)
            await cursor.execute(retried, params)
            for (at,) in await cursor.fetchall():
                tally.add(at)
        for bucket, count in enumerate(tally.counts()):
            figures[bucket]["retried"] = count
        return build_stats(query, end.replace(tzinfo=UTC), figures)
