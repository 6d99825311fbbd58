"""Priority aging (issue 37, Oban Pro's DynamicPrioritizer): available jobs that have waited longer
than ``priority_aging_after`` gain a step of priority per pass of the leader, down to 0, in bounded
batches, oldest first; jobs not yet due, already at 0, or not waiting long enough are left alone.
On fake time, on every engine."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from conveyor import JobRequest, JobState
from conveyor._runtime.clock import FakeClock
from conveyor.errors import ValidationError
from tests.conformance.app.test_fake_time_contract import SLOW_NODE, AppFactory, advance, make

__all__ = ["make"]  # the fixture, shared with the fake-time contract


def waiting(priority: int, **options: Any) -> JobRequest:
    # Queue "held" is served by no node here: its jobs wait, as under a flood.
    return JobRequest("app.report", args={"p": priority}, queue="held", priority=priority, **options)


async def test_one_pass_bumps_old_waiting_jobs_one_step_oldest_first(make: AppFactory) -> None:
    clock = FakeClock()
    app = make(clock=clock)
    await app.install()
    t0 = clock.now()
    old9, old3, old0 = await app.enqueue_many([waiting(9), waiting(3), waiting(0)], now=t0)
    fresh = await app.enqueue(waiting(9), now=t0 + timedelta(seconds=50))
    later = await app.enqueue(waiting(9, scheduled_at=t0 + timedelta(hours=1)), now=t0)
    engine = await app.engine()
    at = t0 + timedelta(seconds=61)
    assert await engine.age_priorities(after=60, limit=1, now=at) == [old9]  # bounded, oldest first
    assert sorted(await engine.age_priorities(after=60, limit=100, now=at)) == [old9, old3]
    priorities = {i: (await app.get_job(i)).priority for i in (old9, old3, old0, fresh, later)}  # type: ignore[union-attr]
    # old9 got a step in each pass; old0 is at the top already; fresh has not waited 60 s; later is
    # scheduled, not waiting.
    assert priorities == {old9: 7, old3: 2, old0: 0, fresh: 9, later: 9}


@pytest.mark.parametrize(("after", "limit"), [(-1, 10), (float("nan"), 10), (60, 0), (60, True)])
async def test_bad_arguments_are_refused(make: AppFactory, after: float, limit: int) -> None:
    app = make()
    engine = await app.engine()
    with pytest.raises(ValidationError):
        await engine.age_priorities(after=after, limit=limit)


async def test_the_leader_ages_a_waiting_job_step_by_step_to_the_top(make: AppFactory) -> None:
    clock = FakeClock()
    aged: list[dict[str, Any]] = []
    app = make(clock=clock, priority_aging_after=300, priority_aging_interval=60, **SLOW_NODE)
    app.telemetry.attach(lambda _, data: aged.append(data), "priority.aged")
    await app.install()
    low = await app.enqueue(waiting(9))
    await app.start()
    await advance(clock, 240, step=30)
    assert (await app.get_job(low)).priority == 9  # type: ignore[union-attr]
    # After 300 s it gains a step per minute: 9 steps to the top, then no more. (Fake time moves on
    # in steps until it is there: under load a pass may land a step late, never early.)
    for _ in range(40):
        await advance(clock, 60, step=30)
        job = await app.get_job(low)
        assert job is not None and job.priority >= 0
        if job.priority == 0:
            break
    assert job.priority == 0 and job.state is JobState.AVAILABLE
    await advance(clock, 180, step=30)
    assert sum(event["count"] for event in aged) == 9 and all(event["job_ids"] == (low,) for event in aged)


async def test_aging_is_off_by_default(make: AppFactory) -> None:
    clock = FakeClock()
    app = make(clock=clock, **SLOW_NODE)
    await app.install()
    low = await app.enqueue(waiting(9))
    await app.start()
    await advance(clock, 3600, step=60)
    assert (await app.get_job(low)).priority == 9  # type: ignore[union-attr]


def test_settings_are_checked() -> None:
    from conveyor.settings import Settings

    for bad in ({"priority_aging_after": 0}, {"priority_aging_interval": -1}, {"priority_aging_limit": 0}):
        with pytest.raises(ValidationError, match=next(iter(bad))):
            Settings(**bad)
