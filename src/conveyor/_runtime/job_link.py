"""What ties a running job to its node: the progress it reports and the signals sent to it.

``JobLink`` is the node's side of ``conveyor.progress`` and ``conveyor.inbox``: the producer attaches
each job's context when it starts and detaches it when it ends (the ack then carries the progress
not written yet). ``ProgressWriter`` writes the reported progress of every job of the node in one
statement, each job at most once per ``progress_interval``, so a job reporting in a tight loop costs
the database one small write per interval.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Coroutine
from datetime import datetime
from typing import Any, TypeVar

from conveyor._runtime.clock import SYSTEM_CLOCK, Clock
from conveyor._runtime.service import Service
from conveyor.context import JobContext
from conveyor.engine.base import Engine
from conveyor.errors import SignalTimeoutError
from conveyor.inbox import take_next
from conveyor.telemetry import Telemetry

log = logging.getLogger("conveyor.node")

T = TypeVar("T")


class ProgressWriter(Service):
    """Writes the latest progress of the jobs that reported some, each at most once per interval."""

    name = "progress-writer"

    def __init__(self, engine: Engine, *, interval: float, clock: Clock = SYSTEM_CLOCK) -> None:
        super().__init__(None, clock)
        self.engine = engine
        self.spacing = interval
        self._dirty: dict[int, JobContext] = {}
        #: When (monotonic) each job's progress was last written.
        self._written_at: dict[int, float] = {}
        self.writes = 0

    def mark(self, context: JobContext) -> None:
        """``context`` has progress to write: now if its last write is old enough, else when it is."""
        was_idle = not self._dirty
        self._dirty[context.id] = context
        if was_idle or self._due(context.id, self.clock.monotonic()):
            self.wake()

    def forget(self, context: JobContext) -> None:
        if self._dirty or self._written_at:  # empty unless some job reports progress
            self._dirty.pop(context.id, None)
            self._written_at.pop(context.id, None)

    def _due(self, job_id: int, now: float) -> bool:
        last = self._written_at.get(job_id)
        return last is None or now - last >= self.spacing

    async def tick(self) -> None:
        now = self.clock.monotonic()
        due = [context for job_id, context in self._dirty.items() if self._due(job_id, now)]
        if due:
            await self._write(due, now)
        # Sleep until the next job is due (None: until one reports).
        later = [self._written_at.get(job_id, now) + self.spacing - now for job_id in self._dirty]
        self.interval = max(0.001, min(later)) if later else None

    async def _write(self, due: list[JobContext], now: float) -> None:
        for context in due:
            del self._dirty[context.id]
        snapshots = [(context, *context.progress.snapshot()) for context in due]
        try:
            await self.engine.record_progress([(c.id, c.attempt, fields) for c, _, fields in snapshots])
        except Exception as exc:
            if self.engine.is_transient(exc) or len(snapshots) == 1:
                # Kept for a later round while the job runs (and carried by its ack anyway): one
                # failed write loses no progress.
                log.warning("writing the progress of %d jobs failed: %r", len(snapshots), exc)
                for context in due:
                    if context.link is not None:
                        self._dirty.setdefault(context.id, context)
                        self._written_at[context.id] = now
                return
            # The statement refused something: write each job alone, so one bad entry holds back
            # no other job's progress.
            for snapshot in snapshots:
                await self._write_one(*snapshot, now)
            return
        self.writes += 1
        for context, version, _ in snapshots:
            self._written(context, version, now)

    async def _write_one(self, context: JobContext, version: int, fields: dict[str, Any], now: float) -> None:
        try:
            await self.engine.record_progress([(context.id, context.attempt, fields)])
        except Exception as exc:
            log.warning("writing the progress of job %s failed: %r", context.id, exc)
            return
        self.writes += 1
        self._written(context, version, now)

    def _written(self, context: JobContext, version: int, now: float) -> None:
        progress = context.progress
        progress.written = max(progress.written, version)
        if context.link is not None:  # still running: the next write waits its turn
            self._written_at[context.id] = now

    async def stop(self) -> None:
        await super().stop()
        self._dirty.clear()


class JobLink:
    """Progress and signals of the jobs one node runs: each job's ``conveyor.context.NodeLink``."""

    def __init__(
        self,
        engine: Engine,
        telemetry: Telemetry,
        *,
        progress_interval: float,
        poll_interval: float,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self.engine = engine
        self.telemetry = telemetry
        self.poll_interval = poll_interval
        self.clock = clock
        self.writer = ProgressWriter(engine, interval=progress_interval, clock=clock)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: int | None = None
        #: Jobs waiting in ``receive``, by id: the futures a signal notification resolves.
        self._receivers: dict[int, set[asyncio.Future[None]]] = {}

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()
        await self.writer.start()

    async def stop(self) -> None:
        await self.writer.stop()

    # -- the producer's side ---------------------------------------------------------------
    def attach(self, context: JobContext) -> None:
        context.link = self

    def detach(self, context: JobContext) -> dict[str, Any] | None:
        """The job ended: forget it; return its progress if some is not written yet (the ack
        carries it). Its context has no link any more: a report after the end is not written."""
        context.link = None
        self.writer.forget(context)
        progress = context._progress
        return progress.unwritten() if progress is not None else None

    # -- progress ----------------------------------------------------------------------------
    def progress_changed(self, context: JobContext) -> None:
        if threading.get_ident() == self._loop_thread or self._loop is None:
            self._changed(context)
        else:
            # A closed loop: the node is gone, and the job is being abandoned anyway.
            with contextlib.suppress(RuntimeError):
                self._loop.call_soon_threadsafe(self._changed, context)

    def _changed(self, context: JobContext) -> None:
        if context.link is not self:
            return  # reported after the end: the ack took what there was
        self.telemetry.emit("job.progress", job=context.job, progress=context.progress.fields)
        self.writer.mark(context)

    def now(self) -> datetime:
        return self.clock.now()

    # -- signals -----------------------------------------------------------------------------
    def poke(self, job_id: int) -> None:
        """A signal for ``job_id`` was stored: wake its ``receive`` calls, if any."""
        for waiter in self._receivers.get(job_id, ()):
            if not waiter.done():
                waiter.set_result(None)

    async def receive(self, context: JobContext, timeout: float | None) -> dict[str, Any]:
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        while True:
            message = take_next(context)
            if message is not None:
                return message
            remaining = None if deadline is None else deadline - loop.time()
            if remaining is not None and remaining <= 0:
                raise SignalTimeoutError(f"no signal came for job {context.id} within {timeout:g}s")
            waiter: asyncio.Future[None] = loop.create_future()
            waiters = self._receivers.setdefault(context.id, set())
            waiters.add(waiter)
            try:
                # Woken by the notification; polled as the fallback.
                pause = self.poll_interval if remaining is None else min(self.poll_interval, remaining)
                await asyncio.wait({waiter}, timeout=pause)
            finally:
                waiters.discard(waiter)
                if not waiters:
                    self._receivers.pop(context.id, None)
            job = await self.engine.get_job(context.id)
            if job is not None:
                context.inbox.messages = job.signals

    def run_on_loop(self, work: Coroutine[Any, Any, T]) -> T:
        if self._loop is None:
            raise RuntimeError("the node is not running")
        return asyncio.run_coroutine_threadsafe(work, self._loop).result()
