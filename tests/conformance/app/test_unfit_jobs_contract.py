"""Jobs that do not fit the running code (issue 31.11): a worker this node cannot import, or args
its function does not take. In a rolling deploy that is a matter of minutes, so the job is offered
again to every node (snoozed, no attempt spent, the reason recorded each time) until
``unfit_job_patience`` has passed since its first misfit; only then is it discarded, saying why.
On fake time, on every engine."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime

import pytest

from conveyor import Conveyor, JobRequest, JobState
from conveyor._runtime.clock import FakeClock
from conveyor._runtime.unfit import UNFIT_SINCE
from conveyor.engine.base import Engine
from conveyor.errors import WorkerNotFoundError
from conveyor.job import Job
from conveyor.testing import drain_queue
from tests.conformance import unfit_jobs as uj
from tests.conformance.app.test_fake_time_contract import advance
from tests.helpers import poll

NODE = {"queues": {"default": 5}, "poll_interval": 0.5, "stage_interval": 0.5, "leadership": False}
WORKER = "tests.conformance.unfit_jobs"
NONE = {"completed": 0, "discarded": 0, "cancelled": 0, "retryable": 0, "scheduled": 0}


@pytest.fixture
def make(make_app: Callable[..., Conveyor]) -> Callable[..., Conveyor]:
    """Apps with this module's NODE settings unless a test says otherwise."""
    return lambda **settings: make_app(**(NODE | settings))


async def until(app: Conveyor, job_id: int, test: Callable[[Job], bool], timeout: float = 15) -> Job:
    """The job once ``test`` holds for it (real time passes here, fake time stands still)."""
    job = await poll(
        lambda: app.get_job(job_id),
        lambda j: j is not None and test(j),
        timeout=timeout,
        what=f"job {job_id}",
    )
    assert job is not None
    return job


def declined(job: Job) -> bool:
    return job.state is JobState.SCHEDULED and len(job.errors) >= 1


CASES = {
    "args-async": (f"{WORKER}.render", {"doc": "a", "fail": True}, "do not fit"),
    "args-thread": (f"{WORKER}.render_in_thread", {}, "missing doc"),
    "args-process": (f"{WORKER}.render_in_process", {"doc": "a", "fail": True}, "unknown fail"),
    "unknown-worker": (f"{WORKER}.render_v2", {"doc": "a"}, "cannot resolve worker"),
}


async def first_decline(app: Conveyor, clock: FakeClock, case: str) -> Job:
    worker, args, reason = CASES[case]
    job_id = await app.enqueue(JobRequest(worker, args=args, max_attempts=1))
    job = await until(app, job_id, declined)
    # Snoozed: the attempt given back (max_attempts 1 would otherwise be spent), the reason recorded,
    # the first misfit marked (the patience counts from there).
    assert job.attempt == 0 and reason in job.errors[0]["error"]
    assert "offered again to every node until" in job.errors[0]["error"]
    since = datetime.fromisoformat(job.meta[UNFIT_SINCE])
    assert abs((since - clock.now()).total_seconds()) < 1
    return job


@pytest.mark.parametrize("case", sorted(CASES))
async def test_an_unfit_job_is_snoozed_with_its_reason(make: Callable[..., Conveyor], case: str) -> None:
    clock = FakeClock()
    app = make(clock=clock)
    await app.install()
    await app.start()
    await first_decline(app, clock, case)


@pytest.mark.parametrize("case", ["args-async", "unknown-worker"])
async def test_an_unfit_job_is_offered_again_until_its_patience_is_spent(
    make: Callable[..., Conveyor], case: str
) -> None:
    clock = FakeClock()
    app = make(clock=clock, unfit_job_patience=60)
    await app.install()
    await app.start()
    first = await first_decline(app, clock, case)
    await advance(clock, 40)
    waiting = await until(app, first.id, lambda j: j.state is JobState.SCHEDULED and len(j.errors) > 2)
    assert waiting.meta[UNFIT_SINCE] == first.meta[UNFIT_SINCE]
    await advance(clock, 40, step=1)
    ended = await until(app, first.id, lambda j: j.state is JobState.DISCARDED)
    # Offered again with a growing pause, not in a loop: 1, 1, 2, 4 ... seconds, at most 30.
    assert 4 <= len(ended.errors) <= 12, ended.errors
    reason = CASES[case][2]
    assert all(reason in e["error"] for e in ended.errors)
    assert "no node ran it within unfit_job_patience, 60s" in ended.errors[-1]["error"]
    assert ended.attempt == 1


async def test_a_job_that_fits_later_runs_and_forgets_its_misfit(make: Callable[..., Conveyor]) -> None:
    """The new code arrives (here: the name becomes known to this node's resolver)."""
    clock = FakeClock()
    app = make(clock=clock)
    await app.install()
    await app.start()
    name = f"{WORKER}.not_deployed_yet"
    job_id = await app.enqueue(JobRequest(name, args={"doc": "b"}, max_attempts=1))
    await until(app, job_id, declined)
    app.resolver.register(uj.render, name=name)
    await advance(clock, 3)
    done = await until(app, job_id, lambda j: j.state is JobState.COMPLETED)
    assert done.attempt == 1 and done.meta.get(UNFIT_SINCE) is None
    assert "cannot resolve worker" in done.errors[0]["error"]


async def test_no_patience_discards_an_unfit_job_at_once(make: Callable[..., Conveyor]) -> None:
    app = make(unfit_job_patience=0)
    await app.install()
    await app.start()
    job_id = await app.enqueue(JobRequest(f"{WORKER}.render", args={"fail": 1}, max_attempts=5))
    ended = await until(app, job_id, lambda j: j.state is JobState.DISCARDED)
    assert ended.attempt == 1 and len(ended.errors) == 1
    assert ended.errors[0]["error"].startswith("discarded: invalid stored args=")


def job_lines(caplog: pytest.LogCaptureFixture, job_id: int) -> list[tuple[int, str]]:
    return [
        (r.levelno, r.getMessage())
        for r in caplog.records
        if r.name == "conveyor.job" and getattr(r, "job_id", None) == job_id
    ]


async def test_an_unfit_job_offered_again_is_a_warning(
    make: Callable[..., Conveyor], caplog: pytest.LogCaptureFixture
) -> None:
    """Not final: a node with code that fits may still run it (docs/guides/telemetry.md, Job logs)."""
    caplog.set_level(logging.INFO, logger="conveyor.job")
    clock = FakeClock()
    app = make(clock=clock)
    await app.install()
    await app.start()
    job = await first_decline(app, clock, "args-async")
    lines = await poll(lambda: job_lines(caplog, job.id), bool, what="the log line of the decline")
    assert lines[0][0] == logging.WARNING and "snoozed" in lines[0][1] and "ArgsDoNotFit" in lines[0][1]


async def test_a_job_discarded_for_its_args_is_an_error(
    make: Callable[..., Conveyor], caplog: pytest.LogCaptureFixture
) -> None:
    """Args that do not decode into the function's parameters end the job for good, and it is the
    job's fault: ERROR, as a failure with no attempts left (docs/guides/telemetry.md, Job logs),
    where a ``Discard`` the code chose is a WARNING."""
    caplog.set_level(logging.INFO, logger="conveyor.job")
    app = make(unfit_job_patience=0)
    await app.install()
    await app.start()
    job_id = await app.enqueue(JobRequest(f"{WORKER}.render", args={"fail": 1}, max_attempts=5))
    await until(app, job_id, lambda j: j.state is JobState.DISCARDED)
    lines = await poll(lambda: job_lines(caplog, job_id), bool, what="the log line of the discard")
    assert lines == [(logging.ERROR, lines[0][1])] and "discarded (it cannot run)" in lines[0][1]


async def test_drain_queue_has_no_other_node_to_wait_for(any_engine: Engine) -> None:
    """A test's drain declines nothing: an unfit job is discarded at once, and without safety the
    unknown worker's error reaches the test, as a job's own error does."""
    app = Conveyor(engine=any_engine)
    unfit = await app.enqueue(JobRequest(f"{WORKER}.render", args={"fail": 1}))
    assert await drain_queue(app=app, with_safety=True) == {**NONE, "discarded": 1}
    job = await app.get_job(unfit)
    assert job is not None and job.state is JobState.DISCARDED and "do not fit" in job.errors[0]["error"]
    unknown = await app.enqueue(JobRequest(f"{WORKER}.render_v3", max_attempts=1))
    with pytest.raises(WorkerNotFoundError):
        await drain_queue(app=app)
    job = await app.get_job(unknown)
    assert job is not None and job.state is JobState.DISCARDED
