"""Limits a fetch obeys beyond the producer's own free slots, counted across the whole fleet.

The producer knows only its own node; these are enforced by the engine inside the claiming
transaction, where every node's running jobs are visible, so they hold with nodes coming and going.
"""

from __future__ import annotations

from dataclasses import dataclass

from conveyor.errors import ValidationError


@dataclass(frozen=True, slots=True)
class FetchLimits:
    #: At most this many jobs of the queue executing at once on all nodes together (None: no cap).
    #: Jobs of a dead node count until rescue gives them back.
    global_limit: int | None = None

    def __post_init__(self) -> None:
        value = self.global_limit
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise ValidationError("global_limit", value, "must be an integer >= 1 (or None for no cap)")

    @property
    def unlimited(self) -> bool:
        return self.global_limit is None


NO_LIMITS = FetchLimits()
