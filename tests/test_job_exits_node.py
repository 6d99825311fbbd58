"""A job that calls ``os._exit`` takes its ``conveyor start`` process with it (issue 31.17). The job is
left ``executing`` under a producer that will never beat again; the node that comes up next (the
same node restarted by a supervisor, or another one) rescues it, and its errors entry says why the
attempt ended: its node died while running it. With attempts left it runs again and completes; on
its last attempt it is discarded, with that reason recorded rather than none. On both engines."""

from __future__ import annotations

import pytest

from conveyor import JobRequest, JobState
from conveyor.job import Job
from tests import forked
from tests.test_cli_start_app import Target, run_node, target, wait_until

__all__ = ["target"]  # the fixture, on both engines

EXITING_MODULE = '''
"""A job that ends its node's process on its first attempt and completes on any later one."""
import os

from conveyor import current_job, job


@job(queue="default")
async def exit_on_first_attempt() -> None:
    if current_job().attempt == 1:
        os._exit(1)
'''

#: Fast beats and a short timeout, so the dead node's producer is judged dead within a second or two
#: of the next node's start; a short rescue interval so a node restarted under the same name (which
#: still holds the lease, and rescues at once, maybe before the old rows are old enough) looks again
#: soon after; a short lease, so another node checks for a dead leader every 0.5 s, not every 3 s.
SETTINGS = {
    "CONVEYOR_LEADER_TTL": "5",
    "CONVEYOR_HEARTBEAT_INTERVAL": "0.2",
    "CONVEYOR_PRODUCER_TIMEOUT": "1",
    "CONVEYOR_RESCUE_INTERVAL": "0.5",
}


def start(target: Target, node: str) -> forked.Started:
    options = ("--import", "exiting_jobs", "--queues", "default:2", "--node", node)
    process = run_node(target, *options, "--poll-interval", "0.2", "--shutdown-grace", "1", env=SETTINGS)
    wait_until(lambda: "running queues" in log(target) or process.poll() is not None, "the node to start")
    return process


def log(target: Target) -> str:
    return (target.directory / "node.log").read_text(errors="replace")


def get(target: Target, job_id: int) -> Job:
    found = target.app.get_job_sync(job_id)
    assert found is not None
    return found


@pytest.mark.parametrize(
    ("max_attempts", "next_node", "outcome"),
    [
        (3, "another-node", "rescued to run again"),
        (1, "dying-node", "discarded: no attempts left"),  # restarted under its own name
    ],
)
def test_a_job_that_exits_its_node_is_rescued_with_the_reason_recorded(
    target: Target, max_attempts: int, next_node: str, outcome: str
) -> None:
    (target.directory / "exiting_jobs.py").write_text(EXITING_MODULE)
    job_id = target.app.enqueue_sync(
        JobRequest("exiting_jobs.exit_on_first_attempt", max_attempts=max_attempts)
    )
    dying = start(target, "dying-node")
    try:
        dying.wait(30)
    finally:
        if dying.poll() is None:
            dying.kill()
    first_log = log(target)
    assert dying.returncode == 1, first_log
    left = get(target, job_id)
    assert (left.state, left.attempt, left.attempted_by[0]) == (JobState.EXECUTING, 1, "dying-node")

    final = JobState.COMPLETED if max_attempts > 1 else JobState.DISCARDED
    survivor = start(target, next_node)
    try:
        wait_until(lambda: get(target, job_id).state is final, f"the job to be {final.value}")
    finally:
        survivor.kill()
        survivor.wait(10)
    done = get(target, job_id)
    assert [(e["attempt"], e["error"]) for e in done.errors] == [
        (1, f"the node running this job (dying-node) stopped sending heartbeats; {outcome}")
    ], first_log + log(target)
    assert done.meta.get("rescued") == 1
    if final is JobState.COMPLETED:
        assert (done.attempt, done.attempted_by[0]) == (2, next_node)
    else:
        assert done.attempt == 1 and done.discarded_at is not None
