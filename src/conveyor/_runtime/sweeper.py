"""The Sweeper: the leader settles suspended workflow steps that no ack settled.

Steps normally go on right after the ack (or cancel) that ended their last dependency. What that
misses is settled here, at most a stage interval late: a node that died between its ack's commit and
the settle, steps deleted or cancelled inside a caller's transaction that raced an ack, another
client acking a step. See ``Engine.sweep_steps``.
"""

from __future__ import annotations

from conveyor._runtime.duties import LeaderDuty
from conveyor.job import JobState


class Sweeper(LeaderDuty):
    name = "sweeper"

    async def lead(self) -> None:
        settled = await self.engine.sweep_steps(now=self.clock.database_now())
        if settled:
            self.telemetry.emit(
                "sweeper.settled",
                count=len(settled),
                available=tuple(i for i, s in settled.items() if s is not JobState.CANCELLED),
                cancelled=tuple(i for i, s in settled.items() if s is JobState.CANCELLED),
            )
