"""The numbers the dashboard shows: queues with their counts, throughput, how many jobs a filter
matches. The one place that calls the counts and stats API, so the pages only see these values."""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime

from conveyor.app import Conveyor
from conveyor.filters import MAX_PAGE, JobFilter
from conveyor.fleet import QueueInfo
from conveyor.job import JobState


@dataclass(frozen=True, slots=True)
class QueueRow:
    """One queue across the fleet: its live producers and its jobs by state."""

    queue: str
    producers: tuple[QueueInfo, ...] = ()
    #: Jobs by state (estimated on large tables); None when they are not known.
    counts: dict[JobState, int] | None = None
    oldest_available_at: datetime | None = None

    @property
    def running(self) -> int:
        return sum(p.running for p in self.producers)

    @property
    def limit(self) -> int:
        return sum(p.limit for p in self.producers)

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

    @property
    def completed(self) -> int:
        return sum(b.completed for b in self.buckets)

    @property
    def failed(self) -> int:
        return sum(b.failed for b in self.buckets)

    @property
    def error_rate(self) -> float:
        done = self.completed + self.failed
        return self.failed / done if done else 0.0


@dataclass(frozen=True, slots=True)
class Matching:
    """How many jobs a filter matches: exactly, or at least ``count``."""

    count: int
    exact: bool = True


async def queue_rows(conveyor: Conveyor) -> list[QueueRow]:
    producers: dict[str, list[QueueInfo]] = defaultdict(list)
    for info in await conveyor.queues():
        producers[info.queue].append(info)
    return [QueueRow(queue, tuple(found)) for queue, found in sorted(producers.items())]


async def activity(conveyor: Conveyor, *, window: int = 3600, bucket: int = 60) -> Activity | None:
    """Throughput and errors of the last ``window`` seconds; None until the stats API exists."""
    return None


async def count_matching(conveyor: Conveyor, criteria: JobFilter) -> Matching:
    """How many jobs ``criteria`` matches (ignoring its page)."""
    unpaged = dataclasses.replace(criteria, limit=MAX_PAGE, before_id=None, after_id=None)
    found = await conveyor.list_jobs(unpaged)  # until count_jobs exists: at most a listing's worth
    return Matching(len(found), exact=len(found) < MAX_PAGE)
