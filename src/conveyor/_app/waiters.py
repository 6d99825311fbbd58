"""Waiting for jobs to finish (``Conveyor.wait``, ``Conveyor.relay``), however many wait at once.

Everyone waiting through one engine shares one ``Waiters``: one listener on the "ended" channel
(``ack_jobs`` and ``cancel_jobs`` announce the ids they wrote) and one poll, every
``poll_interval``, asking the states of all the awaited jobs in one query: the correctness fallback
when a notification is lost. A job is read again only when a notification names it or the poll
finds its state changed, so 1,000 waiters cost one small query a second, not 1,000.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from conveyor.engine.base import Engine, Listener
from conveyor.errors import (
    JobCancelledError,
    JobDiscardedError,
    JobFailedError,
    JobNotFoundError,
    WaitTimeoutError,
)
from conveyor.filters import JobFilter
from conveyor.job import Job, JobState

log = logging.getLogger("conveyor.wait")

#: Jobs read per query when waiters are told to look again.
READ_CHUNK = 500


class _Waiter:
    """One ``wait`` call: woken with the job as read again (None: it no longer exists)."""

    __slots__ = ("event", "job", "state")

    def __init__(self) -> None:
        self.event = asyncio.Event()
        self.job: Job | None = None
        self.state: JobState | None = None


def verdict(job: Job, through_retries: bool) -> Job | None:
    """The job, when waiting is over with success; raise when it is over otherwise; None: go on."""
    if job.state is JobState.COMPLETED:
        return job
    if job.state is JobState.CANCELLED:
        raise JobCancelledError(job)
    if job.state is JobState.DISCARDED:
        raise JobDiscardedError(job)
    if job.state is JobState.RETRYABLE and not through_retries:
        raise JobFailedError(job)
    return None


class Waiters:
    """The waits on one engine, on the loop that engine belongs to."""

    def __init__(self, engine: Engine, *, poll_interval: float, notifications: bool = True) -> None:
        self.engine = engine
        self.poll_interval = poll_interval
        self.notifications = notifications
        self._waiting: dict[int, set[_Waiter]] = {}
        self._listener: Listener | None = None
        self._listening: asyncio.Lock | None = None
        self._poller: asyncio.Task[None] | None = None
        self._stale: set[int] = set()
        self._reading: asyncio.Task[None] | None = None
        #: Queries made by the poll (a benchmark counts them).
        self.polls = 0

    async def wait(self, job_id: int, timeout: float | None, through_retries: bool) -> Job:
        """The job once it completes (see ``Conveyor.wait``)."""
        return await self._wait(job_id, None, timeout, through_retries)

    async def relay(
        self, enqueue: Callable[[], Awaitable[int]], timeout: float | None, through_retries: bool
    ) -> Job:
        """``enqueue()`` the job, then wait for it as ``wait`` does. Listening has begun before the
        job exists, so its end cannot pass unheard: no first read of it is needed."""
        return await self._wait(None, enqueue, timeout, through_retries)

    async def _wait(
        self,
        job_id: int | None,
        enqueue: Callable[[], Awaitable[int]] | None,
        timeout: float | None,
        through_retries: bool,
    ) -> Job:
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        # Listening first, then reading (or enqueueing): an end announced in between is not missed.
        await self._listen()
        if enqueue is not None:
            job_id = await enqueue()
        assert job_id is not None
        # Registered at once, with no await since the enqueue returned: no notification can slip by.
        waiter = _Waiter()
        self._waiting.setdefault(job_id, set()).add(waiter)
        try:
            self._ensure_polling()
            job = await self.engine.get_job(job_id) if enqueue is None else None
            state = None
            while True:
                if enqueue is None or job is not None or waiter.event.is_set():
                    if job is None:
                        raise JobNotFoundError(job_id)
                    done = verdict(job, through_retries)
                    if done is not None:
                        return done
                    waiter.state = state = job.state
                remaining = None if deadline is None else deadline - loop.time()
                if remaining is not None and remaining <= 0:
                    raise WaitTimeoutError(job_id, timeout or 0.0, state)
                try:
                    await asyncio.wait_for(waiter.event.wait(), remaining)
                except TimeoutError:
                    raise WaitTimeoutError(job_id, timeout or 0.0, state) from None
                job = waiter.job
                enqueue = None  # from here on, as any wait: every wake-up brings the job read again
                waiter.event.clear()
        finally:
            waiters = self._waiting.get(job_id)
            if waiters is not None:
                waiters.discard(waiter)
                if not waiters:
                    del self._waiting[job_id]

    @property
    def waiting(self) -> int:
        return sum(len(waiters) for waiters in self._waiting.values())

    @property
    def settled(self) -> int:
        """The waits that have read their job once (and now only listen and poll)."""
        return sum(1 for waiters in self._waiting.values() for waiter in waiters if waiter.state is not None)

    async def stop(self) -> None:
        for task in (self._poller, self._reading):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
        self._poller = self._reading = None
        if self._listener is not None:
            listener, self._listener = self._listener, None
            await listener.stop()

    # -- being told ------------------------------------------------------------------------------
    async def _listen(self) -> None:
        if self._listener is not None or not self.notifications:
            return
        self._listening = self._listening or asyncio.Lock()
        async with self._listening:
            if self._listener is None:
                try:
                    self._listener = await self.engine.listen(("ended",), self._on_notification)
                except Exception as exc:  # polling still finds every end, only later
                    log.warning("cannot listen for job ends (%r); waits rely on polling", exc)
                    self.notifications = False

    def _on_notification(self, channel: str, payload: dict[str, Any]) -> None:
        if channel == "listener":  # (re)connected: anything may have ended meanwhile
            self._look_again(self._waiting)
            return
        ids = payload.get("ids")
        if isinstance(ids, list):
            self._look_again([i for i in ids if isinstance(i, int) and i in self._waiting])

    def _look_again(self, ids: Any) -> None:
        found = set(ids)
        if not found:
            return
        self._stale |= found
        if self._reading is None or self._reading.done():
            self._reading = asyncio.get_running_loop().create_task(self._read())

    async def _read(self) -> None:
        """Read the stale jobs again (one query per ``READ_CHUNK``) and wake their waiters."""
        while self._stale:
            ids, self._stale = sorted(self._stale), set()
            for start in range(0, len(ids), READ_CHUNK):
                chunk = ids[start : start + READ_CHUNK]
                try:
                    jobs = await self.engine.list_jobs(JobFilter(ids=tuple(chunk), limit=len(chunk)))
                except Exception as exc:
                    log.warning("reading %d awaited jobs failed (%r); the poll retries", len(chunk), exc)
                    continue
                found = {job.id: job for job in jobs}
                for job_id in chunk:
                    for waiter in self._waiting.get(job_id, ()):
                        waiter.job = found.get(job_id)
                        waiter.event.set()

    # -- polling -------------------------------------------------------------------------------
    def _ensure_polling(self) -> None:
        if self._poller is None or self._poller.done():
            self._poller = asyncio.get_running_loop().create_task(self._poll())

    async def _poll(self) -> None:
        """While anyone waits: every interval, one query for the states of all awaited jobs."""
        while self._waiting:
            await asyncio.sleep(self.poll_interval)
            ids = list(self._waiting)
            if not ids:
                return
            try:
                self.polls += 1
                states = await self.engine.job_states(ids)
            except Exception as exc:
                log.warning("polling %d awaited jobs failed: %r", len(ids), exc)
                continue
            changed = [
                job_id
                for job_id in ids
                if any(waiter.state != states.get(job_id) for waiter in self._waiting.get(job_id, ()))
            ]
            self._look_again(changed)
