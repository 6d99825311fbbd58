"""The Stager: scheduled and retryable jobs become available when due, in bounded batches."""

from __future__ import annotations

from collections.abc import Callable

from conveyor._runtime.clock import SYSTEM_CLOCK, Clock
from conveyor._runtime.service import Service
from conveyor.engine.base import Engine
from conveyor.telemetry import Telemetry


class Stager(Service):
    name = "stager"

    def __init__(
        self,
        engine: Engine,
        telemetry: Telemetry,
        on_staged: Callable[[str], None],
        *,
        interval: float = 1.0,
        limit: int = 5000,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        super().__init__(interval, clock)
        self.engine = engine
        self.telemetry = telemetry
        self.on_staged = on_staged
        self.limit = limit

    async def tick(self) -> None:
        staged = await self.engine.stage_jobs(self.limit, now=self.clock.database_now())
        if not staged:
            return
        for queue in staged:
            self.on_staged(queue)
        total = sum(staged.values())
        self.telemetry.emit("stager.staged", count=total, queues=staged)
        if total >= self.limit:  # there may be more due right now
            self.wake()
