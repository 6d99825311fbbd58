"""The engine contract at a glance: schema, one pass over each group of operations. The topic files
(test_jobs_contract, test_hot_path_contract, test_cluster_contract, test_notifications_contract) go
into every detail."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from conveyor import JobFilter, JobRequest, JobState
from conveyor.acks import Ack
from conveyor.engine.base import Engine
from tests.helpers import poll

T0 = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
NODE, PRODUCER = "node-1", "00000000-0000-4000-8000-000000000001"


def req(**options: Any) -> JobRequest:
    args = options.pop("args", {"n": 1})
    return JobRequest(worker=options.pop("worker", "tests.w.Job"), args=args, **options)


async def fetch(engine: Engine, queue: str = "default", demand: int = 10, now: datetime = T0) -> list[int]:
    jobs = await engine.fetch_jobs(queue, demand, node=NODE, producer=PRODUCER, now=now)
    return [j.id for j in jobs]


# -- insert and read -----------------------------------------------------------------------------
async def test_insert_stores_every_field_and_returns_ids_in_order(any_engine: Engine) -> None:
    requests = [
        req(
            args={"i": i, "s": 'é,"\\\t'},
            queue="mail",
            priority=3,
            max_attempts=5,
            tags=["a", "b"],
            meta={"m": i},
        )
        for i in range(300)
    ]
    ids = await any_engine.insert(requests, now=T0)
    assert ids == sorted(ids) and len(set(ids)) == 300
    job = await any_engine.get_job(ids[7])
    assert job is not None
    assert (job.state, job.queue, job.priority, job.max_attempts, job.attempt) == (
        JobState.AVAILABLE,
        "mail",
        3,
        5,
        0,
    )
    assert job.args == {"i": 7, "s": 'é,"\\\t'} and job.meta == {"m": 7} and job.tags == ("a", "b")
    assert job.inserted_at == T0 and job.scheduled_at == T0
    assert await any_engine.get_job(10**9) is None


async def test_scheduling_decides_the_state(any_engine: Engine) -> None:
    later, earlier, delayed = await any_engine.insert(
        [
            req(scheduled_at=T0 + timedelta(hours=1)),
            req(scheduled_at=T0 - timedelta(hours=1)),
            req(schedule_in=30),
        ],
        now=T0,
    )
    assert (await any_engine.get_job(later)).state is JobState.SCHEDULED  # type: ignore[union-attr]
    assert (await any_engine.get_job(earlier)).state is JobState.AVAILABLE  # type: ignore[union-attr]
    job = await any_engine.get_job(delayed)
    assert job is not None and job.state is JobState.SCHEDULED
    assert job.scheduled_at == T0 + timedelta(seconds=30)


async def test_list_filters_and_pages_newest_first(any_engine: Engine) -> None:
    ids = await any_engine.insert(
        [req(queue="a", tags=["x"]), req(queue="b", tags=["x", "y"]), req(queue="a", worker="tests.w.Other")],
        now=T0,
    )
    assert [j.id for j in await any_engine.list_jobs(JobFilter(queues=("a",)))] == [ids[2], ids[0]]
    assert [j.id for j in await any_engine.list_jobs(JobFilter(tags=("x", "y")))] == [ids[1]]
    assert [j.id for j in await any_engine.list_jobs(JobFilter(workers=("tests.w.Other",)))] == [ids[2]]
    page = await any_engine.list_jobs(JobFilter(limit=2))
    assert [j.id for j in page] == [ids[2], ids[1]]
    rest = await any_engine.list_jobs(JobFilter(limit=2, before_id=page[-1].id))
    assert [j.id for j in rest] == [ids[0]]


# -- the hot path ----------------------------------------------------------------------------------
async def test_fetch_claims_in_priority_time_id_order_up_to_demand(any_engine: Engine) -> None:
    low, high, old = await any_engine.insert(
        [req(priority=5), req(priority=0), req(priority=5, scheduled_at=T0 - timedelta(minutes=5))], now=T0
    )
    assert await fetch(any_engine, demand=2) == [high, old]
    assert await fetch(any_engine, demand=2) == [low]
    assert await fetch(any_engine) == []
    job = await any_engine.get_job(low)
    assert job is not None
    assert job.state is JobState.EXECUTING and job.attempt == 1 and job.attempted_by == (NODE, PRODUCER)
    assert job.attempted_at == T0


async def test_ack_writes_each_outcome_and_ignores_stale_attempts(any_engine: Engine) -> None:
    ids = await any_engine.insert([req(max_attempts=3) for _ in range(5)], now=T0)
    await fetch(any_engine, now=T0)
    done, retry, snooze, cancel, stale = ids
    error = {"attempt": 1, "at": T0.isoformat(), "error": "boom"}
    written = await any_engine.ack_jobs(
        [
            Ack(done, 1, JobState.COMPLETED, meta={"recorded": True, "return": "x"}),
            Ack(retry, 1, JobState.RETRYABLE, schedule_in=20, error=error),
            Ack(snooze, 1, JobState.SCHEDULED, schedule_in=5, snoozed=True),
            Ack(cancel, 1, JobState.CANCELLED, error=error),
            Ack(stale, 2, JobState.COMPLETED),  # not the attempt that is executing
        ],
        now=T0,
    )
    assert sorted(written) == sorted([done, retry, snooze, cancel])
    jobs = {i: await any_engine.get_job(i) for i in ids}
    assert jobs[done].state is JobState.COMPLETED and jobs[done].completed_at == T0  # type: ignore[union-attr]
    assert jobs[done].meta == {"recorded": True, "return": "x"}  # type: ignore[union-attr]
    assert jobs[retry].state is JobState.RETRYABLE  # type: ignore[union-attr]
    assert jobs[retry].scheduled_at == T0 + timedelta(seconds=20)  # type: ignore[union-attr]
    assert [e["error"] for e in jobs[retry].errors] == ["boom"]  # type: ignore[union-attr]
    assert jobs[snooze].state is JobState.SCHEDULED and jobs[snooze].attempt == 0  # type: ignore[union-attr]
    assert jobs[snooze].meta == {"snoozed": 1}  # type: ignore[union-attr]
    assert jobs[cancel].state is JobState.CANCELLED and jobs[cancel].cancelled_at == T0  # type: ignore[union-attr]
    assert jobs[stale].state is JobState.EXECUTING  # type: ignore[union-attr]


async def test_an_ack_given_a_node_applies_only_to_that_nodes_claim(any_engine: Engine) -> None:
    # After a claim undone by a crash of the server (synchronous_commit off), another node can claim
    # the same attempt again: the first run's ack must not end the other node's run.
    ours, theirs = await any_engine.insert([req(), req()], now=T0)
    assert await fetch(any_engine, demand=1) == [ours]
    other = await any_engine.fetch_jobs("default", 1, node="another-node", producer=PRODUCER, now=T0)
    assert [j.id for j in other] == [theirs]
    acks = [Ack(ours, 1, JobState.COMPLETED), Ack(theirs, 1, JobState.COMPLETED)]
    assert await any_engine.ack_jobs(acks, now=T0, node=NODE) == [ours]
    assert (await any_engine.get_job(theirs)).state is JobState.EXECUTING  # type: ignore[union-attr]
    assert await any_engine.ack_jobs(acks, now=T0, node="a-third-node") == []
    # Without a node (acks written outside a node: the testing helpers, tools), any claim's.
    assert await any_engine.ack_jobs(acks, now=T0) == [theirs]
    assert (await any_engine.get_job(theirs)).state is JobState.COMPLETED  # type: ignore[union-attr]


# -- managing ------------------------------------------------------------------------------------
async def test_cancel_retry_delete(any_engine: Engine) -> None:
    waiting, running, finished = await any_engine.insert([req(), req(), req(max_attempts=1)], now=T0)
    await fetch(any_engine, demand=1)  # claims `waiting` (lowest id)
    await any_engine.ack_jobs([Ack(waiting, 1, JobState.DISCARDED)], now=T0)
    await fetch(any_engine, demand=1)  # claims `running`
    assert await any_engine.cancel_jobs(JobFilter(ids=(running, finished)), now=T0) == [running, finished]
    assert (await any_engine.get_job(running)).state is JobState.CANCELLED  # type: ignore[union-attr]
    retried = await any_engine.retry_jobs(JobFilter(ids=(waiting, finished)), now=T0)
    assert retried == [waiting, finished]
    job = await any_engine.get_job(waiting)
    assert job is not None and job.state is JobState.AVAILABLE and job.max_attempts >= job.attempt + 1
    assert await fetch(any_engine, demand=1) == [waiting]
    # Delete everything: the executing job stays, its node still owns it.
    assert sorted(await any_engine.delete_jobs(JobFilter())) == [running, finished]
    assert [j.id for j in await any_engine.list_jobs(JobFilter())] == [waiting]


# -- notifications -------------------------------------------------------------------------------
async def test_insert_notifies_listeners_of_available_queues_only(any_engine: Engine) -> None:
    heard: list[tuple[str, dict[str, Any]]] = []
    listener = await any_engine.listen(
        ["insert", "signal"], lambda name, payload: heard.append((name, payload))
    )
    try:
        await any_engine.insert([req(queue="mail"), req(queue="late", schedule_in=60)])
        await any_engine.notify("signal", {"action": "pause", "queue": "mail"})
        await poll(lambda: ("signal", {"action": "pause", "queue": "mail"}) in heard, what="the pause signal")
    finally:
        await listener.stop()
    assert ("insert", {"queue": "mail"}) in heard
    assert ("insert", {"queue": "late"}) not in heard
    assert ("signal", {"action": "pause", "queue": "mail"}) in heard
