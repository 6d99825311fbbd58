"""``conveyor start`` ends at SIGTERM even when a thread cannot be stopped: a thread job that outlives
``shutdown_grace``, or a thread a job started and left running. The jobs are given back, then the
process exits with a non-zero status and a log line naming the abandoned jobs and the threads."""

from __future__ import annotations

import signal
import subprocess
import time

import pytest

from conveyor import JobRequest, JobState
from tests import forked
from tests.test_cli_start_app import Target, run_node, target, wait_until

__all__ = ["target"]  # the fixture, on both engines

STUCK_MODULE = '''
"""Jobs whose threads outlive the node's shutdown."""
import threading
import time

from conveyor import job


@job(queue="default", executor="thread")
def sleep_forever() -> None:
    while True:  # deaf to the expiry the shutdown sets on its context
        time.sleep(0.05)


@job(queue="default", executor="thread")
def leak_a_thread() -> None:
    threading.Thread(target=time.sleep, args=(3600,), name="leaked-by-a-job").start()
'''

#: The exit status of a node that left threads behind (cli/start.py).
EXIT_THREADS_LEFT = 3
GRACE = 1.0


def start(target: Target) -> forked.Started:
    (target.directory / "stuck_jobs.py").write_text(STUCK_MODULE)
    options = ("--import", "stuck_jobs", "--queues", "default:2", "--shutdown-grace", str(GRACE))
    process = run_node(target, *options, "--poll-interval", "0.2")
    log = target.directory / "node.log"
    wait_until(lambda: "running queues" in log.read_text(), "the node to start")
    return process


def terminate(process: forked.Started, target: Target) -> tuple[float, str]:
    """SIGTERM; the seconds until the process ended (it is killed after 20 s) and its output."""
    sent = time.monotonic()
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(20)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        pytest.fail(
            "the node did not exit within 20 s of SIGTERM:\n" + (target.directory / "node.log").read_text()
        )
    return time.monotonic() - sent, (target.directory / "node.log").read_text()


def test_a_thread_job_past_the_grace_is_given_back_and_the_node_exits(target: Target) -> None:
    process = start(target)
    job_id = target.app.enqueue_sync(JobRequest("stuck_jobs.sleep_forever", max_attempts=3))
    wait_until(lambda: target.state(job_id) is JobState.EXECUTING, "the job to run")
    took, output = terminate(process, target)
    assert process.returncode == EXIT_THREADS_LEFT, output
    assert took < GRACE + 6, output  # the grace, the give-back, a second for threads to end
    assert f"abandoned jobs: {job_id}" in output and "conveyor-job" in output, output
    assert target.state(job_id) is JobState.AVAILABLE


def test_a_thread_a_job_left_running_does_not_keep_the_node_alive(target: Target) -> None:
    process = start(target)
    job_id = target.app.enqueue_sync(JobRequest("stuck_jobs.leak_a_thread"))
    wait_until(lambda: target.state(job_id) is JobState.COMPLETED, "the job to complete")
    took, output = terminate(process, target)
    assert process.returncode == EXIT_THREADS_LEFT, output
    assert took < GRACE + 6, output
    assert "leaked-by-a-job" in output and "abandoned jobs: none" in output, output


def test_a_clean_stop_still_exits_0(target: Target) -> None:
    process = start(target)
    _, output = terminate(process, target)
    assert process.returncode == 0, output
    assert "still running" not in output, output
