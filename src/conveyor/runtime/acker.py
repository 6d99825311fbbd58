"""Batched acks: finished jobs are written back one statement per batch, promptly, and never dropped
while the database can be reached."""

from __future__ import annotations

import asyncio
import logging

from conveyor.acks import Ack
from conveyor.engine.base import Engine
from conveyor.runtime.alarm import Alarm

log = logging.getLogger("conveyor.acker")

RETRY_DELAYS = (0.05, 0.2, 0.5, 1.0, 2.0)


class Acker:
    """Collects acks from every producer of a node and flushes them in batches."""

    def __init__(self, engine: Engine, *, batch_size: int = 1000, delay: float = 0.002) -> None:
        self.engine = engine
        self.batch_size = batch_size
        self.delay = delay
        self._pending: list[Ack] = []
        # Rung by push() or stop(): on any ack while idle, on a full batch while gathering one.
        self._alarm = Alarm()
        self._gathering = False
        self._task: asyncio.Task[None] | None = None
        self._stopping = False
        self.written = 0

    def push(self, ack: Ack) -> None:
        self._pending.append(ack)
        if self._alarm.sleeping and (not self._gathering or len(self._pending) >= self.batch_size):
            self._alarm.ring()

    @property
    def backlog(self) -> int:
        return len(self._pending)

    async def start(self) -> None:
        self._task = asyncio.create_task(self._loop(), name="conveyor-acker")

    async def stop(self, timeout: float = 30.0) -> None:
        """Write every pending ack (retrying while the database is unreachable, up to ``timeout``)."""
        self._stopping = True
        self._alarm.ring()
        if self._task is not None:
            try:
                await asyncio.wait_for(self._task, timeout)
            except TimeoutError:
                log.error(
                    "could not write %d acks before shutdown; their jobs will be rescued: %s",
                    len(self._pending),
                    [a.job_id for a in self._pending[:50]],
                )
            self._task = None

    async def _loop(self) -> None:
        while True:
            if not self._pending:
                if self._stopping:
                    return
                await self._wait(None, gathering=False)
                continue
            # Give a burst a moment to gather into one statement, unless a batch is already full.
            if len(self._pending) < self.batch_size and not self._stopping:
                await self._wait(self.delay, gathering=True)
            batch, self._pending = self._pending[: self.batch_size], self._pending[self.batch_size :]
            await self._write(batch)

    async def _wait(self, timeout: float | None, *, gathering: bool) -> None:
        """Until push() or stop() rings (see ``push``), or ``timeout`` passes."""
        self._gathering = gathering
        await self._alarm.sleep(timeout)

    async def _write(self, batch: list[Ack]) -> None:
        failures = 0
        while True:
            try:
                await self.engine.ack_jobs(batch)
                self.written += len(batch)
                return
            except Exception as exc:
                delay = RETRY_DELAYS[min(failures, len(RETRY_DELAYS) - 1)]
                failures += 1
                log.warning("writing %d acks failed (%s); retrying in %.2fs", len(batch), exc, delay)
                await asyncio.sleep(delay)
