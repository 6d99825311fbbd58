"""Running coroutines from synchronous code on a private event loop thread.

The ``*_sync`` methods of the app use this, so the whole async API has a blocking twin that works
from plain scripts, threads, and even from inside another running event loop.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from conveyor.errors import ConveyorError

T = TypeVar("T")


class Portal:
    """A daemon thread running its own event loop, started on first use."""

    def __init__(self, name: str = "conveyor-portal") -> None:
        self._name = name
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        #: Calls under way: a stop fails them, so that no caller waits for ever on a loop gone.
        self._pending: set[concurrent.futures.Future[Any]] = set()

    def _ensure_loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                thread = threading.Thread(target=loop.run_forever, name=self._name, daemon=True)
                thread.start()
                self._loop, self._thread = loop, thread
            return self._loop

    @property
    def loop(self) -> asyncio.AbstractEventLoop | None:
        """The portal's loop while it runs."""
        return self._loop

    def is_current(self) -> bool:
        """Is the caller running on the portal's own thread (inside a ``_sync`` twin)?"""
        thread = self._thread
        return thread is not None and threading.current_thread() is thread

    def call(self, fn: Callable[..., Awaitable[T]], *args: Any, **kwargs: Any) -> T:
        """Run ``fn(*args, **kwargs)`` on the portal loop and wait for its result."""
        loop = self._ensure_loop()
        if threading.current_thread() is self._thread:
            raise RuntimeError("a *_sync method was called from the portal's own loop")

        async def run() -> T:
            return await fn(*args, **kwargs)

        future = asyncio.run_coroutine_threadsafe(run(), loop)
        with self._lock:
            if self._loop is loop:
                self._pending.add(future)
            elif not future.done():
                # Stopped since the submission: the stop did not see this call, fail it here.
                future.set_exception(ConveyorError("the app was closed while this call ran"))
        try:
            return future.result()
        finally:
            with self._lock:
                self._pending.discard(future)

    def stop(self) -> None:
        with self._lock:
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
            pending, self._pending = self._pending, set()
        if loop is not None and thread is not None:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(timeout=5)
            loop.close()
        # A call from another thread (a thread job enqueueing while its app closes) would otherwise
        # wait for ever, and hold the interpreter at exit: it fails instead.
        for future in pending:
            if not future.done():
                future.set_exception(ConveyorError("the app was closed while this call ran"))
