"""Histograms kept as plain Python numbers on the node's event loop, and read by an
exporter's collector at scrape time.

Why not the client library's own ``Counter``/``Histogram``: each ``inc``/``observe`` there takes a lock
and walks the buckets, 2 to 3 µs a call, three calls a job: a tenth of a no-op job's run. Here a job
costs a ``bisect`` and two increments. The events that feed these come from one thread (the node's
loop); a scrape from another thread copies each list in one step (atomic under the GIL), and derives
each histogram's count from the copied buckets, so a histogram read is always consistent in itself
(its sum may miss an observation made during the copy).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence


class HistogramTally:
    """Observations of one labelled series: a count per bucket (the last one past every bound) and
    their sum."""

    __slots__ = ("bounds", "buckets", "total")

    def __init__(self, bounds: Sequence[float]) -> None:
        self.bounds = bounds
        self.buckets = [0] * (len(bounds) + 1)
        self.total = 0.0

    def observe(self, value: float) -> None:
        # bisect_left: the first bound >= value, as a Prometheus bucket's "le" (less or equal) wants.
        self.buckets[bisect_left(self.bounds, value)] += 1
        self.total += value

    def cumulative(self) -> tuple[list[int], float]:
        """The counts at or below each bound, then the count of all, and the sum (from one copy)."""
        counts, total = list(self.buckets), self.total
        running, result = 0, []
        for count in counts:
            running += count
            result.append(running)
        return result, total


class Histograms:
    """One histogram per label values, made on first use."""

    def __init__(self, bounds: Sequence[float]) -> None:
        self.bounds = tuple(sorted(bounds))
        self.histograms: dict[tuple[str, ...], HistogramTally] = {}

    def observe(self, labels: tuple[str, ...], value: float) -> None:
        tally = self.histograms.get(labels)
        if tally is None:
            tally = self.histograms[labels] = HistogramTally(self.bounds)
        tally.observe(value)

    def items(self) -> list[tuple[tuple[str, ...], HistogramTally]]:
        return list(self.histograms.items())  # a copy: the loop may add a series meanwhile
