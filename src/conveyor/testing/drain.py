"""``drain_queue``: run a queue's jobs one at a time in the test's own process, through the real
claim and ack of the app's engine, so the stored states are what a node would leave."""

from __future__ import annotations

import uuid
from concurrent.futures import Executor, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from conveyor._options import check_queue
from conveyor._runtime.invoke import BaseExceptionRaised
from conveyor._runtime.job_link import JobLink
from conveyor._runtime.runner import JobRunner, with_meta
from conveyor.context import JobContext
from conveyor.current_app import current_app
from conveyor.definition import ExecutorKind, JobDefinition
from conveyor.filters import JobFilter
from conveyor.job import JobState
from conveyor.testing.execute import TEST_NODE

if TYPE_CHECKING:
    from conveyor.acks import Ack
    from conveyor.app import Conveyor
    from conveyor.engine.base import Engine

#: The keys of ``drain_queue``'s counts: how the drained attempts ended.
OUTCOMES = ("cancelled", "completed", "discarded", "retryable", "scheduled")


class _DrainRunner(JobRunner):
    """The node's runner, with process jobs run in a thread (a test has no process pool)."""

    #: Thread jobs run in the caller's thread (``drain_queue_sync``): its resources are the caller's.
    in_caller_thread = False

    def blocking_scope(self) -> Any:
        return None if self.in_caller_thread else super().blocking_scope()

    def executor_for(self, definition: JobDefinition, queue_default: ExecutorKind) -> ExecutorKind:
        kind = super().executor_for(definition, queue_default)
        if kind is ExecutorKind.PROCESS:
            return ExecutorKind.ASYNC if definition.is_async else ExecutorKind.THREAD
        return kind


async def drain_queue(
    queue: str = "default",
    *,
    app: Conveyor | None = None,
    with_recursion: bool = True,
    with_safety: bool = False,
    with_scheduled: bool = True,
    threads: Executor | None = None,
) -> dict[str, int]:
    """Run the jobs of ``queue`` one after another, here, and return how many attempts ended each
    way (``completed``, ``discarded``, ``cancelled``, ``retryable``, ``scheduled`` for a snooze).

    - ``with_recursion`` (default): go on until the queue has nothing to run, so jobs the drained
      jobs enqueue (and workflow steps they release) run too; without it, one pass over the jobs
      available when it starts.
    - ``with_scheduled`` (default): scheduled and retryable jobs of the queue run now too (a job
      that snoozes over and over, drained with recursion, never lets the drain end).
    - ``with_safety``: a job's exception is recorded as its failed attempt; without it (default)
      the attempt is recorded and the exception propagates, stopping the drain.

    ``threads``: an executor of the caller's that runs the thread jobs, without the app's
    ``blocking_job_scope`` (``drain_queue_sync`` passes the caller's own thread); by default a pool
    of this drain's own, each job inside the scope as on a node.
    """
    app = app or current_app()
    check_queue(queue)
    engine = await app.engine()
    counts = dict.fromkeys(OUTCOMES, 0)
    producer = str(uuid.uuid4())
    # Progress and signals reach the drained jobs as a node's would: written while they run, and
    # what is left carried by the ack.
    link = JobLink(
        engine,
        app.telemetry,
        progress_interval=app.settings.progress_interval,
        poll_interval=app.settings.poll_interval,
        clock=app.clock,
    )
    await link.start()
    try:
        if threads is not None:
            return await _drain(
                app,
                engine,
                link,
                threads,
                queue,
                producer,
                counts,
                with_recursion,
                with_safety,
                with_scheduled,
            )
        with ThreadPoolExecutor(2, thread_name_prefix="conveyor-drain") as pool:
            return await _drain(
                app, engine, link, pool, queue, producer, counts, with_recursion, with_safety, with_scheduled
            )
    finally:
        await link.stop()


async def _drain(
    app: Conveyor,
    engine: Engine,
    link: JobLink,
    threads: Executor,
    queue: str,
    producer: str,
    counts: dict[str, int],
    with_recursion: bool,
    with_safety: bool,
    with_scheduled: bool,
) -> dict[str, int]:
    runner = _DrainRunner(
        app.resolver,
        app.telemetry,
        threads=threads,
        processes=None,
        clock=app.clock,
        app=app,
        reraise=not with_safety,
        encryption_keys=app.settings.encryption_keys,
    )
    # Threads of the caller's run its jobs without the app's per-thread upkeep (Django's would
    # close the caller's own connection, in the middle of its test).
    runner.in_caller_thread = not isinstance(threads, ThreadPoolExecutor)
    runner.chunker.alone = True  # one job at a time: a chunk worker gets each in a chunk of one
    while True:
        if with_scheduled:
            waiting = JobFilter(queues=(queue,), states=(JobState.SCHEDULED, JobState.RETRYABLE))
            await engine.retry_jobs(waiting)
        demand = 1 if with_recursion else 10_000
        jobs = await engine.fetch_jobs(queue, demand, node=TEST_NODE, producer=producer)
        if not jobs:
            break
        for job in jobs:
            context = JobContext(job)
            link.attach(context)
            try:
                ack = await runner.run(context)
            except Exception as exc:  # the job's own (with_safety=False): record it, then raise
                await engine.ack_jobs([_with_progress(runner.failure(job, exc), link, context)])
                if isinstance(exc, BaseExceptionRaised):
                    raise exc.original from None  # the SystemExit the job raised, as raised
                raise
            await engine.ack_jobs([_with_progress(ack, link, context)])
            counts[_outcome(ack.state)] += 1
        if not with_recursion:
            break
    return counts


def _with_progress(ack: Ack, link: JobLink, context: JobContext) -> Ack:
    """The ack, carrying the progress the job reported since the last write (as a node's does)."""
    progress = link.detach(context)
    return ack if progress is None else with_meta(ack, {"progress": progress})


def _outcome(state: JobState) -> str:
    return "scheduled" if state in (JobState.SCHEDULED, JobState.AVAILABLE) else state.value
