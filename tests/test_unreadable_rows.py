"""Rows no client of ours would write (another client's junk, a hand-made UPDATE) never strand the
jobs fetched with them, and never hide the rows around them from get_job / list_jobs."""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from click.testing import CliRunner

from conveyor import Conveyor, JobFilter, JobState
from conveyor.cli import main as cli
from tests.conformance import hardening_jobs as hj
from tests.conformance.app.test_runtime_contract import wait_final
from tests.conftest import DSN


@dataclass
class Setup:
    app: Conveyor
    #: Runs ``UPDATE oban_jobs SET <assignments> WHERE id = <id>`` in the engine's own dialect.
    corrupt: Callable[[int, str], None]
    engine: str


#: Per engine: (what to write, the column the reason must name).
JUNK = {
    "postgres": [
        ("""args = '{"n": 1e400}'""", "args"),
        ("args = '[1, 2]'", "args"),
        ("errors = 'null'", "errors"),
        ("errors = '[1]'", "errors"),
        ("meta = '\"text\"'", "meta"),
        # Scalars and arrays holding the names of Conveyor's meta markers: never a unique job or a lock.
        ("meta = '\"uniq_key\"'", "meta"),
        ('meta = \'["uniq_key", "lock_key"]\'', "meta"),
        ("inserted_at = 'infinity'", "inserted_at"),
        ("scheduled_at = '-infinity'", "scheduled_at"),
        ("attempted_at = '20000-01-01'", "attempted_at"),
        ("args = (repeat('[', 1100) || repeat(']', 1100))::jsonb", "args"),
    ],
    "sqlite": [
        ("""args = '{"n": 1e400}'""", "args"),
        ("args = '{not json'", "args"),
        ("errors = 'null'", "errors"),
        ("meta = 'text'", "meta"),
        ("tags = '[1]'", "tags"),
        ("inserted_at = 'the day before yesterday'", "inserted_at"),
        ("attempted_by = 'nobody'", "attempted_by"),
        ("args = '{\"n\":' || printf('%.*c', 1100, '[') || printf('%.*c', 1100, ']') || '}'", "args"),
    ],
}


@pytest.fixture(params=["postgres", "sqlite"])
async def setup(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Setup]:
    options = {"queues": {"default": 5}, "poll_interval": 0.1, "stage_interval": 0.1, "leadership": False}
    schema = f"conveyor_junk_{uuid.uuid4().hex[:10]}"
    path = tmp_path / "junk.db"
    if request.param == "postgres":
        app = Conveyor(DSN, prefix=schema, **options)

        def corrupt(job_id: int, assignments: str) -> None:
            with psycopg.connect(DSN, autocommit=True) as conn:
                query = f'UPDATE "{schema}".oban_jobs SET {assignments} WHERE id = %s'
                conn.execute(query.encode(), (job_id,))
    else:
        app = Conveyor(f"sqlite:///{path}", **options)

        def corrupt(job_id: int, assignments: str) -> None:
            with sqlite3.connect(path) as conn:
                conn.execute(f"UPDATE oban_jobs SET {assignments} WHERE id = ?", (job_id,))

    await app.install()
    try:
        yield Setup(app, corrupt, request.param)
    finally:
        await app.stop(grace=1)
        await app.close()
        if request.param == "postgres":
            with psycopg.connect(DSN, autocommit=True) as conn:
                conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'.encode())


async def junk_jobs(setup: Setup) -> dict[int, str]:
    """One held-back job per kind of junk, corrupted, then made available at once: job id -> column."""
    junk = JUNK[setup.engine]
    ids = await setup.app.enqueue_many(
        [hj.quick.new(n=i).with_options(schedule_in=3600) for i in range(len(junk))]
    )
    for job_id, (assignments, _) in zip(ids, junk, strict=True):
        setup.corrupt(job_id, assignments)
    return {job_id: column for job_id, (_, column) in zip(ids, junk, strict=True)}


async def test_reading_shows_junk_rows_with_the_reason(setup: Setup) -> None:
    good = await setup.app.enqueue(hj.quick.new(n=1))
    bad = await junk_jobs(setup)
    listed = await setup.app.list_jobs(JobFilter(limit=1000))
    assert sorted(job.id for job in listed) == sorted([good, *bad])
    by_id = {job.id: job for job in listed}
    assert by_id[good].unreadable is None and by_id[good].args == {"n": 1}
    for job_id, column in bad.items():
        job = by_id[job_id]
        assert job.unreadable is not None and job.unreadable.startswith(f"{column}:"), job
        assert job.worker == "tests.conformance.hardening_jobs.quick"  # the readable fields stay
        found = await setup.app.get_job(job_id)
        assert found is not None and found.unreadable == job.unreadable
    # Retrying them (a statement that reads meta for unique markers) fails for none of them.
    assert sorted(await setup.app.retry_jobs(ids=list(bad))) == sorted(bad)


async def test_junk_rows_are_discarded_and_their_batch_runs(setup: Setup) -> None:
    bad = await junk_jobs(setup)
    good = await setup.app.enqueue_many([hj.quick.new(n=i) for i in range(12)])
    # Everything becomes available together, so junk and good rows share fetched batches.
    for job_id in bad:
        setup.corrupt(job_id, "state = 'available'")
    # The claim itself writes attempted_at and attempted_by: junk there is mended, the job runs.
    mended = [job_id for job_id, column in bad.items() if column in ("attempted_at", "attempted_by")]
    bad = {job_id: column for job_id, column in bad.items() if job_id not in mended}
    await setup.app.start()
    await wait_final(setup.app, good + mended, {JobState.COMPLETED}, timeout=15)
    await wait_final(setup.app, list(bad), {JobState.DISCARDED}, timeout=15)
    for job_id, column in bad.items():
        job = await setup.app.get_job(job_id)
        assert job is not None and job.state is JobState.DISCARDED
        if job.errors:  # junk inside errors itself may still be unreadable after the append
            assert f"could not be read ({column}:" in job.errors[-1]["error"], job.errors
        else:
            assert job.unreadable is not None and job.unreadable.startswith("errors:")


async def test_the_cli_lists_junk_rows_and_says_why(setup: Setup) -> None:
    bad = await junk_jobs(setup)
    url = setup.app.settings.database_url
    assert url is not None
    args = ["jobs", "--dsn", url, "--prefix", setup.app.settings.prefix]
    result = CliRunner().invoke(cli, args if setup.engine == "postgres" else args[:3])
    assert result.exit_code == 0, result.output
    for job_id, column in bad.items():
        assert f"job {job_id}: its row could not be read: {column}:" in result.output
    assert "(unreadable)" in result.output


PARTITIONED = {"allowed": 5, "partition": {"worker": True, "args": ["n"], "meta": ["lock_key"]}}


@pytest.mark.parametrize(
    "limited",
    [
        {"default": {"limit": 5, "global_limit": 5, "rate_limit": {"allowed": 1000, "period": 1}}},
        {"default": {"limit": 5, "global_limit": PARTITIONED, "rate_limit": {"allowed": 1000} | PARTITIONED}},
    ],
    ids=["limits", "partitioned"],
)
async def test_junk_rows_never_strand_a_claim_under_fleet_wide_limits(
    setup: Setup, limited: dict[str, Any]
) -> None:
    """The same as a plain fetch, for the limited claim (a lock, a count, a pipelined transaction on
    PostgreSQL) and the partitioned one (keys read from every row's args and meta): junk rows are
    discarded with the reason, the good jobs beside them run."""
    bad = await junk_jobs(setup)
    good = await setup.app.enqueue_many([hj.quick.new(n=i) for i in range(12)])
    for job_id in bad:
        setup.corrupt(job_id, "state = 'available'")
    mended = [job_id for job_id, column in bad.items() if column in ("attempted_at", "attempted_by")]
    bad = {job_id: column for job_id, column in bad.items() if job_id not in mended}
    settings = setup.app.settings
    node = Conveyor(
        settings.database_url, prefix=settings.prefix, queues=limited, poll_interval=0.1, leadership=False
    )
    await node.start()
    try:
        await wait_final(setup.app, good + mended, {JobState.COMPLETED}, timeout=15)
        await wait_final(setup.app, list(bad), {JobState.DISCARDED}, timeout=15)
    finally:
        await node.stop(grace=1)


#: Per engine: errors columns no client of ours writes, on jobs waiting for a retry.
JUNK_ERRORS = {
    "postgres": ["errors = 'null'", "errors = '[1, \"x\", null, [2]]'", 'errors = \'{"at": "2030-01-01"}\''],
    "sqlite": [
        "errors = 'null'",
        "errors = '{not json'",
        "errors = '[1, \"x\", null, [2]]'",
        "errors = '{}'",
    ],
}


async def test_counts_and_stats_read_past_junk_errors(setup: Setup) -> None:
    """Failed jobs whose errors are not a list of entries are counted as jobs and skipped as failures;
    the readable failure beside them still counts."""
    junk = JUNK_ERRORS[setup.engine]
    ids = await setup.app.enqueue_many(
        [hj.quick.new(n=i).with_options(schedule_in=3600, queue="junk") for i in range(len(junk) + 1)]
    )
    failed_at = (datetime.now(UTC) - timedelta(seconds=60)).isoformat()
    for job_id, assignments in zip(
        ids, [*junk, f'errors = \'[{{"attempt": 1, "at": "{failed_at}"}}]\''], strict=True
    ):
        setup.corrupt(job_id, f"state = 'retryable', attempt = 1, {assignments}")
    stats = await setup.app.job_stats(window=300, bucket=60)
    assert stats.retried == 1
    (counts,) = await setup.app.queue_counts()
    assert (counts.queue, counts.retryable) == ("junk", len(ids))
    assert await setup.app.count_jobs(states="retryable", worker_suffix="quick") == len(ids)
