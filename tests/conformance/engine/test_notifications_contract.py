"""The notifications contract: listen/notify, and the notifications engine operations send themselves
(insert wake-ups after insert, retry, release, rescue, stage and cron; pkill on cancel; resign)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import datetime, timedelta
from typing import Any

import pytest

from conveyor import JobFilter, JobState
from conveyor.acks import Ack
from conveyor.engine.base import Engine
from conveyor.fleet import OWN_PRODUCER, CronTick, ProducerBeat
from tests.conformance.contract import T0, Heard, fetch, listening, put, req, settle, uid

CHANNELS = ["insert", "signal", "leader"]


@pytest.fixture
async def heard(any_engine: Engine) -> AsyncIterator[Heard]:
    async with listening(any_engine, CHANNELS) as heard:
        yield heard


async def test_a_listener_hears_connected_first(any_engine: Engine, heard: Heard) -> None:
    assert heard.items[0] == ("listener", {"event": "connected"})


@pytest.mark.parametrize(
    "payload",
    [
        {"action": "pause", "queue": "mail"},
        {"action": "scale", "queue": "mail", "limit": 5, "node": "n-1"},
        {"action": "pkill", "job_id": 123},
        {"text": 'é 中文 "quoted" \\ back', "nested": {"list": [1, None, True]}},
        {},
    ],
    ids=["pause", "scale", "pkill", "awkward", "empty"],
)
@pytest.mark.parametrize("channel", CHANNELS)
async def test_notify_reaches_listeners_of_that_channel(
    any_engine: Engine, heard: Heard, channel: str, payload: dict[str, Any]
) -> None:
    await any_engine.notify(channel, payload)
    await heard.wait_for(channel, payload)
    await settle(any_engine, heard)
    assert [name for name, said in heard.items if said == payload] == [channel]


async def test_a_listener_hears_only_its_channels(any_engine: Engine, heard: Heard) -> None:
    await any_engine.notify("gossip", {"action": "hello"})
    await settle(any_engine, heard)
    assert ("gossip", {"action": "hello"}) not in heard.items


async def test_every_listener_hears_and_a_stopped_one_no_more(any_engine: Engine, heard: Heard) -> None:
    other = Heard()
    listener = await any_engine.listen(["signal"], other)
    await other.wait_for("listener", {"event": "connected"})
    await any_engine.notify("signal", {"n": 1})
    await other.wait_for("signal", {"n": 1})
    await listener.stop()
    await any_engine.notify("signal", {"n": 2})
    await settle(any_engine, heard)
    assert ("signal", {"n": 2}) in heard.items and ("signal", {"n": 2}) not in other.items


async def test_notifications_arrive_in_the_order_sent(any_engine: Engine, heard: Heard) -> None:
    for n in range(20):
        await any_engine.notify("signal", {"n": n})
    await heard.wait_for("signal", {"n": 19})
    assert heard.on("signal") == [{"n": n} for n in range(20)]


async def forget(engine: Engine, heard: Heard) -> None:
    """Wait for what the setup said (its inserts wake queues too), then forget it."""
    await settle(engine, heard, marker=-1)
    heard.items.clear()


# -- insert wake-ups -----------------------------------------------------------------------------------
async def test_insert_notifies_each_queue_that_gained_available_jobs_once(
    any_engine: Engine, heard: Heard
) -> None:
    await any_engine.insert([req(queue="later", schedule_in=60)])
    await any_engine.insert([req(queue="a"), req(queue="b"), req(queue="a")])
    await settle(any_engine, heard)
    assert sorted(p["queue"] for p in heard.on("insert")) == ["a", "b"]


async def test_a_large_scheduled_batch_wakes_nobody(any_engine: Engine, heard: Heard) -> None:
    await any_engine.insert([req(queue="later", schedule_in=60) for _ in range(6_000)])
    await settle(any_engine, heard)
    assert heard.on("insert") == []


async def _retry(engine: Engine, heard: Heard) -> list[int]:
    await put(engine, JobState.DISCARDED, queue="q")
    await forget(engine, heard)
    return await engine.retry_jobs(JobFilter(), now=T0)


async def _release(engine: Engine, heard: Heard) -> list[int]:
    job_id = await put(engine, JobState.EXECUTING, queue="q")
    await forget(engine, heard)
    return await engine.release_jobs([(job_id, 1)])


async def _rescue(engine: Engine, heard: Heard) -> list[int]:
    await engine.record_producers("app", "n", [ProducerBeat(uid(1), "q", OWN_PRODUCER)], now=T0)
    await put(engine, JobState.EXECUTING, queue="q", producer=uid(1))
    await forget(engine, heard)
    return list(
        (await engine.rescue_jobs(timeout=15, backstop=3600, now=T0 + timedelta(minutes=1))).available
    )


async def _stage(engine: Engine, heard: Heard) -> list[int]:
    await put(engine, JobState.SCHEDULED, queue="q")
    return list((await engine.stage_jobs(10, now=T0 + timedelta(days=1))).values())


async def _cron(engine: Engine, heard: Heard) -> list[int]:
    return await engine.insert_cron_jobs([CronTick("e", datetime(2030, 1, 1), req(queue="q"))], now=T0)


WAKERS: dict[str, Callable[[Engine, Heard], Awaitable[list[int]]]] = {
    "retry": _retry,
    "release": _release,
    "rescue": _rescue,
    "stage": _stage,
    "cron": _cron,
}


@pytest.mark.parametrize("operation", sorted(WAKERS))
async def test_operations_that_make_jobs_available_wake_their_queue(
    any_engine: Engine, heard: Heard, operation: str
) -> None:
    assert await WAKERS[operation](any_engine, heard) != []
    await heard.wait_for("insert", {"queue": "q"})


async def _rescue_discarding(engine: Engine, heard: Heard) -> None:
    await engine.record_producers("app", "n", [ProducerBeat(uid(1), "q", OWN_PRODUCER)], now=T0)
    await put(engine, JobState.EXECUTING, queue="q", producer=uid(1), max_attempts=1)
    await forget(engine, heard)
    result = await engine.rescue_jobs(timeout=15, backstop=3600, now=T0 + timedelta(minutes=1))
    assert result.discarded != ()


async def _retry_nothing(engine: Engine, heard: Heard) -> None:
    await put(engine, JobState.EXECUTING, queue="q")
    await forget(engine, heard)
    assert await engine.retry_jobs(JobFilter(), now=T0) == []


async def _stage_nothing(engine: Engine, heard: Heard) -> None:
    await put(engine, JobState.SCHEDULED, queue="q")
    assert await engine.stage_jobs(10, now=T0) == {}


async def _cron_again(engine: Engine) -> None:
    tick = CronTick("e", datetime(2030, 1, 1), req(queue="q"))
    await engine.insert_cron_jobs([tick], now=T0)
    await engine.insert_cron_jobs([tick], now=T0)


async def _release_stale(engine: Engine, heard: Heard) -> None:
    job_id = await put(engine, JobState.EXECUTING, queue="q")
    await forget(engine, heard)
    assert await engine.release_jobs([(job_id, 2)]) == []


QUIET: dict[str, Callable[[Engine, Heard], Awaitable[None]]] = {
    "rescue-that-discards": _rescue_discarding,
    "retry-of-nothing": _retry_nothing,
    "stage-of-nothing": _stage_nothing,
    "release-of-a-stale-attempt": _release_stale,
}


@pytest.mark.parametrize("operation", sorted(QUIET))
async def test_operations_that_make_nothing_available_wake_nobody(
    any_engine: Engine, heard: Heard, operation: str
) -> None:
    await QUIET[operation](any_engine, heard)
    await settle(any_engine, heard)
    assert {"queue": "q"} not in heard.on("insert")


async def test_a_tick_handled_before_wakes_nobody_again(any_engine: Engine, heard: Heard) -> None:
    await _cron_again(any_engine)
    await settle(any_engine, heard)
    assert heard.on("insert") == [{"queue": "q"}]


async def test_staging_wakes_each_queue_once(any_engine: Engine, heard: Heard) -> None:
    await any_engine.insert([req(queue=q, schedule_in=10) for q in "aabbb"], now=T0)
    assert await any_engine.stage_jobs(10, now=T0 + timedelta(seconds=10)) == {"a": 2, "b": 3}
    await settle(any_engine, heard)
    assert sorted(p["queue"] for p in heard.on("insert")) == ["a", "b"]


# -- cancel and leadership -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "state", [JobState.EXECUTING, JobState.AVAILABLE, JobState.SCHEDULED, JobState.RETRYABLE]
)
async def test_cancel_sends_pkill_for_executing_jobs_only(
    any_engine: Engine, heard: Heard, state: JobState
) -> None:
    job_id = await put(any_engine, state)
    assert await any_engine.cancel_jobs(JobFilter(), now=T0) == [job_id]
    await settle(any_engine, heard)
    pkills = [p for p in heard.on("signal") if p.get("action") == "pkill"]
    assert pkills == ([{"action": "pkill", "job_id": job_id}] if state is JobState.EXECUTING else [])


async def test_cancel_sends_one_pkill_per_executing_job(any_engine: Engine, heard: Heard) -> None:
    ids = [await put(any_engine, JobState.EXECUTING, queue=q) for q in ("a", "b", "c")]
    await put(any_engine, JobState.AVAILABLE, queue="a")
    await any_engine.cancel_jobs(JobFilter(), now=T0)
    await settle(any_engine, heard)
    pkills = [p["job_id"] for p in heard.on("signal") if p.get("action") == "pkill"]
    assert sorted(pkills) == ids


async def test_resign_announces_itself_on_the_leader_channel(any_engine: Engine, heard: Heard) -> None:
    await any_engine.elect_leader("app", "a", 10, now=T0)
    assert not await any_engine.resign_leader("app", "b")
    assert await any_engine.resign_leader("app", "a")
    await heard.wait_for("leader", {"action": "resign", "node": "a", "name": "app"})
    await settle(any_engine, heard)
    assert heard.on("leader") == [{"action": "resign", "node": "a", "name": "app"}]


async def test_fetch_and_ack_send_nothing(any_engine: Engine, heard: Heard) -> None:
    (job_id,) = await any_engine.insert([req(queue="q")], now=T0)
    await heard.wait_for("insert", {"queue": "q"})
    await fetch(any_engine, "q")
    await any_engine.ack_jobs([Ack(job_id, 1, JobState.COMPLETED)], now=T0)
    await settle(any_engine, heard)
    assert heard.on("insert") == [{"queue": "q"}] and heard.on("leader") == []
