"""The unique-jobs contract (``conveyor.unique``): a unique request is inserted once, enforced by the
database, on every engine: one at a time, in bulk (the COPY path too), inside a caller's
transaction, and from many processes at the same moment."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from conveyor import ExistingJobId, JobFilter, JobRequest, JobState
from conveyor.acks import Ack
from conveyor.engine.base import Engine
from conveyor.errors import ValidationError
from tests.conformance import unique_procs
from tests.conformance.conftest import (
    ADDRESSES,
    CALLER_CONNECTIONS,
    engines_on_one_database,
)
from tests.conformance.contract import T0, WORKER, fetch, job
from tests.helpers import racing_processes

ONCE: dict[str, Any] = {"period": None}


def ureq(unique: Any = True, **options: Any) -> JobRequest:
    args = options.pop("args", {"n": 1})
    return JobRequest(WORKER, args=args, unique=unique, **options)


async def insert(engine: Engine, *requests: JobRequest, at: Any = T0, **options: Any) -> list[int]:
    return await engine.insert(list(requests), now=at, **options)


async def count(engine: Engine) -> int:
    return len(await engine.list_jobs(JobFilter(limit=10_000)))


# -- one at a time -------------------------------------------------------------------------------
async def test_the_same_request_twice_is_one_job(any_engine: Engine) -> None:
    (first,) = await insert(any_engine, ureq())
    (second,) = await insert(any_engine, ureq())
    assert type(second) is ExistingJobId and second == first and second.conflict
    assert not getattr(first, "conflict", False)
    assert await count(any_engine) == 1
    stored = await job(any_engine, first)
    assert stored.meta["uniq_key"].startswith("cv1:")
    assert stored.meta["uniq_states"] == [
        "available",
        "scheduled",
        "suspended",
        "executing",
        "retryable",
        "completed",
    ]


async def test_requests_that_differ_in_a_chosen_field_are_separate_jobs(any_engine: Engine) -> None:
    ids = await insert(any_engine, ureq(args={"n": 1}), ureq(args={"n": 2}), ureq(queue="other"))
    assert len(set(ids)) == 3 and not any(getattr(i, "conflict", False) for i in ids)
    # A plain request is never a conflict, nor blocked by a unique one.
    (plain,) = await insert(any_engine, JobRequest(WORKER, args={"n": 1}))
    assert plain not in ids


async def test_fields_and_keys_choose_what_makes_jobs_the_same(any_engine: Engine) -> None:
    by_worker = {"fields": ["worker"], "period": None}
    a, b = await insert(
        any_engine, ureq(by_worker, args={"n": 1}), ureq(by_worker, args={"n": 2}, queue="q2")
    )
    assert b == a and b.conflict  # type: ignore[attr-defined]
    by_key = {"keys": ["account"], "period": None}
    c, d, e = await insert(
        any_engine,
        ureq(by_key, args={"account": 7, "page": 1}),
        ureq(by_key, args={"account": 7, "page": 2}),
        ureq(by_key, args={"account": 8, "page": 1}),
    )
    assert d == c and d.conflict and e != c  # type: ignore[attr-defined]
    by_meta = {"fields": ["worker", "meta"], "keys": ["tenant"], "period": None}
    f, g = await insert(
        any_engine,
        ureq(by_meta, meta={"tenant": "x", "trace": 1}),
        ureq(by_meta, meta={"tenant": "x", "trace": 2}),
    )
    assert g == f and g.conflict  # type: ignore[attr-defined]


async def test_a_period_counts_in_slices_of_time(any_engine: Engine) -> None:
    minute = {"period": 60}
    (first,) = await insert(any_engine, ureq(minute), at=T0)  # T0 starts a minute
    (again,) = await insert(any_engine, ureq(minute), at=T0 + timedelta(seconds=59))
    assert again == first and again.conflict  # type: ignore[attr-defined]
    (later,) = await insert(any_engine, ureq(minute), at=T0 + timedelta(seconds=60))
    assert later != first and not getattr(later, "conflict", False)
    (timedelta_period,) = await insert(any_engine, ureq({"period": timedelta(hours=1)}), at=T0)
    (other,) = await insert(any_engine, ureq({"period": 3600}), at=T0 + timedelta(minutes=59))
    assert other == timedelta_period


@pytest.mark.parametrize(
    ("states", "final", "blocks"),
    [
        ("successful", JobState.COMPLETED, True),
        ("successful", JobState.CANCELLED, False),
        ("successful", JobState.DISCARDED, False),
        ("incomplete", JobState.COMPLETED, False),
        ("all", JobState.DISCARDED, True),
        ("scheduled", JobState.AVAILABLE, False),
    ],
)
async def test_a_job_blocks_its_twin_only_in_its_states(
    any_engine: Engine, states: str, final: JobState, blocks: bool
) -> None:
    option = {"period": None, "states": states}
    (first,) = await insert(any_engine, ureq(option, scheduled_at=T0 - timedelta(days=1)))
    if final is not JobState.AVAILABLE:
        assert await fetch(any_engine) == [first]
        await any_engine.ack_jobs([Ack(first, 1, final)], now=T0)
    (second,) = await insert(any_engine, ureq(option))
    assert (second == first) is blocks
    assert getattr(second, "conflict", False) is blocks


async def test_scheduled_states_debounce(any_engine: Engine) -> None:
    debounce = {"period": None, "states": "scheduled"}
    (waiting,) = await insert(any_engine, ureq(debounce, schedule_in=300))
    (again,) = await insert(any_engine, ureq(debounce, schedule_in=300))
    assert again == waiting
    assert (await job(any_engine, waiting)).state is JobState.SCHEDULED


async def test_a_debounced_job_blocks_a_twin_due_now(any_engine: Engine) -> None:
    """The states name which stored jobs count as twins, whatever state the new request would
    start in itself: a request due now meets the scheduled twin of a debounce, alone or in a batch."""
    debounce = {"period": None, "states": "scheduled"}
    (waiting,) = await insert(any_engine, ureq(debounce, schedule_in=300))
    (now,) = await insert(any_engine, ureq(debounce))
    assert type(now) is ExistingJobId and now == waiting
    batch = await insert(any_engine, ureq(debounce), ureq(ONCE, args={"n": 2}))
    assert type(batch[0]) is ExistingJobId and batch[0] == waiting
    assert await count(any_engine) == 2


async def test_a_deleted_or_pruned_job_frees_its_key(any_engine: Engine) -> None:
    (first,) = await insert(any_engine, ureq(ONCE))
    assert await any_engine.cancel_jobs(JobFilter(ids=(first,)), now=T0) == [first]
    assert await any_engine.delete_jobs(JobFilter(ids=(first,))) == [first]
    (second,) = await insert(any_engine, ureq(ONCE | {"states": "all"}))
    assert second != first


# -- in bulk -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("size", [10, 600], ids=["statement", "copy-sized"])
async def test_duplicates_collapse_inside_a_batch_and_against_stored_jobs(
    any_engine: Engine, size: int
) -> None:
    (stored,) = await insert(any_engine, ureq(ONCE, args={"n": 0}))
    batch = []
    for i in range(size):
        if i % 3 == 0:
            batch.append(JobRequest(WORKER, args={"plain": i}))
        else:
            batch.append(ureq(ONCE, args={"n": i % 7}))  # 7 keys, n=0 stored already
    ids = await any_engine.insert(batch, now=T0)
    assert len(ids) == size
    first_of: dict[int, int] = {}
    for request, job_id in zip(batch, ids, strict=True):
        if request.unique is None:
            assert not getattr(job_id, "conflict", False)
            continue
        n = request.args["n"]
        if n == 0:
            assert job_id == stored and job_id.conflict  # type: ignore[attr-defined]
        elif n in first_of:
            assert job_id == first_of[n] and job_id.conflict  # type: ignore[attr-defined]
        else:
            first_of[n] = job_id
            assert not getattr(job_id, "conflict", False)
    plain = sum(1 for r in batch if r.unique is None)
    assert await count(any_engine) == 1 + len(first_of) + plain
    new_ids = [i for i in ids if not getattr(i, "conflict", False)]
    assert new_ids == sorted(new_ids)  # new jobs take ids in input order


async def test_a_unique_request_after_many_plain_ones(any_engine: Engine) -> None:
    """On PostgreSQL a batch of 200+ goes by COPY, which stops before a unique request."""
    (stored,) = await insert(any_engine, ureq(ONCE))
    batch = [JobRequest(WORKER, args={"plain": i}) for i in range(300)]
    batch += [ureq(ONCE), ureq(ONCE, args={"n": 2})]
    batch += [JobRequest(WORKER, args={"plain": i}) for i in range(300, 400)]
    ids = await any_engine.insert(batch, now=T0)
    assert ids[300] == stored and ids[300].conflict  # type: ignore[attr-defined]
    new_ids = [i for i in ids if not getattr(i, "conflict", False)]
    assert len(new_ids) == 401 and new_ids == sorted(new_ids)
    assert await count(any_engine) == 402


async def test_a_unique_insert_joins_the_callers_transaction(any_engine: Engine, caller_conn: Any) -> None:
    (rolled_back,) = await any_engine.insert([ureq(ONCE)], conn=caller_conn, now=T0)
    await caller_conn.rollback()
    (kept,) = await any_engine.insert([ureq(ONCE)], conn=caller_conn, now=T0)
    assert not getattr(kept, "conflict", False)
    await caller_conn.commit()
    (again,) = await insert(any_engine, ureq(ONCE))
    assert again == kept and again.conflict  # type: ignore[attr-defined]
    assert await any_engine.get_job(rolled_back) is None or rolled_back == kept


# -- state changes never break the index ---------------------------------------------------------
async def test_retrying_a_job_whose_twin_is_live_makes_it_plain(any_engine: Engine) -> None:
    (old,) = await insert(any_engine, ureq(ONCE))
    await any_engine.cancel_jobs(JobFilter(ids=(old,)), now=T0)
    (twin,) = await insert(any_engine, ureq(ONCE))
    assert twin != old
    assert await any_engine.retry_jobs(JobFilter(ids=(old,)), now=T0) == [old]
    retried = await job(any_engine, old)
    assert retried.state is JobState.AVAILABLE and "uniq_key" not in retried.meta
    (third,) = await insert(any_engine, ureq(ONCE))
    assert third == twin  # the twin still holds the key


async def test_retrying_a_job_without_a_twin_keeps_it_unique(any_engine: Engine) -> None:
    (old,) = await insert(any_engine, ureq(ONCE))
    await any_engine.cancel_jobs(JobFilter(ids=(old,)), now=T0)
    assert await any_engine.retry_jobs(JobFilter(ids=(old,)), now=T0) == [old]
    (again,) = await insert(any_engine, ureq(ONCE))
    assert again == old and again.conflict  # type: ignore[attr-defined]


async def test_retrying_two_twins_at_once_never_fails(any_engine: Engine) -> None:
    (a,) = await insert(any_engine, ureq(ONCE))
    await any_engine.cancel_jobs(JobFilter(ids=(a,)), now=T0)
    (b,) = await insert(any_engine, ureq(ONCE))
    await any_engine.cancel_jobs(JobFilter(ids=(b,)), now=T0)
    assert await any_engine.retry_jobs(JobFilter(ids=(a, b)), now=T0) == [a, b]


@pytest.mark.parametrize("commit", [True, False], ids=["twin-committed", "twin-rolled-back"])
async def test_a_retry_meeting_a_twin_in_an_open_transaction_gives_way(
    engine_name: str, any_engine: Engine, commit: bool
) -> None:
    """The retry waits for the transaction inserting the twin (as another insert of it would), then
    gives way if it committed, or keeps the key if it rolled back; never an error."""
    (old,) = await insert(any_engine, ureq(ONCE))
    await any_engine.cancel_jobs(JobFilter(ids=(old,)), now=T0)
    caller = await CALLER_CONNECTIONS[engine_name](any_engine)
    try:
        (twin,) = await any_engine.insert([ureq(ONCE)], conn=caller, now=T0)
        retry = asyncio.create_task(any_engine.retry_jobs(JobFilter(ids=(old,)), now=T0))
        await asyncio.sleep(0.3)  # the retry meets the twin's uncommitted key meanwhile
        assert not retry.done()
        await (caller.commit() if commit else caller.rollback())
        assert await asyncio.wait_for(retry, 30) == [old]
    finally:
        await caller.close()
    retried = await job(any_engine, old)
    assert retried.state is JobState.AVAILABLE
    assert ("uniq_key" in retried.meta) is not commit
    (again,) = await insert(any_engine, ureq(ONCE))
    assert again == (twin if commit else old) and again.conflict  # type: ignore[attr-defined]


async def test_retries_racing_inserts_of_their_twins_never_fail(any_engine: Engine) -> None:
    """Retries of unique jobs and inserts of their twins at the same moment: every call succeeds,
    and one job at most holds each key."""
    keys = 20
    old = await insert(any_engine, *(ureq(ONCE, args={"n": n}) for n in range(keys)))
    await any_engine.cancel_jobs(JobFilter(ids=tuple(old)), now=T0)
    calls = [any_engine.retry_jobs(JobFilter(ids=(job_id,)), now=T0) for job_id in old]
    calls += [any_engine.insert([ureq(ONCE, args={"n": n})], now=T0) for n in range(keys)]
    order = list(range(len(calls)))
    random.Random(7).shuffle(order)
    results = await asyncio.gather(*(calls[i] for i in order), return_exceptions=True)
    assert not [r for r in results if isinstance(r, BaseException)], results
    jobs = await any_engine.list_jobs(JobFilter(limit=1000))
    holding = [j.meta["uniq_key"] for j in jobs if "uniq_key" in j.meta]
    assert keys <= len(jobs) <= 2 * keys and len(holding) == len(set(holding)) == keys


async def test_snoozing_a_debounced_job_while_a_twin_waits(any_engine: Engine) -> None:
    debounce = {"period": None, "states": "scheduled"}
    (running,) = await insert(any_engine, ureq(debounce, scheduled_at=T0 - timedelta(seconds=1)))
    assert await fetch(any_engine) == [running]  # executing: not in its unique states
    (twin,) = await insert(any_engine, ureq(debounce, schedule_in=60))
    assert twin != running
    snooze = Ack(running, 1, JobState.SCHEDULED, schedule_in=30, snoozed=True)
    assert await any_engine.ack_jobs([snooze], now=T0) == [running]
    snoozed = await job(any_engine, running)
    assert snoozed.state is JobState.SCHEDULED and "uniq_key" not in snoozed.meta


# -- the race ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("bulk", [False, True], ids=["one-by-one", "bulk"])
async def test_processes_inserting_the_same_jobs_at_once_make_each_once(
    engine_name: str, any_engine: Engine, bulk: bool
) -> None:
    url, prefix = ADDRESSES[engine_name](any_engine)
    context = racing_processes()
    start = context.Event()
    results: Any = context.Queue()
    # One by one, each process makes a round trip per job: 250 keys, each raced by all eight at
    # once, are 1,750 conflicts; a batch goes past the insert's chunks with 1,000.
    jobs, processes = (1000 if bulk else 250), 8
    workers = [
        context.Process(target=unique_procs.insert_all, args=(url, prefix, jobs, bulk, start, results))
        for _ in range(processes)
    ]
    for worker in workers:
        worker.start()
    start.set()
    created = [results.get(timeout=120) for _ in workers]
    for worker in workers:
        worker.join(30)
    assert all(isinstance(c, int) for c in created), created
    assert sum(created) == jobs  # every job made by exactly one process
    assert await count(any_engine) == jobs


# -- concurrent batches in different orders ---------------------------------------------------------
@pytest.fixture
async def writers(engine_name: str, tmp_path: Path) -> AsyncIterator[list[Engine]]:
    """Six open engines on one installed database: six writers with pools of their own."""
    async with engines_on_one_database(engine_name, tmp_path, 6) as engines:
        yield engines


def shuffled(round_: int, size: int, *, seed: int, plain: Sequence[JobRequest] = ()) -> list[JobRequest]:
    """Round ``round_``'s unique requests (each set of keys used by two rounds: new, then stored),
    with ``plain`` ones among them, in an order of the writer's own."""
    first = round_ // 2 * size
    batch = [ureq(ONCE, args={"n": n}) for n in range(first, first + size)] + list(plain)
    random.Random(round_ * 100 + seed).shuffle(batch)
    return batch


@pytest.mark.parametrize("size", [20, 700], ids=["statement", "copy-sized"])
async def test_concurrent_batches_in_any_order_make_conflicts_never_deadlocks(
    writers: list[Engine], size: int
) -> None:
    """Writers insert the same unique jobs in batches shuffled differently, at once: new keys, then
    keys stored already; every batch succeeds and each key is one row. (Keys are claimed in one
    order, whatever the batch's; plain requests in between make a COPY-sized batch several
    statements.)"""
    rounds = 4
    for round_ in range(rounds):
        plain = [JobRequest(WORKER, args={"plain": n}) for n in range(size // 10)]
        batches = [shuffled(round_, size, seed=w, plain=plain) for w in range(len(writers))]

        async def write(engine: Engine, batch: list[JobRequest]) -> list[int]:
            ids = await engine.insert(batch, now=T0)
            return [i for r, i in zip(batch, ids, strict=True) if r.unique is not None]

        results = await asyncio.gather(
            *(write(engine, batch) for engine, batch in zip(writers, batches, strict=True)),
            return_exceptions=True,
        )
        errors = [r for r in results if isinstance(r, BaseException)]
        assert not errors, errors
        made = [i for ids in results for i in ids if not getattr(i, "conflict", False)]  # type: ignore[union-attr]
        assert len(made) == (size if round_ % 2 == 0 else 0)
    stored = await writers[0].list_jobs(JobFilter(limit=10_000))
    unique = [j for j in stored if "uniq_key" in j.meta]
    assert len(unique) == len({j.meta["uniq_key"] for j in unique}) == rounds // 2 * size


async def test_concurrent_caller_transactions_in_any_order_make_conflicts_never_deadlocks(
    engine_name: str, writers: list[Engine]
) -> None:
    """The same inside callers' transactions, each holding its keys until it commits: the batches
    wait for one another instead of deadlocking."""
    engine = writers[0]
    size, rounds = 20, 4
    callers = [await CALLER_CONNECTIONS[engine_name](engine) for _ in range(6)]
    try:
        for round_ in range(rounds):
            batches = [shuffled(round_, size, seed=w) for w in range(len(callers))]

            async def write(conn: Any, batch: list[JobRequest]) -> list[int]:
                ids = await engine.insert(batch, now=T0, conn=conn)
                await conn.commit()
                return list(ids)

            results = await asyncio.gather(
                *(write(conn, batch) for conn, batch in zip(callers, batches, strict=True)),
                return_exceptions=True,
            )
            errors = [r for r in results if isinstance(r, BaseException)]
            assert not errors, errors
            made = [i for ids in results for i in ids if not getattr(i, "conflict", False)]  # type: ignore[union-attr]
            assert len(made) == (size if round_ % 2 == 0 else 0)
    finally:
        for conn in callers:
            await conn.close()
    assert await count(engine) == rounds // 2 * size


# -- bad input -------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("option", "named"),
    [
        ({"period": -1}, "unique.period"),
        ({"period": float("nan")}, "unique.period"),
        ({"fields": ["colour"]}, "unique.fields"),
        ({"fields": []}, "unique.fields"),
        ({"keys": ["id"], "fields": ["worker"]}, "unique.keys"),
        ({"states": "finished"}, "unique.states"),
        ({"states": ["available", "done"]}, "unique.states"),
        ({"states": ["available"]}, "unique.states"),
        ({"states": ["available", "executing"]}, "unique.states"),
        ({"perod": 10}, "unique.perod"),
        ("yes", "unique"),
    ],
)
def test_bad_unique_options_are_refused_naming_the_option(option: Any, named: str) -> None:
    with pytest.raises(ValidationError, match=rf"invalid {named}="):
        JobRequest(WORKER, unique=option)


@pytest.mark.parametrize("key", ["uniq_key", "uniq_states"])
def test_meta_cannot_fake_the_unique_markers(key: str) -> None:
    with pytest.raises(ValidationError, match=rf"meta\['{key}'\]"):
        JobRequest(WORKER, meta={key: "x"})


# -- replace ---------------------------------------------------------------------------------------------
REPLACING: dict[str, Any] = {
    "period": None,
    "fields": ["worker"],
    "replace": {
        "available": ["args", "meta", "priority", "tags", "max_attempts", "queue"],
        "scheduled": ["scheduled_at"],
    },
}


async def test_a_conflict_replaces_the_chosen_fields_for_the_stored_jobs_state(any_engine: Engine) -> None:
    (stored,) = await insert(any_engine, ureq(REPLACING, args={"v": 1}, meta={"m": 1}, tags=["a"]))
    newer = ureq(REPLACING, args={"v": 2}, meta={"m": 2}, tags=["b"], priority=3, max_attempts=7, queue="q2")
    (again,) = await insert(any_engine, newer)
    assert again == stored and again.conflict  # type: ignore[attr-defined]
    job_now = await job(any_engine, stored)
    assert job_now.args == {"v": 2} and job_now.priority == 3 and job_now.max_attempts == 7
    assert list(job_now.tags) == ["b"] and job_now.queue == "q2"
    assert job_now.meta["m"] == 2 and job_now.meta["uniq_key"].startswith("cv1:")  # markers kept
    (third,) = await insert(any_engine, ureq(REPLACING, args={"v": 3}))
    assert third == stored  # still unique after the replace


async def test_a_conflict_in_a_large_batch_replaces_once(any_engine: Engine) -> None:
    """A COPY-sized batch on PostgreSQL holds its unique requests back until its end: the first one
    with the key still replaces the stored job's fields, and a later twin only gets its id."""
    (stored,) = await insert(any_engine, ureq(REPLACING, args={"v": 1}))
    batch = [JobRequest(WORKER, args={"plain": i}) for i in range(300)]
    batch.insert(150, ureq(REPLACING, args={"v": 2}, priority=2))
    batch.insert(250, ureq(REPLACING, args={"v": 3}, priority=3))
    ids = await any_engine.insert(batch, now=T0)
    assert ids[150] == ids[250] == stored and ids[150].conflict and ids[250].conflict
    job_now = await job(any_engine, stored)
    assert job_now.args == {"v": 2} and job_now.priority == 2
    new_ids = [i for i in ids if not i.conflict]
    assert len(new_ids) == 300 and new_ids == sorted(new_ids)


async def test_a_scheduled_job_takes_the_new_time(any_engine: Engine) -> None:
    (stored,) = await insert(any_engine, ureq(REPLACING, schedule_in=3600))
    (again,) = await insert(any_engine, ureq(REPLACING, args={"v": 9}, schedule_in=60))
    assert again == stored
    job_now = await job(any_engine, stored)
    assert job_now.scheduled_at == T0 + timedelta(seconds=60)
    assert job_now.args == {"n": 1}  # args are replaced only while available


async def test_a_job_in_a_state_not_named_is_left_alone(any_engine: Engine) -> None:
    (stored,) = await insert(any_engine, ureq(REPLACING, scheduled_at=T0 - timedelta(seconds=1)))
    assert await fetch(any_engine) == [stored]  # executing: replace names no fields for it
    (again,) = await insert(any_engine, ureq(REPLACING, args={"v": 5}))
    assert again == stored
    assert (await job(any_engine, stored)).args == {"n": 1}


async def test_replacing_the_time_of_an_available_job_schedules_it(any_engine: Engine) -> None:
    option = REPLACING | {"replace": {"available": ["scheduled_at"]}}
    (stored,) = await insert(any_engine, ureq(option))
    (again,) = await insert(any_engine, ureq(option, schedule_in=600))
    assert again == stored
    job_now = await job(any_engine, stored)
    assert job_now.state is JobState.SCHEDULED and job_now.scheduled_at == T0 + timedelta(seconds=600)


@pytest.mark.parametrize(
    "replace", [{"done": ["args"]}, {"available": ["state"]}, {"available": "args"}, ["args"]]
)
def test_bad_replace_options_are_refused(replace: Any) -> None:
    with pytest.raises(ValidationError, match=r"invalid unique\.replace="):
        JobRequest(WORKER, unique={"replace": replace})


BOOM = {"attempt": 1, "at": "2024-01-01T00:00:00+00:00", "error": "boom"}
LOWERING: dict[str, Any] = {
    "period": None,
    "fields": ["worker"],
    "replace": {state: ["max_attempts"] for state in ("available", "retryable", "executing")},
}


@pytest.mark.parametrize("state", [JobState.AVAILABLE, JobState.RETRYABLE])
async def test_replacing_max_attempts_below_the_attempts_made_discards_a_waiting_job(
    any_engine: Engine, state: JobState
) -> None:
    """A waiting job whose replaced ``max_attempts`` leaves it no attempt is never claimable again:
    it is discarded at once, with the reason as its last error, rather than left waiting forever."""
    (stored,) = await insert(any_engine, ureq(LOWERING, max_attempts=3))
    assert await fetch(any_engine) == [stored]
    failed = Ack(stored, 1, JobState.RETRYABLE, schedule_in=0, error=BOOM)
    assert await any_engine.ack_jobs([failed], now=T0) == [stored]
    if state is JobState.AVAILABLE:
        await any_engine.stage_jobs(10, now=T0 + timedelta(seconds=1))
    assert (await job(any_engine, stored)).state is state
    (again,) = await insert(any_engine, ureq(LOWERING, max_attempts=1))
    assert again == stored
    ended = await job(any_engine, stored)
    assert ended.state is JobState.DISCARDED and ended.discarded_at is not None
    assert ended.max_attempts == 1 and ended.attempt == 1
    assert len(ended.errors) == 2 and ended.errors[-1]["attempt"] == 1
    assert "max_attempts" in ended.errors[-1]["error"] and "discarded" in ended.errors[-1]["error"]
    assert await any_engine.waiting_queues(["default"]) == set()


async def test_replacing_max_attempts_of_a_running_job_leaves_it_its_next_attempt(any_engine: Engine) -> None:
    """A running job keeps at least the attempt after the current one: its run was planned with the
    old figure, and a retry it asks for must stay claimable."""
    (stored,) = await insert(any_engine, ureq(LOWERING, max_attempts=5))
    assert await fetch(any_engine) == [stored]
    (again,) = await insert(any_engine, ureq(LOWERING, max_attempts=1))
    assert again == stored
    running = await job(any_engine, stored)
    assert running.state is JobState.EXECUTING and running.max_attempts == 2
    retry = Ack(stored, 1, JobState.RETRYABLE, schedule_in=0, error=BOOM)
    assert await any_engine.ack_jobs([retry], now=T0) == [stored]
    await any_engine.stage_jobs(10, now=T0 + timedelta(seconds=1))
    assert await fetch(any_engine, now=T0 + timedelta(seconds=1)) == [stored]


async def test_replacing_max_attempts_above_the_attempts_made_keeps_the_job_waiting(
    any_engine: Engine,
) -> None:
    (stored,) = await insert(any_engine, ureq(LOWERING, max_attempts=5))
    assert await fetch(any_engine) == [stored]
    failed = Ack(stored, 1, JobState.RETRYABLE, schedule_in=60, error=BOOM)
    assert await any_engine.ack_jobs([failed], now=T0) == [stored]
    await insert(any_engine, ureq(LOWERING, max_attempts=2))
    kept = await job(any_engine, stored)
    assert kept.state is JobState.RETRYABLE and kept.max_attempts == 2
