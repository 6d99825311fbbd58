"""A fleet on MariaDB: real ``conveyor start`` processes sharing one database drain a backlog, each
job exactly once; a node killed with SIGKILL mid-job has the job rescued by the leader and run again
once on a live node (issue 38). Each test gets a private database, dropped afterwards."""

from __future__ import annotations

import signal
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from conveyor import Conveyor, JobFilter, JobState
from tests import cluster_jobs as jobs
from tests.conformance import mariadb
from tests.helpers import holds, poll
from tests.node_processes import describe, node_env, node_processes

pytestmark = pytest.mark.skipif(mariadb.UNREACHABLE is not None, reason=str(mariadb.UNREACHABLE))

#: Seconds of slack on timing assertions: two CPU cores shared with other work.
SLACK = 1.5
BACKLOG = 5_000


@pytest.fixture
def url() -> Iterator[str]:
    """The URL of a private database on the MariaDB server, dropped afterwards."""
    name = f"conveyor_fleet_{uuid.uuid4().hex[:10]}"
    base = mariadb.URL.rsplit("/", 1)[0]
    yield f"{base}/{name}"
    mariadb.release(f"{mariadb.TAG}{name}")


async def counts(app: Conveyor) -> dict[JobState, int]:
    engine = await app.engine()
    return {state: await engine.count_jobs(JobFilter(states=[state])) for state in JobState}


@pytest.mark.slow
async def test_two_node_processes_drain_a_backlog_each_job_exactly_once(url: str, tmp_path: Path) -> None:
    inserter = Conveyor(url)
    try:
        await inserter.install()
        await inserter.enqueue_many([jobs.noop.new(n=i) for i in range(BACKLOG)])
        env = {"CONVEYOR_HEARTBEAT_INTERVAL": "0.5"}
        async with node_processes(url, tmp_path, 2, env, "-q", "default:20") as nodes:
            started = time.monotonic()
            await poll(
                lambda: counts(inserter),
                lambda c: c[JobState.COMPLETED] == BACKLOG,
                timeout=240,
                every=0.5,
                what=f"the backlog drained\n{describe(nodes)}",
            )
            took = time.monotonic() - started
            print(
                f"\n{BACKLOG} jobs drained by 2 node processes in {took:.1f}s ({BACKLOG / took:.0f} jobs/s)"
            )
            done = await inserter.list_jobs(states=["completed"], limit=BACKLOG)
            assert len(done) == BACKLOG
            # Claimed once each: a second claim would have made a second attempt.
            assert {j.attempt for j in done} == {1}
            assert sorted(j.args["n"] for j in done) == list(range(BACKLOG))
            by_node: dict[str, int] = {}
            for j in done:
                by_node[j.attempted_by[0]] = by_node.get(j.attempted_by[0], 0) + 1
            print(f"jobs per node: {sorted(by_node.values())}")
            assert len(by_node) == 2 and all(any(n.owns(node) for n in nodes) for node in by_node)
            assert (await counts(inserter))[JobState.EXECUTING] == 0
    finally:
        await inserter.close()


@pytest.mark.slow
async def test_the_job_of_a_killed_node_process_runs_again_once_on_a_live_node(
    url: str, tmp_path: Path
) -> None:
    producer_timeout, rescue_interval, heartbeat = 2.0, 0.5, 0.5
    survivor = Conveyor(
        url,
        queues={"limited": 2},
        node=f"survivor-{uuid.uuid4().hex[:6]}",
        poll_interval=0.2,
        leader_ttl=2.0,
        heartbeat_interval=heartbeat,
        producer_timeout=producer_timeout,
        rescue_interval=rescue_interval,
        shutdown_grace=1,
    )
    await survivor.install()
    job_id = await survivor.enqueue(jobs.sleeps_first.new(first=60.0, later=0.1))
    env = node_env(heartbeat, producer_timeout)
    async with node_processes(url, tmp_path, 1, env, "-q", "limited:2") as nodes:
        (doomed,) = nodes
        try:
            running = await poll(
                lambda: survivor.get_job(job_id),
                lambda j: j is not None and j.state is JobState.EXECUTING,
                timeout=30,
                what=f"the first run\n{describe(nodes)}",
            )
            assert running is not None and doomed.owns(running.attempted_by[0])
            await survivor.start()
            assert survivor.node is not None and survivor.node.leadership.is_leader
            # A live node's job is left alone however long it runs.
            await holds(
                lambda: survivor.get_job(job_id),
                lambda j: j is not None and j.state is JobState.EXECUTING and j.attempt == 1,
                during=producer_timeout + heartbeat,
                what="the running job",
            )

            doomed.process.send_signal(signal.SIGKILL)
            killed = time.monotonic()
            await doomed.process.exited()
            done = await poll(
                lambda: survivor.get_job(job_id),
                lambda j: j is not None and j.state is JobState.COMPLETED,
                timeout=producer_timeout + rescue_interval + 15,
                every=0.05,
                what="the rescued job to complete",
            )
            took = time.monotonic() - killed
            print(f"\nrescued job completed {took:.3f}s after SIGKILL (timeout {producer_timeout}s)")
            assert done is not None and done.attempt == 2
            assert done.meta.get("rescued") == 1
            assert done.attempted_by[0] == survivor.settings.node
            assert "stopped sending heartbeats" in done.errors[-1]["error"]
            assert took < producer_timeout + rescue_interval + 0.1 + SLACK, took
            await holds(
                lambda: survivor.get_job(job_id),
                lambda j: j is not None and j.attempt == 2 and j.state is JobState.COMPLETED,
                during=rescue_interval * 3,
                what="the completed job",
            )
        finally:
            await survivor.stop()
            await survivor.close()
