"""Leadership by lease: one row per instance name in ``oban_leaders`` with an expiry.

The leader renews at half the TTL; followers look every tenth of it. The lease is written a tenth
short of the TTL, so a leader that dies is replaced within one TTL. A clean stop resigns and
announces it on the leader channel, and the other nodes elect at once. A leader killed or frozen is
replaced sooner: once its node's producer rows are all older than ``producer_timeout`` (the age at
which rescue judges them dead), a follower in unbroken contact with the database takes the lease
(``elect_leader(stale_after=...)``), and its rescue runs at once (``on_elected``). So a dead
leader's jobs run again within ``producer_timeout`` and one follower check (TTL/10), not a whole TTL.

In a mixed fleet (``Settings.mixed_fleet``) a Conveyor node takes the lease from an oban-py leader
and announces it on the leader channel: oban-py elects again on any leader notification, finds the
lease gone and stops leading, so its age-based lifeline never rescues a live job.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from conveyor._runtime.clock import SYSTEM_CLOCK, Clock
from conveyor._runtime.service import Service
from conveyor.engine.base import Engine
from conveyor.telemetry import Telemetry

log = logging.getLogger("conveyor.leader")


class Leadership(Service):
    name = "leadership"

    def __init__(
        self,
        engine: Engine,
        telemetry: Telemetry,
        *,
        name: str,
        node: str,
        ttl: float,
        clock: Clock = SYSTEM_CLOCK,
        take_from_foreign: bool = False,
        stale_after: Callable[[], float | None] = lambda: None,
    ) -> None:
        self.check_interval = ttl / 10
        self.take_from_foreign = take_from_foreign
        super().__init__(self.check_interval, clock)
        self.engine = engine
        self.telemetry = telemetry
        self.instance = name
        self.node = node
        self.ttl = ttl
        self.is_leader = False
        #: Seconds after which the leader's silent producer rows free its lease (None: not now).
        self.stale_after = stale_after
        #: Called when this node becomes the leader (the lifeline rescues at once).
        self.on_elected: list[Callable[[], None]] = []

    async def tick(self) -> None:
        elected = await self.engine.elect_leader(
            self.instance,
            self.node,
            self.ttl - self.check_interval,
            now=self.clock.database_now(),
            take_from_foreign=self.take_from_foreign,
            stale_after=None if self.is_leader else self.stale_after(),
        )
        was_leader, self.is_leader = self.is_leader, elected is not None
        self.interval = self.ttl / 2 if self.is_leader else self.check_interval
        if self.is_leader and not was_leader:
            log.info("node %s is now the leader of %r", self.node, self.instance)
            self.telemetry.emit("leader.elected", node=self.node, name=self.instance)
            for hook in self.on_elected:
                hook()
            if self.take_from_foreign:
                await self._announce()
        elif was_leader and not self.is_leader:
            log.warning("node %s lost the leadership of %r", self.node, self.instance)
            self.telemetry.emit("leader.lost", node=self.node, name=self.instance)

    async def _announce(self) -> None:
        """Tell the fleet a new leader holds the lease: an oban-py node that led until now elects
        again on hearing it (any leader notification does that) and learns it no longer leads."""
        payload = {"action": "elected", "node": self.node, "name": self.instance}
        try:
            await self.engine.notify("leader", payload)
        except Exception:
            log.exception("announcing the leadership failed; oban-py nodes notice at their next election")

    async def stop(self) -> None:
        await super().stop()
        if self.is_leader:
            self.is_leader = False
            try:
                await self.engine.resign_leader(self.instance, self.node)
            except Exception:
                log.exception("resigning the leadership failed; it will expire")
            self.telemetry.emit("leader.resigned", node=self.node, name=self.instance)

    def on_resign(self, payload: dict[str, object]) -> None:
        """Another node resigned: try to take over now rather than at the next check."""
        if payload.get("name") == self.instance and payload.get("node") != self.node:
            self.wake()
