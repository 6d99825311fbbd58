"""The start/stop base every background duty of a node shares (producers, stager, later the
leader, pruner, rescuer and cron): a loop that runs ``tick`` when woken or when its interval passes.
"""

from __future__ import annotations

import asyncio
import logging
from abc import ABC, abstractmethod

from conveyor._runtime.alarm import Alarm
from conveyor._runtime.clock import SYSTEM_CLOCK, Clock
from conveyor._tasks import join

log = logging.getLogger("conveyor.service")

#: Seconds to wait after a failed tick before trying again, growing with consecutive failures.
ERROR_BACKOFF = (0.1, 0.5, 1.0, 2.0, 5.0)


class Service(ABC):
    """A background loop. ``wake()`` runs the next tick now; a wake during a tick runs one more."""

    name: str = "service"

    def __init__(self, interval: float | None, clock: Clock = SYSTEM_CLOCK) -> None:
        self.interval = interval
        self.clock = clock
        # A wake during a tick is remembered by the flag; one during a sleep rings the alarm.
        self._woken = False
        self._alarm = Alarm(clock)
        self._stopping = False
        self._task: asyncio.Task[None] | None = None

    @abstractmethod
    async def tick(self) -> None:
        """One round of work."""

    @property
    def is_running(self) -> bool:
        return self._task is not None and not self._task.done()

    async def start(self) -> None:
        self._stopping = False
        self._task = asyncio.create_task(self._loop(), name=f"conveyor-{self.name}")

    @property
    def asleep(self) -> bool:
        """Waiting for its next tick with nothing due yet: on a fake clock that stands still, it does
        nothing more until woken or the clock moves (a test waits for this after moving the clock)."""
        return self._alarm.waiting

    def wake(self) -> None:
        self._woken = True
        self._alarm.ring()

    async def stop(self) -> None:
        """Stop after the current tick (which is allowed to finish)."""
        self._stopping = True
        self.wake()
        if self._task is not None:
            await join(self._task)
            self._task = None

    async def _loop(self) -> None:
        failures = 0
        while not self._stopping:
            self._woken = False
            try:
                await self.tick()
                failures = 0
            except Exception:
                delay = ERROR_BACKOFF[min(failures, len(ERROR_BACKOFF) - 1)]
                failures += 1
                log.exception("%s failed; retrying in %.1fs", self.name, delay)
                await self._sleep(delay)
                continue
            if not self._stopping and not self._woken:
                await self._sleep(self.interval)

    async def _sleep(self, seconds: float | None) -> None:
        """Wait until woken (at once if woken since the last tick began) or ``seconds`` pass."""
        if not self._woken:
            await self._alarm.sleep(seconds)
