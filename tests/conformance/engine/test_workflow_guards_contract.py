"""What keeps a workflow's order whatever is done to it from outside, on every engine: a retry by
filter or by id never lets a step go before its dependencies finish; a step name is stored once per
workflow, however many enqueues add it at once; cancelling a batch still runs the callbacks its
jobs' cancellation calls for."""

from __future__ import annotations

import asyncio
import re

import pytest

from conveyor import Batch, JobFilter, JobState, Workflow
from conveyor._app.workflow_actions import cancel_workflow, enqueue_workflow, extend_workflow, retry_workflow
from conveyor.acks import Ack
from conveyor.engine.base import Engine
from conveyor.errors import StepExistsError
from conveyor.workflow import step_name
from tests.conformance.contract import T0, job, uid
from tests.conformance.engine.test_workflows_contract import enqueue, run, states, step


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


# -- step names ------------------------------------------------------------------------------------
def graft(workflow_id: str, stored: list[str]) -> Workflow:
    """c after a, d after c and b: what a running step adds to its workflow."""
    return (
        Workflow.adding_to(workflow_id, stored).add("c", step(), deps=["a"]).add("d", step(), deps=["c", "b"])
    )


async def test_a_step_name_is_stored_once_whatever_inserts_it(any_engine: Engine) -> None:
    """Two grafts that both passed the check of the stored names (they read them at once): the
    database takes the first and refuses the second whole."""
    ids = await enqueue(any_engine, Workflow(id="names-1").add("a", step()).add("b", step(), deps=["a"]))
    first, second = graft("names-1", ["a", "b"]), graft("names-1", ["a", "b"])
    requests, hold = first.requests()
    await any_engine.insert(requests, now=T0, hold=hold)
    requests, hold = second.requests()
    with pytest.raises(StepExistsError, match="already"):
        await any_engine.insert(requests, now=T0, hold=hold)
    names = [step_name(j) for j in await any_engine.workflow_jobs("names-1")]
    assert names == ["a", "b", "c", "d"]
    # A new workflow enqueued under an id in use is refused too, naming the step.
    with pytest.raises(StepExistsError, match="'a'"):
        await enqueue_workflow(any_engine, Workflow(id="names-1").add("a", step()), now=T0)
    assert len(await any_engine.workflow_jobs("names-1")) == 4 and ids


async def test_two_grafts_of_the_same_names_at_once_store_one_set(fleet_engines: list[Engine]) -> None:
    """Two running steps graft the same names at once, on two nodes: one set of rows is stored, the
    other graft is refused with an error naming a step, and no grafted step goes on before its
    dependencies finish."""
    first = fleet_engines[0]
    ids = await enqueue(first, Workflow(id="names-2").add("a", step()).add("b", step()))
    claimed = {j.id for j in await first.fetch_jobs("default", 10, node="n", producer=uid(1), now=T0)}
    assert claimed == {ids["a"], ids["b"]}  # both run, and both graft
    grafts = [await extend_workflow(engine, "names-2") for engine in fleet_engines[:2]]
    for added in grafts:
        added.add("c", step(), deps=["a"]).add("d", step(), deps=["c", "b"])
    results = await asyncio.gather(
        *(
            enqueue_workflow(engine, added, now=T0)
            for engine, added in zip(fleet_engines, grafts, strict=False)
        ),
        return_exceptions=True,
    )
    refused = [r for r in results if isinstance(r, BaseException)]
    assert len(refused) == 1 and isinstance(refused[0], StepExistsError), results
    assert re.search(r"'[cd]'", str(refused[0])), refused[0]
    steps = {step_name(j): j for j in await first.workflow_jobs("names-2")}
    assert sorted(steps) == ["a", "b", "c", "d"] and len(await first.workflow_jobs("names-2")) == 4
    assert steps["c"].state is JobState.SUSPENDED and steps["d"].state is JobState.SUSPENDED
    await first.ack_jobs([Ack(ids["a"], 1, JobState.COMPLETED)], now=T0)
    assert await fetched(first) == [steps["c"].id]  # d waits for c and b
    await run(first, {"c": steps["c"].id}, "c")
    assert await fetched(first) == []  # b still runs
    await first.ack_jobs([Ack(ids["b"], 1, JobState.COMPLETED)], now=T0)
    assert await fetched(first) == [steps["d"].id]
