"""A workflow as a unit, on every engine: its steps' ids by name, one state for the whole of it,
waiting for it, one workflow per key, and its outcome kept after its jobs are pruned."""

from __future__ import annotations

import asyncio
import pickle
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from conveyor import (
    Batch,
    Conveyor,
    JobIds,
    JobRequest,
    JobState,
    PruneRule,
    Retention,
    Workflow,
    WorkflowIds,
    WorkflowState,
)
from conveyor.engine.base import Engine
from conveyor.errors import (
    JobCancelledError,
    JobDiscardedError,
    ValidationError,
    WaitTimeoutError,
    WorkflowCancelledError,
    WorkflowFailedError,
    WorkflowNotFoundError,
)
from conveyor.testing import drain_queue
from tests.conformance import jobs, workflow_procs
from tests.conformance.app.test_relay_runs_contract import wait_begun
from tests.conformance.conftest import ADDRESSES, BLOCKING_CALLER_CONNECTIONS, started_node
from tests.helpers import racing_processes

ELSEWHERE = "not-run-here"  # a queue no node runs: the jobs stay as inserted


def request(**args: object) -> JobRequest:
    return JobRequest("tests.elsewhere.Job", args=args, queue=ELSEWHERE)


@pytest.fixture
async def app(any_engine: Engine) -> AsyncIterator[Conveyor]:
    """An app on each engine that stores jobs and runs none."""
    app = Conveyor(engine=any_engine, testing="manual")
    yield app
    await app.close()


def diamond(**options: object) -> Workflow:
    return (
        Workflow(**options)  # type: ignore[arg-type]
        .add("a", request(n=1))
        .add("b", request(n=2), deps=["a"])
        .add("c", request(n=3), deps=["a"])
        .add("d", request(n=4), deps=["b", "c"])
    )


async def test_enqueue_many_gives_each_steps_id_by_name(app: Conveyor) -> None:
    workflow = diamond()
    ids = await app.enqueue_many(workflow)
    assert isinstance(ids, WorkflowIds) and isinstance(ids, JobIds)
    assert ids.workflow_id == workflow.id and not ids.conflict
    assert list(ids.by_name) == ["a", "b", "c", "d"]
    assert list(ids.by_name.values()) == list(ids) and len(ids) == 4 and ids[0] == ids.by_name["a"]
    status = await app.workflow_status(workflow.id)
    assert {name: job.id for name, job in status.steps.items()} == ids.by_name
    assert pickle.loads(pickle.dumps(ids)).by_name == ids.by_name
    assert isinstance(ids[1:], JobIds) and not isinstance(ids[1:], WorkflowIds)


async def test_sub_workflows_batches_and_grafts_name_their_steps(app: Conveyor) -> None:
    inner = Workflow().add("x", request(n=1)).add("y", request(n=2), deps=["x"])
    outer = Workflow().add("root", request(n=0)).add_workflow("sub", inner, deps=["root"])
    ids = await app.enqueue_many(outer)
    assert list(ids.by_name) == ["root", "sub.x", "sub.y"]
    batch = Batch(on_completed=request(done=True)).add_many(request(n=n) for n in range(2))
    batch_ids = await app.enqueue_many(batch)
    assert isinstance(batch_ids, WorkflowIds) and len(batch_ids.by_name) == 3
    graft = (await app.extend_workflow(outer.id)).add("z", request(n=3), deps=["sub.y"])
    grafted = await app.enqueue_many(graft)
    assert list(grafted.by_name) == ["z"]


def test_a_callers_connection_names_the_steps_too(engine_name: str, any_engine: Engine) -> None:
    app = Conveyor(engine=any_engine, testing="manual")
    workflow = diamond()
    with BLOCKING_CALLER_CONNECTIONS[engine_name](any_engine) as conn:
        ids = app.enqueue_many_sync(workflow, conn=conn)
    assert isinstance(ids, WorkflowIds) and list(ids.by_name) == ["a", "b", "c", "d"]
    app.close_sync()


@pytest.mark.parametrize("commit", [True, False], ids=["commit", "rollback"])
async def test_steps_grafted_in_a_callers_transaction_are_there_on_commit_only(
    app: Conveyor, caller_conn: Any, commit: bool
) -> None:
    """Steps added to a stored workflow with ``conn``: inserted, listed among the dependents of the
    steps they follow and settled in the caller's transaction, so its commit publishes them all
    and its rollback leaves the workflow as it was."""
    workflow = Workflow().add("a", request(n=1)).add("b", request(n=2), deps=["a"])
    ids = await app.enqueue_many(workflow)
    await app.cancel_jobs(ids=[ids.by_name["a"]])  # a ends (cancelled), so b is cancelled too
    graft = (await app.extend_workflow(workflow.id)).add("c", request(n=3), deps=["b"], ignore=["cancelled"])
    grafted = await app.enqueue_many(graft, conn=caller_conn)
    assert await app.get_job(grafted.by_name["c"]) is None  # not before the commit
    await (caller_conn.commit() if commit else caller_conn.rollback())
    steps = (await app.workflow_status(workflow.id)).steps
    if not commit:
        assert sorted(steps) == ["a", "b"] and "dependents" not in steps["b"].meta
        return
    assert steps["c"].state is JobState.AVAILABLE  # settled in the transaction: b had ended
    assert steps["b"].meta["dependents"] == ["c"]


# -- one state for the whole workflow --------------------------------------------------------------
async def test_status_gives_one_state_a_phase_and_progress(app: Conveyor) -> None:
    workflow = (
        Workflow()
        .add("a", jobs.flow_step.new(label="a"))
        .add("b", jobs.flow_step.new(label="b").with_options(meta={"progress": {"done": 1, "total": 4}}))
        .add("c", jobs.flow_step.new(label="c"), deps=["a", "b"])
    )
    assert (await app.workflow_status(workflow.id)).state is None  # nothing stored yet
    await app.enqueue_many(workflow)
    status = await app.workflow_status(workflow.id)
    assert status.state is WorkflowState.RUNNING and not status.finished
    assert status.phase == ("a", "b") and status.ready == ("a", "b") and status.waiting == ("c",)
    assert status.running == () and status.failed_step is None
    assert status.progress == pytest.approx((0 + 0.25 + 0) / 3)
    assert status.steps["a"].state is JobState.AVAILABLE  # .steps as before
    await drain_queue("flow", app=app)
    done = await app.workflow_status(workflow.id)
    assert done.state is WorkflowState.COMPLETED and done.progress == 1.0 and done.phase == ()


async def test_a_discarded_step_fails_the_workflow_and_a_cancel_cancels_it(app: Conveyor) -> None:
    jobs.FLOW["fail"] = True
    failing = (
        Workflow()
        .add("a", jobs.flow_step.new(label="a"))
        .add("b", jobs.flow_fails.new(label="b"), deps=["a"])
        .add("c", jobs.flow_step.new(label="c"), deps=["b"])
    )
    await app.enqueue_many(failing)
    await drain_queue("flow", app=app, with_safety=True)
    status = await app.workflow_status(failing.id)
    assert status.state is WorkflowState.FAILED and status.failed_step == "b"
    assert status.states["c"] is JobState.CANCELLED and status.progress == 1.0

    cancelled = (
        Workflow().add("a", jobs.flow_step.new(label="a")).add("b", jobs.flow_step.new(label="b"), deps=["a"])
    )
    await app.enqueue_many(cancelled)
    await app.cancel_workflow(cancelled.id)
    status = await app.workflow_status(cancelled.id)
    assert status.state is WorkflowState.CANCELLED and status.failed_step == "a"


async def test_a_batch_whose_callbacks_were_not_called_for_completes(app: Conveyor) -> None:
    batch = Batch(
        on_completed=jobs.flow_callback.new(kind="completed"),
        on_exhausted=jobs.flow_callback.new(kind="exhausted"),
    ).add_many(jobs.flow_step.new(label=f"n{n}") for n in range(3))
    await app.enqueue_many(batch)
    await drain_queue("flow", app=app)
    status = await app.workflow_status(batch.id)
    assert JobState.CANCELLED in status.counts  # on_exhausted: its condition did not hold
    assert status.state is WorkflowState.COMPLETED and status.failed_step is None


# -- waiting for a workflow --------------------------------------------------------------------
@pytest.fixture
async def flow_node(engine_name: str, tmp_path: Path) -> AsyncIterator[Conveyor]:
    """A started node running queue "flow" on each engine."""
    jobs.FLOW.clear()
    async with started_node(engine_name, tmp_path, queues={"flow": 5}, poll_interval=0.05) as app:
        jobs.FLOW["app"] = app
        yield app


async def test_wait_workflow_returns_the_completed_status(flow_node: Conveyor) -> None:
    workflow = (
        Workflow()
        .add("a", jobs.flow_step.new(label="a", pause=0.05))
        .add("b", jobs.flow_step.new(label="b"), deps=["a"])
        .add("c", jobs.flow_join.new(label="c"), deps=["a", "b"])
    )
    await flow_node.enqueue_many(workflow)
    done = await flow_node.wait_workflow(workflow.id, timeout=20)
    assert done.state is WorkflowState.COMPLETED and done.results["c"] == {"a": "A", "b": "B"}
    again = await asyncio.to_thread(flow_node.wait_workflow_sync, workflow.id, timeout=5)
    assert again.state is WorkflowState.COMPLETED  # already over: at once, and from plain code too


async def test_wait_workflow_raises_naming_the_failed_or_cancelled_step(flow_node: Conveyor) -> None:
    failing = (
        Workflow()
        .add("fetch", jobs.flow_step.new(label="fetch"))
        .add("render", jobs.flow_fails.new(label="render"), deps=["fetch"])
        .add("publish", jobs.flow_step.new(label="publish"), deps=["render"])
    )
    await flow_node.enqueue_many(failing)
    with pytest.raises(WorkflowFailedError, match=r"at step 'render'.*render failed") as failed:
        await flow_node.wait_workflow(failing.id, timeout=20)
    assert isinstance(failed.value, JobDiscardedError) and failed.value.step == "render"
    assert failed.value.job.state is JobState.DISCARDED
    assert failed.value.status.states["publish"] is JobState.CANCELLED

    held = (
        Workflow()
        .add("later", jobs.flow_step.new(label="later").with_options(schedule_in=60))
        .add("after", jobs.flow_step.new(label="after"), deps=["later"])
    )
    await flow_node.enqueue_many(held)
    waiting = asyncio.create_task(flow_node.wait_workflow(held.id, timeout=20))
    await wait_begun(flow_node)  # the cancel comes to a wait already listening
    await flow_node.cancel_workflow(held.id)
    with pytest.raises(WorkflowCancelledError, match="cancelled at step 'later'") as cancelled:
        await waiting
    assert isinstance(cancelled.value, JobCancelledError) and cancelled.value.step == "later"


async def test_wait_workflow_times_out_and_refuses_what_is_not_there(flow_node: Conveyor) -> None:
    held = Workflow().add("later", jobs.flow_step.new(label="later").with_options(schedule_in=60))
    ids = await flow_node.enqueue_many(held)
    with pytest.raises(WaitTimeoutError, match=f"workflow '{held.id}' did not finish within 0.1s") as late:
        await flow_node.wait_workflow(held.id, timeout=0.1)
    assert late.value.job_id == ids.by_name["later"] and late.value.state is WorkflowState.RUNNING
    with pytest.raises(WorkflowNotFoundError, match="no workflow with id 'nope'"):
        await flow_node.wait_workflow("nope", timeout=1)
    for bad in ({"workflow_id": ""}, {"workflow_id": 7}, {"workflow_id": "x", "timeout": -1}):
        with pytest.raises(ValidationError):
            await flow_node.wait_workflow(bad.pop("workflow_id"), **bad)  # type: ignore[arg-type]


# -- one workflow per lock ---------------------------------------------------------------------
async def test_one_unfinished_workflow_per_lock(app: Conveyor) -> None:
    first = await app.enqueue_many(diamond(lock="build:docs"))
    assert not first.conflict
    second = diamond(lock="build:docs")
    again = await app.enqueue_many(second)
    # Nothing inserted: the holder's steps come back, as existing ids, by name.
    assert again.conflict and again.workflow_id == first.workflow_id and again.by_name == first.by_name
    assert all(i.conflict for i in again) and (await app.workflow_status(second.id)).state is None
    other = await app.enqueue_many(diamond(lock="build:site"))  # another lock: its own workflow
    assert not other.conflict
    # Once the holder is finished (here: cancelled), the lock is free again.
    await app.cancel_workflow(first.workflow_id)
    third = await app.enqueue_many(second)
    assert not third.conflict and third.workflow_id == second.id

    # A batch takes a lock the same way.
    first_batch = await app.enqueue_many(Batch(lock="thumbs").add(request(n=1)))
    second_batch = await app.enqueue_many(Batch(lock="thumbs").add(request(n=2)))
    assert second_batch.conflict and second_batch.workflow_id == first_batch.workflow_id


def test_eight_processes_racing_make_one_workflow(engine_name: str, any_engine: Engine) -> None:
    url, prefix = ADDRESSES[engine_name](any_engine)
    context = racing_processes()
    start = context.Event()
    results: Any = context.Queue()
    workers = [
        context.Process(target=workflow_procs.enqueue_one, args=(url, prefix, "race", start, results))
        for _ in range(8)
    ]
    for worker in workers:
        worker.start()
    start.set()
    outcomes = [results.get(timeout=120) for _ in workers]
    for worker in workers:
        worker.join(30)
    assert not [o for o in outcomes if o.startswith("error")], outcomes
    assert sum(o.endswith(" new") for o in outcomes) == 1, outcomes
    assert len({o.split()[0] for o in outcomes}) == 1, outcomes  # all name the one workflow


async def test_locks_and_unique_steps_are_refused_clearly(
    app: Conveyor, engine_name: str, any_engine: Engine
) -> None:
    with pytest.raises(ValidationError, match=r"step 'a'.queueing_lock='k'.*Workflow\(lock=...\)"):
        Workflow().add("a", request(n=1).with_options(queueing_lock="k"))
    with pytest.raises(ValidationError, match=r"step 'a'.unique"):
        Workflow().add("a", request(n=1).with_options(unique={"period": 60}))
    for bad in ("", 7, "a\x00b", "x" * 10_000):
        with pytest.raises(ValidationError, match=r"workflow\.lock"):
            Workflow(lock=bad)  # type: ignore[arg-type]
        with pytest.raises(ValidationError, match=r"batch\.lock"):
            Batch(lock=bad)  # type: ignore[arg-type]
    # A caller's transaction cannot hold the lock's turn: refused, nothing written.
    with (
        BLOCKING_CALLER_CONNECTIONS[engine_name](any_engine) as conn,
        pytest.raises(ValidationError, match="a transaction of its own"),
    ):
        await asyncio.to_thread(app.enqueue_many_sync, diamond(lock="k"), conn=conn)
    assert await app.count_jobs() == 0


# -- history that outlives retention -------------------------------------------------------------
async def test_a_pruned_workflow_is_still_told_by_its_record(app: Conveyor) -> None:
    jobs.FLOW["fail"] = True
    workflow = (
        Workflow(name="report")
        .add("fetch", jobs.flow_step.new(label="fetch"))
        .add("render", jobs.flow_fails.new(label="render"), deps=["fetch"])
        .add("publish", jobs.flow_step.new(label="publish"), deps=["render"])
        .add("notes", jobs.flow_step.new(label="notes"))
    )
    await app.enqueue_many(workflow)
    await drain_queue("flow", app=app, with_safety=True)
    before = await app.workflow_status(workflow.id)
    assert before.state is WorkflowState.FAILED and before.record is None
    later = datetime.now(UTC) + timedelta(days=2)
    # Completed steps go first (a rule for them alone), the others in a second prune: the record
    # adds the two passes up, and keeps the worse outcome.
    completed_only = Retention(max_age=None, rules=[PruneRule(states="completed", max_age=60)])
    assert (await app.prune(completed_only, now=later)).count == 2
    half = await app.workflow_status(workflow.id)
    assert list(half.steps) == ["render", "publish"] and half.record is not None
    assert half.state is WorkflowState.FAILED and half.failed_step == "render"
    assert half.counts == {JobState.COMPLETED: 2, JobState.DISCARDED: 1, JobState.CANCELLED: 1}
    await app.prune(Retention(max_age=60), now=later)
    after = await app.workflow_status(workflow.id)
    assert after.steps == {} and after.finished and after.progress == 1.0
    assert after.state is WorkflowState.FAILED and after.failed_step == "render"
    assert after.counts == {JobState.COMPLETED: 2, JobState.DISCARDED: 1, JobState.CANCELLED: 1}
    assert after.record is not None and after.record.name == "report" and after.record.steps == 4
    # Its own retention (a week by default, from when the workflow ended: about now), then forgotten.
    await app.prune(Retention(max_age=60), now=later + timedelta(days=4))
    assert (await app.workflow_status(workflow.id)).state is WorkflowState.FAILED
    await app.prune(Retention(max_age=60), now=later + timedelta(days=6))
    assert (await app.workflow_status(workflow.id)).state is None


async def test_a_completed_batch_is_recorded_completed(app: Conveyor) -> None:
    batch = Batch(on_exhausted=jobs.flow_callback.new(kind="exhausted")).add_many(
        jobs.flow_step.new(label=f"n{n}") for n in range(3)
    )
    await app.enqueue_many(batch)
    await drain_queue("flow", app=app)
    await app.prune(Retention(max_age=0), now=datetime.now(UTC) + timedelta(minutes=1))
    status = await app.workflow_status(batch.id)
    assert status.steps == {} and status.state is WorkflowState.COMPLETED and status.failed_step is None
    # A rule of its own for the records: an hour here.
    await app.prune(Retention(max_age=0, workflow_records=3600), now=datetime.now(UTC) + timedelta(hours=2))
    assert (await app.workflow_status(batch.id)).state is None


async def test_a_locked_workflows_row_goes_with_its_record(app: Conveyor, any_engine: Engine) -> None:
    workflow = Workflow(lock="nightly").add("a", jobs.flow_step.new(label="a"))
    await app.enqueue_many(workflow)
    await drain_queue("flow", app=app)
    soon = datetime.now(UTC) + timedelta(hours=2)
    kept = Retention(max_age=60, workflow_records=3 * 3600)  # records: three hours after the end
    await app.prune(kept, now=soon)
    assert (await app.workflow_status(workflow.id)).state is WorkflowState.COMPLETED  # recorded
    await app.prune(kept, now=soon + timedelta(hours=2))
    assert (await app.workflow_status(workflow.id)).state is None  # the locked row went too
    assert not (await app.enqueue_many(Workflow(lock="nightly").add("a", request(n=1)))).conflict


def test_bad_record_retention_is_refused() -> None:
    with pytest.raises(ValidationError, match="workflow_records"):
        Retention(workflow_records=-1)
    with pytest.raises(ValidationError, match="prune_workflow_records"):
        Conveyor("sqlite:///:memory:", prune_workflow_records="soon")
