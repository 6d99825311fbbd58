"""Cluster behaviour on fake time, on every engine: a node whose clock is a ``FakeClock`` sees
minutes pass in milliseconds, and the database is told the same time (engine calls get ``now``)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from conveyor import Conveyor, JobFilter, JobState
from conveyor._runtime.clock import FakeClock
from conveyor._runtime.service import Service
from conveyor.fleet import OWN_PRODUCER, ProducerBeat
from conveyor.limits import GlobalLimit
from tests.conformance import hardening_jobs as hj
from tests.conformance import relay_jobs
from tests.conformance.conftest import MADE_APPS
from tests.helpers import advance_nodes, nodes_asleep, poll

AppFactory = Callable[..., Conveyor]


@pytest.fixture
def make(make_app: Callable[..., Conveyor]) -> Callable[..., Conveyor]:
    return make_app


async def advance(clock: FakeClock, seconds: float, step: float = 0.5) -> None:
    """Move fake time in steps; after each, the nodes on ``clock`` (the apps ``make_app`` made with
    it, in whichever module) have done what came due, their database calls and acks included, before
    time moves on (``nodes_asleep``)."""
    apps = [app for app in MADE_APPS if app.clock is clock]
    assert apps, "advance() waits for the nodes on its clock: make their apps with the make_app fixture"
    await advance_nodes(clock, seconds, apps, step)


async def settle(app: Conveyor, job_id: int, state: JobState, timeout: float = 10) -> Any:
    """The job once it is in ``state`` (real time passes here, fake time stands still)."""
    return await poll(
        lambda: app.get_job(job_id),
        lambda job: job is not None and job.state is state,
        timeout=timeout,
        what=f"job {job_id} to be {state.value}",
    )


NODE = {"queues": {"default": 5}, "poll_interval": 1.0, "stage_interval": 1.0}
#: For minutes and hours of fake time: a node that polls and stages every 30 s, so a step of fake
#: time fires a few timers, not dozens (each firing is a real database call), and what a test waits
#: for is the work it is about. Notifications still wake its producers at once.
QUIET_NODE = {**NODE, "poll_interval": 30.0, "stage_interval": 30.0}
#: ... and beats and rescues seldom too, where neither is what the test is about.
SLOW_NODE = {**QUIET_NODE, "heartbeat_interval": 10.0, "rescue_interval": 30.0}


async def test_a_dead_producers_job_is_rescued_and_a_live_long_job_is_not(make: AppFactory) -> None:
    clock = FakeClock()
    app = make(clock=clock, **NODE)
    await app.install()
    engine = await app.engine()
    dead = str(uuid.uuid4())
    await engine.record_producers(
        "conveyor", "gone", [ProducerBeat(dead, "default", OWN_PRODUCER)], now=clock.now()
    )
    (orphan,) = await engine.insert([hj.quick.new(n=7)], now=clock.now())
    await engine.fetch_jobs("default", 1, node="gone", producer=dead, now=clock.now())
    await app.start()
    key = uuid.uuid4().hex
    long_job = await app.enqueue(hj.waits_for_release.new(key=key))
    await settle(app, long_job, JobState.EXECUTING)
    await advance(clock, 10)  # the dead producer is not stale yet (timeout 15 s)
    assert (await app.get_job(orphan)).state is JobState.EXECUTING  # type: ignore[union-attr]
    await advance(clock, 120)  # two minutes: rescued and run here; the live long job untouched
    rescued = await settle(app, orphan, JobState.COMPLETED)
    assert rescued.meta["rescued"] == 1
    running = await app.get_job(long_job)
    assert running is not None and running.state is JobState.EXECUTING and "rescued" not in running.meta
    hj.RELEASE[key].set()
    done = await settle(app, long_job, JobState.COMPLETED)
    assert done.attempt == 1


async def test_a_live_nodes_long_job_is_never_rescued_by_the_leader(make: AppFactory) -> None:
    """Ten minutes of a job on a worker node, producer_timeout 15 s, the leader checking every 5 s."""
    clock = FakeClock()
    worker = make(clock=clock, node="worker", leadership=False, **QUIET_NODE)
    await worker.install()
    await worker.start()
    leader = make(clock=clock, node="leader", **{**QUIET_NODE, "queues": {"other": 1}})
    await leader.start()
    assert leader.node is not None and leader.node.leadership.is_leader
    key = uuid.uuid4().hex
    job_id = await leader.enqueue(hj.waits_for_release.new(key=key))
    await settle(leader, job_id, JobState.EXECUTING)
    await advance(clock, 600, step=2)
    running = await leader.get_job(job_id)
    assert running is not None and running.state is JobState.EXECUTING and "rescued" not in running.meta
    hj.RELEASE[key].set()
    done = await settle(leader, job_id, JobState.COMPLETED)
    assert done.attempt == 1 and done.attempted_by[0] == "worker"


async def test_a_silent_leader_is_replaced_within_one_ttl(make: AppFactory) -> None:
    clock = FakeClock()
    first = make(clock=clock, node="first", **NODE)
    await first.install()
    await first.start()
    second = make(clock=clock, node="second", **NODE)
    await second.start()
    assert first.node is not None and second.node is not None
    assert first.node.leadership.is_leader and not second.node.leadership.is_leader
    await Service.stop(first.node.leadership)  # its loop ends without resigning: as if it froze
    await advance(clock, 25)  # less than the 30 s lease
    assert not second.node.leadership.is_leader
    await advance(clock, 10)
    assert second.node.leadership.is_leader


async def kill(app: Conveyor) -> None:
    """As if the node's process were killed: every loop ends where it is, nothing is cleaned up,
    its running jobs end without an ack (their rows stay executing, its lease and rows stay)."""
    node = app.node
    assert node is not None
    services: list[Service] = [node.heartbeat, node.leadership, *node.duties, node.stager, node.poller]
    for service in [*services, *node.producers.values()]:
        await Service.stop(service)
    for producer in node.producers.values():
        for running in producer.running.values():
            running.task.cancel()


async def test_a_killed_leaders_jobs_run_on_a_follower_well_before_its_lease_ends(make: AppFactory) -> None:
    """Default timings: the lease lasts 30 s, producer_timeout is 15 s, rescue looks every 5 s. The
    follower takes the lease once the leader's heartbeats are 15 s old and rescues at once: the job
    runs again within producer_timeout + rescue_interval + 2 s of the kill (22 s), not after 27 s."""
    clock = FakeClock()
    first = make(clock=clock, node="first", **NODE)
    await first.install()
    await first.start()
    key = uuid.uuid4().hex
    job_id = await first.enqueue(hj.waits_for_release.new(key=key))
    running = await settle(first, job_id, JobState.EXECUTING)
    assert running.attempted_by[0] == "first"
    second = make(clock=clock, node="second", **NODE)
    await second.start()
    assert first.node is not None and first.node.leadership.is_leader
    await advance(clock, 20)  # the follower's contact with the database outlasts producer_timeout
    await kill(first)
    hj.RELEASE[key].set()  # the next run ends at once
    killed = clock.monotonic()
    while (await second.get_job(job_id)).state is not JobState.COMPLETED:  # type: ignore[union-attr]
        assert clock.monotonic() - killed < 15 + 5 + 2, await second.get_job(job_id)
        await advance(clock, 0.5)
    took = clock.monotonic() - killed
    assert second.node is not None and second.node.leadership.is_leader
    done = await second.get_job(job_id)
    assert done is not None and done.attempted_by[0] == "second" and done.meta["rescued"] == 1
    assert took < 27, took  # the lease alone would have held the leader's duties until then


async def test_cron_inserts_one_job_per_minute(make: AppFactory) -> None:
    start = datetime.now(UTC).replace(second=30, microsecond=0) + timedelta(minutes=5)
    clock = FakeClock(start)
    app = make(clock=clock, crontab=[("* * * * *", hj.quick, {"n": 1})], **NODE)
    await app.install()
    await app.start()
    quick = JobFilter(workers=("tests.conformance.hardening_jobs.quick",))
    await advance(clock, 3 * 60, step=5)
    # The minute the node started in, then each of the next three minutes: once each.
    inserted = await poll(lambda: app.list_jobs(quick), lambda found: len(found) >= 4, what="four cron jobs")
    assert len(inserted) == 4
    # Up to hh:mm:55 of the same minute: nothing more (after each step the node has done all that
    # came due, and time stands still until the next).
    await advance(clock, 25, step=5)
    assert len(await app.list_jobs(quick)) == 4


async def test_old_finished_jobs_are_pruned_by_age(make: AppFactory) -> None:
    clock = FakeClock()
    app = make(clock=clock, prune_max_age=3600, prune_interval=30, **SLOW_NODE)
    await app.install()
    await app.start()
    done = await app.enqueue(hj.quick.new(n=1))
    await settle(app, done, JobState.COMPLETED)
    await advance(clock, 1800, step=30)
    assert await app.get_job(done) is not None  # half an hour old: kept
    await advance(clock, 1900, step=30)
    assert await app.get_job(done) is None  # over an hour old: pruned


async def test_the_leader_prunes_by_the_rules_and_reports_each_state(make: AppFactory) -> None:
    """Cancelled jobs kept two hours by a rule, the rest one hour by default; each prune round
    reports its count by state."""
    clock = FakeClock()
    rules = [{"states": ["cancelled"], "max_age": "2h"}]
    app = make(clock=clock, prune_max_age=3600, prune_rules=rules, prune_interval=30, **SLOW_NODE)
    pruned: list[dict[str, Any]] = []
    app.telemetry.attach(lambda _, data: pruned.append(data), "pruner.pruned")
    await app.install()
    await app.start()
    done = await app.enqueue(hj.quick.new(n=1))
    await settle(app, done, JobState.COMPLETED)
    held = await app.enqueue(hj.quick.new(n=2).with_options(queue="held"))
    engine = await app.engine()
    assert await engine.cancel_jobs(JobFilter(ids=(held,)), now=clock.now()) == [held]
    await advance(clock, 5400, step=30)
    assert await app.get_job(done) is None  # 1.5 hours: past the default
    assert await app.get_job(held) is not None  # the rule keeps it two hours
    await advance(clock, 2000, step=30)
    assert await app.get_job(held) is None
    assert pruned == [
        {"count": 1, "completed": 1, "cancelled": 0, "discarded": 0},
        {"count": 1, "completed": 0, "cancelled": 1, "discarded": 0},
    ]


async def test_job_timeouts_run_on_the_nodes_clock(make: AppFactory) -> None:
    clock = FakeClock()
    app = make(clock=clock, **NODE)
    await app.install()
    await app.start()
    ids = await app.enqueue_many(
        [
            hj.outlives_its_timeout.new(),
            hj.thread_outlives_its_timeout.new(),
            hj.process_outlives_its_timeout.new(),
        ]
    )
    for job_id in ids:
        await settle(app, job_id, JobState.EXECUTING)
    await advance(clock, 20)
    for job_id in ids:  # 20 s of fake time: within the timeout
        assert (await app.get_job(job_id)).state is JobState.EXECUTING  # type: ignore[union-attr]
    await advance(clock, 15)
    for job_id in ids:
        job = await settle(app, job_id, JobState.DISCARDED)
        assert "JobTimeout: job exceeded its timeout of 30s" in job.errors[-1]["error"]


async def test_a_signal_wait_runs_out_on_the_nodes_clock(make: AppFactory) -> None:
    """``wait_for_signal(timeout)`` lets go of the slot until the node's clock passes the deadline,
    which it reads on the same clock: the job gives up after ten fake minutes, no real ones."""
    start = datetime(2030, 1, 1, tzinfo=UTC)
    clock = FakeClock(start)
    app = make(clock=clock, **NODE)
    await app.install()
    await app.start()
    job_id = await app.enqueue(relay_jobs.awaits_briefly.new(seconds=600))
    waiting = await settle(app, job_id, JobState.SCHEDULED)
    assert waiting.meta["awaiting_signal"]["until"] == (start + timedelta(seconds=600)).isoformat()
    assert waiting.scheduled_at == start + timedelta(seconds=600)
    await advance(clock, 590, step=10)
    assert (await app.get_job(job_id)).state is JobState.SCHEDULED  # type: ignore[union-attr]
    await advance(clock, 20, step=10)
    done = await settle(app, job_id, JobState.COMPLETED)
    assert done.result == "gave up" and done.attempt == 1


async def test_fake_timers_fire_in_order_each_at_its_own_time() -> None:
    clock = FakeClock(datetime(2030, 1, 1, tzinfo=UTC))
    fired: list[tuple[str, float]] = []
    clock.call_later(5, lambda: fired.append(("five", clock.monotonic())))
    clock.call_later(1, lambda: fired.append(("one", clock.monotonic())))
    cancelled = clock.call_later(2, lambda: fired.append(("never", clock.monotonic())))
    cancelled.cancel()
    sleeper = asyncio.create_task(clock.sleep(3))
    await asyncio.sleep(0)
    await clock.advance(4)
    assert fired == [("one", 1.0)] and sleeper.done()
    await clock.advance(10)
    assert fired == [("one", 1.0), ("five", 5.0)]
    assert clock.now() == datetime(2030, 1, 1, 0, 0, 14, tzinfo=UTC) and clock.database_now() == clock.now()


async def until(what: str, check: Callable[[], bool], timeout: float = 5) -> None:
    """Wait (real time; fake time stands still) until ``check()`` holds."""
    await poll(check, timeout=timeout, what=what, every=0.01)


async def test_a_persisted_queue_state_reaches_a_node_that_missed_its_signal(make: AppFactory) -> None:
    """A pause or limit kept in the database reaches a running node within one poll even when no
    signal does (sent while its listener reconnected, or never sent): the node reads the persisted
    states with its poll, applies what changed since it last looked, and looks again at once when its
    listener reconnects. A change made without ``persist`` stays until the persisted value changes."""
    clock = FakeClock()
    queues = {"capped": {"limit": 6, "global_limit": 6}}
    app = make(clock=clock, queues=queues, poll_interval=1.0, stage_interval=1.0, leadership=False)
    await app.install()
    await app.start()
    engine = await app.engine()
    assert app.node is not None
    producer = app.node.producers["capped"]
    await nodes_asleep(app)  # the first poll is over

    # Written to the table only: no node hears of it.
    await engine.save_queue_state("conveyor", "capped", limit=2, limits={"global_limit": 2})
    await nodes_asleep(app)  # fake time stands still: no poll comes until it moves
    assert producer.limit == 6  # not before the next poll
    await advance(clock, 1.0)
    await until("the persisted limits applied", lambda: producer.limit == 2)
    assert producer.limits.global_limit == GlobalLimit(2)

    await engine.save_queue_state("conveyor", "capped", paused=True)
    await advance(clock, 1.0)
    await until("the persisted pause applied", lambda: producer.paused)

    # A change without persist lasts: the persisted values it differs from did not change.
    await app.resume_queue("capped")
    await app.scale_queue("capped", 5)
    await advance(clock, 3.0)
    assert producer.limit == 5 and not producer.paused

    # The listener reconnecting makes the node look at once, fake time standing still.
    await engine.save_queue_state("conveyor", "capped", limit=3, limits={"global_limit": None})
    app.node._on_notification("listener", {"event": "connected"})
    await until("the persisted state read on reconnect", lambda: producer.limit == 3)
    assert producer.limits.global_limit is None
