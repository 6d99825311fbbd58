"""A workflow survives a node killed with SIGKILL in the middle of it: three ``conveyor start``
processes run its steps, one dies while it runs a step, and the workflow still finishes, each step
started once except the one cut short (started again, once, elsewhere)."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
import uuid
from contextlib import suppress
from pathlib import Path

import psycopg
import pytest

from conveyor import Conveyor, JobState, Workflow
from conveyor.engine.postgres import PostgresEngine
from tests import cluster_jobs as jobs
from tests.helpers import make_app
from tests.test_fleet_limits import spans

ROOT = Path(__file__).resolve().parent.parent
CONVEYOR = Path(sys.executable).with_name("conveyor")


def step(dsn: str, prefix: str, seconds: float = 0.3) -> object:
    return jobs.record_span.new(dsn=dsn, prefix=prefix, seconds=seconds)


@pytest.mark.slow
async def test_a_workflow_finishes_through_a_kill_and_no_step_runs_twice(
    dsn: str, prefix: str, engine: PostgresEngine, tmp_path: Path
) -> None:
    jobs.create_spans_table(dsn, prefix)
    config = tmp_path / "conveyor.toml"
    config.write_text("[queues.limited]\nlimit = 3\n")
    producer_timeout, heartbeat = 2.0, 0.5
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONVEYOR_")} | {
        "CONVEYOR_LEADERSHIP": "false",
        "CONVEYOR_HEARTBEAT_INTERVAL": str(heartbeat),
        "CONVEYOR_PRODUCER_TIMEOUT": str(producer_timeout),
    }
    # Rescue and the sweep are the leader's: an in-test node leads, with nothing of its own to run.
    lifeline = make_app(
        dsn,
        prefix,
        queues={"idle": 1},
        heartbeat_interval=heartbeat,
        producer_timeout=producer_timeout,
        rescue_interval=0.5,
        stage_interval=0.2,
    )
    workflow = Workflow(name="pipeline").add("fetch", step(dsn, prefix))
    middle = [f"render{n}" for n in range(6)]
    for name in middle:
        workflow.add(name, step(dsn, prefix, 0.6), deps=["fetch"])
    workflow.add("index", step(dsn, prefix), deps=middle)
    for name in ("pdf", "html", "epub"):
        workflow.add(name, step(dsn, prefix), deps=["index"])
    workflow.add("publish", step(dsn, prefix), deps=["pdf", "html", "epub"])
    ids = dict(zip((s.name for s in workflow.steps), await lifeline.enqueue_many(workflow), strict=True))
    logs = [tmp_path / f"node-{i}-{uuid.uuid4().hex[:6]}.log" for i in range(3)]
    processes: list[asyncio.subprocess.Process] = []
    await lifeline.start()
    try:
        for log in logs:
            with log.open("wb") as out:
                processes.append(
                    await asyncio.create_subprocess_exec(
                        str(CONVEYOR),
                        "start",
                        "--dsn",
                        dsn,
                        "--prefix",
                        prefix,
                        "--config",
                        str(config),
                        "--import",
                        "tests.cluster_jobs",
                        "--poll-interval",
                        "0.2",
                        "--shutdown-grace",
                        "1",
                        cwd=ROOT,
                        env=env,
                        stdout=out,
                        stderr=out,
                    )
                )
        deadline = time.monotonic() + 60

        def output() -> str:
            return "\n".join(f"--- {log.name}:\n{log.read_text(errors='replace')[-2000:]}" for log in logs)

        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
            victim = None
            while victim is None:  # kill a process while it runs one of the middle steps
                assert time.monotonic() < deadline, output()
                running = {
                    pid
                    for job_id, pid, _, _, ended in await spans(conn, prefix)
                    if ended is None and job_id in {ids[name] for name in middle}
                }
                victim = next((p for p in processes if p.pid in running), None)
                await asyncio.sleep(0.01)
            victim.send_signal(signal.SIGKILL)
            await victim.wait()
            while True:
                assert time.monotonic() < deadline, output()
                status = await lifeline.workflow_status(workflow.id)
                if status.finished:
                    break
                await asyncio.sleep(0.1)
            found = await spans(conn, prefix)
    finally:
        for process in processes:
            if process.returncode is None:
                with suppress(ProcessLookupError):
                    process.kill()
            with suppress(Exception):
                await asyncio.wait_for(process.wait(), 10)
        await lifeline.stop()

    assert set(status.states.values()) == {JobState.COMPLETED}, status.states
    starts: dict[int, list[tuple[int, int]]] = {}
    for job_id, pid, attempt, _, _ in found:
        starts.setdefault(job_id, []).append((pid, attempt))
    cut_short = {job_id for job_id, pid, _, _, end in found if pid == victim.pid and end is None}
    assert cut_short, "the victim was running a step when it died"
    for name, job_id in ids.items():
        runs = starts[job_id]
        if job_id in cut_short:
            assert len(runs) == 2 and runs[1][0] != victim.pid, (name, runs)
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
    config = tmp_path / "conveyor.toml"
    config.write_text("[queues.limited]\nlimit = 3\n")
    producer_timeout, heartbeat = 2.0, 0.5
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONVEYOR_")} | {
        "CONVEYOR_LEADERSHIP": "false",
        "CONVEYOR_HEARTBEAT_INTERVAL": str(heartbeat),
        "CONVEYOR_PRODUCER_TIMEOUT": str(producer_timeout),
    }
    lifeline = Conveyor(
        url,
        queues={"idle": 1},
        heartbeat_interval=heartbeat,
        producer_timeout=producer_timeout,
        rescue_interval=0.5,
        stage_interval=0.2,
        poll_interval=0.2,
    )
    await lifeline.install()
    workflow = Workflow(name="pipeline").add("fetch", jobs.sleep_step.new(seconds=0.3))
    middle = [f"render{n}" for n in range(6)]
    for name in middle:
        workflow.add(name, jobs.sleep_step.new(seconds=0.6), deps=["fetch"])
    workflow.add("index", jobs.sleep_step.new(seconds=0.3), deps=middle)
    workflow.add("publish", jobs.sleep_step.new(seconds=0.3), deps=["index"])
    ids = dict(zip((s.name for s in workflow.steps), await lifeline.enqueue_many(workflow), strict=True))
    logs = [tmp_path / f"node-{i}.log" for i in range(3)]
    processes: list[asyncio.subprocess.Process] = []
    await lifeline.start()
    try:
        for log in logs:
            with log.open("wb") as out:
                processes.append(
                    await asyncio.create_subprocess_exec(
                        str(CONVEYOR),
                        "start",
                        "--dsn",
                        url,
                        "--config",
                        str(config),
                        "--import",
                        "tests.cluster_jobs",
                        "--poll-interval",
                        "0.2",
                        "--shutdown-grace",
                        "1",
                        cwd=ROOT,
                        env=env,
                        stdout=out,
                        stderr=out,
                    )
                )
        deadline = time.monotonic() + 60

        def output() -> str:
            return "\n".join(f"--- {log.name}:\n{log.read_text(errors='replace')[-2000:]}" for log in logs)

        victim = None
        while victim is None:  # kill a process while it runs one of the middle steps
            assert time.monotonic() < deadline, output()
            running = await lifeline.list_jobs(states=["executing"], ids=[ids[name] for name in middle])
            pids = {int(j.attempted_by[0].rsplit("-", 2)[-2]) for j in running if j.attempted_by}
            victim = next((p for p in processes if p.pid in pids), None)
            await asyncio.sleep(0.02)
        victim.send_signal(signal.SIGKILL)
        await victim.wait()
        while not (status := await lifeline.workflow_status(workflow.id)).finished:
            assert time.monotonic() < deadline, output()
            await asyncio.sleep(0.1)
    finally:
        for process in processes:
            if process.returncode is None:
                with suppress(ProcessLookupError):
                    process.kill()
            with suppress(Exception):
                await asyncio.wait_for(process.wait(), 10)
        await lifeline.stop()

    assert set(status.states.values()) == {JobState.COMPLETED}, status.states
    steps = status.steps
    again = [name for name, job in steps.items() if job.attempt == 2]
    assert again and all(job.attempt in (1, 2) for job in steps.values())
    for name in again:  # run again on a live node
        assert steps[name].attempted_by[0].rsplit("-", 2)[-2] != str(victim.pid), steps[name].attempted_by
    for stored in workflow.steps:
        for dep in stored.deps:
            started, ended = steps[stored.name].attempted_at, steps[dep].completed_at
            assert started is not None and ended is not None and started >= ended, (stored.name, dep)
