"""Chunk workers (issue 37, Oban Pro's ``Chunk``): one call of the code for up to ``size`` jobs of a
queue, or for what came within ``timeout`` of the chunk's first job; each job still its own row,
acked by what the call returned for it. On every engine, on fake time."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from conveyor import Chunk, ChunkResult, Conveyor, JobState, ValidationError, job
from conveyor._runtime.clock import FakeClock
from conveyor.engine.base import Engine
from conveyor.job import Job
from conveyor.testing import drain_queue, process_job
from tests.conformance import chunk_jobs as cj
from tests.conformance.app.test_fake_time_contract import advance, settle
from tests.conformance.conftest import ENGINES, release_schema
from tests.helpers import poll

NODE = {"queues": {"chunky": 10}, "poll_interval": 30.0, "stage_interval": 30.0, "leadership": False}


@pytest.fixture
async def node(make_app: Callable[..., Conveyor]) -> tuple[Conveyor, FakeClock]:
    """A started node on fake time (``make_app`` stops it and releases its database after)."""
    clock = FakeClock()
    app = make_app(clock=clock, **NODE)
    await app.install()
    await app.start()
    return app, clock


async def test_a_chunk_is_called_once_full_and_the_rest_after_its_timeout(
    node: tuple[Conveyor, FakeClock],
) -> None:
    app, clock = node
    tag = uuid.uuid4().hex
    ids = list(await app.enqueue_many([cj.gather.new(tag=tag, n=n) for n in range(4)]))

    # Three of the four fill a chunk at once, on no fake time at all.
    async def states() -> list[Job]:
        return [j for j in [await app.get_job(i) for i in ids] if j is not None]

    done = await poll(
        states,
        lambda jobs: sum(j.state is JobState.COMPLETED for j in jobs) == 3,
        what="three jobs completed by a full chunk",
    )
    completed = [j for j in done if j.state is JobState.COMPLETED]
    assert all(j.attempt == 1 for j in completed)
    (left,) = [j for j in done if j.state is JobState.EXECUTING]
    await advance(clock, 59)
    assert len(cj.CALLS[tag]) == 1  # the fourth waits for its chunk's timeout
    await advance(clock, 2)
    await settle(app, left.id, JobState.COMPLETED)
    # Which three came first is the claim's order (an UPDATE ... RETURNING keeps none).
    assert cj.CALLS[tag] == [sorted(j.args["n"] for j in completed), [left.args["n"]]]


async def test_each_job_of_a_chunk_ends_as_the_result_names_it(node: tuple[Conveyor, FakeClock]) -> None:
    app, _ = node
    tag = uuid.uuid4().hex
    does = ["ok", "fail", "discard", "cancel", "snooze"]
    ids = await app.enqueue_many([cj.sort_out.new(tag=tag, n=n, do=do) for n, do in enumerate(does)])
    ended = {JobState.COMPLETED, JobState.RETRYABLE, JobState.DISCARDED, JobState.CANCELLED}
    ended.add(JobState.SCHEDULED)
    jobs = [
        await poll(lambda i=i: app.get_job(i), lambda j: j is not None and j.state in ended, what=f"job {i}")
        for i in ids
    ]
    assert cj.CALLS[tag] == [[0, 1, 2, 3, 4]]  # one call for the five
    ok, fail, discard, cancel, snooze = jobs
    assert ok.state is JobState.COMPLETED and not ok.errors
    assert fail.state is JobState.RETRYABLE and "ValueError: bad row" in fail.errors[-1]["error"]
    assert discard.state is JobState.DISCARDED and "not ours" in discard.errors[-1]["error"]
    assert cancel.state is JobState.CANCELLED and "withdrawn" in cancel.errors[-1]["error"]
    assert snooze.state is JobState.SCHEDULED and not snooze.errors


async def test_an_error_raised_by_a_chunk_retries_all_its_jobs(node: tuple[Conveyor, FakeClock]) -> None:
    app, _ = node
    tag = uuid.uuid4().hex
    ids = await app.enqueue_many([cj.fail_all.new(tag=tag, n=n) for n in range(2)])
    for job_id in ids:
        failed = await settle(app, job_id, JobState.RETRYABLE)
        text = failed.errors[-1]["error"]
        assert failed.attempt == 1 and "RuntimeError: the bulk insert failed" in text
        assert text.count("raise RuntimeError") == 1  # one traceback each, however many share it
    assert cj.CALLS[tag] == [[0, 1]]


async def test_the_workers_timeout_bounds_the_chunks_call(node: tuple[Conveyor, FakeClock]) -> None:
    app, clock = node
    tag = uuid.uuid4().hex
    job_id = await app.enqueue(cj.too_slow.new(tag=tag, n=0))
    await poll(lambda: cj.CALLS.get(tag), what="the chunk's call")
    await advance(clock, 6)
    failed = await settle(app, job_id, JobState.RETRYABLE)
    assert "JobTimeout: job exceeded its timeout of 5s" in failed.errors[-1]["error"]


async def test_a_worker_class_gets_its_chunk_in_process(node: tuple[Conveyor, FakeClock]) -> None:
    app, _ = node
    tag = uuid.uuid4().hex
    new = cj.GatherInThread.new  # type: ignore[attr-defined]
    ids = await app.enqueue_many([new(tag=tag, n=n) for n in range(2)])
    for job_id in ids:
        await settle(app, job_id, JobState.COMPLETED)
    assert cj.CALLS[tag] == [[0, 1]] and cj.THREADS[tag] != threading.main_thread().name


async def test_a_stopping_node_calls_its_unfilled_chunks_at_once(engine_name: str, tmp_path: Path) -> None:
    """A chunk's timeout (60 s here, on a clock that never moves) may outlast the shutdown grace:
    the jobs waiting for it run at the stop instead of being given back."""
    schemas: list[str] = []
    app = Conveyor(engine=ENGINES[engine_name](tmp_path, schemas), clock=FakeClock(), **NODE)
    reader = Conveyor(engine=ENGINES[engine_name](tmp_path, schemas))
    try:
        await app.install()
        await app.start()
        tag = uuid.uuid4().hex
        ids = await app.enqueue_many([cj.gather.new(tag=tag, n=n) for n in range(2)])
        for job_id in ids:
            await settle(app, job_id, JobState.EXECUTING)
        await app.stop(grace=5)
        assert cj.CALLS[tag] == [[0, 1]]
        for job_id in ids:
            done = await reader.get_job(job_id)
            assert done is not None and done.state is JobState.COMPLETED
    finally:
        await app.stop(grace=1)
        await reader.close()
        for schema in schemas:
            release_schema(schema)


async def test_a_process_queue_runs_its_chunk_workers_on_the_loop(engine_name: str, tmp_path: Path) -> None:
    """A queue whose default executor is ``process`` (on a node without a process pool) runs a
    chunk worker where its chunk is gathered: an async one on the loop."""
    schemas: list[str] = []
    queues = {"chunky": {"limit": 10, "executor": "process"}}
    app = Conveyor(engine=ENGINES[engine_name](tmp_path, schemas), **{**NODE, "queues": queues})
    try:
        await app.install()
        await app.start()
        tag = uuid.uuid4().hex
        ids = await app.enqueue_many([cj.gather.new(tag=tag, n=n) for n in range(3)])
        for job_id in ids:
            await settle(app, job_id, JobState.COMPLETED)
        assert cj.CALLS[tag] == [[0, 1, 2]] and cj.THREADS[tag] == threading.main_thread().name
    finally:
        await app.stop(grace=1)
        for schema in schemas:
            release_schema(schema)


async def test_testing_runs_a_chunk_worker_one_job_at_a_time(any_engine: Engine) -> None:
    """``drain_queue`` runs jobs one by one, so each is a chunk of its own, called at once (never
    after the chunk's 60 s timeout); ``process_job`` calls the code with a chunk of one."""
    app = Conveyor(engine=any_engine, testing="manual", clock=FakeClock())
    tag = uuid.uuid4().hex
    try:
        with app.as_current():
            await app.enqueue_many([cj.gather.new(tag=tag, n=n) for n in range(2)])
            assert (await drain_queue("chunky"))["completed"] == 2
            assert cj.CALLS[tag] == [[0], [1]]
            assert await process_job(cj.gather.new(tag=tag, n=7)) is None
            assert cj.CALLS[tag][-1] == [7]
    finally:
        await app.close()


@pytest.mark.parametrize(
    ("options", "problem"),
    [
        ({"chunk": Chunk(size=3), "executor": "process"}, "is a chunk worker: use async or thread"),
        ({"chunk": Chunk(size=3), "record": True}, "one return serves many jobs"),
        ({"chunk": 3}, "must be a Chunk(size=..., timeout=...)"),
    ],
)
def test_a_chunk_worker_refuses_what_it_cannot_do(options: dict[str, Any], problem: str) -> None:
    def bulk(jobs: list[Job]) -> None: ...

    with pytest.raises(ValidationError, match=problem.replace("(", r"\(").replace(")", r"\)")):
        job(**options)(bulk)


@pytest.mark.parametrize(
    ("make", "problem"),
    [
        (lambda: Chunk(size=0), "invalid chunk size=0: must be a whole number of jobs, at least 1"),
        (lambda: Chunk(size=2.5), "invalid chunk size=2.5"),  # type: ignore[arg-type]
        (lambda: Chunk(timeout=0), "invalid chunk timeout=0: must be greater than 0 seconds"),
        (lambda: Chunk(timeout=-1), "invalid chunk timeout=-1"),
        (lambda: ChunkResult({1: "oops"}), "outcome of job 1='oops': must be an exception"),  # type: ignore[dict-item]
    ],
)
def test_bad_chunk_settings_are_refused_by_name(make: Callable[[], Any], problem: str) -> None:
    with pytest.raises(ValidationError) as raised:
        make()
    assert problem in str(raised.value)


def test_a_chunk_timeout_may_be_a_timedelta() -> None:
    assert Chunk(size=2, timeout=timedelta(milliseconds=1500)).seconds == 1.5


def test_a_chunk_job_is_enqueued_with_its_args_as_keywords() -> None:
    request = cj.gather.new(tag="t", n=1)
    assert request.worker.endswith("chunk_jobs.gather") and request.args == {"tag": "t", "n": 1}
    with pytest.raises(ValidationError, match="give its args as keywords"):
        cj.gather.new([])  # type: ignore[arg-type]
