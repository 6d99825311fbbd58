"""The fetch-limits contract: caps that ``fetch_jobs`` applies across the fleet (``FetchLimits``).

A global limit counts the queue's executing jobs on every node, so it holds however many engines
claim at once; the tests run several engines on one database, as several nodes would."""

from __future__ import annotations

import asyncio
import random
from datetime import timedelta

import pytest

from conveyor import Conveyor, JobFilter, JobState, QueueSettings
from conveyor.acks import Ack
from conveyor.engine.base import Engine
from conveyor.errors import ValidationError
from conveyor.limits import FetchLimits
from conveyor.queue_settings import parse_queues
from tests.conformance import jobs
from tests.conformance.contract import T0, fetch, put, req, uid

CAP = FetchLimits(global_limit=3)


async def claim(
    engine: Engine, demand: int, limits: FetchLimits | None, queue: str = "default", n: int = 1
) -> list[int]:
    jobs = await engine.fetch_jobs(queue, demand, node=f"node-{n}", producer=uid(n), now=T0, limits=limits)
    return [j.id for j in jobs]


async def test_a_global_limit_counts_executing_jobs_of_every_producer(any_engine: Engine) -> None:
    ids = await any_engine.insert([req() for _ in range(10)], now=T0)
    assert await claim(any_engine, 2, None, n=1) == ids[:2]  # another node, uncapped
    assert await claim(any_engine, 5, CAP, n=2) == ids[2:3]  # 3 - 2 running: one more
    assert await claim(any_engine, 5, CAP, n=3) == []  # full
    await any_engine.ack_jobs([Ack(ids[0], 1, JobState.COMPLETED)], now=T0)
    assert await claim(any_engine, 5, CAP, n=3) == ids[3:4]  # one slot freed


async def test_a_global_limit_never_raises_the_demand(any_engine: Engine) -> None:
    ids = await any_engine.insert([req() for _ in range(10)], now=T0)
    assert await claim(any_engine, 2, FetchLimits(global_limit=100)) == ids[:2]
    assert await claim(any_engine, 0, CAP) == []


async def test_a_global_limit_counts_only_its_queue_and_only_executing(any_engine: Engine) -> None:
    await put(any_engine, JobState.EXECUTING, queue="other")
    await put(any_engine, JobState.EXECUTING, queue="other")
    for state in (JobState.COMPLETED, JobState.RETRYABLE, JobState.CANCELLED, JobState.DISCARDED):
        await put(any_engine, state)
    ids = await any_engine.insert([req() for _ in range(5)], now=T0)
    assert await claim(any_engine, 5, CAP) == ids[:3]


async def test_jobs_of_a_dead_node_count_until_rescued(any_engine: Engine) -> None:
    ids = await any_engine.insert([req() for _ in range(6)], now=T0)
    assert await claim(any_engine, 3, CAP, n=1) == ids[:3]  # node 1 then dies, leaving no producer row
    assert await claim(any_engine, 3, CAP, n=2) == []
    rescued = await any_engine.rescue_jobs(timeout=15, backstop=60, now=T0 + timedelta(hours=2))
    assert sorted(rescued.available) == ids[:3]
    assert len(await claim(any_engine, 3, CAP, n=2)) == 3


async def test_no_limits_and_empty_limits_are_the_plain_fetch(any_engine: Engine) -> None:
    ids = await any_engine.insert([req() for _ in range(6)], now=T0)
    assert await claim(any_engine, 2, None) == ids[:2]
    assert await claim(any_engine, 2, FetchLimits()) == ids[2:4]
    assert await fetch(any_engine, demand=5) == ids[4:]


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "3"])
def test_a_global_limit_must_be_a_positive_integer(bad: object) -> None:
    with pytest.raises(ValidationError, match="global_limit"):
        FetchLimits(global_limit=bad)  # type: ignore[arg-type]


async def test_concurrent_nodes_never_run_more_than_the_global_limit(fleet_engines: list[Engine]) -> None:
    """Three engines (nodes), two producers each, claim and ack at random for a while: at no moment
    does the database hold more than the cap executing, and every job is run exactly once."""
    first = fleet_engines[0]
    ids = await first.insert([req() for _ in range(120)], now=T0)
    cap = FetchLimits(global_limit=4)
    done: list[int] = []
    peak = 0
    rng = random.Random(7)

    async def producer(engine: Engine, n: int) -> None:
        nonlocal peak
        idle_rounds = 0
        while idle_rounds < 20:
            claimed = await claim(engine, rng.randint(1, 4), cap, n=n)
            executing = await engine.list_jobs(JobFilter(states=(JobState.EXECUTING,), limit=1000))
            peak = max(peak, len(executing))
            assert len(executing) <= 4, [j.id for j in executing]
            idle_rounds = 0 if claimed else idle_rounds + 1
            await asyncio.sleep(rng.random() / 500)
            if claimed:
                await engine.ack_jobs([Ack(i, 1, JobState.COMPLETED) for i in claimed], now=T0)
                done.extend(claimed)
            await asyncio.sleep(0)

    await asyncio.gather(*(producer(e, n) for n, e in enumerate(fleet_engines * 2, start=1)))
    assert sorted(done) == ids  # each job claimed once, none lost
    assert peak == 4  # the cap was reached, so it was the cap that held


async def test_nodes_with_a_global_limit_share_it(fleet_engines: list[Engine]) -> None:
    """Three nodes, each allowed 5 at once, together never run more than the queue's global 2."""
    jobs.PROBE.update(now=0, peak=0)
    queues = {"capped": {"limit": 5, "global_limit": 2}}
    apps = [
        Conveyor(engine=engine, queues=queues, poll_interval=0.05, leadership=False, node=f"n{i}")
        for i, engine in enumerate(fleet_engines)
    ]
    for app in apps:
        await app.start()
    try:
        ids = await apps[0].enqueue_many([jobs.probe.new(pause=0.05) for _ in range(12)])
        deadline = asyncio.get_running_loop().time() + 20
        while asyncio.get_running_loop().time() < deadline:
            found = await apps[0].list_jobs(JobFilter(ids=tuple(ids)))
            if all(j.state is JobState.COMPLETED for j in found):
                break
            await asyncio.sleep(0.05)
        found = await apps[0].list_jobs(JobFilter(ids=tuple(ids)))
        assert all(j.state is JobState.COMPLETED for j in found)
        assert jobs.PROBE["peak"] == 2
        assert len({j.attempted_by[0] for j in found}) >= 2  # the slots were shared, not hoarded
    finally:
        for app in apps:
            await app.stop(grace=1)


def test_queue_settings_take_and_check_a_global_limit() -> None:
    (queue,) = parse_queues({"mail": {"limit": 10, "global_limit": 4}})
    assert queue == QueueSettings("mail", 10, global_limit=4)
    with pytest.raises(ValidationError, match=r"queues\.mail\.global_limit=0"):
        parse_queues({"mail": {"limit": 10, "global_limit": 0}})
