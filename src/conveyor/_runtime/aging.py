"""Priority aging (Oban Pro's ``DynamicPrioritizer``): the leader raises the priority of available
jobs that have waited too long, one step per pass, so a steady flood of high-priority jobs cannot
starve the low-priority ones forever.

A job that became runnable (``scheduled_at``) more than ``priority_aging_after`` seconds ago gains
one step (``priority`` - 1, 0 being the highest) at each pass, every ``priority_aging_interval``,
until it runs or reaches 0. A priority-9 job under a flood of priority-0 jobs therefore waits at
most about ``after`` + 9 * ``interval``, plus the time the older priority-0 jobs ahead of it take
(it then sorts by ``scheduled_at`` among them, and it is older than the flood that came after it).

Why a leader duty rather than an age term in the fetch's order: the fetch walks the index on
``(state, queue, priority, scheduled_at, id)`` and stops after ``demand`` rows; ordering by an
expression of priority and age would make every fetch read and sort every available job of its
queue. The duty costs one bounded statement per interval, off the hot path, and leaves the stored
priority true to what will run next (the dashboard and ``conveyor jobs`` show it).
"""

from __future__ import annotations

import logging

from conveyor._runtime.duties import LeaderDuty
from conveyor._runtime.leadership import Leadership
from conveyor.engine.base import Engine
from conveyor.settings import Settings
from conveyor.telemetry import Telemetry

log = logging.getLogger("conveyor.duties")


class PriorityAger(LeaderDuty):
    """One aging pass per interval on the leader: at most ``limit`` jobs gain a step."""

    name = "priority_aging"

    def __init__(
        self,
        engine: Engine,
        telemetry: Telemetry,
        leadership: Leadership,
        *,
        after: float,
        interval: float,
        limit: int,
    ) -> None:
        super().__init__(engine, telemetry, leadership, interval)
        self.after = after
        self.limit = limit

    @classmethod
    def of(
        cls, settings: Settings, engine: Engine, telemetry: Telemetry, leadership: Leadership
    ) -> PriorityAger:
        """The duty as the settings ask (``priority_aging_after`` must be set)."""
        assert settings.priority_aging_after is not None
        return cls(
            engine,
            telemetry,
            leadership,
            after=settings.priority_aging_after,
            interval=settings.priority_aging_interval,
            limit=settings.priority_aging_limit,
        )

    async def lead(self) -> None:
        ids = await self.engine.age_priorities(
            after=self.after, limit=self.limit, now=self.clock.database_now()
        )
        if ids:
            log.debug("priority aging: %d waiting jobs gained a step", len(ids))
            self.telemetry.emit("priority.aged", count=len(ids), job_ids=tuple(ids))
