"""Relay across processes: a ``conveyor start`` node in another process runs the jobs; this process
waits for them, signals them and reads their progress, on PostgreSQL and on a shared SQLite file."""

from __future__ import annotations

import statistics
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from conveyor import Conveyor, JobState
from tests.conformance import relay_jobs as jobs
from tests.conftest import DSN
from tests.helpers import poll
from tests.node_processes import NodeProcess, describe, node_processes


@pytest.fixture(params=["postgres", "sqlite"])
async def remote(
    request: pytest.FixtureRequest, prefix: str, tmp_path: Path
) -> AsyncIterator[tuple[Conveyor, NodeProcess]]:
    """An app without queues in this process, and one node process running "default" (limit 5)."""
    if request.param == "postgres":
        url, options = DSN, ("--prefix", prefix)
        app = Conveyor(DSN, prefix=prefix, poll_interval=0.2)
    else:
        url, options = f"sqlite:///{tmp_path / 'relay.db'}", ()
        app = Conveyor(url, poll_interval=0.2)
    await app.install()
    config = tmp_path / "conveyor.toml"
    config.write_text("[queues.default]\nlimit = 5\n")
    try:
        async with node_processes(url, tmp_path, 1, {}, *options, "--config", str(config)) as nodes:

            async def serving() -> bool:
                return any(q.queue == "default" for q in await app.queues())

            await poll(serving, timeout=30, what=f"the node's queue\n{describe(nodes)}", every=0.05)
            yield app, nodes[0]
    finally:
        await app.close()


@pytest.mark.slow
async def test_a_wait_returns_within_50_ms_of_the_ack_on_another_node(
    remote: tuple[Conveyor, NodeProcess],
) -> None:
    app, node = remote
    lags = []
    for value in range(12):
        job_id = await app.enqueue(jobs.doubled.new(value=value))
        done = await app.wait(job_id, timeout=20)
        returned = datetime.now(UTC)
        assert done.result == 2 * value and node.owns(done.attempted_by[0])
        assert done.completed_at is not None
        lags.append((returned - done.completed_at).total_seconds())
    # The first waits open the listener and warm the connections: judge the others.
    assert statistics.median(lags[2:]) <= 0.05, lags


@pytest.mark.slow
async def test_signals_and_progress_cross_processes(remote: tuple[Conveyor, NodeProcess]) -> None:
    app, node = remote
    echoing, deciding, reporting = await app.enqueue_many(
        [
            jobs.echoes_messages.new(count=2),
            jobs.awaits_two_decisions.new(),
            jobs.reports_concurrently.new(coroutines=4),
        ]
    )

    async def state_of(job_id: int) -> JobState | None:
        found = await app.get_job(job_id)
        return found.state if found is not None else None

    async def both_waiting() -> bool:
        return (
            await state_of(echoing) is JobState.EXECUTING and await state_of(deciding) is JobState.SCHEDULED
        )

    async def until(probe: Any, done: Any, what: str) -> None:
        try:
            await poll(probe, done, timeout=30, what=what, every=0.05)
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n{node.output()}") from None

    await until(both_waiting, bool, "both jobs waiting")
    await app.signal(echoing, {"n": 1})
    await app.signal(echoing, {"n": 2})
    assert (await app.wait(echoing, timeout=20)).result == [{"n": 1}, {"n": 2}]
    # The waiting job lets go of its slot each time and wakes on each message.
    assert await app.signal(deciding, {"first": True}) is JobState.AVAILABLE
    await until(
        lambda: app.get_job(deciding),
        lambda found: found is not None and found.meta.get("awaiting_signal", {}).get("position") == 1,
        "the second wait",
    )
    await app.signal(deciding, {"second": True})
    decided = await app.wait(deciding, timeout=20)
    assert decided.result == [{"first": True}, {"second": True}, 2]
    # Progress written by the other process is visible here while the job runs.
    await until(
        lambda: app.get_job(reporting),
        lambda found: found is not None and found.progress.get("phase") == "reported",
        "the reported progress",
    )
    await app.signal(reporting, {"release": 1})
    assert (await app.wait(reporting, timeout=20)).progress["part3"] == 4
