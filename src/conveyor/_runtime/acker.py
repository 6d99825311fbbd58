"""Batched acks: finished jobs are written back one statement per batch, promptly, and never dropped
while the database can be reached.

Two kinds of failure are told apart (``Engine.is_transient``). A transient one (the database is
away, busy or restarting) retries the same batch with a growing pause. Any other means the statement
refused something in the batch: the batch is split in halves until the ack at fault stands alone,
so every other ack is written at once. The ack at fault is then replaced by a fallback that records
why (see ``fallback_acks``); one bad ack never holds back the others. When even the last fallback,
fixed text, is refused, the cause is not the ack's data but the statement or the database (a schema
being replaced, a read-only server, a pooler's error): the ack is kept and tried again after a
pause, for as long as it takes. Dropping it would let the heartbeat give back a job that finished,
and run it again.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime

from conveyor._runtime.alarm import Alarm
from conveyor._runtime.clock import SYSTEM_CLOCK, Clock
from conveyor.acks import Ack, error_entry
from conveyor.engine.base import Engine
from conveyor.job import JobState
from conveyor.telemetry import Telemetry

log = logging.getLogger("conveyor.acker")

RETRY_DELAYS = (0.05, 0.2, 0.5, 1.0, 2.0)

#: The batch a stretched gathering window aims at: past about this many acks a statement's fixed
#: cost (a round trip, a commit, the notification) is a small part of what it does.
TARGET_BATCH = 100
#: A window is stretched only when at least this many more acks are expected within ``max_delay``:
#: below that, waiting longer would add latency and gather nothing.
MIN_STRETCH_GAIN = 2.0
#: A rate last sampled this many ``max_delay`` ago is stale (the flow stopped since): no stretching.
STALE_RATE = 10

#: Called on the node's loop with the acks of a batch that the database applied (stale ones, which
#: changed nothing, left out), once they are committed. Features that act when jobs finish (waking
#: waiters, releasing dependants) plug in here. A hook's failure is logged and changes nothing else.
AckHook = Callable[[Sequence[Ack]], Awaitable[None]]


def fallback_acks(ack: Ack, refused: BaseException, at: datetime) -> list[Ack]:
    """What to write, in order, when the database refuses ``ack`` itself.

    First the same outcome without the parts that can carry bad data (recorded meta, the snooze
    count), its error text re-sanitised and a note of the refusal; then, as a last resort, a fixed
    ASCII entry with the job completed (if it was) or discarded.
    """
    lines = str(refused).strip().splitlines()
    reason = f"{type(refused).__name__}: {lines[0] if lines else ''}"
    note = f"Conveyor could not write this attempt's outcome ({ack.state.value}) as given: {reason}"
    original = ack.error.get("error") if ack.error else None
    text = f"{note}\n{original}" if isinstance(original, str) else note
    schedule_in = ack.schedule_in
    if schedule_in is not None and not (math.isfinite(schedule_in) and schedule_in >= 0):
        schedule_in = 0.0
    first = Ack(ack.job_id, ack.attempt, ack.state, schedule_in, error_entry(ack.attempt, at, text))
    last_state = JobState.COMPLETED if ack.state is JobState.COMPLETED else JobState.DISCARDED
    last_text = f"Conveyor could not write this attempt's outcome ({ack.state.value}); see the node's log"
    last = Ack(ack.job_id, ack.attempt, last_state, error=error_entry(ack.attempt, at, last_text))
    return [first, last]


class Acker:
    """Collects acks from every producer of a node and flushes them in batches."""

    def __init__(
        self,
        engine: Engine,
        *,
        batch_size: int = 1000,
        delay: float = 0.002,
        max_delay: float = 0.01,
        clock: Clock = SYSTEM_CLOCK,
        telemetry: Telemetry | None = None,
        node: str | None = None,
    ) -> None:
        self.engine = engine
        #: The node whose runs these acks end: the database applies an ack only while the row's
        #: claim is this node's (None: any node's, as for acks written outside a node).
        self.node = node
        #: Where each written batch is told (``acker.acked``).
        self.telemetry = telemetry or Telemetry()
        self.clock = clock
        self.batch_size = batch_size
        self.delay = delay
        #: The longest gathering window, reached while acks flow fast (see ``window``).
        self.max_delay = max_delay
        #: Acks pushed so far, and the smoothed rate at which they come (acks per second), sampled
        #: when a batch is taken (``_sample``).
        self._pushed = 0
        #: (acks pushed, the clock's monotonic time) at the last sample; None before the first.
        self._sampled: tuple[int, float] | None = None
        self.rate = 0.0
        self._pending: list[Ack] = []
        self._writing: list[Ack] = []
        # Rung by push() or stop(): on any ack while idle, on a full batch while gathering one.
        # Gathering and retry pauses are latency mechanics, kept in real time even on a fake clock;
        # the clock dates what is written (completed_at, errors' "at", retry schedules) and times the
        # rate of acks (``_sample``): on a fake clock the rate is then one a test decides.
        self._alarm = Alarm()
        self._gathering = False
        self._task: asyncio.Task[None] | None = None
        self._stopping = False
        self.written = 0
        #: See ``AckHook``; run in order after each written batch.
        self.hooks: list[AckHook] = []
        #: Acks the database refused and that were replaced by a fallback (or, rarely, lost).
        self.refused = 0
        #: Whether more acks may follow soon (the node has jobs running). When none can, waiting
        #: ``delay`` to gather a batch only adds to the latency of the one there is.
        self.busy: Callable[[], bool] = lambda: True

    def push(self, ack: Ack) -> None:
        self._pending.append(ack)
        self._pushed += 1
        if self._alarm.sleeping and (not self._gathering or len(self._pending) >= self.batch_size):
            self._alarm.ring()

    @property
    def backlog(self) -> int:
        return len(self._pending)

    def held(self) -> set[int]:
        """Ids of the jobs whose acks are waiting or being written (still executing in the database)."""
        return {ack.job_id for ack in self._pending} | {ack.job_id for ack in self._writing}

    def held_attempts(self) -> list[tuple[int, int]]:
        """(job id, attempt) of the acks waiting or being written: jobs that no longer run, though
        their rows may still say executing (a global limit need not count them)."""
        return [(ack.job_id, ack.attempt) for ack in (*self._writing, *self._pending)]

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
            if len(self._pending) < self.batch_size and not self._stopping and self.busy():
                await self._wait(self.window(), gathering=True)
            self._sample()
            batch, self._pending = self._pending[: self.batch_size], self._pending[self.batch_size :]
            self._writing = batch
            try:
                await self._write(batch)
            finally:
                self._writing = []

    def window(self) -> float:
        """How long to gather acks before writing them: ``delay``, stretched towards ``max_delay``
        while acks come fast enough to fill a bigger batch in that time (``TARGET_BATCH`` at most).

        A node under load then writes fewer, fuller statements (each has a fixed cost on the
        server: four nodes of limit 25 drained 14 % more jobs a second with 10 ms windows than with
        2 ms ones), while a lone ack, or a trickle of them, is written as soon as before."""
        if self.max_delay <= self.delay or self.rate * self.max_delay < MIN_STRETCH_GAIN:
            return self.delay
        if self._sampled is None or self.clock.monotonic() - self._sampled[1] > STALE_RATE * self.max_delay:
            return self.delay
        return min(self.max_delay, max(self.delay, TARGET_BATCH / self.rate))

    def _sample(self) -> None:
        """Update ``rate`` with the acks pushed since the last batch was taken (an average of the
        last two samples, so a pause shows within two batches)."""
        now = self.clock.monotonic()
        if self._sampled is not None:
            pushed, at = self._sampled
            if now <= at:
                return
            recent = (self._pushed - pushed) / (now - at)
            self.rate = (self.rate + recent) / 2
        self._sampled = (self._pushed, now)

    async def _wait(self, timeout: float | None, *, gathering: bool) -> None:
        """Until push() or stop() rings (see ``push``), or ``timeout`` passes."""
        self._gathering = gathering
        await self._alarm.sleep(timeout)

    async def _write(self, batch: Sequence[Ack]) -> None:
        """Write ``batch``; isolate and replace the acks the database refuses (see the module doc)."""
        refused = await self._attempt(batch)
        if refused is None:
            return
        if len(batch) > 1:
            half = len(batch) // 2
            await self._write(batch[:half])
            await self._write(batch[half:])
            return
        ack = batch[0]
        self.refused += 1
        log.error(
            "the database refused the ack of job %s (attempt %s, %s): %r; writing a fallback",
            ack.job_id,
            ack.attempt,
            ack.state.value,
            refused,
        )
        for fallback in fallback_acks(ack, refused, self.clock.now()):
            refused = await self._attempt([fallback])
            if refused is None:
                return
        # Refused whatever it carries: the ack stays held (the job counts as running, so nothing
        # gives it back) and is tried again, as given first, until the cause passes.
        failures = 0
        while True:
            delay = RETRY_DELAYS[min(failures, len(RETRY_DELAYS) - 1)]
            failures += 1
            log.error(
                "no ack of job %s could be written (%r); trying again in %.2fs", ack.job_id, refused, delay
            )
            await asyncio.sleep(delay)
            for candidate in (ack, *fallback_acks(ack, refused, self.clock.now())):
                refused = await self._attempt([candidate])
                if refused is None:
                    return

    async def _attempt(self, batch: Sequence[Ack]) -> Exception | None:
        """Write ``batch``, retrying while failures are transient; return a refusal, else None."""
        failures = 0
        while True:
            began = time.perf_counter()
            try:
                applied = await self.engine.ack_jobs(batch, now=self.clock.database_now(), node=self.node)
            except Exception as exc:
                if not self.engine.is_transient(exc):
                    return exc
                delay = RETRY_DELAYS[min(failures, len(RETRY_DELAYS) - 1)]
                failures += 1
                log.warning("writing %d acks failed (%s); retrying in %.2fs", len(batch), exc, delay)
                await asyncio.sleep(delay)
            else:
                self.written += len(batch)
                if self.telemetry.listens("acker.acked"):
                    self.telemetry.emit(
                        "acker.acked",
                        count=len(batch),
                        applied=len(applied),
                        duration=time.perf_counter() - began,
                        states=dict(Counter(ack.state.value for ack in batch)),
                    )
                if self.hooks and applied:
                    await self._run_hooks(batch, applied)
                return None

    async def _run_hooks(self, batch: Sequence[Ack], applied: Sequence[int]) -> None:
        written = set(applied)
        acks = [ack for ack in batch if ack.job_id in written]
        for hook in tuple(self.hooks):
            try:
                await hook(acks)
            except Exception:
                log.exception("ack hook %r failed on %d acks", hook, len(acks))
