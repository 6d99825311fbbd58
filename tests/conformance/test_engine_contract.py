"""Engine-level behaviour that PostgreSQL and SQLite must share."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from conveyor import JobFilter, JobRequest, JobState
from conveyor.acks import Ack
from conveyor.engine.base import Engine
from conveyor.fleet import CronTick, ProducerBeat

T0 = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
NODE, PRODUCER = "node-1", "00000000-0000-4000-8000-000000000001"


def req(**options: Any) -> JobRequest:
    args = options.pop("args", {"n": 1})
    return JobRequest(worker=options.pop("worker", "tests.w.Job"), args=args, **options)


async def fetch(engine: Engine, queue: str = "default", demand: int = 10, now: datetime = T0) -> list[int]:
    jobs = await engine.fetch_jobs(queue, demand, node=NODE, producer=PRODUCER, now=now)
    return [j.id for j in jobs]


# -- schema ------------------------------------------------------------------------------------
async def test_install_is_idempotent(any_engine: Engine) -> None:
    version = await any_engine.schema_version()
    assert version is not None
    assert await any_engine.install() == version
    await any_engine.check_schema()


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


async def test_fetch_never_hands_out_a_job_twice_under_concurrency(any_engine: Engine) -> None:
    await any_engine.insert([req() for _ in range(500)], now=T0)
    batches = await asyncio.gather(*(fetch(any_engine, demand=25) for _ in range(30)))
    claimed = [i for batch in batches for i in batch]
    assert len(claimed) == len(set(claimed))


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


async def test_release_gives_jobs_back_without_spending_the_attempt(any_engine: Engine) -> None:
    (job_id,) = await any_engine.insert([req()], now=T0)
    await fetch(any_engine)
    assert await any_engine.release_jobs([(job_id, 1)]) == [job_id]
    job = await any_engine.get_job(job_id)
    assert job is not None and job.state is JobState.AVAILABLE and job.attempt == 0


async def test_stage_makes_due_jobs_available_in_bounded_batches(any_engine: Engine) -> None:
    await any_engine.insert([req(queue="a", schedule_in=10) for _ in range(3)], now=T0)
    await any_engine.insert([req(queue="b", schedule_in=100)], now=T0)
    assert await any_engine.stage_jobs(10, now=T0 + timedelta(seconds=5)) == {}
    assert await any_engine.stage_jobs(2, now=T0 + timedelta(seconds=11)) == {"a": 2}
    assert await any_engine.stage_jobs(10, now=T0 + timedelta(seconds=11)) == {"a": 1}
    assert await fetch(any_engine, "a") != []


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
        for _ in range(100):
            if ("signal", {"action": "pause", "queue": "mail"}) in heard:
                break
            await asyncio.sleep(0.02)
    finally:
        await listener.stop()
    assert ("insert", {"queue": "mail"}) in heard
    assert ("insert", {"queue": "late"}) not in heard
    assert ("signal", {"action": "pause", "queue": "mail"}) in heard


# -- leadership, producers, rescue -------------------------------------------------------------
async def test_leadership_lease(any_engine: Engine) -> None:
    assert await any_engine.elect_leader("app", "a", 10, now=T0) is not None
    assert await any_engine.elect_leader("app", "b", 10, now=T0 + timedelta(seconds=5)) is None
    assert await any_engine.elect_leader("app", "a", 10, now=T0 + timedelta(seconds=5)) is not None  # renew
    assert (
        await any_engine.elect_leader("app", "b", 10, now=T0 + timedelta(seconds=16)) is not None
    )  # expired
    leader = await any_engine.get_leader("app", now=T0 + timedelta(seconds=17))
    assert leader is not None and leader.node == "b"
    assert await any_engine.resign_leader("app", "b")
    assert await any_engine.get_leader("app", now=T0 + timedelta(seconds=17)) is None


async def test_rescue_follows_heartbeats(any_engine: Engine) -> None:
    dead, alive = "00000000-0000-4000-8000-00000000000d", "00000000-0000-4000-8000-00000000000a"
    await any_engine.record_producers("app", "n1", [ProducerBeat(dead, "default", {})], now=T0)
    await any_engine.record_producers("app", "n2", [ProducerBeat(alive, "default", {})], now=T0)
    orphan, kept, exhausted = await any_engine.insert([req(), req(), req(max_attempts=1)], now=T0)
    await any_engine.fetch_jobs("default", 1, node="n1", producer=dead, now=T0)
    await any_engine.fetch_jobs("default", 1, node="n2", producer=alive, now=T0)
    await any_engine.fetch_jobs("default", 1, node="n1", producer=dead, now=T0)
    later = T0 + timedelta(seconds=30)
    await any_engine.record_producers("app", "n2", [ProducerBeat(alive, "default", {})], now=later)
    result = await any_engine.rescue_jobs(timeout=15, backstop=3600, now=later)
    assert result.available == (orphan,) and result.discarded == (exhausted,)
    job = await any_engine.get_job(orphan)
    assert job is not None and job.state is JobState.AVAILABLE and job.meta.get("rescued") == 1
    assert (await any_engine.get_job(kept)).state is JobState.EXECUTING  # type: ignore[union-attr]
    assert await any_engine.still_executing([(orphan, 1), (kept, 1)]) == {kept}
    assert await any_engine.still_executing([(kept, 2)]) == set()  # another attempt is not ours


async def test_rescue_spares_the_live_producers_it_is_told_of(any_engine: Engine) -> None:
    mine, dead = "00000000-0000-4000-8000-0000000000b1", "00000000-0000-4000-8000-0000000000b2"
    for uuid in (mine, dead):
        await any_engine.record_producers("app", "n1", [ProducerBeat(uuid, "default", {})], now=T0)
    own, orphan = await any_engine.insert([req(), req()], now=T0)
    await any_engine.fetch_jobs("default", 1, node="n1", producer=mine, now=T0)
    await any_engine.fetch_jobs("default", 1, node="n1", producer=dead, now=T0)
    later = T0 + timedelta(seconds=60)  # both rows are stale
    result = await any_engine.rescue_jobs(timeout=15, backstop=3600, live=[mine], now=later)
    assert result.available == (orphan,)
    assert (await any_engine.get_job(own)).state is JobState.EXECUTING  # type: ignore[union-attr]
    assert [p.uuid for p in await any_engine.list_producers()] == [mine]  # only the dead one goes


async def test_prune_deletes_old_final_jobs_in_batches(any_engine: Engine) -> None:
    ids = await any_engine.insert([req() for _ in range(5)], now=T0)
    await fetch(any_engine, now=T0)
    await any_engine.ack_jobs([Ack(i, 1, JobState.COMPLETED) for i in ids[:4]], now=T0)
    later = T0 + timedelta(days=2)
    assert await any_engine.prune_jobs(max_age=86400, limit=3, now=later) == 3
    assert await any_engine.prune_jobs(max_age=86400, limit=3, now=later) == 1
    assert await any_engine.prune_jobs(max_age=86400, limit=3, now=later) == 0
    assert [j.id for j in await any_engine.list_jobs(JobFilter())] == [ids[4]]


async def test_cron_ticks_insert_once(any_engine: Engine) -> None:
    tick = datetime(2030, 1, 1, 12, 0)
    entry = CronTick("every-minute", tick, req(meta={"cron_name": "every-minute"}))
    first = await any_engine.insert_cron_jobs([entry, entry], now=T0)
    again = await any_engine.insert_cron_jobs([entry], now=T0)
    assert len(first) == 1 and again == []
    assert await any_engine.last_cron_ticks(["every-minute"]) == {"every-minute": tick.replace(tzinfo=UTC)}


async def test_queue_state_persists(any_engine: Engine) -> None:
    await any_engine.save_queue_state("app", "mail", paused=True)
    await any_engine.save_queue_state("app", "mail", limit=7)
    state = (await any_engine.load_queue_states("app"))["mail"]
    assert (state.paused, state.limit) == (True, 7)


@pytest.mark.parametrize("bad", [[{"not": "a request"}], ["x"]])
async def test_insert_refuses_non_requests(any_engine: Engine, bad: list[Any]) -> None:
    with pytest.raises(Exception) as exc:
        await any_engine.insert(bad)
    assert "JobRequest" in str(exc.value)
    assert await any_engine.list_jobs(JobFilter()) == []
