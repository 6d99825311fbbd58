"""The worker process's side of the process pool: receive (worker name, job), run it, reply.

A worker is a fresh interpreter (``process_pool`` starts it with ``python -c``), never a fork of the
node. It imports only what it needs: this module, the modules of the jobs it runs (some of them at
once, while the node is still starting: ``preload``) and, only when a job's worker name is
``__main__.<name>``, the node's main script (as ``multiprocessing``'s spawn would, under the name
``__mp_main__``). Not running the main script for every worker keeps a pool's start from paying
for whatever that script imports (a CLI, a web framework).
"""

from __future__ import annotations

import contextlib
import importlib
import os
import pickle
import select
import sys
import time
import types
from datetime import UTC, datetime
from typing import Any

from conveyor.context import JobContext
from conveyor.errors import ConveyorError
from conveyor.outcomes import Outcome

#: Seconds between two progress reports a worker process sends its parent.
PROGRESS_SPACING = 0.05

#: How a worker finds the node's main module: ("name", "pkg.mod") for ``python -m``, ("path",
#: "/x/script.py") for a script, None when it has neither (``python -c``, an interactive session).
MainModule = tuple[str, str] | None


def main_module() -> MainModule:
    """Where this (the node's) process's ``__main__`` came from, for a worker to load it again."""
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    name = getattr(spec, "name", None)
    if isinstance(name, str):
        # A package's ``__main__`` is the program itself: running it again would start it over.
        if name == "__main__" or name.endswith(".__main__"):
            return None
        return ("name", name)
    path = getattr(main, "__file__", None)
    return ("path", os.path.abspath(path)) if isinstance(path, str) else None


class Channel:
    """One end of the socket pair between the node and a worker: whole pickled messages, each
    preceded by its length (8 bytes, big-endian). ``multiprocessing.connection`` would do the same
    but costs a worker ~14 ms of imports (``multiprocessing``, ``tempfile``, ``subprocess``...)
    before its first job."""

    def __init__(self, fd: int) -> None:
        self._fd = fd

    def fileno(self) -> int:
        return self._fd

    def send(self, message: object) -> None:
        data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
        view = memoryview(len(data).to_bytes(8, "big") + data)
        while view:
            view = view[os.write(self._fd, view) :]

    def recv(self) -> Any:
        """The next message; EOFError when the other end is closed."""
        return pickle.loads(self._read(int.from_bytes(self._read(8), "big")))

    def poll(self) -> bool:
        """Whether something (a message, or the other end's close) can be read now."""
        return bool(select.select([self._fd], [], [], 0)[0])

    def close(self) -> None:
        fd, self._fd = self._fd, -1
        if fd >= 0:
            os.close(fd)

    def _read(self, size: int) -> bytes:
        chunks = []
        while size:
            chunk = os.read(self._fd, size)
            if not chunk:
                raise EOFError("the other end of the channel is closed")
            chunks.append(chunk)
            size -= len(chunk)
        return b"".join(chunks)


def serve(fd: int, main: MainModule, preload: list[str]) -> None:
    """The worker process's loop, on the connection the node passed as ``fd``."""
    _serve(Channel(fd), _preloaded(main, preload))


def _preloaded(main: MainModule, preload: list[str]) -> _MainLoader:
    """What every worker needs imported: the job loop's modules and those ``preload`` names."""
    # Imported here for the job loop, before the first job arrives.
    import conveyor._resolver
    import conveyor._runtime.invoke  # noqa: F401

    loader = _MainLoader(main)
    for module in preload:  # a module that fails here fails its job later, with the reason
        with contextlib.suppress(BaseException):
            loader.import_module(module)
    return loader


def _serve(conn: Channel, loader: _MainLoader) -> None:
    from conveyor._resolver import Resolver
    from conveyor._runtime.invoke import call_blocking

    resolver = Resolver()
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            return
        worker_name, job = message
        link = _PipeLink(conn)
        try:
            loader.before_resolving(worker_name)
            definition = resolver.resolve(worker_name)
            value = call_blocking(definition, JobContext(job, link=link))
            reply: tuple[str, Any] = ("ok", value)
        except Outcome as outcome:
            reply = ("outcome", outcome)
        except BaseException as exc:
            reply = ("error", (f"{type(exc).__name__}: {exc}", _formatted(exc)))
        try:
            link.flush()
            conn.send(reply)
        except Exception as exc:  # an unpicklable result is the job's error, not the pool's
            conn.send(("error", (f"result could not be sent back: {exc!r}", _formatted(exc))))


def _formatted(exc: BaseException) -> str:
    """``exc`` formatted from the job's own frames down (``traceback`` is imported by the first job
    that fails)."""
    from conveyor._runtime.tracebacks import format_job_error

    return format_job_error(exc)


class _MainLoader:
    """Loads the node's main module into this worker the first time a job needs it."""

    def __init__(self, main: MainModule) -> None:
        self._main = main
        self._loaded = main is None

    def before_resolving(self, worker_name: str) -> None:
        if worker_name.startswith("__main__."):
            self.load_main()

    def import_module(self, name: str) -> None:
        if name == "__main__":
            self.load_main()
        else:
            importlib.import_module(name)

    def load_main(self) -> None:
        if self._loaded or self._main is None:
            return
        self._loaded = True
        import runpy

        kind, where = self._main
        # Run under another name, so its ``if __name__ == "__main__":`` block stays out (as with
        # multiprocessing's spawn), then stand in for this process's own ``__main__``.
        module = types.ModuleType("__mp_main__")
        sys.modules["__mp_main__"] = module
        if kind == "name":
            namespace = runpy.run_module(where, run_name="__mp_main__", alter_sys=True)
        else:
            namespace = runpy.run_path(where, run_name="__mp_main__")
        module.__dict__.update(namespace)
        sys.modules["__main__"] = sys.modules["__mp_main__"] = module


class _PipeLink:
    """A job's link in a worker process: its progress goes to the parent over the pipe (at most
    every ``PROGRESS_SPACING`` seconds, and once more before the result), where the node writes it.
    Waiting for signals needs the node: ``receive`` refuses, ``wait_for_signal`` works."""

    def __init__(self, conn: Channel) -> None:
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

    def now(self) -> datetime:
        # The node's clock stays in the node's process: a worker process reads the real time.
        return datetime.now(UTC)

    def run_on_loop(self, work: Any) -> Any:
        work.close()
        raise ConveyorError("receive_sync() cannot wait in a worker process; use wait_for_signal_sync")
