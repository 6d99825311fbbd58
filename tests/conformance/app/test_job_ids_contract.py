"""What enqueue returns on every engine: ``JobId`` values, ints in every way, that say whether the
request made a new job (``conflict``); ``enqueue_many`` gives them as a ``JobIds`` on every path
(statements, COPY, a caller's connection async or blocking, workflows, inline testing); and an id
goes straight into another job's args."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import orjson
import pytest

from conveyor import Conveyor, ExistingJobId, JobFilter, JobId, JobIds, JobRequest, Workflow, WorkflowIds
from conveyor.engine.base import Engine
from tests.conformance import api_jobs
from tests.conformance.conftest import BLOCKING_CALLER_CONNECTIONS

ELSEWHERE = "not-run-here"  # a queue no node runs: the jobs stay as inserted


def request(**args: object) -> JobRequest:
    return JobRequest("tests.elsewhere.Job", args=args, queue=ELSEWHERE)


def unique(key: int) -> JobRequest:
    """A request unique by its args for as long as its job lives."""
    return JobRequest("tests.elsewhere.Job", args={"key": key}, queue=ELSEWHERE, unique={"period": None})


@pytest.fixture
async def app(any_engine: Engine) -> AsyncIterator[Conveyor]:
    """An app on each engine that stores jobs and runs none."""
    app = Conveyor(engine=any_engine, testing="manual")
    yield app
    await app.close()


def assert_new_ids(ids: Any, count: int) -> None:
    """``ids`` is a ``JobIds`` of ``count`` new jobs, numbered in input order (a workflow's: a
    ``WorkflowIds``, the ``JobIds`` that also names its steps)."""
    assert type(ids) in (JobIds, WorkflowIds) and len(ids) == count
    assert all(type(i) is JobId and not i.conflict for i in ids)
    if count:
        assert ids == list(range(ids[0], ids[0] + count)) and ids.tolist() == list(ids)


async def test_enqueue_returns_job_ids_that_are_ints(node_app: Conveyor) -> None:
    first = await node_app.enqueue(request(n=1))
    assert type(first) is JobId and first.conflict is False
    assert first == int(first) and hash(first) == hash(int(first)) and repr(first) == f"JobId({int(first)})"
    many = await node_app.enqueue_many([request(n=i) for i in range(300)])  # the COPY path on PostgreSQL
    assert all(type(i) is JobId and not i.conflict for i in many)
    assert many == list(range(many[0], many[0] + 300))
    small = await node_app.enqueue_many([request(n=1), request(n=2)])
    assert [type(i) for i in small] == [JobId, JobId]


async def test_a_job_id_works_wherever_an_int_does(node_app: Conveyor) -> None:
    parent = await node_app.enqueue(request(n=1))
    child = await node_app.enqueue(request(parent=parent, nested=[parent]).with_options(meta={"of": parent}))
    stored = await node_app.get_job(child)
    assert stored is not None
    assert stored.args == {"parent": int(parent), "nested": [int(parent)]}
    assert type(stored.args["parent"]) is int and stored.meta["of"] == parent
    assert [j.id for j in await node_app.list_jobs(JobFilter(ids=(parent, child)))] == [child, parent]
    assert await node_app.cancel_jobs(ids=[parent]) == [parent]
    assert orjson.dumps({"id": parent}) == orjson.dumps({"id": int(parent)})


def test_an_existing_job_id_is_a_conflict() -> None:
    existing = ExistingJobId(7)
    assert existing == 7 and isinstance(existing, JobId) and existing.conflict is True
    assert repr(existing) == "ExistingJobId(7)"


# -- enqueue_many returns a JobIds -----------------------------------------------------------------
@pytest.mark.parametrize("count", [0, 2, 300, 6_001], ids=["empty", "statement", "copy", "chunks"])
async def test_enqueue_many_returns_job_ids(app: Conveyor, count: int) -> None:
    """300 goes by COPY on PostgreSQL; 6,001 takes several chunks on both engines."""
    ids = await app.enqueue_many(request(n=n) for n in range(count))
    assert_new_ids(ids, count)
    if count:
        stored = await app.list_jobs(JobFilter(ids=(ids[0], ids[-1]), limit=2))
        assert sorted(job.args["n"] for job in stored) == [0, count - 1]
        assert ids[-1] - ids[0] == count - 1 and ids[1:3] == [ids[0] + 1, ids[0] + 2][: count - 1]


@pytest.mark.parametrize("count", [2, 300])
async def test_enqueue_many_on_a_callers_connection_returns_job_ids(
    app: Conveyor, caller_conn: Any, count: int
) -> None:
    ids = await app.enqueue_many([request(n=n) for n in range(count)], conn=caller_conn)
    assert_new_ids(ids, count)
    await caller_conn.commit()
    assert await app.count_jobs(queues=ELSEWHERE) == count


@pytest.mark.parametrize("count", [0, 2, 300])
async def test_enqueue_many_sync_on_a_callers_connection_returns_job_ids(
    app: Conveyor, engine_name: str, any_engine: Engine, count: int
) -> None:
    with BLOCKING_CALLER_CONNECTIONS[engine_name](any_engine) as conn:
        ids = app.enqueue_many_sync([request(n=n) for n in range(count)], conn=conn)
    assert_new_ids(ids, count)
    assert await app.count_jobs(queues=ELSEWHERE) == count


@pytest.mark.parametrize("padding", [0, 250], ids=["statement", "copy"])
async def test_conflicts_in_bulk_are_flagged_at_their_positions(app: Conveyor, padding: int) -> None:
    """A request meeting a stored job, and a later duplicate inside the batch, come back as
    ``ExistingJobId`` at their own positions; with ``padding`` plain requests around them the batch
    goes by COPY on PostgreSQL, which hands the unique runs to a statement."""
    stored = await app.enqueue(unique(0))
    plain = [request(n=n) for n in range(padding)]
    batch = [*plain, unique(0), unique(1), request(n=-1), unique(1), unique(2), *plain, unique(0), unique(2)]
    ids = await app.enqueue_many(batch)
    assert type(ids) is JobIds and len(ids) == len(batch)
    conflicts = [position for position, job_id in enumerate(ids) if job_id.conflict]
    first, second = padding, 2 * padding + 5
    assert conflicts == [first, first + 3, second, second + 1]
    assert all(type(ids[p]) is ExistingJobId for p in conflicts)
    assert ids[first] == stored and ids[second] == stored  # the stored job
    assert ids[first + 3] == ids[first + 1] and ids[second + 1] == ids[first + 4]  # earlier in the batch
    new = [job_id for job_id in ids if not job_id.conflict]
    assert len(new) == 2 * padding + 3 and new == sorted(new) and len(set(new)) == len(new)
    # Slices, reversal and a copy keep each conflict at its place.
    assert [i.conflict for i in ids[first:]] == [i.conflict for i in list(ids)[first:]]
    assert [i.conflict for i in reversed(ids)] == [i.conflict for i in list(ids)][::-1]
    assert [i.conflict for i in JobIds(ids)] == [i.conflict for i in ids]
    assert await app.count_jobs(queues=ELSEWHERE) == 1 + len(new)


async def test_a_workflow_returns_job_ids(app: Conveyor) -> None:
    workflow = Workflow().add("a", request(n=1)).add("b", request(n=2), deps=["a"]).add("c", request(n=3))
    ids = await app.enqueue_many(workflow)
    assert_new_ids(ids, 3)


async def test_inline_testing_returns_job_ids(any_engine: Engine) -> None:
    api_jobs.SEEN.clear()
    app = Conveyor(engine=any_engine, testing="inline")
    try:
        ids = await app.enqueue_many([api_jobs.child.new(n=1), api_jobs.child.new(n=2)])
        assert type(ids) is JobIds and len(ids) == 2 and ids[0] != ids[1]
        assert [type(i) for i in ids] == [JobId, JobId] and api_jobs.SEEN["children"] == [1, 2]
        assert await app.enqueue_many([]) == []
    finally:
        await app.close()
