"""The queue-control role of a node: pause, resume, scale, start and stop its queues, from a call of
this app, a signal from anywhere in the fleet, or a state an operator persisted."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from conveyor._runtime.heartbeat import Heartbeat
from conveyor._runtime.producer import Producer
from conveyor._runtime.queue_states import PersistedStates
from conveyor._runtime.runner import JobRunner
from conveyor._runtime.service import Service
from conveyor._runtime.signals import addressed_to, limits_from_signal
from conveyor.engine.base import Engine
from conveyor.fleet import QueueState
from conveyor.queue_settings import QueueSettings
from conveyor.settings import Settings
from conveyor.telemetry import Telemetry


class QueueControl:
    """What ``Node`` does to its queues when told to (mixed into ``Node``, whose parts it uses).
    Local calls change this node's producers at once; signals arrive in ``_on_signal``."""

    name: str
    settings: Settings
    engine: Engine
    telemetry: Telemetry
    producers: dict[str, Producer]
    runner: JobRunner
    heartbeat: Heartbeat
    declarations: Service
    threads: ThreadPoolExecutor
    _thread_count: int
    _persisted: PersistedStates
    _control_tasks: set[asyncio.Task[None]]

    def _producer(self, queue: QueueSettings) -> Producer:
        """A producer for ``queue``, wired to the node's parts (``Node._producer``)."""
        raise NotImplementedError

    async def _apply_persisted(self, only: str | None = None) -> None:
        """Apply the pauses and limits operators asked to keep across restarts."""
        states = await self.engine.load_queue_states(self.settings.name)
        for queue, state in states.items():
            producer = self.producers.get(queue)
            if producer is None or (only is not None and queue != only):
                continue
            self._persisted.applied(queue, state)
            if state.paused is not None:
                producer.paused = state.paused
            if state.limit is not None:
                producer.limit = state.limit
            limits = limits_from_signal(state.limits, producer.limits)
            if limits is not None:
                producer.limits = limits
        self._fit_threads()

    def persisted_states(self, states: dict[str, QueueState]) -> None:
        """The persisted states a poll read: apply each part that changed since this node last
        looked (a signal normally brought it already; this catches one that was missed)."""
        for change in self._persisted.changes(states, self.producers):
            if change.paused is not None:
                (self.pause if change.paused else self.resume)(change.queue)
            if change.limit is not None:
                self.scale(change.queue, change.limit)
            if change.limits:
                self.apply_scale(change.queue, change.limits)

    def pause(self, queue: str) -> None:
        for producer in self._targets(queue):
            if not producer.paused:
                producer.paused = True
                self.telemetry.emit("queue.paused", node=self.name, queue=producer.queue)

    def resume(self, queue: str) -> None:
        for producer in self._targets(queue):
            if producer.paused:
                producer.paused = False
                self.telemetry.emit("queue.resumed", node=self.name, queue=producer.queue)
            producer.wake()

    def scale(self, queue: str, limit: int) -> None:
        for producer in self._targets(queue):
            previous, producer.limit = producer.limit, limit
            producer.wake()
            if previous != limit:
                self._scaled(producer, previous)
        self._fit_threads()

    def apply_scale(self, queue: str, payload: dict[str, Any]) -> None:
        """A scale signal: a new local limit and/or new fleet-wide limits (``_app/control``)."""
        limit = payload.get("limit")
        if isinstance(limit, int) and not isinstance(limit, bool) and limit > 0:
            self.scale(queue, limit)
        for producer in self._targets(queue):
            limits = limits_from_signal(payload, producer.limits)
            if limits is not None:
                changed, producer.limits = limits != producer.limits, limits
                producer.wake()
                if changed:
                    self._scaled(producer, producer.limit)

    def _scaled(self, producer: Producer, previous: int) -> None:
        self.telemetry.emit(
            "queue.scaled",
            node=self.name,
            queue=producer.queue,
            limit=producer.limit,
            previous=previous,
            limits=producer.limits,
        )

    def _fit_threads(self) -> None:
        """A blocking job needs a thread per slot: grow a default-sized pool when the limits grow."""
        if self.settings.threads is not None:
            return
        wanted = max(4, min(100, sum(p.limit for p in self.producers.values())))
        if wanted > self._thread_count:
            self._thread_count = wanted
            old, self.threads = self.threads, ThreadPoolExecutor(wanted, thread_name_prefix="conveyor-job")
            self.runner.threads = self.threads
            old.shutdown(wait=False)  # its running and queued jobs still finish

    async def start_queue(self, queue: str, limit: int, *, settings: QueueSettings | None = None) -> None:
        """Start ``queue`` with ``limit`` (and the fleet-wide limits of ``settings``, a declared
        queue's), or scale it when it runs already."""
        if queue in self.producers:
            self.scale(queue, limit)
            return
        producer = self._producer(settings or QueueSettings(queue, limit))
        self.producers[queue] = producer
        await self._apply_persisted(only=queue)
        self.heartbeat.producers.append(producer)
        await self.heartbeat.tick()
        await producer.start()
        self.telemetry.emit("queue.started", node=self.name, queue=queue, limit=producer.limit)

    async def stop_queue(self, queue: str) -> None:
        """Stop one queue: no more fetching, running jobs finish (within the grace period)."""
        producer = self.producers.pop(queue, None)
        if producer is None:
            return
        await producer.stop()
        leftovers = await producer.drain(self.settings.shutdown_grace)
        if leftovers:
            await self.engine.release_jobs(leftovers)
        self.heartbeat.producers.remove(producer)
        await self.engine.delete_producers([producer.uuid])
        self.telemetry.emit("queue.stopped", node=self.name, queue=queue)

    def targets(self, queue: str) -> list[Producer]:
        """The producers a queue name addresses ("*" for all)."""
        return self._targets(queue)

    def _targets(self, queue: str) -> list[Producer]:
        if queue == "*":
            return list(self.producers.values())
        producer = self.producers.get(queue)
        return [producer] if producer is not None else []

    def signalled(self, payload: dict[str, Any], source: str) -> None:
        """Tell ``node.signal`` handlers about a signal addressed to this node: from a notification,
        or from this app's own call (``source`` "local"), which applies it at once."""
        if self.telemetry.listens("node.signal"):
            queue = payload.get("queue")
            job_id = payload.get("job_id")
            self.telemetry.emit(
                "node.signal",
                node=self.name,
                action=payload.get("action"),
                queue=queue if isinstance(queue, str) else None,
                job_id=job_id if isinstance(job_id, int) else None,
                ident=payload.get("ident", "any"),
                payload=payload,
                **{"from": source},
            )

    def _on_signal(self, payload: dict[str, Any]) -> None:
        if not addressed_to(payload, self.settings.name, self.name):
            return
        self.signalled(payload, "notification")
        action, queue, limit = payload.get("action"), payload.get("queue"), payload.get("limit")
        if action == "pkill":
            job_id = payload.get("job_id")
            if isinstance(job_id, int):
                self.cancel_running(job_id, "cancelled")
            return
        if action == "declarations":  # a queue declared or forgotten (Conveyor.declare_queue)
            self.declarations.wake()
            return
        if not isinstance(queue, str):
            return
        if action == "pause":
            self.pause(queue)
        elif action == "resume":
            self.resume(queue)
        elif action == "scale":
            self.apply_scale(queue, payload)
        elif action == "start" and isinstance(limit, int) and limit > 0 and queue != "*":
            self._spawn(self.start_queue(queue, limit))
        elif action == "stop":
            for name in [p.queue for p in self._targets(queue)]:
                self._spawn(self.stop_queue(name))

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(work)
        self._control_tasks.add(task)
        task.add_done_callback(self._control_tasks.discard)

    def cancel_running(self, job_id: int, reason: str) -> bool:
        return any(p.cancel_job(job_id, reason) for p in self.producers.values())
