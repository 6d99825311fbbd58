"""The numbers the dashboard shows: queues with their counts, throughput, how many jobs a filter
matches. The one place that calls the counts and stats API, so the pages only see these values."""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime

from conveyor.app import Conveyor
from conveyor.filters import JobFilter
from conveyor.fleet import QueueInfo
from conveyor.job import JobState
from conveyor.limits import GlobalLimit


@dataclass(frozen=True, slots=True)
class QueueRow:
    """One queue across the fleet: its live producers and its jobs by state."""

    queue: str
    producers: tuple[QueueInfo, ...] = ()
    #: Jobs by state (some estimated on a large PostgreSQL table: see ``estimated``).
    counts: dict[JobState, int] = field(default_factory=dict)
    oldest_available_at: datetime | None = None
    estimated: frozenset[JobState] = frozenset()

    @property
    def running(self) -> int:
        return sum(p.running for p in self.producers)

    @property
    def local_limit(self) -> int:
        """The live nodes' local limits added up."""
        return sum(p.limit for p in self.producers)

    @property
    def global_limit(self) -> GlobalLimit | None:
        """The fleet-wide limit the queue's nodes claim under (the lowest, should they disagree
        during a rolling change)."""
        found = [p.global_limit for p in self.producers if p.global_limit is not None]
        return min(found, key=lambda g: g.allowed) if found else None

    @property
    def limit(self) -> int:
        """How many of its jobs may run at once: the local limits added up, or the global limit
        when that is lower (a partitioned global limit caps each partition, not the queue)."""
        found = self.global_limit
        if found is not None and found.partition is None and found.allowed < self.local_limit:
            return found.allowed
        return self.local_limit

    @property
    def limit_kind(self) -> str:
        """Which limit ``limit`` is: ``"global"`` or ``"local"``."""
        return "global" if self.limit < self.local_limit else "local"

    @property
    def paused(self) -> int:
        """On how many of its nodes the queue is paused."""
        return sum(1 for p in self.producers if p.paused)


@dataclass(frozen=True, slots=True)
class Bucket:
    start: datetime
    completed: int
    failed: int


@dataclass(frozen=True, slots=True)
class Activity:
    """Jobs finished per bucket over a recent window."""

    window: int
    bucket: int
    buckets: tuple[Bucket, ...] = field(default=())
    estimated: bool = False

    @property
    def completed(self) -> int:
        return sum(b.completed for b in self.buckets)

    @property
    def failed(self) -> int:
        return sum(b.failed for b in self.buckets)

    @property
    def error_rate(self) -> float:
        """Failed attempts over ended ones (as ``JobStats.error_rate``)."""
        done = self.completed + self.failed
        return self.failed / done if done else 0.0


@dataclass(frozen=True, slots=True)
class Matching:
    """How many jobs a filter matches: exactly, or (``exact`` False) about ``count``: the estimate of
    ``count_jobs(estimate=True)`` for a filter matching more than it counts (10,000)."""

    count: int
    exact: bool = True


async def queue_rows(conveyor: Conveyor) -> list[QueueRow]:
    """Every queue that holds jobs or runs on a live node, by name."""
    producers: dict[str, list[QueueInfo]] = defaultdict(list)
    for info in await conveyor.queues():
        producers[info.queue].append(info)
    counted = {found.queue: found for found in await conveyor.queue_counts()}
    rows = []
    for queue in sorted(producers.keys() | counted.keys()):
        found = counted.get(queue)
        rows.append(
            QueueRow(
                queue,
                tuple(producers.get(queue, ())),
                found.counts() if found is not None else {},
                found.oldest_available_at if found is not None else None,
                found.estimated if found is not None else frozenset(),
            )
        )
    return rows


async def activity(conveyor: Conveyor, *, window: int = 3600, bucket: int = 60) -> Activity:
    """Jobs completed and attempts failed per bucket over the last ``window`` seconds."""
    stats = await conveyor.job_stats(window=window, bucket=bucket)
    return Activity(
        window=window,
        bucket=bucket,
        buckets=tuple(Bucket(b.start, b.completed, b.failed) for b in stats.buckets),
        estimated=stats.estimated,
    )


async def count_matching(conveyor: Conveyor, criteria: JobFilter) -> Matching:
    """How many jobs ``criteria`` matches (ignoring its page): exact, or estimated when that many
    that counting them would hold the page up (millions of completed jobs)."""
    unpaged = dataclasses.replace(criteria, limit=None, before_id=None, after_id=None)
    found = await conveyor.count_jobs(unpaged, estimate=True)
    return Matching(found.count, exact=found.exact)
