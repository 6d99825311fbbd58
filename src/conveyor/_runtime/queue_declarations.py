"""Dynamic queues on a node: the queues declared in the database (``conveyor.dynamic_queues``),
read at once when a declaration changes (the app that changed it signals every node) and every
``EVERY_POLLS`` poll intervals besides (the backstop when notifications are off or missed),
started here when they name this node (or every node), changed when
their declaration changes, stopped when it goes. A declared queue this node's configuration also
runs takes the declaration's limits and pause, and is never stopped by it."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from conveyor._runtime.clock import Clock
from conveyor._runtime.service import Service
from conveyor.dynamic_queues import declared, runs_on
from conveyor.engine.base import Engine
from conveyor.queue_settings import QueueSettings, fetch_limits

if TYPE_CHECKING:
    from conveyor._runtime.queue_control import QueueControl

log = logging.getLogger("conveyor.node")

#: The backstop read comes every this many poll intervals: an idle node's one extra statement a poll
#: would cost more than the idle budget allows (benchmarks' ``idle``: ≤ 5 transactions a second).
EVERY_POLLS = 5


class QueueDeclarations(Service):
    """Keeps the node's queues as the declarations say (``tick`` is one look)."""

    name = "queue-declarations"

    def __init__(self, node: QueueControl, engine: Engine, interval: float, clock: Clock) -> None:
        super().__init__(interval * EVERY_POLLS, clock)
        self.node = node
        self.engine = engine
        #: What was applied of each declared queue, and which queues a declaration started.
        self._applied: dict[str, tuple[QueueSettings, bool]] = {}
        self._started: set[str] = set()
        self._reported: dict[str, object] = {}

    async def tick(self) -> None:
        wanted: dict[str, tuple[QueueSettings, bool]] = {}
        for row in await self.engine.list_stored_queues():
            if not runs_on(row, self.node.name):
                continue
            try:
                wanted[row.name] = declared(row)
            except Exception as exc:  # another client's junk: said once, skipped
                if self._reported.get(row.name) != row:
                    self._reported[row.name] = row
                    log.warning("declared queue %r is skipped: %s", row.name, exc)
        for name, (settings, paused) in wanted.items():
            if self._applied.get(name) == (settings, paused):
                continue
            if name not in self.node.producers:
                try:
                    await self.node.start_queue(name, settings.limit, settings=settings)
                finally:
                    # A start that failed after its producer began (its first heartbeat, say) still
                    # started the queue: the retry only rescales it, and the stop must still come.
                    if name in self.node.producers:
                        self._started.add(name)
            else:
                self.node.scale(name, settings.limit)
                for producer in self.node.targets(name):
                    producer.limits = fetch_limits(settings)
                    producer.wake()
            (self.node.pause if paused else self.node.resume)(name)
            self._applied[name] = (settings, paused)
        for name in list(self._applied):
            if name not in wanted:
                del self._applied[name]
                if name in self._started:
                    self._started.discard(name)
                    await self.node.stop_queue(name)
