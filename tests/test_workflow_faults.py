"""A workflow survives a node killed with SIGKILL in the middle of it: three ``conveyor start``
processes run its steps, one dies while it runs a step, and the workflow still finishes, each step
started once except the one cut short (started again, once, elsewhere). On PostgreSQL the steps also
log their starts and ends to a table; on SQLite the rows alone are the record."""

from __future__ import annotations

import signal
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest

from conveyor import Conveyor, JobRequest, JobState, Workflow, WorkflowStatus
from conveyor.engine.postgres import PostgresEngine
from tests import cluster_jobs as jobs
from tests.helpers import poll
from tests.node_processes import describe, node_env, node_processes
from tests.test_fleet_limits import spans

PRODUCER_TIMEOUT, HEARTBEAT = 2.0, 0.5
MIDDLE = [f"render{n}" for n in range(6)]


def pipeline(step: Any) -> Workflow:
    """fetch, six renders after it, index after them all, three packages, publish after those;
    ``step(seconds)`` makes each step's request."""
    workflow = Workflow(name="pipeline").add("fetch", step(0.3))
    for name in MIDDLE:
        workflow.add(name, step(0.6), deps=["fetch"])
    workflow.add("index", step(0.3), deps=MIDDLE)
    for name in ("pdf", "html", "epub"):
        workflow.add(name, step(0.3), deps=["index"])
    return workflow.add("publish", step(0.3), deps=["pdf", "html", "epub"])


async def running_rows(lifeline: Conveyor, ids: dict[str, int]) -> set[int]:
    """The processes the database says run a middle step now (claimed it, maybe not started yet),
    by the pid in their default node names (``host-pid-random``)."""
    running = await lifeline.list_jobs(states=["executing"], ids=[ids[name] for name in MIDDLE])
    parts = [job.attempted_by[0].rsplit("-", 2) for job in running if job.attempted_by]
    return {int(part[-2]) for part in parts if len(part) == 3 and part[-2].isdigit()}


async def finish_through_a_kill(
    lifeline: Conveyor,
    url: str,
    options: tuple[str, ...],
    tmp_path: Path,
    workflow: Workflow,
    running: Callable[[dict[str, int]], Awaitable[set[int]]],
) -> tuple[dict[str, int], WorkflowStatus, int]:
    """Enqueue ``workflow`` through ``lifeline`` (a node that leads: it rescues and sweeps), run it on
    three ``conveyor start`` processes, SIGKILL one whose pid ``running`` gives (one running a middle
    step) and wait until the workflow has finished: the step ids by name, its status, and the dead
    process's pid."""
    config = tmp_path / "conveyor.toml"
    config.write_text("[queues.limited]\nlimit = 3\n")
    ids = dict(zip((s.name for s in workflow.steps), await lifeline.enqueue_many(workflow), strict=True))
    env = node_env(HEARTBEAT, PRODUCER_TIMEOUT)
    await lifeline.start()
    try:
        async with node_processes(url, tmp_path, 3, env, *options, "--config", str(config)) as nodes:
            deadline = time.monotonic() + 60

            async def running_node() -> Any:
                pids = await running(ids)
                return next((n for n in nodes if n.pid in pids), None)

            victim = await poll(
                running_node, timeout=60, what=f"a node running a step\n{describe(nodes)}", every=0.01
            )
            victim.process.send_signal(signal.SIGKILL)
            await victim.process.exited()
            status = await poll(
                lambda: lifeline.workflow_status(workflow.id),
                lambda status: status.finished,
                timeout=max(0.0, deadline - time.monotonic()),
                what=f"the workflow to finish\n{describe(nodes)}",
                every=0.1,
            )
    finally:
        await lifeline.stop()
    return ids, status, victim.pid


def lifeline_settings() -> dict[str, Any]:
    return {
        "queues": {"idle": 1},
        "heartbeat_interval": HEARTBEAT,
        "producer_timeout": PRODUCER_TIMEOUT,
        "rescue_interval": 0.5,
        "stage_interval": 0.2,
        "poll_interval": 0.2,
    }


@pytest.mark.slow
async def test_a_workflow_finishes_through_a_kill_and_no_step_runs_twice(
    dsn: str, prefix: str, engine: PostgresEngine, tmp_path: Path
) -> None:
    jobs.create_spans_table(dsn, prefix)

    def step(seconds: float) -> JobRequest:
        return jobs.record_span.new(dsn=dsn, prefix=prefix, seconds=seconds)

    async def running(ids: dict[str, int]) -> set[int]:
        """The processes that started a middle step and have not ended it (by the steps' log)."""
        middle = {ids[name] for name in MIDDLE}
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
            found = await spans(conn, prefix)
        return {pid for job_id, pid, _, _, end in found if end is None and job_id in middle}

    workflow = pipeline(step)
    lifeline = Conveyor(dsn, prefix=prefix, **lifeline_settings())
    options = ("--prefix", prefix)
    ids, status, victim = await finish_through_a_kill(lifeline, dsn, options, tmp_path, workflow, running)
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        found = await spans(conn, prefix)

    assert set(status.states.values()) == {JobState.COMPLETED}, status.states
    starts: dict[int, list[tuple[int, int]]] = {}
    for job_id, pid, attempt, _, _ in found:
        starts.setdefault(job_id, []).append((pid, attempt))
    cut_short = {job_id for job_id, pid, _, _, end in found if pid == victim and end is None}
    assert cut_short, "the victim was running a step when it died"
    for name, job_id in ids.items():
        runs = starts[job_id]
        if job_id in cut_short:
            assert len(runs) == 2 and runs[1][0] != victim, (name, runs)
        else:
            assert len(runs) == 1, (name, runs)
    # Each step started only after every step it depends on had ended.
    ended = {job_id: end for job_id, _, _, _, end in found if end is not None}
    began = {
        job_id: start
        for job_id, _, attempt, start, _ in found
        if attempt == max(a for _, a in starts[job_id])
    }
    for stored in workflow.steps:
        for dep in stored.deps:
            assert began[ids[stored.name]] >= ended[ids[dep]], (stored.name, dep)


@pytest.mark.slow
async def test_a_workflow_finishes_through_a_kill_on_sqlite(tmp_path: Path) -> None:
    """The same on one SQLite file shared by three processes, judged by the rows alone: every step
    completes on attempt 1, except the one the dead process was running (attempt 2, another node),
    and no step started before its dependencies completed."""
    url = f"sqlite:///{tmp_path / 'flow.db'}"
    lifeline = Conveyor(url, **lifeline_settings())
    await lifeline.install()
    workflow = pipeline(lambda seconds: jobs.sleep_step.new(seconds=seconds))
    _, status, victim = await finish_through_a_kill(
        lifeline, url, (), tmp_path, workflow, lambda ids: running_rows(lifeline, ids)
    )

    assert set(status.states.values()) == {JobState.COMPLETED}, status.states
    steps = status.steps
    again = [name for name, job in steps.items() if job.attempt == 2]
    assert again and all(job.attempt in (1, 2) for job in steps.values())
    for name in again:  # run again on a live node
        assert steps[name].attempted_by[0].rsplit("-", 2)[-2] != str(victim), steps[name].attempted_by
    for stored in workflow.steps:
        for dep in stored.deps:
            started, ended = steps[stored.name].attempted_at, steps[dep].completed_at
            assert started is not None and ended is not None and started >= ended, (stored.name, dep)
