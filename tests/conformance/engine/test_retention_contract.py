"""The retention contract: ``prune_jobs`` with rules by state, queue and worker, their precedence,
row counts per rule and for the whole table, batches, and ``count_prunable`` agreeing with what
pruning then deletes; live jobs and the steps a workflow still needs are never deleted."""

from __future__ import annotations

import random
from datetime import timedelta

import pytest

from conveyor import JobFilter, JobState, Pruned, PruneRule, Retention, Workflow
from conveyor.acks import Ack
from conveyor.engine.base import Engine
from tests.conformance.contract import FINAL, STATES, T0, WORKER, put, req, uid

#: The moment every prune below runs at; jobs end some days before it.
NOW = T0 + timedelta(days=400)
DAY = 86_400.0
OTHER = "tests.w.Other"


async def ended(engine: Engine, state: JobState, days_ago: float, **options: str) -> int:
    """A job that reached ``state`` ``days_ago`` days before NOW."""
    return await put(engine, state, now=NOW - timedelta(days=days_ago), **options)


async def remaining(engine: Engine) -> set[int]:
    return {j.id for j in await engine.list_jobs(JobFilter())}


async def prune_until_short(engine: Engine, retention: Retention, *, limit: int = 1000) -> Pruned:
    total = Pruned()
    while True:
        batch = await engine.prune_jobs(retention, limit=limit, now=NOW)
        assert batch.count <= limit
        total += batch
        if batch.count < limit:
            return total


async def prune_and_count(engine: Engine, retention: Retention, *, limit: int = 1000) -> Pruned:
    """Prune until nothing is due, after checking that ``count_prunable`` foresaw exactly that."""
    foreseen = await engine.count_prunable(retention, now=NOW)
    before = await remaining(engine)
    assert await remaining(engine) == before  # counting changed nothing
    pruned = await prune_until_short(engine, retention, limit=limit)
    assert pruned == foreseen
    assert len(before - await remaining(engine)) == pruned.count
    assert (await engine.count_prunable(retention, now=NOW)).count == 0
    return pruned


# -- rules by state, queue and worker ---------------------------------------------------------------
async def test_each_state_keeps_its_own_age(any_engine: Engine) -> None:
    """Keep discarded jobs 30 days, completed ones 1 day; cancelled ones follow the default (7)."""
    jobs = {
        (state, days): await ended(any_engine, state, days) for state in FINAL for days in (0.5, 2, 10, 40)
    }
    retention = Retention(
        max_age=7 * DAY,
        rules=(PruneRule(states="discarded", max_age="30d"), PruneRule(states=("completed",), max_age=DAY)),
    )
    pruned = await prune_and_count(any_engine, retention)
    assert pruned == Pruned(completed=3, cancelled=2, discarded=1)
    kept = {key for key, job_id in jobs.items() if job_id in await remaining(any_engine)}
    assert kept == {
        (JobState.COMPLETED, 0.5),
        (JobState.CANCELLED, 0.5),
        (JobState.CANCELLED, 2),
        (JobState.DISCARDED, 0.5),
        (JobState.DISCARDED, 2),
        (JobState.DISCARDED, 10),
    }


async def test_rules_by_queue_and_by_worker(any_engine: Engine) -> None:
    mail = [await ended(any_engine, JobState.COMPLETED, d, queue="mail") for d in (1, 3, 8)]
    other = [await ended(any_engine, JobState.COMPLETED, d, worker=OTHER) for d in (1, 3, 8)]
    plain = [await ended(any_engine, JobState.COMPLETED, d) for d in (1, 3, 8)]
    retention = Retention(
        max_age=2 * DAY,
        rules=(PruneRule(queue="mail", max_age=7 * DAY), PruneRule(worker=OTHER, max_age=DAY / 2)),
    )
    assert (await prune_and_count(any_engine, retention)).count == 1 + 3 + 2
    assert await remaining(any_engine) == {mail[0], mail[1], plain[0]}
    assert not set(other) & await remaining(any_engine)


async def test_a_rule_with_max_rows_keeps_the_newest_of_its_jobs_only(any_engine: Engine) -> None:
    """A rule that sets only a count keeps its jobs whatever their age; the default's age and
    keep_per_queue do not reach them."""
    failed = [await ended(any_engine, JobState.DISCARDED, d) for d in (90, 60, 30, 5)]
    done = [await ended(any_engine, JobState.COMPLETED, d) for d in (90, 60, 30, 5, 0)]
    retention = Retention(
        max_age=10 * DAY, keep_per_queue=2, rules=(PruneRule(states="discarded", max_rows=2),)
    )
    assert await prune_and_count(any_engine, retention) == Pruned(completed=3, discarded=2)
    assert await remaining(any_engine) == {failed[2], failed[3], done[3], done[4]}


async def test_a_rule_with_both_limits_prunes_on_either(any_engine: Engine) -> None:
    jobs = [await ended(any_engine, JobState.COMPLETED, d, queue="q") for d in (50, 40, 9, 8, 7, 1)]
    retention = Retention(max_age=None, rules=(PruneRule(queue="q", max_age=45 * DAY, max_rows=3),))
    assert (await prune_and_count(any_engine, retention)).count == 3
    # 50 days: too old; of the five young enough, the newest three stay.
    assert await remaining(any_engine) == set(jobs[3:])


async def test_a_rule_without_limits_keeps_its_jobs_for_ever(any_engine: Engine) -> None:
    kept = [await ended(any_engine, JobState.DISCARDED, d) for d in (300, 100)]
    gone = await ended(any_engine, JobState.COMPLETED, 300)
    retention = Retention(max_age=0, rules=(PruneRule(states="discarded"),))
    assert await prune_and_count(any_engine, retention) == Pruned(completed=1)
    assert await remaining(any_engine) == set(kept)
    assert gone not in await remaining(any_engine)


# -- precedence ----------------------------------------------------------------------------------------
async def test_the_most_specific_rule_governs_a_job(any_engine: Engine) -> None:
    """Worker beats queue, queue beats state, state beats the default: each job below is 5 days old
    and only the rule that governs it decides whether it stays."""
    by_worker = await ended(any_engine, JobState.DISCARDED, 5, queue="mail", worker=OTHER)
    by_queue = await ended(any_engine, JobState.DISCARDED, 5, queue="mail")
    by_state = await ended(any_engine, JobState.DISCARDED, 5)
    by_default = await ended(any_engine, JobState.COMPLETED, 5)
    keep, drop = 30 * DAY, DAY
    rules = (
        PruneRule(states="discarded", max_age=drop),  # listed first, least specific
        PruneRule(queue="mail", max_age=keep),
        PruneRule(worker=OTHER, max_age=drop),
    )
    retention = Retention(max_age=keep, rules=rules)
    assert [r.worker or r.queue or r.states[0] for r in retention.ordered] == [OTHER, "mail", "discarded"]
    assert retention.governing("mail", OTHER, JobState.DISCARDED) is rules[2]
    await prune_and_count(any_engine, retention)
    assert await remaining(any_engine) == {by_queue, by_default}
    assert not {by_worker, by_state} & await remaining(any_engine)


async def test_equally_specific_rules_go_by_order(any_engine: Engine) -> None:
    job_id = await ended(any_engine, JobState.CANCELLED, 5)
    first = PruneRule(states=("cancelled", "discarded"), max_age=30 * DAY)
    second = PruneRule(states="cancelled", max_age=DAY)
    await prune_and_count(any_engine, Retention(rules=(first, second)))
    assert await remaining(any_engine) == {job_id}
    await prune_and_count(any_engine, Retention(rules=(second, first)))
    assert await remaining(any_engine) == set()


# -- the table's maximum -------------------------------------------------------------------------------
async def test_max_rows_trims_the_oldest_final_jobs_whatever_their_age(any_engine: Engine) -> None:
    final = [await ended(any_engine, FINAL[i % 3], 0.1, queue=f"q{i % 2}") for i in range(9)]
    live = [await put(any_engine, state, now=NOW) for state in STATES if state not in FINAL]
    retention = Retention(max_age=30 * DAY, rules=(PruneRule(queue="q0"),), max_rows=4)
    assert (await prune_and_count(any_engine, retention, limit=2)).count == 5
    assert await remaining(any_engine) == set(final[-4:]) | set(live)


async def test_max_rows_counts_what_the_rules_left(any_engine: Engine) -> None:
    young = [await ended(any_engine, JobState.COMPLETED, 0.5) for _ in range(3)]
    old = [await ended(any_engine, JobState.COMPLETED, 3) for _ in range(3)]  # newer ids, older ends
    assert (await prune_and_count(any_engine, Retention(max_age=DAY, max_rows=2))).count == 4
    assert await remaining(any_engine) == set(young[1:])
    assert not set(old) & await remaining(any_engine)


# -- never live jobs, never a step its workflow still needs ----------------------------------------------
async def test_live_jobs_are_never_pruned(any_engine: Engine) -> None:
    live = {}
    for state in STATES:
        if state not in FINAL:
            live[state] = await put(any_engine, state, now=T0, producer=uid(len(live) + 1))
    await ended(any_engine, JobState.COMPLETED, 300)
    everything = Retention(
        max_age=0,
        keep_per_queue=1,
        rules=(PruneRule(worker=WORKER, max_age=0, max_rows=0), PruneRule(queue="default", max_rows=0)),
        max_rows=1,
    )
    assert await prune_and_count(any_engine, everything) == Pruned(completed=1)
    assert await remaining(any_engine) == set(live.values())
    states = {j.state for j in await any_engine.list_jobs(JobFilter())}
    assert states == set(STATES) - set(FINAL)


async def test_steps_a_waiting_workflow_needs_stay_under_every_limit(any_engine: Engine) -> None:
    flow = Workflow().add("a", req()).add("x", req(queue="later")).add("b", req(), deps=["a", "x"])
    requests, hold = flow.requests()
    ids = [int(i) for i in await any_engine.insert(requests, now=T0, hold=hold)]
    claimed = await any_engine.fetch_jobs("default", 10, node="n", producer=uid(1), now=T0)
    assert [j.id for j in claimed] == [ids[0]]
    await any_engine.ack_jobs([Ack(ids[0], 1, JobState.COMPLETED)], now=T0)  # b still waits for x
    plain = await ended(any_engine, JobState.COMPLETED, 300)
    everything = Retention(max_age=0, rules=(PruneRule(queue="default", max_rows=0),), max_rows=1)
    assert await prune_and_count(any_engine, everything) == Pruned(completed=1)
    assert await remaining(any_engine) == set(ids)
    assert plain not in await remaining(any_engine)


# -- batches ------------------------------------------------------------------------------------------
async def test_a_call_deletes_at_most_limit_across_all_its_statements(any_engine: Engine) -> None:
    for days in (50, 40, 30):
        for queue in ("a", "b"):
            await ended(any_engine, JobState.COMPLETED, days, queue=queue)
            await ended(any_engine, JobState.DISCARDED, days, queue=queue)
    retention = Retention(
        max_age=35 * DAY,
        keep_per_queue=1,
        rules=(PruneRule(queue="a", max_age=45 * DAY), PruneRule(states="discarded", max_rows=1)),
        max_rows=2,
    )
    foreseen = await any_engine.count_prunable(retention, now=NOW)
    counts = []
    while (batch := await any_engine.prune_jobs(retention, limit=2, now=NOW)).count:
        counts.append(batch.count)
    assert counts[:-1] == [2] * (len(counts) - 1) and sum(counts) == foreseen.count == 10
    assert len(await remaining(any_engine)) == 2


@pytest.mark.parametrize("seed", range(4))
async def test_count_prunable_foresees_what_pruning_deletes(any_engine: Engine, seed: int) -> None:
    """Random jobs and random policies: the count is what pruning then deletes, by state."""
    rng = random.Random(seed)
    queues, workers = ("a", "b", "c"), (WORKER, OTHER)
    for _ in range(30):
        state = rng.choice(FINAL)
        await ended(
            any_engine, state, rng.uniform(0, 20), queue=rng.choice(queues), worker=rng.choice(workers)
        )
    await put(any_engine, JobState.AVAILABLE, queue="a")

    def rule() -> PruneRule:
        return PruneRule(
            queue=rng.choice((None, *queues)),
            worker=rng.choice((None, *workers)),
            states=tuple(rng.sample(FINAL, rng.randint(1, 3))),
            max_age=rng.choice((None, rng.uniform(0, 20) * DAY)),
            max_rows=rng.choice((None, rng.randint(0, 6))),
        )

    rules: dict[tuple[object, ...], PruneRule] = {}
    for candidate in (rule() for _ in range(rng.randint(0, 4))):
        rules.setdefault((candidate.queue, candidate.worker, candidate.states), candidate)
    retention = Retention(
        max_age=rng.choice((None, rng.uniform(0, 20) * DAY)),
        keep_per_queue=rng.choice((None, rng.randint(1, 5))),
        rules=tuple(rules.values()),
        max_rows=rng.choice((None, rng.randint(1, 20))),
    )
    await prune_and_count(any_engine, retention, limit=rng.randint(1, 7))
    assert {j.state for j in await any_engine.list_jobs(JobFilter(queues=("a",)))} >= {JobState.AVAILABLE}


async def test_the_defaults_alone_prune_as_before(any_engine: Engine) -> None:
    young = await ended(any_engine, JobState.COMPLETED, 0.5)
    await ended(any_engine, JobState.COMPLETED, 2)
    assert await prune_and_count(any_engine, Retention()) == Pruned(completed=1)
    assert await remaining(any_engine) == {young}
    assert (
        await any_engine.prune_jobs(Retention(max_age=None), limit=10, now=NOW + timedelta(days=9))
    ).count == 0
