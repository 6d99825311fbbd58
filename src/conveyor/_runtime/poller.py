"""The Poller: one poll per node for all its queues, waking the producers whose queue has jobs.

Notifications wake producers at once, but they are best effort (turned off, lost while the listener
reconnects, never sent by a client that inserts without them). Polling is the guarantee that such
jobs still run. A producer used to poll on its own with a fetch every ``poll_interval``, so an idle
node cost the database one write transaction per queue per interval. Now the node asks once which of
its queues hold jobs a fetch could claim (``Engine.waiting_queues``, a read) and wakes only those
producers; the others sleep until woken. A queue whose jobs cannot be claimed yet (an ordered lock
held, a fleet-wide limit reached) is woken every interval, as its producer used to wake itself.

The same read brings the persisted queue states (``Engine.poll_queues``: no extra transaction), so
a persisted pause or limit whose signal a node missed (sent while its listener reconnected, or by
a client that sends none) reaches it within one poll; the node applies only what changed since it
last looked (``Node.persisted_states``, ``queue_states.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from conveyor._runtime.clock import SYSTEM_CLOCK, Clock
from conveyor._runtime.producer import Producer
from conveyor._runtime.service import Service
from conveyor.engine.base import Engine
from conveyor.fleet import QueueState


class Poller(Service):
    name = "poller"

    def __init__(
        self,
        engine: Engine,
        producers: Callable[[], Iterable[Producer]],
        *,
        interval: float,
        clock: Clock = SYSTEM_CLOCK,
        name: str = "conveyor",
        on_states: Callable[[dict[str, QueueState]], None] | None = None,
    ) -> None:
        super().__init__(interval, clock)
        self.engine = engine
        #: The node's producers as they are now (queues start and stop while the node runs).
        self.producers = producers
        #: The instance name the persisted states are kept under, and who applies them.
        self.instance = name
        self.on_states = on_states

    async def tick(self) -> None:
        producers = list(self.producers())
        if not producers:
            return
        # A paused producer would not fetch (but its persisted state may resume it); a full one is
        # still woken: it notes the backlog and fetches as soon as a job of its ends.
        awake = sorted({p.queue for p in producers if not p.paused})
        if self.on_states is None:
            waiting = await self.engine.waiting_queues(awake) if awake else set()
        else:
            queues = sorted({p.queue for p in producers})
            poll = await self.engine.poll_queues(self.instance, queues, awake=awake)
            self.on_states(poll.states)
            waiting = set(poll.waiting)
        for producer in self.producers():
            if producer.queue in waiting and not producer.paused:
                producer.wake()
