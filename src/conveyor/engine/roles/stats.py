"""The counts and stats role: bounded reads of how many jobs there are and what happened to them."""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

from conveyor.filters import JobFilter
from conveyor.stats import JobCount, JobStats, QueueCounts, StatsQuery


class Stats(Protocol):
    """Counts and statistics (``engine/*/stats.py``)."""

    async def count_jobs(self, criteria: JobFilter) -> int:
        """The exact number of jobs matching ``criteria``, as ``list_jobs`` selects them
        (``before_id`` included). A ``limit`` is refused with a ``ValidationError`` on ``limit``
        (``conveyor.stats.countable``)."""

    async def estimate_jobs(self, criteria: JobFilter, *, exact_up_to: int) -> JobCount:
        """How many jobs match ``criteria`` (as ``count_jobs``), fast whatever their number: exact
        (``estimated`` False) when at most ``exact_up_to`` match and counting them is quick; else an
        estimate marked ``estimated``, never below the matches counted. An engine that always
        counts quickly may always count exactly. A ``limit`` is refused as by ``count_jobs``."""

    async def queue_counts(self, *, now: datetime | None = None) -> list[QueueCounts]:
        """One ``QueueCounts`` per queue holding jobs, by queue name: the jobs in each state, and
        the earliest ``scheduled_at`` of its available jobs; ``measured_at`` is ``now``. A count
        the engine cannot have exactly in time may be an estimate: its state is then in
        ``estimated`` (an engine that counts everything exactly never sets it)."""

    async def job_stats(self, query: StatsQuery, *, now: datetime | None = None) -> JobStats:
        """What happened in each bucket of ``query``'s window, which ends at ``now``
        (``conveyor.stats.build_stats`` lays the buckets out: boundaries at ``query.bounds(now)``,
        a start included, an end excluded). In each bucket: the jobs of ``query.queues`` (all when
        None) whose ``completed_at``, ``discarded_at`` or ``cancelled_at`` falls in it, as completed,
        discarded and cancelled; and as retried, the ``errors`` entries whose ``at`` falls in it,
        except the entry of the attempt that ended a discarded or cancelled job (its ``attempt``
        equals the job's). An entry or an ``at`` that is not a readable time is skipped, never an
        error. A figure extrapolated from a sample marks its bucket ``estimated``."""
