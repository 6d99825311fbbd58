"""The ordered-locks contract: jobs sharing ``lock`` run one at a time across the fleet, in enqueue
order, without holding up the other jobs of their queue; ``queueing_lock`` lets one job per key wait.
"""

from __future__ import annotations

import asyncio
import random
from datetime import timedelta
from typing import Any

import pytest

from conveyor import Conveyor, JobFilter, JobRequest, JobState
from conveyor.acks import Ack
from conveyor.engine.base import Engine
from conveyor.errors import ValidationError
from tests.conformance import jobs
from tests.conformance.contract import T0, WORKER, fetch, job, uid
from tests.helpers import poll


def locked(key: str | None, n: int = 1, **options: Any) -> JobRequest:
    return JobRequest(WORKER, args={"n": n}, lock=key, **options)


async def finish(engine: Engine, *ids: int, state: JobState = JobState.COMPLETED) -> None:
    acks = [
        Ack(i, (await job(engine, i)).attempt, state, schedule_in=60 if state is JobState.RETRYABLE else None)
        for i in ids
    ]
    assert sorted(await engine.ack_jobs(acks, now=T0)) == sorted(ids)


async def test_jobs_with_one_lock_run_one_at_a_time_in_order(any_engine: Engine) -> None:
    a, b, c = await any_engine.insert([locked("k", 1), locked("k", 2), locked("k", 3)], now=T0)
    assert await fetch(any_engine, demand=10) == [a]
    assert await fetch(any_engine, demand=10) == []  # a runs: b and c wait
    await finish(any_engine, a)
    assert await fetch(any_engine, demand=10) == [b]
    await finish(any_engine, b, state=JobState.DISCARDED)
    assert await fetch(any_engine, demand=10) == [c]
    stored = await job(any_engine, c)
    assert stored.meta == {"lock_key": "k"}


async def test_a_lock_never_holds_up_other_jobs(any_engine: Engine) -> None:
    ids = await any_engine.insert(
        [locked("k", 1), locked("k", 2), locked(None, 3), locked("other", 4), locked("k", 5, queue="q2")],
        now=T0,
    )
    assert await fetch(any_engine, demand=10) == [ids[0], ids[2], ids[3]]
    assert await fetch(any_engine, "q2", demand=10) == []  # same key, other queue: the lock is global


async def test_an_earlier_job_keeps_its_turn_through_retries_and_schedules(any_engine: Engine) -> None:
    later_at = T0 + timedelta(hours=1)
    first, second = await any_engine.insert([locked("k", 1), locked("k", 2)], now=T0)
    assert await fetch(any_engine) == [first]
    await finish(any_engine, first, state=JobState.RETRYABLE)  # waits to be retried: still first
    assert await fetch(any_engine) == []
    (scheduled,) = await any_engine.insert([locked("s", 1, scheduled_at=later_at)], now=T0)
    (after,) = await any_engine.insert([locked("s", 2)], now=T0)
    assert await fetch(any_engine) == []  # "s" waits for the job enqueued before it
    assert await any_engine.cancel_jobs(JobFilter(ids=(scheduled,)), now=T0) == [scheduled]
    assert await fetch(any_engine) == [after]  # final jobs never hold a lock
    assert second not in await fetch(any_engine)


async def test_a_retried_earlier_job_waits_for_the_running_one(any_engine: Engine) -> None:
    first, second = await any_engine.insert([locked("k", 1), locked("k", 2)], now=T0)
    assert await fetch(any_engine) == [first]
    await finish(any_engine, first, state=JobState.DISCARDED)
    assert await fetch(any_engine) == [second]
    assert await any_engine.retry_jobs(JobFilter(ids=(first,)), now=T0) == [first]
    assert await fetch(any_engine) == []  # second runs: first (earlier) waits for it
    await finish(any_engine, second)
    assert await fetch(any_engine) == [first]


async def test_a_job_committed_before_the_claim_keeps_its_turn_by_id(
    any_engine: Engine, caller_conn: Any
) -> None:
    """Order is id order among the jobs committed when a job of the key is claimed: a job enqueued
    first in a transaction that commits later still goes first if it commits before that claim. (On
    SQLite the caller's open transaction holds the one write lock, so the second insert waits for
    its commit and gets the higher id anyway.)"""
    (first,) = await any_engine.insert([locked("k", 1)], conn=caller_conn, now=T0)
    second_insert = asyncio.create_task(any_engine.insert([locked("k", 2)], now=T0))
    await asyncio.wait([second_insert], timeout=0.2)
    await caller_conn.commit()
    (second,) = await second_insert
    assert first < second
    assert await fetch(any_engine) == [first]
    assert await fetch(any_engine) == []
    await finish(any_engine, first)
    assert await fetch(any_engine) == [second]


async def test_a_job_committed_after_a_later_job_started_runs_after_it(
    engine_name: str, any_engine: Engine, caller_conn: Any
) -> None:
    """A job whose transaction commits after a job of its key enqueued later (a higher id) was
    claimed runs after that job: nothing can wait for an insert nobody can see yet. Ordered locks
    follow id order among committed jobs, which is commit order where transactions overlap."""
    if engine_name == "sqlite":
        pytest.skip("SQLite has one writer: an insert waits for the open transaction, ids follow commits")
    (first,) = await any_engine.insert([locked("k", 1)], conn=caller_conn, now=T0)
    (second,) = await any_engine.insert([locked("k", 2)], now=T0)
    assert first < second
    assert await fetch(any_engine) == [second]  # the only job of the key anyone can see
    await caller_conn.commit()
    assert await fetch(any_engine) == []  # the running job holds the key, lower id or not
    await finish(any_engine, second)
    assert await fetch(any_engine) == [first]


async def test_engines_claiming_at_once_never_overlap_a_lock(fleet_engines: list[Engine]) -> None:
    """Six producers on three engines claim and finish at random: per key, at most one job executes
    at any moment, and the keys' jobs start in id order."""
    keys = ["a", "b", "c", "d", "e"]
    ids = await fleet_engines[0].insert([locked(keys[n % 5], n) for n in range(100)], now=T0)
    key_of = {job_id: keys[n % 5] for n, job_id in enumerate(ids)}
    running: dict[str, int] = {}
    started: dict[str, list[int]] = {key: [] for key in keys}
    done: list[int] = []
    rng = random.Random(11)

    async def producer(engine: Engine, n: int) -> None:
        idle = 0
        while idle < 30 and len(done) < len(ids):
            claimed = await engine.fetch_jobs(
                "default", rng.randint(1, 3), node=f"n{n}", producer=uid(n), now=T0
            )
            for found in claimed:
                key = key_of[found.id]
                assert key not in running, f"{key}: {found.id} claimed while {running.get(key)} runs"
                running[key] = found.id
                started[key].append(found.id)
            idle = 0 if claimed else idle + 1
            await asyncio.sleep(rng.random() / 200)
            for found in claimed:
                del running[key_of[found.id]]  # given up before the ack commits: never a false alarm
            if claimed:
                await engine.ack_jobs([Ack(j.id, 1, JobState.COMPLETED) for j in claimed], now=T0)
                done.extend(j.id for j in claimed)

    await asyncio.gather(*(producer(e, n) for n, e in enumerate(fleet_engines * 2, start=1)))
    assert sorted(done) == ids
    for key in keys:
        assert started[key] == sorted(started[key])  # in enqueue order


async def test_nodes_run_each_lock_in_order_without_overlap(fleet_engines: list[Engine]) -> None:
    """Three nodes, 200 jobs on 5 keys: per key the runs never overlap and follow enqueue order."""
    jobs.LOCK_LOG.clear()
    apps = [
        Conveyor(engine=engine, queues={"locked": 10}, poll_interval=0.05, leadership=False, node=f"n{i}")
        for i, engine in enumerate(fleet_engines)
    ]
    for app in apps:
        await app.start()
    try:
        keys = [f"key-{k}" for k in range(5)]
        requests = [
            jobs.locked_step.new(key=keys[n % 5], pause=0.002).with_options(lock=keys[n % 5])
            for n in range(200)
        ]
        ids = await apps[0].enqueue_many(requests)

        async def states_now() -> list[JobState]:
            return [j.state for j in await apps[0].list_jobs(JobFilter(ids=tuple(ids), limit=200))]

        await poll(
            states_now,
            lambda found: all(s is JobState.COMPLETED for s in found),
            timeout=60,
            what="every job to complete",
            every=0.1,
        )
    finally:
        for app in apps:
            await app.stop(grace=1)
    for key in keys:
        events = [(job_id, what) for k, job_id, what in jobs.LOCK_LOG if k == key]
        assert len(events) == 80
        for index in range(0, 80, 2):  # start, end, start, end ...: never two at once
            assert events[index][1] == "start" and events[index + 1] == (events[index][0], "end")
        order = [job_id for job_id, what in events if what == "start"]
        assert order == sorted(order)


# -- queueing locks ------------------------------------------------------------------------------------
async def test_one_job_per_queueing_lock_waits(any_engine: Engine) -> None:
    def waiting(n: int) -> JobRequest:
        return JobRequest(WORKER, args={"n": n}, queueing_lock="report")

    (first,) = await any_engine.insert([waiting(1)], now=T0)
    (second,) = await any_engine.insert([waiting(2)], now=T0)
    assert second == first and second.conflict  # type: ignore[attr-defined]
    assert await fetch(any_engine) == [first]  # it runs: the lock is free for the next one
    (third,) = await any_engine.insert([waiting(3)], now=T0)
    assert third != first and not getattr(third, "conflict", False)
    assert "uniq_key" not in (await job(any_engine, first)).meta  # released when it was claimed
    # The running one goes back to waiting (its node died) while the next one waits: no conflict.
    rescued = await any_engine.rescue_jobs(timeout=1, backstop=1, now=T0 + timedelta(hours=1))
    assert first in rescued.available
    assert {j.id for j in await any_engine.list_jobs(JobFilter(states=(JobState.AVAILABLE,)))} == {
        first,
        third,
    }


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"lock": ""}, "lock"),
        ({"lock": 7}, "lock"),
        ({"lock": "x" * 256}, "lock"),
        ({"queueing_lock": "a\x00b"}, "queueing_lock"),
        ({"queueing_lock": "q", "unique": True}, "queueing_lock"),
        ({"meta": {"lock_key": "k"}}, r"meta\['lock_key'\]"),
    ],
)
def test_bad_lock_options_are_refused(options: dict[str, Any], named: str) -> None:
    with pytest.raises(ValidationError, match=rf"invalid {named}="):
        JobRequest(WORKER, **options)
