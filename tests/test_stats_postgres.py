"""PostgreSQL's bounded counts and stats: what it estimates instead of counting (the conformance
suite covers the exact figures on both engines). The budgets are made small so that a few hundred
rows stand for millions."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from conveyor import Conveyor, JobCount, JobFilter, JobState, StatsQuery
from conveyor.engine.postgres import PostgresEngine
from conveyor.engine.postgres import stats as pg_stats
from conveyor.web.dashboard.counts import Matching, count_matching
from tests.helpers import execute

T0 = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)


def insert_jobs(dsn: str, prefix: str, count: int, *, state: str, queue: str, at: str = "NULL") -> None:
    """``count`` jobs by one statement; ``at`` is an SQL expression of ``g`` (1..count) for the
    time of a completed job."""
    execute(
        dsn,
        f"""
        INSERT INTO "{prefix}".oban_jobs (state, queue, worker, attempt, scheduled_at, completed_at)
        SELECT '{state}', '{queue}', 'tests.w.Job', {1 if state == "completed" else 0},
               timestamp '2030-01-01 11:00', {at}
        FROM generate_series(1, {count}) AS g
        """,
    )


async def test_pairs_beyond_the_budget_are_estimated(
    engine: PostgresEngine, dsn: str, prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pg_stats, "COUNT_BUDGET", 100)
    insert_jobs(dsn, prefix, 3000, state="available", queue="big")
    insert_jobs(dsn, prefix, 30, state="available", queue="small")
    insert_jobs(dsn, prefix, 40, state="completed", queue="small", at="timestamp '2030-01-01 11:30'")
    execute(dsn, f'ANALYZE "{prefix}".oban_jobs')
    big, small = await engine.queue_counts(now=T0)
    assert (small.available, small.completed, small.estimated) == (30, 40, frozenset())
    assert big.estimated == {JobState.AVAILABLE}
    assert 2000 < big.available < 4000  # the planner's, from the joint statistics
    assert big.oldest_available_at == datetime(2030, 1, 1, 11, 0, tzinfo=UTC)


async def test_a_pair_found_larger_than_expected_stops_at_the_budget(
    engine: PostgresEngine, dsn: str, prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pg_stats, "COUNT_BUDGET", 100)
    insert_jobs(dsn, prefix, 5, state="available", queue="grows")
    execute(dsn, f'ANALYZE "{prefix}".oban_jobs')
    insert_jobs(dsn, prefix, 500, state="available", queue="grows")  # after the statistics were taken
    (grows,) = await engine.queue_counts(now=T0)
    assert grows.estimated == {JobState.AVAILABLE}
    assert grows.available >= 101  # never below what was counted before stopping


@pytest.fixture
def small_samples(monkeypatch: pytest.MonkeyPatch) -> int:
    """Pieces of buckets read 50 jobs at most (two buckets of four pieces share 400): the cap
    job_stats works with."""
    monkeypatch.setattr(pg_stats, "SAMPLE_BUDGET", 400)
    monkeypatch.setattr(pg_stats, "MIN_SAMPLE", 10)
    return 50


async def test_busy_buckets_are_extrapolated_from_their_sample(
    engine: PostgresEngine, dsn: str, prefix: str, small_samples: int
) -> None:
    # 1,000 completions spread evenly over the first bucket [11:58, 11:59), half of them in "a";
    # 30 in the second, under the cap: counted exactly.
    first = "timestamp '2030-01-01 11:58' + g * interval '60 ms' - interval '60 ms'"
    insert_jobs(dsn, prefix, 500, state="completed", queue="a", at=f"{first.replace('g *', '(2 * g) *')}")
    insert_jobs(dsn, prefix, 500, state="completed", queue="b", at=f"{first.replace('g *', '(2 * g - 1) *')}")
    insert_jobs(dsn, prefix, 30, state="completed", queue="a", at="timestamp '2030-01-01 11:59:30'")
    stats = await engine.job_stats(StatsQuery(window=120, bucket=60), now=T0)
    busy, quiet = stats.buckets
    assert busy.estimated and 900 <= busy.completed <= 1100
    assert (quiet.estimated, quiet.completed) == (False, 30)
    assert stats.estimated
    only_a = await engine.job_stats(StatsQuery(window=120, bucket=60, queues=("a",)), now=T0)
    assert only_a.buckets[0].estimated and 400 <= only_a.buckets[0].completed <= 600
    assert only_a.buckets[1].completed == 30


async def test_a_queue_that_stops_within_a_bucket_is_not_extrapolated_past_it(
    engine: PostgresEngine, dsn: str, prefix: str, small_samples: int
) -> None:
    # 1,000 completions over the first half of the bucket [11:58, 11:59), none after: each quarter
    # of the bucket is sampled on its own, so the empty half stays empty.
    half = "timestamp '2030-01-01 11:58' + g * interval '30 ms' - interval '30 ms'"
    insert_jobs(dsn, prefix, 1000, state="completed", queue="a", at=half)
    stats = await engine.job_stats(StatsQuery(window=120, bucket=60), now=T0)
    assert stats.buckets[0].estimated and 900 <= stats.buckets[0].completed <= 1100


async def test_a_sample_from_one_instant_is_what_was_seen(
    engine: PostgresEngine, dsn: str, prefix: str, small_samples: int
) -> None:
    # One ack wrote 200 completions at the same instant: the sample spans no time to scale from.
    insert_jobs(dsn, prefix, 200, state="completed", queue="a", at="timestamp '2030-01-01 11:58:10'")
    stats = await engine.job_stats(StatsQuery(window=120, bucket=60), now=T0)
    assert stats.buckets[0].estimated and stats.buckets[0].completed == small_samples + 1


def insert_failed(dsn: str, prefix: str, count: int, *, state: str, key: str, failed: str) -> None:
    """``count`` jobs that failed once (their errors entry at ``failed``), each keyed in the index of
    failed jobs by ``key`` (completed_at of a completed job, scheduled_at of a waiting one); both SQL
    expressions of ``g`` (1..count)."""
    completed = key if state == "completed" else "NULL"
    scheduled = "timestamp '2030-01-01 11:00'" if state == "completed" else key
    execute(
        dsn,
        f"""
        INSERT INTO "{prefix}".oban_jobs (state, queue, worker, attempt, errors, scheduled_at, completed_at)
        SELECT '{state}', 'a', 'tests.w.Job', 2,
            jsonb_build_array(jsonb_build_object('attempt', 1, 'error', 'boom',
                'at', to_char({failed}, 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'))),
            {scheduled}, {completed}
        FROM generate_series(1, {count}) AS g
        """,
    )


async def test_many_failures_are_estimated_from_a_sample(
    engine: PostgresEngine, dsn: str, prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pg_stats, "RETRY_BUDGET", 200)  # 201 ranges of keys: 10 jobs each at least
    monkeypatch.setattr(pg_stats, "MIN_SAMPLE", 10)
    # 2,000 jobs that failed then completed a millisecond later, evenly over the two buckets: their
    # keys (completed_at) sit in the window, about 60 to each range of 3.6 s, which reads 11.
    spread = "timestamp '2030-01-01 11:58' + g * interval '60 ms' - interval '60 ms'"
    insert_failed(dsn, prefix, 2000, state="completed", key=spread, failed=f"{spread} - interval '1 ms'")
    stats = await engine.job_stats(StatsQuery(window=120, bucket=60), now=T0)
    assert all(b.estimated and 850 <= b.retried <= 1150 for b in stats.buckets), stats.buckets
    assert 1800 <= stats.retried <= 2200


async def test_failures_waiting_past_the_window_are_scaled_by_their_number(
    engine: PostgresEngine, dsn: str, prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pg_stats, "RETRY_BUDGET", 200)
    monkeypatch.setattr(pg_stats, "MIN_SAMPLE", 10)
    # 600 jobs that failed in the first bucket and wait to run again an hour later: keyed after
    # the window, a range with no end to scale by time.
    failed = "timestamp '2030-01-01 11:58' + g * interval '100 ms'"
    insert_failed(dsn, prefix, 600, state="retryable", key=f"{failed} + interval '1 hour'", failed=failed)
    stats = await engine.job_stats(StatsQuery(window=120, bucket=60), now=T0)
    assert stats.buckets[0].estimated and stats.buckets[0].retried == 600


# -- count_jobs(estimate=True) ----------------------------------------------------------------------------
async def test_a_count_beyond_the_limit_is_the_planners_estimate(
    engine: PostgresEngine, dsn: str, prefix: str
) -> None:
    insert_jobs(dsn, prefix, 3000, state="available", queue="big")
    insert_jobs(dsn, prefix, 30, state="available", queue="small")
    execute(dsn, f'ANALYZE "{prefix}".oban_jobs')
    big = await engine.estimate_jobs(JobFilter(queues=("big",)), exact_up_to=100)
    assert big.estimated and 2000 < big.count < 4000
    assert await engine.estimate_jobs(JobFilter(queues=("small",)), exact_up_to=100) == JobCount(30)
    assert await engine.estimate_jobs(JobFilter(queues=("big",)), exact_up_to=5000) == JobCount(3000)
    # The worker suffix is estimated from the worker column's statistics, not as a fixed share.
    suffixed = await engine.estimate_jobs(JobFilter(worker_suffix="w.Job"), exact_up_to=100)
    assert suffixed.estimated and 2000 < suffixed.count < 4000


async def test_more_matches_than_expected_stop_the_count_at_the_limit(
    engine: PostgresEngine, dsn: str, prefix: str
) -> None:
    insert_jobs(dsn, prefix, 5, state="available", queue="grows")
    execute(dsn, f'ANALYZE "{prefix}".oban_jobs')
    insert_jobs(dsn, prefix, 500, state="available", queue="grows")  # after the statistics were taken
    grows = await engine.estimate_jobs(JobFilter(queues=("grows",)), exact_up_to=100)
    assert grows == JobCount(101, estimated=True)  # never below what was counted before stopping


async def test_an_exact_count_that_takes_too_long_gives_the_estimate(
    engine: PostgresEngine, dsn: str, prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pg_stats, "EXACT_COUNT_MS", 1)
    execute(
        dsn,
        f"""INSERT INTO "{prefix}".oban_jobs (worker, args)
            SELECT 'tests.w.Job', jsonb_build_object('n', g, 'pad', repeat('x', 200))
            FROM generate_series(1, 100000) AS g""",
    )
    execute(dsn, f'ANALYZE "{prefix}".oban_jobs')
    # The planner takes a JSON containment for a small share; matching none, the count reads every row.
    found = await engine.estimate_jobs(JobFilter(args_contains={"n": -1}), exact_up_to=1000)
    assert found.estimated and 0 < found.count <= 1000
    assert await engine.count_jobs(JobFilter(args_contains={"n": -1})) == 0  # the exact mode still counts


async def test_the_dashboard_confirms_a_large_action_with_an_estimate(
    engine: PostgresEngine, dsn: str, prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The count's time budget is another test's subject: on a loaded machine 80 ms can pass before
    # the three rows are counted, and the answer is then (rightly) an estimate.
    monkeypatch.setattr(pg_stats, "EXACT_COUNT_MS", 10_000)
    insert_jobs(dsn, prefix, 12_000, state="completed", queue="done", at="timestamp '2030-01-01 11:30'")
    insert_jobs(dsn, prefix, 3, state="available", queue="few")
    execute(dsn, f'ANALYZE "{prefix}".oban_jobs')
    app = Conveyor(engine=engine, testing="manual")
    many = await count_matching(app, JobFilter(states=(JobState.COMPLETED,)))
    assert not many.exact and 10_000 < many.count < 14_000
    assert await count_matching(app, JobFilter(queues=("few",))) == Matching(3)
