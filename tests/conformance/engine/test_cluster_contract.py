"""The cluster contract: leadership, producers, rescue, lost claims, pruning, cron ticks, queue state."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from conveyor import JobFilter, JobState
from conveyor._runtime.leadership import Leadership
from conveyor.acks import Ack
from conveyor.engine.base import Engine
from conveyor.fleet import OWN_PRODUCER, CronTick, ProducerBeat
from conveyor.retention import Retention
from conveyor.telemetry import Telemetry
from tests.conformance.conftest import UNSTAMP_ATTEMPT
from tests.conformance.contract import ERROR, FINAL, NODE, STATES, T0, fetch, job, listening, put, req, uid

APP = "conveyor"


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


# -- leadership --------------------------------------------------------------------------------------
async def test_lease_is_taken_renewed_and_taken_over_only_after_expiry(any_engine: Engine) -> None:
    first = await any_engine.elect_leader(APP, "a", 10, now=T0)
    assert first is not None and (first.node, first.elected_at) == ("a", T0)
    assert await any_engine.elect_leader(APP, "b", 10, now=at(5)) is None
    renewed = await any_engine.elect_leader(APP, "a", 10, now=at(8))
    assert renewed is not None and renewed.elected_at == T0  # renewal keeps elected_at
    assert await any_engine.elect_leader(APP, "b", 10, now=at(17)) is None
    moment = at(18.000001)
    taken = await any_engine.elect_leader(APP, "b", 10, now=moment)
    assert taken is not None and (taken.node, taken.elected_at) == ("b", moment)
    held = await any_engine.get_leader(APP, now=at(19))
    assert held is not None and held.node == "b" and held.expires_at == at(28.000001)


@pytest.mark.parametrize(("offset", "taken"), [(9.999999, False), (10, False), (10.000001, True)])
async def test_another_node_takes_the_lease_only_once_it_expired(
    any_engine: Engine, offset: float, taken: bool
) -> None:
    await any_engine.elect_leader(APP, "a", 10, now=T0)
    result = await any_engine.elect_leader(APP, "b", 10, now=at(offset))
    assert (result is not None) is taken
    leader = await any_engine.get_leader(APP, now=at(offset))
    assert leader is not None and leader.node == ("b" if taken else "a")


@pytest.mark.parametrize(
    ("silent", "taken"), [(14.999999, False), (15, False), (15.000001, True)], ids=["fresh", "at", "dead"]
)
async def test_a_live_lease_is_taken_from_a_leader_whose_heartbeats_stopped(
    any_engine: Engine, silent: float, taken: bool
) -> None:
    """A leader killed or frozen: once every producer row of its node is older than
    ``stale_after``, another node takes its lease without waiting for the TTL."""
    beats = [ProducerBeat(uid(1), "default", OWN_PRODUCER), ProducerBeat(uid(2), "mail", OWN_PRODUCER)]
    await any_engine.record_producers(APP, "a", beats, now=T0)
    await any_engine.elect_leader(APP, "a", 30, now=T0)
    await any_engine.record_producers(APP, "a", beats[:1], now=at(-5))  # one row older: not the last
    result = await any_engine.elect_leader(APP, "b", 30, now=at(silent), stale_after=15)
    assert (result is not None) is taken
    leader = await any_engine.get_leader(APP, now=at(silent))
    assert leader is not None and leader.node == ("b" if taken else "a")
    # Without stale_after the lease holds to its end.
    assert await any_engine.elect_leader(APP, "c", 30, now=at(29)) is None


async def test_a_stale_leader_keeps_its_lease_without_own_rows_or_with_one_fresh(any_engine: Engine) -> None:
    await any_engine.elect_leader(APP, "a", 30, now=T0)  # a node with no queues: no rows at all
    assert await any_engine.elect_leader(APP, "b", 30, now=at(20), stale_after=15) is None
    await any_engine.record_producers(APP, "a", [ProducerBeat(uid(1), "default", OWN_PRODUCER)], now=T0)
    await any_engine.record_producers(APP, "a", [ProducerBeat(uid(2), "mail", OWN_PRODUCER)], now=at(10))
    assert await any_engine.elect_leader(APP, "b", 30, now=at(20), stale_after=15) is None  # mail beats
    # Another runtime's rows of the node, or rows of another instance name, do not count.
    await any_engine.record_producers(APP, "x", [ProducerBeat(uid(3), "default", {"local_limit": 1})], now=T0)
    await any_engine.record_producers("other", "x", [ProducerBeat(uid(4), "q", OWN_PRODUCER)], now=T0)
    await any_engine.elect_leader(APP, "x", 30, now=at(31))
    assert await any_engine.elect_leader(APP, "b", 30, now=at(50), stale_after=15) is None


@pytest.mark.parametrize(("offset", "held"), [(0, True), (10, True), (10.000001, False)])
async def test_get_leader_sees_a_lease_until_it_expires(
    any_engine: Engine, offset: float, held: bool
) -> None:
    await any_engine.elect_leader(APP, "a", 10, now=T0)
    assert (await any_engine.get_leader(APP, now=at(offset)) is not None) is held


async def test_leases_of_different_names_are_independent(any_engine: Engine) -> None:
    assert await any_engine.elect_leader(APP, "a", 10, now=T0) is not None
    other = await any_engine.elect_leader("other", "b", 10, now=T0)
    assert other is not None and other.node == "b"
    assert await any_engine.get_leader("nobody", now=T0) is None


async def test_only_the_holder_can_resign(any_engine: Engine) -> None:
    await any_engine.elect_leader(APP, "a", 10, now=T0)
    assert not await any_engine.resign_leader(APP, "b")
    assert not await any_engine.resign_leader("other", "a")
    assert (await any_engine.get_leader(APP, now=T0)) is not None
    assert await any_engine.resign_leader(APP, "a")
    assert await any_engine.get_leader(APP, now=T0) is None
    assert await any_engine.elect_leader(APP, "b", 10, now=at(1)) is not None  # at once


OBAN_ROW = {"local_limit": 5, "paused": False}  # what oban-py writes in its producer rows


@pytest.mark.parametrize(
    ("holder_rows", "taken"),
    [
        ([OBAN_ROW], True),  # an oban-py node
        ([OBAN_ROW, OBAN_ROW], True),
        ([OWN_PRODUCER], False),  # a Conveyor node
        ([OWN_PRODUCER, OBAN_ROW], False),
        ([], False),  # no producer rows: nothing says whose it is
    ],
    ids=["oban-py", "oban-py-two-queues", "conveyor", "mixed-rows", "no-rows"],
)
async def test_a_mixed_fleet_takes_the_lease_from_another_runtimes_node_only(
    any_engine: Engine, holder_rows: list[dict[str, Any]], taken: bool
) -> None:
    name = "Oban"
    beats = [ProducerBeat(uid(n + 1), f"q{n}", meta) for n, meta in enumerate(holder_rows)]
    await any_engine.record_producers(name, "holder", beats, now=T0)
    assert await any_engine.elect_leader(name, "holder", 30, now=T0) is not None
    assert await any_engine.elect_leader(name, "c", 30, now=at(1)) is None  # not without the flag
    result = await any_engine.elect_leader(name, "c", 30, now=at(2), take_from_foreign=True)
    assert (result is not None) is taken
    leader = await any_engine.get_leader(name, now=at(3))
    assert leader is not None and leader.node == ("c" if taken else "holder")
    if taken:
        assert result is not None and result.elected_at == at(2)
        # The old holder cannot renew it; the new one can, without taking it again.
        assert await any_engine.elect_leader(name, "holder", 30, now=at(4)) is None
        renewed = await any_engine.elect_leader(name, "c", 30, now=at(5), take_from_foreign=True)
        assert renewed is not None and renewed.elected_at == at(2)


async def test_a_conveyor_leader_of_a_mixed_fleet_announces_itself(any_engine: Engine) -> None:
    """oban-py elects again on any notification on the leader channel: the announcement makes an
    oban-py node that led until now find at once that it no longer does."""
    await any_engine.record_producers("Oban", "oban-node", [ProducerBeat(uid(1), "q", OBAN_ROW)])
    assert await any_engine.elect_leader("Oban", "oban-node", 30) is not None
    mixed = Leadership(any_engine, Telemetry(), name="Oban", node="c", ttl=30, take_from_foreign=True)
    async with listening(any_engine, ["leader"]) as heard:
        await mixed.tick()
        assert mixed.is_leader
        await heard.wait_for("leader", {"action": "elected", "node": "c", "name": "Oban"})
        await mixed.tick()  # renewing is no news
        await settle_channel(any_engine, heard, "leader")
    assert heard.on("leader") == [{"action": "elected", "node": "c", "name": "Oban"}, {"marker": 1}]
    leader = await any_engine.get_leader("Oban")
    assert leader is not None and leader.node == "c"
    await mixed.stop()  # resigns


async def settle_channel(engine: Engine, heard: Any, channel: str) -> None:
    await engine.notify(channel, {"marker": 1})
    await heard.wait_for(channel, {"marker": 1})


# -- producers ---------------------------------------------------------------------------------------
async def test_producers_are_recorded_refreshed_listed_and_deleted(any_engine: Engine) -> None:
    await any_engine.record_producers(APP, "gone", [ProducerBeat(uid(1), "q1", {"local_limit": 1})], now=T0)
    await any_engine.record_producers(
        APP, "alive", [ProducerBeat(uid(2), "q3", {"local_limit": 2}), ProducerBeat(uid(3), "q2", {})], now=T0
    )
    await any_engine.record_producers(
        APP, "alive", [ProducerBeat(uid(2), "q3", {"local_limit": 3})], now=at(5)
    )
    await any_engine.record_producers(APP, "alive", [], now=at(6))
    producers = await any_engine.list_producers()
    assert [(p.uuid, p.name, p.node, p.queue, p.meta) for p in producers] == [
        (uid(3), APP, "alive", "q2", {}),
        (uid(2), APP, "alive", "q3", {"local_limit": 3}),
        (uid(1), APP, "gone", "q1", {"local_limit": 1}),
    ]
    assert [(p.started_at, p.updated_at) for p in producers] == [(T0, T0), (T0, at(5)), (T0, T0)]
    await any_engine.delete_producers([uid(2), uid(9)])
    await any_engine.delete_producers([])
    assert [p.uuid for p in await any_engine.list_producers()] == [uid(3), uid(1)]


# -- rescue ------------------------------------------------------------------------------------------
async def _orphan(
    engine: Engine, producer: str, claimed: float = 0, mark: dict[str, Any] = OWN_PRODUCER, **options: Any
) -> int:
    """A job claimed at ``at(claimed)`` by ``producer`` (whose heartbeat is then at that moment);
    ``mark`` is the meta that says who wrote the row (another runtime's rows lack Conveyor's)."""
    await engine.record_producers(APP, "n", [ProducerBeat(producer, "default", mark)], now=at(claimed))
    return await put(engine, JobState.EXECUTING, producer=producer, now=at(claimed), **options)


async def test_rescue_follows_heartbeats(any_engine: Engine) -> None:
    dead, alive = uid(0xD), uid(0xA)
    orphan = await _orphan(any_engine, dead)
    kept = await _orphan(any_engine, alive)
    exhausted = await _orphan(any_engine, dead, max_attempts=1)
    await any_engine.record_producers(APP, "n2", [ProducerBeat(alive, "default", OWN_PRODUCER)], now=at(30))
    result = await any_engine.rescue_jobs(timeout=15, backstop=3600, now=at(30))
    assert result.available == (orphan,) and result.discarded == (exhausted,)
    rescued, discarded = await job(any_engine, orphan), await job(any_engine, exhausted)
    assert (rescued.state, rescued.attempt, rescued.meta["rescued"]) == (JobState.AVAILABLE, 1, 1)
    assert (discarded.state, discarded.discarded_at, discarded.meta["rescued"]) == (
        JobState.DISCARDED,
        at(30),
        1,
    )
    assert (await job(any_engine, kept)).state is JobState.EXECUTING
    assert [p.uuid for p in await any_engine.list_producers()] == [alive]  # the dead one is forgotten
    again = await any_engine.rescue_jobs(timeout=15, backstop=3600, now=at(30))
    assert again.available == () and again.discarded == ()


@pytest.mark.parametrize(("silent", "rescued"), [(14.999999, False), (15, False), (15.000001, True)])
async def test_a_producer_is_dead_once_silent_longer_than_the_timeout(
    any_engine: Engine, silent: float, rescued: bool
) -> None:
    job_id = await _orphan(any_engine, uid(1))
    result = await any_engine.rescue_jobs(timeout=15, backstop=3600, now=at(silent))
    assert result.available == ((job_id,) if rescued else ())


@pytest.mark.parametrize(
    ("mark", "silent", "rescued"),
    [
        ({"local_limit": 5, "paused": False}, 59.999999, False),  # as oban-py writes its rows
        ({"local_limit": 5, "paused": False}, 60, False),
        ({"local_limit": 5, "paused": False}, 60.000001, True),
        ({"runtime": "oban"}, 60.000001, True),
        ([1, 2], 60.000001, True),  # meta that is not an object: not Conveyor's
    ],
)
async def test_another_runtimes_producer_is_dead_once_silent_longer_than_the_foreign_timeout(
    any_engine: Engine, mark: Any, silent: float, rescued: bool
) -> None:
    theirs = await _orphan(any_engine, uid(0xF), mark=mark)
    ours = await _orphan(any_engine, uid(0xC))
    result = await any_engine.rescue_jobs(timeout=15, foreign_timeout=60, backstop=3600, now=at(silent))
    assert result.available == ((theirs, ours) if rescued else (ours,))
    assert [p.uuid for p in await any_engine.list_producers()] == ([] if rescued else [uid(0xF)])


async def test_without_a_foreign_timeout_another_runtimes_producer_is_never_dead(any_engine: Engine) -> None:
    theirs = await _orphan(any_engine, uid(0xF), mark={})
    ours = await _orphan(any_engine, uid(0xC))
    result = await any_engine.rescue_jobs(timeout=15, backstop=3600, now=at(86400))
    assert result.available == (ours,)
    assert (await job(any_engine, theirs)).state is JobState.EXECUTING
    assert [p.uuid for p in await any_engine.list_producers()] == [uid(0xF)]


async def test_a_live_producer_keeps_its_jobs_however_long_they_run(any_engine: Engine) -> None:
    job_id = await _orphan(any_engine, uid(1))
    await any_engine.record_producers(
        APP, "n", [ProducerBeat(uid(1), "default", OWN_PRODUCER)], now=at(86400)
    )
    result = await any_engine.rescue_jobs(timeout=15, backstop=3600, now=at(86401))
    assert result.available == () and (await job(any_engine, job_id)).state is JobState.EXECUTING


async def test_rescue_spares_the_live_producers_it_is_told_of(any_engine: Engine) -> None:
    mine, dead = uid(0xB1), uid(0xB2)
    own = await _orphan(any_engine, mine)
    orphan = await _orphan(any_engine, dead)
    result = await any_engine.rescue_jobs(timeout=15, backstop=3600, live=[mine], now=at(60))
    assert result.available == (orphan,)
    assert (await job(any_engine, own)).state is JobState.EXECUTING
    assert [p.uuid for p in await any_engine.list_producers()] == [mine]  # only the dead one goes


@pytest.mark.parametrize(
    ("producer_row", "claimed_ago", "rescued"),
    [(False, 7200, True), (False, 600, False), (False, 3599, False), (True, 7200, False)],
    ids=["old-unknown", "new-unknown", "just-under-backstop", "old-with-a-fresh-row"],
)
async def test_backstop_rescues_old_jobs_of_unknown_producers_only(
    any_engine: Engine, producer_row: bool, claimed_ago: float, rescued: bool
) -> None:
    now = at(10_000)
    job_id = await put(
        any_engine, JobState.EXECUTING, producer=uid(7), now=now - timedelta(seconds=claimed_ago)
    )
    if producer_row:
        await any_engine.record_producers(APP, "n", [ProducerBeat(uid(7), "default", OWN_PRODUCER)], now=now)
    result = await any_engine.rescue_jobs(timeout=15, backstop=3600, now=now)
    assert result.available == ((job_id,) if rescued else ())


@pytest.mark.parametrize(
    ("scheduled_ago", "rescued"), [(7200, True), (3601, True), (3599, False), (60, False)]
)
async def test_backstop_rescues_a_job_another_client_left_without_attempted_at(
    engine_name: str, any_engine: Engine, scheduled_ago: float, rescued: bool
) -> None:
    """Another client's executing row with attempted_at NULL and no producer row: the backstop
    dates it by scheduled_at (its attempt began after that), so it is rescued once that is old."""
    now = at(10_000)
    job_id = await put(any_engine, JobState.EXECUTING, producer=uid(7), now=now)
    await UNSTAMP_ATTEMPT[engine_name](any_engine, job_id, now - timedelta(seconds=scheduled_ago))
    assert (await job(any_engine, job_id)).attempted_at is None
    result = await any_engine.rescue_jobs(timeout=15, backstop=3600, now=now)
    assert result.available == ((job_id,) if rescued else ())
    found = await job(any_engine, job_id)
    assert found.state is (JobState.AVAILABLE if rescued else JobState.EXECUTING)
    if rescued:
        [entry] = found.errors
        assert entry["error"] == (
            f"executing for over 3600 s with no heartbeat row of its node ({NODE}); rescued to run again"
        )


async def test_rescue_records_why_in_errors(any_engine: Engine) -> None:
    """A rescued job, and above all a discarded one, says why its attempt ended: an errors entry
    in Oban's {attempt, at, error} form, after what was there, naming the node that stopped."""
    orphan = await _orphan(any_engine, uid(0xD))
    await any_engine.ack_jobs([Ack(orphan, 1, JobState.RETRYABLE, schedule_in=0, error=ERROR)], now=at(1))
    await any_engine.stage_jobs(10, now=at(2))
    assert await fetch(any_engine, now=at(2), producer=uid(0xD)) == [orphan]
    exhausted = await _orphan(any_engine, uid(0xD), max_attempts=1)
    await any_engine.record_producers(APP, "n", [ProducerBeat(uid(0xD), "default", OWN_PRODUCER)], now=at(2))
    result = await any_engine.rescue_jobs(timeout=15, backstop=3600, now=at(30))
    assert result.available == (orphan,) and result.discarded == (exhausted,)
    silent = f"the node running this job ({NODE}) stopped sending heartbeats"
    assert list((await job(any_engine, orphan)).errors) == [
        ERROR,
        {"attempt": 2, "at": at(30).isoformat(), "error": f"{silent}; rescued to run again"},
    ]
    assert list((await job(any_engine, exhausted)).errors) == [
        {"attempt": 1, "at": at(30).isoformat(), "error": f"{silent}; discarded: no attempts left"}
    ]


@pytest.mark.parametrize("times", [1, 2, 3])
async def test_each_rescue_counts_in_meta(any_engine: Engine, times: int) -> None:
    job_id = await _orphan(any_engine, uid(1), meta={"keep": "me"})
    for n in range(times):
        now = at(100 * (n + 1))
        result = await any_engine.rescue_jobs(timeout=15, backstop=3600, now=now)
        assert result.available == (job_id,)
        if n + 1 < times:
            await any_engine.record_producers(
                APP, "n", [ProducerBeat(uid(1), "default", OWN_PRODUCER)], now=now
            )
            assert await fetch(any_engine, now=now, producer=uid(1)) == [job_id]
    found = await job(any_engine, job_id)
    assert found.meta == {"keep": "me", "rescued": times} and found.attempt == times


async def test_rescue_is_bounded_and_keeps_a_dead_producer_until_its_jobs_are_rescued(
    any_engine: Engine,
) -> None:
    ids = [await _orphan(any_engine, uid(1)) for _ in range(3)]
    first = await any_engine.rescue_jobs(timeout=15, backstop=3600, limit=2, now=at(60))
    assert first.available == tuple(ids[:2])
    assert [p.uuid for p in await any_engine.list_producers()] == [uid(1)]  # still owns one job
    second = await any_engine.rescue_jobs(timeout=15, backstop=3600, limit=2, now=at(60))
    assert second.available == (ids[2],)
    assert await any_engine.list_producers() == []


async def test_a_stale_ack_after_rescue_does_not_overwrite_the_new_attempt(any_engine: Engine) -> None:
    job_id = await _orphan(any_engine, uid(1))
    assert (await any_engine.rescue_jobs(timeout=10, backstop=3600, now=at(60))).available == (job_id,)
    assert await any_engine.ack_jobs([Ack(job_id, 1, JobState.COMPLETED)], now=at(60)) == []
    assert await fetch(any_engine, now=at(61), producer=uid(2), node="node-2") == [job_id]
    for state in (JobState.COMPLETED, JobState.DISCARDED, JobState.CANCELLED):
        assert await any_engine.ack_jobs([Ack(job_id, 1, state, error={"attempt": 1, "error": "late"})]) == []
    current = await job(any_engine, job_id)
    assert (current.state, current.attempt, current.attempted_by) == (
        JobState.EXECUTING,
        2,
        ("node-2", uid(2)),
    )
    assert [e["error"] for e in current.errors] == [  # the rescue's entry, no late one
        f"the node running this job ({NODE}) stopped sending heartbeats; rescued to run again"
    ]
    assert await any_engine.ack_jobs([Ack(job_id, 2, JobState.COMPLETED)], now=at(62)) == [job_id]


# -- still executing, lost claims ----------------------------------------------------------------------
@pytest.mark.parametrize(
    ("case", "expected"),
    [
        ("executing", True),
        ("other-attempt", False),
        ("completed", False),
        ("cancelled", False),
        ("deleted", False),
    ],
)
async def test_still_executing_checks_the_state_and_the_attempt(
    any_engine: Engine, case: str, expected: bool
) -> None:
    job_id = await put(any_engine, JobState.EXECUTING)
    attempt = 2 if case == "other-attempt" else 1
    if case == "completed":
        await any_engine.ack_jobs([Ack(job_id, 1, JobState.COMPLETED)], now=T0)
    elif case == "cancelled":
        await any_engine.cancel_jobs(JobFilter(ids=(job_id,)), now=T0)
    elif case == "deleted":
        await any_engine.cancel_jobs(JobFilter(ids=(job_id,)), now=T0)
        await any_engine.delete_jobs(JobFilter(ids=(job_id,)))
    assert await any_engine.still_executing([(job_id, attempt), (10**9, 1)]) == (
        {job_id} if expected else set()
    )
    assert await any_engine.still_executing([]) == set()


async def test_still_executing_can_require_the_claim_to_be_one_of_the_callers_producers(
    any_engine: Engine,
) -> None:
    # After a claim undone by a crash of the server, another producer can claim the same attempt:
    # the row is executing that attempt, but no longer for the node that asks.
    job_id = await put(any_engine, JobState.EXECUTING, producer=uid(1))
    assert await any_engine.still_executing([(job_id, 1)]) == {job_id}
    assert await any_engine.still_executing([(job_id, 1)], producers=[uid(1), uid(2)]) == {job_id}
    assert await any_engine.still_executing([(job_id, 1)], producers=[uid(2)]) == set()
    assert await any_engine.still_executing([(job_id, 1)], producers=[]) == set()


@pytest.mark.parametrize(
    ("case", "lost"),
    [
        ("old", True),
        ("just-claimed", False),
        ("exactly-older-than", False),
        ("other-producer", False),
        ("finished", False),
    ],
)
async def test_lost_claims_are_old_executing_jobs_of_the_given_producers(
    any_engine: Engine, case: str, lost: bool
) -> None:
    job_id = await put(any_engine, JobState.EXECUTING, producer=uid(1), now=T0)
    if case == "finished":
        await any_engine.ack_jobs([Ack(job_id, 1, JobState.COMPLETED)], now=T0)
    now = {"just-claimed": at(5), "exactly-older-than": at(30)}.get(case, at(31))
    producers = [uid(2)] if case == "other-producer" else [uid(1), uid(2)]
    claims = await any_engine.lost_claims(producers, older_than=30, now=now)
    assert claims == ([(job_id, 1)] if lost else [])
    assert await any_engine.lost_claims([], older_than=0, now=now) == []


# -- pruning -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("state", STATES, ids=str)
@pytest.mark.parametrize("age_days", [3, 0.5])
async def test_prune_deletes_old_final_jobs_only(
    any_engine: Engine, state: JobState, age_days: float
) -> None:
    job_id = await put(any_engine, state)
    deleted = await any_engine.prune_jobs(Retention(), limit=100, now=T0 + timedelta(days=age_days))
    gone = state in FINAL and age_days > 1
    assert deleted.count == int(gone) and getattr(deleted, state.value, 0) == int(gone)
    assert (await any_engine.get_job(job_id) is None) is gone


async def test_prune_deletes_in_bounded_batches(any_engine: Engine) -> None:
    ids = await any_engine.insert([req() for _ in range(5)], now=T0)
    await fetch(any_engine, now=T0)
    await any_engine.ack_jobs([Ack(i, 1, JobState.COMPLETED) for i in ids[:4]], now=T0)
    later = T0 + timedelta(days=2)
    batches = [await any_engine.prune_jobs(Retention(), limit=3, now=later) for _ in range(3)]
    assert [b.count for b in batches] == [3, 1, 0]
    assert [j.id for j in await any_engine.list_jobs(JobFilter())] == [ids[4]]


async def test_prune_keeps_the_newest_final_jobs_per_queue(any_engine: Engine) -> None:
    final = {
        q: [await put(any_engine, FINAL[i % 3], queue=q) for i in range(n)]
        for q, n in (("a", 12), ("b", 3), ("c", 7))
    }
    live = await any_engine.insert([req(queue="a") for _ in range(4)], now=T0)
    assert (await any_engine.prune_jobs(Retention(keep_per_queue=5), limit=100, now=T0)).count == 7 + 2
    remaining = {q: sorted(j.id for j in await any_engine.list_jobs(JobFilter(queues=(q,)))) for q in "abc"}
    assert remaining == {"a": final["a"][-5:] + live, "b": final["b"], "c": final["c"][-5:]}
    steps = []
    while (n := (await any_engine.prune_jobs(Retention(keep_per_queue=2), limit=1, now=T0)).count) > 0:
        steps.append(n)
    assert steps == [1] * 7  # at most `limit` per call: 3 + 1 + 3
    assert len(await any_engine.list_jobs(JobFilter(states=FINAL))) == 6


async def test_prune_forgets_old_cron_ticks_but_each_entrys_latest(any_engine: Engine) -> None:
    tick = datetime(2030, 1, 1, 12, 0)
    ticks = [CronTick("every", tick + timedelta(minutes=m), req(queue="cron")) for m in range(3)]
    assert len(await any_engine.insert_cron_jobs(ticks, now=T0)) == 3
    await any_engine.insert_cron_jobs([CronTick("other", tick, req(queue="cron"))], now=T0)
    # Younger than a day: remembered whatever max_age says, so the tick is not inserted twice.
    await any_engine.prune_jobs(Retention(max_age=1), limit=10, now=T0 + timedelta(hours=23))
    assert await any_engine.insert_cron_jobs(ticks[:1], now=T0) == []
    await any_engine.prune_jobs(Retention(max_age=1), limit=10, now=T0 + timedelta(days=3))
    assert len(await any_engine.insert_cron_jobs(ticks[:2], now=T0)) == 2  # forgotten: inserted again
    assert await any_engine.insert_cron_jobs(ticks[2:], now=T0) == []  # the latest is kept
    assert await any_engine.insert_cron_jobs([CronTick("other", tick, req())], now=T0) == []
    assert await any_engine.last_cron_ticks(["every", "other"]) == {
        "every": ticks[2].tick.replace(tzinfo=UTC),
        "other": tick.replace(tzinfo=UTC),
    }


# -- cron ----------------------------------------------------------------------------------------------
async def test_cron_ticks_insert_once(any_engine: Engine) -> None:
    tick = datetime(2030, 1, 1, 12, 0)
    entry = CronTick("every-minute", tick, req(meta={"cron_name": "every-minute"}))
    first = await any_engine.insert_cron_jobs([entry, entry], now=T0)
    again = await any_engine.insert_cron_jobs([entry], now=T0)
    assert len(first) == 1 and again == []
    assert await any_engine.last_cron_ticks(["every-minute"]) == {"every-minute": tick.replace(tzinfo=UTC)}


async def test_a_cron_job_is_an_available_job_with_the_requests_fields(any_engine: Engine) -> None:
    request = req(
        args={"x": 1}, queue="cron", meta={"cron_name": "e"}, tags=["cron"], priority=2, max_attempts=4
    )
    (job_id,) = await any_engine.insert_cron_jobs(
        [CronTick("e", datetime(2030, 1, 1, 12), request)], now=at(1)
    )
    found = await job(any_engine, job_id)
    assert (found.state, found.scheduled_at, found.inserted_at, found.queue) == (
        JobState.AVAILABLE,
        at(1),
        at(1),
        "cron",
    )
    assert (found.args, found.meta, found.tags, found.priority, found.max_attempts) == (
        {"x": 1},
        {"cron_name": "e"},
        ("cron",),
        2,
        4,
    )


@pytest.mark.parametrize(
    ("first", "second", "inserted"),
    [
        (("a", 0), ("a", 0), 0),
        (("a", 0), ("a", 1), 1),
        (("a", 0), ("b", 0), 1),
    ],
    ids=["same-tick", "next-tick", "other-entry"],
)
async def test_a_tick_is_identified_by_name_and_moment(
    any_engine: Engine, first: tuple[str, int], second: tuple[str, int], inserted: int
) -> None:
    base = datetime(2030, 1, 1, 12, 0)

    def tick(spec: tuple[str, int]) -> CronTick:
        return CronTick(spec[0], base + timedelta(minutes=spec[1]), req())

    assert len(await any_engine.insert_cron_jobs([tick(first)], now=T0)) == 1
    assert len(await any_engine.insert_cron_jobs([tick(second)], now=T0)) == inserted


async def test_cron_with_nothing_to_do(any_engine: Engine) -> None:
    assert await any_engine.insert_cron_jobs([], now=T0) == []
    assert await any_engine.last_cron_ticks([]) == {}
    assert await any_engine.last_cron_ticks(["never"]) == {}


# -- queue state ---------------------------------------------------------------------------------------
async def test_queue_state_persists_per_instance_and_queue(any_engine: Engine) -> None:
    assert await any_engine.load_queue_states(APP) == {}
    await any_engine.save_queue_state(APP, "mail", paused=True)
    await any_engine.save_queue_state(APP, "mail", limit=4)
    await any_engine.save_queue_state(APP, "bulk", limit=2)
    await any_engine.save_queue_state("other", "mail", paused=False)
    states = await any_engine.load_queue_states(APP)
    assert {q: (s.paused, s.limit) for q, s in states.items()} == {"mail": (True, 4), "bulk": (None, 2)}
    assert {q: (s.paused, s.limit) for q, s in (await any_engine.load_queue_states("other")).items()} == {
        "mail": (False, None)
    }


@pytest.mark.parametrize(
    ("saves", "expected"),
    [
        ([{"paused": True}], (True, None)),
        ([{"paused": True}, {"paused": False}], (False, None)),
        ([{"limit": 3}, {"limit": 9}], (None, 9)),
        ([{"paused": True, "limit": 3}, {}], (True, 3)),
        ([{"paused": False}, {"limit": 1}, {"paused": True}], (True, 1)),
    ],
    ids=["pause", "resume", "limit-replaced", "nothing-keeps", "parts-merge"],
)
async def test_a_save_changes_only_the_parts_it_names(
    any_engine: Engine, saves: list[dict[str, Any]], expected: tuple[bool | None, int | None]
) -> None:
    for save in saves:
        await any_engine.save_queue_state(APP, "q", **save)
    state = (await any_engine.load_queue_states(APP))["q"]
    assert (state.paused, state.limit) == expected
