"""What keeps a workflow's order whatever is done to it from outside, on every engine: a retry by
filter or by id never lets a step go before its dependencies finish; a step name is stored once per
workflow, however many enqueues add it at once; cancelling a batch still runs the callbacks its
jobs' cancellation calls for."""

from __future__ import annotations

from conveyor import JobFilter, JobState, Workflow
from conveyor._workflows import retry_workflow
from conveyor.acks import Ack
from conveyor.engine.base import Engine
from tests.conformance.contract import T0, job, uid
from tests.conformance.test_workflows_contract import enqueue, run, states, step


def chain() -> Workflow:
    return Workflow().add("a", step()).add("b", step(), deps=["a"]).add("c", step(), deps=["b"])


async def fetched(engine: Engine) -> list[int]:
    """Claim whatever is available (attempt 1) and give it back at once, as a snooze."""
    jobs = await engine.fetch_jobs("default", 100, node="n", producer=uid(7), now=T0)
    acks = [Ack(j.id, j.attempt, JobState.AVAILABLE, schedule_in=0, snoozed=True) for j in jobs]
    if acks:
        await engine.ack_jobs(acks, now=T0)
    return sorted(j.id for j in jobs)


# -- retry -----------------------------------------------------------------------------------------
async def test_a_retry_by_filter_never_lets_a_step_go_before_its_dependency(any_engine: Engine) -> None:
    """b failed, so c was cancelled; retrying the queue retries both, and c waits for b again."""
    ids = await enqueue(any_engine, chain())
    await run(any_engine, ids, "a")
    await run(any_engine, ids, "b", outcome=JobState.DISCARDED)
    assert (await states(any_engine, ids))["c"] is JobState.CANCELLED
    retried = await any_engine.retry_jobs(JobFilter(queues=("default",)), now=T0)
    assert retried == sorted([ids["a"], ids["b"], ids["c"]])
    found = await states(any_engine, ids)
    # a completed and is retried alone (no dependencies); b waits for a again, and c for b.
    assert found == {"a": JobState.AVAILABLE, "b": JobState.SUSPENDED, "c": JobState.SUSPENDED}
    assert await fetched(any_engine) == [ids["a"]]
    await run(any_engine, ids, "a")
    assert await fetched(any_engine) == [ids["b"]]
    await run(any_engine, ids, "b")
    assert await fetched(any_engine) == [ids["c"]]


async def test_a_retry_never_releases_a_step_that_waits(any_engine: Engine) -> None:
    """A suspended step is waiting already: a retry, by filter or by its id, leaves it waiting."""
    ids = await enqueue(any_engine, chain())
    assert await any_engine.retry_jobs(JobFilter(ids=(ids["b"], ids["c"])), now=T0) == []
    assert await any_engine.retry_jobs(JobFilter(states=(JobState.SUSPENDED,)), now=T0) == []
    assert (await states(any_engine, ids))["b"] is JobState.SUSPENDED
    assert await fetched(any_engine) == [ids["a"]]
    await run(any_engine, ids, "a")
    assert (await states(any_engine, ids))["b"] is JobState.AVAILABLE


async def test_a_step_that_failed_after_its_dependencies_completed_is_retried_at_once(
    any_engine: Engine,
) -> None:
    ids = await enqueue(any_engine, chain())
    await run(any_engine, ids, "a")
    await run(any_engine, ids, "b", outcome=JobState.DISCARDED)
    assert await any_engine.retry_jobs(JobFilter(ids=(ids["b"],)), now=T0) == [ids["b"]]
    retried = await job(any_engine, ids["b"])
    assert retried.state is JobState.AVAILABLE and retried.max_attempts > retried.attempt
    assert (await states(any_engine, ids))["c"] is JobState.CANCELLED  # not retried: stays
    await run(any_engine, ids, "b")
    # c, retried by id once b completed, goes on at once.
    assert await any_engine.retry_jobs(JobFilter(ids=(ids["c"],)), now=T0) == [ids["c"]]
    assert (await states(any_engine, ids))["c"] is JobState.AVAILABLE


async def test_a_step_whose_dependency_stays_failed_is_not_retried(any_engine: Engine) -> None:
    """Retrying c alone while b stays discarded: c's policy cancels it again at once, so the retry
    does not count it, and it never runs."""
    ids = await enqueue(any_engine, chain())
    await run(any_engine, ids, "a")
    await run(any_engine, ids, "b", outcome=JobState.DISCARDED)
    assert await any_engine.retry_jobs(JobFilter(ids=(ids["c"],)), now=T0) == []
    assert (await states(any_engine, ids))["c"] is JobState.CANCELLED
    assert await fetched(any_engine) == []


async def test_a_workflow_retry_still_finishes_the_workflow(any_engine: Engine) -> None:
    ids = await enqueue(any_engine, chain())
    await run(any_engine, ids, "a")
    await run(any_engine, ids, "b", outcome=JobState.DISCARDED)
    retried = await retry_workflow(any_engine, (await job(any_engine, ids["a"])).meta["workflow_id"], now=T0)
    assert sorted(retried) == sorted([ids["b"], ids["c"]])
    assert (await states(any_engine, ids))["c"] is JobState.SUSPENDED
    await run(any_engine, ids, "b")
    await run(any_engine, ids, "c")
    assert set((await states(any_engine, ids)).values()) == {JobState.COMPLETED}
