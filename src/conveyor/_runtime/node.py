"""The Node: everything one process runs for its queues, started and stopped as one."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol

from conveyor._resolver import Resolver
from conveyor._runtime.acker import Acker, AckHook
from conveyor._runtime.aging import PriorityAger
from conveyor._runtime.clock import SYSTEM_CLOCK, Clock
from conveyor._runtime.duties import CronScheduler, LeaderDuty, Lifeline, Pruner
from conveyor._runtime.heartbeat import Heartbeat
from conveyor._runtime.job_link import JobLink
from conveyor._runtime.leadership import Leadership
from conveyor._runtime.poller import Poller
from conveyor._runtime.process_jobs import start_process_pool
from conveyor._runtime.process_pool import ProcessPool
from conveyor._runtime.producer import Producer
from conveyor._runtime.queue_control import QueueControl
from conveyor._runtime.queue_declarations import QueueDeclarations
from conveyor._runtime.queue_states import PersistedStates
from conveyor._runtime.runner import JobRunner
from conveyor._runtime.stager import Stager
from conveyor._runtime.sweeper import Sweeper
from conveyor.acks import Ack
from conveyor.cron import CronEntry, announcement
from conveyor.engine.base import Engine
from conveyor.inbox import AWAITING
from conveyor.queue_settings import QueueSettings, fetch_limits
from conveyor.settings import Settings
from conveyor.telemetry import Telemetry

log = logging.getLogger("conveyor.node")

#: Pauses before trying again to wake jobs whose signal came while they let go of their slot.
SIGNAL_WAKE_RETRIES = (0.1, 0.5, 2.0)


class Stoppable(Protocol):
    async def stop(self) -> None: ...


class Node(QueueControl):
    """Producers (one per queue), the poller that wakes them, the runner and its pools, the acker,
    the stager and the listener. Pausing, scaling, starting and stopping queues, and the signals
    that ask for it, are ``QueueControl``'s (``queue_control.py``)."""

    def __init__(
        self,
        settings: Settings,
        engine: Engine,
        resolver: Resolver,
        telemetry: Telemetry,
        *,
        crontab: Sequence[CronEntry] = (),
        clock: Clock = SYSTEM_CLOCK,
        app: Any = None,
        processes: ProcessPool | None = None,
    ) -> None:
        self.settings = settings
        self.clock = clock
        self.name = settings.node
        self.engine = engine
        self.telemetry = telemetry
        self._thread_count = settings.thread_count
        self.threads = ThreadPoolExecutor(self._thread_count, thread_name_prefix="conveyor-job")
        #: Given already started when the app starts it before connecting (``node_launch``).
        self.processes = processes or ProcessPool(settings.processes)
        self.resolver = resolver
        self.runner = JobRunner(
            resolver,
            telemetry,
            threads=self.threads,
            processes=self.processes,
            clock=clock,
            app=app,
            unfit_patience=settings.unfit_job_patience,
            encryption_keys=settings.encryption_keys,
        )
        self.acker = Acker(
            engine,
            batch_size=settings.ack_batch_size,
            delay=settings.ack_delay,
            max_delay=settings.ack_max_delay,
            clock=clock,
            telemetry=telemetry,
            node=self.name,
        )
        self.link = JobLink(
            engine,
            telemetry,
            progress_interval=settings.progress_interval,
            poll_interval=settings.poll_interval,
            clock=clock,
        )
        self.producers: dict[str, Producer] = {q.name: self._producer(q) for q in settings.queues}
        self._persisted = PersistedStates()
        self.declarations = QueueDeclarations(self, engine, settings.poll_interval, clock)
        # One poll for every queue, waking the producers of those with jobs waiting; it also brings
        # the persisted queue states, so a persisted change whose signal was missed still arrives.
        self.poller = Poller(
            engine,
            lambda: list(self.producers.values()),
            interval=settings.poll_interval,
            clock=clock,
            name=settings.name,
            on_states=self.persisted_states,
        )
        # A global limit counts executing rows, so this node's finished jobs free their slots only
        # once their acks are written: wake the producers a cap stopped right then.
        self.acker.hooks.append(self._wake_capped_producers)
        self.acker.hooks.append(self._wake_signalled)
        self.acker.busy = self._busy
        self.stager = Stager(
            engine,
            telemetry,
            self._wake_queue,
            interval=settings.stage_interval,
            limit=settings.stage_limit,
            clock=clock,
        )
        self.heartbeat = Heartbeat(
            engine,
            self.producers.values(),
            name=settings.name,
            node=self.name,
            interval=settings.heartbeat_interval,
            acker=self.acker,
            lost_after=settings.producer_timeout,
            clock=clock,
            # Only a node that may lead runs the crontab, so only such a node announces it.
            crontab=announcement(crontab) if settings.leadership else (),
        )
        self.leadership = Leadership(
            engine,
            telemetry,
            name=settings.name,
            node=self.name,
            ttl=settings.leader_ttl,
            clock=clock,
            take_from_foreign=settings.mixed_fleet,
            stale_after=self._judged_after,
        )
        self.heartbeat.on_gap.append(self.leadership.wake)  # thawed: do we still lead?
        self.duties: list[LeaderDuty] = []
        if settings.leadership:
            lifeline = Lifeline(
                engine,
                telemetry,
                self.leadership,
                interval=settings.rescue_interval,
                producer_timeout=settings.producer_timeout,
                backstop=settings.rescue_backstop,
                heartbeat=self.heartbeat,
                foreign_timeout=settings.foreign_timeout,
            )
            self.leadership.on_elected.append(lifeline.wake)  # a new leader rescues at once
            self.duties.append(lifeline)
            self.duties.append(Sweeper(engine, telemetry, self.leadership, settings.stage_interval))
            if settings.prune:
                self.duties.append(
                    Pruner(
                        engine,
                        telemetry,
                        self.leadership,
                        interval=settings.prune_interval,
                        retention=settings.retention,
                        limit=settings.prune_limit,
                    )
                )
            if settings.priority_aging_after is not None:
                self.duties.append(PriorityAger.of(settings, engine, telemetry, self.leadership))
            # Even without a crontab in code: entries stored in the database (dynamic cron) may
            # appear at any time, and the leader reads them at every tick.
            keys = settings.encryption_keys
            cron = CronScheduler(
                engine, telemetry, self.leadership, crontab, started_at=clock.now(), encryption_keys=keys
            )
            self.duties.append(cron)
        self._listener: Stoppable | None = None
        self._control_tasks: set[asyncio.Task[None]] = set()
        self.started = False
        self._pool_started = False
        #: Ids of the jobs still running at the last stop's deadline (given back, maybe still on a
        #: thread that cannot be stopped).
        self.abandoned: tuple[int, ...] = ()

    def _judged_after(self) -> float | None:
        """``producer_timeout`` while a stale producer row proves its node dead (Heartbeat.trusted)."""
        return self.heartbeat.trusted(self.settings.producer_timeout)

    async def start_pool(self) -> None:
        """Start the process pool's workers (or arrange for them to start with the first process
        job), unless the app did before it connected. A node that is then not started must be
        stopped (``stop_pool``)."""
        if self._pool_started or self.processes.started:
            return
        self._pool_started = True
        await start_process_pool(self.processes, self.settings, self.resolver)

    async def stop_pool(self) -> None:
        """Stop the workers of a pool started by ``start_pool`` for a node that never started."""
        await self.processes.stop()

    async def start(self) -> None:
        if self.started:
            return
        await self.start_pool()
        await self.acker.start()
        await self.link.start()
        if self.settings.notifications:
            self._listener = await self.engine.listen(
                ("insert", "signal", "leader", "inbox"), self._on_notification
            )
        await self._apply_persisted()
        # The heartbeat rows exist before the first fetch, so no claimed job is ever without one.
        await self.heartbeat.tick()
        await self.heartbeat.start()
        for producer in self.producers.values():
            await producer.start()
        await self.poller.start()
        await self.stager.start()
        await self.declarations.start()  # its first look at once: declared queues start with the node
        if self.settings.leadership:
            await self.leadership.tick()  # know at once whether we lead
            await self.leadership.start()
            for duty in self.duties:
                await duty.start()
        self.started = True
        self.telemetry.emit(
            "node.start", node=self.name, name=self.settings.name, queues=list(self.producers)
        )
        log.info("node %s started with queues %s", self.name, ", ".join(self.producers) or "(none)")

    def abandon(self) -> None:
        """The node's event loop is gone (it was never stopped): its tasks died with the loop, so
        only the pools outlive it. Its jobs are rescued like those of a node that crashed."""
        self.started = False
        self.threads.shutdown(wait=False, cancel_futures=True)
        self.processes.abandon()

    async def stop(self, grace: float | None = None) -> None:
        """Stop fetching, let running jobs finish within the grace period, give back the rest,
        write every ack, release every resource."""
        if not self.started:
            return
        self.started = False
        grace = self.settings.shutdown_grace if grace is None else grace
        if self._control_tasks:
            await asyncio.gather(*self._control_tasks, return_exceptions=True)
        for duty in self.duties:
            await duty.stop()
        await self.leadership.stop()
        await self.declarations.stop()
        await self.stager.stop()
        await self.poller.stop()
        await asyncio.gather(*(p.stop() for p in self.producers.values()))
        deadline = asyncio.get_running_loop().time() + grace
        leftovers: list[tuple[int, int]] = []
        for producer in self.producers.values():
            remaining = max(0.0, deadline - asyncio.get_running_loop().time())
            leftovers += await producer.drain(remaining)
        await self.link.stop()
        await self.acker.stop()
        self.abandoned = tuple(job_id for job_id, _ in leftovers)
        if leftovers:
            released = await self.engine.release_jobs(leftovers)
            log.warning(
                "gave back %d jobs still running at the shutdown deadline: %s",
                len(released),
                ", ".join(map(str, self.abandoned)),
            )
        await self.heartbeat.stop()
        await self.heartbeat.forget()
        if self._listener is not None:
            await self._listener.stop()
            self._listener = None
        self.threads.shutdown(wait=False, cancel_futures=True)
        await self.processes.stop()
        self.telemetry.emit("node.stop", node=self.name, name=self.settings.name, released=len(leftovers))
        log.info("node %s stopped", self.name)

    def _producer(self, queue: QueueSettings) -> Producer:
        producer = Producer(
            queue.name,
            queue.limit,
            engine=self.engine,
            runner=self.runner,
            acker=self.acker,
            node=self.name,
            poll_interval=self.settings.poll_interval,
            executor=queue.executor,
            clock=self.clock,
            limits=fetch_limits(queue),
            link=self.link,
            dead_after=self._judged_after,
            cancel_grace=self.settings.cancel_grace,
        )
        # A cancelled run that ends lets go of its lock and global slot with the next beat: now.
        producer.on_stopped = lambda: self.heartbeat.wake()
        return producer

    def _busy(self) -> bool:
        """More acks may follow soon: jobs run, are being fetched, or a queue has more waiting.
        Only a node with none of these writes a lone ack at once (the latency of a quiet node);
        a draining one gathers batches, which keeps its statements few."""
        return any(p.running or p.fetching or p.backlog for p in self.producers.values())

    async def _wake_signalled(self, acks: Sequence[Ack]) -> None:
        """Jobs that let go of their slot to wait for a signal: one may have come meanwhile (its
        sender saw the job still executing, so nobody woke it). Look once the ack is written."""
        waiting = [ack.job_id for ack in acks if ack.snoozed and ack.meta and AWAITING in ack.meta]
        for delay in (*SIGNAL_WAKE_RETRIES, None):
            if not waiting:
                return
            try:
                await self.engine.wake_awaiting(waiting, now=self.clock.database_now())
                return
            except Exception as exc:
                # Not woken, such a job runs at its deadline and finds its message then: retry a
                # database that is away for a moment rather than leave it waiting that long.
                if delay is None or not self.engine.is_transient(exc):
                    raise
                await asyncio.sleep(delay)

    async def _wake_capped_producers(self, acks: Sequence[Any]) -> None:
        for producer in self.producers.values():
            if producer.capped:
                producer.wake()

    # -- extension points --------------------------------------------------------------------
    def after_ack(self, hook: AckHook) -> Callable[[], None]:
        """Run ``hook`` after every batch of acks this node writes (``acker.AckHook``: the applied
        acks, once committed). Returns a function that removes it."""
        self.acker.hooks.append(hook)
        return lambda: self.acker.hooks.remove(hook) if hook in self.acker.hooks else None

    # -- waking producers --------------------------------------------------------------------
    def _wake_queue(self, queue: str) -> None:
        producer = self.producers.get(queue)
        if producer is not None:
            producer.wake()

    def nudge(self, queue: str | None = None) -> None:
        """Wake the local producers of ``queue`` (all queues when None) to fetch now."""
        if queue is None:
            for producer in self.producers.values():
                producer.wake()
        else:
            self._wake_queue(queue)

    def _on_notification(self, channel: str, payload: dict[str, Any]) -> None:
        if channel == "insert":
            queue = payload.get("queue")
            if queue == "*":  # a nudge for every queue
                self.nudge()
            elif isinstance(queue, str):
                self._wake_queue(queue)
        elif channel == "listener":
            # (Re)connected: notifications sent meanwhile are lost. Fetch, and read the persisted
            # queue states at once (the poll brings them) rather than at the next interval.
            self.nudge()
            self.poller.wake()
        elif channel == "leader" and payload.get("action") == "resign":
            self.leadership.on_resign(payload)
        elif channel == "signal":
            self._on_signal(payload)
        elif channel == "inbox":
            job_id = payload.get("job_id")
            if isinstance(job_id, int):
                self.link.poke(job_id)
