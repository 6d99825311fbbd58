"""A watchdog on every test's teardown: one that has run for minutes says what it waits for.

pytest-asyncio ends a test's event loop by cancelling the tasks left on it and waiting for them. A
task that swallows its cancellation and waits again holds that wait, and with it the worker and the
whole run, forever, with every thread idle. After ``LIMIT`` seconds the watchdog prints each unfinished
task with the chain of coroutines it is suspended in (to the worker's real stderr and to
``HANG_LOG``) and cancels them once more, so the run ends and the report names the culprit.
"""

from __future__ import annotations

import asyncio
import gc
import os
import sys
import threading
import time
import traceback
from collections.abc import Generator, Iterator
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

LIMIT = float(os.environ.get("CONVEYOR_TEARDOWN_LIMIT", "90"))
HANG_LOG = Path("/tmp/conveyor-teardown-hangs.log")


def _frames(coro: Any) -> Iterator[tuple[FrameType | None, Any]]:
    """The frames of a suspended coroutine chain, outermost first, with what the innermost awaits."""
    while coro is not None:
        frame = getattr(coro, "cr_frame", None) or getattr(coro, "gi_frame", None)
        awaited = getattr(coro, "cr_await", None) or getattr(coro, "gi_yieldfrom", None)
        yield frame, awaited
        coro = awaited if hasattr(awaited, "cr_frame") or hasattr(awaited, "gi_frame") else None


def _report(nodeid: str) -> None:
    lines = [f"\n[teardown watchdog] {nodeid}: teardown still running after {LIMIT:.0f} s"]
    for task in [obj for obj in gc.get_objects() if isinstance(obj, asyncio.Task) and not obj.done()]:
        lines.append(f"  unfinished {task!r} (cancelling: {task.cancelling()})")
        for frame, awaited in _frames(task.get_coro()):
            if frame is not None:
                lines.append(f"    {frame.f_code.co_filename}:{frame.f_lineno} in {frame.f_code.co_name}")
            if awaited is not None and not hasattr(awaited, "cr_frame"):
                lines.append(f"      awaiting {awaited!r}")
        loop = task.get_loop()
        if not loop.is_closed():
            loop.call_soon_threadsafe(task.cancel)
    for thread_id, frame in sys._current_frames().items():
        if thread_id != threading.get_ident():
            lines.append(f"  thread {thread_id}:")
            lines.extend("    " + line.rstrip() for line in traceback.format_stack(frame)[-6:])
    text = "\n".join(lines) + "\n"
    print(text, file=sys.__stderr__, flush=True)
    with HANG_LOG.open("a") as log:
        log.write(f"{time.strftime('%Y-%m-%d %H:%M:%S')} {text}")


class _Watchdog:
    """One thread per process that wakes when the running teardown's ``LIMIT`` is up: a
    ``threading.Timer`` per test started and stopped a thread for each of thousands of teardowns
    (about 0.4 ms of CPU each). It sleeps until the deadline of the teardown it last saw, then
    reports that one if it is still running, else waits for the running one's deadline."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        #: The running teardown: (node id, deadline on the monotonic clock), or None.
        self._running: tuple[str, float] | None = None
        self._idle = True  # the thread waits with no deadline (or has not started)
        self._thread: threading.Thread | None = None

    def begin(self, nodeid: str) -> None:
        with self._changed:
            self._running = (nodeid, time.monotonic() + LIMIT)
            if self._thread is None:
                self._thread = threading.Thread(target=self._watch, name="teardown-watchdog", daemon=True)
                self._thread.start()
            elif self._idle:  # else it wakes at an earlier deadline and looks again
                self._changed.notify()

    def end(self) -> None:
        with self._changed:
            self._running = None

    def _watch(self) -> None:
        while True:
            with self._changed:
                while True:
                    running = self._running
                    self._idle = running is None
                    if running is not None and running[1] <= time.monotonic():
                        self._running = None  # reported once, as the timer was
                        break
                    self._changed.wait(None if running is None else running[1] - time.monotonic())
            _report(running[0])


_WATCHDOG = _Watchdog()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Generator[None, None, None]:
    _WATCHDOG.begin(item.nodeid)
    try:
        yield
    finally:
        _WATCHDOG.end()
