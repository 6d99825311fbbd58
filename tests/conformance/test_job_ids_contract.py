"""What enqueue returns on every engine: ``JobId`` values, ints in every way, that say whether the
request made a new job (``conflict``); and that an id goes straight into another job's args."""

from __future__ import annotations

import orjson

from conveyor import Conveyor, ExistingJobId, JobFilter, JobId, JobRequest

ELSEWHERE = "not-run-here"  # a queue no node runs: the jobs stay as inserted


def request(**args: object) -> JobRequest:
    return JobRequest("tests.elsewhere.Job", args=args, queue=ELSEWHERE)


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
