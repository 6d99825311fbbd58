"""The Producer: one per queue per node. It claims as many jobs as it has free slots, runs them,
and hands each result to the acker."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from conveyor._runtime.acker import Acker
from conveyor._runtime.clock import SYSTEM_CLOCK, Clock, Timer
from conveyor._runtime.job_link import JobLink
from conveyor._runtime.runner import JobRunner, with_meta
from conveyor._runtime.service import Service
from conveyor.context import JobContext
from conveyor.definition import ExecutorKind
from conveyor.engine.base import Engine
from conveyor.limits import NO_LIMITS, FetchLimits

log = logging.getLogger("conveyor.producer")

#: After a claim a global limit stopped, the next try comes this soon (another node's job may end).
CAPPED_RETRY = 0.05
#: The soonest a rate-limited producer tries again (the rate's spacing, at least this).
MIN_CAPPED_RETRY = 0.005


@dataclass(slots=True)
class RunningJob(JobContext):
    """A job this producer runs: its context (what the job's code gets from ``current_job()``) and
    the producer's record of the run in one object, one allocation per job fewer."""

    #: The run's task (set as soon as it is made).
    task: asyncio.Task[None] = field(init=False, repr=False, compare=False)
    #: Stopped because its row is no longer this attempt's (``Producer.disown_job``): no ack.
    disowned: bool = field(default=False, init=False, repr=False, compare=False)

    @property
    def context(self) -> JobContext:
        return self


class Producer(Service):
    """Fetches demand-limited batches for one queue when woken: by a notification, a finished job,
    or the node's one poll for all its queues (``poller.py``). It does not poll by itself."""

    def __init__(
        self,
        queue: str,
        limit: int,
        *,
        engine: Engine,
        runner: JobRunner,
        acker: Acker,
        node: str,
        poll_interval: float,
        executor: ExecutorKind = ExecutorKind.AUTO,
        clock: Clock = SYSTEM_CLOCK,
        limits: FetchLimits = NO_LIMITS,
        link: JobLink | None = None,
        dead_after: Callable[[], float | None] = lambda: None,
        cancel_grace: float = 300.0,
    ) -> None:
        super().__init__(None, clock)
        self.poll_interval = poll_interval
        #: The node's side of progress and signals (None: jobs run without them, as in some tests).
        self.link = link
        self.name = f"producer:{queue}"
        self.queue = queue
        self.limit = limit
        self.paused = False
        self.uuid = str(uuid.uuid4())
        self.engine = engine
        self.runner = runner
        self.acker = acker
        self.node = node
        self.executor = executor
        #: Fleet-wide caps the engine applies to each fetch.
        self.limits = limits
        #: Seconds after which another producer's silent row frees its global slots (None: not
        #: yet, or never); asked at each fetch (``Heartbeat.trusted``).
        self.dead_after = dead_after
        self._retry_timer: Timer | None = None
        self.capped = False
        self.running: dict[int, RunningJob] = {}
        #: True while a fetch is under way: jobs it claimed are in the database, not yet in running.
        self.fetching = False
        # True when the queue may hold more jobs than we could take: a freed slot should fetch.
        self._backlog = False
        self._idle = asyncio.Event()
        self._idle.set()
        #: Running jobs told to stop (a cancel, or their row no longer this attempt's), with when
        #: (monotonic): a cancelled one keeps its lock and global slot while it runs (``holding``).
        self.stopping: dict[int, float] = {}
        #: Called when such a run ends, so the heartbeat lets go of its job at once.
        self.on_stopped: Callable[[], None] | None = None
        #: Seconds a stopping run is held before the node lets go of it with a warning.
        self.cancel_grace = cancel_grace
        self._let_go: set[int] = set()
        #: A stopping run ended since the last beat: once the beat has let go of its job, fetch.
        self.released = False

    async def tick(self) -> None:
        if self.paused:
            return
        demand = self.limit - len(self.running)
        if demand <= 0:
            self._backlog = True
            return
        self.fetching = True
        began = time.perf_counter()
        try:
            jobs = await self.engine.fetch_jobs(
                self.queue,
                demand,
                node=self.node,
                producer=self.uuid,
                now=self.clock.database_now(),
                limits=None if self.limits.unlimited else self.limits,
                # Finished jobs free their global slots at once, not when their acks are written.
                ended=self.acker.held_attempts() if self.limits.global_limit else (),
                # A killed node's jobs free their global slots once its heartbeat is that old.
                dead_after=self.dead_after() if self.limits.global_limit else None,
            )
        finally:
            self.fetching = False
        self._backlog = len(jobs) == demand
        #: A fleet-wide limit stopped the last claim: written acks of this node may free it.
        self.capped = bool(getattr(jobs, "capped", False))
        telemetry = self.runner.telemetry
        if telemetry.listens("producer.fetch"):
            telemetry.emit(
                "producer.fetch",
                node=self.node,
                queue=self.queue,
                demand=demand,
                count=len(jobs),
                duration=time.perf_counter() - began,
                capped=self.capped,
            )
        if self.capped:
            # A fleet-wide limit stopped the claim, not an empty queue: try again once a start may
            # have left the rate window or a slot may have freed on another node (no node is told).
            self._retry_soon()
        # The loop's own create_task: asyncio.create_task adds a call and names the task apart,
        # 0.6 us of the few a no-op job costs.
        create_task = asyncio.get_running_loop().create_task
        running, link, execute = self.running, self.link, self._execute
        for job in jobs:
            job_id = job.id
            if job_id in running:
                self._claimed_again(job_id)
                continue
            context = RunningJob(job)
            if link is not None:
                link.attach(context)
            context.task = create_task(execute(context), name=f"conveyor-job-{job_id}")
            running[job_id] = context
        if running:
            self._idle.clear()

    def _claimed_again(self, job_id: int) -> None:
        """A job this producer runs came back in a claim. Only an undone claim does that: the
        server crashed with the hot path's ``synchronous_commit`` off, came back with the job
        available, and this producer took it first. The run under way acks it (the claim gave it
        the same attempt); a second run would overlap the first."""
        log.warning(
            "job %s was claimed again while it runs on this node (a claim undone by a crash of the "
            "database server?); it is not started twice",
            job_id,
        )

    def _retry_soon(self) -> None:
        if self._retry_timer is not None:
            return
        rate = self.limits.rate
        delay = min(self.poll_interval, rate.spacing if rate else CAPPED_RETRY)

        def retry() -> None:
            self._retry_timer = None
            self.wake()

        # Jittered, so the nodes waiting on one cap take turns instead of the same one always
        # coming first (the one whose jobs ended in step with its timer).
        delay = max(delay, MIN_CAPPED_RETRY) * random.uniform(0.5, 1.5)
        self._retry_timer = self.clock.call_later(delay, retry)

    async def _execute(self, context: JobContext) -> None:
        job_id = context.job.id
        try:
            ack = await self.runner.run(context, self.executor)
        except asyncio.CancelledError:
            # Shutdown passed its deadline: the node releases this job instead of acking it.
            return
        except Exception as exc:  # the runner turns job errors into acks; this is a bug in Conveyor
            log.exception("running job %s failed inside Conveyor", job_id)
            ack = self.runner.failure(context.job, exc)  # retried later, never left executing
        finally:
            running = self.running.pop(job_id, None)
            if not self.running:
                self._idle.set()
            # Both are empty unless a run was told to stop: no set or dict operation per job then.
            if self._let_go:
                self._let_go.discard(job_id)
            if self.stopping and self.stopping.pop(job_id, None) is not None:
                self.released = True
                if self.on_stopped is not None:
                    self.on_stopped()  # the heartbeat tells the database the run is over
            progress = self.link.detach(context) if self.link is not None else None
        if progress is not None:  # reported since the last write: the ack stores it
            ack = with_meta(ack, {"progress": progress})
        if running is None or not running.disowned:
            self.acker.push(ack)
        # A job that ends frees a global slot at once (its ack is not counted), never a rate one.
        if self._backlog or (self.capped and self.limits.global_limit is not None):
            self.wake()

    @property
    def backlog(self) -> bool:
        """The last fetch took all it asked for: the queue may hold more jobs."""
        return self._backlog

    def cancel_job(self, job_id: int, reason: str) -> bool:
        """Stop a running job: its context is flagged, an async task is cancelled, a process killed."""
        running = self.running.get(job_id)
        if running is None:
            return False
        told = job_id in self.stopping
        self.stopping.setdefault(job_id, self.clock.monotonic())
        running.context.cancel(reason)
        if self.runner.processes is not None and self.runner.processes.kill(job_id):
            return True
        if running.context.executor == "thread":
            return True  # told through its context; it is marked cancelled when it returns
        # Once only: the signal and the heartbeat can both stop one job, and a second cancel would
        # interrupt the job's own clean-up (an ``except CancelledError`` that awaits).
        if not told:
            running.task.cancel()
        return True

    def holding(self) -> tuple[int, ...]:
        """The jobs this producer still runs, for its heartbeat: a cancelled one among them keeps
        its ordered lock and global-limit slot in the database (``Engine.record_producers``). A run
        told to stop more than ``cancel_grace`` ago is left out, with a warning: a thread that never
        returns must not hold its key forever."""
        now = self.clock.monotonic()
        for job_id, since in self.stopping.items():
            if now - since >= self.cancel_grace and job_id not in self._let_go:
                self._let_go.add(job_id)
                log.warning(
                    "job %s was cancelled %.0fs ago and its run has not returned (a thread cannot be "
                    "interrupted): its lock and global-limit slot are let go, the run still going",
                    job_id,
                    now - since,
                )
        return tuple(job_id for job_id in self.running if job_id not in self._let_go)

    def disown_job(self, job_id: int) -> bool:
        """Stop a running job whose row is no longer this attempt's (cancelled or deleted, rescued
        and claimed again, or a claim that a crash of the server undid), and write no ack for it.

        The row is someone else's now, or nobody's: an ack of this attempt would change nothing.
        Where the same attempt was claimed again elsewhere after an undone claim
        (``synchronous_commit=False``, see the delivery guide), the database skips this node's ack
        too (``ack_jobs`` compares the claim's node), but only if the two nodes' names differ; the
        heartbeat told the claims apart by producer, which is exact, so no ack is written at all."""
        running = self.running.get(job_id)
        if running is None:
            return False
        running.disowned = True
        return self.cancel_job(job_id, "cancelled (the job is no longer executing)")

    async def drain(self, timeout: float) -> list[tuple[int, int]]:
        """Wait up to ``timeout`` for running jobs; cancel the rest and return their (id, attempt)."""
        self.runner.chunker.flush(self.queue)  # jobs waiting for a chunk to fill run now
        if self.running:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._idle.wait(), timeout)
        leftovers = [(r.context.job.id, r.context.job.attempt) for r in self.running.values()]
        cancelled = [job_id for job_id in self.running if job_id in self.stopping]
        if cancelled:
            log.warning(
                "cancelled jobs %s still run at the shutdown deadline (threads cannot be interrupted): "
                "their locks and global-limit slots are let go with this node's producer rows",
                cancelled,
            )
        for running in self.running.values():
            # A thread cannot be killed: flag it, so cooperative code stops before the job, given
            # back below, runs again elsewhere.
            running.context.expire()
        tasks = [r.task for r in self.running.values()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        return leftovers
