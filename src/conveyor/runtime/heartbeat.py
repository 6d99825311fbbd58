"""Heartbeats: every running queue keeps its ``oban_producers`` row fresh, so the leader can tell a
dead node's jobs (rescue them) from a live node's long-running ones (leave them)."""

from __future__ import annotations

from collections.abc import Iterable

from conveyor.engine.base import Engine
from conveyor.fleet import ProducerBeat
from conveyor.runtime.producer import Producer
from conveyor.runtime.service import Service


class Heartbeat(Service):
    name = "heartbeat"

    def __init__(
        self, engine: Engine, producers: Iterable[Producer], *, name: str, node: str, interval: float
    ) -> None:
        super().__init__(interval)
        self.engine = engine
        self.producers = list(producers)
        self.instance = name
        self.node = node

    def beats(self) -> list[ProducerBeat]:
        return [
            ProducerBeat(
                p.uuid,
                p.queue,
                {"local_limit": p.limit, "paused": p.paused, "running": len(p.running)},
            )
            for p in self.producers
        ]

    async def tick(self) -> None:
        await self.engine.record_producers(self.instance, self.node, self.beats())
        # A job cancelled (or deleted) while its pkill signal was missed still gets stopped.
        running = [job_id for p in self.producers for job_id in p.running]
        if running:
            alive = await self.engine.still_executing(running)
            # Only jobs we asked about: one fetched while the query ran is not in ``alive`` either.
            gone = set(running) - alive
            for producer in self.producers:
                for job_id in [j for j in producer.running if j in gone]:
                    producer.cancel_job(job_id, "cancelled (the job is no longer executing)")

    async def forget(self) -> None:
        """Remove this node's rows at a clean stop, once its jobs are acked or given back."""
        await self.engine.delete_producers([p.uuid for p in self.producers])
