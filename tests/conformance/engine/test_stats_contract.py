"""The counts and stats contract: the time and worker-suffix filters on every job query, count_jobs,
queue_counts and job_stats, with times the test controls."""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from conveyor import Conveyor, JobCount, JobFilter, JobState, QueueCounts, StatsQuery, ValidationError
from conveyor.acks import Ack
from conveyor.engine.base import Engine
from tests.conformance.conftest import ADDRESSES
from tests.conformance.contract import T0, job, put, req

MIN = timedelta(minutes=1)


@pytest.fixture
async def app(any_engine: Engine) -> AsyncIterator[Conveyor]:
    """An app on each engine that stores jobs and runs none."""
    app = Conveyor(engine=any_engine, testing="manual")
    yield app
    await app.close()


# -- the new filters on list and count ---------------------------------------------------------------
async def _seed_times(engine: Engine) -> dict[str, int]:
    """Jobs with known times (T0 is "now"): see each case below for what it should match."""
    return {
        "waiting": (
            await engine.insert(
                [req(worker="app.mail.SendEmail", scheduled_at=T0 - 10 * MIN)], now=T0 - 20 * MIN
            )
        )[0],
        "later": await put(
            engine, JobState.SCHEDULED, worker="app.mail.ResendEmail", scheduled_at=T0 + 60 * MIN
        ),
        "done_recently": await put(engine, JobState.COMPLETED, worker="SendEmail", now=T0 - 5 * MIN),
        "done_long_ago": await put(engine, JobState.COMPLETED, worker="app.reports.Build", now=T0 - 30 * MIN),
        "running": await put(engine, JobState.EXECUTING, worker="other.SendEmail", now=T0 - MIN),
        "dropped": await put(engine, JobState.DISCARDED, worker="app.reports.Build", now=T0 - 2 * MIN),
    }


TIME_CASES: list[tuple[dict[str, Any], list[str]]] = [
    ({"worker_suffix": "SendEmail"}, ["running", "done_recently", "waiting"]),
    ({"worker_suffix": "mail.SendEmail"}, ["waiting"]),
    ({"worker_suffix": "Email"}, []),
    ({"worker_suffix": "app.reports.Build"}, ["dropped", "done_long_ago"]),
    ({"scheduled_after": T0}, ["later"]),
    ({"scheduled_before": T0}, ["dropped", "running", "done_long_ago", "done_recently", "waiting"]),
    ({"scheduled_after": T0 - 10 * MIN, "scheduled_before": T0 + 60 * MIN}, ["waiting"]),
    ({"attempted_after": T0 - 5 * MIN}, ["dropped", "running", "done_recently"]),
    ({"attempted_before": T0 - 5 * MIN}, ["done_long_ago"]),
    ({"completed_after": T0 - 30 * MIN}, ["done_long_ago", "done_recently"]),
    ({"completed_before": T0 - 5 * MIN}, ["done_long_ago"]),
    ({"completed_after": T0 - 31 * MIN, "completed_before": T0}, ["done_long_ago", "done_recently"]),
    ({"completed_after": T0 - 4 * MIN}, []),
    ({"states": "completed", "worker_suffix": "Build"}, ["done_long_ago"]),
    ({"attempted_after": T0 - 10 * MIN, "worker_suffix": "SendEmail"}, ["running", "done_recently"]),
]


@pytest.mark.parametrize(
    ("criteria", "expected"), TIME_CASES, ids=lambda v: "-".join(v) if isinstance(v, dict) else None
)
async def test_time_and_suffix_filters_select_on_list_and_count(
    any_engine: Engine, criteria: dict[str, Any], expected: list[str]
) -> None:
    ids = await _seed_times(any_engine)
    selector = JobFilter.build(**criteria)
    assert [j.id for j in await any_engine.list_jobs(selector)] == [ids[name] for name in expected]
    assert await any_engine.count_jobs(selector) == len(expected)


async def test_the_time_filters_take_any_time_zone(any_engine: Engine) -> None:
    ids = await _seed_times(any_engine)
    zone = timezone(timedelta(hours=-8))
    found = await any_engine.list_jobs(JobFilter(completed_after=(T0 - 5 * MIN).astimezone(zone)))
    assert [j.id for j in found] == [ids["done_recently"]]


async def test_a_suffix_is_data_never_sql(any_engine: Engine) -> None:
    (job_id,) = await any_engine.insert([req(worker="app.it's_%_.Job'; --")], now=T0)
    await any_engine.insert([req(worker="app.other.Job")], now=T0)
    assert await any_engine.count_jobs(JobFilter(worker_suffix="it's_%_.Job'; --")) == 1
    assert await any_engine.count_jobs(JobFilter(worker_suffix="%.Job'; --")) == 0
    assert [j.id for j in await any_engine.list_jobs(JobFilter(worker_suffix="Job'; --"))] == [job_id]


async def test_a_suffix_matches_its_wildcards_and_backslashes_literally(any_engine: Engine) -> None:
    (slashed,) = await any_engine.insert([req(worker="app.a\\b.Job")], now=T0)
    await any_engine.insert([req(worker="app.aXb.Job"), req(worker="app.a%b.Other")], now=T0)
    assert await any_engine.count_jobs(JobFilter(worker_suffix="a\\b.Job")) == 1
    assert await any_engine.count_jobs(JobFilter(worker_suffix="a_b.Job")) == 0
    assert await any_engine.count_jobs(JobFilter(worker_suffix="a%.Job")) == 0
    assert [j.id for j in await any_engine.list_jobs(JobFilter(worker_suffix="a\\b.Job"))] == [slashed]
    assert await any_engine.count_jobs(JobFilter(worker_suffix="b.Job")) == 0


# -- every bulk action honours the new criteria ---------------------------------------------------------
BULK = {
    "cancel": lambda e, f: e.cancel_jobs(f, now=T0),
    "retry": lambda e, f: e.retry_jobs(f, now=T0),
    "delete": lambda e, f: e.delete_jobs(f),
}
#: What each action may touch among the seeded jobs (cancel never touches final ones).
ELIGIBLE = {
    "cancel": {"soon", "late", "failed_early", "failed_late"},
    "retry": {"soon", "late", "failed_early", "failed_late", "done_early", "done_late"},
    "delete": {"soon", "late", "failed_early", "failed_late", "done_early", "done_late"},
}
BULK_CRITERIA: dict[str, tuple[dict[str, Any], set[str]]] = {
    "worker_suffix": ({"worker_suffix": "SendEmail"}, {"soon"}),
    # retryable jobs are scheduled an hour after their failure: at T0+50m and T0+59m
    "scheduled_after": ({"scheduled_after": T0 + 60 * MIN}, {"soon", "late"}),
    "scheduled_before": ({"scheduled_before": T0 + 55 * MIN}, {"failed_early", "done_early", "done_late"}),
    "attempted_after": ({"attempted_after": T0 - 5 * MIN}, {"failed_late", "done_late"}),
    "attempted_before": ({"attempted_before": T0 - 5 * MIN}, {"failed_early", "done_early"}),
    "completed_after": ({"completed_after": T0 - 5 * MIN}, {"done_late"}),
    "completed_before": ({"completed_before": T0 - 5 * MIN}, {"done_early"}),
}


@pytest.mark.parametrize("action", sorted(BULK))
@pytest.mark.parametrize("criterion", sorted(BULK_CRITERIA))
async def test_bulk_actions_honour_the_time_and_suffix_criteria(
    any_engine: Engine, action: str, criterion: str
) -> None:
    ids = {
        "soon": await put(
            any_engine, JobState.SCHEDULED, worker="app.mail.SendEmail", scheduled_at=T0 + 60 * MIN
        ),
        "late": await put(
            any_engine, JobState.SCHEDULED, worker="app.mail.ResendEmail", scheduled_at=T0 + 120 * MIN
        ),
        "failed_early": await put(any_engine, JobState.RETRYABLE, now=T0 - 10 * MIN),
        "failed_late": await put(any_engine, JobState.RETRYABLE, now=T0 - MIN),
        "done_early": await put(any_engine, JobState.COMPLETED, now=T0 - 10 * MIN),
        "done_late": await put(any_engine, JobState.COMPLETED, now=T0 - MIN),
    }
    before = {name: (await job(any_engine, job_id)).state for name, job_id in ids.items()}
    given, matching = BULK_CRITERIA[criterion]
    touched = matching & ELIGIBLE[action]
    done = await BULK[action](any_engine, JobFilter.build(**given))
    assert done == sorted(ids[name] for name in touched)
    for name in set(ids) - touched:
        assert (await job(any_engine, ids[name])).state is before[name], name


# -- refusals name the field ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("criteria", "field"),
    [
        ({"scheduled_after": datetime(2030, 1, 1)}, "scheduled_after"),
        ({"attempted_before": datetime(2030, 1, 1)}, "attempted_before"),
        ({"completed_after": "2030-01-01T00:00:00Z"}, "completed_after"),
        ({"scheduled_after": T0, "scheduled_before": T0}, "scheduled_after"),
        ({"attempted_after": T0, "attempted_before": T0 - MIN}, "attempted_after"),
        ({"completed_after": T0 + MIN, "completed_before": T0}, "completed_after"),
        ({"worker_suffix": ""}, "worker_suffix"),
        ({"worker_suffix": ".SendEmail"}, "worker_suffix"),
        ({"worker_suffix": "mail."}, "worker_suffix"),
        ({"worker_suffix": "Send\x00Email"}, "worker_suffix"),
        ({"worker_suffix": 7}, "worker_suffix"),
    ],
    ids=lambda v: v if isinstance(v, str) else None,
)
async def test_bad_criteria_are_refused_naming_the_field(
    app: Conveyor, criteria: dict[str, Any], field: str
) -> None:
    with pytest.raises(ValidationError) as refused:
        JobFilter.build(**criteria)
    assert refused.value.field == field
    with pytest.raises(ValidationError) as refused:
        await app.count_jobs(**criteria)
    assert refused.value.field == field


def test_filters_with_the_new_criteria_stay_hashable() -> None:
    one = JobFilter(worker_suffix="SendEmail", completed_after=T0 - MIN, completed_before=T0)
    assert hash(one) == hash(
        JobFilter(worker_suffix="SendEmail", completed_after=T0 - MIN, completed_before=T0)
    )
    assert len({one, JobFilter(worker_suffix="SendEmail")}) == 2


# -- count_jobs --------------------------------------------------------------------------------------------
async def test_count_jobs_counts_every_match_exactly(any_engine: Engine) -> None:
    ids = await any_engine.insert([req(queue="mail") for _ in range(150)], now=T0)
    await put(any_engine, JobState.COMPLETED, queue="mail")
    await put(any_engine, JobState.SCHEDULED, queue="other")
    assert await any_engine.count_jobs(JobFilter()) == 152
    assert await any_engine.count_jobs(JobFilter(states=("available",))) == 150
    assert await any_engine.count_jobs(JobFilter(states=("available", "completed"), queues=("mail",))) == 151
    assert await any_engine.count_jobs(JobFilter(before_id=ids[10])) == 10
    assert await any_engine.count_jobs(JobFilter(queues=("nowhere",))) == 0


async def test_count_jobs_refuses_a_limit(any_engine: Engine, app: Conveyor) -> None:
    with pytest.raises(ValidationError) as refused:
        await any_engine.count_jobs(JobFilter(limit=10))
    assert refused.value.field == "limit"
    with pytest.raises(ValidationError) as refused:
        await app.count_jobs(limit=10)
    assert refused.value.field == "limit"


async def test_a_count_that_may_be_estimated_is_exact_when_few_match(
    any_engine: Engine, app: Conveyor
) -> None:
    ids = await any_engine.insert([req(queue="mail") for _ in range(150)], now=T0)
    await put(any_engine, JobState.COMPLETED, queue="mail", worker="app.mail.SendEmail")
    assert await app.count_jobs(queues="mail", estimate=True) == JobCount(151)
    assert await app.count_jobs(states="completed", worker_suffix="SendEmail", estimate=True) == JobCount(1)
    assert await app.count_jobs(JobFilter(before_id=ids[10]), estimate=True) == JobCount(10)
    assert await app.count_jobs(queues="nowhere", estimate=True) == JobCount(0)
    found = await any_engine.estimate_jobs(JobFilter(states=("available",)), exact_up_to=1000)
    assert (found.count, found.exact, str(found)) == (150, True, "150")


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"estimate": "yes"}, "estimate"),
        ({"estimate": 1}, "estimate"),
        ({"exact_up_to": 10}, "exact_up_to"),  # without estimate=True
        ({"estimate": True, "exact_up_to": -1}, "exact_up_to"),
        ({"estimate": True, "exact_up_to": 1.5}, "exact_up_to"),
        ({"estimate": True, "exact_up_to": True}, "exact_up_to"),
        ({"estimate": True, "exact_up_to": 2**31}, "exact_up_to"),
        ({"estimate": True, "limit": 10}, "limit"),
    ],
    ids=lambda v: v if isinstance(v, str) else None,
)
async def test_bad_count_modes_are_refused_naming_the_field(
    app: Conveyor, options: dict[str, Any], field: str
) -> None:
    await refused_naming(app.count_jobs, options, field)


async def refused_naming(call: Callable[..., Awaitable[Any]], options: dict[str, Any], field: str) -> None:
    """``call(**options)`` raises a ``ValidationError`` on ``field``."""
    with pytest.raises(ValidationError) as refused:
        await call(**options)
    assert refused.value.field == field


def test_a_job_count_says_whether_it_is_estimated() -> None:
    assert str(JobCount(12, estimated=True)) == "~12" and not JobCount(12, estimated=True).exact
    for bad in ({"count": -1}, {"count": 1.0}, {"count": 1, "estimated": "no"}):
        with pytest.raises(ValidationError):
            JobCount(**bad)


# -- queue_counts ------------------------------------------------------------------------------------------
async def test_queue_counts_gives_every_state_of_every_queue(any_engine: Engine, app: Conveyor) -> None:
    await any_engine.insert(
        [req(queue="mail", scheduled_at=T0 - 5 * MIN) for _ in range(3)], now=T0 - 5 * MIN
    )
    for state in (JobState.COMPLETED, JobState.COMPLETED, JobState.DISCARDED, JobState.RETRYABLE):
        await put(any_engine, state, queue="mail")
    await put(any_engine, JobState.EXECUTING, queue="reports")
    await put(any_engine, JobState.SCHEDULED, queue="reports")
    await put(any_engine, JobState.CANCELLED, queue="reports")
    counted = await app.queue_counts(now=T0)
    assert [c.queue for c in counted] == ["mail", "reports"]
    mail, reports = counted
    assert mail.counts() == {
        **dict.fromkeys(JobState, 0),
        JobState.AVAILABLE: 3,
        JobState.COMPLETED: 2,
        JobState.DISCARDED: 1,
        JobState.RETRYABLE: 1,
    }
    assert (reports.executing, reports.scheduled, reports.cancelled, reports.total) == (1, 1, 1, 3)
    assert mail.estimated == frozenset() and reports.estimated == frozenset()  # small tables: all exact
    assert mail.is_exact("completed")
    assert (mail.measured_at, mail.oldest_available_at, mail.oldest_available_age) == (
        T0,
        T0 - 5 * MIN,
        300.0,
    )
    assert (reports.oldest_available_at, reports.oldest_available_age) == (None, None)


async def test_the_oldest_available_job_is_found_across_priorities(any_engine: Engine) -> None:
    await any_engine.insert(
        [
            req(priority=0, scheduled_at=T0 - 2 * MIN),
            req(priority=3, scheduled_at=T0 - 9 * MIN),
            req(priority=9, scheduled_at=T0 - 4 * MIN),
            req(priority=3, scheduled_at=T0 - MIN),
        ],
        now=T0,
    )
    await put(any_engine, JobState.COMPLETED)  # scheduled long ago, but not available
    (counts,) = await any_engine.queue_counts(now=T0 + MIN)
    assert (counts.available, counts.completed) == (4, 1)
    assert counts.oldest_available_at == T0 - 9 * MIN
    assert counts.oldest_available_age == 600.0


async def test_queue_counts_of_an_empty_table_is_empty(any_engine: Engine) -> None:
    assert await any_engine.queue_counts() == []


async def test_queue_counts_reads_the_engine_clock_without_now(any_engine: Engine) -> None:
    await any_engine.insert([req()])
    before = datetime.now(UTC)
    (counts,) = await any_engine.queue_counts()
    assert abs((counts.measured_at - before).total_seconds()) < 60
    assert counts.oldest_available_age is not None and 0 <= counts.oldest_available_age < 60


# -- job_stats -----------------------------------------------------------------------------------------------
def _error(attempt: int, at: datetime | str) -> dict[str, Any]:
    return {"attempt": attempt, "at": at if isinstance(at, str) else at.isoformat(), "error": "boom"}


async def _claim(engine: Engine, job_id: int, now: datetime, queue: str) -> int:
    """Make the job available now (if it waits) and claim it, the only job of its queue: its attempt."""
    await engine.stage_jobs(100, now=now)
    jobs = await engine.fetch_jobs(
        queue, 10, node="n", producer="00000000-0000-4000-8000-000000000009", now=now
    )
    assert [j.id for j in jobs] == [job_id]
    attempt: int = jobs[0].attempt
    return attempt


async def _end(
    engine: Engine, job_id: int, state: JobState, at: datetime, error_at: datetime | str | None = None
) -> None:
    """One attempt of the job (alone in its queue), claimed and ended at ``at`` in ``state`` (a
    failure recorded at ``error_at``, or ``at``, for retryable, discarded and cancelled)."""
    queue = (await job(engine, job_id)).queue
    attempt = await _claim(engine, job_id, at, queue)
    error = None if state is JobState.COMPLETED else _error(attempt, at if error_at is None else error_at)
    schedule_in = 0.0 if state is JobState.RETRYABLE else None
    ack = Ack(job_id, attempt, state, schedule_in=schedule_in, error=error)
    assert await engine.ack_jobs([ack], now=at) == [job_id]


SECOND = timedelta(seconds=1)
DAY = timedelta(days=1)
#: The jobs of ``_seed_stats``, each alone in its queue ``q-<name>`` (``other`` in "reports").
STATS_JOBS = (
    "recovered",
    "exhausted",
    "waiting",
    "gave_up",
    "edge",
    "outside",
    "first",
    "too_early",
    "stopped",
)


async def _new(engine: Engine, queue: str, max_attempts: int = 20) -> int:
    (job_id,) = await engine.insert(
        [req(queue=queue, max_attempts=max_attempts, scheduled_at=T0 - DAY)], now=T0 - DAY
    )
    return job_id


async def _seed_stats(engine: Engine) -> dict[str, int]:
    """A five-minute window of 60-second buckets ending at T0, [T0-300s, T0-240s) ... [T0-60s, T0):

    - ``recovered`` fails at T0-250s (bucket 0), then completes at T0-100s (bucket 3);
    - ``exhausted`` fails at T0-170s (bucket 2), fails its last attempt at T0-50s: discarded (bucket
      4), that last failure being no retry;
    - ``waiting`` failed at T0-20s (bucket 4) and waits for its next attempt;
    - ``gave_up`` cancels itself at T0-40s (bucket 4), recording why: no retry either;
    - ``edge`` completes at T0-120s exactly: bucket 3, which starts there;
    - ``outside`` completes at T0 (the end is excluded) after a failure at T0-3600s (before);
    - ``first`` completes at T0-300s exactly (bucket 0) and ``too_early`` at T0-301s (outside);
    - ``stopped`` is cancelled by an operator at T0-200s (bucket 1);
    - ``other`` completes at T0-30s in the queue "reports" (bucket 4).
    """
    ids = {name: await _new(engine, f"q-{name}", 2 if name == "exhausted" else 20) for name in STATS_JOBS}
    ids["other"] = await _new(engine, "reports")
    await _end(engine, ids["outside"], JobState.RETRYABLE, T0 - 3600 * SECOND)
    await _end(engine, ids["outside"], JobState.COMPLETED, T0)
    await _end(engine, ids["too_early"], JobState.COMPLETED, T0 - 301 * SECOND)
    await _end(engine, ids["first"], JobState.COMPLETED, T0 - 300 * SECOND)
    await _end(engine, ids["recovered"], JobState.RETRYABLE, T0 - 250 * SECOND)
    assert await engine.cancel_jobs(JobFilter(ids=(ids["stopped"],)), now=T0 - 200 * SECOND) == [
        ids["stopped"]
    ]
    await _end(engine, ids["exhausted"], JobState.RETRYABLE, T0 - 170 * SECOND)
    await _end(engine, ids["edge"], JobState.COMPLETED, T0 - 120 * SECOND)
    await _end(engine, ids["recovered"], JobState.COMPLETED, T0 - 100 * SECOND)
    await _end(engine, ids["exhausted"], JobState.DISCARDED, T0 - 50 * SECOND)
    await _end(engine, ids["gave_up"], JobState.CANCELLED, T0 - 40 * SECOND)
    await _end(engine, ids["other"], JobState.COMPLETED, T0 - 30 * SECOND)
    await _end(engine, ids["waiting"], JobState.RETRYABLE, T0 - 20 * SECOND)
    return ids


async def test_job_stats_counts_each_bucket(any_engine: Engine) -> None:
    await _seed_stats(any_engine)
    stats = await any_engine.job_stats(StatsQuery(window=300, bucket=60), now=T0)
    assert (stats.start, stats.end, stats.bucket, stats.window, stats.queues) == (
        T0 - 5 * MIN,
        T0,
        60.0,
        300.0,
        None,
    )
    assert [b.start for b in stats.buckets] == [T0 - (5 - i) * MIN for i in range(5)]
    assert [b.end for b in stats.buckets] == [T0 - (4 - i) * MIN for i in range(5)]
    assert [(b.completed, b.discarded, b.cancelled, b.retried) for b in stats.buckets] == [
        (1, 0, 0, 1),  # first; recovered's failure
        (0, 0, 1, 0),  # stopped
        (0, 0, 0, 1),  # exhausted's first failure
        (2, 0, 0, 0),  # edge, recovered
        (1, 1, 1, 1),  # other; exhausted; gave_up; waiting's failure
    ]
    assert (stats.completed, stats.discarded, stats.cancelled, stats.retried, stats.failed) == (4, 1, 2, 3, 4)
    assert stats.throughput == pytest.approx(4 / 300)
    assert stats.error_rate == pytest.approx(4 / 8)
    assert not stats.estimated and not any(b.estimated for b in stats.buckets)


async def test_job_stats_of_some_queues(any_engine: Engine) -> None:
    await _seed_stats(any_engine)
    reports = await any_engine.job_stats(StatsQuery(window=300, bucket=60, queues=("reports",)), now=T0)
    assert (reports.completed, reports.retried, reports.discarded, reports.queues) == (1, 0, 0, ("reports",))
    assert reports.buckets[4].completed == 1
    two = StatsQuery(window=300, bucket=60, queues=("q-recovered", "q-exhausted"))
    stats = await any_engine.job_stats(two, now=T0)
    assert [(b.completed, b.discarded, b.cancelled, b.retried) for b in stats.buckets] == [
        (0, 0, 0, 1),
        (0, 0, 0, 0),
        (0, 0, 0, 1),
        (1, 0, 0, 0),
        (0, 1, 0, 0),
    ]


async def test_job_stats_of_a_quiet_window_is_zero(any_engine: Engine) -> None:
    await _seed_stats(any_engine)
    stats = await any_engine.job_stats(StatsQuery(window=60, bucket=30), now=T0 + 3600 * SECOND)
    assert (stats.completed, stats.failed, stats.throughput, stats.error_rate) == (0, 0, 0.0, 0.0)
    assert len(stats.buckets) == 2


@pytest.mark.parametrize(
    ("at", "counted"),
    [
        ((T0 - 90 * SECOND).isoformat(), True),
        ("2030-01-01T11:58:30Z", True),
        ("2030-01-01T11:58:30.123456Z", True),
        ("2030-01-01T17:28:30+05:30", True),
        ("2030-01-01T06:58:30-05:00", True),
        ("2030-01-01T11:58:30", True),  # no offset: UTC, as Oban writes naive times
        ("2030-01-01T11:50:00Z", False),  # before the window
        ("2030-02-31T11:58:30Z", False),  # no such day
        ("2030-01-01T25:58:30Z", False),
        ("soon", False),
        ("", False),
    ],
)
async def test_failure_times_are_read_in_any_zone_and_junk_is_skipped(
    any_engine: Engine, at: str, counted: bool
) -> None:
    job_id = await _new(any_engine, "default")
    await _end(any_engine, job_id, JobState.RETRYABLE, T0 - 90 * SECOND, error_at=at)
    stats = await any_engine.job_stats(StatsQuery(window=300, bucket=60), now=T0)
    assert [b.retried for b in stats.buckets] == ([0, 0, 0, 1, 0] if counted else [0] * 5)


async def test_errors_of_another_shape_are_skipped(any_engine: Engine) -> None:
    job_id = await _new(any_engine, "default")
    attempt = await _claim(any_engine, job_id, T0 - 90 * SECOND, "default")
    odd = {"attempt": "one", "at": 12345, "error": ["not", "text"]}
    ack = Ack(job_id, attempt, JobState.RETRYABLE, schedule_in=0.0, error=odd)
    assert await any_engine.ack_jobs([ack], now=T0 - 90 * SECOND) == [job_id]
    stats = await any_engine.job_stats(StatsQuery(window=300, bucket=60), now=T0)
    assert stats.retried == 0


async def test_job_stats_reads_the_engine_clock_without_now(any_engine: Engine) -> None:
    (job_id,) = await any_engine.insert([req()])
    (claimed,) = await any_engine.fetch_jobs(
        "default", 1, node="n", producer="00000000-0000-4000-8000-000000000009"
    )
    assert await any_engine.ack_jobs([Ack(job_id, claimed.attempt, JobState.COMPLETED)]) == [job_id]
    before = datetime.now(UTC)
    stats = await any_engine.job_stats(StatsQuery(window=600, bucket=60))
    assert abs((stats.end - before).total_seconds()) < 60
    assert stats.completed == 1 and stats.buckets[-1].completed + stats.buckets[-2].completed == 1


# -- the app's methods ------------------------------------------------------------------------------------
async def test_the_app_counts_and_measures(app: Conveyor, any_engine: Engine) -> None:
    await _seed_stats(any_engine)
    assert await app.count_jobs(states="completed") == 6
    assert await app.count_jobs(JobFilter(queues=("reports",))) == 1
    assert await app.count_jobs(completed_after=T0 - 150 * SECOND, worker_suffix="w.Job") == 4
    counted = {c.queue: c for c in await app.queue_counts(now=T0)}
    assert sorted(counted) == sorted([f"q-{name}" for name in STATS_JOBS] + ["reports"])
    assert all(isinstance(c, QueueCounts) and c.total == 1 for c in counted.values())
    assert (counted["q-waiting"].retryable, counted["q-gave_up"].cancelled) == (1, 1)
    stats = await app.job_stats(window=300, bucket=60, now=T0)
    assert (stats.completed, stats.retried) == (4, 3)
    assert (await app.job_stats(window=300, bucket=60, queues="reports", now=T0)).completed == 1


def test_the_blocking_twins_count_and_measure(engine_name: str, any_engine: Engine) -> None:
    url, prefix = ADDRESSES[engine_name](any_engine)
    app = Conveyor(url, prefix=prefix, testing="manual")
    try:
        app.enqueue_sync(req(queue="mail"))
        assert app.count_jobs_sync(queues="mail") == 1
        assert app.count_jobs_sync(queues="mail", estimate=True) == JobCount(1)
        assert [c.available for c in app.queue_counts_sync()] == [1]
        assert app.job_stats_sync(window=60, bucket=60).completed == 0
    finally:
        app.close_sync()


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"window": 0}, "window"),
        ({"window": -60}, "window"),
        ({"window": math.inf}, "window"),
        ({"window": math.nan}, "window"),
        ({"window": True}, "window"),
        ({"window": "3600"}, "window"),
        ({"bucket": 0}, "bucket"),
        ({"bucket": math.nan}, "bucket"),
        ({"window": 100, "bucket": 30}, "window"),  # not a whole number of buckets
        ({"window": 86400 * 2, "bucket": 60}, "bucket"),  # 2,880 buckets
        ({"bucket": 0.0001}, "bucket"),
        ({"queues": []}, "queues"),
        ({"queues": ["bad queue"]}, "queues"),
        ({"queues": 7}, "queues"),
        ({"now": datetime(2030, 1, 1)}, "now"),
    ],
    ids=lambda v: v if isinstance(v, str) else None,
)
async def test_bad_stats_requests_are_refused_naming_the_field(
    app: Conveyor, options: dict[str, Any], field: str
) -> None:
    await refused_naming(app.job_stats, options, field)


async def test_a_naive_now_is_refused_by_queue_counts(app: Conveyor, any_engine: Engine) -> None:
    for call in (
        app.queue_counts(now=datetime(2030, 1, 1)),
        any_engine.queue_counts(now=datetime(2030, 1, 1)),
    ):
        with pytest.raises(ValidationError) as refused:
            await call
        assert refused.value.field == "now"


def test_the_largest_window_is_a_day_of_minutes() -> None:
    assert StatsQuery(window=86400, bucket=60).bucket_count == 1440
    assert StatsQuery(window=0.3, bucket=0.1).bucket_count == 3
