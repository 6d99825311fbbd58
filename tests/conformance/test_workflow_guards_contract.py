"""What keeps a workflow's order whatever is done to it from outside, on every engine: a retry by
filter or by id never lets a step go before its dependencies finish; a step name is stored once per
workflow, however many enqueues add it at once; cancelling a batch still runs the callbacks its
jobs' cancellation calls for."""

from __future__ import annotations

from conveyor import Batch, JobFilter, JobState, Workflow
from conveyor._workflows import cancel_workflow, retry_workflow
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


# -- cancelling a batch ----------------------------------------------------------------------------
CALLBACKS = ("on_completed", "on_exhausted", "on_discarded", "on_cancelled")


async def test_cancelling_a_batch_runs_the_callbacks_its_cancelled_jobs_call_for(any_engine: Engine) -> None:
    """A batch of three, one completed: cancel_workflow cancels the other two, and its callbacks
    settle as if those had been cancelled one by one: on_cancelled and on_exhausted run, once, with
    the counts; on_completed and on_discarded never do."""
    batch = Batch(**{kind: step(args={"kind": kind}) for kind in CALLBACKS}).add_many(
        step(args={"n": n}) for n in range(3)
    )
    ids = await enqueue(any_engine, batch.workflow())
    await run(any_engine, ids, "job-0")
    cancelled = await cancel_workflow(any_engine, batch.id, now=T0)
    assert {ids["job-1"], ids["job-2"]} <= set(cancelled)
    found = await states(any_engine, ids)
    assert {kind: found[kind] for kind in CALLBACKS} == {
        "on_completed": JobState.CANCELLED,
        "on_exhausted": JobState.AVAILABLE,
        "on_discarded": JobState.CANCELLED,
        "on_cancelled": JobState.AVAILABLE,
    }
    assert found["job-1"] is JobState.CANCELLED and found["job-2"] is JobState.CANCELLED
    ended = {"completed": 1, "cancelled": 2, "discarded": 0, "deleted": 0}
    assert (await job(any_engine, ids["on_cancelled"])).meta["deps_ended"] == ended
    assert await fetched(any_engine) == sorted([ids["on_exhausted"], ids["on_cancelled"]])
    await run(any_engine, ids, "on_exhausted", "on_cancelled")
    assert await cancel_workflow(any_engine, batch.id, now=T0) == []  # nothing left to cancel
    assert await any_engine.sweep_steps(now=T0) == {}


async def test_cancelling_a_workflow_still_cancels_its_plain_steps(any_engine: Engine) -> None:
    ids = await enqueue(any_engine, chain())
    assert await cancel_workflow(any_engine, (await job(any_engine, ids["a"])).meta["workflow_id"]) == sorted(
        ids.values()
    )
    assert set((await states(any_engine, ids)).values()) == {JobState.CANCELLED}
