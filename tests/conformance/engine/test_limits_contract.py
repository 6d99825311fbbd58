"""The fetch-limits contract: caps that ``fetch_jobs`` applies across the fleet (``FetchLimits``).

A global limit counts the queue's executing jobs on every node, so it holds however many engines
claim at once; the tests run several engines on one database, as several nodes would."""

from __future__ import annotations

import asyncio
import random
from datetime import timedelta
from typing import Any

import pytest
from click.testing import CliRunner

from conveyor import Conveyor, Job, JobFilter, JobState, QueueSettings
from conveyor.acks import Ack
from conveyor.cli import main as cli
from conveyor.engine.base import Engine
from conveyor.errors import ValidationError
from conveyor.fleet import OWN_PRODUCER, ProducerBeat
from conveyor.limits import FetchLimits, GlobalLimit, Partition, RateLimit
from conveyor.queue_settings import fetch_limits, parse_queues
from tests.conformance import jobs
from tests.conformance.conftest import ADDRESSES
from tests.conformance.contract import T0, claim_and_ack_at_random, fetch, put, req, uid
from tests.helpers import poll

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


@pytest.mark.parametrize(
    ("silent", "freed"), [(14.999999, False), (15, False), (15.000001, True)], ids=["fresh", "at", "dead"]
)
async def test_jobs_of_a_silent_producer_free_their_global_slots_after_dead_after(
    any_engine: Engine, silent: float, freed: bool
) -> None:
    """A node killed while its jobs run: once its heartbeat is ``dead_after`` old, its executing
    jobs no longer hold the queue's global slots, before any leader rescues them."""
    ids = await any_engine.insert([req() for _ in range(6)], now=T0)
    await any_engine.record_producers(
        "conveyor", "node-1", [ProducerBeat(uid(1), "default", OWN_PRODUCER)], now=T0
    )
    assert await claim(any_engine, 3, CAP, n=1) == ids[:3]
    now = T0 + timedelta(seconds=silent)
    took = await any_engine.fetch_jobs(
        "default", 3, node="node-2", producer=uid(2), now=now, limits=CAP, dead_after=15
    )
    assert [j.id for j in took] == (ids[3:6] if freed else [])
    # Without dead_after every executing job counts, whatever its producer's age.
    later = T0 + timedelta(hours=1)
    assert await any_engine.fetch_jobs("default", 3, node="n", producer=uid(3), now=later, limits=CAP) == []


async def test_dead_after_spares_the_fetching_producer_and_other_runtimes_rows(any_engine: Engine) -> None:
    """Only Conveyor's rows go by ``dead_after``, and never the fetching producer's own (it runs
    its jobs, whatever its row says: its loop may have been too busy to beat)."""
    ids = await any_engine.insert([req() for _ in range(6)], now=T0)
    beats = [ProducerBeat(uid(1), "default", OWN_PRODUCER)]
    await any_engine.record_producers("conveyor", "node-1", beats, now=T0)
    await any_engine.record_producers(
        "Oban", "py-1", [ProducerBeat(uid(4), "default", {"local_limit": 5})], now=T0
    )
    assert await claim(any_engine, 2, CAP, n=1) == ids[:2]
    assert await claim(any_engine, 1, CAP, n=4) == ids[2:3]
    later = T0 + timedelta(seconds=60)
    own = await any_engine.fetch_jobs(
        "default", 3, node="node-1", producer=uid(1), now=later, limits=CAP, dead_after=15
    )
    assert own == []  # its own two count, and so does oban-py's one
    other = await any_engine.fetch_jobs(
        "default", 3, node="n", producer=uid(2), now=later, limits=CAP, dead_after=15
    )
    assert [j.id for j in other] == ids[3:5]  # node-1's two slots are free; oban-py's job holds one


async def test_dead_after_frees_partitioned_slots_too(any_engine: Engine) -> None:
    by_worker = FetchLimits(global_limit=GlobalLimit(2, Partition(worker=True)))
    ids = await any_engine.insert([req() for _ in range(4)], now=T0)
    await any_engine.record_producers(
        "conveyor", "node-1", [ProducerBeat(uid(1), "default", OWN_PRODUCER)], now=T0
    )
    assert await claim(any_engine, 2, by_worker, n=1) == ids[:2]
    later = T0 + timedelta(seconds=60)
    kept = await any_engine.fetch_jobs("default", 2, node="n", producer=uid(2), now=later, limits=by_worker)
    assert kept == []
    freed = await any_engine.fetch_jobs(
        "default", 2, node="n", producer=uid(2), now=later, limits=by_worker, dead_after=15
    )
    assert [j.id for j in freed] == ids[2:4]


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
    ids = await fleet_engines[0].insert([req() for _ in range(120)], now=T0)
    peak = 0

    def check(executing: list[Any]) -> None:
        nonlocal peak
        peak = max(peak, len(executing))
        assert len(executing) <= 4, [j.id for j in executing]

    done = await claim_and_ack_at_random(fleet_engines, FetchLimits(global_limit=4), check, seed=7)
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
        ids = await apps[0].enqueue_many([jobs.probe.new(pause=0.03) for _ in range(24)])
        await poll(
            lambda: apps[0].list_jobs(JobFilter(ids=tuple(ids))),
            lambda found: all(j.state is JobState.COMPLETED for j in found),
            timeout=20,
            what="every capped job to complete",
            every=0.05,
        )
        assert 1 <= jobs.PROBE["peak"] <= 2  # never above the cap
        # Which node runs them is not part of the contract: a node whose own jobs end is woken by
        # their acks and often takes the freed slots before the others' retries come round.
    finally:
        for app in apps:
            await app.stop(grace=1)


def test_queue_settings_take_and_check_a_global_limit() -> None:
    (queue,) = parse_queues({"mail": {"limit": 10, "global_limit": 4}})
    assert queue == QueueSettings("mail", 10, global_limit=4)
    with pytest.raises(ValidationError, match=r"queues\.mail\.global_limit=0"):
        parse_queues({"mail": {"limit": 10, "global_limit": 0}})


# -- rate limits ---------------------------------------------------------------------------------------
def rated(allowed: int, period: float = 60, global_limit: int | None = None) -> FetchLimits:
    return FetchLimits(global_limit=global_limit, rate=RateLimit(allowed, period))


async def claim_at(engine: Engine, at: Any, demand: int, limits: FetchLimits) -> list[int]:
    jobs = await engine.fetch_jobs("default", demand, node="node-1", producer=uid(1), now=at, limits=limits)
    return [j.id for j in jobs]


async def test_a_rate_limit_counts_starts_in_a_sliding_window(any_engine: Engine) -> None:
    ids = await any_engine.insert([req() for _ in range(10)], now=T0)
    limits = rated(3, 60)
    assert await claim_at(any_engine, T0, 2, limits) == ids[:2]
    assert await claim_at(any_engine, T0 + timedelta(seconds=30), 10, limits) == ids[2:3]
    assert await claim_at(any_engine, T0 + timedelta(seconds=59), 10, limits) == []  # 3 in the window
    # At T0+61 the two starts of T0 have left the window, the one of T0+30 has not.
    assert await claim_at(any_engine, T0 + timedelta(seconds=61), 10, limits) == ids[3:5]
    assert await claim_at(any_engine, T0 + timedelta(seconds=91), 10, limits) == ids[5:6]


async def test_every_start_counts_whatever_its_outcome(any_engine: Engine) -> None:
    ids = await any_engine.insert([req() for _ in range(4)], now=T0)
    limits = rated(2, 10)
    claimed = await claim_at(any_engine, T0, 2, limits)
    await any_engine.ack_jobs(
        [Ack(claimed[0], 1, JobState.COMPLETED), Ack(claimed[1], 1, JobState.DISCARDED)], now=T0
    )
    assert await claim_at(any_engine, T0 + timedelta(seconds=5), 2, limits) == []
    assert await claim_at(any_engine, T0 + timedelta(seconds=11), 2, limits) == ids[2:4]


async def test_a_claim_says_whether_a_limit_stopped_it(any_engine: Engine) -> None:
    await any_engine.insert([req() for _ in range(5)], now=T0)
    rate_capped = await any_engine.fetch_jobs(
        "default", 10, node="n", producer=uid(1), now=T0, limits=rated(2)
    )
    assert len(rate_capped) == 2 and getattr(rate_capped, "capped", False)
    global_capped = await any_engine.fetch_jobs(
        "default", 10, node="n", producer=uid(1), now=T0, limits=FetchLimits(global_limit=3)
    )
    assert len(global_capped) == 1 and getattr(global_capped, "capped", False)  # 2 + 1 = 3 running
    await any_engine.insert([req(queue="roomy") for _ in range(2)], now=T0)
    drained = await any_engine.fetch_jobs("roomy", 10, node="n", producer=uid(1), now=T0, limits=rated(50))
    assert len(drained) == 2 and not getattr(drained, "capped", True)  # the queue ran dry first


async def test_global_and_rate_limits_together_take_the_smaller(any_engine: Engine) -> None:
    ids = await any_engine.insert([req() for _ in range(10)], now=T0)
    both = rated(5, 60, global_limit=2)
    assert await claim_at(any_engine, T0, 10, both) == ids[:2]  # the global limit binds
    await any_engine.ack_jobs([Ack(i, 1, JobState.COMPLETED) for i in ids[:2]], now=T0)
    assert await claim_at(any_engine, T0 + timedelta(seconds=1), 10, both) == ids[2:4]
    await any_engine.ack_jobs([Ack(i, 1, JobState.COMPLETED) for i in ids[2:4]], now=T0)
    assert await claim_at(any_engine, T0 + timedelta(seconds=2), 10, both) == ids[4:5]  # the rate binds


async def test_concurrent_engines_never_start_more_than_the_rate(fleet_engines: list[Engine]) -> None:
    """Six producers on three engines claim at random moments of fake time: no 10 s window ever holds
    more than 5 starts, and the limit is reached."""
    await fleet_engines[0].insert([req() for _ in range(200)], now=T0)
    limits = rated(5, 10)
    starts: list[float] = []
    rng = random.Random(5)

    async def producer(engine: Engine, n: int) -> None:
        for step in range(60):
            second = step + rng.random()  # 0..60 s of fake time, in order per producer
            jobs = await engine.fetch_jobs(
                "default",
                rng.randint(1, 4),
                node=f"n{n}",
                producer=uid(n),
                now=T0 + timedelta(seconds=second),
                limits=limits,
            )
            starts.extend([second] * len(jobs))
            await asyncio.sleep(0)

    await asyncio.gather(*(producer(e, n) for n, e in enumerate(fleet_engines * 2, start=1)))
    assert len(starts) >= 5 * 5  # it did start jobs, window after window
    # The producers' fake clocks interleave, but each claim counts every start recorded after its
    # window began, later ones included: of the claims within any 10 s, the last one to run saw all
    # the others, so no 10 s ever holds more than 5 starts.
    starts.sort()
    for first in starts:
        assert sum(1 for s in starts if first <= s < first + 10) <= 5


@pytest.mark.parametrize(
    ("spec", "named"),
    [
        ({"allowed": 0}, "rate_limit.allowed"),
        ({"allowed": 2.5}, "rate_limit.allowed"),
        ({"allowed": 5, "period": 0}, "rate_limit.period"),
        ({"allowed": 5, "period": float("nan")}, "rate_limit.period"),
        ({"allowed": 5, "period": 90_000}, "rate_limit.period"),
        ({"period": 1}, "rate_limit.allowed"),
        ({"allowed": 5, "burst": 2}, "rate_limit.burst"),
        ({"allowed": 5, "partition": {"keys": ["tenant"]}}, "rate_limit.partition.fields"),
        ({"allowed": 5, "partition": {"args": []}}, "rate_limit.partition"),
        (50, "rate_limit"),
    ],
)
def test_bad_rate_limits_are_refused_naming_the_key(spec: Any, named: str) -> None:
    with pytest.raises(ValidationError, match=rf"invalid queues\.mail\.{named}="):
        parse_queues({"mail": {"limit": 10, "rate_limit": spec}})


def test_queue_settings_take_a_rate_limit() -> None:
    (queue,) = parse_queues({"mail": {"limit": 10, "rate_limit": {"allowed": 50, "period": 1}}})
    assert queue.rate_limit == RateLimit(50, 1.0)
    assert fetch_limits(queue) == FetchLimits(rate=RateLimit(50, 1.0))


async def test_nodes_share_a_rate_limit(fleet_engines: list[Engine]) -> None:
    """Three nodes, a backlog of 200 jobs, 20 starts a second allowed on the fleet: by the start times
    the database recorded, no second holds more than 20 starts, and the fleet keeps close to the rate
    (the producers come back as soon as the window allows, not at their next poll)."""
    queues = {"rated": {"limit": 10, "rate_limit": {"allowed": 20, "period": 1}}}
    apps = [
        Conveyor(engine=engine, queues=queues, poll_interval=1.0, leadership=False, node=f"r{i}")
        for i, engine in enumerate(fleet_engines)
    ]
    await apps[0].enqueue_many([jobs.rated_step.new() for _ in range(200)])
    for app in apps:
        await app.start()
    try:

        async def started_jobs() -> list[Job]:
            return [j for j in await apps[0].list_jobs(JobFilter(limit=1000)) if j.attempted_at is not None]

        # Over two windows' worth of starts (the starts, not a fixed wait, end the run).
        await poll(started_jobs, lambda found: len(found) >= 50, timeout=15, what="50 rated starts")
        started = await apps[0].list_jobs(JobFilter(limit=1000))
    finally:
        for app in apps:
            await app.stop(grace=1)
    starts = sorted(j.attempted_at for j in started if j.attempted_at is not None)
    assert len(starts) >= 40
    for first in starts:
        assert sum(1 for s in starts if first <= s < first + timedelta(seconds=1)) <= 20
    elapsed = (starts[-1] - starts[0]).total_seconds()
    assert len(starts) >= 20 * elapsed * 0.7, (len(starts), elapsed)


async def test_queues_show_the_fleet_wide_limits(engine_name: str, fleet_engines: list[Engine]) -> None:
    queues = {"capped": {"limit": 3, "global_limit": 2, "rate_limit": {"allowed": 30, "period": 60}}}
    node = Conveyor(engine=fleet_engines[0], queues=queues, leadership=False, node="shown")
    viewer = Conveyor(engine=fleet_engines[1])
    # Another client's producer row with junk where the limits go: shown without them, never an error.
    await fleet_engines[2].record_producers(
        "Oban", "foreign", [ProducerBeat(uid(9), "capped", {"global_limit": "x", "rate_limit": [1]})]
    )
    await node.start()
    try:

        async def shown_queues() -> list[Any]:
            return [q for q in await viewer.queues() if q.node == "shown"]

        await poll(shown_queues, timeout=10, what="the node's queues", every=0.05)
        shown = {q.node: q for q in await viewer.queues()}
        url, prefix = ADDRESSES[engine_name](fleet_engines[0])
        listed = CliRunner().invoke(cli, ["queues", "--dsn", url, "--prefix", prefix])
    finally:
        await node.stop(grace=1)
    assert shown["shown"].limit == 3 and shown["shown"].global_limit == GlobalLimit(2)
    assert shown["shown"].rate_limit == RateLimit(30, 60)
    assert shown["foreign"].global_limit is None and shown["foreign"].rate_limit is None
    assert listed.exit_code == 0, listed.output
    assert "30/60s" in listed.output and "global" in listed.output


async def test_scale_changes_the_fleet_wide_limits_of_running_nodes(fleet_engines: list[Engine]) -> None:
    """From any process: set, change and lift a queue's global and rate limits on live nodes."""
    node = Conveyor(engine=fleet_engines[0], queues={"capped": 5}, leadership=False, node="scaled")
    controller = Conveyor(engine=fleet_engines[1])
    await node.start()
    try:
        assert node.node is not None
        producer = node.node.producers["capped"]
        assert producer.limits == FetchLimits()

        async def limits_become(expected: FetchLimits) -> None:
            await poll(lambda: producer.limits, lambda found: found == expected, what=f"limits {expected}")

        await controller.scale_queue("capped", global_limit=2, rate_limit={"allowed": 30, "period": 10})
        await limits_become(FetchLimits(global_limit=2, rate=RateLimit(30, 10)))
        assert producer.limit == 5  # the local limit stays
        await controller.scale_queue("capped", 3, global_limit=None)  # local limit too; lift the cap
        await limits_become(FetchLimits(rate=RateLimit(30, 10)))
        assert producer.limit == 3
        await controller.scale_queue("capped", rate_limit=None)
        await limits_become(FetchLimits())
        # Junk from another client's signal is ignored whole, never applied halfway.
        await fleet_engines[1].notify(
            "signal", {"action": "scale", "queue": "capped", "global_limit": 4, "rate_limit": "fast"}
        )
        await controller.scale_queue("capped", global_limit=7)  # a marker that arrives after it
        await limits_become(FetchLimits(global_limit=7))
    finally:
        await node.stop(grace=1)


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({}, "limit"),
        ({"global_limit": 0}, "global_limit"),
        ({"rate_limit": {"allowed": 0}}, "rate_limit.allowed"),
        ({"global_limit": 3, "persist": True, "node": "n1"}, "persist"),
        ({"global_limit": {"allowed": 2, "partition": {"keys": ["x"]}}}, "global_limit.partition.fields"),
        ({"rate_limit": {"allowed": 2, "partition": "tenant"}}, "rate_limit.partition"),
    ],
)
async def test_bad_scales_are_refused_before_anything_is_sent(
    any_engine: Engine, options: dict[str, Any], named: str
) -> None:
    app = Conveyor(engine=any_engine)
    with pytest.raises(ValidationError, match=rf"invalid {named}="):
        await app.scale_queue("capped", **options)


async def test_the_cli_scales_the_fleet_wide_limits(engine_name: str, fleet_engines: list[Engine]) -> None:
    node = Conveyor(engine=fleet_engines[0], queues={"capped": 5}, leadership=False, node="cli-scaled")
    url, prefix = ADDRESSES[engine_name](fleet_engines[0])

    def scale(*args: str) -> Any:
        return CliRunner().invoke(cli, ["scale", "capped", *args, "--dsn", url, "--prefix", prefix])

    await node.start()
    try:
        assert node.node is not None
        producer = node.node.producers["capped"]
        done = await asyncio.to_thread(scale, "--global-limit", "2", "--rate-limit", "30/10s")
        assert done.exit_code == 0, done.output
        expected = FetchLimits(global_limit=2, rate=RateLimit(30, 10))
        await poll(lambda: producer.limits, lambda found: found == expected, what=f"limits {expected}")
        assert producer.limit == 5
        by_tenant = Partition(worker=True, args=("tenant",))
        done = await asyncio.to_thread(scale, "--rate-limit", "5/1", "--partition", "worker,args.tenant")
        assert done.exit_code == 0, done.output
        expected = FetchLimits(global_limit=2, rate=RateLimit(5, 1, by_tenant))
        await poll(lambda: producer.limits, lambda found: found == expected, what=f"limits {expected}")
    finally:
        await node.stop(grace=1)
    refused = [
        (scale(), 2, "give a LIMIT, --global-limit or --rate-limit"),
        (scale("--global-limit", "many"), 2, "--global-limit"),
        (scale("--rate-limit", "fast"), 2, "--rate-limit"),
        (scale("--rate-limit", "0/1"), 1, "rate_limit.allowed"),
        (scale("--global-limit", "3", "--persist", "--node", "n1"), 1, "persist"),
        (scale("--partition", "args.tenant"), 2, "--partition needs --global-limit or --rate-limit"),
        (scale("--global-limit", "3", "--partition", "tenant"), 2, "--partition"),
        (scale("--global-limit", "3", "--partition", "args."), 2, "--partition"),
    ]
    for result, code, said in refused:
        assert result.exit_code == code and said in result.output, result.output
        assert "Traceback" not in result.output


async def test_persisted_fleet_wide_limits_apply_to_nodes_started_later(fleet_engines: list[Engine]) -> None:
    """`scale --persist` keeps global and rate limits (partitioned too) over the configuration of
    nodes that start the queue later; a persisted None lifts a configured limit; later persisted
    changes replace only what they name."""
    controller = Conveyor(engine=fleet_engines[1])
    by_tenant = {"allowed": 3, "period": 2, "partition": {"args": ["tenant"]}}
    await controller.scale_queue("capped", global_limit=None, rate_limit=by_tenant, persist=True)
    await controller.scale_queue("capped", 4, persist=True)  # the local limit, kept beside them

    async def limits_of_a_new_node(engine: Engine) -> tuple[int, FetchLimits]:
        configured = {"capped": {"limit": 2, "global_limit": 9}}
        node = Conveyor(engine=engine, queues=configured, leadership=False, node="later")
        await node.start()
        try:
            assert node.node is not None
            producer = node.node.producers["capped"]
            return producer.limit, producer.limits
        finally:
            await node.stop(grace=1)

    rate = RateLimit(3, 2, Partition(args=("tenant",)))
    assert await limits_of_a_new_node(fleet_engines[0]) == (4, FetchLimits(rate=rate))
    await controller.scale_queue("capped", global_limit={"allowed": 5, "partition": "worker"}, persist=True)
    cap = GlobalLimit(5, Partition(worker=True))
    assert await limits_of_a_new_node(fleet_engines[2]) == (4, FetchLimits(global_limit=cap, rate=rate))
