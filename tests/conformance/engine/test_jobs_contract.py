"""The jobs contract: insert, get, list and its filters, cancel, retry, delete."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from conveyor import JobFilter, JobRequest, JobState, ValidationError
from conveyor.acks import Ack
from conveyor.engine.base import Engine
from conveyor.retention import Retention
from tests.conformance.contract import FINAL, STATES, T0, fetch, job, put, req


# -- insert ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("size", [0, 1, 7, 5_500])
async def test_insert_returns_one_increasing_id_per_request(any_engine: Engine, size: int) -> None:
    ids = await any_engine.insert((req(args={"i": i}) for i in range(size)), now=T0)
    assert len(ids) == size and ids == sorted(set(ids))
    if size:
        assert (await job(any_engine, ids[-1])).args == {"i": size - 1}


async def test_insert_applies_the_defaults(any_engine: Engine) -> None:
    (job_id,) = await any_engine.insert([JobRequest("tests.w.Plain")], now=T0)
    found = await job(any_engine, job_id)
    assert (found.queue, found.priority, found.max_attempts, found.attempt) == ("default", 0, 20, 0)
    assert (found.args, found.meta, found.tags, found.errors, found.attempted_by) == ({}, {}, (), (), ())
    assert (found.attempted_at, found.completed_at, found.cancelled_at, found.discarded_at) == (None,) * 4
    assert found.unreadable is None


@pytest.mark.parametrize(
    "args",
    [
        {},
        {"text": "é ü 中文 🚀"},
        {"quotes": "\"',;\\\t\n"},
        {"nested": {"a": [1, {"b": None}], "c": True}},
        {"big": 2**53, "negative": -(2**31), "float": 1.5},
        {"list": list(range(50))},
        {"empty": {"list": [], "map": {}, "text": ""}},
        {"long": "x" * 100_000},
    ],
    ids=["empty", "unicode", "quotes", "nested", "numbers", "list", "empties", "long"],
)
async def test_args_survive_the_round_trip(any_engine: Engine, args: dict[str, Any]) -> None:
    (job_id,) = await any_engine.insert([req(args=args, meta={"copy": args})], now=T0)
    found = await job(any_engine, job_id)
    assert found.args == args and found.meta == {"copy": args}


@pytest.mark.parametrize(
    ("options", "state", "scheduled_at"),
    [
        ({}, JobState.AVAILABLE, T0),
        ({"scheduled_at": T0 + timedelta(minutes=5)}, JobState.SCHEDULED, T0 + timedelta(minutes=5)),
        ({"scheduled_at": T0 - timedelta(minutes=5)}, JobState.AVAILABLE, T0 - timedelta(minutes=5)),
        ({"scheduled_at": T0}, JobState.AVAILABLE, T0),
        ({"schedule_in": 90}, JobState.SCHEDULED, T0 + timedelta(seconds=90)),
        ({"schedule_in": 0}, JobState.AVAILABLE, T0),
        (
            {"scheduled_at": T0 + timedelta(microseconds=1)},
            JobState.SCHEDULED,
            T0 + timedelta(microseconds=1),
        ),
        ({"schedule_in": 0.25}, JobState.SCHEDULED, T0 + timedelta(seconds=0.25)),
        (
            {"schedule_in": timedelta(hours=1, microseconds=500)},
            JobState.SCHEDULED,
            T0 + timedelta(hours=1, microseconds=500),
        ),
    ],
    ids=[
        "now",
        "future",
        "past",
        "exactly-now",
        "schedule-in",
        "schedule-in-0",
        "a-microsecond-later",
        "schedule-in-a-fraction",
        "schedule-in-a-timedelta",
    ],
)
async def test_scheduling_decides_state_and_time(
    any_engine: Engine, options: dict[str, Any], state: JobState, scheduled_at: datetime
) -> None:
    (job_id,) = await any_engine.insert([req(**options)], now=T0)
    found = await job(any_engine, job_id)
    assert (found.state, found.scheduled_at, found.inserted_at) == (state, scheduled_at, T0)


async def test_insert_without_now_uses_the_engine_clock(any_engine: Engine) -> None:
    before = datetime.now(T0.tzinfo)
    (job_id,) = await any_engine.insert([req(schedule_in=3600)])
    found = await job(any_engine, job_id)
    assert found.state is JobState.SCHEDULED
    assert abs(found.scheduled_at - (before + timedelta(hours=1))) < timedelta(seconds=30)


def _failing(total: int) -> Iterator[JobRequest]:
    for i in range(total):
        yield req(args={"i": i})
    raise RuntimeError("source failed")


@pytest.mark.parametrize("total", [3, 10_010], ids=["first-chunk", "later-chunk"])
async def test_insert_is_atomic_when_the_source_fails(any_engine: Engine, total: int) -> None:
    with pytest.raises(RuntimeError, match="source failed"):
        await any_engine.insert(_failing(total), now=T0)
    assert await any_engine.list_jobs(JobFilter()) == []


@pytest.mark.parametrize("bad", [[{"not": "a request"}], ["x"], [req(), "x"], [req(), None]])
async def test_insert_refuses_non_requests(any_engine: Engine, bad: list[Any]) -> None:
    with pytest.raises(Exception) as exc:
        await any_engine.insert(bad)
    assert "JobRequest" in str(exc.value)
    assert await any_engine.list_jobs(JobFilter()) == []


async def test_ids_are_never_reused(any_engine: Engine) -> None:
    (first,) = await any_engine.insert([req()], now=T0)
    assert await any_engine.delete_jobs(JobFilter(ids=(first,))) == [first]
    (second,) = await any_engine.insert([req()], now=T0)
    assert second > first


# -- time is aware -----------------------------------------------------------------------------------
NAIVE = datetime(2030, 1, 1, 12, 0)


@pytest.mark.parametrize(
    "call",
    [
        lambda e: e.insert([req()], now=NAIVE),
        lambda e: e.fetch_jobs("default", 1, node="n", producer="p", now=NAIVE),
        lambda e: e.stage_jobs(10, now=NAIVE),
        lambda e: e.cancel_jobs(JobFilter(), now=NAIVE),
        lambda e: e.retry_jobs(JobFilter(), now=NAIVE),
        lambda e: e.elect_leader("app", "n", 10, now=NAIVE),
        lambda e: e.get_leader("app", now=NAIVE),
        lambda e: e.rescue_jobs(timeout=1, backstop=1, now=NAIVE),
        lambda e: e.prune_jobs(Retention(max_age=1), limit=1, now=NAIVE),
        lambda e: e.count_prunable(Retention(), now=NAIVE),
        lambda e: e.lost_claims(["p"], older_than=1, now=NAIVE),
    ],
    ids=[
        "insert",
        "fetch",
        "stage",
        "cancel",
        "retry",
        "elect",
        "get_leader",
        "rescue",
        "prune",
        "count",
        "lost",
    ],
)
async def test_a_naive_now_is_refused(any_engine: Engine, call: Any) -> None:
    await any_engine.insert([req()], now=T0)
    with pytest.raises(ValidationError):
        await call(any_engine)
    assert [j.state for j in await any_engine.list_jobs(JobFilter())] == [JobState.AVAILABLE]


# -- get and list ----------------------------------------------------------------------------------
async def test_get_job_of_an_unknown_id_is_none(any_engine: Engine) -> None:
    assert await any_engine.get_job(10**9) is None


async def _seed(engine: Engine) -> dict[str, int]:
    return {
        "mail": await put(engine, JobState.COMPLETED, queue="mail", worker="mail.Send", tags=["email"]),
        "mail_vip": await put(
            engine, JobState.AVAILABLE, queue="mail", worker="mail.Send", tags=[" Email", "VIP", "vip "]
        ),
        "bulk_vip": await put(
            engine, JobState.EXECUTING, queue="bulk-mail", worker="mail.Send", tags=["email", "vip", "eu"]
        ),
        "report_vip": await put(
            engine, JobState.RETRYABLE, queue="reports", worker="reports.Build", tags=["vip"]
        ),
        "report_later": await put(engine, JobState.SCHEDULED, queue="reports", worker="reports.Build"),
    }


@pytest.mark.parametrize(
    ("criteria", "expected"),
    [
        ({}, ["report_later", "report_vip", "bulk_vip", "mail_vip", "mail"]),
        ({"states": "scheduled"}, ["report_later"]),
        ({"states": ["executing", "completed"]}, ["bulk_vip", "mail"]),
        ({"queues": ["mail", "bulk-mail"]}, ["bulk_vip", "mail_vip", "mail"]),
        ({"queues": "nowhere"}, []),
        ({"workers": "reports.Build"}, ["report_later", "report_vip"]),
        ({"tags": "vip"}, ["report_vip", "bulk_vip", "mail_vip"]),
        ({"tags": ["email", "vip"]}, ["bulk_vip", "mail_vip"]),
        ({"tags": [" VIP", "Email"]}, ["bulk_vip", "mail_vip"]),  # compared as stored: normalised
        ({"tags": ["missing"]}, []),
        ({"workers": "mail.Send", "tags": "vip", "queues": "mail"}, ["mail_vip"]),
        ({"ids": "pick"}, ["report_vip", "mail"]),
        ({"limit": 2}, ["report_later", "report_vip"]),
        ({"before_id": "report_vip"}, ["bulk_vip", "mail_vip", "mail"]),
        ({"before_id": "report_vip", "limit": 2}, ["bulk_vip", "mail_vip"]),
        ({"before_id": "mail"}, []),
        ({"after_id": "mail_vip"}, ["report_later", "report_vip", "bulk_vip"]),
        ({"after_id": "mail", "before_id": "report_vip"}, ["bulk_vip", "mail_vip"]),
        ({"after_id": "report_later"}, []),
    ],
    ids=lambda v: "-".join(str(k) for k in v) if isinstance(v, dict) else None,
)
async def test_list_filters_newest_first(
    any_engine: Engine, criteria: dict[str, Any], expected: list[str]
) -> None:
    ids = await _seed(any_engine)
    if criteria.get("ids") == "pick":
        criteria = {"ids": [ids["mail"], ids["report_vip"], 10**9]}
    for bound in ("before_id", "after_id"):
        if isinstance(criteria.get(bound), str):
            criteria = criteria | {bound: ids[criteria[bound]]}
    found = await any_engine.list_jobs(JobFilter.build(**criteria))
    assert [j.id for j in found] == [ids[name] for name in expected]
    assert (await job(any_engine, ids["mail_vip"])).tags == ("email", "vip")  # as Oban stores them


async def test_list_returns_100_unless_told(any_engine: Engine) -> None:
    ids = await any_engine.insert([req() for _ in range(130)], now=T0)
    assert [j.id for j in await any_engine.list_jobs(JobFilter())] == ids[::-1][:100]
    assert len(await any_engine.list_jobs(JobFilter(limit=130))) == 130


# -- cancel ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("state", STATES, ids=str)
async def test_cancel_ends_every_job_not_final_yet(any_engine: Engine, state: JobState) -> None:
    job_id = await put(any_engine, state)
    later = T0 + timedelta(minutes=1)
    cancelled = await any_engine.cancel_jobs(JobFilter(), now=later)
    found = await job(any_engine, job_id)
    if state in FINAL:
        assert cancelled == [] and found.state is state
    else:
        assert cancelled == [job_id]
        assert (found.state, found.cancelled_at) == (JobState.CANCELLED, later)


async def test_cancel_takes_the_lowest_ids_up_to_the_limit(any_engine: Engine) -> None:
    ids = await any_engine.insert([req() for _ in range(5)], now=T0)
    assert await any_engine.cancel_jobs(JobFilter(limit=2), now=T0) == ids[:2]
    assert await any_engine.cancel_jobs(JobFilter(), now=T0) == ids[2:]
    assert await any_engine.cancel_jobs(JobFilter(), now=T0) == []


async def test_a_late_ack_cannot_undo_a_cancel(any_engine: Engine) -> None:
    job_id = await put(any_engine, JobState.EXECUTING)
    assert await any_engine.cancel_jobs(JobFilter(ids=(job_id,)), now=T0) == [job_id]
    assert await any_engine.ack_jobs([Ack(job_id, 1, JobState.COMPLETED)], now=T0) == []
    assert (await job(any_engine, job_id)).state is JobState.CANCELLED


# -- retry -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("state", STATES, ids=str)
async def test_retry_makes_every_waiting_or_ended_job_available(any_engine: Engine, state: JobState) -> None:
    job_id = await put(any_engine, state)
    later = T0 + timedelta(minutes=1)
    retried = await any_engine.retry_jobs(JobFilter(), now=later)
    found = await job(any_engine, job_id)
    if state in (JobState.AVAILABLE, JobState.EXECUTING):
        assert retried == [] and found.state is state
    else:
        assert retried == [job_id]
        assert (found.state, found.scheduled_at) == (JobState.AVAILABLE, later)
        assert (found.completed_at, found.cancelled_at, found.discarded_at) == (None, None, None)


async def test_retry_gives_an_exhausted_job_one_more_attempt(any_engine: Engine) -> None:
    job_id = await put(any_engine, JobState.DISCARDED, max_attempts=1)
    assert await any_engine.retry_jobs(JobFilter(ids=(job_id,)), now=T0) == [job_id]
    found = await job(any_engine, job_id)
    assert (found.state, found.attempt, found.max_attempts) == (JobState.AVAILABLE, 1, 2)
    assert await fetch(any_engine) == [job_id]
    assert (await job(any_engine, job_id)).attempt == 2


async def test_retry_keeps_the_attempts_and_errors_a_job_has(any_engine: Engine) -> None:
    job_id = await put(any_engine, JobState.DISCARDED, max_attempts=5)
    await any_engine.retry_jobs(JobFilter(), now=T0)
    found = await job(any_engine, job_id)
    assert (found.attempt, found.max_attempts) == (1, 5)
    assert [e["error"] for e in found.errors] == ["boom"]


async def test_retry_takes_the_lowest_ids_up_to_the_limit(any_engine: Engine) -> None:
    ids = [await put(any_engine, JobState.CANCELLED) for _ in range(4)]
    assert await any_engine.retry_jobs(JobFilter(limit=3), now=T0) == ids[:3]
    assert await any_engine.retry_jobs(JobFilter(), now=T0) == ids[3:]


# -- delete ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("state", STATES, ids=str)
async def test_delete_spares_only_executing_jobs(any_engine: Engine, state: JobState) -> None:
    job_id = await put(any_engine, state)
    deleted = await any_engine.delete_jobs(JobFilter())
    if state is JobState.EXECUTING:
        assert deleted == [] and (await job(any_engine, job_id)).state is state
    else:
        assert deleted == [job_id] and await any_engine.get_job(job_id) is None


async def test_delete_takes_the_lowest_ids_up_to_the_limit(any_engine: Engine) -> None:
    ids = await any_engine.insert([req() for _ in range(5)], now=T0)
    assert await any_engine.delete_jobs(JobFilter(limit=2)) == ids[:2]
    assert await any_engine.delete_jobs(JobFilter()) == ids[2:]


# -- every bulk action honours every criterion ---------------------------------------------------------
ACTIONS = {
    "cancel": lambda e, f: e.cancel_jobs(f, now=T0),
    "retry": lambda e, f: e.retry_jobs(f, now=T0),
    "delete": lambda e, f: e.delete_jobs(f),
}
CRITERIA = {
    "ids": ("pick", ["b"]),
    "states": ({"states": "scheduled"}, ["a", "b", "c"]),
    "queues": ({"queues": "mail"}, ["a", "b"]),
    "workers": ({"workers": "tests.w.Other"}, ["c"]),
    "tags": ({"tags": ["x", "y"]}, ["b"]),
    "before_id": ("before", ["a", "b"]),
    "after_id": ("after", ["b", "c"]),
    "combined": ({"queues": "mail", "tags": "x"}, ["a", "b"]),
}


@pytest.mark.parametrize("action", sorted(ACTIONS))
@pytest.mark.parametrize("criterion", sorted(CRITERIA))
async def test_bulk_actions_select_with_the_filter(any_engine: Engine, action: str, criterion: str) -> None:
    ids = dict(
        zip(
            "abc",
            await any_engine.insert(
                [
                    req(queue="mail", tags=["x"], schedule_in=60),
                    req(queue="mail", tags=["x", "y"], schedule_in=60),
                    req(queue="other", worker="tests.w.Other", schedule_in=60),
                ],
                now=T0,
            ),
            strict=True,
        )
    )
    given, expected = CRITERIA[criterion]
    selector: dict[str, Any]
    if given == "pick":
        selector = {"ids": [ids["b"], 10**9]}
    elif given == "before":
        selector = {"before_id": ids["c"]}
    elif given == "after":
        selector = {"after_id": ids["a"]}
    else:
        assert isinstance(given, dict)
        selector = given
    assert await ACTIONS[action](any_engine, JobFilter.build(**selector)) == [ids[n] for n in expected]
    untouched = [n for n in "abc" if n not in expected]
    for name in untouched:
        assert (await job(any_engine, ids[name])).state is JobState.SCHEDULED


# -- any time zone ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("offset", [0, 5.5, -8, 14], ids=["utc", "plus-5-30", "minus-8", "plus-14"])
async def test_aware_times_in_any_zone_mean_the_same_instant(any_engine: Engine, offset: float) -> None:
    zone = timezone(timedelta(hours=offset))
    now = T0.astimezone(zone)
    (job_id,) = await any_engine.insert([req(scheduled_at=now + timedelta(minutes=1))], now=now)
    found = await job(any_engine, job_id)
    assert (found.inserted_at, found.scheduled_at) == (T0, T0 + timedelta(minutes=1))
    assert found.inserted_at.utcoffset() == timedelta(0)
    assert await any_engine.stage_jobs(10, now=now + timedelta(seconds=59)) == {}
    assert await any_engine.stage_jobs(10, now=now + timedelta(seconds=60)) == {"default": 1}
    assert await fetch(any_engine, now=now) == [job_id]
    assert (await job(any_engine, job_id)).attempted_at == T0
