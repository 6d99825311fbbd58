"""A pool of worker processes for CPU-bound jobs, one job per process at a time.

Unlike ``concurrent.futures.ProcessPoolExecutor``, a process that dies (crash, kill, timeout) fails
only the job it was running; the pool replaces it and carries on. A worker is never a fork of the
node, because the node runs threads and database connections that a fork would copy: each worker is
a fresh interpreter (``process_worker.serve``), started in the background while the node goes on
starting; unlike ``multiprocessing``'s spawn it does not run the node's main script unless a job
defined there needs it.

``ProcessPool(zygote=True)`` (Linux) starts one fresh interpreter instead, the zygote
(``process_worker.serve_zygote``), which imports what workers need once and forks each worker from
itself: two workers were ready in ~95 ms against ~185 ms on two busy cores, and a worker that died
was replaced in ~2 ms instead of ~90 ms. Nodes do not use it yet. With it, a fleet test failed in
two full-suite runs of four: a cancelled process job's worker was never replaced. The replacement
ran in the job's task, and a second cancel of the job cut it short (now it runs in a task of the
pool's own, see ``_replace``). The zygote made that likely because a forked worker's exit code was
waited for on the event loop (up to a second or two, ``_ForkedWorker.exitcode``); that wait now
runs in a thread. What is left before nodes use it: proof over several full runs, and a gain that
shows. Two paired runs of ``cpu-cold`` on 2026-11-27 (zygote against fresh interpreters) could not
tell them apart: the spread between rounds (1.33x to 1.98x) dwarfs the ~90 ms it saves. Nor does it
bring a node's first job forward on two cores: the zygote's own start pays the imports that two
fresh interpreters pay side by side, and the first of 40 CPU jobs started 73-82 ms after the node's
start with it against 74-96 ms without (three runs each, a quiet machine, later that day). Its gain
is in replacing a worker that died.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import pickle
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from conveyor._runtime.process_worker import Channel, MainModule, main_module
from conveyor.job import Job

log = logging.getLogger("conveyor.process_pool")

#: Whether workers can be forked by a zygote: pidfds (signalling a process that is not our child
#: without risk of a reused pid) and passing descriptors over a Unix socket.
ZYGOTE = (
    sys.platform == "linux"
    and hasattr(os, "pidfd_open")
    and hasattr(signal, "pidfd_send_signal")
    and hasattr(socket, "send_fds")
)


class WorkerProcessDied(Exception):
    """The process running a job exited before returning a result."""


@dataclass(slots=True)
class RemoteError(Exception):
    """An exception raised by job code in a worker process, with its formatted traceback."""

    description: str
    formatted: str

    def __str__(self) -> str:
        return self.description


def _interpreter(entry: str, fd: int, main: MainModule, preload: Sequence[str]) -> subprocess.Popen[bytes]:
    """A fresh interpreter running ``process_worker.<entry>`` on ``fd``."""
    # The node's sys.path comes first, so the worker finds Conveyor and the job modules where
    # the node found them (a script's folder, a path added at run time).
    code = (
        f"import sys; sys.path[:] = {sys.path!r}; "
        f"from conveyor._runtime.process_worker import {entry}; "
        f"{entry}({fd}, {main!r}, {list(preload)!r})"
    )
    return subprocess.Popen([sys.executable, "-c", code], pass_fds=(fd,))


class _Zygote:
    """The node's side of the zygote: ask it for a worker, learn the exit codes of its workers.
    Thread-safe (workers are added from threads)."""

    def __init__(self, main: MainModule, preload: Sequence[str]) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self.process = _interpreter("serve_zygote", theirs.fileno(), main, preload)
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        self._control = ours
        self._lock = threading.Lock()
        self._exits: dict[int, int] = {}
        #: Set when the zygote cannot fork any more (it exited, or the pool is stopping).
        self.gone = False

    def fork(self) -> tuple[int, int, Channel]:
        """A new worker: its pid, a pidfd for it and the node's end of its channel."""
        ours, theirs = socket.socketpair()
        try:
            with self._lock:
                socket.send_fds(self._control, [b"fork"], [theirs.fileno()])
                theirs.close()
                while True:
                    message, fds = self._receive(None)
                    if message[0] == "forked":
                        return message[1], fds[0], Channel(ours.detach())
        except BaseException:
            self.gone = True
            ours.close()
            theirs.close()
            raise

    def exit_code(self, pid: int, wait: float) -> int | None:
        """The exit code of worker ``pid``, once the zygote reports it (None after ``wait`` s)."""
        deadline = time.monotonic() + wait
        with self._lock:
            while pid not in self._exits:
                left = deadline - time.monotonic()
                if left <= 0 or self.gone:
                    return None
                try:
                    self._receive(left)
                except (EOFError, OSError, TimeoutError):
                    return None
            return self._exits.pop(pid)

    def _receive(self, timeout: float | None) -> tuple[tuple[Any, ...], list[int]]:
        if timeout is not None and not select.select([self._control], [], [], timeout)[0]:
            raise TimeoutError
        data, fds, _, _ = socket.recv_fds(self._control, 1024, 1)
        if not data:
            self.gone = True
            raise EOFError("the zygote has exited")
        message: tuple[Any, ...] = pickle.loads(data)
        if message[0] == "exited":
            self._exits[message[1]] = message[2]
        return message, fds

    def shutdown(self) -> None:
        """No more forks: a fork under way fails at once, and the zygote exits."""
        self.gone = True
        with contextlib.suppress(OSError):
            self._control.shutdown(socket.SHUT_RDWR)

    def stop(self) -> None:
        self.shutdown()
        try:
            self.process.wait(5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        with contextlib.suppress(OSError):
            self._control.close()


class _WorkerProcess(ABC):
    """What both kinds of worker share: the node's end of the channel, the pidfd sentinel, and how
    a worker is stopped."""

    conn: Channel
    sentinel: int | None

    @abstractmethod
    def kill(self) -> None: ...

    @abstractmethod
    def exitcode(self, wait: float) -> int | None:
        """The exit code, once the process has exited (waiting up to ``wait`` s); else None."""

    def stop(self) -> None:
        with contextlib.suppress(Exception):
            self.conn.close()
        self.kill()
        self.exitcode(wait=5)
        if self.sentinel is not None:
            with contextlib.suppress(OSError):
                os.close(self.sentinel)
            self.sentinel = None


class _ForkedWorker(_WorkerProcess):
    """A worker forked by the zygote. It is not the node's child: it is signalled through its pidfd
    (which is also its sentinel) and its exit code comes from the zygote."""

    def __init__(self, zygote: _Zygote) -> None:
        self._zygote = zygote
        self.pid, pidfd, self.conn = zygote.fork()
        self.sentinel: int | None = pidfd
        self.job_id: int | None = None
        self._code: int | None = None

    def _exited(self, wait: float) -> bool:
        if self.sentinel is None:
            return True
        return bool(select.select([self.sentinel], [], [], wait)[0])

    def is_alive(self) -> bool:
        return not self._exited(0)

    def kill(self) -> None:
        if self.sentinel is not None:
            with contextlib.suppress(OSError):
                signal.pidfd_send_signal(self.sentinel, signal.SIGKILL)

    def exitcode(self, wait: float) -> int | None:
        if self._code is None and self._exited(wait):
            self._code = self._zygote.exit_code(self.pid, wait=max(wait, 1.0))
        return self._code


class _Worker(_WorkerProcess):
    """One worker process, a fresh interpreter, and the node's end of its channel (a socket pair)."""

    def __init__(self, main: MainModule, preload: Sequence[str]) -> None:
        parent, child = socket.socketpair()
        self.conn = Channel(parent.detach())
        try:
            self.process = _interpreter("serve", child.fileno(), main, preload)
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
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(wait)
        return self.process.returncode


AnyWorker = _Worker | _ForkedWorker

#: Seconds between tries to start a worker that failed to start (the last one repeats).
START_RETRY_DELAYS = (0.1, 0.5, 1.0, 2.0, 5.0)


class ProcessPool:
    """``size`` worker processes that run jobs by worker name."""

    def __init__(self, size: int | None = None, *, zygote: bool = False) -> None:
        self.size = size or os.cpu_count() or 1
        self._idle: asyncio.Queue[AnyWorker] | None = None
        self._busy: dict[int, AnyWorker] = {}
        self._all: set[AnyWorker] = set()
        self._stopped = False
        self._lazy = False
        self._spawning: asyncio.Lock | None = None
        self._main: MainModule = None
        self._preload: list[str] = []
        self._use_zygote = zygote
        self._zygote: _Zygote | None = None
        self._filling: asyncio.Task[None] | None = None
        #: Replacements of dead or abandoned workers under way (see ``_replace``).
        self._replacing: set[asyncio.Task[None]] = set()

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
        self._idle = asyncio.Queue()
        self._main = main_module()
        self._preload = list(dict.fromkeys(preload))

    async def _start_workers(self) -> None:
        if self._use_zygote:
            try:
                self._zygote = await asyncio.to_thread(_Zygote, self._main, self._preload)
            except OSError:
                log.warning("could not start the process pool's zygote; starting each worker afresh")
        self._filling = asyncio.create_task(self._fill(), name="conveyor-process-pool-start")

    async def _fill(self) -> None:
        await asyncio.gather(*(self._add_worker() for _ in range(self.size)))

    def _replace(self, worker: AnyWorker) -> None:
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
        assert self._idle is not None
        self._idle.put_nowait(worker)

    def _new_worker(self) -> AnyWorker | None:
        """A worker forked by the zygote, or else a fresh interpreter (None once stopped)."""
        zygote = self._zygote
        if zygote is not None and not zygote.gone:
            try:
                return _ForkedWorker(zygote)
            except (OSError, EOFError):
                if not self._stopped:
                    log.warning("the process pool's zygote is gone; starting each worker afresh")
        if self._stopped:
            return None
        return _Worker(self._main, self._preload)

    async def stop(self) -> None:
        self._stopped = True
        if self._replacing:
            await asyncio.gather(*self._replacing, return_exceptions=True)
        if self._filling is not None and not self._filling.done():
            if self._zygote is not None:
                self._zygote.shutdown()  # a fork waiting for the zygote's imports gives up
            await asyncio.gather(self._filling, return_exceptions=True)
        workers, self._all = self._all, set()
        await asyncio.gather(*(asyncio.to_thread(w.stop) for w in workers))
        if self._zygote is not None:
            await asyncio.to_thread(self._zygote.stop)

    def abandon(self) -> None:
        """``stop`` without an event loop (the node's loop is gone): kill every process now."""
        self._stopped = True
        if self._zygote is not None:
            self._zygote.shutdown()
        workers, self._all = self._all, set()
        for worker in workers:
            worker.stop()
        if self._zygote is not None:
            self._zygote.stop()

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
                worker.kill()  # at once: it may still be running the job (a cancel, a timeout)
                self._replace(worker)
            else:
                self._idle.put_nowait(worker)
        if kind == "ok":
            return value
        if kind == "outcome":
            raise value
        raise RemoteError(*value)

    async def _receive(self, worker: AnyWorker) -> tuple[str, Any]:
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
        # Off the loop: a forked worker's exit code comes from the zygote, up to a second later.
        code = await asyncio.to_thread(worker.exitcode, 1)
        raise WorkerProcessDied(f"worker process {worker.pid} exited with code {code}")
