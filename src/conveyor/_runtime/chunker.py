"""Gathering the running jobs of a chunk worker (``@job(chunk=Chunk(...))``) into one call.

Each job is claimed, run and acked as usual: its own task waits here for its share of the call's
result instead of calling the code itself. A chunk is called once ``size`` jobs of one worker and
queue are waiting, or ``timeout`` after its first job came. Nothing is stored: a node killed
mid-chunk leaves its jobs executing, and the rescue gives each back like any other job's.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import logging
from collections.abc import Callable
from concurrent.futures import Executor
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import Any

from conveyor._runtime.clock import Clock, Timer
from conveyor._runtime.invoke import BaseExceptionRaised
from conveyor.chunk import ChunkResult
from conveyor.context import JobContext
from conveyor.definition import ExecutorKind, JobDefinition
from conveyor.job import Job

log = logging.getLogger("conveyor.job")


@dataclass(slots=True)
class _Gathering:
    """The jobs waiting for the next call of one worker on one queue."""

    definition: JobDefinition
    kind: ExecutorKind
    waiting: list[tuple[Job, asyncio.Future[Any]]] = field(default_factory=list)
    timer: Timer | None = None


class Chunker:
    """The node's gatherings, by worker and queue."""

    def __init__(
        self,
        clock: Clock,
        threads: Executor,
        scope: Callable[[], Callable[[], AbstractContextManager[Any]] | None],
    ) -> None:
        self.clock = clock
        self.threads = threads
        self.scope = scope
        self._gatherings: dict[tuple[str, str], _Gathering] = {}
        #: Call each job at once in a chunk of its own (``testing.drain_queue`` runs jobs one by
        #: one: a chunk would only ever fill by its timeout).
        self.alone = False
        #: Calls under way, kept so their tasks are not collected before they end.
        self._calls: set[asyncio.Task[None]] = set()

    async def run(self, definition: JobDefinition, kind: ExecutorKind, context: JobContext) -> Any:
        """Wait for this job's chunk to be called; what the job's own run would have returned
        (``None``, or the outcome the chunk returned for all), or raise its error or outcome."""
        chunk = definition.chunk
        assert chunk is not None
        key = (definition.name, context.job.queue)
        gathering = self._gatherings.get(key)
        if gathering is None:
            gathering = self._gatherings[key] = _Gathering(definition, kind)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        gathering.waiting.append((context.job, future))
        if len(gathering.waiting) >= chunk.size or self.alone:
            self._call(key)
        elif gathering.timer is None:
            gathering.timer = self.clock.call_later(chunk.seconds, lambda: self._call(key))
        # A cancel of this job's task cancels the future: the job leaves its chunk (or its share
        # of a call under way is dropped).
        return await future

    def flush(self, queue: str) -> None:
        """Call every chunk of ``queue`` now, full or not: the node is stopping, and a chunk's
        timeout may be longer than its shutdown grace."""
        for key in [key for key in self._gatherings if key[1] == queue]:
            self._call(key)

    def _call(self, key: tuple[str, str]) -> None:
        gathering = self._gatherings.pop(key, None)
        if gathering is None:
            return
        definition, kind = gathering.definition, gathering.kind
        if gathering.timer is not None:
            gathering.timer.cancel()
        members = [(job, future) for job, future in gathering.waiting if not future.done()]
        if not members:
            return
        task = asyncio.get_running_loop().create_task(self._run_chunk(definition, kind, members))
        self._calls.add(task)
        task.add_done_callback(self._calls.discard)

        def left(_: asyncio.Future[Any]) -> None:
            # Every job of the chunk was cancelled (shutdown, or each on request): stop the call.
            if all(future.done() for _, future in members):
                task.cancel()

        for _, future in members:
            future.add_done_callback(left)

    async def _run_chunk(
        self,
        definition: JobDefinition,
        kind: ExecutorKind,
        members: list[tuple[Job, asyncio.Future[Any]]],
    ) -> None:
        jobs = [job for job, _ in members]
        try:
            value = await self._timed(definition, kind, jobs)
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # the whole chunk ends as its code said, or failed
            for _, future in members:
                if not future.done():
                    future.set_exception(exc)
            return
        outcomes = value.outcomes if isinstance(value, ChunkResult) else {}
        strangers = set(outcomes) - {job.id for job in jobs}
        if strangers:  # a mistake in the code: say so, rather than end jobs it did not name
            text = "%s returned outcomes for jobs not in its chunk: %s"
            log.warning(text, definition.name, sorted(strangers))
        shared = None if isinstance(value, ChunkResult) else value
        for job, future in members:
            if future.done():
                continue
            if job.id in outcomes:
                future.set_exception(outcomes[job.id])
            else:
                future.set_result(shared)

    async def _timed(self, definition: JobDefinition, kind: ExecutorKind, jobs: list[Job]) -> Any:
        """One call, within the worker's timeout (for the chunk as a whole) on the node's clock."""
        if definition.timeout is None:
            return await self._start(definition, kind, jobs)
        deadline = self.clock.timeout(definition.timeout)
        try:
            async with deadline:
                return await self._start(definition, kind, jobs)
        except TimeoutError:
            if not deadline.expired():
                raise  # the code's own TimeoutError
            from conveyor._runtime.runner import JobTimeout  # the runner imports this module

            raise JobTimeout(definition.timeout) from None

    def _start(self, definition: JobDefinition, kind: ExecutorKind, jobs: list[Job]) -> Any:
        if kind is ExecutorKind.ASYNC:
            return _call_async(definition, jobs)
        ctx = contextvars.copy_context()
        call = functools.partial(_call_blocking, definition, jobs, self.scope())
        return asyncio.get_running_loop().run_in_executor(self.threads, ctx.run, call)


def _target(definition: JobDefinition) -> Callable[[list[Job]], Any]:
    target: Callable[[list[Job]], Any] = (
        definition.target().process if definition.is_class else definition.target
    )
    return target


async def _call_async(definition: JobDefinition, jobs: list[Job]) -> Any:
    try:
        return await _target(definition)(jobs)
    except (Exception, asyncio.CancelledError):
        raise
    except BaseException as exc:  # SystemExit and the like end the chunk's jobs, never the node
        raise BaseExceptionRaised(exc) from exc


def _call_blocking(
    definition: JobDefinition,
    jobs: list[Job],
    scope: Callable[[], AbstractContextManager[Any]] | None,
) -> Any:
    try:
        with nullcontext() if scope is None else scope():
            result = _target(definition)(jobs)
            if asyncio.iscoroutine(result):
                return asyncio.run(result)
            return result
    except Exception:
        raise
    except BaseException as exc:
        raise BaseExceptionRaised(exc) from exc
