"""Workflows run by real nodes on every engine: the order steps start in, results passed along,
failures, status, cancel, retry, and steps added by a running step."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from conveyor import Batch, Conveyor, JobState, Workflow
from conveyor.engine.base import Engine
from conveyor.errors import ValidationError
from tests.conformance import jobs
from tests.helpers import poll

NODE = {"queues": {"flow": 5}, "poll_interval": 0.05, "stage_interval": 0.1}


@pytest.fixture
async def fleet(fleet_engines: list[Engine]) -> AsyncIterator[list[Conveyor]]:
    """Three started nodes on one database; the first leads (the sweep runs there)."""
    jobs.FLOW_LOG.clear()
    jobs.FLOW.clear()
    apps = [
        Conveyor(engine=engine, node=f"flow-{n}", leadership=n == 0, **NODE)
        for n, engine in enumerate(fleet_engines)
    ]
    for app in apps:
        await app.start()
    jobs.FLOW["app"] = apps[0]
    try:
        yield apps
    finally:
        for app in apps:
            await app.stop(grace=1)


async def until_finished(app: Conveyor, workflow_id: str, timeout: float = 30) -> dict[str, JobState]:
    status = await poll(
        lambda: app.workflow_status(workflow_id),
        lambda s: s.finished,
        timeout=timeout,
        what=f"workflow {workflow_id} to finish",
        every=0.05,
    )
    return status.states


def position(label: str, event: str) -> int:
    return jobs.FLOW_LOG.index((label, event))


async def test_a_diamond_runs_in_order_on_three_nodes(fleet: list[Conveyor]) -> None:
    workflow = (
        Workflow(name="diamond")
        .add("a", jobs.flow_step.new(label="a", pause=0.05))
        .add("b", jobs.flow_step.new(label="b", pause=0.1), deps=["a"])
        .add("c", jobs.flow_step.new(label="c", pause=0.02), deps=["a"])
        .add("d", jobs.flow_join.new(label="d"), deps=["b", "c"])
    )
    ids = await fleet[1].enqueue_many(workflow)
    assert len(ids) == 4
    assert set((await until_finished(fleet[2], workflow.id)).values()) == {JobState.COMPLETED}
    assert position("a", "end") < position("b", "start") and position("a", "end") < position("c", "start")
    assert position("b", "end") < position("d", "start") and position("c", "end") < position("d", "start")
    assert sorted(label for label, event in jobs.FLOW_LOG if event == "start") == ["a", "b", "c", "d"]
    # The last step read what the two before it recorded.
    assert await fleet[0].get_result(ids[3]) == {"b": "B", "c": "C"}


async def test_a_fan_out_of_a_thousand_then_a_fan_in_once(fleet: list[Conveyor]) -> None:
    workflow = Workflow().add("root", jobs.flow_step.new(label="root"))
    leaves = [f"leaf{n}" for n in range(1000)]
    for name in leaves:
        workflow.add(name, jobs.flow_step.new(label=name), deps=["root"])
    workflow.add("join", jobs.flow_step.new(label="join"), deps=leaves)
    await fleet[0].enqueue_many(workflow)
    found = await until_finished(fleet[0], workflow.id, timeout=60)
    assert set(found.values()) == {JobState.COMPLETED}
    starts = [label for label, event in jobs.FLOW_LOG if event == "start"]
    assert starts.count("join") == 1 and len(starts) == 1002
    assert starts[-1] == "join"  # after every leaf had started ...
    steps = (await fleet[0].workflow_status(workflow.id)).steps
    last_leaf = max(steps[name].completed_at for name in leaves if steps[name].completed_at)
    join = steps["join"]
    assert join.attempted_at is not None and join.attempted_at >= last_leaf  # ... and completed


async def test_a_failed_step_cancels_what_follows_and_a_retry_finishes_the_workflow(
    fleet: list[Conveyor],
) -> None:
    workflow = (
        Workflow()
        .add("a", jobs.flow_step.new(label="a"))
        .add("b", jobs.flow_fails.new(label="b"), deps=["a"])
        .add("c", jobs.flow_step.new(label="c"), deps=["b"])
        .add("d", jobs.flow_step.new(label="d"), deps=["a"])
    )
    await fleet[0].enqueue_many(workflow)
    found = await until_finished(fleet[0], workflow.id)
    assert found == {
        "a": JobState.COMPLETED,
        "b": JobState.DISCARDED,
        "c": JobState.CANCELLED,
        "d": JobState.COMPLETED,
    }
    status = await fleet[1].workflow_status(workflow.id)
    assert status.counts == {JobState.COMPLETED: 2, JobState.DISCARDED: 1, JobState.CANCELLED: 1}
    jobs.FLOW["fail"] = False
    retried = await fleet[1].retry_workflow(workflow.id)
    assert sorted(retried) == sorted([status.steps["b"].id, status.steps["c"].id])
    assert set((await until_finished(fleet[0], workflow.id)).values()) == {JobState.COMPLETED}
    assert [label for label, event in jobs.FLOW_LOG if event == "start"].count("c") == 1


async def test_cancelling_a_workflow_cancels_every_unfinished_step(fleet: list[Conveyor]) -> None:
    workflow = (
        Workflow()
        .add("slow", jobs.flow_step.new(label="slow", pause=30))
        .add("after", jobs.flow_step.new(label="after"), deps=["slow"])
    )
    ids = await fleet[0].enqueue_many(workflow)
    await poll(lambda: ("slow", "start") in jobs.FLOW_LOG, what="the slow step to start")
    assert sorted(await fleet[2].cancel_workflow(workflow.id)) == sorted(ids)
    assert await until_finished(fleet[0], workflow.id) == {
        "slow": JobState.CANCELLED,
        "after": JobState.CANCELLED,
    }


async def test_a_running_step_adds_steps_to_its_own_workflow(fleet: list[Conveyor]) -> None:
    workflow = (
        Workflow()
        .add("plan", jobs.flow_graft.new(label="plan", fan=3))
        .add("side", jobs.flow_step.new(label="side"), deps=["plan"])
    )
    await fleet[0].enqueue_many(workflow)
    status = await poll(
        lambda: fleet[0].workflow_status(workflow.id),
        lambda found: len(found.steps) == 6 and found.finished,
        timeout=30,
        what="the six steps to finish",
        every=0.05,
    )
    assert set(status.states.values()) == {JobState.COMPLETED}
    assert position("plan.done", "start") > max(position(f"plan.{n}", "end") for n in range(3))


async def test_bad_workflow_ids_are_refused(fleet: list[Conveyor]) -> None:
    with pytest.raises(ValidationError, match="workflow_id"):
        await fleet[0].workflow_status("")
    with pytest.raises(ValidationError, match="no such workflow"):
        await fleet[0].extend_workflow("missing")
    status: Any = await fleet[0].workflow_status("missing")
    assert status.steps == {} and not status.finished


# -- batches ---------------------------------------------------------------------------------------
def callbacks() -> dict[str, Any]:
    return {kind: jobs.flow_callback.new(kind=kind) for kind in CALLBACK_KINDS}


CALLBACK_KINDS = ("on_completed", "on_exhausted", "on_discarded", "on_cancelled")


async def test_a_batch_that_completes_runs_its_completed_callback_once(fleet: list[Conveyor]) -> None:
    jobs.CALLBACKS.clear()
    batch = Batch(**callbacks()).add_many(jobs.flow_step.new(label=f"j{n}") for n in range(30))
    ids = await fleet[0].enqueue_many(batch)
    assert len(ids) == 34
    found = await until_finished(fleet[0], batch.id)
    assert jobs.CALLBACKS == [
        ("on_completed", {"completed": 30, "cancelled": 0, "discarded": 0, "deleted": 0})
    ]
    assert [found[kind] for kind in CALLBACK_KINDS] == [
        JobState.COMPLETED,
        JobState.CANCELLED,
        JobState.CANCELLED,
        JobState.CANCELLED,
    ]


async def test_a_batch_with_failures_runs_its_exhausted_and_discarded_callbacks(
    fleet: list[Conveyor],
) -> None:
    jobs.CALLBACKS.clear()
    batch = Batch(**callbacks()).add_many(jobs.flow_step.new(label=f"j{n}") for n in range(5))
    batch.add(jobs.flow_fails.new(label="bad"))
    await fleet[1].enqueue_many(batch)
    found = await until_finished(fleet[0], batch.id)
    counts = {"completed": 5, "cancelled": 0, "discarded": 1, "deleted": 0}
    assert sorted(jobs.CALLBACKS) == [("on_discarded", counts), ("on_exhausted", counts)]
    assert found["on_completed"] is JobState.CANCELLED and found["on_cancelled"] is JobState.CANCELLED


async def test_a_cancelled_batch_runs_its_cancelled_and_exhausted_callbacks_once(
    fleet: list[Conveyor],
) -> None:
    jobs.CALLBACKS.clear()
    batch = Batch(**callbacks()).add_many(jobs.flow_step.new(label=f"slow{n}", pause=30) for n in range(3))
    await fleet[0].enqueue_many(batch)
    await poll(
        lambda: sum(event == "start" for _, event in jobs.FLOW_LOG), lambda n: n >= 3, what="three starts"
    )
    await fleet[2].cancel_workflow(batch.id)
    found = await until_finished(fleet[0], batch.id)
    counts = {"completed": 0, "cancelled": 3, "discarded": 0, "deleted": 0}
    assert sorted(jobs.CALLBACKS) == [("on_cancelled", counts), ("on_exhausted", counts)]
    assert found["on_completed"] is JobState.CANCELLED and found["on_discarded"] is JobState.CANCELLED


def test_bad_batches_are_refused() -> None:
    with pytest.raises(ValidationError, match="batch"):
        Batch().workflow()
    with pytest.raises(ValidationError, match="on_completed"):
        Batch(on_completed="report")  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="job"):
        Batch().add(42)  # type: ignore[arg-type]
