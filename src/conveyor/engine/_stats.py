"""What both engines' ``job_stats`` do alike: reading the time of an ``errors`` entry, which another
client may have written as anything, and counting failures into the buckets of a window."""

from __future__ import annotations

import bisect
from datetime import UTC, datetime
from typing import Any


def failure_time(at: Any) -> datetime | None:
    """The ``at`` of an errors entry as naive UTC (without an offset it is UTC already, as Oban
    writes naive times), or None when it is not an ISO 8601 time."""
    if not isinstance(at, str):
        return None
    try:
        parsed = datetime.fromisoformat(at)
    except ValueError:
        return None
    if parsed.tzinfo is None:
        return parsed
    try:
        return parsed.astimezone(UTC).replace(tzinfo=None)
    except OverflowError:  # year 1 or 9999 pushed out of range by its offset
        return None


class FailureTally:
    """Failed attempts placed in the buckets between ``bounds`` (naive UTC, ascending; a start
    included, an end excluded). An entry counted with a weight other than 1 stands for others
    that were not read: its bucket is then an estimate."""

    def __init__(self, bounds: list[datetime]) -> None:
        self.bounds = bounds
        self.weights = [0.0] * (len(bounds) - 1)
        self.estimated = [False] * (len(bounds) - 1)

    def add(self, at: Any, weight: float = 1.0) -> None:
        moment = failure_time(at)
        if moment is None or not self.bounds[0] <= moment < self.bounds[-1]:
            return
        bucket = bisect.bisect_right(self.bounds, moment) - 1
        self.weights[bucket] += weight
        if weight != 1.0:
            self.estimated[bucket] = True

    def counts(self) -> list[int]:
        return [round(weight) for weight in self.weights]
