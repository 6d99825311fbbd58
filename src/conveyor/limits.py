"""Limits a fetch obeys beyond the producer's own free slots, counted across the whole fleet.

The producer knows only its own node; these are enforced by the engine inside the claiming
transaction, where every node's running jobs and recent starts are visible, so they hold with nodes
coming and going. Claims of a queue with limits are serialised (a lock per queue), so two nodes never
count the same free slot.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from conveyor.errors import ValidationError

#: The longest rate-limit period taken: a day.
MAX_RATE_PERIOD = 86_400.0


@dataclass(frozen=True, slots=True)
class RateLimit:
    """At most ``allowed`` jobs of the queue *start* in any ``period`` seconds (a sliding window), on
    all nodes together. Every start counts, whatever the job's outcome."""

    allowed: int
    period: float = 1.0

    def __post_init__(self) -> None:
        allowed, period = self.allowed, self.period
        if isinstance(allowed, bool) or not isinstance(allowed, int) or allowed < 1:
            raise ValidationError("rate_limit.allowed", allowed, "must be an integer >= 1")
        if isinstance(period, bool) or not isinstance(period, int | float):
            raise ValidationError("rate_limit.period", period, "must be a number of seconds")
        if not math.isfinite(period) or not 0 < period <= MAX_RATE_PERIOD:
            raise ValidationError(
                "rate_limit.period", period, "must be more than 0 and at most a day (86400)"
            )
        object.__setattr__(self, "period", float(period))

    @classmethod
    def build(cls, value: Any) -> RateLimit | None:
        """``rate_limit`` as given: None, a ``RateLimit``, or ``{"allowed": n, "period": seconds}``."""
        if value is None or isinstance(value, RateLimit):
            return value
        if not isinstance(value, Mapping):
            raise ValidationError("rate_limit", value, 'must be {"allowed": n, "period": seconds} or None')
        for key in value:
            if key == "partition":
                raise ValidationError(
                    "rate_limit.partition", value[key], "partitioned rate limits are not built yet"
                )
            if key not in ("allowed", "period"):
                raise ValidationError(
                    f"rate_limit.{key}", value[key], "unknown key; expected allowed, period"
                )
        if "allowed" not in value:
            raise ValidationError("rate_limit.allowed", None, "is required")
        return cls(**dict(value))

    def to_json(self) -> dict[str, Any]:
        """As signals and producer rows carry it (Oban Pro's names); ``build`` reads it back."""
        return {"allowed": self.allowed, "period": self.period}

    @property
    def spacing(self) -> float:
        """The average time between starts the limit allows."""
        return self.period / self.allowed


@dataclass(frozen=True, slots=True)
class FetchLimits:
    #: At most this many jobs of the queue executing at once on all nodes together (None: no cap).
    #: Jobs of a dead node count until rescue gives them back.
    global_limit: int | None = None
    #: At most so many starts per period, on all nodes together (None: no limit).
    rate: RateLimit | None = None

    def __post_init__(self) -> None:
        value = self.global_limit
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise ValidationError("global_limit", value, "must be an integer >= 1 (or None for no cap)")
        if self.rate is not None and not isinstance(self.rate, RateLimit):
            raise ValidationError("rate", self.rate, "must be a RateLimit or None")

    @property
    def unlimited(self) -> bool:
        return self.global_limit is None and self.rate is None


NO_LIMITS = FetchLimits()


class Claimed(list[Any]):
    """What ``fetch_jobs`` returns under limits: the claimed jobs, and whether a limit (not an empty
    queue) stopped the claim, so the producer tries again soon instead of at its next poll."""

    capped: bool = False


def capped_by(limits: FetchLimits, running: int | None, started: int | None) -> bool:
    """Did a limit stop the claim? ``running``: the queue's executing jobs after it (for the global
    limit); ``started``: its starts in the rate window, this claim's included (None: no such limit)."""
    if limits.global_limit is not None and running is not None and running >= limits.global_limit:
        return True
    return limits.rate is not None and started is not None and started >= limits.rate.allowed
