"""The MySQL/MariaDB engine's ``estimate_jobs`` beyond its limit: what it estimates instead of
counting (the conformance suite covers the exact counts on every engine)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from conveyor import Conveyor, JobCount, JobFilter, JobState
from conveyor.engine.mysql import MysqlEngine
from conveyor.engine.mysql import stats as mysql_stats
from conveyor.web.dashboard.counts import Matching, count_matching
from tests.conformance import mariadb

pytestmark = pytest.mark.skipif(mariadb.UNREACHABLE is not None, reason=mariadb.UNREACHABLE or "")


@pytest.fixture
async def engine() -> AsyncIterator[MysqlEngine]:
    async with mariadb.installed() as engine:
        yield engine


async def insert_jobs(
    engine: MysqlEngine, count: int, *, state: str, queue: str, worker: str = "w.Job"
) -> None:
    """``count`` jobs by one statement (MariaDB's sequence engine numbers them)."""
    table, numbers = f'"{engine.database}".oban_jobs', f'"{engine.database}".seq_1_to_{count}'
    async with engine.transaction() as cursor:
        await cursor.execute(
            f"INSERT INTO {table} (state, queue, worker, args) "
            f"SELECT %s, %s, %s, JSON_OBJECT('n', seq) FROM {numbers}",
            (state, queue, worker),
        )


async def test_past_the_limit_the_count_goes_on_while_there_is_time(engine: MysqlEngine) -> None:
    await insert_jobs(engine, 3000, state="available", queue="big")
    await insert_jobs(engine, 30, state="available", queue="small")
    # More than exact_up_to: marked estimated, though counted to the end within the time.
    big = await engine.estimate_jobs(JobFilter(queues=("big",)), exact_up_to=100)
    assert big == JobCount(3000, estimated=True)
    assert await engine.estimate_jobs(JobFilter(queues=("small",)), exact_up_to=100) == JobCount(30)
    assert await engine.estimate_jobs(JobFilter(queues=("big",)), exact_up_to=5000) == JobCount(3000)


async def test_without_time_to_count_it_is_the_optimizers_estimate(
    engine: MysqlEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(mysql_stats, "COUNT_BUDGET_MS", 0)
    await insert_jobs(engine, 3000, state="available", queue="big")
    await insert_jobs(engine, 30, state="available", queue="small")
    # InnoDB's estimate of an index range: exact over a few pages, else extrapolated and doubled.
    big = await engine.estimate_jobs(JobFilter(queues=("big",)), exact_up_to=100)
    assert big.estimated and 3000 <= big.count <= 6000
    # No index serves a worker's suffix: the optimizer takes it to keep every row it reads.
    suffixed = await engine.estimate_jobs(JobFilter(worker_suffix="w.Job"), exact_up_to=100)
    assert suffixed.estimated and 3000 <= suffixed.count <= 6000


async def test_an_exact_count_that_takes_too_long_gives_the_estimate(
    engine: MysqlEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(mysql_stats, "COUNT_BUDGET_MS", 6)
    await insert_jobs(engine, 100_000, state="available", queue="default")
    # Matching none, the count of a JSON containment reads every row: past the time, the estimate.
    found = await engine.estimate_jobs(JobFilter(args_contains={"n": -1}), exact_up_to=1000)
    # InnoDB samples a few index pages for it: under load it was seen at 49,883 of the 100,000 rows.
    assert found.estimated and 25_000 <= found.count <= 400_000
    assert await engine.count_jobs(JobFilter(args_contains={"n": -1})) == 0  # the exact mode still counts
    # The connection the count timed out on goes on serving.
    assert await engine.estimate_jobs(JobFilter(queues=("nowhere",)), exact_up_to=10) == JobCount(0)


async def test_the_dashboard_confirms_a_large_action_with_an_estimate(engine: MysqlEngine) -> None:
    await insert_jobs(engine, 12_000, state="completed", queue="done")
    await insert_jobs(engine, 3, state="available", queue="few")
    app = Conveyor(engine=engine, testing="manual")
    many = await count_matching(app, JobFilter(states=(JobState.COMPLETED,)))
    assert not many.exact and many.count == 12_000
    assert await count_matching(app, JobFilter(queues=("few",))) == Matching(3)
