"""A pool of worker processes for CPU-bound jobs, one job per process at a time.

Unlike ``concurrent.futures.ProcessPoolExecutor``, a process that dies (crash, kill, timeout) fails
only the job it was running; the pool replaces it and carries on. Processes are spawned, never
forked, because the parent runs threads and database connections that a fork would copy.
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import multiprocessing.connection
import os
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.process import BaseProcess
from typing import Any

from conveyor.context import JobContext
from conveyor.errors import ConveyorError
from conveyor.job import Job
from conveyor.outcomes import Outcome

#: Seconds between two progress reports a worker process sends its parent.
PROGRESS_SPACING = 0.05


class WorkerProcessDied(Exception):
    """The process running a job exited before returning a result."""


@dataclass(slots=True)
class RemoteError(Exception):
    """An exception raised by job code in a worker process, with its formatted traceback."""

    description: str
    formatted: str

    def __str__(self) -> str:
        return self.description


def _serve(conn: multiprocessing.connection.Connection) -> None:
    """The worker process's loop: receive (worker name, job), run it, send the result back."""
    from conveyor._resolver import Resolver
    from conveyor._runtime.invoke import call_blocking

    resolver = Resolver()
    while True:
        try:
            message = conn.recv()
        except EOFError:
            return
        worker_name, job = message
        link = _PipeLink(conn)
        try:
            definition = resolver.resolve(worker_name)
            value = call_blocking(definition, JobContext(job, link=link))
            reply: tuple[str, Any] = ("ok", value)
        except Outcome as outcome:
            reply = ("outcome", outcome)
        except BaseException as exc:
            reply = ("error", (f"{type(exc).__name__}: {exc}", traceback.format_exc()))
        try:
            link.flush()
            conn.send(reply)
        except Exception as exc:  # an unpicklable result is the job's error, not the pool's
            conn.send(("error", (f"result could not be sent back: {exc!r}", traceback.format_exc())))


class _PipeLink:
    """A job's link in a worker process: its progress goes to the parent over the pipe (at most
    every ``PROGRESS_SPACING`` seconds, and once more before the result), where the node writes it.
    Waiting for signals needs the node: ``receive`` refuses, ``wait_for_signal`` works."""

    def __init__(self, conn: multiprocessing.connection.Connection) -> None:
        self._conn = conn
        self._sent_at = 0.0
        self._pending: JobContext | None = None

    def progress_changed(self, context: JobContext) -> None:
        now = time.monotonic()
        if now - self._sent_at >= PROGRESS_SPACING:
            self._sent_at = now
            self._pending = None
            self._conn.send(("progress", context.progress.snapshot()[1]))
        else:
            self._pending = context

    def flush(self) -> None:
        if self._pending is not None:
            self._conn.send(("progress", self._pending.progress.snapshot()[1]))
            self._pending = None

    async def receive(self, context: JobContext, timeout: float | None) -> dict[str, Any]:
        raise ConveyorError("receive() cannot wait in a worker process; use wait_for_signal")

    def run_on_loop(self, work: Any) -> Any:
        work.close()
        raise ConveyorError("receive_sync() cannot wait in a worker process; use wait_for_signal_sync")


class _Worker:
    def __init__(self, context: multiprocessing.context.SpawnContext) -> None:
        parent, child = context.Pipe()
        self.conn = parent
        self.process: BaseProcess = context.Process(target=_serve, args=(child,), daemon=True)
        self.process.start()
        child.close()
        self.job_id: int | None = None

    def stop(self) -> None:
        with contextlib.suppress(Exception):
            self.conn.close()
        if self.process.is_alive():
            self.process.kill()
        self.process.join(timeout=5)


class ProcessPool:
    """``size`` spawned processes that run jobs by worker name."""

    def __init__(self, size: int | None = None) -> None:
        self.size = size or os.cpu_count() or 1
        self._context = multiprocessing.get_context("spawn")
        self._idle: asyncio.Queue[_Worker] | None = None
        self._busy: dict[int, _Worker] = {}
        self._all: set[_Worker] = set()
        self._stopped = False
        self._lazy = False
        self._spawning: asyncio.Lock | None = None

    async def start(self) -> None:
        """Spawn every process now (a CPU-bound queue wants them warm)."""
        self._idle = asyncio.Queue()
        self._lazy = False
        await asyncio.gather(*(self._add_worker() for _ in range(self.size)))

    async def start_lazily(self) -> None:
        """Spawn the processes on the first job that needs them."""
        self._idle = asyncio.Queue()
        self._lazy = True

    async def _add_worker(self) -> None:
        worker = await asyncio.to_thread(_Worker, self._context)
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
        worker.process.kill()
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
            if replace or not worker.process.is_alive():
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

        fds = (worker.conn.fileno(), worker.process.sentinel)
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
            except EOFError:
                pass
        worker.process.join(timeout=1)
        raise WorkerProcessDied(
            f"worker process {worker.process.pid} exited with code {worker.process.exitcode}"
        )
