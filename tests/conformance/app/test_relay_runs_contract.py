"""Relay on a running node, on every engine: waiting for results, progress, signals to jobs."""

from __future__ import annotations

import asyncio

import pytest

from conveyor import (
    Conveyor,
    JobCancelledError,
    JobDiscardedError,
    JobFailedError,
    JobNotFoundError,
    JobState,
    ValidationError,
    WaitTimeoutError,
    progress,
)
from conveyor.errors import ConveyorError
from tests.conformance import relay_jobs as jobs
from tests.helpers import poll


async def until(check: object, timeout: float = 10.0) -> None:
    await poll(check, timeout=timeout, what="the condition")  # type: ignore[arg-type]


async def wait_begun(app: Conveyor) -> None:
    """Until a wait of ``app`` has read its job once and now listens for its end."""
    waiters = app._binding.waiters_of(await app.engine())
    await poll(lambda: waiters.settled >= 1, what="the wait to read its job")


# -- waiting -----------------------------------------------------------------------------------
async def test_wait_returns_the_completed_job_and_relay_its_result(node_app: Conveyor) -> None:
    job_id = await node_app.enqueue(jobs.doubled.new(value=21))
    done = await node_app.wait(job_id, timeout=10)
    assert done.id == job_id and done.state is JobState.COMPLETED and done.result == 42
    assert (await node_app.wait(job_id, timeout=1)).result == 42  # already over: at once
    assert await node_app.relay(jobs.doubled.new(value=5), timeout=10) == 10


async def test_wait_raises_how_the_job_ended(node_app: Conveyor) -> None:
    cancelled, discarded, failing = await node_app.enqueue_many(
        [jobs.cancels_itself.new(), jobs.discards_itself.new(), jobs.fails_once.new()]
    )
    with pytest.raises(JobCancelledError, match="no longer wanted") as caught:
        await node_app.wait(cancelled, timeout=10)
    assert caught.value.job.state is JobState.CANCELLED
    with pytest.raises(JobDiscardedError, match="bad input"):
        await node_app.wait(discarded, timeout=10)
    with pytest.raises(JobFailedError, match="first attempt fails"):
        await node_app.wait(failing, timeout=10)
    # Through retries, the same job's second attempt completes it.
    assert (await node_app.wait(failing, timeout=10, through_retries=True)).result == "second attempt"


async def test_a_wait_times_out_and_the_job_goes_on(node_app: Conveyor) -> None:
    job_id = await node_app.enqueue(jobs.sleeps.new(seconds=0.5))
    with pytest.raises(WaitTimeoutError, match=f"job {job_id} did not finish within 0.1s") as caught:
        await node_app.wait(job_id, timeout=0.1)
    assert isinstance(caught.value, TimeoutError) and caught.value.job_id == job_id
    assert (await node_app.wait(job_id, timeout=10)).result == "slept"


async def test_a_cancel_from_outside_ends_the_wait(node_app: Conveyor) -> None:
    job_id = await node_app.enqueue(jobs.sleeps.new(seconds=30))

    async def started() -> bool:
        found = await node_app.get_job(job_id)
        return found is not None and found.state is JobState.EXECUTING

    await until(started)
    waiting = asyncio.create_task(node_app.wait(job_id, timeout=10))
    await wait_begun(node_app)
    await node_app.cancel_job(job_id)
    with pytest.raises(JobCancelledError):
        await waiting


async def test_waiting_on_what_is_not_there_or_with_bad_options_fails_clearly(node_app: Conveyor) -> None:
    with pytest.raises(JobNotFoundError, match="no job with id 987654"):
        await node_app.wait(987654, timeout=1)
    job_id = await node_app.enqueue(jobs.doubled.new(value=1).with_options(schedule_in=60))
    waiting = asyncio.create_task(node_app.wait(job_id, timeout=10))
    await wait_begun(node_app)
    await node_app.delete_job(job_id)  # gone while awaited: found on the next poll
    with pytest.raises(JobNotFoundError):
        await waiting
    for bad in (
        {"job_id": 2**70},
        {"job_id": "1"},
        {"job_id": 1, "timeout": -1},
        {"job_id": 1, "timeout": "x"},
    ):
        with pytest.raises(ValidationError):
            await node_app.wait(bad.pop("job_id"), **bad)  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="through_retries"):
        await node_app.wait(1, through_retries="yes")  # type: ignore[arg-type]


async def test_many_waiters_share_one_poll(node_app: Conveyor) -> None:
    """300 waits on jobs due later cost one state query per poll interval (0.1 s here), not 300."""
    ids = await node_app.enqueue_many(
        [jobs.doubled.new(value=i).with_options(schedule_in=0.6) for i in range(300)]
    )
    started = asyncio.get_running_loop().time()
    done = await asyncio.gather(*(node_app.wait(i, timeout=20) for i in ids))
    elapsed = asyncio.get_running_loop().time() - started
    assert [job.result for job in done] == [2 * i for i in range(300)]
    (waiters,) = node_app._binding.waiters.values()
    assert waiters.polls <= elapsed / 0.1 + 2, (waiters.polls, elapsed)
    assert waiters.waiting == 0


# -- progress ----------------------------------------------------------------------------------
async def test_progress_of_concurrent_coroutines_is_merged_and_kept(node_app: Conveyor) -> None:
    job_id = await node_app.enqueue(jobs.reports_concurrently.new(coroutines=20))

    async def reported() -> bool:
        found = await node_app.get_job(job_id)
        return found is not None and found.progress.get("phase") == "reported"

    await until(reported)  # visible while the job runs (it waits for a signal now)
    running = await node_app.get_job(job_id)
    assert running is not None and running.state is JobState.EXECUTING
    assert running.progress == {**{f"part{i}": 4 for i in range(20)}, "phase": "reported"}
    await node_app.signal(job_id, {"release": 7})
    done = await node_app.wait(job_id, timeout=10)
    assert done.result == 7
    assert done.progress == {**{f"part{i}": 4 for i in range(20)}, "phase": "reported"}


async def test_a_tight_loop_of_reports_writes_little_and_loses_nothing(node_app: Conveyor) -> None:
    assert node_app.node is not None
    writes_before = node_app.node.link.writer.writes
    done = await node_app.wait(
        await node_app.enqueue(jobs.reports_in_a_tight_loop.new(count=20_000)), timeout=30
    )
    assert done.progress == {"done": 20_000, "total": 20_000}
    # At most one write per progress_interval (0.5 s) while it ran, plus the first.
    assert node_app.node.link.writer.writes - writes_before <= 10


async def test_progress_from_a_worker_process_is_stored(node_app: Conveyor) -> None:
    done = await node_app.wait(
        await node_app.enqueue(jobs.reports_from_a_process.new(count=5000)), timeout=60
    )
    assert done.progress == {"done": 5000, "total": 5000, "phase": "crunching"}


async def test_bad_progress_is_refused_with_the_reason(node_app: Conveyor) -> None:
    done = await node_app.wait(await node_app.enqueue(jobs.refuses_bad_progress.new()), timeout=10)
    nan, unknown, large, empty = done.result
    assert "progress" in nan and "nan" in nan.lower()
    assert "object" in unknown
    assert "at most 8000" in large
    assert "at least one field" in empty
    assert done.progress == {"ok": True}
    with pytest.raises(LookupError, match="outside a running Conveyor job"):
        await progress(done=1)


# -- signals -----------------------------------------------------------------------------------
async def test_signals_reach_running_jobs_in_order(node_app: Conveyor) -> None:
    job_id = await node_app.enqueue(jobs.echoes_messages.new(count=3))
    await node_app.signal(job_id, {"n": 1})  # before it starts: stored, received all the same

    async def started() -> bool:
        found = await node_app.get_job(job_id)
        return found is not None and found.state is JobState.EXECUTING

    await until(started)
    assert await node_app.signal(job_id, {"n": 2}) is JobState.EXECUTING
    await node_app.signal(job_id, {"n": 3})
    done = await node_app.wait(job_id, timeout=10)
    assert done.result == [{"n": 1}, {"n": 2}, {"n": 3}]
    assert done.signals == [{"n": 1}, {"n": 2}, {"n": 3}]
    thread_job = await node_app.enqueue(jobs.echoes_in_a_thread.new())
    await node_app.signal(thread_job, {"from": "afar"})
    assert (await node_app.wait(thread_job, timeout=10)).result == {"from": "afar"}


async def test_receive_times_out_and_iteration_ends(node_app: Conveyor) -> None:
    timing_out, iterating = await node_app.enqueue_many(
        [jobs.receive_times_out.new(), jobs.iterates_messages.new()]
    )
    await node_app.signal(iterating, {"i": 1})
    await node_app.signal(iterating, {"i": 2})
    assert (await node_app.wait(timing_out, timeout=10)).result.startswith("timed out: no signal came")
    assert (await node_app.wait(iterating, timeout=10)).result == [{"i": 1}, {"i": 2}]
    refused = await node_app.relay(jobs.process_receive.new(), timeout=60)
    assert "use wait_for_signal" in refused


async def test_wait_for_signal_lets_go_of_the_slot_until_each_message(node_app: Conveyor) -> None:
    job_id = await node_app.enqueue(jobs.awaits_two_decisions.new())

    async def awaiting(position: int) -> bool:
        found = await node_app.get_job(job_id)
        marker = found.meta.get("awaiting_signal") if found is not None else None
        return found is not None and found.state is JobState.SCHEDULED and marker["position"] == position

    await until(lambda: awaiting(0))
    waiting = await node_app.get_job(job_id)
    assert waiting is not None and waiting.attempt == 0  # a wait spends no attempt
    assert await node_app.signal(job_id, {"approve": True}) is JobState.AVAILABLE
    await until(lambda: awaiting(1))
    await node_app.signal(job_id, {"approve": "again"})
    done = await node_app.wait(job_id, timeout=10)
    assert done.result == [{"approve": True}, {"approve": "again"}, 2]
    assert done.meta["awaiting_signal"] is None and done.attempt == 1


async def test_wait_for_signal_works_in_threads_and_processes(node_app: Conveyor) -> None:
    ids = await node_app.enqueue_many([jobs.awaits_in_a_thread.new(), jobs.awaits_in_a_process.new()])
    for job_id in ids:
        await node_app.signal(job_id, {"go": job_id})
    for job_id in ids:
        assert (await node_app.wait(job_id, timeout=60)).result == {"go": job_id}


async def test_wait_for_signal_times_out(node_app: Conveyor) -> None:
    job_id = await node_app.enqueue(jobs.awaits_briefly.new(seconds=0.3))
    assert (await node_app.wait(job_id, timeout=10)).result == "gave up"


async def test_bad_signals_are_refused_clearly(node_app: Conveyor) -> None:
    with pytest.raises(JobNotFoundError):
        await node_app.signal(987654, {"a": 1})
    done = await node_app.wait(await node_app.enqueue(jobs.doubled.new(value=1)), timeout=10)
    with pytest.raises(ValidationError, match="is completed: a finished job receives no signals"):
        await node_app.signal(done.id, {"a": 1})
    waiting = await node_app.enqueue(jobs.doubled.new(value=1).with_options(schedule_in=60))
    for bad in ([1, 2], "text", {"x": float("nan")}, {"blob": "x" * 9000}, {1: "a"}):
        with pytest.raises(ValidationError, match="message"):
            await node_app.signal(waiting, bad)  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        await node_app.signal("1", {"a": 1})  # type: ignore[arg-type]
    stored = await node_app.get_job(waiting)
    assert stored is not None and stored.signals == []


async def test_sync_twins_wait_relay_and_signal(node_app: Conveyor) -> None:
    job_id = await node_app.enqueue(jobs.echoes_messages.new(count=1))
    await asyncio.to_thread(node_app.signal_sync, job_id, {"sync": True})
    done = await asyncio.to_thread(node_app.wait_sync, job_id, timeout=10)
    assert done.result == [{"sync": True}]
    assert await asyncio.to_thread(node_app.relay_sync, jobs.doubled.new(value=4), timeout=10) == 8
    with pytest.raises(ConveyorError):
        await asyncio.to_thread(node_app.wait_sync, 987654, timeout=1)
