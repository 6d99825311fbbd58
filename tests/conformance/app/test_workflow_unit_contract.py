"""A workflow as a unit, on every engine: its steps' ids by name, one state for the whole of it,
waiting for it, one workflow per key, and its outcome kept after its jobs are pruned."""

from __future__ import annotations

import pickle
from collections.abc import AsyncIterator

import pytest

from conveyor import Batch, Conveyor, JobIds, JobRequest, Workflow, WorkflowIds
from conveyor.engine.base import Engine
from tests.conformance.conftest import BLOCKING_CALLER_CONNECTIONS

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
    assert list(ids.by_name) == ["root", "sub.x", "sub.y"]  # type: ignore[attr-defined]
    batch = Batch(on_completed=request(done=True)).add_many(request(n=n) for n in range(2))
    batch_ids = await app.enqueue_many(batch)
    assert isinstance(batch_ids, WorkflowIds) and len(batch_ids.by_name) == 3
    graft = (await app.extend_workflow(outer.id)).add("z", request(n=3), deps=["sub.y"])
    grafted = await app.enqueue_many(graft)
    assert list(grafted.by_name) == ["z"]  # type: ignore[attr-defined]


def test_a_callers_connection_names_the_steps_too(engine_name: str, any_engine: Engine) -> None:
    app = Conveyor(engine=any_engine, testing="manual")
    workflow = diamond()
    with BLOCKING_CALLER_CONNECTIONS[engine_name](any_engine) as conn:
        ids = app.enqueue_many_sync(workflow, conn=conn)
    assert isinstance(ids, WorkflowIds) and list(ids.by_name) == ["a", "b", "c", "d"]
    app.close_sync()
