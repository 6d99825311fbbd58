"""A pool of worker processes for CPU-bound jobs, one job per process at a time.

Unlike ``concurrent.futures.ProcessPoolExecutor``, a process that dies (crash, kill, timeout) fails
only the job it was running; the pool replaces it and carries on. A worker is never a fork of the
node, because the node runs threads and database connections that a fork would copy: each worker is
a fresh interpreter (``process_worker.serve``), started in the background while the node goes on
starting; unlike ``multiprocessing``'s spawn it does not run the node's main script unless a job
defined there needs it. (Forking workers from a preloaded "zygote" was tried, measured and removed:
``docs/decisions/process-pool-zygote.md``.)
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import os
import select
import socket
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from conveyor._runtime.process_worker import Channel, MainModule, main_module
from conveyor.job import Job

log = logging.getLogger("conveyor.process_pool")


class WorkerProcessDied(Exception):
    """The process running a job exited before returning a result."""


@dataclass(slots=True)
class RemoteError(Exception):
    """An exception raised by job code in a worker process, with its formatted traceback."""

    description: str
    formatted: str

    def __str__(self) -> str:
        return self.description


def _interpreter(fd: int, main: MainModule, preload: Sequence[str]) -> subprocess.Popen[bytes]:
    """A fresh interpreter running ``process_worker.serve`` on ``fd``."""
    # The node's sys.path comes first, so the worker finds Conveyor and the job modules where
    # the node found them (a script's folder, a path added at run time).
    code = (
        f"import sys; sys.path[:] = {sys.path!r}; "
        "from conveyor._runtime.process_worker import serve; "
        f"serve({fd}, {main!r}, {list(preload)!r})"
    )
    return subprocess.Popen([sys.executable, "-c", code], pass_fds=(fd,))


class _Worker:
    """One worker process, a fresh interpreter, and the node's end of its channel (a socket pair)."""

    def __init__(self, main: MainModule, preload: Sequence[str]) -> None:
        parent, child = socket.socketpair()
        self.conn = Channel(parent.detach())
        try:
            self.process = _interpreter(child.fileno(), main, preload)
        except BaseException:
            self.conn.close()
            raise
        finally:
            child.close()
        #: Readable when the process has exited (Linux); elsewhere its end of the pipe closing says so.
        self.sentinel: int | None = None
        with contextlib.suppress(AttributeError, OSError):
            self.sentinel = os.pidfd_open(self.process.pid)
        self.job_id: int | None = None

    @property
    def pid(self) -> int:
        return self.process.pid

    def is_alive(self) -> bool:
        return self.process.poll() is None

    def kill(self) -> None:
        with contextlib.suppress(OSError):
            self.process.kill()

    def exitcode(self, wait: float) -> int | None:
        """The exit code, once the process has exited (waiting up to ``wait`` s); else None."""
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(wait)
        return self.process.returncode

    def stop(self) -> None:
        with contextlib.suppress(Exception):
            self.conn.close()
        self.kill()
        self.exitcode(wait=5)
        if self.sentinel is not None:
            with contextlib.suppress(OSError):
                os.close(self.sentinel)
            self.sentinel = None


#: Seconds between tries to start a worker that failed to start (the last one repeats).
START_RETRY_DELAYS = (0.1, 0.5, 1.0, 2.0, 5.0)


class ProcessPool:
    """``size`` worker processes that run jobs by worker name."""

    def __init__(self, size: int | None = None) -> None:
        self.size = size or os.cpu_count() or 1
        self._idle: collections.deque[_Worker] | None = None
        #: Jobs waiting for a worker, in order (``_free`` hands each its worker, the job sent).
        self._waiting: collections.deque[_Waiter] = collections.deque()
        self._busy: dict[int, _Worker] = {}
        self._all: set[_Worker] = set()
        self._stopped = False
        self._lazy = False
        self._spawning: asyncio.Lock | None = None
        self._main: MainModule = None
        self._preload: list[str] = []
        self._filling: asyncio.Task[None] | None = None
        #: Replacements of dead or abandoned workers under way (see ``_replace``).
        self._replacing: set[asyncio.Task[None]] = set()

    @property
    def started(self) -> bool:
        """Has ``start`` or ``start_lazily`` been called?"""
        return self._idle is not None

    async def start(self, preload: Sequence[str] = ()) -> None:
        """Start every process now (a CPU-bound queue wants them warm); each imports the modules
        ``preload`` names (those of the node's process jobs) before its first job arrives. The
        workers come up in the background: a job waits for the first one ready."""
        self._prepare(preload)
        self._lazy = False
        await self._start_workers()

    async def start_lazily(self) -> None:
        """Start the processes on the first job that needs them."""
        self._prepare(())
        self._lazy = True

    def _prepare(self, preload: Sequence[str]) -> None:
        self._idle = collections.deque()
        self._main = main_module()
        self._preload = list(dict.fromkeys(preload))

    async def _start_workers(self) -> None:
        self._filling = asyncio.create_task(self._fill(), name="conveyor-process-pool-start")

    async def _fill(self) -> None:
        await asyncio.gather(*(self._add_worker() for _ in range(self.size)))

    def _replace(self, worker: _Worker) -> None:
        """Stop ``worker`` and start another in its place, in a task of the pool's own. Done in the
        job's task, a second cancel of that job (its pkill signal arriving after the heartbeat saw the
        job cancelled) or a shutdown could cancel it halfway, and leave the pool a worker short for
        good: its next job would wait forever."""

        async def replace() -> None:
            try:
                await asyncio.to_thread(worker.stop)
                if not self._stopped:
                    await self._add_worker()
            except Exception:
                log.exception("could not replace worker process %s", worker.pid)

        task = asyncio.create_task(replace(), name=f"conveyor-process-pool-replace-{worker.pid}")
        self._replacing.add(task)
        task.add_done_callback(self._replacing.discard)

    async def _add_worker(self) -> None:
        """Start one worker and make it idle. A start that fails (no memory, no process slot) is
        tried again, later and later, until it works or the pool stops: given up, it would leave
        the pool a worker short for good, and a pool of one would hold its jobs forever."""
        failures = 0
        while True:
            try:
                worker = await asyncio.to_thread(self._new_worker)
                break
            except Exception:
                delay = START_RETRY_DELAYS[min(failures, len(START_RETRY_DELAYS) - 1)]
                failures += 1
                log.exception("could not start a worker process; trying again in %.1fs", delay)
                await asyncio.sleep(delay)
                if self._stopped:
                    return
        if worker is None:
            return
        if self._stopped:
            await asyncio.to_thread(worker.stop)
            return
        self._all.add(worker)
        self._free(worker)

    def _new_worker(self) -> _Worker | None:
        """A worker, a fresh interpreter (None once stopped)."""
        if self._stopped:
            return None
        return _Worker(self._main, self._preload)

    async def stop(self) -> None:
        self._stopped = True
        if self._replacing:
            await asyncio.gather(*self._replacing, return_exceptions=True)
        if self._filling is not None and not self._filling.done():
            await asyncio.gather(self._filling, return_exceptions=True)
        workers, self._all = self._all, set()
        await asyncio.gather(*(asyncio.to_thread(w.stop) for w in workers))

    def abandon(self) -> None:
        """``stop`` without an event loop (the node's loop is gone): kill every process now."""
        self._stopped = True
        workers, self._all = self._all, set()
        for worker in workers:
            worker.stop()

    def kill(self, job_id: int) -> bool:
        """Stop the process running ``job_id`` now; its job fails with WorkerProcessDied."""
        worker = self._busy.get(job_id)
        if worker is None:
            return False
        worker.kill()
        return True

    async def run(
        self, worker_name: str, job: Job, *, on_progress: Callable[[dict[str, Any]], None] | None = None
    ) -> Any:
        """Run a job in a worker process; raise what the job raised (as RemoteError or Outcome).
        Cancelling the call (a timeout, a cancel) stops the process and replaces it."""
        if self._idle is None:
            raise RuntimeError("the process pool is not started")
        if self._lazy:
            self._spawning = self._spawning or asyncio.Lock()
            async with self._spawning:
                if self._lazy:
                    await self._start_workers()
                    self._lazy = False
        message = (worker_name, job)
        if not self._idle:
            worker = await self._wait_for_worker(job.id, message)
        else:
            self._hand(worker := self._idle.popleft(), job.id, message)
        waiting = _Reply(worker, on_progress)
        try:
            kind, value = await waiting.wait(self)
        except BaseException:
            # Timed out, cancelled or dead: the process may still be busy, so it cannot be reused;
            # unless its reply was read (and it went on to another job) before the cancel arrived.
            if not waiting.released:
                self._retire(worker, job.id)
            raise
        if kind == "ok":
            return value
        if kind == "outcome":
            raise value
        raise RemoteError(*value)

    def _hand(self, worker: _Worker, job_id: int, message: tuple[str, Job]) -> None:
        """Send ``worker`` its job; a worker that cannot take it is replaced and the job fails."""
        worker.job_id = job_id
        self._busy[job_id] = worker
        try:
            worker.conn.send(message)
        except BaseException:
            self._retire(worker, job_id)
            raise

    async def _wait_for_worker(self, job_id: int, message: tuple[str, Job]) -> _Worker:
        """The next worker that comes free, the job already sent to it (``_free``)."""
        waiter: asyncio.Future[_Worker] = asyncio.get_running_loop().create_future()
        entry = _Waiter(waiter, job_id, message)
        self._waiting.append(entry)
        try:
            return await waiter
        except BaseException:
            if waiter.done() and not waiter.cancelled() and waiter.exception() is None:
                # Handed its worker just as it was cancelled: that worker runs the job now.
                self._retire(waiter.result(), job_id)
            with contextlib.suppress(ValueError):
                self._waiting.remove(entry)
            raise

    def _free(self, worker: _Worker) -> None:
        """``worker`` has nothing to do: send it the next waiting job at once (no trip through the
        event loop, whose other work could delay it), or make it idle."""
        while self._waiting:
            entry = self._waiting.popleft()
            if entry.waiter.done():  # cancelled while waiting
                continue
            try:
                self._hand(worker, entry.job_id, entry.message)
            except Exception as exc:
                entry.waiter.set_exception(exc)
                return
            entry.waiter.set_result(worker)
            return
        assert self._idle is not None
        self._idle.append(worker)

    def _release(self, worker: _Worker, job_id: int) -> None:
        """``worker`` replied for ``job_id``: free it, or replace it if it died meanwhile."""
        self._busy.pop(job_id, None)
        worker.job_id = None
        if worker.is_alive():
            self._free(worker)
        else:
            self._retire(worker, None)

    def _retire(self, worker: _Worker, job_id: int | None) -> None:
        """Kill ``worker`` at once (it may still be running a job: a cancel, a timeout) and start
        another in its place."""
        if job_id is not None:
            self._busy.pop(job_id, None)
        worker.job_id = None
        if worker not in self._all:
            return  # retired already, or the pool stopped
        self._all.discard(worker)
        worker.kill()
        self._replace(worker)


@dataclass(slots=True)
class _Waiter:
    waiter: asyncio.Future[_Worker]
    job_id: int
    message: tuple[str, Job]


class _Reply:
    """Waits for the reply of the job a worker runs. Its progress reports go to ``on_progress`` as
    they come; the reply is read in the reader callback, which frees the worker there and then
    (``released``), handing it the next waiting job before anything else runs on the loop."""

    def __init__(self, worker: _Worker, on_progress: Callable[[dict[str, Any]], None] | None) -> None:
        self.worker = worker
        self.on_progress = on_progress
        self.released = False
        self._fds = [worker.conn.fileno(), *([] if worker.sentinel is None else [worker.sentinel])]

    async def wait(self, pool: ProcessPool) -> tuple[str, Any]:
        loop = asyncio.get_running_loop()
        done: asyncio.Future[tuple[str, Any] | None] = loop.create_future()
        job_id = self.worker.job_id
        watching = True

        def unwatch() -> None:
            nonlocal watching
            if watching:
                watching = False
                for fd in self._fds:
                    loop.remove_reader(fd)

        def ready() -> None:
            if done.done():
                return
            conn, dead = self.worker.conn, False
            try:
                while conn.poll():
                    try:
                        reply: tuple[str, Any] = conn.recv()
                    except (EOFError, OSError):
                        dead = True
                        break
                    if reply[0] == "progress":
                        if self.on_progress is not None:
                            self.on_progress(reply[1])
                        continue
                    unwatch()  # before the worker is handed on: its next job watches these fds
                    self.released = True
                    assert job_id is not None
                    pool._release(self.worker, job_id)
                    done.set_result(reply)
                    return
            except Exception as exc:
                done.set_exception(exc)
                return
            if not dead and self.worker.sentinel is not None:
                dead = bool(select.select([self.worker.sentinel], [], [], 0)[0])
            if dead:
                done.set_result(None)  # the process exited (or closed its end) without a reply

        for fd in self._fds:
            loop.add_reader(fd, ready)
        try:
            reply = await done
        finally:
            unwatch()
        if reply is not None:
            return reply
        # Off the loop: the process may take a moment to be reaped once its pipe has closed.
        code = await asyncio.to_thread(self.worker.exitcode, 1)
        raise WorkerProcessDied(f"worker process {self.worker.pid} exited with code {code}")
