"""Counts and statistics of jobs, as operators ask for them: how many jobs each queue holds in each
state, and what finished (or failed) in the last minutes.

``Conveyor.queue_counts`` returns a ``QueueCounts`` per queue and ``Conveyor.job_stats`` a ``JobStats``
for a window of time; ``StatsQuery`` is the validated request an engine receives. On a large
PostgreSQL table some figures are estimates, and each value says which (see the guide
``docs/guides/operating.md``).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from conveyor import _options as opt
from conveyor.errors import ValidationError
from conveyor.filters import JobFilter
from conveyor.job import JobState

#: The most buckets one ``job_stats`` call may ask for (a day of minutes).
MAX_BUCKETS = 1440
#: The shortest bucket: times are kept to the microsecond, a millisecond keeps every bucket distinct.
MIN_BUCKET = 0.001


def _count(field_name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValidationError(field_name, value, "must be an integer >= 0")
    return value


def _utc(field_name: str, value: Any) -> datetime:
    return opt.check_aware(field_name, value).astimezone(UTC)


def _seconds(field_name: str, value: Any) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value <= 0
    ):
        raise ValidationError(field_name, value, "must be a finite number of seconds > 0")
    return float(value)


def _queues(value: Any) -> tuple[str, ...] | None:
    if value is None:
        return None
    if isinstance(value, str):
        value = (value,)
    if not isinstance(value, Iterable):
        raise ValidationError("queues", value, "must be a queue name or a list of them")
    queues = tuple(value)
    if not queues:
        raise ValidationError("queues", value, "must name at least one queue (None: every queue)")
    for queue in queues:
        opt.check_queue(queue, "queues")
    return queues


def countable(criteria: JobFilter) -> JobFilter:
    """``criteria`` if ``count_jobs`` can count it: a count is of every match, so a ``limit`` is
    refused rather than ignored (``before_id`` is a criterion like the others: ids below it)."""
    if criteria.limit is not None:
        raise ValidationError("limit", criteria.limit, "does not apply to a count; leave it out")
    return criteria


# -- a count that may be an estimate -------------------------------------------------------------------
#: ``count_jobs(estimate=True)`` counts exactly up to this many matches by default; above, it estimates.
EXACT_UP_TO = 10_000
#: The largest ``exact_up_to`` (a count is a SQL integer).
MAX_EXACT_UP_TO = 2**31 - 2


def exact_limit(value: Any) -> int:
    """``exact_up_to`` of ``count_jobs(estimate=True)``, checked: an integer from 0."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_EXACT_UP_TO:
        raise ValidationError("exact_up_to", value, f"must be an integer from 0 to {MAX_EXACT_UP_TO}")
    return value


@dataclass(frozen=True, slots=True)
class JobCount:
    """How many jobs a filter matches, as ``count_jobs(estimate=True)`` found it.

    ``estimated`` False: ``count`` is exact. True: the matches were too many to count in time, and
    ``count`` is an estimate: on PostgreSQL the planner's row estimate for the filter (from the
    table's statistics, as fresh as its last ``ANALYZE``), never below the matches actually
    counted before the count stopped; on MySQL/MariaDB the matches themselves when counting them
    all took little time, else the optimizer's estimate. ``str()`` marks an estimate with a
    leading ``~``.
    """

    count: int
    estimated: bool = False

    def __post_init__(self) -> None:
        _count("count", self.count)
        if not isinstance(self.estimated, bool):
            raise ValidationError("estimated", self.estimated, "must be True or False")

    @property
    def exact(self) -> bool:
        """True unless the count is an estimate."""
        return not self.estimated

    def __str__(self) -> str:
        return f"~{self.count}" if self.estimated else str(self.count)


# -- counts by queue and state -----------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class QueueCounts:
    """The jobs of one queue in each state, as ``Conveyor.queue_counts`` measured them at ``measured_at``.

    A count is exact unless its state is in ``estimated``: on PostgreSQL, a (queue, state) holding
    too many jobs to count in time is the planner's estimate instead (typically ``completed`` on a
    large table). ``oldest_available_at`` is the ``scheduled_at`` of the available job that has
    waited longest (None when none waits): ``oldest_available_age`` is how long it has waited.
    """

    queue: str
    measured_at: datetime
    available: int = 0
    scheduled: int = 0
    suspended: int = 0
    executing: int = 0
    retryable: int = 0
    completed: int = 0
    discarded: int = 0
    cancelled: int = 0
    estimated: frozenset[JobState] = frozenset()
    oldest_available_at: datetime | None = None

    def __post_init__(self) -> None:
        opt.check_queue(self.queue)
        object.__setattr__(self, "measured_at", _utc("measured_at", self.measured_at))
        for state in JobState:
            _count(state.value, getattr(self, state.value))
        try:
            estimated = frozenset(JobState(s) for s in self.estimated)
        except (TypeError, ValueError):
            raise ValidationError("estimated", self.estimated, "must be a set of job states") from None
        object.__setattr__(self, "estimated", estimated)
        if self.oldest_available_at is not None:
            oldest = _utc("oldest_available_at", self.oldest_available_at)
            object.__setattr__(self, "oldest_available_at", oldest)

    def count(self, state: JobState | str) -> int:
        """The number of jobs in ``state``."""
        value: int = getattr(self, JobState(state).value)
        return value

    def counts(self) -> dict[JobState, int]:
        """Every state's count, in ``JobState`` order."""
        return {state: self.count(state) for state in JobState}

    def is_exact(self, state: JobState | str) -> bool:
        """True unless the count of ``state`` is an estimate."""
        return JobState(state) not in self.estimated

    @property
    def total(self) -> int:
        """The jobs of the queue in every state."""
        return sum(self.counts().values())

    @property
    def oldest_available_age(self) -> float | None:
        """Seconds the oldest available job has waited at ``measured_at`` (0 if its time is later)."""
        if self.oldest_available_at is None:
            return None
        return max(0.0, (self.measured_at - self.oldest_available_at).total_seconds())


# -- what happened over a window of time -------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class StatsQuery:
    """What ``job_stats`` is asked for: the last ``window`` seconds in buckets of ``bucket`` seconds,
    of every queue or only of ``queues``. ``window`` must be a whole number of buckets, at most
    ``MAX_BUCKETS`` of them."""

    window: float = 3600.0
    bucket: float = 60.0
    queues: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        window = _seconds("window", self.window)
        bucket = _seconds("bucket", self.bucket)
        if bucket < MIN_BUCKET:
            raise ValidationError("bucket", self.bucket, f"must be at least {MIN_BUCKET} s")
        count = round(window / bucket)
        if count < 1 or not math.isclose(count * bucket, window, rel_tol=1e-9):
            raise ValidationError("window", self.window, f"must be a whole number of buckets of {bucket} s")
        if count > MAX_BUCKETS:
            raise ValidationError(
                "bucket",
                self.bucket,
                f"makes {count} buckets of the {window} s window; at most {MAX_BUCKETS}",
            )
        object.__setattr__(self, "window", window)
        object.__setattr__(self, "bucket", bucket)
        object.__setattr__(self, "queues", _queues(self.queues))

    @property
    def bucket_count(self) -> int:
        """How many buckets the window holds (``window / bucket``)."""
        return round(self.window / self.bucket)

    def offsets(self) -> list[timedelta]:
        """How long before the end of the window each bucket starts, oldest first, then 0 (the end).
        Each boundary is computed once, so a bucket ends exactly where the next begins."""
        count = self.bucket_count
        return [timedelta(seconds=self.bucket * (count - i)) for i in range(count)] + [timedelta(0)]

    def bounds(self, end: datetime) -> list[datetime]:
        """The bucket boundaries for a window ending at ``end``: ``bucket_count + 1`` times."""
        return [end - offset for offset in self.offsets()]


@dataclass(frozen=True, slots=True)
class StatsBucket:
    """What happened from ``start`` (included) to ``end`` (excluded).

    ``completed``, ``discarded`` and ``cancelled`` count jobs that reached that state then (by
    ``completed_at``, ``discarded_at``, ``cancelled_at``); ``retried`` counts failed attempts that
    left their job to run again (``retryable``), by the time the failure was recorded. ``estimated``
    is true when a figure was extrapolated from a sample (PostgreSQL, more jobs than it counts
    one by one in time).
    """

    start: datetime
    end: datetime
    completed: int = 0
    discarded: int = 0
    cancelled: int = 0
    retried: int = 0
    estimated: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "start", _utc("start", self.start))
        object.__setattr__(self, "end", _utc("end", self.end))
        if self.end <= self.start:
            raise ValidationError("end", self.end, f"must be later than start={self.start!r}")
        for name in ("completed", "discarded", "cancelled", "retried"):
            _count(name, getattr(self, name))
        if not isinstance(self.estimated, bool):
            raise ValidationError("estimated", self.estimated, "must be True or False")

    @property
    def failed(self) -> int:
        """Attempts that ended in an error: retried and discarded."""
        return self.retried + self.discarded


@dataclass(frozen=True, slots=True)
class JobStats:
    """Jobs that finished or failed over the window from ``start`` to ``end``, bucket by bucket.

    ``throughput`` is completed jobs per second over the whole window. ``error_rate`` is the share
    of ended attempts that failed: ``(retried + discarded) / (completed + retried + discarded)``,
    0.0 when no attempt ended. A retried attempt is a failure the job will run again after; a
    discarded job failed its last allowed attempt (or was discarded on purpose). Cancelled jobs and
    snoozes are neither successes nor failures and count in neither.
    """

    start: datetime
    end: datetime
    bucket: float
    buckets: tuple[StatsBucket, ...]
    queues: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "start", _utc("start", self.start))
        object.__setattr__(self, "end", _utc("end", self.end))
        object.__setattr__(self, "bucket", _seconds("bucket", self.bucket))
        object.__setattr__(self, "queues", _queues(self.queues))
        buckets = tuple(self.buckets)
        if not buckets or not all(isinstance(b, StatsBucket) for b in buckets):
            raise ValidationError("buckets", self.buckets, "must be one StatsBucket or more")
        if buckets[0].start != self.start or buckets[-1].end != self.end:
            raise ValidationError("buckets", self.buckets, "must span start to end")
        if any(a.end != b.start for a, b in itertools.pairwise(buckets)):
            raise ValidationError("buckets", self.buckets, "must follow one another without gaps")
        object.__setattr__(self, "buckets", buckets)

    @property
    def window(self) -> float:
        """Seconds from ``start`` to ``end``."""
        return (self.end - self.start).total_seconds()

    @property
    def completed(self) -> int:
        """Jobs completed over the window."""
        return sum(b.completed for b in self.buckets)

    @property
    def discarded(self) -> int:
        """Jobs discarded over the window."""
        return sum(b.discarded for b in self.buckets)

    @property
    def cancelled(self) -> int:
        """Jobs cancelled over the window."""
        return sum(b.cancelled for b in self.buckets)

    @property
    def retried(self) -> int:
        """Failed attempts that will be retried, over the window."""
        return sum(b.retried for b in self.buckets)

    @property
    def failed(self) -> int:
        """Attempts that ended in an error over the window: retried and discarded."""
        return self.retried + self.discarded

    @property
    def estimated(self) -> bool:
        """True when any bucket holds an estimated figure."""
        return any(b.estimated for b in self.buckets)

    @property
    def throughput(self) -> float:
        """Completed jobs per second over the window."""
        return self.completed / self.window

    @property
    def error_rate(self) -> float:
        """Failed attempts over ended attempts (see the class docstring); 0.0 when none ended."""
        ended = self.completed + self.failed
        return self.failed / ended if ended else 0.0


def build_stats(query: StatsQuery, end: datetime, figures: Sequence[dict[str, Any]]) -> JobStats:
    """A ``JobStats`` for ``query`` ending at ``end`` from one mapping of figures per bucket, oldest
    first (keys: completed, discarded, cancelled, retried, estimated)."""
    bounds = query.bounds(end)
    buckets = tuple(
        StatsBucket(start=bounds[i], end=bounds[i + 1], **figures[i]) for i in range(query.bucket_count)
    )
    return JobStats(
        start=bounds[0], end=bounds[-1], bucket=query.bucket, buckets=buckets, queues=query.queues
    )
