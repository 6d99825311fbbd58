"""A pool of worker processes for CPU-bound jobs, one job per process at a time.

Unlike ``concurrent.futures.ProcessPoolExecutor``, a process that dies (crash, kill, timeout) fails
only the job it was running; the pool replaces it and carries on. Each worker is a fresh interpreter
(``process_worker``), never a fork of the node, because the node runs threads and database
connections that a fork would copy. Workers are started all at once and import what they need
while the node goes on starting; unlike ``multiprocessing``'s spawn they do not run the node's main
script unless a job defined there needs it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from conveyor._runtime.process_worker import Channel, MainModule, main_module
from conveyor.job import Job


class WorkerProcessDied(Exception):
    """The process running a job exited before returning a result."""


@dataclass(slots=True)
class RemoteError(Exception):
    """An exception raised by job code in a worker process, with its formatted traceback."""

    description: str
    formatted: str

    def __str__(self) -> str:
        return self.description


class _Worker:
    """One worker process and the node's end of its connection (a socket pair)."""

    def __init__(self, main: MainModule, preload: Sequence[str]) -> None:
        parent, child = socket.socketpair()
        self.conn = Channel(parent.detach())
        fd = child.fileno()
        # The node's sys.path comes first, so the worker finds Conveyor and the job modules where
        # the node found them (a script's folder, a path added at run time).
        code = (
            f"import sys; sys.path[:] = {sys.path!r}; "
            "from conveyor._runtime.process_worker import serve; "
            f"serve({fd}, {main!r}, {list(preload)!r})"
        )
        try:
            self.process = subprocess.Popen([sys.executable, "-c", code], pass_fds=(fd,))
        except BaseException:
            parent.close()
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


class ProcessPool:
    """``size`` worker processes that run jobs by worker name."""

    def __init__(self, size: int | None = None) -> None:
        self.size = size or os.cpu_count() or 1
        self._idle: asyncio.Queue[_Worker] | None = None
        self._busy: dict[int, _Worker] = {}
        self._all: set[_Worker] = set()
        self._stopped = False
        self._lazy = False
        self._spawning: asyncio.Lock | None = None
        self._main: MainModule = None
        self._preload: list[str] = []

    async def start(self, preload: Sequence[str] = ()) -> None:
        """Start every process now (a CPU-bound queue wants them warm); each imports the modules
        ``preload`` names (those of the node's process jobs) before its first job arrives."""
        self._prepare(preload)
        self._lazy = False
        await asyncio.gather(*(self._add_worker() for _ in range(self.size)))

    async def start_lazily(self) -> None:
        """Start the processes on the first job that needs them."""
        self._prepare(())
        self._lazy = True

    def _prepare(self, preload: Sequence[str]) -> None:
        self._idle = asyncio.Queue()
        self._main = main_module()
        self._preload = list(dict.fromkeys(preload))

    async def _add_worker(self) -> None:
        worker = await asyncio.to_thread(_Worker, self._main, self._preload)
        self._all.add(worker)
        assert self._idle is not None
        self._idle.put_nowait(worker)

    async def stop(self) -> None:
        self._stopped = True
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
                    await asyncio.gather(*(self._add_worker() for _ in range(self.size)))
                    self._lazy = False
        worker = await self._idle.get()
        replace = False
        try:
            worker.job_id = job.id
            self._busy[job.id] = worker
            worker.conn.send((worker_name, job))
            while True:
                kind, value = await self._receive(worker)
                if kind != "progress":
                    break
                if on_progress is not None:
                    on_progress(value)
        except BaseException:
            # Timed out, cancelled or dead: the process may still be busy, so it cannot be reused.
            replace = True
            raise
        finally:
            self._busy.pop(job.id, None)
            worker.job_id = None
            if replace or not worker.is_alive():
                self._all.discard(worker)
                await asyncio.to_thread(worker.stop)
                if not self._stopped:
                    await self._add_worker()
            else:
                self._idle.put_nowait(worker)
        if kind == "ok":
            return value
        if kind == "outcome":
            raise value
        raise RemoteError(*value)

    async def _receive(self, worker: _Worker) -> tuple[str, Any]:
        loop = asyncio.get_running_loop()
        done: asyncio.Future[None] = loop.create_future()

        def ready() -> None:
            if not done.done():
                done.set_result(None)

        fds = [worker.conn.fileno()]
        if worker.sentinel is not None:
            fds.append(worker.sentinel)
        for fd in fds:
            loop.add_reader(fd, ready)
        try:
            await done
        finally:
            for fd in fds:
                loop.remove_reader(fd)
        if worker.conn.poll():
            try:
                reply: tuple[str, Any] = worker.conn.recv()
                return reply
            except (EOFError, OSError):
                pass
        code = worker.exitcode(wait=1)
        raise WorkerProcessDied(f"worker process {worker.pid} exited with code {code}")
