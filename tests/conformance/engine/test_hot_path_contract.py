"""The hot path contract: fetch (claim order, demand, attempts), ack, release, stage."""

from __future__ import annotations

import asyncio
import random
from datetime import UTC, timedelta
from typing import Any

import pytest

from conveyor import JobFilter, JobState
from conveyor.acks import Ack
from conveyor.engine.base import Engine
from tests.conformance.conftest import REWRITE_JSON
from tests.conformance.contract import ERROR, NODE, PRODUCER, STATES, T0, fetch, job, put, req


# -- fetch -------------------------------------------------------------------------------------------
async def test_fetch_claims_in_priority_scheduled_at_id_order(any_engine: Engine) -> None:
    ids = await any_engine.insert(
        [
            req(priority=1),
            req(priority=0, scheduled_at=T0 - timedelta(seconds=1)),
            req(priority=0),
            req(priority=0, scheduled_at=T0 - timedelta(seconds=2)),
            req(queue="other"),
            req(schedule_in=60),
        ],
        now=T0,
    )
    jobs = await any_engine.fetch_jobs("default", 3, node=NODE, producer=PRODUCER, now=T0)
    assert [j.id for j in jobs] == [ids[3], ids[1], ids[2]]
    assert {(j.state, j.attempt, j.attempted_by, j.attempted_at) for j in jobs} == {
        (JobState.EXECUTING, 1, (NODE, PRODUCER), T0)
    }
    assert await fetch(any_engine) == [ids[0]]
    assert await fetch(any_engine) == []


async def test_fetched_jobs_match_what_get_job_reads(any_engine: Engine) -> None:
    await any_engine.insert([req(args={"i": i}, tags=["t"], meta={"m": i}) for i in range(3)], now=T0)
    jobs = await any_engine.fetch_jobs("default", 3, node=NODE, producer=PRODUCER, now=T0)
    for fetched in jobs:
        assert fetched == await job(any_engine, fetched.id)


@pytest.mark.parametrize(("demand", "claimed"), [(0, 0), (1, 1), (3, 3), (5, 5), (50, 5)])
async def test_fetch_claims_up_to_the_demand(any_engine: Engine, demand: int, claimed: int) -> None:
    await any_engine.insert([req() for _ in range(5)], now=T0)
    assert len(await fetch(any_engine, demand=demand)) == claimed
    waiting = await any_engine.list_jobs(JobFilter(states=(JobState.AVAILABLE,)))
    assert len(waiting) == 5 - claimed


@pytest.mark.parametrize("state", [s for s in STATES if s is not JobState.AVAILABLE], ids=str)
async def test_fetch_claims_available_jobs_only(any_engine: Engine, state: JobState) -> None:
    job_id = await put(any_engine, state)
    assert await fetch(any_engine, now=T0 + timedelta(days=1)) == []
    assert (await job(any_engine, job_id)).state is state


async def test_fetch_claims_from_its_own_queue_only(any_engine: Engine) -> None:
    mail, bulk = await any_engine.insert([req(queue="mail"), req(queue="bulk")], now=T0)
    assert await fetch(any_engine, "default") == []
    assert await fetch(any_engine, "bulk") == [bulk]
    assert await fetch(any_engine, "mail") == [mail]


async def test_fetch_never_claims_a_job_whose_attempts_are_used_up(any_engine: Engine) -> None:
    job_id = await put(any_engine, JobState.RETRYABLE, max_attempts=1)
    assert await any_engine.stage_jobs(10, now=T0 + timedelta(days=1)) == {"default": 1}
    assert (await job(any_engine, job_id)).state is JobState.AVAILABLE
    assert await fetch(any_engine, now=T0 + timedelta(days=1)) == []


async def test_a_job_without_attempts_left_does_not_block_the_queue_behind_it(any_engine: Engine) -> None:
    stuck = await put(any_engine, JobState.RETRYABLE, max_attempts=1)
    later = T0 + timedelta(days=1)
    await any_engine.stage_jobs(10, now=later)
    (fresh,) = await any_engine.insert([req(priority=9)], now=later)
    assert await fetch(any_engine, demand=1, now=later) == [fresh]
    left = await job(any_engine, stuck)
    assert (left.state, left.attempt) == (JobState.AVAILABLE, 1)


async def test_each_fetch_spends_one_attempt(any_engine: Engine) -> None:
    job_id = await put(any_engine, JobState.RETRYABLE, max_attempts=3)
    later = T0 + timedelta(hours=2)
    await any_engine.stage_jobs(10, now=later)
    assert await fetch(any_engine, now=later, producer="other", node="node-2") == [job_id]
    found = await job(any_engine, job_id)
    assert (found.attempt, found.attempted_at, found.attempted_by) == (2, later, ("node-2", "other"))


async def test_fetch_never_hands_out_a_job_twice_under_concurrency(any_engine: Engine) -> None:
    await any_engine.insert([req() for _ in range(500)], now=T0)
    batches = await asyncio.gather(*(fetch(any_engine, demand=25) for _ in range(30)))
    claimed = [i for batch in batches for i in batch]
    assert len(claimed) == len(set(claimed)) == 500


# -- ack ---------------------------------------------------------------------------------------------
LATER = T0 + timedelta(minutes=1)


#: Each kind of ack, and what it writes (``errors``: how many entries).
OUTCOMES: list[tuple[dict[str, Any], dict[str, Any]]] = [
    (
        {"state": JobState.COMPLETED},
        {"state": JobState.COMPLETED, "completed_at": LATER, "attempt": 1, "errors": 0},
    ),
    (
        {"state": JobState.RETRYABLE, "schedule_in": 30, "error": ERROR},
        {"state": JobState.RETRYABLE, "scheduled_at": LATER + timedelta(seconds=30), "errors": 1},
    ),
    (
        {"state": JobState.RETRYABLE, "schedule_in": 30.25, "error": ERROR},
        {"state": JobState.RETRYABLE, "scheduled_at": LATER + timedelta(seconds=30.25), "errors": 1},
    ),
    (
        {"state": JobState.SCHEDULED, "schedule_in": 5, "snoozed": True},
        {"state": JobState.SCHEDULED, "scheduled_at": LATER + timedelta(seconds=5), "attempt": 0},
    ),
    (
        {"state": JobState.DISCARDED, "error": ERROR},
        {"state": JobState.DISCARDED, "discarded_at": LATER, "errors": 1},
    ),
    (
        {"state": JobState.CANCELLED, "error": ERROR},
        {"state": JobState.CANCELLED, "cancelled_at": LATER, "errors": 1},
    ),
    (
        {"state": JobState.CANCELLED},
        {"state": JobState.CANCELLED, "cancelled_at": LATER, "errors": 0},
    ),
]
OUTCOME_IDS = [
    "completed",
    "retryable",
    "retryable-in-a-fraction",
    "snoozed",
    "discarded",
    "cancelled-with-error",
    "cancelled",
]


def assert_outcome(found: Any, expected: dict[str, Any]) -> None:
    for field, value in expected.items():
        if field == "errors":
            assert [e["error"] for e in found.errors] == ["boom"] * value
        else:
            assert getattr(found, field) == value, field
    for stamp in ("completed_at", "discarded_at", "cancelled_at"):
        if stamp not in expected:
            assert getattr(found, stamp) is None


@pytest.mark.parametrize(("ack", "expected"), OUTCOMES, ids=OUTCOME_IDS)
async def test_ack_writes_the_outcome(
    any_engine: Engine, ack: dict[str, Any], expected: dict[str, Any]
) -> None:
    job_id = await put(any_engine, JobState.EXECUTING)
    assert await any_engine.ack_jobs([Ack(job_id, 1, **ack)], now=LATER) == [job_id]
    assert_outcome(await job(any_engine, job_id), expected)


async def test_one_batch_writes_each_acks_outcome(any_engine: Engine, engine_name: str) -> None:
    """Every kind of ack in one batch, mixed with plain completions, a recorded result and a snooze
    over meta another client left that is not an object, and a stale ack: each job ends as its ack
    alone would end it, and the stale one changes nothing."""
    kinds = [await put(any_engine, JobState.EXECUTING) for _ in OUTCOMES]
    plain = [await put(any_engine, JobState.EXECUTING) for _ in range(3)]
    recorded, snoozed, stale = [await put(any_engine, JobState.EXECUTING) for _ in range(3)]
    await REWRITE_JSON[engine_name](any_engine, recorded, "meta", "[1, 2]")
    await REWRITE_JSON[engine_name](any_engine, snoozed, "meta", '"text"')
    untouched = await any_engine.get_job(stale)
    acks = [Ack(job_id, 1, **ack) for job_id, (ack, _) in zip(kinds, OUTCOMES, strict=True)]
    acks += [Ack(job_id, 1, JobState.COMPLETED) for job_id in plain]
    acks += [
        Ack(recorded, 1, JobState.COMPLETED, meta={"recorded": True, "return": "g2gD"}),
        Ack(snoozed, 1, JobState.SCHEDULED, schedule_in=5, snoozed=True),
        Ack(stale, 2, JobState.DISCARDED, error=ERROR),
    ]
    random.Random(38).shuffle(acks)
    assert sorted(await any_engine.ack_jobs(acks, now=LATER)) == sorted([*kinds, *plain, recorded, snoozed])
    for job_id, (_, expected) in zip(kinds, OUTCOMES, strict=True):
        assert_outcome(await job(any_engine, job_id), expected)
    for job_id in plain:
        assert_outcome(await job(any_engine, job_id), OUTCOMES[0][1])
    done = await job(any_engine, recorded)
    assert (done.state, done.meta) == (JobState.COMPLETED, {"recorded": True, "return": "g2gD"})
    later = await job(any_engine, snoozed)
    assert (later.state, later.attempt, later.meta) == (JobState.SCHEDULED, 0, {"snoozed": 1})
    assert await any_engine.get_job(stale) == untouched


@pytest.mark.parametrize("case", ["other-attempt", "released", "unknown-job", "acked-already", "cancelled"])
async def test_ack_applies_only_to_the_same_executing_attempt(any_engine: Engine, case: str) -> None:
    job_id = await put(any_engine, JobState.EXECUTING)
    attempt = 1
    if case == "other-attempt":
        attempt = 2
    elif case == "released":
        await any_engine.release_jobs([(job_id, 1)])
    elif case == "unknown-job":
        job_id = 10**9
    elif case == "acked-already":
        assert await any_engine.ack_jobs([Ack(job_id, 1, JobState.COMPLETED)], now=T0) == [job_id]
    elif case == "cancelled":
        await any_engine.cancel_jobs(JobFilter(ids=(job_id,)), now=T0)
    before = await any_engine.get_job(job_id)
    assert await any_engine.ack_jobs([Ack(job_id, attempt, JobState.DISCARDED, error=ERROR)], now=LATER) == []
    assert await any_engine.get_job(job_id) == before


async def test_ack_skips_the_stale_and_writes_the_rest_of_a_batch(any_engine: Engine) -> None:
    ids = await any_engine.insert([req() for _ in range(200)], now=T0)
    await fetch(any_engine, demand=200)
    acks = [Ack(i, 1, JobState.COMPLETED) for i in ids] + [Ack(ids[0], 2, JobState.DISCARDED)]
    assert sorted(await any_engine.ack_jobs(acks, now=T0)) == ids
    assert await any_engine.ack_jobs([], now=T0) == []


async def test_ack_meta_merges_top_level_keys(any_engine: Engine) -> None:
    job_id = await put(any_engine, JobState.EXECUTING, meta={"keep": 1, "nested": {"a": 1}, "gone": 2})
    meta = {"recorded": True, "return": "g2gD", "nested": {"b": None}, "gone": None}
    await any_engine.ack_jobs([Ack(job_id, 1, JobState.COMPLETED, meta=meta)], now=T0)
    found = await job(any_engine, job_id)
    assert found.meta == {"keep": 1, "nested": {"b": None}, "gone": None, "recorded": True, "return": "g2gD"}


async def test_errors_accumulate_over_attempts(any_engine: Engine) -> None:
    job_id = await put(any_engine, JobState.RETRYABLE, max_attempts=3)
    later = T0 + timedelta(hours=2)
    await any_engine.stage_jobs(10, now=later)
    await fetch(any_engine, now=later)
    second = {"attempt": 2, "at": later.isoformat(), "error": "again"}
    await any_engine.ack_jobs([Ack(job_id, 2, JobState.DISCARDED, error=second)], now=later)
    found = await job(any_engine, job_id)
    assert [(e["attempt"], e["error"]) for e in found.errors] == [(1, "boom"), (2, "again")]


async def test_snoozes_count_up_and_give_the_attempt_back(any_engine: Engine) -> None:
    job_id = await put(any_engine, JobState.EXECUTING)
    now = T0
    for snoozes in (1, 2, 3):
        await any_engine.ack_jobs([Ack(job_id, 1, JobState.SCHEDULED, schedule_in=5, snoozed=True)], now=now)
        found = await job(any_engine, job_id)
        assert (found.state, found.attempt, found.meta["snoozed"]) == (JobState.SCHEDULED, 0, snoozes)
        now += timedelta(seconds=10)
        await any_engine.stage_jobs(10, now=now)
        assert await fetch(any_engine, now=now) == [job_id]


# -- release -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("case", ["same-attempt", "other-attempt", "not-executing", "unknown-job"])
async def test_release_gives_back_the_same_executing_attempt_only(any_engine: Engine, case: str) -> None:
    job_id = await put(any_engine, JobState.EXECUTING, max_attempts=1)
    attempt = 2 if case == "other-attempt" else 1
    if case == "not-executing":
        await any_engine.ack_jobs([Ack(job_id, 1, JobState.COMPLETED)], now=T0)
    released = await any_engine.release_jobs([(10**9 if case == "unknown-job" else job_id, attempt)])
    found = await job(any_engine, job_id)
    if case == "same-attempt":
        assert released == [job_id]
        assert (found.state, found.attempt) == (JobState.AVAILABLE, 0)
        assert await fetch(any_engine) == [job_id]  # the attempt was not spent
    else:
        assert released == []
        assert found.attempt == 1


async def test_release_of_many_returns_the_released_ids(any_engine: Engine) -> None:
    ids = await any_engine.insert([req() for _ in range(3)], now=T0)
    await fetch(any_engine)
    assert sorted(await any_engine.release_jobs([(ids[0], 1), (ids[1], 1), (ids[2], 5)])) == ids[:2]
    assert await any_engine.release_jobs([]) == []


# -- stage -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("state", STATES, ids=str)
async def test_stage_moves_due_scheduled_and_retryable_jobs_only(any_engine: Engine, state: JobState) -> None:
    job_id = await put(any_engine, state, queue="q")
    staged = await any_engine.stage_jobs(10, now=T0 + timedelta(days=1))
    found = await job(any_engine, job_id)
    if state in (JobState.SCHEDULED, JobState.RETRYABLE):
        assert staged == {"q": 1} and found.state is JobState.AVAILABLE
    else:
        assert staged == {} and found.state is state


@pytest.mark.parametrize(
    ("offset", "due"),
    [
        (timedelta(seconds=-1), False),
        (timedelta(microseconds=-1), False),
        (timedelta(0), True),
        (timedelta(seconds=1), True),
    ],
    ids=["a-second-early", "a-microsecond-early", "on-time", "late"],
)
async def test_a_job_is_due_from_its_scheduled_at_on(
    any_engine: Engine, offset: timedelta, due: bool
) -> None:
    await any_engine.insert([req(schedule_in=60)], now=T0)
    staged = await any_engine.stage_jobs(10, now=T0 + timedelta(seconds=60) + offset)
    assert staged == ({"default": 1} if due else {})


async def test_stage_works_in_bounded_batches_counted_per_queue(any_engine: Engine) -> None:
    await any_engine.insert([req(queue="a", schedule_in=10) for _ in range(3)], now=T0)
    await any_engine.insert([req(queue="b", schedule_in=20) for _ in range(2)], now=T0)
    await any_engine.insert([req(queue="c", schedule_in=3600)], now=T0)
    assert await any_engine.stage_jobs(10, now=T0 + timedelta(seconds=5)) == {}
    assert await any_engine.stage_jobs(2, now=T0 + timedelta(seconds=30)) == {"a": 2}
    assert await any_engine.stage_jobs(0, now=T0 + timedelta(seconds=30)) == {}
    assert await any_engine.stage_jobs(10, now=T0 + timedelta(seconds=30)) == {"a": 1, "b": 2}
    assert await any_engine.stage_jobs(10, now=T0 + timedelta(seconds=30)) == {}
    states = {(j.queue, j.state) for j in await any_engine.list_jobs(JobFilter())}
    assert states == {("a", JobState.AVAILABLE), ("b", JobState.AVAILABLE), ("c", JobState.SCHEDULED)}


async def test_stage_takes_the_earliest_due_first(any_engine: Engine) -> None:
    late, early = await any_engine.insert([req(schedule_in=20), req(schedule_in=10)], now=T0)
    assert await any_engine.stage_jobs(1, now=T0 + timedelta(minutes=1)) == {"default": 1}
    assert (await job(any_engine, early)).state is JobState.AVAILABLE
    assert (await job(any_engine, late)).state is JobState.SCHEDULED


@pytest.mark.parametrize(
    "call",
    [
        lambda e: e.fetch_jobs("default", -1, node=NODE, producer=PRODUCER, now=T0),
        lambda e: e.stage_jobs(-1, now=T0),
    ],
    ids=["fetch-negative-demand", "stage-negative-limit"],
)
async def test_a_negative_bound_is_refused_and_changes_nothing(any_engine: Engine, call: Any) -> None:
    await any_engine.insert([req(), req(schedule_in=10)], now=T0)
    with pytest.raises(Exception) as caught:
        await call(any_engine)
    assert not any_engine.is_transient(caught.value)
    states = sorted(j.state for j in await any_engine.list_jobs(JobFilter()))
    assert states == sorted([JobState.AVAILABLE, JobState.SCHEDULED])


async def test_fetched_jobs_come_in_claim_order_with_utc_times(any_engine: Engine) -> None:
    ids = await any_engine.insert([req(args={"n": n}, priority=3 - n % 4) for n in range(12)])
    jobs = await any_engine.fetch_jobs("default", 12, node=NODE, producer=PRODUCER)
    assert [j.id for j in jobs] == sorted(ids, key=lambda i: (3 - (i - ids[0]) % 4, i))
    first = jobs[0]
    assert first.inserted_at.tzinfo is UTC and first.scheduled_at.tzinfo is UTC
    assert first.attempted_at is not None and first.attempted_at.tzinfo is UTC
    written = await any_engine.ack_jobs([Ack(j.id, j.attempt, JobState.COMPLETED) for j in jobs])
    assert sorted(written) == sorted(ids)
    done = await job(any_engine, ids[0])
    assert done.completed_at is not None and done.completed_at.tzinfo is UTC


async def test_two_acks_of_one_attempt_in_a_batch_apply_once(any_engine: Engine) -> None:
    job_id = await put(any_engine, JobState.EXECUTING)
    acks = [Ack(job_id, 1, JobState.COMPLETED), Ack(job_id, 1, JobState.DISCARDED)]
    assert await any_engine.ack_jobs(acks, now=T0) == [job_id]
    assert (await job(any_engine, job_id)).state in (JobState.COMPLETED, JobState.DISCARDED)
