"""Counts and statistics on MySQL/MariaDB: ``estimate_jobs``, ``queue_counts`` and ``job_stats``
(``count_jobs`` is in ``jobs.py``).

``estimate_jobs`` counts the matches no further than one past ``exact_up_to``: exact when that count
ends below the cap. Past it, the same count without a cap, which gives the number itself (marked
estimated, as anything above the limit is); both within ``COUNT_BUDGET_MS`` in all, after which the
optimizer's row estimate (``EXPLAIN``) is given instead, never below what was counted. That
estimate is rough: InnoDB's estimate of an index range is exact over a few pages, else extrapolated
from the pages it read and doubled, and never more than half the table (``btr0cur.cc``); the
conditions no index serves (args, tags, a worker's suffix) it takes to keep every row.

The other figures are exact, read through an index: the fetch index for the counts by queue, the
indexes on completed_at, discarded_at and cancelled_at for the finished jobs, migration 9's virtual
column ``conveyor_failed_key`` and its index for the failed attempts.
"""

from __future__ import annotations

import dataclasses
import itertools
import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson

from conveyor.engine._stats import FailureTally
from conveyor.engine.mysql.connect import error_code
from conveyor.engine.mysql.core import MysqlCore
from conveyor.engine.mysql.jobs import NO_LIMIT, filter_condition
from conveyor.engine.mysql.rows import utc_clock
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
_ALL_QUEUES = "TRUE"
_SOME_QUEUES = "j.queue IN %(queues)s"
#: How long ``estimate_jobs``' counts may run in all (ms) before the optimizer's estimate is given
#: instead: a criterion no index serves may have to read every row to find a few, and a few hundred
#: thousand matches take longer to count (MariaDB reads about two million index entries a second).
COUNT_BUDGET_MS = 100
#: A count left less time than this (ms) is not started.
MIN_COUNT_MS = 5
#: The count's time was up: MariaDB's ``max_statement_time``, MySQL's ``MAX_EXECUTION_TIME``.
TIMED_OUT = frozenset({1969, 3024})
#: Plans that read the whole table (or a whole index): their row estimate is the table's size, and
#: the share the conditions keep (``filtered``) applies. A range or key read's estimate is already
#: that of the conditions it reads by (the share MariaDB shows beside it counts them again).
FULL_SCANS = frozenset({"ALL", "index"})


def _text(moment: datetime) -> str:
    return moment.isoformat(sep=" ", timespec="microseconds")


def planned_rows(columns: Sequence[Any], rows: Sequence[Sequence[Any]]) -> int:
    """The optimizer's estimate of the rows an ``EXPLAIN`` of one table's query returns: 0 when it
    found the condition impossible (no table read)."""
    names = [str(column[0]).lower() for column in columns]
    for row in rows:
        plan = dict(zip(names, row, strict=True))
        if plan.get("table") is None or plan.get("rows") is None:
            continue
        estimate = float(plan["rows"])
        if plan.get("type") in FULL_SCANS and plan.get("filtered") is not None:
            estimate *= float(plan["filtered"]) / 100
        return max(0, round(estimate))
    return 0


class MysqlStats(MysqlCore):
    """``estimate_jobs``, ``queue_counts``, ``job_stats``."""

    async def estimate_jobs(self, criteria: JobFilter, *, exact_up_to: int) -> JobCount:
        countable(criteria)
        # Every state named when the criteria name none: then the fetch index, which begins with
        # the state, serves a filter by queue as a few ranges (for the counts and the optimizer's
        # estimate) instead of a read of the whole index.
        if not criteria.states:
            criteria = dataclasses.replace(criteria, states=tuple(JobState))
        condition, params = filter_condition(self, criteria)
        deadline = time.monotonic() + COUNT_BUDGET_MS / 1000
        async with self.reading() as cursor:
            mariadb = "MariaDB" in cursor.connection.get_server_info()
            counted = await self._count(cursor, condition, params, mariadb, exact_up_to + 1, deadline)
            if counted is not None and counted <= exact_up_to:
                return JobCount(counted)
            if counted is not None:  # more than the limit: all of them, while the time lasts
                total = await self._count(cursor, condition, params, mariadb, NO_LIMIT, deadline)
                if total is not None:
                    return JobCount(total, estimated=True)
            await cursor.execute(self._estimate_statement("estimate_plan", condition, mariadb, 0), params)
            estimate = planned_rows(cursor.description, await cursor.fetchall())
        return JobCount(max(estimate, counted or 0), estimated=True)

    async def _count(
        self, cursor: Any, condition: str, params: dict[str, Any], mariadb: bool, cap: int, deadline: float
    ) -> int | None:
        """The matches of ``condition``, up to ``cap``; None when the time left before ``deadline``
        was too short to count them."""
        left = round((deadline - time.monotonic()) * 1000)
        if left < MIN_COUNT_MS:
            return None
        statement = self._estimate_statement("count_capped", condition, mariadb, left)
        try:
            await cursor.execute(statement, {**params, "cap": cap})
        except Exception as exc:
            if error_code(exc) not in TIMED_OUT:
                raise
            return None
        (row,) = await cursor.fetchall()
        return int(row[0])

    def _estimate_statement(self, name: str, condition: str, mariadb: bool, milliseconds: int) -> str:
        time_limit = self.files["time_limit_mariadb"].strip() if mariadb else ""
        return (
            self.files[name]
            .replace("{explain}", "EXPLAIN EXTENDED" if mariadb else "EXPLAIN")
            .replace("{time_limit}", time_limit)
            .replace("{seconds}", f"{milliseconds / 1000:.3f}")
            .replace("{milliseconds}", str(milliseconds))
            .replace("{filter}", condition)
        )

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
