"""A node behaves the same on every engine: executors, outcomes, retries, snoozes, scheduling."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence

from conveyor import Conveyor, Job, JobState
from conveyor.acks import Ack
from conveyor.engine.base import Engine
from tests.conformance import jobs
from tests.helpers import poll


async def wait_final(app: Conveyor, ids: Sequence[int], states: set[JobState], timeout: float = 15) -> None:
    async def jobs_now() -> list[Job | None]:
        return [await app.get_job(i) for i in ids]

    await poll(
        jobs_now,
        lambda found: all(j is not None and j.state in states for j in found),
        timeout=timeout,
        what=f"jobs {ids} to reach {states}",
        every=0.05,
    )


async def test_every_executor_completes_and_records(node_app: Conveyor) -> None:
    ids = await node_app.enqueue_many(
        [jobs.async_ok.new(value=21), jobs.thread_ok.new(value=1), jobs.process_pid.new()]
    )
    await wait_final(node_app, ids, {JobState.COMPLETED})
    assert await node_app.get_result(ids[0]) == 42
    assert await node_app.get_result(ids[1]) == 2
    assert await node_app.get_result(ids[2]) != os.getpid()


async def test_outcomes(node_app: Conveyor) -> None:
    failing, snoozing, cancelling = await node_app.enqueue_many(
        [jobs.always_fails.new(), jobs.snoozes_once.new(), jobs.cancels.new()]
    )
    await wait_final(node_app, [snoozing, cancelling], {JobState.COMPLETED, JobState.CANCELLED})
    await wait_final(node_app, [failing], {JobState.RETRYABLE})
    failed = await node_app.get_job(failing)
    assert failed is not None and "conformance failure" in failed.errors[0]["error"]
    assert failed.scheduled_at > failed.attempted_at  # type: ignore[operator]
    snoozed = await node_app.get_job(snoozing)
    assert snoozed is not None and snoozed.state is JobState.COMPLETED and snoozed.meta["snoozed"] == 1
    assert snoozed.attempt == 1
    cancelled = await node_app.get_job(cancelling)
    assert cancelled is not None and cancelled.state is JobState.CANCELLED
    assert "not needed" in cancelled.errors[-1]["error"]


async def test_a_snooze_merges_its_meta(node_app: Conveyor) -> None:
    (job_id,) = await node_app.enqueue_many([jobs.snoozes_with_meta.new().with_options(meta={"keep": 1})])
    await wait_final(node_app, [job_id], {JobState.COMPLETED})
    found = await node_app.get_job(job_id)
    assert found is not None and found.attempt == 1  # the snooze gave its attempt back
    assert found.meta == {"keep": 1, "snoozed": 1, "why": "busy", "seen": [1]}


async def test_scheduled_jobs_run_when_due(node_app: Conveyor) -> None:
    job_id = await node_app.enqueue(jobs.async_ok.new(value=1).with_options(schedule_in=0.5))
    job = await node_app.get_job(job_id)
    assert job is not None and job.state is JobState.SCHEDULED
    await wait_final(node_app, [job_id], {JobState.COMPLETED}, timeout=10)


async def test_ack_hooks_see_each_applied_outcome_once(node_app: Conveyor) -> None:
    """The extension point for features that act when jobs finish: a hook gets every applied ack
    once, after its commit; a failing hook is logged and stops neither the acks nor other hooks."""
    seen: list[tuple[int, JobState]] = []
    all_seen = asyncio.Event()

    async def broken(acks: object) -> None:
        raise RuntimeError("a hook that always fails")

    async def record(acks: list[Ack]) -> None:
        for ack in acks:
            found = await node_app.get_job(ack.job_id)
            assert found is not None and found.state is ack.state  # committed before the hook runs
            seen.append((ack.job_id, ack.state))
        if len(seen) >= 4:
            all_seen.set()

    assert node_app.node is not None
    node_app.node.after_ack(broken)
    remove = node_app.node.after_ack(record)
    ids = await node_app.enqueue_many(
        [jobs.async_ok.new(value=1), jobs.thread_ok.new(value=2), jobs.always_fails.new(), jobs.cancels.new()]
    )
    await wait_final(node_app, ids, {JobState.COMPLETED, JobState.RETRYABLE, JobState.CANCELLED})
    await asyncio.wait_for(all_seen.wait(), 5)
    expected = [JobState.COMPLETED, JobState.COMPLETED, JobState.RETRYABLE, JobState.CANCELLED]
    assert sorted(seen) == sorted(zip(ids, expected, strict=True))
    remove()
    later = await node_app.enqueue(jobs.async_ok.new(value=3))
    await wait_final(node_app, [later], {JobState.COMPLETED})
    assert later not in [job_id for job_id, _ in seen]


async def test_a_backlog_is_fetched_batch_after_batch_without_waiting_for_a_poll(any_engine: Engine) -> None:
    """Jobs that end wake their producer while the queue has more: a backlog of four batches drains
    at once although the next poll is a minute away (and no insert notifies)."""
    app = Conveyor(
        engine=any_engine, queues={"default": 5}, poll_interval=60, stage_interval=60, leadership=False
    )
    ids = await app.enqueue_many([jobs.async_ok.new(value=n) for n in range(20)])
    await app.start()
    try:
        await wait_final(app, ids, {JobState.COMPLETED}, timeout=10)
    finally:
        await app.stop(grace=1)
