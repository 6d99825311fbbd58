"""The Poller: one poll per node for all its queues, waking the producers whose queue has jobs.

Notifications wake producers at once, but they are best effort (turned off, lost while the listener
reconnects, never sent by a client that inserts without them). Polling is the guarantee that such
jobs still run. A producer used to poll on its own with a fetch every ``poll_interval``, so an idle
node cost the database one write transaction per queue per interval. Now the node asks once which of
its queues hold jobs a fetch could claim (``Engine.waiting_queues``, a read) and wakes only those
producers; the others sleep until woken. A queue whose jobs cannot be claimed yet (an ordered lock
held, a fleet-wide limit reached) is woken every interval, as its producer used to wake itself.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from conveyor._runtime.clock import SYSTEM_CLOCK, Clock
from conveyor._runtime.producer import Producer
from conveyor._runtime.service import Service
from conveyor.engine.base import Engine


class Poller(Service):
    name = "poller"

    def __init__(
        self,
        engine: Engine,
        producers: Callable[[], Iterable[Producer]],
        *,
        interval: float,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        super().__init__(interval, clock)
        self.engine = engine
        #: The node's producers as they are now (queues start and stop while the node runs).
        self.producers = producers

    async def tick(self) -> None:
        # A paused producer would not fetch; a full one is still woken: it notes the backlog and
        # fetches as soon as a job of its ends.
        awake = [p for p in self.producers() if not p.paused]
        if not awake:
            return
        waiting = await self.engine.waiting_queues(sorted({p.queue for p in awake}))
        for producer in awake:
            if producer.queue in waiting:
                producer.wake()
