"""The process pool on its own (no database): its channel to the workers, what a worker imports, and
a job stopped from outside (a cancel, a timeout) killing only its own process."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import threading
import time

import pytest

from conveyor._runtime.process_pool import ProcessPool, WorkerProcessDied
from conveyor._runtime.process_worker import Channel
from conveyor.testing.execute import job_of
from tests import helpers
from tests import runtime_jobs as jobs

pytestmark = pytest.mark.skipif(os.name != "posix", reason="the process pool needs POSIX")


async def ready(pool: ProcessPool, timeout: float = 10.0) -> None:
    """Until every worker of the pool is started (they come up in the background)."""
    await helpers.poll(
        lambda: len(pool._all) >= pool.size, timeout=timeout, what="the pool's workers", every=0.01
    )


async def sent(pool: ProcessPool, timeout: float = 10.0) -> None:
    """Until the pool has handed a job to a worker."""
    await helpers.poll(lambda: pool._busy, timeout=timeout, what="a job handed to a worker", every=0.01)


def name_of(function: object) -> str:
    return f"{jobs.__name__}.{getattr(function, '__name__', '')}"


def test_channel_carries_whole_messages_both_ways_and_reports_a_closed_end() -> None:
    left_socket, right_socket = socket.socketpair()
    left, right = Channel(left_socket.detach()), Channel(right_socket.detach())
    big = "x" * 3_000_000  # far beyond a socket's buffer: written and read in several pieces
    try:
        assert not right.poll()
        writer = threading.Thread(target=left.send, args=(("ok", big),))
        writer.start()
        assert right.recv() == ("ok", big)
        writer.join()
        right.send(("progress", {"done": 1}))
        assert left.poll()
        assert left.recv() == ("progress", {"done": 1})
        left.close()
        assert right.poll()  # the close is readable
        with pytest.raises(EOFError):
            right.recv()
    finally:
        left.close()
        right.close()


@pytest.fixture
async def pool() -> object:
    started = ProcessPool(1)
    await started.start(preload=[jobs.__name__])
    try:
        await ready(started)
        yield started
    finally:
        await started.stop()


async def test_a_worker_runs_its_first_job_without_importing_multiprocessing(pool: ProcessPool) -> None:
    """The node and its workers talk over ``Channel``: a worker never pays for ``multiprocessing``
    (nor for ``runpy`` until a job needs the node's main script)."""
    unwanted = ["multiprocessing", "multiprocessing.connection", "tempfile", "runpy"]
    job = job_of(jobs.process_modules.new(names=unwanted))
    assert await pool.run(name_of(jobs.process_modules), job) == []


async def test_a_large_result_comes_back_whole(pool: ProcessPool) -> None:
    job = job_of(jobs.process_echo.new(text="abc", times=1_000_000))
    assert await pool.run(name_of(jobs.process_echo), job) == "abc" * 1_000_000


async def test_a_job_cancelled_from_outside_kills_its_process_and_the_pool_replaces_it(
    pool: ProcessPool,
) -> None:
    (before,) = pool._all
    sleeper = job_of(jobs.process_sleep.new(seconds=30))
    task = asyncio.create_task(pool.run(name_of(jobs.process_sleep), sleeper))
    await sent(pool)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    # The next job runs on the replacement, which the pool starts once the old worker has stopped.
    pid = await pool.run(name_of(jobs.process_pid), job_of(jobs.process_pid.new()))
    assert pid != before.pid and pid in {worker.pid for worker in pool._all}
    assert not before.is_alive()  # killed, not left running
    assert before.exitcode(wait=5) == -signal.SIGKILL


async def test_kill_fails_only_the_job_of_that_process(pool: ProcessPool) -> None:
    sleeper = job_of(jobs.process_sleep.new(seconds=30))
    task = asyncio.create_task(pool.run(name_of(jobs.process_sleep), sleeper))
    await sent(pool)
    assert pool.kill(sleeper.id)
    with pytest.raises(WorkerProcessDied):
        await task
    echo = job_of(jobs.process_echo.new(text="a", times=2))
    assert await pool.run(name_of(jobs.process_echo), echo) == "aa"


async def test_a_crashing_worker_fails_its_job_with_its_exit_code(pool: ProcessPool) -> None:
    with pytest.raises(WorkerProcessDied, match="exited with code 1"):
        await pool.run(name_of(jobs.process_crash), job_of(jobs.process_crash.new()))
    assert await pool.run(name_of(jobs.process_pid), job_of(jobs.process_pid.new())) != os.getpid()


async def test_a_pool_stopped_while_its_workers_start_leaves_no_process() -> None:
    before = helpers.worker_processes()
    pool = ProcessPool(2)
    await pool.start(preload=[jobs.__name__])
    await pool.stop()  # the workers are still importing
    assert not pool._all
    assert helpers.worker_processes() - before == set()


async def test_a_cancel_while_a_dead_worker_is_replaced_leaves_the_pool_whole(pool: ProcessPool) -> None:
    """A job whose worker died can be cancelled again while the pool replaces that worker (its pkill
    signal arriving after the heartbeat already stopped it): the replacement still comes, and the
    next job runs. Done in the job's own task, the cancel would cut the replacement short and the
    next job would wait forever."""
    new_worker = pool._new_worker
    replacing = threading.Event()

    def slow_new_worker() -> object:
        replacing.set()
        time.sleep(0.3)  # a replacement that takes a while, as on a loaded machine
        return new_worker()

    pool._new_worker = slow_new_worker  # type: ignore[method-assign]
    sleeper = job_of(jobs.process_sleep.new(seconds=30))
    task = asyncio.create_task(pool.run(name_of(jobs.process_sleep), sleeper))
    await sent(pool)
    assert pool.kill(sleeper.id)
    await helpers.poll(replacing.is_set, what="the dead worker's replacement to begin")
    task.cancel()
    with pytest.raises((WorkerProcessDied, asyncio.CancelledError)):
        await task
    pid = await asyncio.wait_for(pool.run(name_of(jobs.process_pid), job_of(jobs.process_pid.new())), 20)
    assert pid in {worker.pid for worker in pool._all} and len(pool._all) == 1


async def test_a_worker_that_fails_to_start_is_started_again() -> None:
    """A failed start (no memory, no process slot) is tried again: the pool never stays a worker
    short, and the job waiting for one runs once the start works."""
    pool = ProcessPool(1)
    new_worker = pool._new_worker
    failures: list[str] = []

    def failing_twice() -> object:
        if len(failures) < 2:
            failures.append("refused")
            raise OSError("Resource temporarily unavailable")
        return new_worker()

    pool._new_worker = failing_twice  # type: ignore[method-assign]
    await pool.start(preload=[jobs.__name__])
    try:
        pid = await asyncio.wait_for(pool.run(name_of(jobs.process_pid), job_of(jobs.process_pid.new())), 20)
        assert failures == ["refused", "refused"]
        assert pid in {worker.pid for worker in pool._all} and len(pool._all) == 1
    finally:
        await pool.stop()


async def test_a_waiting_job_is_sent_to_the_worker_as_soon_as_the_previous_reply_is_read(
    pool: ProcessPool,
) -> None:
    """The reply is read, and the freed worker handed the next waiting job, in one callback: by the
    time the first job's caller resumes, the second job is already on the worker (no trip through
    the event loop, whose other work could delay it, between one job and the next)."""
    first = job_of(jobs.process_echo.new(text="a", times=1))
    second = job_of(jobs.process_echo.new(text="b", times=1))
    two: asyncio.Task[object] | None = None

    def queue_second() -> None:
        nonlocal two
        two = asyncio.create_task(pool.run(name_of(jobs.process_echo), second))

    asyncio.get_running_loop().call_soon(queue_second)  # waits: the worker has the first job
    assert await pool.run(name_of(jobs.process_echo), first) == "a"
    assert set(pool._busy) == {second.id}  # before any other task ran
    assert two is not None
    assert await two == "b"


async def test_a_job_cancelled_while_it_waits_for_a_worker_costs_no_worker(pool: ProcessPool) -> None:
    sleeper = job_of(jobs.process_sleep.new(seconds=0.3))
    running = asyncio.create_task(pool.run(name_of(jobs.process_sleep), sleeper))
    await sent(pool)
    waiting = asyncio.create_task(pool.run(name_of(jobs.process_pid), job_of(jobs.process_pid.new())))
    await asyncio.sleep(0)  # queued behind the sleeper
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    await running
    assert len(pool._all) == 1 and not pool._busy
    assert await pool.run(name_of(jobs.process_pid), job_of(jobs.process_pid.new())) != os.getpid()
